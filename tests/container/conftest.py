"""podman for the container backend: its own config and storage per test session, and a busybox image
imported from a rootfs (no registry is reachable). Each setting below says why it is needed (measured with
podman 4.3 and 5.4)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

from tests.conftest import require, unavailable

IMAGE = "ai-sandbox-test-busybox"


def _static(path: str) -> bool:
    proc = subprocess.run(["ldd", path], capture_output=True, text=True)
    return proc.returncode != 0 or "not a dynamic executable" in proc.stdout + proc.stderr


@pytest.fixture(scope="session")
def podman_env(tmp_path_factory) -> dict[str, str]:
    """Variables that point podman at this session's config and storage, with a busybox image in it."""
    podman = require("podman")
    require("runc")
    busybox = require("busybox")
    if not _static(busybox):
        unavailable(f"{busybox} is not static (make test installs busybox-static)")
    base = tmp_path_factory.mktemp("podman")
    conf, storage = base / "containers.conf", base / "storage.conf"
    # netns "none": no test needs a network in its container, and rootless podman's (slirp4netns, pasta) needs
    # /dev/net/tun, which some hosts give root only (crw------- on these VMs: "open(/dev/net/tun): Permission denied")
    conf.write_text(
        '[containers]\ndefault_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]\nnetns = "none"\n'
        f'[engine]\nruntime = "runc"\ntmp_dir = "{base}/tmp"\n'
    )
    # Rootless podman ignores graphroot and keeps images under ~/.local/share/containers, unless told
    # rootless_storage_path: the tests give every sandboxed command a HOME of its own, and the image would
    # be gone (measured with podman 4.3).
    storage.write_text(
        f'[storage]\ndriver = "vfs"\nrunroot = "{base}/run"\ngraphroot = "{base}/graph"\n'
        f'rootless_storage_path = "{base}/graph"\n'
    )
    runtime = base / "xdg-run"  # rootless podman's runtime files, pause.pid among them: here, not in /run/user
    runtime.mkdir(mode=0o700)
    env = {
        "CONTAINERS_CONF": str(conf),
        "CONTAINERS_STORAGE_CONF": str(storage),
        "XDG_RUNTIME_DIR": str(runtime),
        "PATH": os.environ["PATH"] + ":/usr/sbin:/sbin",
    }
    try:
        root = busybox_rootfs(base / "rootfs", busybox)
        podman_import(root, IMAGE, env)
        _can_run(podman, env)
        yield env
    finally:
        pause = _pause_pids(base / "tmp", runtime)  # read now: the removal below takes the tmp dir
        subprocess.run([podman, "rmi", "-f", IMAGE], env={**os.environ, **env}, capture_output=True)
        subprocess.run(["chmod", "-R", "u+w", str(base)], capture_output=True)
        if os.geteuid() != 0:  # rootless storage holds files of the user namespace's other ids: removed inside it
            storage_dirs = [str(base / d) for d in ("graph", "run", "tmp")]
            subprocess.run(
                [podman, "unshare", "rm", "-rf", *storage_dirs], env={**os.environ, **env}, capture_output=True
            )
        for pid in pause | _pause_pids(base / "tmp", runtime):  # last: a podman command above may start one
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)


def _can_run(podman: str, env: dict[str, str]) -> None:
    """One container, run directly: where podman itself cannot start one, every container test would fail
    with the same error; they are skipped instead (failed under CI=true) with podman's reason. Rootless
    podman 5 on a cgroup v1 host whose /sys/fs/cgroup lacks the controllers' mounts fails with runc's
    "no cgroup mount found in mountinfo" (a Debian 13 container, seen by a newcomer's run)."""
    proc = subprocess.run(
        [podman, "run", "--rm", IMAGE, "true"], env={**os.environ, **env}, capture_output=True, text=True, timeout=120
    )
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[-1]
        needs = (
            "podman needs runc and a writable storage"
            if os.geteuid() == 0
            else "rootless podman 5 needs cgroup v2, or cgroup v1 with its controllers mounted under /sys/fs/cgroup, "
            "plus uidmap and /etc/subuid entries"
        )
        unavailable(f"podman cannot run a container here ({last}): {needs}")


def _pause_pids(*dirs: Path) -> set[int]:
    """Rootless podman keeps a pause process (catatonit -P) holding its user namespace for later commands; it
    outlives the run unless ended. Its pid is in pause.pid under the engine's tmp_dir or the runtime dir's
    libpod/tmp (podman 4.3 and 5)."""
    pids = set()
    for d in dirs:
        for pidfile in (d / "pause.pid", d / "libpod" / "tmp" / "pause.pid"):
            with contextlib.suppress(OSError, ValueError):
                pids.add(int(pidfile.read_text().strip()))
    return pids


def busybox_rootfs(root: Path, busybox: str) -> Path:
    """A root file system of busybox and its applets, a passwd with root, /usr/bin -> /bin."""
    for d in ("bin", "etc", "tmp", "usr"):
        (root / d).mkdir(parents=True)
    shutil.copy(busybox, root / "bin" / "busybox")
    applets = subprocess.run([busybox, "--list"], capture_output=True, text=True, check=True).stdout.split()
    for applet in applets:
        if applet != "busybox":
            (root / "bin" / applet).symlink_to("busybox")
    (root / "usr" / "bin").symlink_to("../bin")
    (root / "etc" / "passwd").write_text("root:x:0:0:root:/root:/bin/sh\n")
    (root / "tmp").chmod(0o1777)
    return root


def podman_import(root: Path, image: str, env: dict[str, str]) -> None:
    tar = subprocess.Popen(["tar", "-C", str(root), "-c", "."], stdout=subprocess.PIPE)
    subprocess.run(
        [require("podman"), "import", "-q", "--change", "ENV PATH=/usr/bin:/bin", "-", image],
        stdin=tar.stdout,
        env={**os.environ, **env},
        check=True,
        capture_output=True,
    )
    tar.wait()


@pytest.fixture
def container(ws_self, podman_env):
    """Run `ai-sandbox --backend docker --engine podman --image busybox ARGS` in the workspace."""

    def run(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None, **kw):
        return ws_self.run(
            "--backend", "docker", "--engine", "podman", "--image", IMAGE, *args,
            env={**podman_env, **(env or {})}, cwd=cwd, **kw,
        )  # fmt: skip

    return run
