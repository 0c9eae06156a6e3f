"""prefetch.py with the real git: the `ai-sandbox` command asks git first, the launch takes over exactly what it would
have asked itself, and git's answers are the same as when the launch asks; what nobody takes over is killed and
reaped."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import time
from collections.abc import Iterator

import pytest

from ai_sandbox import git, main, options, prefetch, spawn
from tests.conftest import AIS, PY, Workspace

# Run as the `ai-sandbox` command (entry.py): every program the process starts, and whether the launch's own
# modules were imported yet (the point of starting git first), written down where the backend would start.
PROBE = r"""
import json, os, sys
from ai_sandbox import spawn
out = sys.argv.pop(1)
started = []
real = spawn.start
def start(argv, *args, **kwargs):
    started.append([argv[argv.index("-C") + 2:] if "-C" in argv else argv, "ai_sandbox.launch" in sys.modules])
    return real(argv, *args, **kwargs)
spawn.start = start
def stop(*args, **kwargs):
    with open(out, "w") as f:
        json.dump(started, f)
    os._exit(0)
os.execve = stop  # the backend's start (firejail: the launch execs it)
from ai_sandbox.entry import main
sys.argv[0] = "ai-sandbox"
sys.exit(main())
"""


@pytest.fixture(autouse=True)
def _discarded() -> Iterator[None]:
    """What a test asked early and left, and SIGTERM's disposition, as the launch leaves them."""
    yield
    prefetch.discard()
    assert signal.getsignal(signal.SIGTERM) is not prefetch._terminated


def _repo(ws: Workspace) -> None:
    ws.write(".gitignore", ".env\nbuild/\n")
    ws.write("src/app.py", "print(1)\n")
    ws.git("add", ".gitignore", "src/app.py")
    ws.git("commit", "-qm", "src")
    ws.write(".env", "SECRET\n")
    ws.write("build/out.o", "x\n")
    ws.write("notes.txt", "untracked\n")


