"""What earlier launches hid: a launch never un-hides it silently.

The rules come from files an agent can edit from inside (.gitignore, .ai-sandbox.toml, your config.toml), and
so does the layout they apply to (directory names, where a git repository starts): without a memory, one
session could make the next one reveal a secret. So every launch records what it hid, and the next launch
refuses while something recorded would be readable, until the user runs `ai-sandbox accept`. The records are
read-only inside the sandbox.

What a record says: "these paths were hidden, each one this file (device and inode), an entry of this
directory (device and inode)". A session cannot rename a hidden path (it is a mount point) but it can rename a
visible directory above it, and the mask moves along: `mv config config.bak; mkdir config` leaves the old path
naming something new, or nothing. So the next launch refuses when a recorded path exists and would be readable
(a rule changed), and when a recorded directory is no longer at its path but stands elsewhere in the project
with the recorded entry readable there (it was moved; found by inode, whatever its name is now). A session
that does not hide a path (a nested clone's, for the enclosing project's) can rename or swap the path itself:
where a session's log names a recorded path that is another file now, the file it was is searched for the same
way.

Which records apply: the project's own, one per root whatever the agent; at every launch, what the records of
other roots hid inside this launch's trees (its root and the other worktrees it covers) — a record holds the
paths of its root's tree and of the checkouts that launch covered, and a session of one root can edit another's
rules (red team: a worktree's `.gitignore` emptied from the main checkout, a nested clone's from the enclosing
project or from another worktree of it); and, since a session can move the root itself (`git init` in a
subdirectory, `core.worktree` pointing up, deleting a nested `.git`):
- at a root never launched before, the whole records of every recorded root above or below it, and of a
  recorded root that is this very directory under another name (same device and inode);
- the whole record of the root that the last launch from this directory (or the nearest one above) used, when
  it was another root.
An index of recorded roots, the checkouts each covered and launch directories (hidden/index) finds them. Where
the roots' own rules differ (an `allow` in a nested clone's config that the enclosing project's rules do not
know), `accept` at the root that shows the path keeps it readable there: the paths it accepted from other roots'
records are listed beside its record (`<record>.accepted`), and skipped in those records from then on.

Cost: the usual launch (same masks, nothing moved) reads two small files and stats each directory holding
a hidden path, plus the record of each other root whose trees overlap this launch's (where the user launches
from several: a nested clone, another worktree, the project holding them). Only a recorded directory that vanished or changed inode walks the project, once, never into
hidden directories.

A path this agent's profile or the built-in allowlists keep readable is not "un-hidden" while it is still at
its recorded place (those rules are not files a session can edit), so switching agents does not trip it;
decided by the pattern's origin, never by its text. Only where git's ignores alone hid it: the record notes the
paths a rule no allowlist overrides hid (a block, git-crypt), and a session deleting that rule is refused.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Callable, Iterable, Iterator, Mapping

from ai_sandbox import records
from ai_sandbox.errors import PolicyError
from ai_sandbox.fs import inside, some, write_atomic
from ai_sandbox.idents import NONE as _NONE
from ai_sandbox.idents import Snapshot, ident
from ai_sandbox.idents import dirname as _dirname
from ai_sandbox.paths import project_key, state_dir
from ai_sandbox.patterns import CODE
from ai_sandbox.policy import GLOBAL, IGNORED, MERGED, UNHIDDEN, Notice, Policy

MAGIC = b"ai-sandbox hidden 4\0"  # then (path, "DEV:INO" of its directory or "-", its own or "-", why), NUL-terminated
MAGIC_3 = b"ai-sandbox hidden 3\0"  # the format before: (path, directory id, why) triples
MAGIC_2 = b"ai-sandbox hidden 2\0"  # and before it: (path, directory id) pairs
IGNORED_ONLY, BLOCKED = b"i", b"b"  # why: git ignores it (an allowlist may keep it); a rule no allowlist overrides
LOCKS = "locks"  # <state>/locks: every lock file, hidden inside the sandbox
GLOBAL_RECORD = "global"  # hidden/global: the global blocks outside the project, one record for every project


def record_path(env: Mapping[str, str], root: str) -> str:
    return os.path.join(state_dir(env), "hidden", project_key(root))


def global_record_path(env: Mapping[str, str]) -> str:
    """The record of the global blocks outside the project (`~/.aws/credentials`): the user's, not a project's.
    Every launch judges it, a project never launched before included: a session of one project moving
    `~/.aws` aside must not make the next launch of any project show `~/.aws_old/credentials` (red team, F1)."""
    return os.path.join(state_dir(env), "hidden", GLOBAL_RECORD)


def moved_log(env: Mapping[str, str], root: str) -> str:
    """Where each session's watcher notes the hidden paths that moved (`<this>.<pid>`; watch.py)."""
    return record_path(env, root) + ".moved"


