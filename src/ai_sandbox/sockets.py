"""The user's servers out of the agent's reach: the unix sockets of programs that run outside the sandbox.

A server listening on a unix socket runs what its clients ask, outside every mask: tmux (`send-keys`), screen,
the D-Bus buses (`systemd-run --user`), docker and podman (`run -v $HOME:/h`), X11 and Wayland, an IDE's server.
The network namespace (network.py) cuts the abstract ones and TCP; a socket with a path is reached through the
file system, so the sandbox must not show it:
- /tmp is the sandbox's own, empty at the start and gone at the end (tmux, X11, ssh agents, IDE sockets live
  there), but for the entries the launch itself needs there (a project, a home or ai-sandbox's own files under
  /tmp stay, whole);
- the user's runtime directories ($XDG_RUNTIME_DIR and /run/user/UID, both when they differ: the session bus,
  systemd's user manager, podman, Wayland, PipeWire, gpg-agent) are shown empty;
- every socket found under /run at the launch (the system bus, docker, containerd, screen), every directory
  there the user may enter but not list, and the places container desktops keep theirs in the home are masked.
$TMPDIR is not kept: under /tmp or a runtime directory, the launch check makes it, empty, in the sandbox's own
(the twenty-ninth red team: TMPDIR=/tmp gave the agent the host's /tmp, and the user's tmux ran its commands).
Programs inside still use unix sockets among themselves: /tmp and the runtime directory are writable tmpfs.
What stays reachable: the ssh agent ($SSH_AUTH_SOCK: `git push` over ssh signs as before; allow_ssh_agent =
false cuts it) and the user's `allow_sockets`.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Mapping

from ai_sandbox.fs import below
from ai_sandbox.records import value

TMP = "/tmp"
RUN = "/run"
# under /run: the user runtime directories (their own rule), firejail's, and the journal's (write-only logging)
_RUN_SKIPPED = ("/run/user", "/run/firejail", "/run/systemd/journal")
_RUN_DEPTH = 8
# where container desktops keep the engine's socket in the home (docker's `run -v $HOME:/h` is the user's home)
HOME_SOCKETS = (
    ".docker/run/docker.sock", ".docker/desktop/docker.sock", ".colima/default/docker.sock", ".rd/docker.sock",
    ".orbstack/run/docker.sock", ".local/share/containers/podman/machine/podman.sock",
)  # fmt: skip


@value
class Sockets:
    """What a launch does to the host's unix sockets (see the module's docstring)."""

    tmp: bool = False  # /tmp is the sandbox's own
    kept: tuple[str, ...] = ()  # /tmp's entries the sandbox still shows (whole)
    runtime: tuple[str, ...] = ()  # the user's runtime directories, shown empty
    made: str = ""  # $TMPDIR, made empty inside the sandbox's own /tmp or runtime directory by the launch check
    masked: tuple[str, ...] = ()  # sockets found under /run and in the home, masked
    passed: tuple[str, ...] = ()  # sockets reachable anyway (the ssh agent, allow_sockets)
    why_not_tmp: str = ""  # why /tmp stays the host's, when it does

    @property
    def private(self) -> tuple[str, ...]:
        """The directories that are the sandbox's own."""
        return ((TMP,) if self.tmp else ()) + self.runtime


