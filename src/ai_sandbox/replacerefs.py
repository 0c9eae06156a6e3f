"""The replace refs a session adds, removed at its end: each puts another object in an object's place in every
git command of the user's (`git replace HEAD <copy>`, a copy of HEAD whose tree holds the session's staged edit, hid
that edit from `git status`, `git diff --cached` and `commit -a`, and the user's next commit carried it: forty-eighth
red team, F3). Outside, the same commands leave the ref; here it goes, like a git setting the session added
(gitsettings.py), and the line names it with the command that sets it again.

The launch runs no git for this where the repository can hold no replace ref: no `refs/replace` and no `reftable`
in its git directory, and no `refs/replace/` in its packed-refs (nearly every repository: two stat calls and one
read). Elsewhere git lists them, at the launch and at the end. Only git's own namespace is looked at: a
`GIT_REPLACE_REF_BASE` of the user's names another (said in docs/threat-model.md).
"""

from __future__ import annotations

import os
import stat

PREFIX = "refs/replace/"
_PACKED_LIMIT = 256 << 20  # bytes of packed-refs read for the quick look; a larger one is left to git

Refs = dict[str, str]  # ref name -> object id


def _common(tree: str) -> str:
    """The git directory that holds the work tree's refs ("" where git finds none)."""
    from ai_sandbox.git import git_dir_of
    from ai_sandbox.gitsettings import common_dir

    own = git_dir_of(tree)
    return common_dir(own) if own else ""


def listed(tree: str, common: str | None = None) -> Refs | None:
    """The replace refs of the work tree's repository as git reads them; None when git cannot list them. common: its
    common git directory, where the caller has it ("" where git finds none)."""
    from ai_sandbox.errors import SandboxError
    from ai_sandbox.git import QUICK
    from ai_sandbox.git.run import _run

    common = _common(tree) if common is None else common
    may = _may_hold(common) if common else True
    if may is None:
        return None
    if not may:
        return {}
    try:
        proc = _run(["for-each-ref", "--format=%(refname)%00%(objectname)", PREFIX], tree, timeout=QUICK)
    except SandboxError:  # git timed out (a FIFO the session put in its config): said by the caller
        return None
    if proc.returncode != 0:
        return None
    out: Refs = {}
    for line in proc.stdout.split(b"\n"):
        name, nul, oid = line.partition(b"\0")
        if nul:
            out[os.fsdecode(name)] = oid.decode("ascii", "replace")
    return out


def _may_hold(common: str) -> bool | None:
    """Could git find a replace ref here? Loose refs live under refs/replace, packed ones in packed-refs (a line
    `<oid> refs/replace/<name>`), reftable ones in reftable/ (looked at by git only). None: packed-refs is no
    regular file, or larger than _PACKED_LIMIT (a FIFO a session left there held git for its whole time limit)."""
    from ai_sandbox.verify import read_regular

    if any(os.path.lexists(os.path.join(common, p)) for p in ("refs/replace", "reftable")):
        return True
    try:
        data = read_regular(os.path.join(common, "packed-refs"), _PACKED_LIMIT, follow=True)
    except FileNotFoundError:
        return False
    except OSError:
        return None
    return PREFIX.encode() in data


# where git reads and writes the replace refs and their logs: a link on the way leads git's delete into another
# repository (forty-ninth red team, F1: `.git/refs/replace` linked to another repository's `.git`, which the sandbox
# could not write, and the end deleted every branch and tag there, then its emptied `refs/`)
_WAY = ("refs", "refs/replace", "logs", "logs/refs", "logs/refs/replace", "packed-refs")


def linked(tree: str) -> str | None:
    """The first link on the way to the work tree's replace refs (or in their directories), or None."""
    common = _common(tree)
    if not common or os.path.realpath(common) != os.path.abspath(common):
        return common or tree
    for rel in _WAY:
        if os.path.islink(os.path.join(common, rel)):
            return os.path.join(common, rel)
    for top in ("refs/replace", "logs/refs/replace"):
        for where, dirs, files in os.walk(os.path.join(common, top)):  # never into a link
            for name in dirs + files:
                if os.path.islink(os.path.join(where, name)):
                    return os.path.join(where, name)
    return None


