"""`ai-sandbox init`: a commented `.ai-sandbox.toml` for one repository, with suggestions drawn from it.

Values are written by tomli-w so any name survives quoting; the comments around them are the manual.
Suggestions stay commented: hiding a tracked file is the user's decision, made by deleting one `#`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import tomli_w

from ai_sandbox import config, profiles
from ai_sandbox.errors import CantCreateError, ConfigError, UsageError
from ai_sandbox.fs import below, write_atomic
from ai_sandbox.patterns import DEPENDENCY, OUTPUT
from ai_sandbox.policy import IGNORED

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ai_sandbox.launch import Prepared

_LISTED = 20  # ignored directories named in the header before "and N more"


@dataclass
class Draft:
    root: str
    block: list[str] = field(default_factory=list)  # active entries (migrated or kept)
    allow: list[str] = field(default_factory=list)
    suggest: list[str] = field(default_factory=list)  # commented block suggestions
    why: dict[str, str] = field(default_factory=dict)  # suggestion -> what the secret scan found in it
    ignored: list[str] = field(default_factory=list)  # hidden by git's rules, for the header
    dependencies: list[str] = field(default_factory=list)  # ignored, kept readable as dependencies
    outputs: list[str] = field(default_factory=list)  # ignored, kept readable and writable as build outputs
    migrated_from: list[str] = field(default_factory=list)
    unmigrated: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def looks_secret(rel: str) -> bool:
    return profiles.secret_name(os.path.basename(rel)) is not None


def draft(directory: str, env: dict[str, str], force: bool) -> tuple[Draft, str]:
    """The draft for the repository holding directory, and the file it goes to."""
    from ai_sandbox import git
    from ai_sandbox.launch import Request, prepare

    real = os.path.realpath(directory)
    if not os.path.isdir(real):
        raise UsageError(f"{directory}: no such directory", "name the project directory, or run init inside it")
    repo = git.find_repo(real)
    if repo is None:
        raise UsageError(
            f"{real} is not inside a git work tree",
            "ai-sandbox reads .ai-sandbox.toml only at a git root; run `git init` first, or use your global config",
        )
    target = os.path.join(repo.root, config.PROJECT_FILE)
    if os.path.lexists(target) and not force:
        raise CantCreateError(
            f"{target} already exists", "edit it, or run `ai-sandbox init --force` to rewrite it (its entries are kept)"
        )
    d = Draft(root=repo.root)
    if os.path.lexists(target):
        _keep_existing(d, target)
    if os.path.isfile(os.path.join(repo.root, config.LEGACY_FILE)):
        block, allow, left = config.legacy_for_toml(repo.root)
        d.block += [b for b in block if b not in d.block]
        d.allow += [a for a in allow if a not in d.allow]
        d.unmigrated = left
        d.migrated_from.append(config.LEGACY_FILE)
    # The policy as it stands without this file: what is hidden already, what is not.
    prepared = prepare(Request(argv=["true"], is_command=True, cwd=repo.root, env=env), resolve=False, assume=True)
    policy = prepared.policy
    for m in policy.masks:
        if m.layer == IGNORED and below(m.path, repo.root):
            d.ignored.append(os.path.relpath(m.path, repo.root) + ("/" if m.is_dir else ""))
    for k in policy.kept:
        listing = {DEPENDENCY: d.dependencies, OUTPUT: d.outputs}.get(k.origin)
        if listing is not None:
            listing.append(os.path.relpath(k.path, repo.root) + ("/" if k.is_dir else ""))
    seen = set(d.block)
    for tree in prepared.trees:
        files = list(tree.scan.tracked) + [rel for rel, is_dir in tree.scan.untracked if not is_dir]
        for rel in sorted(files):
            full = tree.prefix + rel
            if not looks_secret(full) or policy.hidden(os.path.join(repo.root, full)) is not None:
                continue
            entry = "/" + full
            if entry not in seen:
                seen.add(entry)
                d.suggest.append(entry)
    _scanned(d, prepared, seen)
    return d, target


def _scanned(d: Draft, prepared: Prepared, seen: set[str]) -> None:
    """Files whose content holds a secret (secretscan.py), whatever their name."""
    from ai_sandbox import secretscan

    result = secretscan.run(prepared.env, prepared.policy, prepared.trees)
    for f in result.findings:
        entry = "/" + os.path.relpath(f.path, d.root)
        note = f"line {f.line}: {', '.join(f.kinds)}"
        if entry in d.why:
            d.why[entry] += f"; {note}"
            continue
        d.why[entry] = note
        if entry not in seen:
            seen.add(entry)
            d.suggest.append(entry)


def _keep_existing(d: Draft, target: str) -> None:
    try:
        data, text = config.load_toml(target)
        d.block += [v for v, _ in config.strings(data, "block", target, text)]
        d.allow += [v for v, _ in config.strings(data, "allow", target, text)]
        d.migrated_from.append(config.PROJECT_FILE)
    except ConfigError as e:
        d.notes.append(f"the existing file did not parse ({e.message}); its entries were not kept")


def _toml(value: str) -> str | None:
    """A TOML string literal by tomli-w; None for names TOML cannot hold (bytes that are not UTF-8)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return None
    return tomli_w.dumps({"v": value})[4:].rstrip("\n")


