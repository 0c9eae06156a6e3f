"""Files git checked out into a hidden directory during a session, which the sandbox kept from the disk: named
once it ends, with the command that writes them.

Inside, a hidden directory is an empty scratch tmpfs of the session (its writes vanish at exit) or a read-only
mask. When the agent's git checks out a branch, merges or resets to a commit that tracks files in one, git writes
them into the scratch: the repository then ends on that commit with the files missing from the disk, and the
user's next `git commit -a` would record their deletion — silently, before (red team, F5; into a read-only mask,
git refuses before it changes anything). Writing them on the host after the session was tried and dropped: what
the index holds is the session's choice, so that made a write channel into every hidden directory (a red team
put an ssh config with `Match exec` into a hidden ~/.ssh of a dotfiles repository, H1; others wrote through a
root swapped for a link, R1, and a worktree the session registered, R2). So nothing is written: the line after
the session names the files and the command to review and write them; `git status` shows them deleted until
then. Only inside the project the launch looked at, its root proved by the device and inode of the launch's
look, and git run in that very directory (/proc/self/fd).

The same for untracked files: `git stash pop` of a stash made with `-u` writes them into the scratch and drops the
stash (sixteenth red team: gone at exit, with nothing said). A stash of the project's repository dropped during the
session that holds untracked files in a hidden directory, missing from the disk, is named with its commit and the
command that restores them.
"""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Sequence

from ai_sandbox import git
from ai_sandbox.errors import SandboxError
from ai_sandbox.fs import below, inside, printable
from ai_sandbox.policy import Policy
from ai_sandbox.records import factory, record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ai_sandbox.idents import Snapshot
    from ai_sandbox.layers.tree import Tree
    from ai_sandbox.skipworktree import Marks

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
SHOWN = 5  # paths named in the line; `git status` lists the rest
HASH_LIMIT = 256 << 20  # a file of yours larger than this under a checked-out entry is taken as different
MAX_FILES = 2_000  # hidden files looked up after the session (one git pathspec each)


@record
class Pending:
    """One work tree's hidden directories, and what the index tracked in them at launch."""

    tree: str  # the work tree's path relative to the project root ("" for the root itself)
    dirs: list[str]  # the hidden directories in it, relative to it
    known: list[str]  # the tracked paths the launch found in them (their skip-worktree marks keep them)
    files: list[str] = factory(list)  # the hidden files in it git did not track at the launch, relative to it
    index: tuple[int, ...] | None = None  # its index as the launch found it (index_key)


def index_keys(root: str, trees: list[Tree]) -> dict[str, tuple[int, ...]]:
    """Each work tree's index as it is now (index_key), by the tree's path relative to root: taken at the launch."""
    out: dict[str, tuple[int, ...]] = {}
    try:
        root_fd = os.open(root, _DIR)
    except OSError:
        return out
    try:
        for tree in trees:
            rel = tree.prefix.strip("/")
            try:
                fd = _open_dirs(root_fd, rel.split("/") if rel else [])
            except OSError:
                continue
            try:
                key = index_key(fd)
            finally:
                os.close(fd)
            if key is not None:
                out[rel] = key
    finally:
        os.close(root_fd)
    return out


def index_key(tree_fd: int) -> tuple[int, ...] | None:
    """What tells that a work tree's index is the very file the launch found, unwritten since: its `.git` directory
    (not a `.git` file, which may name another one) and the index's inode, size, mtime and ctime. git writes an
    index whole and renames it in place, and nothing in the sandbox can set a ctime back (no CAP_SYS_TIME): the same
    key means the same entries, so the session tracked nothing new in a hidden directory there. None: look."""
    try:
        g = os.stat(".git", dir_fd=tree_fd, follow_symlinks=False)
        if not stat.S_ISDIR(g.st_mode):
            return None
        gfd = os.open(".git", _DIR, dir_fd=tree_fd)
        try:
            i = os.stat("index", dir_fd=gfd, follow_symlinks=False)
        finally:
            os.close(gfd)
    except OSError:
        return None
    if not stat.S_ISREG(i.st_mode):
        return None
    return (g.st_dev, g.st_ino, i.st_ino, i.st_size, i.st_mtime_ns, i.st_ctime_ns)


