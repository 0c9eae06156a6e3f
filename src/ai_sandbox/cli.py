"""The typer app: help, shell completion and (as they arrive) the subcommands. No policy logic here.

The launch itself (`ai-sandbox AGENT …`) is parsed in `main` without typer. The root's options are
generated from `options.OPTIONS`, the one declaration both parsers read.
"""

from __future__ import annotations

import inspect
import os
import sys

import typer

from ai_sandbox.options import OPTIONS, network_mode

HELP = """Run an AI coding agent, or any command, in a sandbox that hides the secrets next to your code.

\b
  ai-sandbox claude --resume        the agent, sandboxed; its arguments untouched
  ai-sandbox -- bash -lc 'make test'  any command
  ai-sandbox --dry-run claude       show what would be hidden and the exact command; run nothing

AGENT is a profile name (claude, codex, aider, gemini, opencode) or any executable on PATH. Everything
after AGENT, or after `--`, goes to the agent verbatim. Hidden: git-ignored paths, git-crypt files and
key, `block` entries of .ai-sandbox.toml and of ~/.config/ai-sandbox/config.toml.

A program named like one of the commands below runs with `ai-sandbox -- NAME`.
"""

app = typer.Typer(
    help=HELP,
    add_completion=True,
    no_args_is_help=False,
    context_settings={"help_option_names": [n for o in OPTIONS if o.name == "--help" for n in o.names]},
    rich_markup_mode=None,
    subcommand_metavar="AGENT [ARGS]...",
    pretty_exceptions_enable=False,
)


def root(ctx: typer.Context, **_options: object) -> None:
    """The root: its options (a signature generated from options.OPTIONS) are for --help, completion and
    `_root_opts`; a launch never comes here."""
    if ctx.invoked_subcommand is None:
        typer.echo("usage: ai-sandbox [OPTIONS] AGENT [ARGS]...   or   ai-sandbox [OPTIONS] -- COMMAND [ARGS]...")
        typer.echo("Try 'ai-sandbox --help' for help.")
        raise typer.Exit(64)


# typer reads a callback's parameters from inspect.signature, which honours __signature__: one typer
# option per entry of OPTIONS, so the launch parser and --help cannot drift apart. Help and completion
# are typer's own (help_option_names above, add_completion).
root.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
    [
        inspect.Parameter("ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=typer.Context),
        *(
            inspect.Parameter(
                o.dest,
                inspect.Parameter.KEYWORD_ONLY,
                annotation=str if o.metavar else bool,
                default=typer.Option(None if o.metavar else False, *o.names, metavar=o.metavar or None, help=o.help),
            )
            for o in OPTIONS
            if not o.to_typer
        ),
    ]
)
app.callback(invoke_without_command=True)(root)


def _root_opts(ctx: typer.Context) -> dict[str, str | None]:
    params = ctx.parent.params if ctx.parent else {}
    return {k: params.get(k) or None for k in ("backend", "engine", "image", "network")}


@app.command()
def explain(
    ctx: typer.Context,
    paths: list[str] | None = typer.Argument(
        None, metavar="PATH", help="Paths to judge, relative to the current directory."
    ),
    as_json: bool = typer.Option(False, "--json", help="The same as stable JSON (documented in docs/usage.md)."),
    agent: str = typer.Option(None, "--agent", help="Explain the policy for this agent's profile (its allowlist)."),
    history: bool = typer.Option(
        False, "--history", help="Only the hidden content git still holds: where, since when, how to remove it."
    ),
    secrets: bool = typer.Option(
        False, "--secrets", help="Scan the files the agent can read (and, with --agent, its home state) for secrets."
    ),
) -> None:
    """What the sandbox hides here and why, what stays readable, warnings, and the backend command."""
    import json

    from ai_sandbox import explain as explain_mod
    from ai_sandbox import nested, report
    from ai_sandbox.launch import Request, prepare

    cwd = os.path.realpath(os.getcwd())
    opts = _root_opts(ctx)
    req = Request(
        [agent or "AGENT"], agent is None, cwd=cwd, env=dict(os.environ),
        backend=opts["backend"], engine=opts["engine"], image=opts["image"], network=network_mode(opts["network"]),
    )  # fmt: skip
    prepared = prepare(req, detail=True, resolve=False, assume=True)
    table = nested.mounts()
    unenforced = nested.unenforced(prepared.policy, table) if nested.inside_sandbox(table) else None
    doc = explain_mod.document(prepared, paths or None, cwd, unenforced)
    if agent is None:
        doc["agent"] = None
    if secrets:
        from ai_sandbox import secretscan

        home = prepared.profile.home if agent is not None else []
        doc["secrets"] = explain_mod.secrets(secretscan.run(prepared.env, prepared.policy, prepared.trees, home))
    if as_json:
        sys.stdout.write(json.dumps(doc, indent=2, ensure_ascii=True) + "\n")
    elif history or secrets:
        report.findings(doc, history=history, secrets=secrets)
    else:
        report.explain(doc)


