"""Every git call ai-sandbox makes, and the parsing of git's NUL-separated output.

git is the source of truth for what is ignored; a git failure is never read as "nothing is ignored".
"""

from __future__ import annotations

import contextlib
import os
import selectors
import subprocess
from collections.abc import Iterator

from ai_sandbox import tools
from ai_sandbox.errors import PolicyError, UnavailableError
from ai_sandbox.fs import below, inside
from ai_sandbox.records import value

# Read-only calls must not run code a cloned repository configured (fsmonitor hooks).
# Every git call runs outside the sandbox, on a repository the agent can write: nothing the repository
# configures may run code here. No fsmonitor daemon, and no hooks: `update-index` (skipworktree.py) runs
# the post-index-change hook, from .git/hooks or core.hooksPath (a red team read every secret that way).
_GIT = (
    tools.find("git") or "/usr/bin/git",
    "-c",
    "core.fsmonitor=false",
    "-c",
    "core.hooksPath=/dev/null",
    # No transport at all: in a partial clone a missing object makes git fetch it, running the command a
    # repository names (remote.*.uploadpack) — a red team ran code outside the sandbox that way.
    "-c",
    "protocol.allow=never",
    "--no-optional-locks",
)


@value
class Repo:
    root: str  # absolute work-tree root
    common_dir: str  # absolute git common dir (shared by linked worktrees)


class Scan:
    """What git says about one work tree; paths are relative to that work tree, '/'-separated.

    The index is kept as git's bytes and decoded only when asked for: a monorepo's 50,000 tracked paths
    cost ~30 ms to decode, and most launches need only the submodules out of them."""

    def __init__(self, repo: Repo, index: bytes = b"") -> None:
        self.repo = repo
        self.ignored: list[tuple[str, bool]] = []  # (path, is_dir), collapsed by git
        self.untracked: list[tuple[str, bool]] = []
        self.unlisted: list[tuple[str, str]] = []  # (directory, why): git could not open it, so listed nothing in it
        self.attributes_file = ""  # the user's global attributes file, as git finds it (core.attributesFile)
        self.crypt_config = ""  # a config key that sets up git-crypt (a filter driver), if any
        # sparse checkout is on and git has not been told to expect present files outside its patterns:
        # git then clears the skip-worktree bit of every present file (skipworktree.py)
        self.sparse_clears_marks = False
        self._index = index
        self._tracked: list[str] | None = None
        self._gitlinks: list[str] | None = None
        self._skip: set[str] | None = None
        self._metas: dict[str, bytes] | None = None  # path -> its record's fields, once the index is decoded

    @property
    def gitlinks(self) -> list[str]:
        """Submodule paths (mode 160000 entries)."""
        if self._gitlinks is None:
            self._gitlinks = []
            if b"160000 " in self._index:
                self._split_index()
        return self._gitlinks

    @property
    def tracked(self) -> list[str]:
        if self._tracked is None:
            self._split_index()
        return self._tracked  # type: ignore[return-value]

    @property
    def skip_worktree(self) -> set[str]:
        """Paths whose index entry carries the skip-worktree bit (`ls-files -t` tags them S)."""
        if self._skip is None:
            self._skip = set()
            if b"\0S " in b"\0" + self._index:
                self._split_index()
        return self._skip

    def has_tracked_named(self, name: bytes) -> bool:
        """A cheap test on the raw index: could any tracked path end in name?"""
        return name in self._index

    def is_tracked(self, rel: str) -> bool:
        """Is rel in the index? Searched in git's bytes: no decoding of the other 50,000 entries."""
        return self._meta(rel) is not None

    def _meta(self, rel: str) -> bytes | None:
        """The index record's fields before the path (`S 100644 <blob> 0`), found in git's bytes."""
        raw = b"\t" + os.fsencode(rel) + b"\0"
        i = self._index.find(raw)
        while i != -1:
            start = self._index.rfind(b"\0", 0, i) + 1
            if self._index.find(b"\t", start) == i:  # the record's own tab, not one inside another name
                return self._index[start:i]
            i = self._index.find(raw, i + 1)
        return None

    def blob_of(self, rel: str) -> str:
        """The object id the index holds for rel ("" when it is not there): from the decoded index when it was
        decoded already, else searched in git's bytes."""
        meta = self._metas.get(rel) if self._metas is not None else self._meta(rel)
        fields = meta.split(b" ") if meta else []
        return fields[2].decode() if len(fields) == 4 else ""

    @property
    def skipped(self) -> dict[str, str]:
        """Each skip-worktree entry -> its object id: a bit git carries to the entry's new path on `git mv`."""
        if b"\0S " not in b"\0" + self._index:
            return {}
        out = {}
        for rec in self._index.split(b"\0"):
            if rec.startswith(b"S "):
                meta, _, raw = rec.partition(b"\t")
                fields = meta.split(b" ")
                out[os.fsdecode(raw)] = fields[2].decode() if len(fields) == 4 else ""
        return out

    @property
    def blobs(self) -> dict[str, str]:
        """Tracked file -> its blob id in the index (submodules and unmerged paths left out)."""
        out: dict[str, str] = {}
        for rec in self._index.split(b"\0"):
            meta, _, raw = rec.partition(b"\t")
            fields = meta.split(b" ")  # tag, mode, blob, stage
            if len(fields) == 4 and fields[3] == b"0" and fields[1] != b"160000":
                out[os.fsdecode(raw)] = fields[2].decode()
        return out

    def _split_index(self) -> None:
        tracked: list[str] = []
        links: list[str] = []
        skip: set[str] = set()
        metas: dict[str, bytes] = {}  # unmerged entries appear once per stage: the first is kept
        for rec in self._index.split(b"\0"):
            if not rec:
                continue
            meta, _, raw = rec.partition(b"\t")
            path = os.fsdecode(raw)
            if path in metas:
                continue
            metas[path] = meta
            (links if meta[2:].startswith(b"160000") else tracked).append(path)
            if meta.startswith(b"S "):
                skip.add(path)
        self._tracked, self._gitlinks, self._skip, self._metas = tracked, links, skip, metas


