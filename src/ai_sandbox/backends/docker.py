"""The container backend: `docker run` (or podman, same command line) with selective mounts.

The project is mounted read-write at its own absolute path, the agent's home state (its profile's `home`
list) and the user's `mounts` likewise; everything else of the host is absent. Each hidden path inside a
mount is covered by a read-only bind of an empty file or an empty directory — never a tmpfs, which podman
fills with the directory's contents (measured with podman 4.3: the secrets were visible). Mount specs go through `--mount` in CSV form, so commas,
colons, quotes and spaces in paths survive.
"""

from __future__ import annotations

import csv
import io
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping

from ai_sandbox import tools
from ai_sandbox.backends.plan import LaunchPlan, Settings, Unchecked
from ai_sandbox.errors import UnavailableError
from ai_sandbox.fs import inside
from ai_sandbox.idents import Snapshot
from ai_sandbox.paths import cache_dir
from ai_sandbox.policy import Policy

# Variables that cannot mean anything inside a Linux container; every other one is passed by name.
NOT_PASSED = frozenset(
    {"PATH", "TMPDIR", "LD_PRELOAD", "LD_LIBRARY_PATH", "__CF_USER_TEXT_ENCODING", "XPC_FLAGS", "XPC_SERVICE_NAME"}
)
NOT_PASSED_PREFIXES = ("DYLD_",)
MAC_SSH_SOCK = "/run/host-services/ssh-auth.sock"  # Docker Desktop's forward of the host's ssh agent
# Rootless podman with --userns=keep-id hands runc every bind mount's source, NUL-terminated, in one netlink
# message of at most 65,535 bytes ("netlink: cannot serialize bytemsg ... larger than UINT16_MAX"; measured
# with podman 4.3 and runc 1.1: a 43-byte source starts 1,450 masks, not 1,490). The masks get this much
# of it; the rest is for the project and the other mounts.
ROOTLESS_MASK_BYTES = 60_000


def mount_arg(**fields: str | bool) -> str:
    """A --mount value; each field CSV-quoted as docker's and podman's parsers expect."""
    parts = [k if v is True else f"{k}={v}" for k, v in fields.items() if v is not False]
    buf = io.StringIO()
    csv.writer(buf, lineterminator="").writerow(parts)
    return buf.getvalue()


# Nothing of ai-sandbox's runs inside an image: the masks are the engine's mounts, shown by --dry-run, unproved.
UNCHECKED = Unchecked("the agent runs in an image, where no launch check of ai-sandbox's runs")