@app.command()
def init(
    directory: str = typer.Argument(".", metavar="DIR", help="A directory in the repository (default: here)."),
    force: bool = typer.Option(False, "--force", help="Rewrite an existing .ai-sandbox.toml, keeping its entries."),
) -> None:
    """Write a commented .ai-sandbox.toml at the git root, with suggestions drawn from the repository."""
    from ai_sandbox import template

    d, target = template.draft(directory, dict(os.environ), force)
    template.write(target, template.render(d), force)
    typer.echo(f"wrote {target}")
    done = []
    if d.block or d.allow:
        kept = " and ".join(d.migrated_from)
        done.append(
            f"kept from {kept}: {template.entries(len(d.block))} of block, {template.entries(len(d.allow))} of allow"
        )
    if d.suggest:
        done.append(f"{len(d.suggest)} file(s) that look like secrets suggested, commented out")
    for line in done + d.notes:
        typer.echo(f"  {line}")
    if ".ai-sandbox" in d.migrated_from:
        if d.unmigrated:
            typer.echo(
                f"  {template.entries(len(d.unmigrated))} of .ai-sandbox without a project-file form: see the file's header"
            )
        else:
            typer.echo("  .ai-sandbox is migrated; both files apply until you delete it")
    typer.echo("review it, then run `ai-sandbox explain`")


@app.command()
def doctor(ctx: typer.Context) -> None:
    """Check that the sandbox works here: backend, git, git-crypt, namespaces, configs, this project's policy."""
    from ai_sandbox import doctor as doctor_mod
    from ai_sandbox import report

    results = doctor_mod.run_all(dict(os.environ), _root_opts(ctx), os.path.realpath(os.getcwd()))
    report.checks(results)
    failed = [c for c in results if c.status == "fail"]
    if failed:
        typer.echo(f"{len(failed)} problem(s): ai-sandbox cannot run agents here until they are fixed", err=True)
        raise typer.Exit(69)


@app.command()
def alias(
    shell: str = typer.Option(None, "--shell", help="bash, zsh or fish (default: from $SHELL)."),
    all_: bool = typer.Option(False, "--all", help="Wrap every known agent, installed or not."),
) -> None:
    """Print shell functions so `claude` runs `ai-sandbox claude`: eval "$(ai-sandbox alias)" in your rc file."""
    from ai_sandbox import aliases, paths, profiles
    from ai_sandbox.errors import NotFoundError, UsageError
    from ai_sandbox.launch import resolve_command

    env = dict(os.environ)
    shell = shell or aliases.detect_shell(env)
    if shell not in aliases.SHELLS:
        raise UsageError(f"unknown shell {shell!r}", f"use one of: {', '.join(aliases.SHELLS)}")
    names = []
    for p in profiles.available(paths.config_home(env)):
        if not all_:
            try:
                resolve_command(p.executable, env)
            except NotFoundError:
                continue
        names.append(p.name)
    if not names:
        typer.echo("# ai-sandbox: no known agent is installed; `ai-sandbox alias --all` wraps them anyway")
        return
    typer.echo(aliases.render(names, shell, aliases.launcher()), nl=False)


@app.command()
def accept(
    ctx: typer.Context,
    directory: str = typer.Argument(".", metavar="DIR", help="A directory in the project (default: here)."),
) -> None:
    """Accept that the rules changed: forget what earlier launches hid here, so the next one may show it."""
    from ai_sandbox import state
    from ai_sandbox.errors import UsageError
    from ai_sandbox.launch import Request, prepare

    real = os.path.realpath(directory)
    if not os.path.isdir(real):
        raise UsageError(f"{directory}: no such directory", "name a directory in the project")
    opts = _root_opts(ctx)
    env = dict(os.environ)
    req = Request(
        ["AGENT"], True, cwd=real, env=env, backend=opts["backend"], engine=opts["engine"], image=opts["image"]
    )
    policy = prepare(req, resolve=False, assume=True).policy  # what a launch from there would show
    root = policy.root
    n = state.forget(env, root, real, state.from_other_roots(policy, env, real))
    what = "forgot what the last launch hid" if n else "nothing was recorded"
    typer.echo(f"{what} in {root}; the next launch records anew")
    typer.echo("check first with `ai-sandbox explain` that what is now readable should be")


@app.command("profiles")
def list_profiles() -> None:
    """The known agents: where each profile comes from, and which agents are installed here."""
    from ai_sandbox import paths, profiles, report
    from ai_sandbox.errors import NotFoundError
    from ai_sandbox.launch import resolve_command

    env = dict(os.environ)
    rows = []
    for p in profiles.available(paths.config_home(env)):
        try:
            found = resolve_command(p.executable, env)
        except NotFoundError:
            found = None
        source = "built-in" if p.path.startswith(paths.shipped_dir()) else p.path
        rows.append((p.name, p.description, found, source))
    report.profiles(rows)