def undo(tree: str, before: Refs | None, since: int = 0) -> None:
    """At the session's end: remove the replace refs the session added to the work tree's repository (before: the
    launch's listing; since: the launch's time, ns). Where the launch could not list them, those there now are
    named, not removed."""
    from ai_sandbox.skipworktree import say_line

    now = listed(tree)
    if before is None:
        if now != {}:
            say_line(
                f"git could not list the replace refs in {tree} at the launch, so those the session made cannot be "
                "told: `git replace -l` lists them, each puts another object in place of one of yours"
            )
        return
    if now is None:
        say_line(f"git could not list the replace refs in {tree} after the session: `git replace -l` lists them")
        return
    if new := added(before, now):
        remove(tree, new, before, since)


def added(before: Refs, now: Refs) -> Refs:
    """The refs of now that before did not hold with that object: the session's."""
    return {name: oid for name, oid in now.items() if before.get(name) != oid}


def remove(tree: str, refs: Refs, before: Refs, since: int = 0) -> None:
    """Delete refs (each only while it still names the object it named: one `update-ref` transaction; a symbolic one
    itself, never the branch it names, which a plain `update-ref -d` deletes: measured) and say so in
    one line (before: the refs at the launch; one the session changed is removed too, and the line says what it
    named). A lock file made since the launch (since, ns; 0: none is taken for the session's) that is still there
    once git gave up on it is the session's (none of its processes is left: forty-ninth red team, F4): removed, and
    the delete tried once more. Never raises."""
    import shlex

    from ai_sandbox.git import QUICK
    from ai_sandbox.git.run import _run
    from ai_sandbox.skipworktree import say_line

    names = sorted(refs)
    shown = ", ".join(_shown(n, refs[n], before.get(n)) for n in names[:3])
    shown += f" and {len(names) - 3} more" if len(names) > 3 else ""
    link = linked(tree)
    if link is not None:
        say_line(
            f"did not remove the git replace refs the session made in {tree}: {link} is a link, which would lead "
            f"git's delete elsewhere (another repository's refs); remove the link, then `git replace -l` lists what "
            f"is left: {shown}"
        )
        return
    data = b"".join(b"delete " + os.fsencode(n) + b"\0" + refs[n].encode() + b"\0" for n in names)
    unlocked: list[str] = []
    for attempt in range(2):
        try:
            proc = _run(["update-ref", "--no-deref", "-z", "--stdin"], tree, stdin=data, timeout=QUICK)
            ok, why = proc.returncode == 0, os.fsdecode(proc.stderr).strip().splitlines()[:1]
        except Exception as e:  # never a traceback: the session is over, this is the user's one chance to hear of it
            ok, why = False, [type(e).__name__]
        if ok or attempt or not since or not (unlocked := _unlock(_common(tree), names, since)):
            break
    first = names[0]
    again = f"`git replace -f {first[len(PREFIX) :]} {before.get(first) or refs[first]}`"
    if ok:
        locks = f"; so were the lock files it left, which kept git from it: {', '.join(unlocked)}" if unlocked else ""
        say_line(
            f"removed the git replace refs the session made in {tree}, which put other objects in place of yours in "
            f"every git command (they can hide its edits from `git status`, `git diff` and `git commit -a`): {shown}; "
            f"{again} sets one again if you meant it{locks}"
        )
    else:
        say_line(
            f"could not remove the git replace refs the session made in {tree} ({(why or ['no message'])[0]}), which "
            f"can hide its edits from `git status` and `git diff`: {shown}; `git -C {shlex.quote(tree)} replace -d "
            "OBJECT` removes one, `git replace -l` lists them"
        )


def _unlock(common: str, names: list[str], since: int) -> list[str]:
    """Remove the lock files git takes to delete these refs (packed-refs.lock, <ref>.lock) that were made since the
    launch and are regular files (the caller checked no link lies on the way: linked); the names removed."""
    out = []
    for rel in ("packed-refs.lock", *(f"{n}.lock" for n in names)):
        path = os.path.join(common, rel)
        try:
            st = os.lstat(path)
            if stat.S_ISREG(st.st_mode) and st.st_ctime_ns >= since:
                os.unlink(path)
                out.append(rel)
        except OSError:
            continue
    return out


def _shown(name: str, oid: str, was: str | None) -> str:
    return f"{name} ({oid[:12]}" + (f"; it named {was} at the launch)" if was else ")")
