"""Entry point. The options of ai-sandbox are declared once, in `options.OPTIONS`: `parse` reads the launch
(`ai-sandbox [OPTIONS] AGENT …`) from it, and `cli` generates the typer root from it for `--help`,
completion and the subcommands. The launch path never imports typer or rich (~90 ms together), nor argparse.
"""

from __future__ import annotations

import gc
import os
import sys

from ai_sandbox.errors import EXIT_INTERNAL, EXIT_USAGE, SandboxError, UsageError
from ai_sandbox.fs import shown
from ai_sandbox.options import OPTIONS, SUBCOMMANDS, network_mode


def _option_like(word: str) -> bool:
    """What argparse reads as an option rather than a value: a dash word, but not `-`, a negative number, or
    words with a blank in them."""
    if not word.startswith("-") or word == "-" or " " in word:
        return False
    digits = word[1:].replace(".", "", 1)
    return not (digits.isdecimal() and not word[1:].endswith("."))  # argparse's -\d+ and -\d*\.\d+


def parse(argv: list[str]) -> tuple[dict[str, str | bool], list[str], bool]:
    """(options given, keyed by long name; the agent's argv; whether it came after `--`). Parsing stops at
    the first word that is not an option of ours, or at `--`: nothing after it is ours. By hand rather than
    with argparse (~4 ms of imports with gettext and locale, on every launch); tests/unit/test_cli.py
    compares the two."""
    by_name = {n: o for o in OPTIONS for n in o.names}
    opts: dict[str, str | bool] = {}
    i = 0
    while i < len(argv):
        word = argv[i]
        if word == "--":
            return opts, argv[i + 1 :], True
        if not _option_like(word):
            break
        name, eq, given = word.partition("=") if word.startswith("--") else (word, "", "")
        option = by_name.get(name)
        if option is None:
            raise UsageError(f"unknown option {word!r}", "options of ai-sandbox come before the agent; see --help")
        if not option.metavar:
            if eq:
                raise UsageError(f"argument {name}: ignored explicit argument {given!r}", "see `ai-sandbox --help`")
            opts[option.name] = True
        elif eq:
            opts[option.name] = given
        elif i + 1 < len(argv) and not _option_like(argv[i + 1]) and argv[i + 1] != "--":
            i += 1
            opts[option.name] = argv[i]
        else:
            raise UsageError(f"argument {name}: expected one argument", "see `ai-sandbox --help`")
        i += 1
    rest = argv[i:]
    if rest and rest[0].startswith("-") and rest[0] != "-":
        # argparse took "-1" or "-x y" for a word; for us they are options
        raise UsageError(f"unknown option {rest[0]!r}", "options of ai-sandbox come before the agent; see --help")
    return opts, rest, False


def main(argv: list[str] | None = None) -> int:
    # A launch builds thousands of small objects and none of them is garbage before the exec: the collector's
    # passes over them cost ~4 ms of a small project's launch, more in a monorepo. Back on before anything
    # lives on (launch.run's watcher and proxy, a supervised session, the commands).
    gc.disable()
    try:
        return _main(argv)
    finally:
        gc.enable()


def _main(argv: list[str] | None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    debug = False  # ours only if given before the agent: the agent's own --debug is the agent's
    try:
        opts, rest, is_command = parse(argv)
        debug = bool(opts.get("--debug"))
        if any(o.to_typer and o.name in opts for o in OPTIONS):
            return _typer(argv)
        if "--version" in opts:
            from ai_sandbox import __version__

            print(f"ai-sandbox {__version__}")
            return 0
        if not rest:
            if is_command:
                raise UsageError("no command after `--`", "e.g. ai-sandbox -- bash")
            return _typer(argv)
        if not is_command and rest[0] in SUBCOMMANDS:
            return _typer(argv)
        from ai_sandbox.launch import Request

        req = Request(
            argv=rest,
            is_command=is_command,
            dry_run=bool(opts.get("--dry-run")),
            backend=opts.get("--backend") or None,  # type: ignore[arg-type]
            engine=opts.get("--engine") or None,  # type: ignore[arg-type]
            image=opts.get("--image") or None,  # type: ignore[arg-type]
            network=network_mode(opts.get("--network")),
            env=dict(os.environ),
        )
        if req.dry_run:
            from ai_sandbox import dryrun  # rich is for people, not for the launch path

            return dryrun.run(req)
        from ai_sandbox.launch import run

        return run(req)
    except SandboxError as e:
        print(f"ai-sandbox: error: {shown(str(e))}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        return 130
    except Exception as e:  # a bug: still one line, and the agent did not run
        if debug:
            raise
        print(
            f"ai-sandbox: internal error: {type(e).__name__}: {shown(str(e))} (rerun with --debug for details)",
            file=sys.stderr,
        )
        return EXIT_INTERNAL


def _typer(argv: list[str]) -> int:
    """Help, completion and the subcommands. The typer root re-reads the options before the subcommand
    (`ai-sandbox --backend docker explain`): cli generates it from the same OPTIONS."""
    gc.enable()
    from ai_sandbox.cli import app

    try:
        app(argv, prog_name="ai-sandbox", standalone_mode=True)
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        return EXIT_USAGE if code == 2 else code  # click's usage errors: our documented 64
    return 0
