"""The user's servers out of the agent's reach: the unix sockets of programs that run outside the sandbox.

A server listening on a unix socket runs what its clients ask, outside every mask: tmux (`send-keys`), screen,
the D-Bus buses (`systemd-run --user`), docker and podman (`run -v $HOME:/h`), X11 and Wayland, an IDE's server.
The network namespace (network.py) cuts the abstract ones and TCP; a socket with a path is reached through the
file system, so the sandbox must not show it:
- /tmp is the sandbox's own, empty at the start and gone at the end (tmux, X11, ssh agents, IDE sockets live
  there), but for the entries the launch itself needs there (a project, a home or ai-sandbox's own files under
  /tmp stay, whole);
- the user's runtime directory ($XDG_RUNTIME_DIR, /run/user/UID: the session bus, systemd's user manager,
  podman, Wayland, PipeWire, gpg-agent) is shown empty;
- every socket found under /run at the launch (the system bus, docker, containerd, screen) and at the places
  container desktops keep theirs in the home is masked.
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
_RUN_DEPTH = 4
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
    runtime: str = ""  # the user's runtime directory, shown empty
    masked: tuple[str, ...] = ()  # sockets found under /run and in the home, masked
    passed: tuple[str, ...] = ()  # sockets reachable anyway (the ssh agent, allow_sockets)
    why_not_tmp: str = ""  # why /tmp stays the host's, when it does

    @property
    def private(self) -> tuple[str, ...]:
        """The directories that are the sandbox's own."""
        return tuple(p for p in ((TMP,) if self.tmp else ()) + ((self.runtime,) if self.runtime else ()))


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
    files, the writable places); allow: `allow_sockets`, absolute; found: the sockets to mask (default: scan)."""
    needed = [os.path.realpath(p) for p in needed if p]
    kept: list[str] = []
    why_not = ""
    for p in needed:
        if p == TMP:
            why_not = f"{p} is needed whole by this launch (a project, a home or a writable place)"
        elif below(p, TMP):
            top = os.path.join(TMP, p[len(TMP) + 1 :].split("/", 1)[0])
            if top not in kept:
                kept.append(top)
    runtime = _runtime(env, uid)
    if runtime and any(p == runtime or below(p, runtime) or below(runtime, p) for p in needed if p != "/"):
        runtime = ""  # the launch needs something there (a project in it, or the home is inside it)
    passed: list[str] = []
    agent = env.get("SSH_AUTH_SOCK", "") if ssh_agent else ""
    for p in [agent, *allow]:
        if p and os.path.isabs(p) and os.path.lexists(p):
            passed.append(os.path.realpath(p))
    sockets = found if found is not None else [*scan(RUN, runtime), *_home_sockets(home)]
    gone = [d for d in ((TMP,) if not why_not else ()) + ((runtime,) if runtime else ())]  # the sandbox's own
    masked = [
        s for s in sockets
        if s not in passed and not (any(below(s, d) for d in gone) and not any(below(s, k) for k in kept))
    ]  # fmt: skip
    if not ssh_agent and env.get("SSH_AUTH_SOCK"):
        real = os.path.realpath(env["SSH_AUTH_SOCK"])
        if not below(real, TMP) and not (runtime and below(real, runtime)) and os.path.lexists(real):
            masked.append(real)  # elsewhere (the home): masked like the others
    return Sockets(
        tmp=not why_not, kept=tuple(kept) if not why_not else (), runtime=runtime, masked=tuple(dict.fromkeys(masked)),
        passed=tuple(dict.fromkeys(passed)), why_not_tmp=why_not,
    )  # fmt: skip


def _runtime(env: Mapping[str, str], uid: int) -> str:
    for p in (env.get("XDG_RUNTIME_DIR", ""), f"/run/user/{uid}"):
        if p and os.path.isabs(p) and os.path.isdir(p) and os.path.realpath(p) not in ("/", TMP, "/run", "/run/user"):
            return os.path.realpath(p)
    return ""


def scan(top: str = RUN, skip: str = "") -> list[str]:
    """Every socket under top (a few levels down), but in the runtime directories and the journal's."""
    out: list[str] = []
    skipped = {*_RUN_SKIPPED, *((skip,) if skip else ())}

    def walk(d: str, depth: int) -> None:
        try:
            entries = os.scandir(d)
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
