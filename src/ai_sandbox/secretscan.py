"""Secrets in files the agent can read: a tracked `settings.py` with an AWS key, a `.npmrc` with a token, a
token in the agent's own state. Nothing is ignored there, so nothing is hidden; this finds them, for
`explain --secrets`, `doctor` and `init`'s suggestions, with detect-secrets (Yelp's maintained detector set:
cloud keys, private keys, tokens, high-entropy strings; its rules are not ours to keep).

A scan reads only what changed since the last one: each file's result is remembered under its git blob id
when git tracks it unmodified (shared by every branch and worktree that holds the same content), otherwise
under its inode, size and modification time. A finding names file, line and kind, never the secret. The
launch never scans; it reads the summary the last scan left (`summary`) and prints one line.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
from collections.abc import Iterable, Iterator, Mapping

from ai_sandbox import paths
from ai_sandbox.fs import printable, read_json, write_atomic
from ai_sandbox.records import record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ai_sandbox.layers.tree import Tree
    from ai_sandbox.policy import Policy

VERSION = 2  # 2: a file's answer is [[line, [kinds]]]
Hits = list[tuple[int, list[str]]]  # one file's findings: (line, kinds), by line
MAX_SIZE = 2 << 20  # larger files are logs, data or bundles: not scanned (said in explain)
MAX_HOME_FILES = 20_000  # files scanned in the agent's home state
MAX_SUMMARY = 200  # findings kept for the launch's line (a session can plant thousands of fake keys)


@record
class Secret:
    path: str  # absolute
    line: int
    kinds: list[str]  # detect-secrets' names ("AWS Access Key", "Private Key", …)
    scope: str  # "project" or "agent home"


@record
class Scan:
    findings: list[Secret]
    scanned: int  # files looked at
    reused: int  # of those, answered from the cache
    skipped: int  # too large to scan


def project_files(policy: Policy, trees: Iterable[Tree]) -> Iterator[tuple[str, str]]:
    """(path, cache key) for every tracked and untracked-not-ignored file the policy leaves readable."""
    for tree in trees:
        root = os.path.join(policy.root, tree.prefix).rstrip("/")
        # keyed by inode, size and mtime, tracked files too: asking git which of them changed (diff-files) reads
        # stat-dirty files through their clean filters, a submodule's own included (red team, S1)
        for rel in tree.scan.blobs:
            path = os.path.join(root, rel)
            key = _stat_key(path) if policy.hidden(path) is None else ""  # "": not a regular file (a link)
            if key:
                yield path, key
        for rel, is_dir in tree.scan.untracked:
            path = os.path.join(root, rel.rstrip("/"))
            for p in _walk(path) if is_dir else [path]:
                if policy.hidden(p) is None:
                    key = _stat_key(p)
                    if key:
                        yield p, key


def home_files(patterns: Iterable[str], home: str) -> Iterator[tuple[str, str]]:
    """(path, cache key) for the files of an agent's home state (its profile's `home`)."""
    import glob

    count = 0
    for pattern in patterns:
        expanded = home + pattern[1:] if pattern.startswith("~") else pattern
        for top in glob.glob(expanded.rstrip("/")):
            for p in _walk(top):
                key = _stat_key(p)
                if key:
                    yield p, key
                    count += 1
                    if count >= MAX_HOME_FILES:
                        return


def _walk(top: str) -> Iterator[str]:
    """Regular files under top (top itself if a file); symlinks are not followed, nested repositories are
    their own trees."""
    try:
        st = os.lstat(top)
    except OSError:
        return
    if stat.S_ISREG(st.st_mode):
        yield top
        return
    if not stat.S_ISDIR(st.st_mode):
        return
    stack = [top]
    while stack:
        d = stack.pop()
        try:
            with os.scandir(d) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError:
            continue
        if d != top and any(e.name == ".git" for e in entries):
            continue
        for e in entries:
            if e.is_dir(follow_symlinks=False):
                stack.append(e.path)
            elif e.is_file(follow_symlinks=False):
                yield e.path


def _stat_key(path: str) -> str:
    """inode, size and mtime of a regular file; "" for anything else (FIFOs are never opened)."""
    try:
        st = os.lstat(path)
    except OSError:
        return ""
    if not stat.S_ISREG(st.st_mode):
        return ""
    return f"stat:{st.st_dev}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}"


def scan(files: Iterable[tuple[str, str, str]], cache: dict[str, Hits]) -> Scan:
    """files: (path, cache key, scope). cache: key -> [(line, kinds), …], updated in place to hold exactly
    the files of this scan."""
    from detect_secrets.core.scan import scan_file
    from detect_secrets.settings import default_settings

    out = Scan([], 0, 0, 0)
    fresh: dict[str, Hits] = {}
    with default_settings():
        for path, key, scope in files:
            out.scanned += 1
            hits = cache.get(key)
            if hits is not None:
                out.reused += 1
            else:
                try:
                    st = os.lstat(path)
                except OSError:
                    continue
                if not stat.S_ISREG(st.st_mode) or os.path.realpath(path) != path:
                    continue  # a link, or a path through a linked directory: its target is not this file
                if st.st_size > MAX_SIZE:
                    out.skipped += 1
                    continue
                lines: dict[int, list[str]] = {}
                with contextlib.suppress(OSError, UnicodeError, ValueError):
                    for s in scan_file(path):
                        lines.setdefault(int(s.line_number), []).append(str(s.type))
                hits = [(n, sorted(set(kinds))) for n, kinds in sorted(lines.items())]
            fresh[key] = hits
            out.findings += [Secret(path, n, kinds, scope) for n, kinds in hits]
    cache.clear()
    cache.update(fresh)
    return out


def cache_file(env: Mapping[str, str], root: str) -> str:
    return paths.project_cache(env, root, "secrets")


def load_cache(env: Mapping[str, str], root: str) -> dict[str, Hits]:
    """The remembered answers; an entry that is not [[line, [kind, …]], …] is dropped (its file is read again)."""
    doc = read_json(cache_file(env, root), 256 << 20)
    if not isinstance(doc, dict) or doc.get("version") != VERSION or not isinstance(doc.get("files"), dict):
        return {}
    out: dict[str, Hits] = {}
    for key, hits in doc["files"].items():
        try:
            out[key] = [
                (n, [str(k) for k in kinds]) for n, kinds in hits if isinstance(n, int) and isinstance(kinds, list)
            ]
        except (TypeError, ValueError):
            continue
    return out


def save(env: Mapping[str, str], root: str, cache: dict[str, Hits], result: Scan) -> None:
    """The per-file answers, and beside them the small summary the launch reads."""
    write_atomic(cache_file(env, root), json.dumps({"version": VERSION, "files": cache}).encode())
    summary = [[f.path, f.line, f.kinds, f.scope] for f in result.findings[:MAX_SUMMARY]]
    doc = {"version": VERSION, "found": summary, "total": len(result.findings)}
    write_atomic(cache_file(env, root) + ".found", json.dumps(doc).encode())


def summary(env: Mapping[str, str], root: str) -> list[Secret]:
    """What the last scan found (its first MAX_SUMMARY findings), without the files gone since: the launch's
    line. Read defensively: a damaged file means no line, never a blocked or failed launch."""
    doc = read_json(cache_file(env, root) + ".found", 1 << 20)
    try:
        if not isinstance(doc, dict) or doc.get("version") != VERSION:
            return []
        found = [Secret(str(p), int(n), [str(k) for k in kinds], str(s)) for p, n, kinds, s in doc["found"]]
    except (TypeError, ValueError, KeyError):
        return []
    return [f for f in found[:MAX_SUMMARY] if os.path.lexists(f.path)]


def loud(found: list[Secret], root: str) -> str | None:
    if not found:
        return None
    files = list(dict.fromkeys(f.path for f in found))
    shown = ", ".join(printable(os.path.relpath(p, root)) for p in files[:3]) + (", …" if len(files) > 3 else "")
    many = "+" if len(found) >= MAX_SUMMARY else ""
    return (
        f"the last secret scan found {len(found)}{many} secret(s) in {len(files)} file(s) the agent can read ({shown}): "
        "`ai-sandbox explain --secrets` lists them"
    )


def run(env: Mapping[str, str], policy: Policy, trees: Iterable[Tree], home_patterns: Iterable[str] = ()) -> Scan:
    """Scan what the agent can read here (and its home state), reusing and then replacing the cache."""
    home = env.get("HOME") or os.path.expanduser("~")
    files = [(p, k, "project") for p, k in project_files(policy, trees)]
    seen = {p for p, _, _ in files}
    files += [(p, k, "agent home") for p, k in home_files(home_patterns, home) if p not in seen]
    cache = load_cache(env, policy.root)
    result = scan(files, cache)
    with contextlib.suppress(OSError):
        save(env, policy.root, cache, result)
    return result
