"""Hidden tracked files and git: the index's skip-worktree bit, set for a session and cleared after it.

Inside the sandbox a hidden tracked file reads as an empty file for root and as unreadable for a user. git
would see it modified: root's `git add -A` / `commit -a` / `stash` recorded it emptied (data loss, then
pushed), a user's failed with Permission denied, and git-crypt's clean filter failed. With the bit set git
takes the index's copy as the file's content and never opens it: status, diff, add -A, commit -a, stash,
checkout, reset --hard and rebase work and never record it (measured with git 2.39 as root and user, with
git-crypt; ~24 ms to rewrite a 50,000-file index). What would have to change the file itself — a checkout
of a branch where it differs — fails as it would on any local change, with nothing half-done.

Only bits ai-sandbox set are ever cleared; a bit the user had set is theirs. Concurrent sessions of one
project share the bits: the journal (`<state>/skip-worktree/<key>`, read-only inside the sandbox) holds the
entries ai-sandbox set (path and object id), the user's own (the bits it found set), and per live session the
paths it needs. A session's end (the watcher) clears what no live session still needs; a launch after a crash
or a kill does the same for sessions that are gone.

git carries the bit along when an entry is renamed (`git mv` of the file or of a directory above it): a mark
whose path left the index is looked for among the marked entries by its object id, and cleared wherever it
is now (old code cleared the old path only, and the next launch took the moved bit for the user's own: the
user's later edits never reached `git commit -a`; red team, F3). When more new marked entries hold that object
than marks of ours left (a session can mark a decoy holding the hidden file's object id), every one of them is
cleared, and a line says which: a bit of the session's own cleared shows in `git status`, one of ours left set
hides the user's edits for good (red team). A work tree a session moved (a nested clone renamed, the project
root itself) is found where it went through a descriptor the launch opened on it (`Held`).
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import sys
import time
from collections.abc import Iterable, Iterator, Mapping

from ai_sandbox import git, spawn
from ai_sandbox.errors import PolicyError
from ai_sandbox.fs import below, write_atomic
from ai_sandbox.paths import cache_dir, project_key, state_dir
from ai_sandbox.policy import IGNORED, How, Mask, Policy
from ai_sandbox.records import factory, record
from ai_sandbox.state import locked

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from ai_sandbox.layers.tree import Tree

LOCK_WAIT = 2.0  # seconds a launch waits for another git's index.lock before refusing
_FEW = 16  # file masks looked up in the raw index without decoding it


def journal_path(env: Mapping[str, str], root: str) -> str:
    return os.path.join(state_dir(env), "skip-worktree", project_key(root))


@record
class Marks:
    """The hidden tracked files of one launch, by work tree root (what `protect` flags)."""

    needs: dict[str, list[str]] = factory(dict)  # root -> its tracked paths that a mask hides
    flagged: dict[str, set[str]] = factory(dict)  # root -> those of them flagged already
    sparse: list[str] = factory(list)  # roots whose sparse checkout would clear the marks
    blobs: dict[str, dict[str, str]] = factory(dict)  # root -> needed path -> its object id in the index
    marked: dict[str, dict[str, str]] = factory(dict)  # root -> every entry flagged when git listed it -> object id
    missing: list[str] = factory(list)  # tracked paths a mask hides that the work tree lacks: no mark, but tracked

    @property
    def paths(self) -> list[str]:
        return [os.path.join(tree, p) for tree, paths in self.needs.items() for p in paths]

    def collect(self, policy: Policy, trees: Iterable[Tree]) -> list[str]:
        """Note the tracked files a mask of this policy hides, from each work tree's scan; their paths, those
        missing from the work tree too (what policy.build's `tracked` asks: a directory the index tracks a file in
        is never a scratch, or what git writes back there vanishes; found by make fuzz). An ignored path git listed
        is untracked by definition, so only the other masks are looked at: most launches look at none."""
        masks = [m for m in policy.masks if m.layer != IGNORED or m.how != How.EXACT]
        for tree in trees if masks else ():
            self._collect_tree(policy.root, tree, masks)
        return self.paths + self.missing

    def _collect_tree(self, root: str, tree: Tree, masks: list[Mask]) -> None:
        base = os.path.join(root, tree.prefix).rstrip("/") + "/"
        files: list[str] = []
        dirs: list[str] = []
        for m in masks:
            if m.path.startswith(base):
                (dirs if m.is_dir else files).append(m.path[len(base) :])
            elif m.is_dir and below(base, m.path):
                dirs.append("")  # a mask above this work tree hides all of it
        found = _tracked_among(tree.scan, files, dirs) if files or dirs else []
        # a tracked file missing from the work tree has nothing to hide, and a mark would make git inside take the
        # index's copy for it: `commit -a` left out its deletion (found by make fuzz: another root's session moved
        # the directory aside before the launch that blocks it)
        self.missing += [base + p for p in found if not os.path.lexists(base + p)]
        found = [p for p in found if os.path.lexists(base + p)]
        if found:
            top = base.rstrip("/")
            self.needs[top] = found
            self.flagged[top] = tree.scan.skip_worktree.intersection(found)
            self.blobs[top] = {p: tree.scan.blob_of(p) for p in found}
            self.marked[top] = tree.scan.skipped
            if tree.scan.sparse_clears_marks:
                self.sparse.append(top)


def edited(marks: Marks, skip: Iterable[str] = ()) -> list[str]:
    """The hidden tracked files whose content on disk is not the index's: an edit not staged, which git inside
    will not see (it takes the index's copy of a marked file), so `commit -a` inside leaves it out where the same
    command outside records it (found by make fuzz). Each file is hashed here as git hashes a blob, without git:
    a `git diff-files` in the work tree could run a clean filter a session defined in .git/config, outside the
    sandbox (red team, C2). Files git filters on the way in hash otherwise: skip names them (git-crypt's), a
    text conversion of `.gitattributes` is not undone (such a file is named too). Only launches with hidden
    tracked files pay: one read of each."""
    out = []
    skipped = set(skip)
    for tree, paths in marks.needs.items():
        blobs, flagged = marks.blobs.get(tree, {}), marks.flagged.get(tree, set())
        for p in paths:
            path = os.path.join(tree, p)
            oid = blobs.get(p, "")
            if p in flagged or path in skipped or not oid:
                continue  # a mark of yours: git outside does not see the edit either
            got = blob_id(path, len(oid))
            if got is not None and got != oid:
                out.append(path)
    return out


_EDITED_LIMIT = 64 << 20  # bytes read to hash one hidden tracked file; a larger one is not named (cannot tell)


def blob_id(path: str, size: int) -> str | None:
    """The object id git would give path's content (a link: its target), or None when it cannot be read."""
    if size == 64:
        from ai_sandbox.paths import sha256 as digest
    elif TYPE_CHECKING:
        from hashlib import sha1 as digest
    else:
        from _sha1 import sha1 as digest  # the interpreter's own: hashlib loads OpenSSL
    from ai_sandbox.verify import read_regular  # standard library only: costs nothing

    try:
        if stat.S_ISLNK(os.lstat(path).st_mode):
            data = os.fsencode(os.readlink(path))
        else:  # another session of the project may swap the file meanwhile: never a link followed, a FIFO waited
            data = read_regular(path, _EDITED_LIMIT)  # on, or more than the limit read
    except OSError:
        return None
    return str(digest(b"blob %d\0" % len(data) + data).hexdigest())


def hidden_tracked(policy: Policy, trees: Iterable[Tree]) -> Marks:
    """The Marks of this policy's hidden tracked files (Marks.collect)."""
    marks = Marks()
    marks.collect(policy, trees)
    return marks


def _tracked_among(scan: git.Scan, files: list[str], dirs: list[str]) -> list[str]:
    if not dirs and len(files) <= _FEW:
        return [f for f in files if scan.is_tracked(f)]
    wanted = set(files)
    prefixes = tuple(d + "/" if d else "" for d in dirs)
    return [t for t in scan.tracked if t in wanted or (prefixes and t.startswith(prefixes))]


def protect(env: Mapping[str, str], root: str, marks: Marks) -> None:
    """Before the sandbox starts: flag every needed path not flagged yet, note what this session needs, and
    clear what sessions that are gone left set."""
    needs, flagged = marks.needs, marks.flagged
    path = journal_path(env, root)
    if not needs and not os.path.exists(path):
        return  # the usual launch: no hidden tracked file, nothing left behind
    for tree in marks.sparse:
        _refuse_sparse(tree)
    with _all_locked(path) as others:
        for tree, paths in needs.items():
            if flagged.get(tree, set()) & set(paths):
                # the scan ran before the locks: a session that ended since may have cleared a mark it saw set, and
                # this launch must not take the mark as there (red team: `git status` inside showed it modified)
                now = _flagged_now(tree)
                flagged[tree] = {p for p in paths if p in now}
                marks.marked[tree] = now
        doc = _load(path)
        live = _live_sessions(doc)
        owned, theirs = _entries(doc, "owned"), _entries(doc, "theirs")
        ids, gitdirs = _ids(doc), _ids(doc, "gitdirs")
        _adopt(others, {root, *needs}, owned, theirs, ids, gitdirs)
        keep, shared = _others(others)
        _add(keep, _needed(live))
        _add(keep, {tree: set(paths) for tree, paths in needs.items()})
        dropped: dict[str, set[str]] = {}
        ours = _clear_unneeded(env, owned, theirs, keep, ids=ids, gitdirs=gitdirs, dropped=dropped)
        _forget(others, dropped)
        # what git listed as flagged and ai-sandbox did not set (nor found moved) is the user's; what another
        # root's launch set is ai-sandbox's: this session owns it too when it needs it, and whichever session ends
        # last clears it (old code took it for the user's, and the other session's end cleared it under this
        # one: red team, a worktree's session and the main checkout's)
        for tree, entries in marks.marked.items():
            elsewhere = shared.get(tree, set())
            theirs[tree] = {
                p: blob for p, blob in entries.items() if p not in ours.get(tree, set()) and p not in elsewhere
            }
            for p in needs.get(tree, []):
                if p in elsewhere and p in entries:
                    owned.setdefault(tree, {})[p] = entries[p]
        todo = {
            tree: [p for p in paths if p not in flagged.get(tree, set()) and p not in owned.get(tree, {})]
            for tree, paths in needs.items()
        }
        todo = {tree: paths for tree, paths in todo.items() if paths}
        # Written ahead: the journal names the marks before git sets them. A signal that ends this launch the
        # moment update-index is done (a closed terminal's SIGHUP, seen in CI) then leaves them to the watcher
        # or the next launch, never unrecorded. A recorded mark git did not set is skipped when cleared
        # (_flagged_now).
        for tree, paths in todo.items():
            blobs = marks.blobs.get(tree, {})
            owned.setdefault(tree, {}).update({p: blobs.get(p, "") for p in paths})
        for tree in owned:
            ids.setdefault(tree, tree_id(tree))  # which directory the marks are in: a path can be replaced
            gitdirs.setdefault(tree, gitdir_id(tree))  # and which index: a `.git` file can name another
        if needs:
            live[str(os.getpid())] = {"start": _start_time(os.getpid()), "needs": needs}
        _save(path, owned, theirs, live, ids, gitdirs)
        try:
            deadline = time.monotonic() + LOCK_WAIT
            for tree, paths in todo.items():
                update_index(env, tree, "--skip-worktree", paths, deadline)
        except PolicyError:  # no session runs: what was set stays recorded, for the next launch to clear
            live.pop(str(os.getpid()), None)
            _save(path, owned, theirs, live, ids, gitdirs)
            raise


class Held:
    """Descriptors on the work trees whose marks a session needs, opened before it starts: where each is at its end,
    even after the session renamed it (a descriptor follows a directory, a path does not)."""

    def __init__(self, trees: Iterable[str]) -> None:
        self.fds: dict[str, int] = {}
        for tree in trees:
            with contextlib.suppress(OSError):
                self.fds[tree] = os.open(tree, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)

    def now(self) -> dict[str, str]:
        """tree -> where it is now, for each tree whose path no longer names it (moved away; something else, an
        empty directory or a link to another repository, may stand at the old path: red team)."""
        out = {}
        for tree, fd in self.fds.items():
            try:
                seen = os.fstat(fd)
                if _same(os.lstat(tree), seen):
                    continue
            except FileNotFoundError:
                pass
            except OSError:
                continue
            try:
                here = os.readlink(f"/proc/self/fd/{fd}")
                if _same(os.lstat(here), seen):
                    out[tree] = here
            except OSError:
                continue
        return out


def _same(a: os.stat_result, b: os.stat_result) -> bool:
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def gitdir_id(tree: str) -> str:
    """ "DEV:INO" of the git directory the work tree's `.git` names now; "" when there is none."""
    try:
        st = os.stat(git.git_dir_of(tree))
    except OSError:
        return ""
    return f"{st.st_dev}:{st.st_ino}" if stat.S_ISDIR(st.st_mode) else ""


def tree_id(tree: str) -> str:
    """ "DEV:INO" of the work tree's directory itself (a link is not followed); "" when there is none."""
    try:
        st = os.lstat(tree)
    except OSError:
        return ""
    return f"{st.st_dev}:{st.st_ino}" if stat.S_ISDIR(st.st_mode) else ""


def release(env: Mapping[str, str], root: str, pid: int, held: Held | None = None) -> None:
    """After the session of pid: clear what no live session needs any more, in the work trees where they are now
    (held: descriptors on them since the launch). Never raises: a bit left set is cleared by the next launch;
    one that cannot be cleared now is named in a line on stderr."""
    path = journal_path(env, root)
    try:
        _release(env, path, pid, held)
    except PolicyError as e:  # a journal made unreadable from outside: the marks stay set, said (red team)
        say_line(f"git's skip-worktree marks of this session are still set: {e}")
    except (OSError, ValueError):
        pass


def _release(env: Mapping[str, str], path: str, pid: int, held: Held | None) -> None:
    with _all_locked(path) as others:
        doc = _load(path)
        live = _live_sessions(doc)
        live.pop(str(pid), None)
        owned, theirs = _entries(doc, "owned"), _entries(doc, "theirs")
        ids, gitdirs = _ids(doc), _ids(doc, "gitdirs")
        keep, _ = _others(others)
        _add(keep, _needed(live))
        cleared = Cleared()
        dropped: dict[str, set[str]] = {}
        try:
            moved = held.now() if held else {}
            _clear_unneeded(
                env, owned, theirs, keep, wait=10.0, moved=moved, out=cleared, ids=ids, gitdirs=gitdirs, dropped=dropped
            )
        finally:
            _save(path, owned, theirs, live, ids, gitdirs)
            _forget(others, dropped)
            cleared.say()


@record
class Cleared:
    """What the end of a session could not do cleanly, for the line it prints."""

    doubtful: dict[str, list[str]] = factory(dict)  # tree -> entries cleared that a session may have marked itself
    kept: dict[str, tuple[list[str], str]] = factory(dict)  # tree -> (marks still set, why)

    def say(self) -> None:
        for tree, paths in self.doubtful.items():
            say_line(
                f"cleared git's skip-worktree mark of {_some(paths)} in {tree}: the session moved or changed marked "
                "entries so that which of them held ai-sandbox's mark cannot be told (one may have been yours); "
                "`git status` shows what to restore"
            )
        for tree, (paths, why) in self.kept.items():
            say_line(
                f"could not clear git's skip-worktree mark of {_some(paths)} in {tree} ({why}): until the next launch "
                f"clears it, `git commit -a` leaves out your edits there; or, once nothing holds the lock, `git -C "
                f"{_quote(tree)} update-index --no-skip-worktree PATH`"
            )


def _some(paths: list[str]) -> str:
    from ai_sandbox.fs import printable

    shown = ", ".join(printable(p) for p in paths[:5])
    return shown + (f" and {len(paths) - 5} more" if len(paths) > 5 else "")


def say_line(text: str) -> None:
    from ai_sandbox.fs import printable

    with contextlib.suppress(OSError):
        sys.stderr.write(f"ai-sandbox: {printable(text)}\n")
        sys.stderr.flush()


def _clear_unneeded(
    env: Mapping[str, str],
    owned: dict[str, dict[str, str]],
    theirs: dict[str, dict[str, str]],
    keep: dict[str, set[str]],
    wait: float = LOCK_WAIT,
    moved: Mapping[str, str] | None = None,
    out: Cleared | None = None,
    ids: dict[str, str] | None = None,
    gitdirs: dict[str, str] | None = None,
    dropped: dict[str, set[str]] | None = None,
) -> dict[str, set[str]]:
    """Clear the marks ai-sandbox set that no live session needs, wherever git carried them. owned and theirs
    (tree -> path -> object id) are updated: a mark found moved is followed to its new path. moved: where a work
    tree the session renamed is now (Held.now). out: what could not be done cleanly (release says it). ids: the
    directory each tree was when its marks were set: one no longer there is never asked by path (an empty
    directory put in its place lists nothing, a link leads to another repository: red team); gitdirs: the git
    directory whose index they are in: a `.git` file naming another repository's is never asked either (red
    team). dropped: gets every entry the journal no longer holds and no live session needs (tree -> paths), for the
    other journals to forget (_forget). Returns every path that held a mark of ai-sandbox's, before or after the
    move."""
    ours = {tree: set(paths) for tree, paths in owned.items()}
    try:
        return _clear(env, owned, theirs, keep, wait, moved, out, ids, gitdirs, ours)
    finally:
        # every entry this journal no longer holds, whether cleared, found nowhere (the agent took it out of the
        # index) or followed elsewhere (its old path): another journal keeping it would take a mark the user sets
        # there later for ai-sandbox's (twelfth red team)
        if dropped is not None:
            for tree, paths in ours.items():
                gone = paths - set(owned.get(tree, {})) - keep.get(tree, set())
                if gone:
                    dropped.setdefault(tree, set()).update(gone)


def _clear(
    env: Mapping[str, str],
    owned: dict[str, dict[str, str]],
    theirs: dict[str, dict[str, str]],
    keep: dict[str, set[str]],
    wait: float,
    moved: Mapping[str, str] | None,
    out: Cleared | None,
    ids: dict[str, str] | None,
    gitdirs: dict[str, str] | None,
    ours: dict[str, set[str]],
) -> dict[str, set[str]]:
    deadline = time.monotonic() + wait  # for every tree's index.lock together
    ids = {} if ids is None else ids
    gitdirs = {} if gitdirs is None else gitdirs
    for tree in list(owned):
        where = (moved or {}).get(tree)
        if where is None:
            here = tree_id(tree)
            where = tree if here and ids.get(tree, here) == here else None
        if where is None:
            continue  # moved away, or replaced, during a session not held here: kept, cleared once it is back
        if gitdirs.get(tree, "") not in ("", gitdir_id(where)):
            if out is not None:
                out.kept[where] = (sorted(owned[tree]), "its .git does not name the git directory they were set in")
            continue  # kept, cleared once the .git is back
        now = _flagged_now(where)
        doubtful = _follow(owned[tree], theirs.setdefault(tree, {}), now)
        ours[tree].update(owned[tree])
        drop = {p for p in owned[tree] if p not in keep.get(tree, set())} if where == tree else set(owned[tree])
        if not drop:
            continue
        still = sorted(p for p in drop if p in now)  # the agent may have removed the file from the index
        if still:
            try:
                update_index(env, where, "--no-skip-worktree", still, deadline)
            except PolicyError as e:
                if out is None:
                    raise
                out.kept[where] = (
                    still,
                    "another git holds its index.lock" if "index.lock" in e.message else e.message,
                )
                continue
        if doubtful and out is not None:
            out.doubtful[where] = sorted(set(doubtful) & set(drop))
        for p in drop:
            del owned[tree][p]
        if not owned[tree]:
            del owned[tree]
        if where != tree:
            theirs.pop(tree, None)
        if tree not in owned:
            ids.pop(tree, None)
            gitdirs.pop(tree, None)
    return ours


def _follow(owned: dict[str, str], theirs: dict[str, str], now: dict[str, str]) -> list[str]:
    """Move each mark that left its path to the flagged entries that hold its object now (git mv carried it). Ours
    first: a mark of ai-sandbox's takes every new flagged entry holding its object, so it can never stay on the
    hidden file because a session made another entry look like it, or like one of the user's (red team); an entry
    at a path of the user's holding another object than theirs is new too (`git mv e tmp && git mv d e` put ours
    where theirs was: red team). The user's own marks follow to what is left, and where a mark of ours is found
    nowhere by its object, every entry newly marked is taken. Returns the entries taken where which of them held
    our mark cannot be told: more of them than marks of ours to find, or ours found nowhere, or both where ours
    was and where its object went (all are cleared, and said)."""
    new = {p: blob for p, blob in now.items() if p not in owned and not (p in theirs and theirs[p] in ("", blob))}
    lost: dict[str, int] = {}
    freed: dict[str, str] = {}  # paths of ours whose object went elsewhere while another object stands there
    for old, blob in list(owned.items()):
        if not blob:
            continue
        if old in now and now[old] != blob and blob in new.values():
            # ours went elsewhere, and another entry came to its path (`git mv d tmp && git mv e d`)
            new[old] = now[old]
            freed[old] = blob
        elif old in now:
            continue  # still here (`git reset REV -- PATH` gives it another object)
        del owned[old]
        lost[blob] = lost.get(blob, 0) + 1
    doubtful = []
    took: dict[str, list[str]] = {}
    for blob, n in lost.items():
        hits = took[blob] = [p for p, b in new.items() if b == blob]
        for p in hits:
            owned[p] = blob
            del new[p]
        if len(hits) > n:
            doubtful += hits
    for old, blob in list(theirs.items()):
        if old in now and old not in owned:
            new.pop(old, None)  # still marked where it was (`git reset REV -- PATH` gives it another object)
            if blob:
                theirs[old] = now[old]
            continue
        if not blob:
            continue
        del theirs[old]  # gone from the index, no longer flagged, or a mark of ours came to its path
        moved = next((p for p, b in new.items() if b == blob), None)
        if moved is not None:
            theirs[moved] = blob
            del new[moved]
    # a freed path no mark of the user's moved to is ours still: its object changed in place (`git reset REV --
    # PATH`) and a decoy holding the old object was marked (red team: the bit stayed on the hidden file for good)
    for old, blob in freed.items():
        if old in new:
            owned[old] = new.pop(old)
            doubtful += [old, *took.get(blob, [])]
    # a mark of ours found nowhere by its object: the entry's object changed before git carried it (`git reset REV
    # -- PATH`, then `git mv`: red team); every entry newly marked during the session may be it, and is taken, and
    # said: one may be the user's, marked outside during the session (red team)
    unfound = sum(lost.values()) - sum(1 for blob in owned.values() if blob in lost)
    if unfound > 0 and new:
        owned.update(new)
        doubtful += list(new)
    return sorted(set(doubtful))


def _refuse_sparse(tree: str) -> None:
    """With sparse checkout on, git clears the bit of every entry whose file is present — and a masked file
    is present — at the first command inside: root's `commit -a` then records it emptied (red team). git
    2.37+ keeps the bits when told such files are expected (the scan read both keys)."""
    raise PolicyError(
        f"{tree} uses sparse checkout, where git would show the hidden tracked files to the agent as emptied "
        "(and commit them so as root)",
        f"tell git to expect them: `git -C {tree} config sparse.expectFilesOutsideOfPatterns true`",
    )


def _journals(path: str) -> list[str]:
    """Every journal beside this one: one per launching root, while the marks are in work trees that launches of
    several roots mark (a linked worktree's index, from the main checkout too; a nested clone's, from the
    enclosing project too)."""
    d, mine = os.path.split(path)
    try:
        with os.scandir(d) as it:
            return sorted(
                e.path for e in it if "." not in e.name and e.name != mine and e.is_file(follow_symlinks=False)
            )
    except OSError:
        return []


@contextlib.contextmanager
def _all_locked(path: str) -> Iterator[dict[str, dict[str, Any]]]:
    """This journal and every other one locked, always in the same order (no two launches wait for each other): a
    session's end then sees every live session's needs, and a launch of another root never runs between. Yields
    the other journals, each read once (path -> its document)."""
    others = _journals(path)
    with contextlib.ExitStack() as stack:
        for p in sorted({path, *others}):
            stack.enter_context(locked(p))
        yield {p: _load(p) for p in others}


@contextlib.contextmanager
def owned_marks(env: Mapping[str, str], root: str) -> Iterator[dict[str, set[str]]]:
    """Every journal locked: the marks ai-sandbox holds in them (tree -> paths), which no launch of any root adds to
    meanwhile (protect names a mark in its journal before git sets it). What hiddenedits.py must leave alone."""
    path = journal_path(env, root)
    with _all_locked(path) as others:
        owned = {tree: set(paths) for tree, paths in _entries(_load(path), "owned").items()}
        _add(owned, _others(others)[1])
        yield owned


def _others(others: dict[str, dict[str, Any]]) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """What the other journals' live sessions need, and the marks those journals hold (tree -> paths)."""
    need: dict[str, set[str]] = {}
    owned: dict[str, set[str]] = {}
    for doc in others.values():
        _add(need, _needed(_live_sessions(doc)))
        _add(owned, {tree: set(paths) for tree, paths in _entries(doc, "owned").items()})
    return need, owned


def _adopt(
    others: dict[str, dict[str, Any]],
    trees: set[str],
    owned: dict[str, dict[str, str]],
    theirs: dict[str, dict[str, str]],
    ids: dict[str, str],
    gitdirs: dict[str, str],
) -> None:
    """Take over the marks that another journal, whose sessions are all gone, holds for one of these work trees
    under the name it had before a session moved it (found by its directory's device and inode): launches of the
    moved root have a journal of their own, and the marks a session's end could not clear (another git's
    index.lock) stayed set for good (red team: `mv p p2`, the lock left behind)."""
    here = {t: i for t in trees if (i := tree_id(t))}
    for other, doc in others.items():
        if _live_sessions(doc):
            continue
        o_owned, o_theirs = _entries(doc, "owned"), _entries(doc, "theirs")
        o_ids, o_gitdirs = _ids(doc), _ids(doc, "gitdirs")
        moved = {t: x for t in o_owned for x, i in here.items() if x != t and o_ids.get(t) == i}
        if not moved:
            continue
        for t, x in moved.items():
            if o_gitdirs.get(t, "") not in ("", gitdir_id(x)):
                continue  # another repository's index
            # only what is still marked there, the same entry: a new repository that got a deleted one's inodes
            # holds none of its marks, and its user's own must not be taken (red team)
            now = _flagged_now(x)
            owned.setdefault(x, {}).update({p: b for p, b in o_owned.pop(t).items() if b and now.get(p) == b})
            theirs.setdefault(x, {}).update({p: b for p, b in o_theirs.pop(t, {}).items() if now.get(p) == b})
            ids.setdefault(x, o_ids[t])
            if o_gitdirs.get(t):
                gitdirs.setdefault(x, o_gitdirs[t])
        _save(other, o_owned, o_theirs, {}, o_ids, o_gitdirs)
        others[other] = _load(other)  # what is left of it, for the needs and marks of the others


def _forget(others: dict[str, dict[str, Any]], dropped: dict[str, set[str]]) -> None:
    """Drop the marks just cleared from the other journals: a session of another root that needed one too, and
    ended first, kept it in its journal, and a mark the user set later at that path, on that object, was then taken
    for ai-sandbox's and cleared (eleventh red team: `commit -a` committed the user's local secret)."""
    for other, doc in others.items():
        owned = _entries(doc, "owned")
        gone = {t: {p for p in paths if p in dropped.get(t, set())} for t, paths in owned.items()}
        if not any(gone.values()):
            continue
        for t, paths in gone.items():
            for p in paths:
                del owned[t][p]
            if not owned[t]:
                del owned[t]
        _save(other, owned, _entries(doc, "theirs"), doc.get("sessions", {}), _ids(doc), _ids(doc, "gitdirs"))
        others[other] = _load(other)


def _add(into: dict[str, set[str]], more: Mapping[str, Iterable[str]]) -> None:
    for tree, paths in more.items():
        into.setdefault(tree, set()).update(paths)


def _needed(live: dict[str, dict[str, Any]]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for session in live.values():
        for tree, paths in session.get("needs", {}).items():
            out.setdefault(tree, set()).update(paths)
    return out


def _flagged_now(tree: str) -> dict[str, str]:
    """The entries flagged in tree's index now, with their object ids."""
    repo = git.Repo(root=tree, common_dir="")
    return git.Scan(repo, index=_index_listing(tree)).skipped


def _index_listing(tree: str) -> bytes:
    return git.git_output(["ls-files", "-z", "--stage", "-t"], tree, timeout=git.QUICK)


def update_index(env: Mapping[str, str], tree: str, flag: str, paths: list[str], deadline: float) -> None:
    """One `update-index` for all paths; git's index.lock held by another git is waited for until deadline
    (time.monotonic), then refused. One deadline for all the trees of a launch or a session end: with a wait each,
    an agent that left an index.lock in each of many worktrees held every journal's lock for that many waits, and
    stalled every other launch (twelfth red team)."""
    data = b"".join(os.fsencode(p) + b"\0" for p in paths)
    proc = write_index(env, tree, ["-z", flag, "--stdin"], data, deadline)
    if proc.returncode != 0:
        text = os.fsdecode(proc.stderr)
        first = next((ln for ln in text.splitlines() if ln.strip()), "no message").removeprefix("fatal: ")
        raise PolicyError(
            f"cannot mark the hidden tracked files in {tree}'s git index: {first}",
            "another git is running there (or left .git/index.lock behind), or a hidden file is in a merge "
            "conflict (resolve it); retry then — without the mark, git inside would see the hidden files as "
            "emptied",
        )


def write_index(env: Mapping[str, str], tree: str, args: list[str], data: bytes, deadline: float) -> spawn.Finished:
    """`git update-index ARGS` with data on its stdin (git.index_write), run again while another git holds the
    index.lock, until deadline (time.monotonic): git's last answer."""
    delay = 0.02
    while True:
        proc = git.index_write(["update-index", *args], tree, data, cache_dir(env))
        if proc.returncode == 0 or b"index.lock" not in proc.stderr or time.monotonic() > deadline:
            return proc
        time.sleep(delay)
        delay = min(delay * 2, 0.5)


def _start_time(pid: int) -> str:
    """The process's start time in clock ticks since boot: with the pid, it names one process (pids are reused)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return ""
    return data[data.rindex(b")") + 2 :].split()[19].decode()


def _live_sessions(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    out = {}
    for pid, session in doc.get("sessions", {}).items():
        start = _start_time(int(pid))
        if start and start == session.get("start"):
            out[pid] = session
    return out


def _load(path: str) -> dict[str, Any]:
    try:  # a regular file only: a FIFO put there from outside would hang every launch (red team)
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return {}
    except OSError:
        doc: Any = None
    else:
        with os.fdopen(fd, "rb") as f:
            try:
                doc = json.loads(f.read()) if stat.S_ISREG(os.fstat(f.fileno()).st_mode) else None
            except (OSError, ValueError):
                doc = None
    if not _well_formed(doc):
        raise PolicyError(
            f"cannot read {path}: it lists the git index marks ai-sandbox must clear",
            "delete it, then check `git ls-files -t` for S entries you did not set (clear them with "
            "`git update-index --no-skip-worktree PATH`)",
        )
    return doc  # type: ignore[no-any-return]


def _well_formed(doc: object) -> bool:
    def paths(d: object) -> bool:
        return isinstance(d, dict) and all(
            isinstance(t, str) and isinstance(p, list) and all(isinstance(x, str) for x in p) for t, p in d.items()
        )

    def entries(d: object) -> bool:  # tree -> path -> object id; the first journals held path lists
        return isinstance(d, dict) and all(
            isinstance(t, str)
            and (
                (isinstance(p, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in p.items()))
                or (isinstance(p, list) and all(isinstance(x, str) for x in p))
            )
            for t, p in d.items()
        )

    if not isinstance(doc, dict) or not entries(doc.get("owned", {})) or not entries(doc.get("theirs", {})):
        return False
    sessions = doc.get("sessions", {})
    return isinstance(sessions, dict) and all(
        isinstance(pid, str) and pid.isdigit() and isinstance(s, dict) and isinstance(s.get("start"), str)
        and paths(s.get("needs", {}))
        for pid, s in sessions.items()
    )  # fmt: skip


def _entries(doc: dict[str, Any], key: str) -> dict[str, dict[str, str]]:
    """tree -> path -> object id ("" when a first journal did not say)."""
    return {t: dict(p) if isinstance(p, dict) else dict.fromkeys(p, "") for t, p in doc.get(key, {}).items()}


def _ids(doc: dict[str, Any], key: str = "trees") -> dict[str, str]:
    """tree -> "DEV:INO" of its directory ("trees") or of its git directory ("gitdirs") when its marks were set
    (journals before these had none)."""
    ids = doc.get(key, {})
    return {t: i for t, i in ids.items() if isinstance(t, str) and isinstance(i, str)} if isinstance(ids, dict) else {}


def _save(
    path: str,
    owned: dict[str, dict[str, str]],
    theirs: dict[str, dict[str, str]],
    live: dict[str, dict[str, Any]],
    ids: dict[str, str] | None = None,
    gitdirs: dict[str, str] | None = None,
) -> None:
    if not owned and not live:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        return
    doc = {
        "owned": {t: dict(sorted(p.items())) for t, p in owned.items()},
        "theirs": {t: dict(sorted(p.items())) for t, p in theirs.items() if p},
        "sessions": live,
        "trees": {t: i for t, i in (ids or {}).items() if t in owned and i},
        "gitdirs": {t: i for t, i in (gitdirs or {}).items() if t in owned and i},
    }
    write_atomic(path, json.dumps(doc).encode())


def _quote(text: str) -> str:
    """shlex.quote, imported only for a message: shlex is ~0.6 ms of every launch otherwise."""
    import shlex

    return shlex.quote(text)