def _log_files(env: Mapping[str, str]) -> list[tuple[str, int, str]]:
    """(project key, pid, path) of every session's log, of every project (`<key>.moved.<pid>`)."""
    d = os.path.join(state_dir(env), "hidden")
    try:
        names = os.listdir(d)
    except OSError:
        return []
    out = []
    for name in names:
        key, sep, pid = name.rpartition(".moved.")
        if sep and pid.isdigit():
            out.append((key, int(pid), os.path.join(d, name)))
    return out


@records.record
class _Log:
    """One session's log of the hidden paths that moved (watch.py)."""

    key: str  # the project's record name
    paths: set[str] | None  # None: "any" (the session's watcher could not narrow it)
    alive: bool
    mtime: int  # ns: an ended session's log is final from then on


def _all_logs(env: Mapping[str, str]) -> list[_Log]:
    """Every session's log, of every project: a session of one project may move what another's record holds
    (a global block in the home, a directory both projects hide). Read only when a recorded directory moved."""
    out = []
    for key, pid, path in _log_files(env):
        try:
            mtime = os.stat(path).st_mtime_ns
        except OSError:
            continue
        data = _read(path) or b""
        paths = None if data.startswith(b"*\0") else {os.fsdecode(p) for p in data.split(b"\0") if p}
        out.append(_Log(key, paths, _alive(pid), mtime))
    return out


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # another user's process: alive
    return True


def _moved_during_a_session(path: str, owner: str, logs: list[_Log], since: int, anything: bool = True) -> bool:
    """Whether a session may have moved path away: its log names it (or a directory above it), or says "any"
    for a project whose record holds it (every session hides the global blocks). Only sessions that could have
    moved it after the record looked count: running ones, and those that ended after the record was written.
    anything=False: a log that says "any" does not count (a path gone from a directory still in place: every
    running session's log says "any", and a file you delete while one runs must not refuse every launch)."""
    key = project_key(owner) if owner != GLOBAL_RECORD else None
    for log in logs:
        if not (log.alive or log.mtime >= since):
            continue
        if log.paths is None:
            if anything and (key is None or log.key == key):
                return True
        elif _logged(path, log.paths):
            return True
    return False


def _logged(path: str, seen: set[str]) -> bool:
    """path, or a directory above it, is in a session's log: a directory hidden whole (past the mask
    limit) is logged as itself, the record names the paths inside it."""
    p = path
    while True:
        if p in seen:
            return True
        parent = os.path.dirname(p)
        if parent == p:
            return False
        p = parent


def _settled_logs(env: Mapping[str, str], root: str) -> list[str]:
    """The logs of the project's sessions that had ended when this launch looked (a running one keeps its own)."""
    key = project_key(root)
    return [path for k, pid, path in _log_files(env) if k == key and not _alive(pid)]


def _index_path(env: Mapping[str, str]) -> str:
    return os.path.join(state_dir(env), "hidden", "index")


def _read(path: str) -> bytes | None:
    """The file's bytes; None when there is none."""
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        return None
    except OSError as e:
        raise PolicyError(f"cannot read {path}: {e.strerror}", "check its permissions, or delete it") from None


def _rows(data: bytes | None) -> list[tuple[str, bytes, bytes, bytes]]:
    """A record's (path, id of its directory, its own id, why). The formats before had no own id (b""), the second
    no why, the first paths only (directory id b""): their paths count as blocked, so the first launch after an
    upgrade never exempts one (red team: a format 2 record and `block = ["dist/"]` deleted showed the build output
    once)."""
    if not data:
        return []
    if data.startswith(MAGIC):
        parts = data[len(MAGIC) :].split(b"\0")
        return [(os.fsdecode(parts[i]), parts[i + 1], parts[i + 2], parts[i + 3]) for i in range(0, len(parts) - 3, 4)]
    if data.startswith(MAGIC_3):
        parts = data[len(MAGIC_3) :].split(b"\0")
        return [(os.fsdecode(parts[i]), parts[i + 1], b"", parts[i + 2]) for i in range(0, len(parts) - 2, 3)]
    if data.startswith(MAGIC_2):  # what hid each path is not known: as a block (an allowlist never exempts it)
        parts = data[len(MAGIC_2) :].split(b"\0")
        return [(os.fsdecode(parts[i]), parts[i + 1], b"", BLOCKED) for i in range(0, len(parts) - 1, 2)]
    return [(os.fsdecode(p), b"", b"", BLOCKED) for p in data.split(b"\0") if p]


def _entries(data: bytes | None) -> list[tuple[str, bytes]]:
    """A record's (path, id of its directory)."""
    return [(p, i) for p, i, _, _ in _rows(data)]


_Entry = tuple[str, bytes, bytes]  # (path, id of its directory, its own id)


def _full(data: bytes | None) -> list[_Entry]:
    return [(p, i, o) for p, i, o, _ in _rows(data)]


