"""The `ai-sandbox` command: git's first answers asked (prefetch.py), then the command run (main.py), whose
imports take about as long as git's walk of the project."""

from __future__ import annotations

import os
import sys


def main() -> int:
    from ai_sandbox import prefetch

    try:
        try:
            prefetch.start(sys.argv[1:])
            from ai_sandbox.main import main as run

            return run()
        finally:
            prefetch.discard()  # what the command did not take over (it stopped before it asked git)
    except KeyboardInterrupt:  # Ctrl-C while git answers or the command imports: no traceback, as main() does
        return 130
    except prefetch.Terminated:  # git reaped: now end as SIGTERM would have
        import signal

        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)
        return 128 + signal.SIGTERM
