"""Entry point. The options of ai-sandbox are declared once, in `options.OPTIONS`: argparse parses the launch
(`ai-sandbox [OPTIONS] AGENT …`) from it, and `cli` generates the typer root from it for `--help`,
completion and the subcommands. The launch path never imports typer or rich (~90 ms together); argparse
costs ~2 ms.
"""

from __future__ import annotations

import argparse
import os
import sys

from ai_sandbox.errors import EXIT_INTERNAL, EXIT_USAGE, SandboxError, UsageError
from ai_sandbox.options import OPTIONS, SUBCOMMANDS, network_mode


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]  # raises, never exits
        raise UsageError(message, "see `ai-sandbox --help`")


def parser() -> argparse.ArgumentParser:
    """The launch parser: OPTIONS, then the agent and everything after it, verbatim (REMAINDER)."""
    p = _Parser(prog="ai-sandbox", add_help=False, allow_abbrev=False)
    for o in OPTIONS:
        if o.metavar:
            p.add_argument(*o.names, dest=o.dest, metavar=o.metavar, help=o.help)
        else:
            p.add_argument(*o.names, dest=o.dest, action="store_true", help=o.help)
    p.add_argument("agent", nargs=argparse.REMAINDER)
    return p


def parse(argv: list[str]) -> tuple[dict[str, str | bool], list[str], bool]:
    """(options given, keyed by long name; the agent's argv; whether it came after `--`). Parsing stops at
    the first word that is not an option of ours, or at `--`: nothing after it is ours."""
    ns, unknown = parser().parse_known_args(argv)
    rest: list[str] = ns.agent
    is_command = rest[:1] == ["--"]  # REMAINDER keeps the `--` that ended our options
    if is_command:
        rest = rest[1:]
    elif rest and rest[0].startswith("-") and rest[0] != "-":
        unknown.insert(0, rest[0])  # argparse takes "-1" or "-x y" for a word; for us they are options
    if unknown:
        raise UsageError(f"unknown option {unknown[0]!r}", "options of ai-sandbox come before the agent; see --help")
    opts = {o.name: v for o in OPTIONS if (v := getattr(ns, o.dest)) not in (None, False)}
    return opts, rest, is_command


def main(argv: list[str] | None = None) -> int:
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
    """Help, completion and the subcommands. The typer root re-reads the options before the subcommand
    (`ai-sandbox --backend docker explain`): cli generates it from the same OPTIONS."""
    from ai_sandbox.cli import app

    try:
        app(argv, prog_name="ai-sandbox", standalone_mode=True)
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        return EXIT_USAGE if code == 2 else code  # click's usage errors: our documented 64
    return 0
