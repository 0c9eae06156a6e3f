"""Entry point. `ai-sandbox AGENT …` is parsed here by hand so the launch path never imports typer or
rich (~90 ms together); help and the subcommands go to the typer app in `cli`.
"""

from __future__ import annotations

import os
import sys

from ai_sandbox.errors import EXIT_INTERNAL, EXIT_USAGE, SandboxError, UsageError

# Options of ai-sandbox itself; they come before the agent. cli.py documents the same set for --help,
# and a test keeps the two in step.
FLAGS = {"--dry-run", "--debug"}
VALUED = {"--backend", "--engine", "--image"}
HELP = {"-h", "--help"}
SUBCOMMANDS = {"explain", "init", "doctor", "alias", "profiles", "accept"}


def parse(argv: list[str]) -> tuple[dict[str, str | bool], list[str], bool]:
    """(options, the agent's argv, whether it came after `--`). Nothing after the agent is ours."""
    opts: dict[str, str | bool] = {}
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            return opts, argv[i + 1 :], True
        if not arg.startswith("-") or arg == "-":
            return opts, argv[i:], False
        name, eq, value = arg.partition("=")
        if name in FLAGS and not eq:
            opts[name] = True
        elif name in VALUED:
            if not eq:
                i += 1
                if i >= len(argv):
                    raise UsageError(f"{name} needs a value", "see `ai-sandbox --help`")
                value = argv[i]
            opts[name] = value
        elif arg in HELP or arg == "--version" or arg in ("--install-completion", "--show-completion"):
            opts[arg] = True
        else:
            raise UsageError(f"unknown option {arg!r}", "options of ai-sandbox come before the agent; see --help")
        i += 1
    return opts, [], False


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    debug = "--debug" in argv[: argv.index("--")] if "--" in argv else "--debug" in argv
    try:
        opts, rest, is_command = parse(argv)
        if any(k in opts for k in HELP) or "--install-completion" in opts or "--show-completion" in opts:
            return _typer(argv)
        if "--version" in opts:
            from ai_sandbox import __version__  # noqa: PLC0415

            print(f"ai-sandbox {__version__}")
            return 0
        if not rest:
            if is_command:
                raise UsageError("no command after `--`", "e.g. ai-sandbox -- bash")
            return _typer(argv)
        if not is_command and rest[0] in SUBCOMMANDS:
            return _typer(argv)
        from ai_sandbox.launch import Request, run  # noqa: PLC0415

        req = Request(
            argv=rest,
            is_command=is_command,
            dry_run=bool(opts.get("--dry-run")),
            backend=opts.get("--backend") or None,  # type: ignore[arg-type]
            engine=opts.get("--engine") or None,  # type: ignore[arg-type]
            image=opts.get("--image") or None,  # type: ignore[arg-type]
            env=dict(os.environ),
        )
        return run(req)
    except SandboxError as e:
        print(f"ai-sandbox: error: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        return 130
    except Exception as e:  # a bug: still one line, and the agent did not run
        if debug:
            raise
        print(
            f"ai-sandbox: internal error: {type(e).__name__}: {e} (rerun with --debug for details)",
            file=sys.stderr,
        )
        return EXIT_INTERNAL


def _typer(argv: list[str]) -> int:
    from ai_sandbox.cli import app  # noqa: PLC0415

    try:
        app(argv, prog_name="ai-sandbox", standalone_mode=True)
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        return EXIT_USAGE if code == 2 else code  # click's usage errors: our documented 64
    return 0