def plan(
    env: Mapping[str, str],
    uid: int,
    needed: Iterable[str],
    allow: Iterable[str] = (),
    ssh_agent: bool = True,
    home: str = "",
    found: Iterable[str] | None = None,
) -> Sockets:
    """The launch's Sockets. needed: what the sandbox must still show (the project, the homes, ai-sandbox's own
    files, the writable places; never $TMPDIR); allow: `allow_sockets`, absolute; found: the sockets to mask
    (default: scan)."""
    # each as named and as resolved: a venv's python under /tmp is a link to an interpreter elsewhere, and the exec
    # goes through the link (CI: `cannot start /tmp/…/.venv/bin/python3` with only the target's entry kept)
    needed = list(
        dict.fromkeys(q for p in needed if p for q in (os.path.normpath(os.path.abspath(p)), os.path.realpath(p)))
    )
    kept: list[str] = []
    why_not = ""
    for p in needed:
        if p == TMP:
            why_not = f"{p} is needed whole by this launch (a project, a home or a writable place is {p})"
        elif below(p, TMP):
            top = os.path.join(TMP, p[len(TMP) + 1 :].split("/", 1)[0])
            if top not in kept:
                kept.append(top)
    runtime = tuple(
        r for r in _runtime(env, uid)
        if not any(p == r or below(p, r) or below(r, p) for p in needed if p != "/")
    )  # fmt: skip  # one the launch needs (a project in it, the home inside it) stays the host's
    passed: list[str] = []
    agent = env.get("SSH_AUTH_SOCK", "") if ssh_agent else ""
    for p in [agent, *allow]:
        if p and os.path.isabs(p) and os.path.lexists(p):
            passed.append(os.path.realpath(p))
    sockets = found if found is not None else [*scan(RUN), *_home_sockets(home)]
    gone = [*((TMP,) if not why_not else ()), *runtime]  # the sandbox's own
    masked = [
        s for s in sockets
        if s not in passed and not (any(below(s, d) for d in gone) and not any(below(s, k) for k in kept))
    ]  # fmt: skip
    if not ssh_agent and env.get("SSH_AUTH_SOCK"):
        real = os.path.realpath(env["SSH_AUTH_SOCK"])
        if not any(below(real, d) for d in gone) and os.path.lexists(real):
            masked.append(real)  # elsewhere (the home): masked like the others
    tmpdir = os.path.realpath(env.get("TMPDIR") or TMP)
    made = (
        tmpdir if any(below(tmpdir, d) for d in gone) and not any(tmpdir == k or below(tmpdir, k) for k in kept) else ""
    )
    return Sockets(
        tmp=not why_not, kept=tuple(kept) if not why_not else (), runtime=runtime, masked=tuple(dict.fromkeys(masked)),
        passed=tuple(dict.fromkeys(passed)), why_not_tmp=why_not, made=made,
    )  # fmt: skip


def _runtime(env: Mapping[str, str], uid: int) -> list[str]:
    """$XDG_RUNTIME_DIR and /run/user/UID, both when they differ (a runtime directory elsewhere, as WSL's, left the
    real one in reach: red team)."""
    out: list[str] = []
    for p in (env.get("XDG_RUNTIME_DIR", ""), f"/run/user/{uid}"):
        if p and os.path.isabs(p) and os.path.isdir(p):
            real = os.path.realpath(p)
            if real not in ("/", TMP, "/run", "/run/user") and real not in out:
                out.append(real)
    return out


def scan(top: str = RUN) -> list[str]:
    """Every socket under top (8 levels down), but in the runtime directories and the journal's, and every directory
    this user may enter but not list (a socket there is reached by its name: red team)."""
    out: list[str] = []
    skipped = set(_RUN_SKIPPED)

    def walk(d: str, depth: int) -> None:
        try:
            entries = os.scandir(d)
        except PermissionError:
            if d != top and os.access(d, os.X_OK):
                out.append(d)
            return
        except OSError:
            return
        with entries:
            for e in entries:
                try:
                    st = e.stat(follow_symlinks=False)
                except OSError:
                    continue
                if stat.S_ISSOCK(st.st_mode):
                    out.append(e.path)
                elif stat.S_ISDIR(st.st_mode) and depth < _RUN_DEPTH and e.path not in skipped:
                    walk(e.path, depth + 1)

    walk(top, 1)
    return sorted(out)


def _home_sockets(home: str) -> list[str]:
    if not home:
        return []
    out = []
    for rel in HOME_SOCKETS:
        p = os.path.join(home, rel)
        try:
            if stat.S_ISSOCK(os.lstat(p).st_mode):
                out.append(p)
        except OSError:
            continue
    return out
