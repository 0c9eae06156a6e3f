"""The launch path's import budget, counted rather than timed: what a real launch has imported when it execs the
backend (docker) or starts supervising it (firejail, bwrap).

Imports were a third of ai-sandbox's own launch time (issue 29: ~32 ms over a bare interpreter, of a ~110 ms
overhead on a small project; `make bench` shows the figures). A timed assertion would fail on a busy machine and
pass a slow regression, so this counts what a regression is made of: every module of ours the launch imports
is named here (a new one fails until it is added, with its cost measured by `make bench`), and none of the
standard library's modules that cost a millisecond or more and that the launch has no use for
may be imported: each one was on the launch path once, and was removed from it.
"""

from __future__ import annotations

import subprocess

import pytest

from tests.conftest import PY, Workspace, plant_env

pytestmark = pytest.mark.sandbox

# Everything of ours a launch imports, for either backend; the one a launch uses is added by name below.
OURS = {
    "ai_sandbox", "ai_sandbox.backends", "ai_sandbox.backends.check", "ai_sandbox.backends.choose",
    "ai_sandbox.backends.host", "ai_sandbox.backends.plan", "ai_sandbox.backends.registry", "ai_sandbox.commitgraph",
    "ai_sandbox.config", "ai_sandbox.objectstore",
    "ai_sandbox.errors", "ai_sandbox.fs", "ai_sandbox.git", "ai_sandbox.git.listing", "ai_sandbox.git.log",
    "ai_sandbox.git.repo", "ai_sandbox.git.run", "ai_sandbox.gitcommand", "ai_sandbox.gitsettings", "ai_sandbox.globs",
    "ai_sandbox.hiddenedits", "ai_sandbox.history",
    "ai_sandbox.idents", "ai_sandbox.launch", "ai_sandbox.layers", "ai_sandbox.layers.explicit",
    "ai_sandbox.layers.gitcrypt", "ai_sandbox.layers.ignored", "ai_sandbox.layers.outputs", "ai_sandbox.layers.tree",
    "ai_sandbox.layers.unlisted", "ai_sandbox.legacy", "ai_sandbox.main", "ai_sandbox.nested", "ai_sandbox.network",
    "ai_sandbox.options", "ai_sandbox.paths", "ai_sandbox.patterns", "ai_sandbox.policy", "ai_sandbox.policy.build",
    "ai_sandbox.policy.fit", "ai_sandbox.policy.model", "ai_sandbox.policy.resolve", "ai_sandbox.prefetch",
    "ai_sandbox.profiles",
    "ai_sandbox.records", "ai_sandbox.replacerefs", "ai_sandbox.secretscan", "ai_sandbox.skipworktree", "ai_sandbox.sockets", "ai_sandbox.spawn",
    "ai_sandbox.state", "ai_sandbox.tools", "ai_sandbox.unwritten", "ai_sandbox.verify", "ai_sandbox.watch",
    "ai_sandbox.writes",
}  # fmt: skip
BACKEND_MODULES = {
    "firejail": {"ai_sandbox.backends.firejail", "ai_sandbox.supervise"},
    "bwrap": {"ai_sandbox.backends.bwrap", "ai_sandbox.supervise"},
}
# Measured with `python -X importtime` (3.11, on the bench machine): each costs a millisecond or more with what it
# brings, and each was on the launch path before: argparse (with gettext: ~4 ms, main.parse reads the options
# by hand), hashlib (OpenSSL: 3.5 ms, paths.sha256), shutil (with bz2 and lzma: ~3 ms), socket and threading's
# proxy (~4 ms, imported in the proxy's child only), typing, dataclasses and inspect (~20 ms, records.py), and
# the command's libraries (typer, click, rich, pathspec, GitPython), and subprocess with threading, locale and
# selectors (~3 ms: git runs through spawn.py).
HEAVY = {
    "argparse", "gettext", "hashlib", "_hashlib", "shutil", "bz2", "lzma", "socket", "typing", "dataclasses",
    "inspect", "ast", "tokenize", "pathlib", "tempfile", "random", "datetime", "uuid", "ssl", "ctypes", "logging",
    "asyncio", "concurrent", "multiprocessing", "importlib.metadata", "importlib.util", "email", "http", "urllib",
    "textwrap", "pprint", "string", "statistics", "decimal", "zipfile", "glob", "typer", "click", "rich",
    "pathspec", "git", "ai_sandbox.proxy", "ai_sandbox.cli", "ai_sandbox.report", "ai_sandbox.explain",
    "subprocess", "threading", "selectors", "locale",
}  # fmt: skip
# The standard library's modules a launch imports beyond a bare interpreter's (36 with Python 3.11: re, enum,
# json, signal and what they bring; 48 while git ran through subprocess); a newer Python splits or joins a few.
STDLIB_AT_MOST = 46

# Run in the launcher's interpreter: a real `ai-sandbox --backend B -- true`, which stops where the backend
# would start, and writes down what the process imported (to a file: the watcher and the proxy keep stdout).
PROBE = r"""
import sys
base = set(sys.modules)
import os
from ai_sandbox import launch, main
out = sys.argv.pop(1)
def stop(*args, **kwargs):
    with open(out, "w") as f:
        f.write("\n".join(sorted(set(sys.modules) - base)))
    os._exit(0)
from ai_sandbox import supervise  # the launch imports it too, for a supervised backend
supervise.run = stop
sys.exit(main.main(sys.argv[1:]))
"""


