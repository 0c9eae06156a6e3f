"""Shared fixtures: throwaway git repositories, the installed `ai-sandbox` command, and an unprivileged user.

Integration tests drive the real command (the console script of this venv) against real git, git-crypt
and firejail or bubblewrap. In CI (CI=true) a missing tool fails the run; elsewhere the test is skipped with
the reason. A module that imports `BACKENDS` (or a test marked `@pytest.mark.backends(...)`) runs once per
backend: its workspace's launches pass `--backend NAME` (firejail is the default's
own choice here, so it runs as `auto`).
"""

from __future__ import annotations

import atexit
import functools
import json
import os
import pwd
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from ai_sandbox.backends.registry import on
from tests import hygiene
from tests.stage import runs_as, setpriv_argv, stage

# The backends every sandbox test module proves its claims against (a module imports this, or a test names some
# with @pytest.mark.backends): the registry's Linux ones, so a new backend is tested the day it is registered.
BACKENDS = on("linux")
TEST_USER = "aisbx-test"
# PATH for tests that look agents up: the system's directories only, not /usr/local/bin or ~/.local/bin,
# where the developer's own claude or aider would be found before (or instead of) the test's fake one.
SYSTEM_BIN = "/usr/sbin:/usr/bin:/sbin:/bin"
IS_ROOT = os.geteuid() == 0


def _own_home() -> tuple[list[str], str]:
    """The real home(s) of whoever runs the suite, and a home of the suite's own that HOME now names: what
    reads HOME (ai-sandbox's caches in-process, podman, npm) writes there, never into the user's home.
    XDG_* go too: unset, they follow HOME. npm keeps reading the user's ~/.npmrc (a registry, a CA)."""
    real = [h for h in {os.environ.get("HOME", ""), pwd.getpwuid(os.getuid()).pw_dir} if h and os.path.isdir(h)]
    npmrc = [os.path.join(h, ".npmrc") for h in real if os.path.isfile(os.path.join(h, ".npmrc"))]
    if npmrc and "NPM_CONFIG_USERCONFIG" not in os.environ:
        os.environ["NPM_CONFIG_USERCONFIG"] = npmrc[0]
    home = tempfile.mkdtemp(prefix=f"ai-sandbox-tests-home-{os.getuid()}-")
    os.chmod(home, 0o755)  # the test user passes through it, as through any home
    for k in [k for k in os.environ if k.startswith("XDG_") and k != "XDG_RUNTIME_DIR"]:
        del os.environ[k]
    os.environ["HOME"] = home
    return sorted(real), home


REAL_HOMES, SUITE_HOME = _own_home()
CHECKOUT = Path(__file__).resolve().parents[1]  # may lie in the home: its caches and .venv are the run's own
_HOMES_BEFORE = [hygiene.Home(h) for h in REAL_HOMES]
hygiene.become_subreaper()


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """The run fails when it wrote into the real home or left a process running (both are then removed)."""
    problems = []
    for before in _HOMES_BEFORE:
        problems += [f"wrote {p} in the real home" for p in before.written(ignore=(str(CHECKOUT),))]
    for _ in range(5):  # what a killed leftover had started comes to us in turn
        left = hygiene.children()
        if not left:
            break
        problems += [f"left running: pid {pid}: {cmd}" for pid, cmd in left]
        hygiene.end(left)
    shutil.rmtree(SUITE_HOME, ignore_errors=True)
    if problems:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        text = "the suite did not leave the machine as it found it:\n  " + "\n  ".join(problems)
        if reporter is not None:
            reporter.write_line(text, red=True)
        else:
            print(text, file=sys.stderr)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def unavailable(msg: str) -> None:
    """What a test needs is missing here: a skip, but a failure under CI=true, where nothing may be missing."""
    if os.environ.get("CI") == "true":
        pytest.fail(msg)
    pytest.skip(msg)


# The signals tests send to a launch, a session or a terminal's job.
SENT_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)


def default_signals() -> None:
    """preexec_fn of a process a test sends signals to: each signal's default disposition, whatever this run
    inherited. Under `nohup` SIGHUP is ignored, in a background job SIGINT and SIGQUIT; a launch passes an
    ignored disposition on to the agent, as it should, and the test would wait for an agent that never ends."""
    for s in SENT_SIGNALS:
        signal.signal(s, signal.SIG_DFL)


def require(tool: str) -> str:
    path = shutil.which(tool)
    if path is None:
        unavailable(f"{tool} is not installed (make test installs it with apt-get)")
    return path


def root_only(why: str) -> None:
    """Skip what only root can set up (a directory in /etc, a mount, the system's git replaced): the run as
    root covers it, and a run as a user reports it skipped, never passed."""
    if not IS_ROOT:
        pytest.skip(f"needs root: {why} (the suite run as root covers it)")


