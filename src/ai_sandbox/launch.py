"""The launch path: compute the policy, build the backend command, exec it.

This runs before every agent start, so it imports only what it needs (no typer, no rich, no GitPython)
and replaces itself with the backend: the terminal, signals and exit status belong to the agent.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field

from ai_sandbox import config, layers, profiles, project
from ai_sandbox.backends import Backend, LaunchPlan, select
from ai_sandbox.errors import NotFoundError
from ai_sandbox.patterns import Pattern, PatternSet
from ai_sandbox.policy import Policy, build


@dataclass
class Request:
    argv: list[str]  # the agent (a profile name or a command) and its arguments, verbatim
    is_command: bool = False  # given after `--`: never looked up as a profile
    dry_run: bool = False
    backend: str | None = None
    cwd: str = ""
    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))


@dataclass
class Prepared:
    policy: Policy
    backend: Backend
    plan: LaunchPlan
    profile: profiles.Profile


def resolve_command(name: str, env: Mapping[str, str]) -> str:
    if "/" in name:
        if os.path.isfile(name) and os.access(name, os.X_OK):
            return os.path.abspath(name)
        raise NotFoundError(f"{name}: no such executable", "check the path")
    found = shutil.which(name, path=env.get("PATH", os.defpath))
    if found is None:
        raise NotFoundError(
            f"{name}: not found on PATH",
            "install it, or name a command after `--` (see `ai-sandbox --help`)",
        )
    return os.path.abspath(found)


def allowlist(user_cfg: config.UserConfig, profile: profiles.Profile, project_cfg: config.ProjectConfig) -> PatternSet:
    """Every pattern that keeps an ignored path readable; a later source names the rule in reports."""
    pats: list[Pattern] = []
    if user_cfg.allow_dependencies:
        pats += [Pattern(p, "dependency directory") for p in profiles.DEPENDENCY_DIRS]
    pats += [Pattern(p, "built-in tool allowlist") for p in profiles.TOOL_ALLOW]
    pats += profile.allow + user_cfg.allow + project_cfg.allow
    return PatternSet(pats)


def prepare(req: Request) -> Prepared:
    env = req.env
    cwd = os.path.realpath(req.cwd or os.getcwd())
    user_cfg = config.load_user(env)
    backend = select(req.backend or user_cfg.backend)
    profile = None if req.is_command else profiles.find(req.argv[0], config.config_home(env))
    if profile is None:
        profile = profiles.generic(req.argv[0])
    command = [resolve_command(profile.executable, env), *req.argv[1:]]

    repo = project.find_repo(cwd)
    warnings: list[str] = []
    if repo is None:
        root = cwd
        project_cfg = config.ProjectConfig()
        warnings.append(f"not inside a git work tree: {root} is the project root and only your global blocks apply")
    else:
        root = repo.root
        project_cfg = config.load_project(root)
        config.check_project_allow(project_cfg, user_cfg, root)
    collected = layers.collect(root, repo, user_cfg, project_cfg)
    policy = build(
        root,
        collected.entries,
        allowlist(user_cfg, profile, project_cfg),
        in_git=repo is not None,
        home=os.path.realpath(os.path.expanduser("~")),
        express=backend.unexpressible,
    )
    policy.warnings = warnings + project_cfg.warnings + collected.warnings + policy.warnings
    policy.config_files = ([user_cfg.path] if user_cfg.exists else []) + project_cfg.files
    if (m := policy.hidden(cwd)) is not None:
        policy.warnings.append(
            f"the current directory is hidden ({m.reason}); the agent will start in a masked directory"
        )
    plan = backend.plan(policy, command, env)
    return Prepared(policy, backend, plan, profile)


def write_files(files: Mapping[str, bytes]) -> None:
    """Generated files are content-addressed: reuse one that holds exactly these bytes, else (re)write it."""
    for path, content in files.items():
        try:
            with open(path, "rb") as f:
                if f.read() == content:
                    continue
        except OSError:
            pass
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        tmp = f"{path}.{os.getpid()}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(content)
        os.replace(tmp, path)


def run(req: Request) -> int:
    prepared = prepare(req)
    if req.dry_run:
        from ai_sandbox import report  # noqa: PLC0415 — rich is for people, not for the launch path

        report.dry_run(prepared, req)
        return 0
    err = prepared.backend.unavailable()
    if err is not None:
        raise err
    for w in prepared.policy.warnings:
        print(f"ai-sandbox: warning: {w}", file=sys.stderr)
    write_files(prepared.plan.files)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(prepared.plan.argv[0], prepared.plan.argv, prepared.plan.env)
    return 127  # not reached