def _blocked(data: bytes | None) -> set[str]:
    """The paths of a record that a rule no allowlist overrides hid (a block, git-crypt): never exempt because an
    allowlist keeps them now (red team: `block = ["dist/"]` deleted from inside, and the build output shown)."""
    return {p for p, _, _, why in _rows(data) if why == BLOCKED}


def load(path: str) -> list[str]:
    """The paths a record holds."""
    return load_paths(_read(path))


def load_paths(data: bytes | None) -> list[str]:
    return [p for p, _ in _entries(data)]


def recorded(path: str) -> list[_Entry]:
    """A record's (path, id of its directory, its own id, as the launch that wrote it saw them): what the watcher
    compares at a session's end (watch.py)."""
    return _full(_read(path))


def _dir_id(path: str, ids: dict[str, bytes]) -> bytes:
    """b"DEV:INO" of a directory, or a path (remembered per launch: thousands of masks share a few hundred
    directories)."""
    got = ids.get(path)
    if got is None:
        try:
            st = os.lstat(path)
            got = b"%d:%d" % (st.st_dev, st.st_ino)
        except OSError:
            got = _NONE
        ids[path] = got
    return got


def _recorded(policy: Policy, users: Iterable[str] = ()) -> tuple[list[str], list[str], set[str]]:
    """(the project's, the user's global record's) paths of this launch: the masks the rules asked for, and
    where a directory is hidden whole only to fit the backend's limit, the paths inside it (or a later launch
    under the limit would look like an un-hiding). A global block outside the project is the user's; one inside it
    the project's, and the user's too where the user's record holds it (users): a launch from the home itself
    wrote that record empty, and its session's move of ~/.aws went unseen by every other project (fifteenth red
    team). And which of them a rule no allowlist overrides hid (any layer but git's ignores)."""
    mine: list[str] = []
    theirs: list[str] = []
    blocked: set[str] = set()
    held = set(users)
    for m in [*(m for m in policy.masks if m.how not in MERGED), *policy.capped]:
        outside = not inside(m.path, policy.root)
        (theirs if m.layer == GLOBAL and outside else mine).append(m.path)
        if m.layer == GLOBAL and not outside and m.path in held:
            theirs.append(m.path)
        if m.layer != IGNORED:
            blocked.add(m.path)
    return mine, theirs, blocked


def _content(
    paths: list[str],
    ids: dict[str, bytes],
    blocked: set[str] | frozenset[str] = frozenset(),
    own: Mapping[str, bytes] | None = None,
) -> bytes:
    """A record of these paths, each with its directory's id (one lstat per directory: the snapshot's), its own id
    (the snapshot's, for a mask) and why."""
    out = []
    for p in paths:
        out.append(os.fsencode(p))
        out.append(_dir_id(_dirname(p), ids))
        out.append((own or {}).get(p) or _dir_id(p, ids))  # a path inside a directory hidden whole: looked at here
        out.append(BLOCKED if p in blocked else IGNORED_ONLY)
    return MAGIC + b"\0".join(out) + b"\0" if out else MAGIC


def _kept_by_code(policy: Policy) -> set[str]:
    """The paths the profile or the built-in allowlists keep readable, each exempt itself: a path the last launch
    hid is never exempt because a directory above it is kept now. Which directory git lists whole is for a
    session to decide (`.gemini/` added to .gitignore and `git rm --cached`, or the one tracked file of `out/`
    removed, and git lists the directory whole where it listed `.gemini/.env` or `out/token.txt` before: red
    teams read both that way); that an agent's own directory is kept is not."""
    return {k.path for k in policy.kept if k.origin in CODE}


def unhidden(policy: Policy, previous: list[str], blocked: set[str] | frozenset[str] = frozenset()) -> list[str]:
    """Paths the last launch hid that still exist and this policy would leave readable; blocked: those of them a
    rule no allowlist overrides hid."""
    kept = _kept_by_code(policy) - set(blocked)
    return [p for p in previous if policy.hidden(p) is None and p not in kept and os.path.lexists(p)]


# --- the index: which roots have records, and which root each launch directory used -----------------------


@records.record
class _Index:
    """Which roots have records (root -> its "DEV:INO"), which root each launch directory used, and which other
    checkouts each root's launches hid paths in (a worktree's launch hides every checkout's: its record holds
    them)."""

    roots: dict[str, bytes] = records.factory(dict)
    cwds: dict[str, str] = records.factory(dict)
    covers: dict[str, set[str]] = records.factory(dict)

    def dump(self) -> bytes:
        out = [b"root\0%s\0%s\0" % (os.fsencode(r), i) for r, i in sorted(self.roots.items())]
        out += [b"cwd\0%s\0%s\0" % (os.fsencode(c), os.fsencode(r)) for c, r in sorted(self.cwds.items())]
        out += [
            b"cover\0%s\0%s\0" % (os.fsencode(r), os.fsencode(c))
            for r, cs in sorted(self.covers.items())
            for c in sorted(cs)
        ]
        return b"".join(out)


