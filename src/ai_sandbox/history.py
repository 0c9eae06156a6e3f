"""Hidden content git still holds: earlier versions of a path the sandbox hides, reachable from a branch, a
tag, a stash or a reflog entry, or left unreferenced in the object store (`git add` then `reset`, a dropped
stash). A mask hides the file; inside, `git log -p` and `git show REV:path` still print what git kept. This
finds it, so `explain` can say where and how to remove it, and the launch can say that it exists.

The walk is one `git log --all --reflog --raw` filtered here: 2.4 s on 100,000 commits. Pathspecs measured
far slower (82 s with 1,000 of them: git matches each against every tree entry) and GitPython's object model
slower still (90 s for 5,000 commits of that repository), so plain git it is. It never runs on the launch
path: the launch reads the last answer (`load`), compares its key with the repository's refs, reflogs and
hidden paths (`state_key`: stat calls only) and, when they moved, the watcher refreshes it in a background
process (`refresh`), so the next launch knows.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Iterable, Mapping

from ai_sandbox import git, paths
from ai_sandbox.fs import below, printable, read_json, write_atomic
from ai_sandbox.paths import sha256
from ai_sandbox.policy import CRYPT, HISTORY, Notice, Policy
from ai_sandbox.records import factory, record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ai_sandbox.layers.tree import Tree

VERSION = 1
MAX_HASHED = 8 << 20  # a hidden file larger than this is not hashed for the object-store check
MAX_REF_QUERIES = 100  # findings whose refs are named (one `for-each-ref --contains` each)
MAX_EXAMPLES = 20  # history paths listed per hidden directory
_EMPTY_BLOB = "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391"  # an empty file: nothing to hide


@record
class Target:
    """The hidden paths of one work tree (the project or a repository nested in it), relative to its root."""

    root: str
    files: set[str] = factory(set)
    dirs: set[str] = factory(set)  # without the trailing "/"; "" is the whole work tree
    masks: dict[str, str] = factory(dict)  # relative hidden path -> the mask's path, as explain lists it
    common_dir: str = ""
    scan: git.Scan | None = None  # what git listed here: the tracked paths, decoded only by the walk

    def owner(self, rel: str) -> str | None:
        """The hidden path (relative) that covers rel: itself, or the nearest hidden directory above it."""
        if rel in self.files or rel in self.dirs:
            return rel
        if "" in self.dirs:
            return ""
        i = rel.rfind("/")
        while i > 0:
            if rel[:i] in self.dirs:
                return rel[:i]
            i = rel.rfind("/", 0, i)
        return None


@record
class Finding:
    """Content of one hidden path (a file, or anything under a hidden directory) that git still holds."""

    mask: str  # the hidden path, absolute
    is_dir: bool
    paths: list[str]  # where the content sat in history, relative to the work tree (at most MAX_EXAMPLES)
    path_count: int
    versions: int  # distinct contents
    first_commit: str  # the oldest commit that put such content there ("" when only the object store has it)
    first_date: int  # its committer time (seconds since the epoch)
    via: str  # "ref": a branch, tag or stash reaches it; "reflog": only a reflog entry; "unreachable": only a
    # dangling commit (a dropped stash, a reset and expired branch); "store": the current content, stored but
    # in no commit (added, then reset)
    refs: list[str]  # refs whose history holds it (refs/heads/…, refs/stash)
    root: str  # the work tree whose repository holds it
    tracked: bool = False  # the hidden path is tracked now

    def remedy(self) -> str:
        rel = os.path.relpath(self.mask, self.root)
        spec = f"--path {_shell(rel + '/')}" if self.is_dir and rel != "." else f"--path {_shell(self.paths[0])}"
        expire = "git reflog expire --expire-unreachable=now --all && git gc --prune=now"
        if self.via == "ref" and set(self.refs) != {"refs/stash"}:
            return f"rewrite history with `git filter-repo --invert-paths {spec}`, then rotate the secret"
        if self.via == "ref":
            return f"`git stash drop` the stash that holds it (`git stash list`), then `{expire}`; rotate the secret"
        return f"`{expire}` removes it; rotate the secret"

    def message(self) -> str:
        what = f"{self.path_count} path(s) under hidden {self.mask}/" if self.is_dir else f"{self.mask} hidden, but"
        if self.via == "store":
            where = "its current content is in git's object store, in no commit (added, then reset; `git fsck --lost-found` recovers it)"
        else:
            import time

            date = time.strftime("%Y-%m-%d", time.gmtime(self.first_date))
            reach = {
                "ref": "reachable from " + ", ".join(self.refs[:3]) + (" …" if len(self.refs) > 3 else ""),
                "reflog": "reachable only from a reflog entry",
                "unreachable": "only in a dangling commit (a dropped stash or discarded commit)",
            }[self.via]
            where = (
                f"{self.versions} version(s) in git history since {self.first_commit[:10]} ({date}), {reach}: "
                f"`git show {_shell(self.first_commit[:12] + ':' + self.paths[0])}` prints one"
            )
        if self.is_dir:
            return f"{what}: {where}; {self.remedy()}"
        return f"{what} {where}; {self.remedy()}"


def _shell(s: str) -> str:
    import shlex

    return shlex.quote(s)


def targets(policy: Policy, trees: Iterable[Tree]) -> list[Target]:
    """Each work tree's hidden paths: every mask inside it except git-crypt's (its history holds only
    ciphertext, and the key is hidden), given to the deepest work tree that holds it."""
    by_root = sorted(
        ((os.path.join(policy.root, t.prefix).rstrip("/") or "/", t) for t in trees), key=lambda x: -len(x[0])
    )
    out: dict[str, Target] = {}
    for m in policy.masks:
        if m.layer == CRYPT:
            continue
        for root, tree in by_root:
            if m.path == root or below(m.path, root):
                t = out.get(root)
                if t is None:
                    t = out[root] = Target(root, common_dir=tree.scan.repo.common_dir, scan=tree.scan)
                rel = "" if m.path == root else m.path[len(root.rstrip("/")) + 1 :]  # normal paths: no relpath
                (t.dirs if m.is_dir or m.path == root else t.files).add(rel)
                t.masks[rel] = m.path
                break
    return list(out.values())


# --- the walk ---------------------------------------------------------------------------------------------


@record
class _Seen:
    blobs: set[str] = factory(set)
    first: tuple[int, str] = (1 << 62, "")  # (committer time, commit)
    via: str = "unreachable"
    commits: dict[str, int] = factory(dict)  # commit -> committer time


_RANK = {"ref": 0, "reflog": 1, "unreachable": 2}


def walk(target: Target) -> list[Finding]:
    """Every reachable (and dangling) version of the target's hidden paths, one finding per hidden path."""
    dangling = set(git.unreachable_commits(target.root))
    seen: dict[str, _Seen] = {}  # history path -> what was seen there
    owners: dict[str, str | None] = {}
    for commit, ctime, source, rel, blob in git.blob_changes(target.root, sorted(dangling)):
        owner = owners.get(rel, "?")
        if owner == "?":
            owner = owners[rel] = target.owner(rel)
        if owner is None or blob == _EMPTY_BLOB:
            continue
        s = seen.get(rel)
        if s is None:
            s = seen[rel] = _Seen()
        s.blobs.add(blob)
        s.commits[commit] = ctime
        s.first = min(s.first, (ctime, commit))
        via = "unreachable" if commit in dangling else ("reflog" if not source or "@{" in source else "ref")
        if _RANK[via] < _RANK[s.via]:
            s.via = via
    tracked = set(target.scan.tracked) if target.scan is not None else set()
    findings = _group(target, seen, owners, tracked)
    findings += _stored(target, {b for s in seen.values() for b in s.blobs}, tracked)
    _name_refs(target.root, findings, seen, dangling)
    return findings