def token(prefix: str) -> str:
    """A fresh secret no script mentions: finding it in the output can only mean it was read."""
    return f"{prefix}-{secrets.token_hex(8)}"


def plant_env(ws: Workspace) -> str:
    """An ignored .env (rule committed) holding a fresh secret, which is returned."""
    secret = token("ENVSECRET")
    ws.write(".gitignore", ".env\n")
    ws.git("add", ".gitignore")
    ws.git("commit", "-qm", "ignore")
    ws.write(".env", secret + "\n")
    return secret


@dataclass
class User:
    name: str
    uid: int
    gid: int


def ensure_test_user() -> User:
    try:
        pw = pwd.getpwnam(TEST_USER)
    except KeyError:
        subprocess.run(["useradd", "--no-create-home", "--shell", "/bin/sh", TEST_USER], check=True)
        pw = pwd.getpwnam(TEST_USER)
    return User(pw.pw_name, pw.pw_uid, pw.pw_gid)


def _launcher() -> tuple[str, str]:
    """The `ai-sandbox` the tests run, and why the test user cannot run it if so. This venv's console script,
    unless we are root and the test user cannot run it (tests/stage.py): then a staged copy, for both."""
    ais = str(Path(sys.executable).with_name("ai-sandbox"))
    if not IS_ROOT:
        return ais, ""
    user = ensure_test_user()
    if runs_as(user.uid, user.gid, [ais, "--version"]):
        return ais, ""
    try:
        launcher = stage(user.uid, user.gid)
    except (RuntimeError, OSError, subprocess.CalledProcessError) as e:
        return ais, f"it cannot reach {ais} and staging a copy failed: {e}"
    atexit.register(shutil.rmtree, launcher.parents[2], True)
    return str(launcher), ""


AIS, _STAGE_PROBLEM = _launcher()
PY = str(Path(AIS).with_name("python"))  # the interpreter of that venv, which the test user can run


@functools.cache
def running_install() -> dict[str, str]:
    """Where the ai-sandbox that AIS runs keeps its code, interpreter and launch check (the staged copy's,
    not this process's, when staged): what a test of ai-sandbox's own files must aim at."""
    code = """
import json, os, site, sys, ai_sandbox
from ai_sandbox.paths import shipped_dir
from ai_sandbox.backends.host import verifier
python, check = verifier()
hook = os.path.join(os.path.dirname(os.__file__), "sitecustomize.py")  # Debian's links into /etc/python3.X
print(json.dumps(dict(
    package=os.path.dirname(ai_sandbox.__file__), python=python, check=check, profiles=shipped_dir(),
    site=site.getsitepackages()[0], prefix=sys.prefix, base_prefix=sys.base_prefix, path=sys.path[1:],
    hooks=os.path.dirname(os.path.realpath(hook)) if os.path.islink(hook) else "",
)))
"""
    return json.loads(subprocess.run([PY, "-c", code], capture_output=True, text=True, check=True).stdout)


# Who runs the sandboxed command: as root, both root and an unprivileged user; otherwise just ourselves.
IDENTITIES = ["root", "user"] if IS_ROOT else ["self"]


def sessions_ended(ws: Workspace, timeout: float = 20.0, root: Path | None = None) -> None:
    """Wait until no session of the workspace's still holds index marks: a launch clears them before it returns,
    but a session ended by its watcher (a launch killed, another root's session) a moment later (longer on a busy
    machine than any fixed sleep). Marks still held after `timeout` are a defect, not a wait. root: only the
    sessions launched from there (another root's may still run)."""
    from ai_sandbox.paths import project_key

    journals = ws.home / ".local" / "state" / "ai-sandbox" / "skip-worktree"
    only = project_key(os.path.realpath(root)) if root is not None else None
    deadline = time.monotonic() + timeout
    held: list[str] = []
    while True:
        held = []
        for f in sorted(journals.iterdir()) if journals.is_dir() else []:
            if f.name.endswith(".lock") or (only is not None and f.name != only):
                continue  # the journal's lock file (empty, never a session), or another root's journal
            try:
                if json.loads(f.read_bytes()).get("sessions"):
                    held.append(f.name)
            except (OSError, ValueError):
                held.append(f.name)  # being rewritten
        if not held or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert not held, f"sessions still hold index marks {timeout:.0f} s after the launch returned: {held}"


@dataclass
class Result:
    rc: int
    out: str
    err: str


