"""Files an agent saves by rename straight in the home, kept where it can save them when writes are confined.

Claude Code saves ~/.claude.json by writing ~/.claude.json.tmp.<pid>.<hex> under a ~/.claude.json.lock/
directory and renaming it over the file (measured, 2.1.197): both are new names in the home, which stays
read-only inside (writes.py), so every save failed — silently: the mkdir of the lock gave EROFS and Claude Code
went on without saving (a trust dialog answered, a login, a setting: gone at the next start). A bind of the file
alone cannot help: a rename onto a mount point fails. So the file is kept in the agent's own state directory
(writable inside), with a link in its place: Claude Code resolves the link and saves next to its target
(measured: the lock and the temporary file go there), outside the sandbox too.

The move happens once, outside the sandbox, before the launch's plan: a hard link gives the file its new name
(the same inode: nothing copied, nothing a concurrent save outside can lose), then a link renamed over the old
name (atomic: the name always holds the file or the link). Where there is no file yet, the link is made, and
the agent creates its target. A profile declares them (`[moved]` in its TOML).
"""

from __future__ import annotations

import os

from ai_sandbox.errors import ConfigError
from ai_sandbox.fs import printable


def moves(moved: dict[str, str], home: str) -> list[tuple[str, str]]:
    """(path in the home, where it is kept) for a profile's `moved` table, `~/` expanded."""
    return [(os.path.join(home, src[2:]), os.path.join(home, dst[2:])) for src, dst in moved.items()]


def relocate(pairs: list[tuple[str, str]], home: str, agent: str) -> list[str]:
    """Give each file its kept place, with a link in the home; the lines the user reads (what moved, or why a
    save inside will fail). ConfigError when both names hold a file: the user must choose."""
    lines = []
    for src, dst in pairs:
        shown, kept = _tilde(src, home), _tilde(dst, home)
        rel = os.path.relpath(dst, os.path.dirname(src))
        if os.path.islink(src):
            if os.readlink(src) in (rel, dst):
                continue
            if not _inside(os.path.realpath(src), os.path.dirname(dst)):
                lines.append(
                    f"{agent} saves {shown} by rename next to what it links to ({printable(os.readlink(src))}), "
                    "which is read-only inside: its saves fail there; add that directory to `writable` in your "
                    f"config.toml, or link {shown} to {kept}"
                )
            continue
        if os.path.lexists(src) and not os.path.isfile(src):
            continue  # a directory or a device: not the agent's file; its own error will say so
        where = os.path.dirname(dst)
        if os.path.islink(where) or os.path.realpath(where) != where:
            # a link stays read-only inside (writes.py), and the file would land where it leads: a dotfiles
            # checkout, untracked, with an API key in it (twenty-fifth red team)
            lines.append(
                f"{agent} saves {shown} by rename in your home, read-only inside; ai-sandbox keeps such a file in "
                f"{_tilde(where, home)}, but that is a link ({printable(os.path.realpath(where))}), read-only inside "
                "too: nothing was moved; add its target to `writable` in your config.toml"
            )
            continue
        os.makedirs(os.path.dirname(dst), mode=0o700, exist_ok=True)
        if os.path.lexists(dst) and not (os.path.lexists(src) and os.path.samefile(src, dst)):
            raise ConfigError(
                f"{shown} must be saved inside, where your home is read-only: ai-sandbox keeps it as {kept}, with a "
                f"link in its place, but {kept} exists already",
                f"keep one of the two (`mv {kept} {kept}.old`), or set confine_writes = false",
            )
        try:
            _move(src, dst, rel)
        except OSError as e:
            raise ConfigError(
                f"{shown} must be saved inside, where your home is read-only, and could not be moved to {kept} "
                f"({e.strerror or e})",
                f"move it yourself (`mv {shown} {kept} && ln -s {rel} {shown}`), or set confine_writes = false",
            ) from None
        if os.path.lexists(dst) and os.path.samefile(src, dst):
            lines.append(
                f"moved {shown} to {kept}, with a link in its place: your home stays read-only inside, and {agent} "
                f"saves through the link, outside the sandbox too (undo: `mv {kept} {shown}`)"
            )
    return lines


def _move(src: str, dst: str, rel: str) -> None:
    """The file at src under the name dst (a hard link: the same inode), then a link renamed over src."""
    if os.path.lexists(src) and not os.path.lexists(dst):
        os.link(src, dst)  # a save outside meanwhile lands in the same file: nothing to lose
    tmp = f"{src}.ai-sandbox-{os.getpid()}"
    os.symlink(rel, tmp)
    try:
        os.rename(tmp, src)
    except OSError:
        os.unlink(tmp)
        raise


def _inside(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory.rstrip("/") + "/")


def _tilde(path: str, home: str) -> str:
    return printable("~/" + os.path.relpath(path, home) if _inside(path, home) else path)