def _load_index(path: str) -> _Index:
    """The index, from NUL-terminated (kind, key, value) triples."""
    index = _Index()
    parts = (_read(path) or b"").split(b"\0")
    for i in range(0, len(parts) - 2, 3):
        kind, key, val = parts[i], os.fsdecode(parts[i + 1]), parts[i + 2]
        if kind == b"root":
            index.roots[key] = val
        elif kind == b"cwd":
            index.cwds[key] = os.fsdecode(val)
        elif kind == b"cover":
            index.covers.setdefault(key, set()).add(os.fsdecode(val))
    return index


def _last_root(cwds: dict[str, str], cwd: str) -> str | None:
    """The root the last launch from cwd, or from the nearest directory above it, used."""
    p = cwd
    while True:
        if p in cwds:
            return cwds[p]
        parent = os.path.dirname(p)
        if parent == p:
            return None
        p = parent


def _related(
    index: _Index,
    root: str,
    root_id: bytes,
    cwd: str,
    first: bool,
    checkouts: tuple[str, ...] = (),
    anywhere: bool = True,
) -> dict[str, tuple[str, ...]]:
    """Other roots whose records apply to this launch (see the module docstring): root -> () when all of its
    record applies, or the trees its paths must be inside (this root and the checkouts it covers). A record holds
    paths of its root's tree and of the checkouts it covered: it applies wherever those overlap this launch's; at
    a root never launched before (and anywhere), every record applies to what lies, or moved, into its trees."""
    mine = (root, *checkouts)
    out: dict[str, tuple[str, ...]] = {}
    for r, rid in index.roots.items():
        if r == root:
            continue
        if first and (inside(r, root) or inside(root, r) or (rid == root_id and rid != _NONE)):
            out[r] = ()
        elif (first and anywhere) or any(
            inside(a, b) or inside(b, a) for a in mine for b in (r, *index.covers.get(r, ()))
        ):
            # at a root never launched before, any record may hold a directory moved here since (a nested clone or
            # a worktree carried out of the project, then detached: red team): what lies in these trees, or moved
            out[r] = mine
    last = _last_root(index.cwds, cwd)
    if last is not None and last != root:
        out[last] = ()
    return out


# --- judging a record against this launch's policy ----------------------------------------------------------


@records.record
class Lost:
    """A recorded path this launch would leave readable."""

    shown: str  # as the refusal names it ("OLD (now NEW)" when its directory moved)
    why: str
    path: str  # as the record holds it
    owner: str  # whose record: a root, or GLOBAL_RECORD


# (owner, the entries of its record that apply, when it was written, the trees they apply in: () for all)
_Source = tuple[str, list[_Entry], int, tuple[str, ...]]


def _dir_moved(path: str, recorded: bytes, ids: dict[str, bytes]) -> bool:
    """The directory a record saw path in is no longer at its place (an lstat per directory, remembered)."""
    return bool(recorded) and recorded != _NONE and _dir_id(_dirname(path), ids) != recorded