# Seconds any git call may take. None takes that long on a sane repository (a monorepo's listing: ~2 s), but
# git reads .git/config, and a session can make it include a FIFO: every later call of ai-sandbox's hung, the
# watcher's release of the index marks and the next launch included (red team, T2).
TIMEOUT = 120.0
QUICK = 20.0  # the first question of a launch (which repository is this?), answered in milliseconds


class GitTimeout(PolicyError):
    """A git call took longer than its time limit."""


def _timeout(args: list[str], cwd: str, limit: float) -> GitTimeout:
    return GitTimeout(
        f"git {args[0]} took longer than {limit:.0f} s in {cwd}",
        "check the repository's config and the files it includes (a FIFO left in .git by a session?)",
    )


def _run(
    args: list[str],
    cwd: str,
    stdin: bytes | None = None,
    env: dict[str, str] | None = None,
    timeout: float = TIMEOUT,
    new_session: bool = False,
) -> subprocess.CompletedProcess[bytes]:
    try:
        return subprocess.run(
            [*_GIT, *args], cwd=cwd, input=stdin, capture_output=True, env=env, timeout=timeout,
            start_new_session=new_session,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        raise _timeout(args, cwd, timeout) from None
    except FileNotFoundError:
        raise UnavailableError(
            f"git is not installed (looked in {tools.where()})",
            "install git (e.g. `sudo apt-get install git`); ai-sandbox reads its rules from git",
        ) from None


def git_output(args: list[str], cwd: str, stdin: bytes | None = None, timeout: float = TIMEOUT) -> bytes:
    """git's stdout; a failure refuses with git's first line."""
    return _git(args, cwd, stdin, timeout=timeout)


def index_write(args: list[str], root: str, stdin: bytes, place: str) -> subprocess.CompletedProcess[bytes]:
    """A git command that only changes index entries' flags (update-index --[no-]skip-worktree), run with an
    empty directory of its own, made in place (ai-sandbox's cache: read-only inside every sandbox), as the work
    tree. Writing the index, git re-reads each racily clean file through its clean filter; a session can define
    one in .git/config (or in a file it includes: a FIFO that serves one text, then another) and attach it to
    every path in .git/info/attributes (all writable inside): it ran outside the sandbox as the user and copied
    a hidden .env (red team, C2 and T1). With no file where git looks, git opens none and no filter runs,
    whatever the config says when git reads it.

    The price: git can no longer mark a racily clean entry (a file changed within the second git last wrote
    the index, same size) for a look at its content, and the index it writes is newer than the file, so the
    change would look clean to the user's next `git status` and `commit -a` would leave it out (seen on a
    Debian 13 run). The index keeps the modification time it had: every entry racy before stays racy, and the
    user's own git, in the real work tree, looks at its content as it would have."""
    git_dir = git_dir_of(root)
    if not git_dir:
        raise PolicyError(f"cannot find the git directory of {root}", "check its .git")
    index = os.environ.get("GIT_INDEX_FILE") or os.path.join(git_dir, "index")
    try:
        before = os.stat(index)
    except OSError:
        before = None
    empty = os.path.join(place, f"empty-worktree-{os.getpid()}")
    os.makedirs(empty, mode=0o700, exist_ok=True)
    try:
        if os.listdir(empty):
            raise PolicyError(f"{empty} is not empty", "remove it")
        env = {**os.environ, "GIT_DIR": git_dir, "GIT_WORK_TREE": empty}
        proc = _run(args, empty, stdin, env=env, timeout=QUICK)
    finally:
        with contextlib.suppress(OSError):
            os.rmdir(empty)
    if before is not None:
        with contextlib.suppress(OSError):  # an older time only makes git look at more files, never fewer
            now = os.stat(index)
            if now.st_mtime_ns > before.st_mtime_ns:
                os.utime(index, ns=(now.st_atime_ns, before.st_mtime_ns))
    return proc


def _git(
    args: list[str], cwd: str, stdin: bytes | None = None, ok: tuple[int, ...] = (0,), timeout: float = TIMEOUT
) -> bytes:
    proc = _run(args, cwd, stdin, timeout=timeout)
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


# Variables that change which repository, work tree or index git uses. ai-sandbox's own git calls and the
# agent's git both inherit them, so the policy must describe the tree they select — or refuse.
REPO_VARIABLES = (
    "GIT_DIR", "GIT_WORK_TREE", "GIT_COMMON_DIR", "GIT_INDEX_FILE", "GIT_CEILING_DIRECTORIES",
    "GIT_DISCOVERY_ACROSS_FILESYSTEM", "GIT_OBJECT_DIRECTORY", "GIT_NAMESPACE",
)  # fmt: skip
_PATH_VARIABLES = ("GIT_DIR", "GIT_WORK_TREE", "GIT_COMMON_DIR", "GIT_INDEX_FILE")
_WHERE = ["rev-parse", "--show-toplevel", "--git-common-dir"]


def find_repo(cwd: str) -> Repo | None:
    """The work tree holding cwd, or None when cwd is in no git repository at all."""
    set_ = [name for name in REPO_VARIABLES if name in os.environ]
    if set_:
        return _find_repo_with(cwd, set_)
    proc = _run(_WHERE, cwd, timeout=QUICK)
    if proc.returncode != 0:
        if b"not a git repository" in proc.stderr:
            return None
        raise _where_error(cwd, proc.stderr)
    return _repo_of(cwd, proc.stdout)


def _where_error(cwd: str, stderr: bytes) -> PolicyError:
    err = _git_error(["rev-parse"], cwd, stderr)
    if b"work tree" in stderr:
        err.hint = "run ai-sandbox from inside the project's work tree (not from .git or a bare repository)"
    return err


def _repo_of(cwd: str, stdout: bytes) -> Repo:
    lines = os.fsdecode(stdout).split("\n")
    if len(lines) != 3 or lines[2] != "":
        raise PolicyError(f"cannot read git's answer for {cwd}", "a path with a newline in it is not supported")
    root, common = lines[0], lines[1]
    real = os.path.realpath(cwd)
    if not inside(real, os.path.realpath(root)):
        raise PolicyError(
            f"git says the work tree of {cwd} is {root}, which does not contain it",
            "check `git config core.worktree` (or GIT_WORK_TREE): ai-sandbox will not guess the project",
        )
    return Repo(root=root, common_dir=os.path.normpath(os.path.join(cwd, common)))


def _find_repo_with(cwd: str, set_: list[str]) -> Repo | None:
    """The caller set variables that redirect git (GIT_DIR, GIT_WORK_TREE, …): the policy is computed only
    when git, with them, uses the very repository, work tree and index it finds here without them. Anything
    else — a GIT_DIR that fails, another repository, a work tree that is not this one — refuses: the rules
    would be read from one tree while the agent's files are another (one more git call, only in this case)."""
    named = ", ".join(f"{n}={os.environ[n]}" for n in set_)
    hint = f"unset {' '.join(set_)} before starting ai-sandbox (the agent inherits them), run it in the project"
    ask = [*_WHERE, "--absolute-git-dir", "--git-path", "index"]
    proc = _run(ask, cwd)
    plain = _run(ask, cwd, env={k: v for k, v in os.environ.items() if k not in REPO_VARIABLES})
    if plain.returncode != 0 and b"not a git repository" not in plain.stderr:
        raise _where_error(cwd, plain.stderr)
    without = _answer(cwd, plain.stdout) if plain.returncode == 0 else None
    if proc.returncode != 0:
        if without is None and b"not a git repository" in proc.stderr and not set(set_) & set(_PATH_VARIABLES):
            return None  # e.g. GIT_CEILING_DIRECTORIES in a shell profile, outside any repository: no repo either way
        first = next((ln for ln in os.fsdecode(proc.stderr).splitlines() if ln.strip()), "no message")
        raise PolicyError(f"git fails in {cwd} with {named}: {first.removeprefix('fatal: ')}", hint)
    with_vars = _answer(cwd, proc.stdout)
    if without is None:
        raise PolicyError(f"{named} makes git use the work tree {with_vars[0]}, where it finds no repository", hint)
    for i, label in ((0, "work tree"), (2, "git directory"), (3, "index"), (1, "common git directory")):
        if with_vars[i] != without[i]:
            raise PolicyError(
                f"{named} makes git use the {label} {with_vars[i]}, not {without[i]} of the repository here",
                hint,
            )
    relative = [n for n in _PATH_VARIABLES if n in os.environ and not os.path.isabs(os.environ[n])]
    if relative and with_vars[0] != os.path.realpath(cwd):
        raise PolicyError(
            f"{', '.join(relative)} is a relative path, which names another place from the project root "
            f"{with_vars[0]} (where ai-sandbox asks git) than from {cwd}",
            f"make it absolute, or {hint}",
        )
    return _repo_of(cwd, b"\n".join(proc.stdout.split(b"\n")[:2]) + b"\n")


def _answer(cwd: str, stdout: bytes) -> tuple[str, ...]:
    """(work tree, git dir, common dir, index) as real absolute paths, to compare two answers of git."""
    lines = os.fsdecode(stdout).split("\n")
    if len(lines) != 5 or lines[4] != "":
        raise PolicyError(f"cannot read git's answer for {cwd}", "a path with a newline in it is not supported")
    return tuple(os.path.realpath(os.path.join(cwd, p)) for p in lines[:4])


def _split_z(data: bytes) -> list[str]:
    return [p for p in os.fsdecode(data).split("\0") if p]  # one decode: NUL is never inside a character


def _collapse(paths: list[str]) -> list[tuple[str, bool]]:
    """`ls-files -o -i --directory` names a directory that holds only ignored files and then its contents
    too; keep the directory, as `git status --ignored=traditional` would (checked on random trees)."""
    out: list[tuple[str, bool]] = []
    inside = None
    for p in sorted(paths):
        if inside is not None and p.startswith(inside):
            continue
        inside = p if p.endswith("/") else None
        out.append((p.rstrip("/"), p.endswith("/")))
    return out


def scan(repo: Repo) -> Scan:
    """Ignored entries (directories collapsed), untracked ones, and the index: three `git ls-files` run
    side by side. ls-files never reads file contents, so no filter a repository configures can run (git
    status would run clean filters on changed tracked files), and it does not walk into a directory an
    ignore pattern matches (git 2.39's status --ignored does: 2.7 s against 0.2 s on a 1M-file repo).

    A fourth call reads the config git-crypt depends on. What git printed on stderr is read too: a
    directory it could not open is named in `unlisted` (nothing in it was listed, ignored or not), and any
    other message refuses — an unreadable .gitignore means the listing is not what the user wrote."""
    calls = {
        "ignored": ["ls-files", "-z", "--others", "--ignored", "--exclude-standard", "--directory"],
        "untracked": ["ls-files", "-z", "--others", "--exclude-standard", "--directory"],
        "index": ["ls-files", "-z", "--stage", "-t"],  # -t: S marks a skip-worktree entry
    }
    if _config_may_matter(repo):
        calls["config"] = ["config", "-z", "--get-regexp", _CONFIG_KEYS]
    env = _scan_env()
    procs = {}
    try:
        for name, args in calls.items():
            procs[name] = subprocess.Popen(
                [*_GIT, *args], cwd=repo.root, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
            )
    except FileNotFoundError:
        raise UnavailableError(
            f"git is not installed (looked in {tools.where()})", "install git (e.g. `sudo apt-get install git`)"
        ) from None
    outputs, errors = _drain(procs, repo.root)
    for name, proc in procs.items():
        if proc.returncode not in ((0, 1) if name == "config" else (0,)):  # config: 1 when no key is set
            raise _git_error(calls[name], repo.root, errors[name])
    result = Scan(repo, index=outputs["index"])
    for name in ("ignored", "untracked", "index"):
        result.unlisted += _unlisted(errors[name], repo.root)
    result.unlisted = sorted(set(result.unlisted))
    result.ignored = _collapse(_split_z(outputs["ignored"]))
    result.untracked = [(p.rstrip("/"), p.endswith("/")) for p in _split_z(outputs["untracked"])]
    config = _read_config(outputs.get("config", b""), repo.root)
    result.attributes_file, result.crypt_config, result.sparse_clears_marks = config
    return result


# The keys git-crypt's detection needs: where the user's attributes are, a tree attributes come from
# instead of the work tree (git 2.42+), and filter drivers (git-crypt configures one per repository); and
# whether sparse checkout would clear the skip-worktree marks.
_CONFIG_KEYS = (
    r"^(core\.attributesfile|attr\.tree|filter\..*|core\.sparsecheckout|sparse\.expectfilesoutsideofpatterns)$"
)
_UNLISTED = "warning: could not open directory '"
# What a config file must hold to set one of those keys, lowercased (keys are case-insensitive), or to
# pull in other files that might.
_CONFIG_NEEDLES = (b"attr", b"git-crypt", b"include", b"worktreeconfig", b"sparse")


def _config_may_matter(repo: Repo) -> bool:
    """Could git's config set one of _CONFIG_KEYS? One more git process costs ~1.5 ms on every launch;
    reading the config files it would read costs ~0.1 ms, so git is asked only when one of them (or the
    environment) could set such a key, an include, or cannot be read."""
    if any(k.startswith("GIT_CONFIG") for k in os.environ):
        return True
    home = os.path.expanduser("~")
    xdg = os.environ.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")
    files = ("/etc/gitconfig", os.path.join(_git_prefix(), "etc", "gitconfig"), os.path.join(home, ".gitconfig"))
    for path in (*files, os.path.join(xdg, "git", "config"), os.path.join(repo.common_dir, "config")):
        try:
            with open(path, "rb") as f:
                text = f.read().lower()
        except (FileNotFoundError, NotADirectoryError):
            continue
        except OSError:
            return True
        if any(n in text for n in _CONFIG_NEEDLES):
            return True
    return False


def _git_prefix() -> str:
    """git's installation prefix (/usr for /usr/bin/git), under which it finds etc/ when it is not /usr."""
    return os.path.dirname(os.path.dirname(os.path.realpath(_GIT[0])))


def _scan_env() -> dict[str, str]:
    """git's environment for the scan, with its messages untranslated (they are read) and no trace
    output (GIT_TRACE=1 writes to stderr, which would read as an unexpected message)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_TRACE")}
    env["LC_ALL"] = "C"
    return env


def _unlisted(stderr: bytes, root: str) -> list[tuple[str, str]]:
    """The directories git could not open while listing (it warns and exits 0: the listing just lacks
    them). Any other message means git's answer is not the whole truth: refuse rather than guess."""
    out = []
    for line in os.fsdecode(stderr).split("\n"):
        if not line.strip():
            continue
        path, sep, why = line[len(_UNLISTED) :].rpartition("/': ")
        if not (line.startswith(_UNLISTED) and sep and path):
            raise PolicyError(
                f"git ls-files printed an unexpected message in {root}: {line.strip()}",
                "fix what it names (an unreadable or symlinked .gitignore leaves its rules unapplied), "
                "until `git status` prints no warning: ai-sandbox will not guess what is ignored",
            )
        out.append((path, why))
    return out


def _read_config(out: bytes, root: str) -> tuple[str, str, bool]:
    """(the global attributes file git reads, a key that sets up git-crypt or "", whether sparse checkout
    clears skip-worktree marks) from `git config -z --get-regexp`: records of `key\nvalue`, the last value
    of a key winning, as in git (a key without a value is true)."""
    attributes, crypt = "", ""
    flags = {}
    for rec in _split_z(out):
        key, newline, val = rec.partition("\n")
        if key in ("core.sparsecheckout", "sparse.expectfilesoutsideofpatterns"):
            flags[key] = not newline or val.strip().lower() in ("true", "yes", "on", "1")
        elif key == "core.attributesfile":
            attributes = os.path.join(root, os.path.expanduser(val)) if val else ""
        elif key == "attr.tree" or "git-crypt" in val:
            crypt = key
    if not attributes:
        xdg = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
        attributes = os.path.join(xdg, "git", "attributes")
    sparse = flags.get("core.sparsecheckout", False) and not flags.get("sparse.expectfilesoutsideofpatterns", False)
    return attributes, crypt, sparse


def _drain(procs: dict[str, subprocess.Popen[bytes]], root: str) -> tuple[dict[str, bytes], dict[str, bytes]]:
    """Read every pipe as it fills: git blocks on a full pipe, and a monorepo's index is megabytes
    (read one call after the other, the index would only finish after the slowest walk). All of it within
    TIMEOUT: past it the calls are killed and the launch refuses."""
    import time

    deadline = time.monotonic() + TIMEOUT
    sel = selectors.DefaultSelector()
    chunks: dict[tuple[str, int], list[bytes]] = {}
    for name, proc in procs.items():
        for which, stream in enumerate((proc.stdout, proc.stderr)):
            assert stream is not None  # started with stdout and stderr piped
            sel.register(stream, selectors.EVENT_READ, (name, which, stream))
            chunks[(name, which)] = []
    while sel.get_map():
        ready = sel.select(max(0.0, deadline - time.monotonic()))
        if not ready and time.monotonic() >= deadline:
            for proc in procs.values():
                proc.kill()
                proc.wait()
            sel.close()
            raise _timeout(["ls-files"], root, TIMEOUT)
        for key, _ in ready:
            data = os.read(key.fd, 1 << 20)
            name, which, stream = key.data
            if data:
                chunks[(name, which)].append(data)
            else:
                sel.unregister(stream)
                stream.close()
    sel.close()
    for proc in procs.values():
        proc.wait()
    joined = {k: b"".join(v) for k, v in chunks.items()}
    return {n: joined[(n, 0)] for n in procs}, {n: joined[(n, 1)] for n in procs}


def nested_repo(root: str, rel: str) -> Repo | None:
    """The repository checked out at root/rel (a submodule or an untracked nested clone), if any."""
    path = os.path.join(root, rel)
    if not os.path.exists(os.path.join(path, ".git")):
        return None
    repo = find_repo(path)
    if repo is None or os.path.realpath(repo.root) != os.path.realpath(path):
        return None
    return repo


def other_checkouts(repo: Repo) -> list[Repo]:
    """The repository's other work trees (`git worktree list` names them all): the main one when repo is a linked
    worktree, and every linked one but repo. Read from the common git directory, as git does: each
    `worktrees/<id>/gitdir` names a checkout's `.git` file, which must name that directory back (one a user
    deleted, or that another repository claims, is skipped: git itself calls it prunable)."""
    common = os.path.realpath(repo.common_dir)
    here = os.path.realpath(repo.root)
    base = os.path.join(common, "worktrees")
    found = []
    # the main work tree, seen from a linked one (from the main one itself moved by core.worktree, the directory
    # holding .git is no checkout: part of this project, and its own rules apply); a bare repository has none
    if os.path.basename(common) == ".git" and below(git_dir_of(here), base):
        main = os.path.dirname(common)
        if main != here and git_dir_of(main) == common:
            found.append(main)
    try:
        names = sorted(os.listdir(base))
    except OSError:
        names = []
    for name in names:
        try:
            with open(os.path.join(base, name, "gitdir"), "rb") as f:
                dotgit = os.fsdecode(f.read().rstrip(b"\n"))
        except OSError:
            continue
        root = os.path.realpath(os.path.dirname(dotgit))
        if root != here and git_dir_of(root) == os.path.join(base, name):
            found.append(root)
    return [Repo(root=r, common_dir=common) for r in dict.fromkeys(found)]


def git_dir_of(root: str) -> str:
    """The git directory root/.git is or names (`gitdir: …` in a linked worktree's file), as a real path."""
    dotgit = os.path.join(root, ".git")
    if os.path.isdir(dotgit) and not os.path.islink(dotgit):
        return os.path.realpath(dotgit)
    try:
        with open(dotgit, "rb") as f:
            head = f.read(4096)
    except OSError:
        return ""
    if not head.startswith(b"gitdir: "):
        return ""
    target = os.fsdecode(head[len(b"gitdir: ") :].rstrip(b"\n"))
    return os.path.realpath(os.path.join(root, target))


def untracked_below(repo: Repo, rels: list[str]) -> list[str]:
    """Every untracked, not ignored file inside these untracked directories (git collapses each to one
    entry), and each repository cloned in them as `path/`. Pathspecs are literal: a directory named `*`
    or `[ab]` names only itself."""
    args = ["ls-files", "-z", "--others", "--exclude-standard", "--", *(r + "/" for r in rels)]
    proc = _run(args, repo.root, env={**os.environ, "GIT_LITERAL_PATHSPECS": "1"})
    if proc.returncode != 0:
        raise _git_error(args, repo.root, proc.stderr)
    return _split_z(proc.stdout)


def repos_below(repo: Repo, rel: str) -> list[str]:
    """Repositories cloned somewhere inside the untracked directory rel (git lists each as `path/`)."""
    return [p.rstrip("/") for p in untracked_below(repo, [rel]) if p.endswith("/")]


def attribute_files(scan_: Scan) -> list[str]:
    """Absolute paths of the attribute files git reads besides the work tree's own .gitattributes: the
    repository's info/attributes, the user's (core.attributesFile, else $XDG_CONFIG_HOME/git/attributes)
    and the system's ($(prefix)/etc/gitattributes: /etc/gitattributes for a git installed in /usr)."""
    files = [os.path.join(scan_.repo.common_dir, "info", "attributes"), scan_.attributes_file, _SYSTEM_ATTRIBUTES]
    prefix = _git_prefix()
    if prefix != "/usr":
        files.append(os.path.join(prefix, "etc", "gitattributes"))
    return [f for f in files if f]


_SYSTEM_ATTRIBUTES = "/etc/gitattributes"


def filter_attributes(repo: Repo) -> dict[str, str]:
    """The `filter` attribute of every tracked and untracked (not ignored) file, by relative path."""
    files = _git(["ls-files", "-z", "--cached", "--others", "--exclude-standard"], repo.root)
    if not files:
        return {}
    out = _split_z(_git(["check-attr", "-z", "--stdin", "filter"], repo.root, stdin=files))
    return {out[i]: out[i + 2] for i in range(0, len(out) - 2, 3)}


def ignored_among(repo: Repo, paths: list[str]) -> list[str]:
    """Those of paths that git's rules ignore (for files git does not list itself: FIFOs, sockets)."""
    if not paths:
        return []
    stdin = b"".join(os.fsencode(p) + b"\0" for p in paths)
    return _split_z(_git(["check-ignore", "-z", "--stdin"], repo.root, stdin, ok=(0, 1)))  # 1: none is


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


def ignores(root: str, rel: str) -> bool:
    """Does git ignore rel (so a layer may hide it)? Any failure counts as yes: callers then refuse."""
    try:
        return _run(["check-ignore", "-q", "--", rel], root).returncode != 1
    except UnavailableError:
        return True


def index_entries(root: str, dirs: list[str]) -> list[tuple[str, str, str, str]]:
    """(mode, object id, stage, path) of every index entry in these directories (relative, literal)."""
    args = ["ls-files", "-z", "--stage", "--", *(d + "/" for d in dirs)]
    proc = _run(args, root, env={**os.environ, "GIT_LITERAL_PATHSPECS": "1"})
    if proc.returncode != 0:
        raise _git_error(args, root, proc.stderr)
    out = []
    for rec in _split_z(proc.stdout):
        meta, _, path = rec.partition("\t")
        fields = meta.split(" ")
        if len(fields) == 3:
            out.append((fields[0], fields[1], fields[2], path))
    return out


def indexed_blob(root: str, rel: str) -> bytes | None:
    """The object id (hex) git's index holds for rel when it is a regular file there; None otherwise."""
    try:
        proc = _run(["ls-files", "-s", "-z", "--", rel], root)
    except UnavailableError:
        return None
    meta = proc.stdout.split(b"\t", 1)[0].split()
    if proc.returncode != 0 or len(meta) != 3 or meta[0] not in (b"100644", b"100755"):
        return None
    return meta[1]


# --- history (history.py; never on the launch path) --------------------------------------------------------

_LOG = [
    "-c", "log.showSignature=false", "--no-replace-objects", "log", "--all", "--reflog", "--stdin", "--no-renames",
    "--diff-merges=first-parent", "--root", "--raw", "--no-abbrev", "-z", "--no-color", "--no-ext-diff",
    "--format=C%x00%H%x00%ct%x00%S",
]  # fmt: skip
_BLOB_MODES = (b"100644", b"100755")


def blob_changes(root: str, extra: list[str]) -> Iterator[tuple[str, int, str, str, str]]:
    """(commit, committer time, source, path, blob) for every file content a commit put at a path, in every
    commit a ref, a reflog entry or `extra` (more commits) reaches. source is the ref the walk came by ("" or
    `…@{n}` for a reflog entry). One walk, streamed: 30 MB of output on 100,000 commits."""
    proc = subprocess.Popen(
        [*_GIT, *_LOG], cwd=root, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        env=_HISTORY_ENV, start_new_session=True,
    )  # fmt: skip
    assert proc.stdin is not None and proc.stdout is not None
    timer = _deadline(proc)
    with contextlib.suppress(BrokenPipeError):
        proc.stdin.write("".join(c + "\n" for c in extra).encode())
        proc.stdin.close()
    commit, ctime, source = "", 0, ""
    pending: list[bytes] = []  # the tokens of a record not yet complete
    need = 0  # how many more it takes
    rest = b""
    while True:
        chunk = proc.stdout.read(1 << 20)
        tokens = (rest + chunk).split(b"\0")
        rest = tokens.pop() if chunk else b""
        for tok in tokens:
            if need:  # positional: a path token is taken whole, whatever bytes it holds
                pending.append(tok)
                need -= 1
                if need:
                    continue
                if pending[0] == b"C":
                    commit, ctime, source = pending[1].decode(), int(pending[2] or 0), os.fsdecode(pending[3])
                else:  # ":old_mode new_mode old_blob new_blob status"
                    meta = pending[0].split(b" ")
                    if len(meta) >= 5 and meta[4][:1] in (b"A", b"M", b"T") and meta[1] in _BLOB_MODES:
                        yield commit, ctime, source, os.fsdecode(pending[1]), meta[3].decode()
                pending = []
                continue
            tok = tok.lstrip(b"\n")  # a commit's first change follows its header after a newline
            if tok == b"C":
                pending, need = [tok], 3
            elif tok.startswith(b":"):
                pending, need = [tok], 1
        if not chunk:
            break
    timer.cancel()
    if proc.wait() != 0:
        raise HistoryError(f"git log exited with status {proc.returncode}")


def unreachable_commits(root: str) -> list[str]:
    """Commits no ref or reflog reaches (a dropped stash, an expired branch): their trees stay readable
    until git prunes them. fsck's connectivity walk: 2.4 s on 100,000 commits."""
    out = _history_git(["fsck", "--connectivity-only", "--unreachable", "--no-progress"], root, ok=(0, 1, 2, 4, 8))
    return [ln.split()[2].decode() for ln in out.splitlines() if ln.startswith(b"unreachable commit ")]


def stored_blobs(root: str, rels: list[str]) -> dict[str, str]:
    """For each file (relative to root) whose current bytes git's object store holds, its blob id."""
    rels = [r for r in rels if "\n" not in r]
    if not rels:
        return {}
    hashed = _history_git(
        ["hash-object", "--no-filters", "--stdin-paths"], root, b"".join(os.fsencode(r) + b"\n" for r in rels)
    ).split()
    if len(hashed) != len(rels):
        return {}
    checked = _history_git(
        ["--no-replace-objects", "cat-file", "--batch-check=%(objectname) %(objecttype)"],
        root,
        b"\n".join(hashed) + b"\n",
    )
    present = {ln.split()[0] for ln in checked.splitlines() if ln.endswith(b" blob")}
    return {r: b.decode() for r, b in zip(rels, hashed, strict=True) if b in present}


def refs_containing(root: str, commits: list[str]) -> list[str]:
    """The refs whose history holds any of commits (~60 ms on 100,000 commits)."""
    args = [a for c in commits for a in ("--contains", c)]
    return [os.fsdecode(r) for r in _history_git(["for-each-ref", *args, "--format=%(refname)"], root).splitlines()]


class HistoryError(Exception):
    """A history git call failed or timed out; its stderr is never shown (it can quote any file a session
    linked into .git, as `unexpected line in .git/packed-refs: API_KEY=…`)."""


TYPE_CHECKING = False
if TYPE_CHECKING:
    import threading

HISTORY_TIMEOUT = 600.0  # seconds per call: a FIFO a session planted in .git must not hang explain forever
_HISTORY_ENV = {**os.environ, "GIT_NO_LAZY_FETCH": "1", "GIT_TERMINAL_PROMPT": "0"}


def _deadline(proc: subprocess.Popen[bytes]) -> threading.Timer:
    import threading  # never on the launch path

    timer = threading.Timer(HISTORY_TIMEOUT, proc.kill)
    timer.daemon = True
    timer.start()
    return timer


def _history_git(args: list[str], root: str, stdin: bytes | None = None, ok: tuple[int, ...] = (0,)) -> bytes:
    try:
        proc = _run(args, root, stdin, _HISTORY_ENV, HISTORY_TIMEOUT, new_session=True)
    except GitTimeout:
        raise HistoryError(f"git {args[0]} took longer than {HISTORY_TIMEOUT:.0f} s") from None
    if proc.returncode not in ok:
        raise HistoryError(f"git {args[0]} exited with status {proc.returncode}")
    return proc.stdout
