"""Every git call ai-sandbox makes, and the parsing of git's NUL-separated output.

git is the source of truth for what is ignored; a git failure is never read as "nothing is ignored".
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass, field

from ai_sandbox.errors import PolicyError, UnavailableError

# Read-only calls must not run code a cloned repository configured (fsmonitor hooks).
_GIT = ("git", "-c", "core.fsmonitor=false", "--no-optional-locks")


@dataclass(frozen=True)
class Repo:
    root: str  # absolute work-tree root
    common_dir: str  # absolute git common dir (shared by linked worktrees)


@dataclass
class Scan:
    """What git says about one work tree; paths are relative to that work tree, '/'-separated."""

    repo: Repo
    ignored: list[tuple[str, bool]] = field(default_factory=list)  # (path, is_dir), collapsed by git
    untracked: list[tuple[str, bool]] = field(default_factory=list)
    tracked: list[str] = field(default_factory=list)
    gitlinks: list[str] = field(default_factory=list)  # submodule paths


def _run(args: list[str], cwd: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    try:
        return subprocess.run([*_GIT, *args], cwd=cwd, input=stdin, capture_output=True)
    except FileNotFoundError:
        raise UnavailableError(
            "git is not installed",
            "install git (e.g. `sudo apt-get install git`); ai-sandbox reads its rules from git",
        ) from None


def _git(args: list[str], cwd: str, stdin: bytes | None = None, ok: tuple[int, ...] = (0,)) -> bytes:
    proc = _run(args, cwd, stdin)
    if proc.returncode not in ok:
        raise _git_error([a for a in args if not a.startswith(("-c", "filter."))], cwd, proc.stderr)
    return proc.stdout


def _git_error(args: list[str], cwd: str, stderr: bytes) -> PolicyError:
    text = os.fsdecode(stderr).strip()
    first = next((ln for ln in text.splitlines() if ln.strip()), "exit status without message")
    if "dubious ownership" in text:
        return PolicyError(
            f"git refuses to read {cwd}: it is owned by another user",
            f"if you trust it, run `git config --global --add safe.directory {cwd}`",
        )
    return PolicyError(
        f"git {args[0]} failed in {cwd}: {first.removeprefix('fatal: ')}",
        "fix the repository (run the same git command to see why) — ai-sandbox will not guess what is ignored",
    )


def find_repo(cwd: str) -> Repo | None:
    """The work tree holding cwd, or None when cwd is in no git repository at all."""
    proc = _run(["rev-parse", "--show-toplevel", "--git-common-dir"], cwd)
    if proc.returncode != 0:
        if b"not a git repository" in proc.stderr:
            return None
        err = _git_error(["rev-parse"], cwd, proc.stderr)
        if b"work tree" in proc.stderr:
            err.hint = "run ai-sandbox from inside the project's work tree (not from .git or a bare repository)"
        raise err
    lines = os.fsdecode(proc.stdout).split("\n")
    if len(lines) != 3 or lines[2] != "":
        raise PolicyError(f"cannot read git's answer for {cwd}", "a path with a newline in it is not supported")
    root, common = lines[0], lines[1]
    real = os.path.realpath(cwd)
    if not (real == os.path.realpath(root) or real.startswith(os.path.realpath(root).rstrip("/") + "/")):
        raise PolicyError(
            f"git says the work tree of {cwd} is {root}, which does not contain it",
            "check `git config core.worktree` (or GIT_WORK_TREE): ai-sandbox will not guess the project",
        )
    return Repo(root=root, common_dir=os.path.normpath(os.path.join(cwd, common)))


def _split_z(data: bytes) -> list[str]:
    return [os.fsdecode(p) for p in data.split(b"\0") if p]


def _no_filters(repo: Repo) -> list[str]:
    """`-c` overrides that disable every filter driver the repository's config defines.

    `git status` re-hashes tracked files whose stat changed, running their `filter=` clean command: an
    agent that wrote a filter into .git/config and .gitattributes would get code run outside the sandbox
    by our next launch. Emptied drivers run nothing (measured: no process is started)."""
    out = _git(["config", "-z", "--name-only", "--get-regexp", r"^filter\."], repo.root, ok=(0, 1))
    names = set()
    for key in _split_z(out):
        section, _, rest = key.partition(".")
        name, _, _var = rest.rpartition(".")
        if section.lower() == "filter" and name:
            names.add(name)
    args = []
    for name in sorted(names):
        for var in ("clean", "smudge", "process"):
            args += ["-c", f"filter.{name}.{var}="]
        args += ["-c", f"filter.{name}.required=false"]  # git-crypt's is required; we only read ?? and !!
    return args


def scan(repo: Repo) -> Scan:
    """Ignored and untracked entries (one status walk, directories collapsed) and the index."""
    result = Scan(repo)
    status = _git(
        [
            *_no_filters(repo),
            "status",
            "--porcelain=v1",
            "-z",
            "--ignored=traditional",
            "--untracked-files=normal",
            "--ignore-submodules=all",
            "--no-renames",
        ],
        repo.root,
    )
    for rec in _split_z(status):
        code, path = rec[:2], rec[3:]
        is_dir = path.endswith("/")
        item = (path.rstrip("/"), is_dir)
        if code == "!!":
            result.ignored.append(item)
        elif code == "??":
            result.untracked.append(item)
    seen: set[str] = set()
    for rec in _split_z(_git(["ls-files", "-z", "-s"], repo.root)):
        meta, _, path = rec.partition("\t")
        if path in seen:
            continue  # unmerged entries appear once per stage
        seen.add(path)
        if meta.startswith("160000"):
            result.gitlinks.append(path)
        else:
            result.tracked.append(path)
    return result


def nested_repo(root: str, rel: str) -> Repo | None:
    """The repository checked out at root/rel (a submodule or an untracked nested clone), if any."""
    path = os.path.join(root, rel)
    if not os.path.exists(os.path.join(path, ".git")):
        return None
    repo = find_repo(path)
    if repo is None or os.path.realpath(repo.root) != os.path.realpath(path):
        return None
    return repo


def repos_below(repo: Repo, rel: str) -> list[str]:
    """Repositories cloned somewhere inside the untracked directory rel (git lists each as `path/`)."""
    out = _git(["ls-files", "-z", "--others", "--exclude-standard", "--", rel + "/"], repo.root)
    return [p.rstrip("/") for p in _split_z(out) if p.endswith("/")]


def attribute_files(scan_: Scan) -> list[str]:
    """Absolute paths of the attribute files that can mark git-crypt files in this work tree."""
    files = [os.path.join(scan_.repo.common_dir, "info", "attributes")]
    for rel in scan_.tracked:
        if rel == ".gitattributes" or rel.endswith("/.gitattributes"):
            files.append(os.path.join(scan_.repo.root, rel))
    for rel, is_dir in scan_.untracked:
        if not is_dir and (rel == ".gitattributes" or rel.endswith("/.gitattributes")):
            files.append(os.path.join(scan_.repo.root, rel))
    return files


def filter_attributes(repo: Repo) -> dict[str, str]:
    """The `filter` attribute of every tracked and untracked (not ignored) file, by relative path."""
    files = _git(["ls-files", "-z", "--cached", "--others", "--exclude-standard"], repo.root)
    if not files:
        return {}
    out = _split_z(_git(["check-attr", "-z", "--stdin", "filter"], repo.root, stdin=files))
    return {out[i]: out[i + 2] for i in range(0, len(out) - 2, 3)}


def ignore_rules(repo: Repo, paths: list[str]) -> dict[str, str]:
    """For explain: the rule that ignores each path, as "source:line: pattern". Paths with no direct rule
    (a directory git collapsed because everything in it is ignored) are absent."""
    if not paths:
        return {}
    stdin = b"".join(os.fsencode(p) + b"\0" for p in paths)
    proc = _run(["check-ignore", "-v", "-z", "--stdin"], repo.root, stdin)
    if proc.returncode not in (0, 1):  # 1: none of them matched directly
        raise _git_error(["check-ignore"], repo.root, proc.stderr)
    out = proc.stdout.split(b"\0")
    rules = {}
    for i in range(0, len(out) - 3, 4):
        source, line, pattern, path = (os.fsdecode(x) for x in out[i : i + 4])
        if pattern:
            rules[path] = f"{source}:{line}: {pattern}"
    return rules