def pending(
    policy: Policy, trees: list[Tree], marks: Marks, indexes: dict[str, tuple[int, ...]] | None = None
) -> list[Pending]:
    """What to look at after the session: the masks inside each work tree git listed in the project (a hidden file
    too: `git checkout` of a branch tracking `.env` cannot replace your masked one, ends on the branch all the same,
    and `commit -a` would commit yours: nineteenth red team)."""
    out = []
    dirs = [m.path for m in policy.masks if m.is_dir]
    files = [m.path for m in policy.masks if not m.is_dir][:MAX_FILES]
    root = policy.root.rstrip("/")
    for tree in trees if dirs or files else []:
        top = os.path.join(root, tree.prefix).rstrip("/")
        if not inside(top, root):
            continue
        inner = [d[len(top) + 1 :] for d in dirs if below(d, top) and not _in_git_dir(d, top)]
        # tracked at the launch: marked, or missing from the disk already (no mark: skipworktree.py)
        gone = [m[len(top) + 1 :] for m in marks.missing if below(m, top)]
        known = [*marks.needs.get(top, []), *gone]
        tracked = set(known)
        alone = [f[len(top) + 1 :] for f in files if below(f, top) and not _in_git_dir(f, top)]
        alone = [f for f in alone if f not in tracked]
        if inner or alone:
            rel = top[len(root) + 1 :]
            out.append(Pending(rel, inner, known, alone, (indexes or {}).get(rel)))
    return out


def _in_git_dir(path: str, top: str) -> bool:
    return path == top + "/.git" or path.startswith(top + "/.git/")


def stash_log(root: str) -> str:
    """The stash list of root's repository (one reflog line per entry), in the common git directory: a linked
    worktree's own stash is there too (seventeenth red team: the launch looked for `<root>/.git/…` only)."""
    gitdir = git.git_dir_of(root)
    if not gitdir:
        return ""
    from ai_sandbox.verify import read_regular  # standard library only: costs nothing

    try:  # never blocking on a FIFO a session left there, nor reading /dev/zero (forty-third red team)
        common = read_regular(os.path.join(gitdir, "commondir"), 1 << 16)
        gitdir = os.path.realpath(os.path.join(gitdir, os.fsdecode(common.rstrip(b"\r\n"))))
    except OSError:
        pass
    return os.path.join(gitdir, "logs", "refs", "stash")


def stashes(log: str, root: str) -> list[str]:
    """The stashes at the launch, as commit ids: none where there is no stash list (one stat), otherwise git's own
    answer. The file is the session's to write and git's reading of it has its own rules (a tab or a space, upper
    or lower case ids, a zero timestamp, no refs/stash: a list read otherwise than git reads it missed a stash git
    pops, or named one git does not have: nineteenth to twenty-second red teams)."""
    if log and not os.path.lexists(log):
        return []  # no stash: git removes the list with the last one
    return _listed(log, root) or []


def _listed(log: str, root: str) -> list[str] | None:
    """git's own list of stashes, where the stash list is a regular file (or its place unknown); None otherwise, or
    when git cannot say: a FIFO there would block git too."""
    try:
        if log and not stat.S_ISREG(os.lstat(log).st_mode):
            return None
    except FileNotFoundError:
        return []
    except OSError:
        return None
    try:
        return git.stash_ids(root)
    except (OSError, SandboxError):
        return None


