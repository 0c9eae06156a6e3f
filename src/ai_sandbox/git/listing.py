"""What git lists of one work tree — ignored, untracked, the index — and the few other questions a launch asks
about ignore rules, attributes and the index. git is the source of truth for what is ignored; a git failure is
never read as "nothing is ignored".
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Callable, Sequence

from ai_sandbox import prefetch, spawn
from ai_sandbox.errors import PolicyError, UnavailableError
from ai_sandbox.git.repo import Repo
from ai_sandbox.git.run import (
    TIMEOUT,
    _git,
    _git_error,
    _run,
    _split_z,
    _timeout,
    not_installed,
)
from ai_sandbox.gitcommand import GIT, QUICK, SCAN, argv, scan_env


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
            if self._has_skipped():
                self._split_index()
        return self._skip

    def _has_skipped(self) -> bool:
        """Any entry tagged S, or s (assume-unchanged too: the scan lists with -v)? No copy of the listing made."""
        return self._index.startswith((b"S ", b"s ")) or b"\0S " in self._index or b"\0s " in self._index

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
        if not self._has_skipped():
            return {}
        out = {}
        for rec in self._index.split(b"\0"):
            if rec.startswith((b"S ", b"s ")):
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
            if meta.startswith((b"S ", b"s ")):
                skip.add(path)
        self._tracked, self._gitlinks, self._skip, self._metas = tracked, links, skip, metas


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


def scan(repo: Repo, meanwhile: Callable[[], None] | None = None) -> Scan:
    """Ignored entries (directories collapsed), untracked ones, and the index: three `git ls-files` run
    side by side. ls-files never reads file contents, so no filter a repository configures can run (git
    status would run clean filters on changed tracked files), and it does not walk into a directory an
    ignore pattern matches (git 2.39's status --ignored does: 2.7 s against 0.2 s on a 1M-file repo).

    A fourth call reads the config git-crypt depends on. What git printed on stderr is read too: a
    directory it could not open is named in `unlisted` (nothing in it was listed, ignored or not), and any
    other message refuses — an unreadable .gitignore means the listing is not what the user wrote. meanwhile runs
    while git walks (the launch reads its remembered listings then)."""
    calls = dict(SCAN)
    if _config_may_matter(repo):
        calls["config"] = ["config", "-z", "--get-regexp", _CONFIG_KEYS]
    env = scan_env()
    started: dict[str, spawn.Child] = {}
    try:
        for name, args in calls.items():
            command = argv(args, repo.root)  # started as the command started, if it was (prefetch.py)
            started[name] = prefetch.adopt(command, env) or spawn.start(command, env)
    except BaseException as e:  # the ones started are killed and reaped, whatever stopped the next (EMFILE)
        _give_up(started)
        if isinstance(e, FileNotFoundError):
            raise not_installed() from None
        raise
    if meanwhile is not None:
        try:
            meanwhile()
        except BaseException:
            _give_up(started)
            raise
    # every pipe read as it fills: git blocks on a full pipe, and a monorepo's index is megabytes (read one call
    # after the other, the index would only finish after the slowest walk); all of it within TIMEOUT, past which
    # the calls are killed and the launch refuses
    try:
        done = spawn.collect(started, TIMEOUT)
    except spawn.TimedOut:
        raise _timeout(["ls-files"], repo.root, TIMEOUT) from None
    for name, proc in done.items():
        if proc.returncode not in ((0, 1) if name == "config" else (0,)):  # config: 1 when no key is set
            raise _git_error(calls[name], repo.root, proc.stderr)
    result = Scan(repo, index=done["index"].stdout)
    for name in ("ignored", "untracked", "index"):
        result.unlisted += _unlisted(done[name].stderr, repo.root)
    result.unlisted = sorted(set(result.unlisted))
    result.ignored = _collapse(_split_z(done["ignored"].stdout))
    result.untracked = [(p.rstrip("/"), p.endswith("/")) for p in _split_z(done["untracked"].stdout)]
    config = _read_config(done["config"].stdout if "config" in done else b"", repo.root)
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
    from ai_sandbox.verify import read_regular  # standard library only: costs nothing

    for path in (*files, os.path.join(xdg, "git", "config"), os.path.join(repo.common_dir, "config")):
        try:
            # a FIFO or a device there (a session can write .git/config) is git's to time out on, not this read's
            text = read_regular(path, 16 << 20, follow=True).lower()
        except (FileNotFoundError, NotADirectoryError):
            continue
        except OSError:
            return True
        if any(n in text for n in _CONFIG_NEEDLES):
            return True
    return False


def _git_prefix() -> str:
    """git's installation prefix (/usr for /usr/bin/git), under which it finds etc/ when it is not /usr."""
    return os.path.dirname(os.path.dirname(os.path.realpath(GIT[0])))


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


def _give_up(started: dict[str, spawn.Child]) -> None:
    """The calls already started, when a later one could not be: killed and reaped."""
    with contextlib.suppress(spawn.TimedOut):
        spawn.collect(started, 0)


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


def index_entries(root: str, dirs: list[str], files: Sequence[str] = ()) -> list[tuple[str, str, str, str]]:
    """(mode, object id, stage, path) of every index entry in these directories, and at these paths (relative,
    literal). The whole index is listed and its entries picked here, as git's literal pathspecs `DIR/` and `PATH`
    would: git matches every entry against every pathspec (1,000 hidden directories on a 50,000-entry index took
    ~0.35 s, as a bwrap session ends, before the user's prompt comes back), and with a few, all in one directory,
    it looks them up by bisection, missing an entry a session moved out of order in the index it wrote (thirty-second
    red team: a checkout over a hidden file went unnamed)."""
    args = ["ls-files", "-z", "--stage"]
    # QUICK: this runs as a session ends, before the user's prompt comes back under bwrap; a FIFO the session put in
    # the git directory (or its config) would otherwise hold the terminal for TIMEOUT
    proc = _run(args, root, timeout=QUICK)
    if proc.returncode != 0:
        raise _git_error(args, root, proc.stderr)
    out = []
    for rec in _pick([r for r in proc.stdout.split(b"\0") if b"\t" in r], dirs, files):
        meta, _, path = rec.partition(b"\t")
        fields = meta.split(b" ")
        if len(fields) == 3:
            out.append((fields[0].decode(), fields[1].decode(), fields[2].decode(), os.fsdecode(path)))
    return out


def _pick(records: list[bytes], dirs: Sequence[str], files: Sequence[str]) -> list[bytes]:
    """The index records (`MODE OID STAGE\tPATH`) the literal pathspecs `DIR/` and `PATH` would pick, in their order.
    The index is sorted by path, so each pathspec's entries are one run, found by bisection (~2 ms for 1,000
    directories; asking each entry is ~60 ms); an index not sorted (a session can write one) is asked entry by entry."""
    import bisect
    import operator

    paths = [r[r.index(b"\t") + 1 :] for r in records]
    if not all(map(operator.le, paths, paths[1:])):
        picked = _Picked(dirs, files)
        return [r for r, p in zip(records, paths, strict=True) if picked(p, r.startswith(b"160000 "))]
    found: set[int] = set()

    def run(prefix: bytes, exact: bool, gitlink_only: bool) -> None:
        i = bisect.bisect_left(paths, prefix)
        while i < len(paths) and (paths[i] == prefix if exact else paths[i].startswith(prefix)):
            if not gitlink_only or records[i].startswith(b"160000 "):
                found.add(i)
            i += 1

    for d in dirs:
        name = os.fsencode(d)
        run(name + b"/", False, False)
        run(name, True, True)  # `DIR/` picks a submodule named DIR
    for f in files:
        name = os.fsencode(f)
        run(name, True, False)
        run(name + b"/", False, False)
    return [records[i] for i in sorted(found)]


class _Picked:
    """Whether an index path lies in one of the directories or at (or below) one of the paths, as literal pathspecs
    `DIR/` and `PATH` would pick it (`DIR/` picks a submodule named DIR too); the answer for each parent directory
    is remembered."""

    def __init__(self, dirs: Sequence[str], files: Sequence[str]) -> None:
        self.at = {os.fsencode(f) for f in files}
        self.dirs = {os.fsencode(d) for d in dirs}
        self.prefixes = self.at | self.dirs
        self.parents: dict[bytes, bool] = {}

    def __call__(self, path: bytes, gitlink: bool = False) -> bool:
        if path in self.at or (gitlink and path in self.dirs):
            return True
        unknown = []  # parents not remembered yet, deepest first: a loop, as a path can be thousands deep
        hit = False
        parent = path
        while parent := parent[: max(parent.rfind(b"/"), 0)]:
            known = self.parents.get(parent)
            if known is not None:
                hit = known
                break
            if parent in self.prefixes:
                hit = self.parents[parent] = True
                break
            unknown.append(parent)
        for p in unknown:
            self.parents[p] = hit
        return hit


_OBJECT_ID = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
_PLAIN = {"GIT_LITERAL_PATHSPECS": "1", "GIT_NO_REPLACE_OBJECTS": "1", "GIT_GRAFT_FILE": os.devnull}


def stashed_untracked(root: str, commit: str, dirs: list[str]) -> list[str] | None:
    """The untracked files a stash commit (an object id) holds in these directories (`stash -u`/`-a`: its third
    parent); none for a stash without them; None for one git cannot read as it was: pruned, or its third parent's
    object deleted. Its parents are read from the commit object itself: replace refs, grafts and the shallow list
    change what git walks (a session that dropped the third parent that way made a popped stash look like one
    without untracked files: nineteenth and twentieth red teams)."""
    env = {**os.environ, **_PLAIN}
    raw = _run(["cat-file", "commit", commit], root, env=env, timeout=QUICK)
    if raw.returncode != 0:
        return None
    head = raw.stdout.split(b"\n\n", 1)[0].split(b"\n")
    parents = [ln[7:].decode("ascii", "replace") for ln in head if ln.startswith(b"parent ")]
    if len(parents) < 3:  # HEAD, the index, the untracked files
        return []
    args = ["ls-tree", "-r", "-z", "--name-only", parents[2], "--", *(d + "/" for d in dirs)]
    proc = _run(args, root, env=env, timeout=QUICK)
    return _split_z(proc.stdout) if proc.returncode == 0 else None


def stash_ids(root: str) -> list[str] | None:
    """The stashes git lists, as object ids, asked of plumbing: `git stash list` is `git log -g`, which checks a
    signed commit's signature with the program the repository's config names (`log.showSignature`, `gpg.program`:
    a session's stash ran its script outside the sandbox that way, twenty-second red team). None when git cannot
    say (no stash: git removed refs/stash with the last one)."""
    args = ["rev-list", "--walk-reflogs", "refs/stash", "--"]
    proc = _run(args, root, env={**os.environ, **_PLAIN}, timeout=QUICK)
    if proc.returncode != 0:
        return None
    # object ids only: they go into a line the user may paste (eighteenth red team)
    return [ln for ln in proc.stdout.decode("ascii", "replace").split("\n") if _OBJECT_ID.fullmatch(ln)]


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