def _imported(ws: Workspace, probe: str, backend: str) -> set[str]:
    """The modules probe (PROBE, END_PROBE) names in its file, after a real `ai-sandbox --backend backend -- true`."""
    out = ws.base / "imported.txt"
    proc = subprocess.run(
        [PY, "-c", probe, str(out), "--backend", backend, "--", "true"],
        cwd=ws.repo, env=ws.env(), capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert proc.returncode == 0 and out.exists(), proc.stderr
    return set(out.read_text().split())


@pytest.mark.backends("firejail", "bwrap")
def test_the_launch_imports_only_what_it_did(ws_self: Workspace, sandbox_backend: str) -> None:
    plant_env(ws_self)  # a hidden file: the record, the watcher, the launch check and the proxy all take part
    imported = _imported(ws_self, PROBE, sandbox_backend)
    ours = {m for m in imported if m.split(".")[0] == "ai_sandbox"}
    expected = OURS | BACKEND_MODULES[sandbox_backend]
    assert ours - expected == set(), "new on the launch path: measure it with `make bench`, then name it in OURS"
    assert {"ai_sandbox.launch", "ai_sandbox.verify", "ai_sandbox.watch"} <= ours  # the probe saw a real launch
    assert imported & HEAVY == set()
    stdlib = imported - ours
    assert {"json", "re"} <= stdlib and len(stdlib) <= STDLIB_AT_MOST, (len(stdlib), sorted(stdlib))


# The launch check runs in every sandbox between the backend's start and the agent's (`python -I -S`, verify.py):
# what it imports is time on every launch, in series with both. Beyond `os`, which it needs, it may load two C
# modules and nothing of the standard library's Python: _socket, to hand the sandbox's listening sockets to the
# proxy, and _ctypes, for bwrap's mounts and Landlock (`ctypes` itself is ~4 ms of Python; `array` pulled in
# collections, ~2.5 ms; `signal` pulled in enum, ~3 ms: each was in the check once).
CHECK_MAY_IMPORT = {"_socket", "_ctypes"}

# Run in the sandbox in place of the check's own program: the same bytecode, with the exec of the agent replaced
# by a line naming what the check imported (stdout: the sandbox's, which the probe's caller reads).
CHECK_WRAP = r"""
import marshal, os, sys
base = set(sys.modules)
run = sys.argv.pop(1)
sys.argv[0] = run
with open(run, "rb") as f:
    data = f.read()
code = compile(data, run, "exec") if run.endswith(".py") else marshal.loads(data[16:])
def stop(*args):
    print("CHECK-IMPORTS:", *sorted(set(sys.modules) - base), flush=True)
    os._exit(0)
os.execve = stop
exec(code, {"__name__": "__main__"})
"""

# Run in the launcher's interpreter: a real launch, whose sandbox the launch starts and supervises, with the launch
# check's program wrapped (CHECK_WRAP).
CHECK_PROBE = r"""
import sys
from ai_sandbox import main, supervise
from ai_sandbox.backends.plan import Checked
wrap = sys.argv.pop(1)
def wrapped(argv):
    i = argv.index("-S") + 1  # python -I -S PROGRAM SPEC: the first -S is the check's
    return [*argv[:i], "-c", wrap, *argv[i:]]
supervised = supervise.run
def run(plan, keep=None, started=None):
    c = plan.check
    plan.check = Checked(tuple(wrapped(list(c.argv))), c.path, c.spec, c.compiled)
    return supervised(plan, keep, started)
supervise.run = run
sys.exit(main.main(sys.argv[1:]))
"""


@pytest.mark.backends("firejail", "bwrap")
@pytest.mark.parametrize("network", ["allowlist", "on"])
def test_the_launch_check_imports_only_what_it_needs(ws_self: Workspace, sandbox_backend: str, network: str) -> None:
    plant_env(ws_self)  # a hidden file: the check looks at its mask (bwrap's check mounts it)
    proc = subprocess.run(
        [PY, "-c", CHECK_PROBE, CHECK_WRAP, "--backend", sandbox_backend, "--network", network, "--", "true"],
        cwd=ws_self.repo, env=ws_self.env(), capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    lines = [line for line in proc.stdout.splitlines() if line.startswith("CHECK-IMPORTS:")]
    assert proc.returncode == 0 and len(lines) == 1, (proc.returncode, proc.stdout, proc.stderr)
    imported = set(lines[0].split()[1:])
    assert imported <= CHECK_MAY_IMPORT, sorted(imported - CHECK_MAY_IMPORT)
    if network == "allowlist":
        assert "_socket" in imported  # the probe saw the check hand the network over


# Run in the launcher's interpreter: a real launch and session (`true`), with what the process imports from the
# sandbox's exit to its own (the session's end: the marks, the settings, the hidden edits, the object files) named
# in a file as it exits.
END_PROBE = r"""
import os, sys
from ai_sandbox import main, supervise
out = sys.argv.pop(1)
supervised, leave = supervise.run, os._exit
def run(plan, keep=None, started=None):
    status = supervised(plan, keep, started)
    base = set(sys.modules)
    def stop(code):
        with open(out, "w") as f:
            f.write("\n".join(sorted(set(sys.modules) - base)))
        leave(code)
    os._exit = stop  # after the watcher's and the proxy's forks: theirs exit as they did
    return status
supervise.run = run
sys.exit(main.main(sys.argv[1:]))
"""


@pytest.mark.backends("firejail", "bwrap")
def test_the_session_end_imports_nothing_heavy(ws_self: Workspace, sandbox_backend: str) -> None:
    """The end runs before the user's prompt comes back, on every launch: hashlib (OpenSSL, ~3.5 ms) came in there
    with indexcache, though it hashes only an index the session rewrote."""
    plant_env(ws_self)  # a hidden file: the end looks at the marks, the settings and the index
    imported = _imported(ws_self, END_PROBE, sandbox_backend)
    assert "ai_sandbox.indexcache" in imported  # the probe saw the end (hiddenedits.clear imports it)
    assert imported & HEAVY == set(), sorted(imported & HEAVY)