def after(root: str, seen: Snapshot, pending: list[Pending], stashed: Sequence[str] = (), log: str = "") -> None:
    """Name what git left missing in hidden directories, in one line on stderr each: tracked files, and untracked
    ones of a dropped stash (stashed: the stashes at the launch, log: the stash list's file). Never raises: this runs as the session ends (the
    watcher, or the launch under a supervised backend)."""
    if not pending or seen.root is None:
        return
    try:
        fd = os.open(root, _DIR)
    except OSError:
        return
    try:
        st = os.fstat(fd)
        if (st.st_dev, st.st_ino) != seen.root:
            return  # not the directory the launch looked at (swapped for a link or another directory)
        missing, over, conflicted = _missing(fd, pending)
        dropped = _dropped(fd, pending, stashed, log)
    except Exception as e:  # never a traceback, never silence: this is the user's one chance to hear of it
        _say(
            f"ai-sandbox: what git left in hidden directories during the session could not be checked ({type(e).__name__}"
            "); `git status` and `git stash list` show where your repository stands\n"
        )
        return
    finally:
        os.close(fd)
    where = _quote(printable(root))
    if over:
        _say(
            f"ai-sandbox: git checked out {len(over)} tracked file(s) over hidden files of yours during the session, "
            f"and yours stay on your disk: {_names(over)}; `git status` shows them modified (`git commit -a` would "
            f"commit yours). Review the checked-out one with `git show :PATH`, then `git -C {where} checkout -- PATH` "
            "takes it\n"
        )
    if conflicted:
        _say(
            f"ai-sandbox: git left {len(conflicted)} conflicted file(s) in hidden directories during the session, "
            f"which the sandbox kept from your disk: {_names(conflicted)}; `git -C {where} checkout -m -- PATH` "
            "writes one (`--theirs` or `--ours` where one side deleted it)\n"
        )
    for commit, paths in dropped:
        if paths is None:
            _say(
                f"ai-sandbox: a stash dropped during the session is no longer in the repository as it was (the session "
                f"pruned or changed it): {commit}; what it held cannot be listed, and untracked files it held in hidden "
                "directories, if any, are lost\n"
            )
            continue
        _say(
            f"ai-sandbox: a stash dropped during the session (`git stash pop`) held {len(paths)} untracked file(s) in "
            f"hidden directories, which the sandbox kept from your disk (yours stay where you had one): "
            f"{_names(paths)}. Review them with `git -C {where} --no-replace-objects show --stat {commit}^3`, then "
            f"`git -C {where} --no-replace-objects stash apply {commit}` restores them\n"
        )
    if missing:
        shown = " ".join(_quote(printable(p)) for p in missing[:SHOWN])
        more = f" and {len(missing) - SHOWN} more (`git status` lists them)" if len(missing) > SHOWN else ""
        _say(
            f"ai-sandbox: git checked out {len(missing)} tracked file(s) into hidden directories during the "
            f"session, which the sandbox kept from your disk: {shown}{more}; `git status` shows them deleted. "
            f"Review one with `git show :PATH`, then `git -C {_quote(printable(root))} checkout -- PATH` "
            "writes it\n"
        )


def _names(paths: list[str]) -> str:
    shown = " ".join(_quote(printable(p)) for p in paths[:SHOWN])
    return shown + (f" and {len(paths) - SHOWN} more" if len(paths) > SHOWN else "")


def _say(line: str) -> None:
    try:
        sys.stderr.write(line)
        sys.stderr.flush()
    except OSError:
        pass


def _dropped(
    root_fd: int, pending: list[Pending], stashed: Sequence[str], log: str
) -> list[tuple[str, list[str] | None]]:
    """(commit, project-relative paths) of each stash of the project's repository dropped since the launch that
    holds untracked files in its hidden directories: popped into the scratch (gone), or over files of yours there
    (git outside would have refused and kept the stash: seventeenth red team). None for the paths of one the session
    pruned (`git gc --prune=now`: what it held cannot be listed, and may be lost: eighteenth red team)."""
    mine = next((p for p in pending if not p.tree), None)
    before = list(stashed)
    if mine is None or not before:
        return []
    here = f"/proc/{os.getpid()}/fd/{root_fd}"
    # git's own answer: the file may hold lines git skips (twentieth red team); where git cannot say, every stash the
    # launch saw is checked, as if dropped
    now = set(_listed(log, here) or ())
    out: list[tuple[str, list[str] | None]] = []
    for commit in before:
        if commit in now:
            continue
        try:
            paths = git.stashed_untracked(here, commit, mine.dirs)
        except (OSError, SandboxError, ValueError):
            continue
        if paths is None or paths:
            out.append((commit, paths))
    return out