def _array(key: str, active: list[str], commented: list[str], why: dict[str, str] | None = None) -> list[str]:
    if not active and not commented:
        return [f"{key} = []"]
    why = why or {}
    lines = [f"{key} = ["]
    lines += [f"    {_toml(v)}," for v in active if _toml(v) is not None]
    lines += [
        f"    # {_toml(v)}," + (f"  # secret scan: {why[v]}" if v in why else "")
        for v in commented
        if _toml(v) is not None
    ]
    lines.append("]")
    return lines


def _listing(items: list[str]) -> list[str]:
    shown = items[:_LISTED]
    more = f" … and {len(items) - _LISTED} more" if len(items) > _LISTED else ""
    out, line = [], "#  "
    for item in shown:
        part = " " + (item if item.isprintable() else repr(item))
        if len(line) + len(part) > 100:
            out.append(line)
            line = "#  "
        line += part
    out.append(line + more)
    return out


def entries(n: int) -> str:
    return f"{n} entry" if n == 1 else f"{n} entries"


def render(d: Draft) -> str:
    lines = [
        "# .ai-sandbox.toml: what ai-sandbox hides from AI agents in this repository, beyond git's own rules.",
        "# Written by `ai-sandbox init`; edit freely. `ai-sandbox explain` shows the policy that results.",
        "#",
        "# Hidden without any entry here, recomputed at every launch:",
        "#   - every git-ignored path (.env, secrets/, …), except agent tool dirs, dependency dirs and build outputs",
        "#   - files encrypted with git-crypt, and the git-crypt key",
        "#   - the `block` entries of your ~/.config/ai-sandbox/config.toml",
        "#",
        "# block: more paths to hide, tracked or not: gitignore-style patterns relative to this directory.",
        '#   "secrets/"          a directory, wherever it is (and files created in it later)',
        '#   "/config/prod.yml"  a leading / anchors at this directory',
        '#   "*.pem"             every matching file',
        '#   "!public.pem"       an exception to an earlier pattern',
        '#   "~/.aws/"           a path in your home directory',
        "# allow: git-ignored paths to keep readable (patterns as above; never outside the project).",
        "#   A project can never allow what your own config.toml blocks.",
        "# Where the agent may write is not set here: a cloned repository must not open your home to its agent. The",
        "#   project, its git directory (not its hooks), the agent's state, build caches and /tmp are writable; in your",
        "#   own ~/.config/ai-sandbox/config.toml, for example:",
        '#   writable = ["~/.local/share/pnpm"]   (see docs/writes.md)',
    ]
    if d.ignored:
        lines += ["#", f"# git ignores {entries(len(d.ignored))} here (hidden already):", *_listing(d.ignored)]
    if d.dependencies:
        lines += [
            "#",
            "# Ignored, but readable as dependencies (set allow_dependencies = false in your config.toml to hide them):",
            *_listing(d.dependencies),
        ]
    if d.outputs:
        lines += [
            "#",
            "# Ignored, but readable and writable as build outputs (secret-looking names inside stay hidden;",
            "# set allow_build_outputs = false in your config.toml to hide them):",
            *_listing(d.outputs),
        ]
    if d.migrated_from:
        lines += ["#", f"# Entries below were kept from {' and '.join(d.migrated_from)}."]
    if d.unmigrated:
        lines += ["#", "# Not migrated from .ai-sandbox (no project-file form; add them to your config.toml `block`):"]
        lines += [f"#   {u}" for u in d.unmigrated]
    if d.suggest:
        lines += [
            "#",
            "# Files that look like secrets, by name or by content (a secret scan names the line), and are",
            "# readable now: delete the # to hide one.",
        ]
    lines.append("")
    lines += _array("block", d.block, d.suggest, d.why)
    lines.append("")
    lines += _array("allow", d.allow, [])
    return "\n".join(lines) + "\n"


def write(target: str, text: str, force: bool) -> None:
    """Create the file, or with force replace it atomically; never follow a symlink planted at the name."""
    try:
        if force:
            write_atomic(target, text.encode("utf-8"), 0o644)
        else:
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
    except FileExistsError:
        raise CantCreateError(f"{target} already exists", "run `ai-sandbox init --force` to rewrite it") from None
    except OSError as e:
        raise CantCreateError(f"cannot write {target}: {e.strerror}", "check the directory's permissions") from None