def test_the_command_starts_git_before_its_imports_and_the_launch_takes_it_over(ws_self: Workspace) -> None:
    _repo(ws_self)
    out = ws_self.base / "started.json"
    proc = subprocess.run(
        [PY, "-c", PROBE, str(out), "--", "true"], cwd=ws_self.repo / "src", env=ws_self.env(), capture_output=True, text=True,
        timeout=60, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert proc.returncode == 0 and out.exists(), proc.stderr
    started = json.loads(out.read_text())
    early = [args for args, late in started if not late]
    # one question and one scan, asked before the launch's modules were imported, and never asked again
    assert early == [prefetch.gitcommand.WHERE, *prefetch.gitcommand.SCAN.values()], started
    asked = [args for args, _ in started]
    for args in early:
        assert asked.count(args) == 1, (args, started)


LAUNCHES = [
    ["claude"], ["--", "true"], ["--backend", "bwrap", "claude", "-p", "x"], ["--backend=bwrap", "claude"],
    ["--network", "off", "--", "make"], ["--dry-run", "aider"], ["--debug", "--", "sh"], ["-", "x"],
]  # fmt: skip
NOT_LAUNCHES = [
    [], ["--"], ["explain"], ["alias", "claude"], ["--backend", "bwrap", "doctor"], ["--help"], ["-h", "claude"],
    ["--version"], ["--backend"], ["profiles"], ["--show-completion"],
]  # fmt: skip


@pytest.mark.parametrize("words", LAUNCHES + NOT_LAUNCHES)
def test_a_launch_is_recognised_as_main_reads_it(words: list[str]) -> None:
    try:
        opts, rest, is_command = main.parse(words)
    except Exception:
        opts, rest, is_command = {}, [], False
    typer = any(o.to_typer and o.name in opts for o in options.OPTIONS) or "--version" in opts
    launch = bool(rest) and not typer and (is_command or rest[0] not in options.SUBCOMMANDS)
    assert prefetch.launching(words) == launch == (words in LAUNCHES)


def test_its_option_names_are_main_s() -> None:
    assert {n for o in options.OPTIONS if o.metavar for n in o.names} == prefetch.VALUED
    assert prefetch.SUBCOMMANDS == options.SUBCOMMANDS


def _inside(ws: Workspace, monkeypatch: pytest.MonkeyPatch) -> tuple[object, ...]:
    """The repository made and this process in it, with the workspace's environment; git's answers asked as usual."""
    _repo(ws)
    monkeypatch.chdir(ws.repo)
    for k, v in ws.env().items():
        monkeypatch.setenv(k, v)
    return _answers(str(ws.repo))


def _answers(repo: str) -> tuple[object, ...]:
    found = git.find_repo(repo)
    assert found is not None
    scan = git.scan(found)
    return found, scan.ignored, scan.untracked, scan._index, scan.unlisted, scan.attributes_file, scan.crypt_config


def test_what_git_answers_is_the_same_taken_over_or_not(ws_self: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    asked = _inside(ws_self, monkeypatch)
    prefetch.start(["--", "true"])
    assert len(prefetch._started) == 3 and len(prefetch._answered) == 1
    assert _answers(str(ws_self.repo)) == asked
    assert not prefetch._started and not prefetch._answered  # all taken over


def test_a_call_in_another_environment_is_not_taken_over_and_is_reaped(
    ws_self: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked = _inside(ws_self, monkeypatch)
    prefetch.start(["--", "true"])
    pids = [c.pid for c in prefetch._started.values()]
    monkeypatch.setenv("AISBX_TEST_OTHER", "1")  # git may read any variable: only the very same environment will do
    started: list[list[str]] = []
    real = spawn.start
    monkeypatch.setattr(spawn, "start", lambda argv, *a, **k: started.append(argv) or real(argv, *a, **k))
    assert _answers(str(ws_self.repo)) == asked
    assert len(started) == 4  # asked again: rev-parse and the three ls-files
    assert len(prefetch._started) == 3  # left, then killed and reaped
    prefetch.discard()
    for pid in pids:
        with pytest.raises(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)


def test_nothing_is_asked_early_when_the_environment_redirects_git(
    ws_self: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    _repo(ws_self)
    monkeypatch.chdir(ws_self.repo)
    monkeypatch.setenv("GIT_DIR", str(ws_self.repo / ".git"))
    prefetch.start(["--", "true"])
    assert not prefetch._started and not prefetch._answered


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(p) for p in f.read().split()]
    except OSError:
        return []


def _signalled(ws: Workspace, sig: int, waiting: int) -> tuple[int, str, bool]:
    """`ai-sandbox -- true` in ws, sent sig once `waiting` git processes of its own wait (on a FIFO the test made):
    its exit status, its stderr, and whether every git it had started ended within 5 s."""
    proc = subprocess.Popen(
        [AIS, "--", "true"], cwd=ws.repo, env=ws.env(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 20
    while len(_children(proc.pid)) < waiting and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(0.2)
    gits = [os.pidfd_open(pid) for pid in _children(proc.pid)]  # each process itself, whatever reuses its pid
    assert len(gits) >= waiting, "git was never started"
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=20)
    try:
        return proc.returncode, err, select.select(gits, [], [], 5)[0] == gits
    finally:
        for fd in gits:
            os.close(fd)


def test_ctrl_c_while_git_is_asked_first_ends_quietly_and_leaves_no_git(ws_self: Workspace) -> None:
    _repo(ws_self)
    fifo = ws_self.repo / ".git" / "hang"
    os.mkfifo(fifo)  # git's first question reads the config, which includes a FIFO nobody writes: it waits
    ws_self.git("config", "include.path", str(fifo))
    rc, err, ended = _signalled(ws_self, signal.SIGINT, 1)
    assert rc == 130 and "Traceback" not in err, err
    assert ended  # every git it started has ended


# As PROBE, with git's environment changed once git was asked early, so that nothing is taken over: what the command
# started early must be gone when the backend starts (a session would hold it: red team, a root renamed mid-launch).
LEFT_PROBE = r"""
import json, os, sys
from ai_sandbox import prefetch
out = sys.argv.pop(1)
early = []
real = prefetch.start
def start(words):
    real(words)
    early.extend(c.pid for c in prefetch._started.values())
    os.environ["AISBX_TEST_OTHER"] = "1"  # every later git call differs from the early ones
prefetch.start = start
def stop(*args, **kwargs):
    alive = []
    for pid in early:
        try:
            os.waitpid(pid, os.WNOHANG)
            alive.append(pid)  # not reaped yet: a zombie or still running
        except ChildProcessError:
            pass
    with open(out, "w") as f:
        json.dump({"early": early, "alive": alive}, f)
    os._exit(0)
os.execve = stop
from ai_sandbox.entry import main
sys.exit(main())
"""


def test_what_nobody_took_over_is_gone_before_the_sandbox_starts(ws_self: Workspace) -> None:
    _repo(ws_self)
    out = ws_self.base / "left.json"
    proc = subprocess.run(
        [PY, "-c", LEFT_PROBE, str(out), "--", "true"], cwd=ws_self.repo, env=ws_self.env(), capture_output=True,
        text=True, timeout=60, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert proc.returncode == 0 and out.exists(), proc.stderr
    left = json.loads(out.read_text())
    assert len(left["early"]) == 3 and left["alive"] == [], left


def test_sigterm_while_git_walks_leaves_no_git(ws_self: Workspace) -> None:
    _repo(ws_self)
    os.unlink(ws_self.repo / ".git" / "info" / "exclude")
    os.mkfifo(ws_self.repo / ".git" / "info" / "exclude")  # a session can make one: git's walk waits on it
    rc, err, ended = _signalled(ws_self, signal.SIGTERM, 2)  # the two walks started, and wait
    assert rc == -signal.SIGTERM and "Traceback" not in err, (rc, err)
    assert ended  # every git it started has ended


def test_sigterm_is_given_back_after_two_starts(ws_self: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    _inside(ws_self, monkeypatch)
    before = signal.getsignal(signal.SIGTERM)
    prefetch.start(["--", "true"])
    prefetch.start(["--", "true"])  # a second launch's start in the same process, before any discard
    prefetch.discard()
    assert signal.getsignal(signal.SIGTERM) == before
