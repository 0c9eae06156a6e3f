"""The real agent CLIs, installed from the npm registry at the exact versions of package.json.

They are installed once into the venv running the tests, VENV/ai-sandbox-agents/agents-<hash>/ (the hash
covers package.json, package-lock.json and the platform), and reused by later runs (`make clean` drops them). npm works in a temp dir
renamed into place only after it succeeded and a marker was written, so a half-finished install is never
reused. The tree is world-readable: the tests run the agents as an unprivileged user, who can already reach
the venv (tests/conftest.py sees to that).

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
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tests.conftest import IS_ROOT, Workspace, _accessible, _new_repo, require

HERE = Path(__file__).parent
# In the venv (tests/conftest.py makes sure the unprivileged user reaches it); outside one, in the temp dir.
_IN_VENV = sys.prefix != sys.base_prefix
CACHE_ROOT = Path(sys.prefix) / "ai-sandbox-agents" if _IN_VENV else Path(tempfile.gettempdir()) / "ai-sandbox-tests"
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


def _unavailable(msg: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(msg)
    pytest.skip(msg)


def _key() -> str:
    h = hashlib.sha256()
    for name in ("package.json", "package-lock.json"):
        h.update(name.encode() + b"\0" + (HERE / name).read_bytes() + b"\0")
    h.update(f"{platform.system()}-{platform.machine()}".encode())
    return h.hexdigest()[:16]


def _is_elf(path: Path) -> bool:
    with path.open("rb") as f:
        return f.read(4) == b"\x7fELF"


def _claude_postinstall(pkg: Path) -> None:
    """Claude Code's bin is a shell stub until its postinstall links the native binary in: run it if npm did not
    (ignore-scripts set in this machine's npm config)."""
    if _is_elf(pkg / "bin" / "claude.exe"):
        return
    proc = subprocess.run(["node", "install.cjs"], cwd=pkg, capture_output=True, text=True, check=False)
    if proc.returncode != 0 or not _is_elf(pkg / "bin" / "claude.exe"):
        pytest.fail(f"claude's postinstall did not install its native binary: {proc.stdout}{proc.stderr}")


def _install(npm: str, root: Path, final: Path) -> None:
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}-", dir=root))
    try:
        for name in ("package.json", "package-lock.json"):
            shutil.copy(HERE / name, tmp / name)
        cmd = [npm, "ci", "--no-audit", "--no-fund", "--no-update-notifier"]
        proc = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True, timeout=900, stdin=subprocess.DEVNULL)
        if proc.returncode != 0:
            _unavailable(f"npm ci of the agent CLIs failed ({proc.returncode}): {proc.stderr.strip()[-2000:]}")
        missing = [a for a in AGENTS if not (tmp / "node_modules" / ".bin" / a).exists()]
        if missing:
            pytest.fail(f"npm ci succeeded but installed no {', '.join(missing)} in {tmp}/node_modules/.bin")
        _claude_postinstall(tmp / "node_modules" / PACKAGES["claude"])
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
    """Skip (fail under CI=true) when node is older than the agent's package declares (Debian 12 ships 18)."""
    engines = json.loads((agents_bin.parent / PACKAGES[agent] / "package.json").read_text()).get("engines", {})
    wanted = re.match(r"\s*>=\s*(\d+)", engines.get("node", ""))
    out = subprocess.run(["node", "--version"], capture_output=True, text=True, check=False).stdout.strip()
    have = re.match(r"v(\d+)\.", out)
    if wanted and have and int(have.group(1)) < int(wanted.group(1)):
        _unavailable(f"{PACKAGES[agent]} needs node {engines['node']}, this machine has {out}")


@pytest.fixture(scope="session")
def agents_bin() -> Path:
    """The bin dir of the pinned agent CLIs, installing them on first use."""
    npm = require("npm")
    require("node")
    CACHE_ROOT.mkdir(parents=True, exist_ok=True)
    if CACHE_ROOT.stat().st_uid == os.geteuid():
        CACHE_ROOT.chmod(0o755)
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
    return _new_repo(tmp_world, "user" if IS_ROOT else "self")


@pytest.fixture
def agent_env(agent_ws, agents_bin):
    """The environment for `ai-sandbox AGENT`: the agents first on PATH, node after them, no credentials."""
    node_dir = os.path.dirname(os.path.realpath(shutil.which("node") or "/usr/bin/node"))
    if agent_ws.user:
        for path in (str(agents_bin / "claude"), os.path.join(node_dir, "node")):
            if not _accessible(agent_ws.user, path):
                pytest.fail(f"{agent_ws.user.name} cannot run {path}: it must be readable by other users")
    env = {k: v for k, v in agent_ws.env().items() if not k.startswith(_FOREIGN_PREFIXES) and k not in ("AI_AGENT",)}
    env["PATH"] = os.pathsep.join(dict.fromkeys([str(agents_bin), node_dir, "/usr/local/bin", "/usr/bin", "/bin"]))
    env.update(_QUIET)
    return env
