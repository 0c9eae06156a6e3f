"""A small node project with secrets, and the real Claude Code driven by a scripted local API.

The agent fixtures come from tests/agents/conftest.py (imported so that pytest registers them here too):
Claude Code at its pinned version, a workspace run by the unprivileged user when the tests run as root,
and an environment with no credentials and no non-essential traffic. The stub API runs in the test
process on 127.0.0.1; the sandbox keeps the host's network, so the agent reaches it from inside.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.agents.conftest import agent_env, agent_ws, agents_bin  # noqa: F401  (fixtures, registered by import)
from tests.conftest import Result, Workspace, chown_tree, plant_env, require, token
from tests.container.conftest import busybox_rootfs, podman_env, podman_import  # noqa: F401  (podman_env: a fixture)
from tests.workflows.anthropic_stub import AnthropicStub, Step

PROMPT = "Do the scripted task."
TOOLS = "Read Grep Glob Bash Write"  # allowed without a prompt; works as root, unlike --dangerously-skip-permissions


@dataclass
class NodeProject:
    ws: Workspace
    env_secret: str  # in the git-ignored .env
    tf_secret: str  # in the tracked prod.tfvars, blocked by .ai-sandbox.toml
    tfvars: str  # prod.tfvars as committed
    source_mark: str  # in src/greet.js: readable
    build_mark: str  # written by build.js into dist/app.js: proves a build ran
    stale_build: str  # dist/app.js before the agent runs

    @property
    def repo(self) -> Path:
        return self.ws.repo


@pytest.fixture
def node_project(agent_ws) -> NodeProject:  # noqa: F811  (the imported fixture)
    """`npm run build` writes dist/app.js (git-ignored, present from an earlier build); secrets in .env and prod.tfvars."""
    w = agent_ws
    env_secret = plant_env(w)  # commits .gitignore with .env
    tf_secret = token("TFSECRET")
    source_mark, build_mark = token("SOURCE"), token("BUILD")
    tfvars = f'db_password = "{tf_secret}"\n'
    w.write(".gitignore", ".env\ndist/\n")
    w.write(".ai-sandbox.toml", 'block = ["*.tfvars"]\n')
    w.write("package.json", '{\n  "name": "app",\n  "private": true,\n  "scripts": {"build": "node build.js"}\n}\n')
    w.write(
        "build.js",
        'const fs = require("fs");\n'
        'fs.mkdirSync("dist", { recursive: true });\n'
        f'const out = "// fresh build {build_mark}\\n" + fs.readFileSync("src/greet.js", "utf8");\n'
        'fs.writeFileSync("dist/app.js", out);\n'
        'console.log("built dist/app.js");\n',
    )
    w.write("src/greet.js", f'module.exports = () => "hello {source_mark}";\n')
    w.write("prod.tfvars", tfvars)
    w.git("add", "-A")
    w.git("commit", "-qm", "app")
    w.git("config", "user.name", "agent")
    w.git("config", "user.email", "agent@example.invalid")
    stale = "// stale build\n"
    w.write("dist/app.js", stale)
    assert w.git("status", "--porcelain") == ""
    return NodeProject(w, env_secret, tf_secret, tfvars, source_mark, build_mark, stale)


def claude_env(base: dict[str, str], stub: AnthropicStub) -> dict[str, str]:
    """agent_env pointed at the stub: in -p mode an API key from the environment needs no approval."""
    return {**base, "ANTHROPIC_BASE_URL": stub.url, "ANTHROPIC_API_KEY": "dummy-key-for-the-stub"}


def claude_args() -> list[str]:
    return ["claude", "-p", PROMPT, "--allowedTools", TOOLS]


@dataclass
class Run:
    stub: AnthropicStub
    result: Result
    seconds: float

    def explain(self) -> str:
        return f"rc={self.result.rc} in {self.seconds:.1f}s\nstdout: {self.result.out}\nstderr: {self.result.err[-3000:]}\n{self.stub.report()}"


def run_sandboxed(project: NodeProject, env: dict[str, str], script: list[Step]) -> Run:
    """`ai-sandbox claude -p …` against a stub serving `script`."""
    with AnthropicStub(PROMPT, script) as stub:
        start = time.monotonic()
        res = project.ws.run(*claude_args(), env=claude_env(env, stub), raw_env=True, timeout=90)
        return Run(stub, res, time.monotonic() - start)


def run_direct(project: NodeProject, env: dict[str, str], script: list[Step]) -> Run:
    """The same Claude Code with no sandbox, as the same user: the control."""
    w = project.ws
    cmd = claude_args()
    if w.user:
        chown_tree(w.base, w.user)
        cmd = ["setpriv", f"--reuid={w.user.uid}", f"--regid={w.user.gid}", "--clear-groups", "--", *cmd]
    with AnthropicStub(PROMPT, script) as stub:
        start = time.monotonic()
        proc = subprocess.run(
            cmd,
            cwd=w.repo,
            env=claude_env(env, stub),
            capture_output=True,
            text=True,
            timeout=90,
            stdin=subprocess.DEVNULL,
        )
        return Run(stub, Result(proc.returncode, proc.stdout, proc.stderr), time.monotonic() - start)


# ---------------------------------------------------------------- the docker backend with git inside

GIT_IMAGE = "ai-sandbox-test-git"


def _needed_libs(binary: str) -> list[str]:
    out = subprocess.run(["ldd", binary], capture_output=True, text=True, check=True).stdout
    return [part for line in out.splitlines() for part in line.split() if part.startswith("/")]


@pytest.fixture(scope="session")
def git_image(podman_env, tmp_path_factory) -> str:  # noqa: F811  (the imported fixture)
    """busybox plus the host's git binary and the libraries it links: enough for the agent's git builtins."""
    git = os.path.realpath(require("git"))
    root = busybox_rootfs(tmp_path_factory.mktemp("git-image") / "rootfs", require("busybox"))
    shutil.copy(git, root / "bin" / "git")
    for lib in _needed_libs(git):
        dest = root / lib.lstrip("/")
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(os.path.realpath(lib), dest)
    podman_import(root, GIT_IMAGE, podman_env)
    return GIT_IMAGE


@pytest.fixture
def git_container(ws_self, podman_env, git_image):  # noqa: F811  (the imported fixture)
    """Run `ai-sandbox --backend docker --engine podman --image <busybox+git> ARGS` in the workspace."""

    def run(*args: str, **kw):
        return ws_self.run(
            "--backend", "docker", "--engine", "podman", "--image", git_image, *args, env=podman_env, **kw
        )  # fmt: skip

    return run
