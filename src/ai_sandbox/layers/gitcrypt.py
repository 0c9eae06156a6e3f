"""The dynamic layer's git-crypt part: files git-crypt encrypts, and the keys that decrypt them.

Encrypted files are found by their `filter=git-crypt*` attribute, which is what `git crypt status` reads
too; asking git for it works without git-crypt installed and without parsing its human-oriented output.
With a key directory readable, `git show HEAD:f | git-crypt smudge` would decrypt the history.

Asking git costs a walk of the tree, so it is skipped only when nothing says git-crypt is in play: no key
in the repository, no git-crypt filter in git's config, and no attribute file git reads — the user's, the
system's, info/attributes, every .gitattributes in the work tree (ignored ones too) — that mentions it or
cannot be read. A macro (`[attr]secret filter=git-crypt`) mentions it where it is defined, and those
files are all among these.
"""

from __future__ import annotations

import os
import stat

from ai_sandbox import git
from ai_sandbox.errors import PolicyError
from ai_sandbox.layers.unlisted import Walk
from ai_sandbox.policy import CRYPT, Entry


def entries(root: str, prefix: str, scan: git.Scan, walk: Walk) -> list[Entry]:
    common = scan.repo.common_dir
    own = _own_keys(common)
    out = [Entry(d, True, CRYPT, "git-crypt key directory") for d in own]
    out += [Entry(d, True, CRYPT, f"git-crypt key directory of submodule {name}") for d, name in module_keys(common)]
    if not (own or scan.crypt_config or _mentions_git_crypt(scan, walk)):
        return out
    for rel, value in git.filter_attributes(scan.repo).items():
        if value.startswith("git-crypt"):
            out.append(
                Entry(os.path.join(root, prefix + rel), False, CRYPT, f"encrypted by git-crypt (filter={value})")
            )
    return out


def _own_keys(common: str) -> list[str]:
    """The repository's key directory, and each linked worktree's (git-crypt keeps its keys in
    `git rev-parse --git-dir`, which is per worktree)."""
    try:
        names = os.listdir(os.path.join(common, "worktrees"))
    except OSError:
        names = []
    dirs = [os.path.join(common, "git-crypt")] + [os.path.join(common, "worktrees", n, "git-crypt") for n in names]
    return [d for d in dirs if os.path.isdir(d)]


def module_keys(common: str) -> list[tuple[str, str]]:
    """(key directory, submodule name) for every submodule git keeps under <common>/modules — checked out
    or not (a de-initialised submodule keeps its git directory, key included). Names may hold '/', so a
    directory without HEAD is part of a name (git refuses a name that would nest inside another's git
    directory); a submodule's own submodules are in its git directory's modules/. Nothing else in a git
    directory is listed (objects/ alone can hold thousands of directories)."""
    out = []
    todo = [(os.path.join(common, "modules"), "")]
    while todo:
        d, name = todo.pop()
        try:
            with os.scandir(d) as it:
                subs = [(e.path, e.name) for e in it if e.is_dir(follow_symlinks=False)]
        except OSError:
            continue
        for path, base in subs:
            sub = f"{name}/{base}" if name else base
            if not os.path.isfile(os.path.join(path, "HEAD")):
                todo.append((path, sub))
                continue
            if os.path.isdir(os.path.join(path, "git-crypt")):
                out.append((os.path.join(path, "git-crypt"), sub))
            todo.append((os.path.join(path, "modules"), ""))
    return sorted(out)


def _mentions_git_crypt(scan: git.Scan, walk: Walk) -> bool:
    """Could any attribute source git reads set filter=git-crypt? An unreadable file, or a tracked
    .gitattributes missing from the work tree (git then reads the index's copy), counts as yes."""
    root = scan.repo.root
    listed = set(walk.attributes)
    if any(rel not in listed for rel in walk.tracked_attributes):
        return True
    from ai_sandbox.verify import read_regular  # standard library only: costs nothing

    files = [os.path.join(root, rel) for rel in walk.attributes] + git.attribute_files(scan)
    for path in files:
        try:
            if b"git-crypt" in read_regular(path, ATTRIBUTES_LIMIT, follow=True):  # a user's file may be a link
                return True
        except (FileNotFoundError, NotADirectoryError):
            continue
        except OSError as e:
            _refuse_unending(path, isinstance(e, BlockingIOError))
            return True  # unreadable attributes: ask git rather than assume none
    return False


ATTRIBUTES_LIMIT = 64 << 20  # past it, git is asked


def _refuse_unending(path: str, blocks: bool = False) -> None:
    """A FIFO, socket or device where git reads attributes, or a file whose read would block (`/proc/kmsg`): git
    would wait on it (a FIFO nobody writes) or read it without end (/dev/zero), and so did this look for git-crypt
    (forty-third red team: a session left .git/info/attributes a FIFO, and every later launch hung). Refused at
    once, naming it."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return
    if blocks or stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        raise PolicyError(
            f"{path} is not a regular file: git reads it for the repository's attributes, and would wait on it "
            "or read it without end",
            "remove it (a session may have left it there)",
        )