def _group(
    target: Target, seen: Mapping[str, _Seen], owners: Mapping[str, str | None], tracked: set[str]
) -> list[Finding]:
    """One finding per hidden path; owners: each history path's hidden path, as the walk found it."""
    by_mask: dict[str, list[str]] = {}
    for rel in seen:
        by_mask.setdefault(owners[rel] or "", []).append(rel)
    out = []
    for owner, rels in sorted(by_mask.items()):
        rels.sort()
        ss = [seen[r] for r in rels]
        first = min(s.first for s in ss)
        out.append(
            Finding(
                target.masks[owner], owner in target.dirs, rels[:MAX_EXAMPLES], len(rels),
                sum(len(s.blobs) for s in ss), first[1], first[0], min((s.via for s in ss), key=_RANK.__getitem__),
                [], target.root, tracked=any(r in tracked for r in rels),
            )
        )  # fmt: skip
    return out


def _stored(target: Target, known: set[str], tracked: set[str]) -> list[Finding]:
    """Hidden files whose current content git stores outside any commit walked (`git add`, then reset)."""
    rels = []
    for rel in sorted(target.files):
        path = os.path.join(target.root, rel)
        with contextlib.suppress(OSError):
            if os.path.isfile(path) and os.stat(path).st_size <= MAX_HASHED:
                rels.append(rel)
    stored = git.stored_blobs(target.root, rels) if rels else {}
    return [
        Finding(target.masks[rel], False, [rel], 1, 1, "", 0, "store", [], target.root, tracked=rel in tracked)
        for rel, blob in stored.items()
        if blob not in known and blob != _EMPTY_BLOB
    ]