class Workspace:
    """A world-traversable temp dir holding a repo, a HOME and the XDG dirs, owned by whoever runs the test."""

    def __init__(self, base: Path, identity: str, backend: str = "firejail") -> None:
        self.base = base
        self.identity = identity
        self.backend = backend
        if backend == "bwrap":
            require("bwrap")
        self.user = ensure_test_user() if identity == "user" else None
        self.repo = base / "repo"
        self.home = base / "home"
        self.repo.mkdir()
        (self.home / ".config" / "ai-sandbox").mkdir(parents=True)
        if self.user and _STAGE_PROBLEM:
            pytest.fail(f"{TEST_USER} cannot run ai-sandbox: {_STAGE_PROBLEM}")

    @property
    def backend_args(self) -> list[str]:
        """The options that select this workspace's backend: none for firejail (auto chooses it here)."""
        return [] if self.backend == "firejail" else ["--backend", self.backend]

    @property
    def unprivileged(self) -> bool:
        """The sandboxed command runs as a user, not root: the test user, or ourselves when not root."""
        return self.identity != "root"

    @property
    def config_file(self) -> Path:
        return self.home / ".config" / "ai-sandbox" / "config.toml"

    def git(self, *args: str, cwd: Path | None = None) -> str:
        env = {**os.environ, **_GIT_ENV, "HOME": str(self.home)}
        proc = subprocess.run(
            ["git", "-c", "safe.directory=*", *args],
            cwd=cwd or self.repo,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        assert proc.returncode == 0, f"git {' '.join(args)} failed: {proc.stderr}"
        return proc.stdout

    def write(self, rel: str, content: str | bytes = "") -> Path:
        path = self.repo / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
        return path

    def env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("XDG_", "GIT_")) and k not in ("HOME", "PYTEST_CURRENT_TEST")
        }
        env.update(HOME=str(self.home), XDG_CONFIG_HOME=str(self.home / ".config"))
        env.update(XDG_CACHE_HOME=str(self.home / ".cache"))
        env.update(extra or {})
        return env

    def run(
        self,
        *args: str,
        cwd: Path | None = None,
        env: dict[str, str] | None = None,
        raw_env: bool = False,
        timeout: float = 60,
        as_user: User | None = None,
    ) -> Result:
        """Run `ai-sandbox ARGS` as this workspace's identity (or as_user, without handing it the files)."""
        user = as_user or self.user
        if self.user:
            chown_tree(self.base, self.user)
        cmd = [AIS, *self.backend_args, *args]
        if user:
            cmd = setpriv_argv(user.uid, user.gid, cmd)
        proc = subprocess.run(
            cmd,
            cwd=cwd or self.repo,
            env=env if raw_env else self.env(env),
            capture_output=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
        dec = lambda b: b.decode("utf-8", "surrogateescape")  # noqa: E731
        return Result(proc.returncode, dec(proc.stdout), dec(proc.stderr))


_GIT_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.invalid",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.invalid",
    "GIT_CONFIG_NOSYSTEM": "1",
}


def chown_tree(base: Path, user: User) -> None:
    subprocess.run(["chown", "-R", f"{user.uid}:{user.gid}", str(base)], check=True)


def accessible_to(user: User, path: str) -> bool:
    return runs_as(user.uid, user.gid, ["test", "-x", path])


@pytest.fixture
def tmp_world():
    """A temp dir every user can traverse (pytest's own tmp_path is private to its owner)."""
    base = Path(tempfile.mkdtemp(prefix="ais-test-", dir="/tmp"))
    base.chmod(0o755)
    yield base
    shutil.rmtree(base, ignore_errors=True)


def new_workspace(base: Path, identity: str, backend: str = "firejail") -> Workspace:
    """A fresh git repository (branch main, one commit) in a workspace."""
    require("git")
    w = Workspace(base, identity, backend)
    w.git("init", "-q", "-b", "main")
    w.write("README.md", "readme\n")
    w.git("add", "README.md")
    w.git("commit", "-qm", "init")
    return w


@pytest.fixture
def sandbox_backend() -> str:
    """The backend a workspace's launches use, unless the test or its module names several (below)."""
    return "firejail"


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "sandbox_backend" not in metafunc.fixturenames:
        return
    mark = metafunc.definition.get_closest_marker("backends")
    names = mark.args if mark else getattr(metafunc.module, "BACKENDS", None)
    if names:
        metafunc.parametrize("sandbox_backend", names)


@pytest.fixture(params=IDENTITIES)
def ws(request, tmp_world, sandbox_backend) -> Workspace:
    """A repository, once for each identity that can run the sandbox here."""
    return new_workspace(tmp_world, request.param, sandbox_backend)


@pytest.fixture
def ws_self(tmp_world, sandbox_backend) -> Workspace:
    """Like ws, for tests where who runs the command does not change what is proved."""
    return new_workspace(tmp_world, "root" if IS_ROOT else "self", sandbox_backend)


@pytest.fixture
def firejail():
    return require("firejail")