def _judge(
    policy: Policy,
    sources: list[_Source],
    ids: dict[str, bytes],
    env: Mapping[str, str],
    blocked: set[str] | frozenset[str] = frozenset(),
    own: Mapping[str, bytes] | None = None,
) -> list[Lost]:
    """What would be readable, for every recorded path of these sources; an owner is a root, or GLOBAL_RECORD. A
    path of another root's record that lies outside this launch's trees counts only where its directory is found
    moved into them. blocked: recorded paths a rule no allowlist overrides hid (never exempt as kept). own: this
    launch's masks' own ids (the snapshot's); None: not compared (inside a sandbox, a mask's id is the mask's)."""
    kept = _kept_by_code(policy) - set(blocked)
    lost: list[Lost] = []
    wanted: dict[bytes, list[tuple[str, str]]] = {}  # directory id -> (recorded path, owner), where it moved
    vanished: list[tuple[str, str]] = []  # gone from a directory still in place
    replaced: dict[bytes, list[tuple[str, str]]] = {}  # own id -> (recorded path, owner): another file at its path
    since = {owner: when for owner, _, when, _ in sources}
    elsewhere = {
        (p, owner)
        for owner, entries, _, within in sources
        if within
        for p, _, _ in entries
        if not any(inside(p, t) for t in within)
    }
    for owner, entries, _, _ in sources:
        if owner == policy.root:
            why = "a rule changed (.gitignore, .ai-sandbox.toml or your config.toml)"
        elif owner == GLOBAL_RECORD:
            why = "a rule changed (your config.toml)"
        else:
            why = _other_root(policy, owner)
        for p, pid, oid in entries:
            if _dir_moved(p, pid, ids):
                wanted.setdefault(pid, []).append((p, owner))
                if owner != GLOBAL_RECORD and (p, owner) not in elsewhere and oid and oid != _NONE:
                    # and the path's own inode: renamed on from where its directory went, a decoy left under its
                    # name hidden again by the same rule (twentieth red team)
                    replaced.setdefault(oid, []).append((p, owner))
            elif (p, owner) not in elsewhere and pid and pid != _NONE and not os.path.lexists(p):
                vanished.append((p, owner))  # deleted, or moved away whole by a session that did not hide it
                continue
            elif (
                owner != GLOBAL_RECORD  # every session hides those: only you replace them
                and (p, owner) not in elsewhere
                and oid
                and oid != _NONE
                and own is not None
                and (own.get(p) or _dir_id(p, {})) != oid
            ):
                replaced.setdefault(oid, []).append((p, owner))  # swapped or replaced: by you, or a session
            if (p, owner) not in elsewhere and policy.hidden(p) is None and p not in kept and os.path.lexists(p):
                lost.append(Lost(p, why, p, owner))
    logs = _all_logs(env) if replaced else []
    # swapped or replaced while a session that did not hide it ran (a nested clone's session swapping the project's
    # hidden secrets/ with its src/: make fuzz): where the recorded file or directory went, found by its own inode
    for oid, ps in list(replaced.items()):
        replaced[oid] = [(p, o) for p, o in ps if _moved_during_a_session(p, o, logs, since[o])]
        if not replaced[oid]:
            del replaced[oid]  # no session could have: yours (an editor saving .env through a rename)
    nowhere: list[tuple[str, str]] = []
    if wanted or replaced:
        found, nowhere = _moved(policy, wanted, replaced)
        # a path searched for by its directory's inode and its own: said once, by what was found first
        lost += list({(x.path, x.owner): x for x in reversed(found)}.values())[::-1]
        nowhere = list(dict.fromkeys(nowhere))
    nowhere = [x for x in nowhere if x not in elsewhere]
    if nowhere or vanished:  # deleted, or moved where no search looks: each session's watcher noted what moved
        logs = logs or _all_logs(env)
        why = "it or a directory above it was moved away during a session (where to is not known)"
        lost += [
            Lost(p, why, p, owner) for p, owner in nowhere if _moved_during_a_session(p, owner, logs, since[owner])
        ]
        # a path gone from a directory still in place: deleted, unless a session that did not hide it moved it (its
        # log names it: a nested clone's session renaming the project's hidden file or directory in place)
        lost += [
            Lost(p, why, p, owner)
            for p, owner in vanished
            if _moved_during_a_session(p, owner, logs, since[owner], anything=False)
        ]
    return lost


def _other_root(policy: Policy, owner: str) -> str:
    """Why another root's record holds a path of this launch, as the refusal says it."""
    if owner in policy.checkouts:
        return f"the last launch in {owner}, another worktree of this repository, hid it"
    if inside(owner, policy.root) and os.path.lexists(os.path.join(owner, ".git")):
        return f"the last launch in the repository {owner}, inside this project, hid it"
    return f"the project root changed (it was {owner}: a new or removed git repository, or a project holding this one)"


# (device, [(recorded path, owner)], whether the inode is the path's own, not its directory's) per inode number
_Wanted = list[tuple[int, list[tuple[str, str]], bool]]


def _moved(
    policy: Policy,
    wanted: dict[bytes, list[tuple[str, str]]],
    replaced: Mapping[bytes, list[tuple[str, str]]] | None = None,
) -> tuple[list[Lost], list[tuple[str, str]]]:
    """Recorded paths whose directory now stands elsewhere (wanted: by the directory's id), or which themselves do
    (replaced: by their own id), readable there; and the (path, owner) of those found nowhere. Searched: the
    project, a walk of what the sandbox shows (hidden directories are skipped: what moved into one is hidden
    still; links are not followed; it stops once everything is found); then, for a path outside the project, the
    directory its own directory was in (`mv ~/.aws ~/.aws_old`). Inode numbers come from the directory listings
    (no stat per entry); a match is confirmed by its device."""
    by_ino: dict[int, _Wanted] = {}
    for ids, itself in ((wanted, False), (replaced or {}, True)):
        for pid, paths in ids.items():
            dev, _, ino = pid.partition(b":")
            by_ino.setdefault(int(ino), []).append((int(dev), paths, itself))
    masked = {m.path for m in policy.masks if m.is_dir}
    lost: list[Lost] = []
    for top in (policy.root, *policy.checkouts):  # a directory moved to become this launch's root, or a checkout
        try:
            st = os.lstat(top)
        except OSError:
            continue
        hit = by_ino.get(st.st_ino)
        if hit is not None:
            lost += _found(policy, top, st.st_dev, hit, by_ino, st.st_ino, True)
    stack: list[tuple[str, int | None]] = [(policy.root, None)]
    moving = False
    while stack and by_ino:
        d, expected = stack.pop()
        listed = _listing(d, expected)
        if listed is None:
            moving = True
            continue
        for name, inode, is_dir in listed:
            path = os.path.join(d, name)
            try:
                hit = by_ino.get(inode)
                if hit is not None:  # in a hidden place (a masked one): found, and hidden still
                    lost += _found(policy, path, os.lstat(path).st_dev, hit, by_ino, inode, is_dir)
            except OSError:
                continue
            if is_dir and path not in masked:
                stack.append((path, inode))
    if moving and by_ino:
        # a directory entered was not the one its parent listed: something moved directories while the search looked,
        # and what it did not find may have been moved past it (thirty-third red team: a process outside flipping
        # two directories hid the recorded one from both listings)
        why = "directories in the project were being moved while the launch searched for it (something is moving them)"
        lost += [Lost(p, why, p, owner) for hits in by_ino.values() for _, paths, _ in hits for p, owner in paths]
        by_ino.clear()
    beside = {
        _dirname(p if itself else _dirname(p))
        for hits in by_ino.values()
        for _, paths, itself in hits
        for p, _ in paths
        if not inside(p, policy.root)
    }
    for d in sorted(beside):
        for name, inode, is_dir in (_listing(d) or []) if by_ino and not policy.hidden(d) else []:
            try:
                hit = by_ino.get(inode)
                if hit is not None:
                    path = os.path.join(d, name)
                    lost += _found(policy, path, os.lstat(path).st_dev, hit, by_ino, inode, is_dir)
            except OSError:
                continue
    return lost, [p for hits in by_ino.values() for _, paths, _ in hits for p in paths]