def _name_refs(root: str, findings: list[Finding], seen: Mapping[str, _Seen], dangling: set[str]) -> None:
    """Which refs hold each finding's content (`for-each-ref --contains`, ~60 ms on 100,000 commits), and so
    how it is reached: a ref, else only a reflog entry, else only dangling commits. git log's own %S is no
    guide: a commit the reflog walk reached first carries no ref name."""
    for i, f in enumerate(findings):
        if f.via == "store":
            continue
        commits = {c: t for rel in f.paths for c, t in seen[rel].commits.items()}
        if i < MAX_REF_QUERIES:
            by_time = sorted(commits, key=commits.__getitem__)
            f.refs = git.refs_containing(root, by_time[-40:] + by_time[:10])  # the newest are the likeliest held
        if f.refs:
            f.via = "ref"
        elif set(commits) <= dangling:
            f.via = "unreachable"
        elif i < MAX_REF_QUERIES:
            f.via = "reflog"


# --- the answer, remembered ------------------------------------------------------------------------------


def state_key(tgts: list[Target]) -> str:
    """What the findings depend on, by stat calls only (it runs on the launch path): the hidden paths, and
    each repository's refs, reflogs, packs and loose-object directories (a hidden file's content stored by
    `git add` lands in one). Not the hidden files themselves: new content git does not store changes nothing."""
    h = sha256(b"%d\0" % VERSION)
    for t in sorted(tgts, key=lambda t: t.root):
        h.update(os.fsencode(t.root) + b"\0")
        for rel in sorted(t.masks):
            h.update(os.fsencode(rel) + (b"/\0" if rel in t.dirs else b"\0"))
    for d in sorted({t.common_dir for t in tgts}):
        for name in ("packed-refs", "HEAD", "objects/pack", "objects/info/packs", "objects/info/alternates"):
            h.update(_stat(os.path.join(d, name)))
        for i in range(256):  # a loose object (`git add`, then reset) changes its directory's mtime
            h.update(_stat(os.path.join(d, "objects", f"{i:02x}")))
        for sub in ("refs", "logs"):
            for path in _files(os.path.join(d, sub)):
                h.update(os.fsencode(path) + _stat(path))
    return h.hexdigest()[:32]


def _stat(path: str) -> bytes:
    try:
        st = os.stat(path)
    except OSError:
        return b"-\0"
    return b"%d:%d:%d\0" % (st.st_ino, st.st_size, st.st_mtime_ns)


