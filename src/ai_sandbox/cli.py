"""The typer app: help, shell completion and (as they arrive) the subcommands. No policy logic here.

The launch itself (`ai-sandbox AGENT …`) is parsed in `main` without typer; the options below are the
same set, declared again so `--help` documents them.
"""

from __future__ import annotations

import typer

HELP = """Run an AI coding agent, or any command, in a sandbox that hides the secrets next to your code.

\b
  ai-sandbox claude --resume        the agent, sandboxed; its arguments untouched
  ai-sandbox -- bash -lc 'make test'  any command
  ai-sandbox --dry-run claude       show what would be hidden and the exact command; run nothing

AGENT is a profile name (claude, codex, aider, gemini, opencode) or any executable on PATH. Everything
after AGENT, or after `--`, goes to the agent verbatim. Hidden: git-ignored paths, git-crypt files and
key, `block` entries of .ai-sandbox.toml and of ~/.config/ai-sandbox/config.toml.
"""

app = typer.Typer(
    help=HELP,
    add_completion=True,
    no_args_is_help=False,
    context_settings={"help_option_names": ["-h", "--help"]},
    rich_markup_mode=None,
    subcommand_metavar="AGENT [ARGS]...",
)


@app.callback(invoke_without_command=True)
def root(
    ctx: typer.Context,
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the plan and the backend command; run nothing."),
    backend: str = typer.Option(None, "--backend", help="Sandbox backend: auto or firejail (config: backend)."),
    debug: bool = typer.Option(False, "--debug", help="Show a traceback on internal errors."),
    version: bool = typer.Option(False, "--version", help="Print the version and exit."),
) -> None:
    if ctx.invoked_subcommand is None:
        typer.echo("usage: ai-sandbox [OPTIONS] AGENT [ARGS]...   or   ai-sandbox [OPTIONS] -- COMMAND [ARGS]...")
        typer.echo("Try 'ai-sandbox --help' for help.")
        raise typer.Exit(64)