def _links(path: str) -> int:
    try:
        return os.lstat(path).st_nlink
    except OSError:
        return 0


def _listing(d: str, expected: int | None = None) -> list[tuple[str, int, bool]] | None:
    """(name, inode, is a directory) of each entry of d, as the directory opened there lists it; [] when it cannot
    be read. None when it is not the directory expected (the inode its parent listed): it moved meanwhile."""
    try:
        # an entry its parent listed as a directory is not followed if it became a link; the places searched from
        # (the project, a recorded path's directory) are as they are reached
        nofollow = os.O_NOFOLLOW if expected is not None else 0
        fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY | nofollow | os.O_CLOEXEC)
    except OSError as e:
        # gone, or no directory any more, since its parent listed it; unreadable: nothing to search in
        return None if expected is not None and e.errno in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP) else []
    try:
        if expected is not None and os.fstat(fd).st_ino != expected:
            return None
        with os.scandir(fd) as it:
            return [(e.name, e.inode(), e.is_dir(follow_symlinks=False)) for e in it]
    except OSError:
        return []
    finally:
        os.close(fd)


def _found(
    policy: Policy,
    here: str,
    dev: int,
    hit: _Wanted,
    by_ino: dict[int, _Wanted],
    ino: int,
    is_dir: bool,
) -> list[Lost]:
    """here has the inode asked for: what it found (a directory id matches directories only)."""
    out = []
    for want in hit:
        want_dev, paths, itself = want
        if want_dev != dev or not (itself or is_dir):
            continue
        for old, owner in paths:
            new = here if itself else os.path.join(here, os.path.basename(old))
            if new == old:
                # back at its own path, where the launch's look saw another: something is swapping it with a decoy,
                # and the mask may land on either (thirty-third red team: a flip back between the look and this
                # search passed, and the record learned the decoy)
                why = "it or a directory above it was swapped while the launch looked at it (something is moving it)"
                out.append(Lost(old, why, old, owner))
                continue
            mask = policy.hidden(new)
            # the user's record holds for every project: hidden there by this project's rules alone, it is readable
            # from the others (sixteenth red team: ~/.aws moved into a project that ignores it)
            if os.path.lexists(new) and (mask is None or (owner == GLOBAL_RECORD and mask.layer != GLOBAL)):
                why = "it was swapped or replaced" if itself else "a directory above it was moved"
                out.append(Lost(f"{old} (now {new})", why, old, owner))
            elif itself and not is_dir and _links(new) > 1:  # hidden here, and maybe readable under another name
                why = "it was swapped or replaced, and has another name (a hard link) no search can vouch for"
                out.append(Lost(f"{old} (now {new}, which has another name)", why, old, owner))
            elif not itself and not os.path.lexists(new):
                # its directory is here, without it: renamed or moved on from there, where no search follows
                # (a nested clone's session: `mv ../a ../z && mv ../z/.env ../z/readme.txt`: nineteenth red team)
                why = "a directory above it was moved, and it is no longer in it under its name"
                out.append(Lost(f"{old} (its directory is now {here})", why, old, owner))
        hit.remove(want)
        break
    if not hit:
        del by_ino[ino]
    return out


