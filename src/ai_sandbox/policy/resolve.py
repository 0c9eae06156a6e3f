"""Where each hidden path really lands: links resolved (their targets masked), and what must never be masked
(the project, the home and the directories above them, the system's own directories) refused or said."""

from __future__ import annotations

import os
from collections.abc import Callable

from ai_sandbox.errors import PolicyError
from ai_sandbox.fs import inside, realpaths
from ai_sandbox.policy.model import (
    _SYSTEM_DEEP,
    CONFIG_DIRS,
    CRYPT,
    GLOBAL,
    IGNORED,
    NEVER_MASKED,
    SHARED,
    SYMLINK,
    SYSTEM_DIRS,
    How,
    Mask,
    Policy,
    os_content,
    owned,
    relative,
)


def resolve_all(
    candidates: list[Mask],
    root: str,
    protected: list[str],
    policy: Policy,
    realpath: Callable[[str], str] | None,
    walked: set[str],
) -> list[Mask]:
    """Each candidate where it really lands (see _resolve). With the real filesystem, a path git walked
    strictly inside the project is its own target unless it is a link: no lookup (a monorepo has thousands)."""
    fast = realpath is None and root != "/" and bool(walked)
    real = realpath or realpaths()
    kept_out = set(protected)
    out = []
    for c in candidates:
        if fast and c.path in walked and c.path not in kept_out and (c.is_dir or not os.path.islink(c.path)):
            out.append(c)
            continue
        try:
            m = _resolve(c, root, protected, policy, real)
        except OSError as e:  # os.path.realpath's EINVAL: a link swapped between its lstat and its readlink
            raise PolicyError(
                f"{c.path} changed while the launch resolved where it leads ({e.strerror})",
                "run the command again; if it repeats, a process is swapping links in the project",
            ) from None
        if m is not None:
            out.append(m)
    return out


def visible(root: str, home: str) -> list[str]:
    """Paths that must stay visible: the project itself, every directory above it, the home directory and
    every directory above it (masking /home would hide home as surely as masking home)."""
    out = [root]
    for start in (root, home) if home else (root,):
        p = start
        if p != root:
            out.append(p)
        while p != os.path.dirname(p):
            p = os.path.dirname(p)
            if p not in out:
                out.append(p)
    return out


def _resolve(m: Mask, root: str, protected: list[str], policy: Policy, realpath: Callable[[str], str]) -> Mask | None:
    """Backends follow symlinks when they mask, so the policy decides where each mask really lands.

    A target the policy will not mask is either said plainly ("never masked: readable inside", for what is
    public or must stay visible) or refused: a path under /etc (it can hold the machine's secrets) and a
    git-crypt key (it decrypts the history) are never left readable while listed as hidden."""
    target = realpath(m.path)
    mask = m
    if target != m.path:
        if m.layer == IGNORED and inside(target, root):
            # The link is ignored, the content it points at is a project file visible under its own name;
            # masking it would hide source the user chose to share. Another entry may still hide it.
            policy.warn(
                SYMLINK,
                f"{m.path} is an ignored symlink to {target}, which is not ignored: the target stays readable",
                m.path,
            )
            return None
        mask = Mask(target, os.path.isdir(target), m.layer, m.reason, origin=m.path, how=How.SYMLINK_TARGET)
    if inside(root, target):
        if m.layer == GLOBAL:
            raise PolicyError(
                f"your global block {m.path} contains this project ({root})",
                f"the agent cannot work inside a hidden directory; narrow the entry in your config.toml ({m.reason})",
            )
        never: tuple[str, str] | None = (_KEPT, "it holds the project")
    else:
        never = _never_masked(target, protected, root)
    if never is not None:
        kind, why = never
        # a global block is the user's own word: it may hide a file under /etc or /usr (never those whole)
        if not (m.layer == GLOBAL and kind in (_CONFIG, _PUBLIC) and target not in SYSTEM_DIRS):
            if m.layer == CRYPT or (kind == _CONFIG and m.layer != GLOBAL):
                raise _refusal(m, target, why, root)
            said = f" resolves to {target}" if target != m.path else ""
            policy.warn(NEVER_MASKED, f"{m.path}{said} ({why}): never masked, readable inside", m.path)
            return None
    if target != m.path and inside(m.path, root) and not inside(target, root):
        policy.warn(SYMLINK, f"{m.path} is a symlink to {target}, outside the project: that target is hidden", m.path)
    return mask


_KEPT, _SHARED_DIR, _CONFIG, _PUBLIC = "kept", "shared", "config", "public"


def _never_masked(target: str, protected: list[str], root: str) -> tuple[str, str] | None:
    """(kind, why in words) when target cannot be masked; None when it can. Inside the project only the home
    directory is kept: a project under /var/www or /usr/local/src hides its own files."""
    if target in protected:
        return _KEPT, "the sandbox keeps it visible: the home directory, or a directory above it or the project"
    if owned(target, root):
        return None
    if target in SHARED:
        return _SHARED_DIR, "every program shares it; only what is inside it can be hidden"
    if not os_content(target):
        return None
    config = next((d for d in CONFIG_DIRS if inside(target, d)), None)
    if config is not None:  # /usr/local/etc is configuration too, although under /usr
        return _CONFIG, f"under {config}, which can hold the machine's secrets but is never masked"
    top = next((d for d in _SYSTEM_DEEP if inside(target, d)), "/" + target.split("/", 2)[1])
    return _PUBLIC, f"under {top}: system content every program reads"


def _refusal(m: Mask, target: str, why: str, root: str) -> PolicyError:
    """Leaving target readable would break a promise (a git-crypt key decrypts the history; a file under
    /etc a project hides may be a secret): one line, and the way out."""
    if m.layer == CRYPT:
        hint = "move the repository's git directory (or the project) where the key directory can be hidden"
    elif m.layer == IGNORED:
        rel = relative(m.path, root) if owned(m.path, root) else m.path
        hint = f'remove the link, or if the agent may read {target}, add "{rel}" to `allow` in .ai-sandbox.toml'
    else:
        hint = f"remove the entry ({m.reason}) or the link"
    what = "the git-crypt key directory " if m.layer == CRYPT and m.is_dir else ""  # files are never directories
    said = f" (it resolves to {target})" if target != m.path else ""
    return PolicyError(f"cannot hide {what}{m.path}{said}: {why}", hint)