def _files(top: str, limit: int = 20_000) -> list[str]:
    """The files under top (loose refs, reflogs); at most `limit` (a repository with more loose refs pays
    a refresh it may not need, never a stale answer it should not trust: the count goes into the key)."""
    out: list[str] = []
    stack = [top]
    while stack and len(out) < limit:
        try:
            with os.scandir(stack.pop()) as it:
                for e in it:
                    if e.is_dir(follow_symlinks=False):
                        stack.append(e.path)
                    else:
                        out.append(e.path)
        except OSError:
            continue
    out.sort()
    return out


@record
class Cached:
    key: str
    findings: list[Finding]
    errors: list[str] = factory(list)  # repositories whose history could not be read (git's words never kept)

    def loud(self, root: str) -> str | None:
        """The launch's one line, or None."""
        if not self.findings:
            return None
        masks = list(dict.fromkeys(f.mask for f in self.findings))
        shown = ", ".join(printable(os.path.relpath(m, root)) for m in masks[:3]) + (", …" if len(masks) > 3 else "")
        return (
            f"{len(masks)} hidden path(s) readable through git history ({shown}): "
            "`ai-sandbox explain --history` says where and how to remove them"
        )


def cache_file(env: Mapping[str, str], root: str) -> str:
    return paths.project_cache(env, root, "history")


_TYPES = {n: t for n, t in Finding.__annotations__.items()}
_CHECK = {"str": str, "bool": bool, "int": int, "list[str]": list}


def load(env: Mapping[str, str], root: str) -> Cached | None:
    """The last answer for this project, or None (never computed, unreadable, damaged, an older format)."""
    doc = read_json(cache_file(env, root), 64 << 20)
    try:
        if not isinstance(doc, dict) or doc.get("version") != VERSION or not isinstance(doc["key"], str):
            return None
        found = []
        for f in doc["findings"]:
            if set(f) != set(_TYPES) or not all(isinstance(f[n], _CHECK[str(t)]) for n, t in _TYPES.items()):
                return None
            found.append(Finding(**f))
        return Cached(doc["key"], found, [str(e) for e in doc.get("errors", [])])
    except (TypeError, KeyError, AttributeError):
        return None


def save(env: Mapping[str, str], root: str, cached: Cached) -> None:
    doc = {
        "version": VERSION, "key": cached.key, "findings": [as_dict(f) for f in cached.findings],
        "errors": cached.errors,
    }  # fmt: skip
    write_atomic(cache_file(env, root), json.dumps(doc, ensure_ascii=True).encode())


def as_dict(f: Finding) -> dict[str, object]:
    return {n: getattr(f, n) for n in Finding.__annotations__}


def compute(tgts: list[Target], key: str) -> Cached:
    findings: list[Finding] = []
    errors: list[str] = []
    for t in tgts:
        try:
            findings += walk(t)
        except (git.HistoryError, OSError) as e:
            errors.append(f"{t.root}: {e}")
    return Cached(key, findings, errors)


def current(env: Mapping[str, str], root: str, tgts: list[Target]) -> Cached:
    """The findings as the repository stands (explain, --dry-run): the remembered answer when its key still
    matches, else a new walk, remembered for the launches that follow."""
    key = state_key(tgts)
    cached = load(env, root)
    if cached is None or cached.key != key:
        cached = compute(tgts, key)
        with contextlib.suppress(OSError):
            save(env, root, cached)
    return cached


def refresher(env: Mapping[str, str], root: str, tgts: list[Target], key: str) -> Callable[[], None]:
    """What the watcher runs in the background when the remembered answer is stale."""

    def run() -> None:
        save(env, root, compute(tgts, key))

    return run


def notices(cached: Cached, skip: set[str]) -> list[Notice]:
    """One `history` notice per finding, except for the masks in skip (a tracked file's notice says it), and
    one per repository whose history could not be read."""
    out = [Notice(HISTORY, f.message(), f.mask) for f in cached.findings if f.mask not in skip and not f.tracked]
    out += [
        Notice(HISTORY, f"git history could not be read ({e}); hidden content git holds there is not reported")
        for e in cached.errors
    ]
    return out