@records.record
class Record:
    path: str
    content: bytes  # this launch's masks in the project, as the record holds them
    unchanged: bool  # the record already says exactly that
    index: str = ""  # the index file, when it must learn this root or launch directory
    root: str = ""
    root_id: bytes = b""
    cwd: str = ""
    settled: list[str] = records.factory(list)  # logs of ended sessions seen by the check: dropped once it passed
    global_path: str = ""
    global_content: bytes = b""  # this launch's global blocks outside the project
    global_unchanged: bool = True
    covers: set[str] = records.factory(set)  # the other checkouts whose paths this launch hid
    # other roots whose records apply here: their record -> the paths it holds (not this launch's masks) and their
    # directories. The session's watcher notes those that move, in a log of that root (watch.py): a session of a
    # nested clone moving the enclosing project's svc/ out of it left the project's next launch nothing to say
    # where it went, nor that a session moved it (found by make fuzz)
    guarded: dict[str, list[str]] = records.factory(dict)


def _examine(
    policy: Policy, env: Mapping[str, str], cwd: str, seen: Snapshot | None = None, nested: bool = False
) -> tuple[Record, list[Lost]]:
    """seen: the launch's one look at the masks (idents.py); without one (explain), a look of its own. nested: a
    launch inside a sandbox, where each hidden path is the mask over it (its own id is not compared)."""
    root = policy.root
    cwd = os.path.realpath(cwd or os.getcwd())
    path, index, gpath = record_path(env, root), _index_path(env), global_record_path(env)
    ids: dict[str, bytes] = dict(seen.dirs) if seen is not None else {}
    gbefore = _read(gpath)
    mine, users, blocked = _recorded(policy, load_paths(gbefore))
    files = seen.files if seen is not None else {m.path: ident(m.path) for m in policy.masks}
    own = {p: b"%d:%d" % got if got is not None else _NONE for p, got in files.items()}
    before, now = _read(path), _content(mine, ids, blocked, own)
    gnow = _content(users, ids, blocked, own)
    known = _load_index(index)
    root_id = _dir_id(root, ids)
    others = _related(known, root, root_id, cwd, before is None, tuple(policy.checkouts))
    covers = set(policy.checkouts)
    stale = known.roots.get(root) != root_id or _last_root(known.cwds, cwd) != root
    stale = stale or known.covers.get(root, set()) != covers
    rec = Record(
        path, now, before == now, index if stale else "", root, root_id, cwd, _settled_logs(env, root),
        gpath, gnow, gbefore == gnow, covers,
    )  # fmt: skip
    sources: list[_Source] = []
    was_blocked: set[str] = set()
    if others:
        accepted = _accepted(path)
        for r, within in others.items():
            # this launch's paths, and those whose directory moved: it may stand in this launch's trees now (a
            # worktree the session moved, this launch's root: red team)
            data = _read(record_path(env, r))
            entries = [
                (p, i, o)
                for p, i, o in _full(data)
                if p not in accepted and (not within or any(inside(p, t) for t in within) or _dir_moved(p, i, ids))
            ]
            if entries:
                sources.append((r, entries, _mtime(record_path(env, r)), within))
                was_blocked |= _blocked(data)
            names = load_paths(data)
            if names:  # not this launch's own masks: a session cannot move a mask, only a directory above it
                rec.guarded[record_path(env, r)] = sorted({*(p for p in names if p not in own), *map(_dirname, names)})
    if before != now:
        sources.insert(0, (root, _full(before), _mtime(path), ()))
        was_blocked |= _blocked(before)
    if gbefore != gnow:  # the user's global blocks outside the project: the same for every project
        sources.append((GLOBAL_RECORD, _full(gbefore), _mtime(gpath), ()))
        was_blocked |= _blocked(gbefore)
    if not sources:  # the usual launch: the same masks as last time, nothing moved
        return rec, []
    return rec, _judge(policy, sources, ids, env, was_blocked, None if nested else own)


def _accepted(path: str) -> set[str]:
    """The paths of other roots' records that `accept` here made readable (see the module docstring)."""
    return {os.fsdecode(p) for p in (_read(path + ".accepted") or b"").split(b"\0") if p}


def _mtime(path: str) -> int:
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return 0


def check(
    policy: Policy, env: Mapping[str, str], cwd: str = "", seen: Snapshot | None = None, nested: bool = False
) -> Record:
    """Refuse if this launch would reveal what an earlier one hid; returns what `record` writes. cwd: where
    the launch runs (default: here); seen: the launch's one look at its masks, which the record keeps; nested:
    inside a sandbox (a nested launch runs the agent directly, and records nothing)."""
    rec, lost = _examine(policy, env, cwd, seen, nested)
    if lost:
        shown = some(x.shown for x in lost)
        why = "; ".join(dict.fromkeys(x.why for x in lost))
        raise PolicyError(
            f"{shown} was hidden at the last launch and would be readable now: {why}, possibly from inside the sandbox",
            "see why with `ai-sandbox explain PATH`; if the change is yours, run `ai-sandbox accept`",
        )
    return rec