def _missing(root_fd: int, pending: list[Pending]) -> tuple[list[str], list[str], list[str]]:
    """The project-relative paths the index tracks in hidden directories that it did not track at launch: (those
    the disk lacks; those where the disk holds another file, yours: seventeenth red team; those git left
    conflicted, which the disk lacks)."""
    missing: list[str] = []
    over: list[str] = []
    conflicted: list[str] = []
    for p in pending:
        try:
            tree_fd = _open_dirs(root_fd, p.tree.split("/") if p.tree else [])
        except OSError:
            continue
        try:
            if p.index is not None and index_key(tree_fd) == p.index:
                continue  # the launch's index, unwritten: no entry in a hidden directory is new (~5 ms of git saved)
            here = f"/proc/{os.getpid()}/fd/{tree_fd}"
            known = set(p.known)
            for mode, oid, stage, path in git.index_entries(here, p.dirs, p.files):
                name = f"{p.tree}/{path}" if p.tree else path
                if mode == "160000" or path in known:
                    continue
                if stage != "0":
                    if not _there(tree_fd, path) and name not in conflicted:
                        conflicted.append(name)
                elif not _there(tree_fd, path):
                    missing.append(name)
                elif _blob_id(tree_fd, path, len(oid)) != oid:
                    over.append(name)
        except (OSError, SandboxError, ValueError):
            continue
        finally:
            os.close(tree_fd)
    return missing, over, conflicted


def _blob_id(fd: int, rel: str, width: int) -> str:
    """git's object id of the file at rel below fd, hashed here (no git: a filter a session configured would run),
    never through a link, read in pieces; "" when it cannot be read, "-" for a file past HASH_LIMIT (taken as
    different: an index entry a session put over a large hidden file of yours crashed the end reading it whole,
    twenty-second red team)."""
    import hashlib

    algo = hashlib.sha256 if width == 64 else hashlib.sha1
    parts = rel.split("/")
    try:
        d = _open_dirs(fd, parts[:-1])
    except OSError:
        return ""
    try:
        st = os.stat(parts[-1], dir_fd=d, follow_symlinks=False)
        if stat.S_ISLNK(st.st_mode):
            data = os.fsencode(os.readlink(parts[-1], dir_fd=d))
            return algo(b"blob %d\0" % len(data) + data).hexdigest()
        if not stat.S_ISREG(st.st_mode):
            return ""
        if st.st_size > HASH_LIMIT:
            return "-"
        f = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=d)
        with os.fdopen(f, "rb") as fh:
            h = algo(b"blob %d\0" % os.fstat(fh.fileno()).st_size)
            while chunk := fh.read(1 << 20):
                h.update(chunk)
        return h.hexdigest()
    except OSError:
        return ""
    finally:
        os.close(d)


def _there(fd: int, rel: str) -> bool:
    """Whether rel exists below fd, looked up without following a link."""
    parts = rel.split("/")
    try:
        d = _open_dirs(fd, parts[:-1])
    except OSError:
        return False
    try:
        os.stat(parts[-1], dir_fd=d, follow_symlinks=False)
        return True
    except OSError:
        return False
    finally:
        os.close(d)


def _open_dirs(fd: int, parts: list[str]) -> int:
    """The directory parts/… below fd, each opened without following a link; a new descriptor."""
    out = os.dup(fd)
    try:
        for part in parts:
            if part in ("", ".", ".."):
                raise OSError(f"{part!r} in a path")  # git refuses such paths in an index; never trusted here
            nxt = os.open(part, _DIR, dir_fd=out)
            os.close(out)
            out = nxt
    except BaseException:
        os.close(out)
        raise
    return out


def _quote(text: str) -> str:
    """shlex.quote, imported only for a message: shlex is ~0.6 ms of every launch otherwise."""
    import shlex

    return shlex.quote(text)