class Docker:
    name = "docker"
    host_commands = False
    state_files: tuple[str, ...] = ()
    max_masks = 2_000  # a --mount argument each: the command line must stay within ARG_MAX; rootless podman: less
    private_dirs: tuple[str, ...] = ()  # the project is mounted at its own path, from /var/tmp and /dev/shm too

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.engine = settings.engine or "docker"
        self.image = settings.image or "ai-sandbox-agent"
        self.executable = tools.find(self.engine)
        if self.executable is None and sys.platform == "darwin":
            # Docker Desktop's per-user install (~/.docker/bin): on macOS no sandbox of ours runs with the
            # home writable (a container sees only its mounts), so nothing of ours could have planted it
            self.executable = shutil.which(self.engine)
        # rootless podman: the container's user is ours (--userns=keep-id), and runc limits the mounts
        self.rootless_podman = os.path.basename(self.engine).endswith("podman") and os.geteuid() != 0
        if self.rootless_podman:
            source = os.fsencode(os.path.join(cache_dir(os.environ), "mask-empty-file"))
            self.max_masks = min(self.max_masks, ROOTLESS_MASK_BYTES // (len(source) + 1))

    def unavailable(self) -> UnavailableError | None:
        if self.executable is None:
            return UnavailableError(
                f"{self.engine} is not installed (looked in {tools.where()})",
                "install Docker Desktop (macOS) or docker/podman, or choose another with --engine",
            )
        proc = self._engine(["image", "inspect", "--format", "{{.Id}}", self.image])
        if proc is None:
            return UnavailableError(f"{self.engine} does not answer", f"start it, then check `{self.engine} info`")
        empty = os.path.join(cache_dir(os.environ), "mask-empty-dir")
        if os.path.isdir(empty) and not os.path.islink(empty) and os.listdir(empty):  # a link is replaced
            return UnavailableError(f"{empty} must be empty: every hidden directory shows it", "delete what is in it")
        if proc.returncode != 0:
            return UnavailableError(
                f"image {self.image!r} not found in {self.engine}",
                f"build it: `{self.engine} build -t {self.image} {_dockerfile_dir()}`, or name one with --image",
            )
        return None

    def probe(self, env: Mapping[str, str]) -> UnavailableError | None:
        return self.unavailable()  # the engine answering and the image present is what can be known cheaply

    def _engine(self, args: list[str]) -> subprocess.CompletedProcess[str] | None:
        try:
            return subprocess.run([self.executable or self.engine, *args], capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            return None

    def version(self) -> str | None:
        proc = self._engine(["--version"])
        return proc.stdout.strip() if proc and proc.returncode == 0 else None

    def unexpressible(self, path: str) -> str | None:
        if "\n" in path or "\r" in path:
            return "contains a line break, which a --mount value cannot carry"
        return None

    def roots(self, policy: Policy, env: Mapping[str, str]) -> tuple[list[str], list[str]]:
        """Host paths mounted read-write (the project, the agent's home state, the user's extra mounts and
        `writable` places), and the state directories to create first so what the agent writes lands on the host."""
        out, create = [policy.root], []
        for p in [*self.settings.home, *self.settings.mounts]:
            if any(c in p for c in "*?["):
                continue  # a glob names siblings an agent writes (atomic renames); they live in a mounted dir
            path = os.path.normpath(_expand(p, env))
            if p.endswith("/") and not os.path.exists(path):
                create.append(path)
            elif not os.path.lexists(path):
                continue
            else:
                path = os.path.realpath(path)
            if not any(inside(path, r) for r in out):
                out.append(path)
        return out, create

    def plan(self, policy: Policy, argv: list[str], env: Mapping[str, str], seen: Snapshot | None = None) -> LaunchPlan:
        """seen is not used: nothing inside a container checks the masks (the threat model says so)."""
        roots, create = self.roots(policy, env)
        cwd = self.settings.cwd if any(inside(self.settings.cwd, r) for r in roots) else policy.root
        base = cache_dir(env)
        empty_file, empty_dir = os.path.join(base, "mask-empty-file"), os.path.join(base, "mask-empty-dir")
        cmd = [self.executable or self.engine, "run", "--rm", "-i"]
        if sys.stdin.isatty():
            cmd.append("-t")
        cmd += ["--pull=never", "--security-opt", "label=disable"]
        if self.rootless_podman:
            cmd.append("--userns=keep-id")
        else:
            cmd += ["--user", f"{os.getuid()}:{os.getgid()}"]
        home = env.get("HOME", "")
        if home and home != "/" and not any(c in home for c in ":,"):
            cmd += ["--tmpfs", f"{home}:rw,exec,mode=1777"]  # HOME exists and is writable; state is mounted below
        for r in roots:
            cmd += ["--mount", mount_arg(type="bind", source=r, target=r)]
        # write containment (writes.py): the container holds only what is mounted; inside the mounts, the
        # protected places are read-only, the directory above each a mount of its own (no rename moves it)
        for a in policy.writes.anchors:
            if a not in roots and any(inside(a, r) for r in roots) and os.path.isdir(a):  # a root is one already
                cmd += ["--mount", mount_arg(type="bind", source=a, target=a)]
        for place in policy.writes.read_only:
            if any(inside(place.path, r) for r in roots) and os.path.lexists(place.path):
                cmd += ["--mount", mount_arg(type="bind", source=place.path, target=place.path, readonly=True)]
        for m in policy.masks:
            if any(inside(m.path, r) for r in roots):
                source = empty_dir if m.is_dir else empty_file
                cmd += ["--mount", mount_arg(type="bind", source=source, target=m.path, readonly=True)]
        cmd += _ssh_agent(env)
        if policy.network.private:  # no proxy reaches into a container yet: allowlist is off here (network.md)
            cmd += ["--network", "none"]
        cmd += ["--workdir", cwd]
        for name in env:
            if name in NOT_PASSED or name.startswith(NOT_PASSED_PREFIXES) or name in ("TERM", "SSH_AUTH_SOCK"):
                continue
            cmd += ["-e", name]
        if "TERM" in env:
            cmd += ["-e", f"TERM={env['TERM']}"]  # -t would set TERM=xterm
        cmd.append(self.image)
        dirs = {d: 0o700 for d in create} | {empty_dir: 0o500}
        return LaunchPlan(
            sandbox=cmd, agent=argv, check=UNCHECKED, env=dict(env), extra_files={empty_file: b""}, dirs=dirs
        )


def _expand(p: str, env: Mapping[str, str]) -> str:
    if p == "~" or p.startswith("~/"):
        return env.get("HOME", os.path.expanduser("~")) + p[1:]
    return p


def _ssh_agent(env: Mapping[str, str]) -> list[str]:
    if sys.platform == "darwin":
        return [
            "--mount",
            mount_arg(type="bind", source=MAC_SSH_SOCK, target=MAC_SSH_SOCK),
            "-e",
            f"SSH_AUTH_SOCK={MAC_SSH_SOCK}",
        ]
    sock = env.get("SSH_AUTH_SOCK", "")
    if sock and os.path.exists(sock):
        return ["--mount", mount_arg(type="bind", source=sock, target=sock), "-e", "SSH_AUTH_SOCK"]
    return ["-e", "SSH_AUTH_SOCK"] if sock else []


def _dockerfile_dir() -> str:
    from ai_sandbox.paths import shipped_dir

    return os.path.join(shipped_dir(), "container")