def findings(policy: Policy, env: Mapping[str, str], cwd: str = "") -> list[str]:
    """What `check` would refuse for, without refusing: for explain."""
    return [x.shown for x in _examine(policy, env, cwd)[1]]


def from_other_roots(policy: Policy, env: Mapping[str, str], cwd: str = "") -> list[str]:
    """The paths of other roots' records that `check` would refuse for (as those records hold them): what
    `accept` lists beside this root's record."""
    return [x.path for x in _examine(policy, env, cwd)[1] if x.owner not in (policy.root, GLOBAL_RECORD)]


def unhidden_notices(policy: Policy, env: Mapping[str, str], cwd: str = "") -> list[Notice]:
    """`findings` as the notices explain and --dry-run list."""
    return [
        Notice(
            UNHIDDEN,
            f"{p} was hidden at the last launch and is readable now; a launch refuses until `ai-sandbox accept`",
            p,
        )
        for p in findings(policy, env, cwd)
    ]


def _drop(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


def lock_path(path: str) -> str:
    """The lock of `<state>/<kind>/<name>`: `<state>/locks/<kind>.<name>.lock`. The locks directory is hidden
    inside the sandbox (backends/host.py): flock needs only a descriptor, and an agent that took the locks made
    every other launch with hidden tracked files, and every session end, wait for as long as it held them
    (eleventh red team)."""
    kind = os.path.dirname(path)
    return os.path.join(os.path.dirname(kind), LOCKS, f"{os.path.basename(kind)}.{os.path.basename(path)}.lock")


@contextlib.contextmanager
def locked(path: str) -> Iterator[None]:
    """An exclusive lock (lock_path) for a read-modify-write of path by concurrent launches."""
    import fcntl  # only when such a file changes

    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    lock = lock_path(path)
    os.makedirs(os.path.dirname(lock), mode=0o700, exist_ok=True)
    try:  # never through a link, never truncating, never a FIFO's open that waits (red team)
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o600)
    except OSError as e:
        raise PolicyError(f"cannot open {lock}: {e.strerror}", "delete it (ai-sandbox makes it again)") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise PolicyError(f"{lock} is not a regular file", "delete it (ai-sandbox makes it again)")
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _update_index(index: str, change: Callable[[_Index], None]) -> None:
    """Read-modify-write under a lock: two launches at once must not drop each other's roots."""
    with locked(index):
        known = _load_index(index)
        before = known.dump()
        change(known)
        after = known.dump()
        if after != before:
            write_atomic(index, after)


def record(rec: Record) -> None:
    """Remember this launch's masks (rewritten only when they changed), its root and where it ran from.
    What the watcher noted as moved away is settled once a launch passed the check."""
    if not rec.unchanged:
        write_atomic(rec.path, rec.content)
    if not rec.global_unchanged:
        write_atomic(rec.global_path, rec.global_content)
    for log in rec.settled:  # only those the check saw: a session ending since then is judged next time
        _drop(log)
    if rec.index:

        def change(known: _Index) -> None:
            known.roots[rec.root] = rec.root_id
            if _last_root(known.cwds, rec.cwd) != rec.root:
                known.cwds[rec.cwd] = rec.root
            if rec.covers:
                known.covers[rec.root] = set(rec.covers)
            else:
                known.covers.pop(rec.root, None)

        _update_index(rec.index, change)


def forget(env: Mapping[str, str], root: str, cwd: str = "", readable: Iterable[str] = ()) -> int:
    """`ai-sandbox accept`: the project's record and the record of the global blocks start anew (empty: the next
    launch records what it hides), and other roots' records stop applying here: this root is known, and
    launches from cwd belong to it; readable: the paths of other roots' records this launch would show (state
    `findings`), listed beside the record so that those records skip them here from now on. Returns how many
    records applied (0 when nothing was recorded)."""
    cwd = os.path.realpath(cwd or os.getcwd())
    path, index, gpath = record_path(env, root), _index_path(env), global_record_path(env)
    ids: dict[str, bytes] = {}
    known = _load_index(index)
    before, gbefore = _read(path), _read(gpath)
    n = (before is not None) + len(_related(known, root, _dir_id(root, ids), cwd, before is None, anywhere=False))
    n += gbefore not in (None, MAGIC)
    write_atomic(path, MAGIC)
    write_atomic(gpath, MAGIC)
    accepted = sorted(_accepted(path) | set(readable))
    if accepted:
        write_atomic(path + ".accepted", b"".join(os.fsencode(p) + b"\0" for p in accepted))
    for log in _settled_logs(env, root):
        _drop(log)

    def change(known: _Index) -> None:
        known.roots[root] = ids[root]
        cwds = known.cwds
        for c, r in list(cwds.items()):
            if inside(c, root) and not inside(r, root):
                del cwds[c]  # launch directories in this root that an enclosing root used
        cwds[root] = root
        if _last_root(cwds, cwd) != root:
            cwds[cwd] = root

    _update_index(index, change)
    return n
