"""Hidden paths changed from outside while the agent runs: the mask is on the old file, so a replaced
file would be readable inside. The watcher ends the session (or warns, if the user chose that)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import (
    AIS,
    BACKENDS,  # noqa: F401  (the module runs once per backend: conftest)
    chown_tree,
    default_signals,
)
from tests.stage import setpriv_argv

pytestmark = pytest.mark.sandbox

# Reads the hidden file once, well after the test replaced it: the session must be over by then.
SCRIPT = 'trap "" INT; echo READY; sleep 2.5; cat .env secrets/key 2>/dev/null; echo SURVIVED'


def _start(ws, script: str = SCRIPT, cwd: Path | None = None, env: dict[str, str] | None = None) -> subprocess.Popen:
    cmd = [AIS, *ws.backend_args, "--", "sh", "-c", script]
    if ws.user:
        chown_tree(ws.base, ws.user)
        cmd = ["setpriv", f"--reuid={ws.user.uid}", f"--regid={ws.user.gid}", "--clear-groups", "--", *cmd]
    proc = subprocess.Popen(
        cmd,
        cwd=cwd or ws.repo,
        env=env or ws.env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, like a job in a terminal
        preexec_fn=default_signals,
    )
    assert proc.stdout.readline() == "READY\n"
    return proc


def _secrets(ws) -> None:
    ws.write(".gitignore", ".env\nsecrets/\n")
    ws.write(".env", "OLD-SECRET\n")
    ws.write("secrets/key", "OLD-DIR-SECRET\n")


def _fsmonitor(ws) -> str:
    return subprocess.run(
        ["git", "config", "--file", str(ws.repo / ".git" / "config"), "core.fsmonitor"], capture_output=True, text=True
    ).stdout


def _tracked_hidden(ws) -> None:
    """prod.tfvars committed and blocked: the launch sets its index mark, the session's end clears it."""
    ws.write(".ai-sandbox.toml", 'block = ["prod.tfvars"]\n')
    ws.write("prod.tfvars", "key = 1\n")
    ws.git("add", ".")
    ws.git("commit", "-qm", "tfvars")


def _replace(path, content: str) -> None:
    """What an editor does on save: write a temp file, rename it over the original."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(content)
    tmp.chmod(0o644)
    os.replace(tmp, path)


def test_a_hidden_file_replaced_outside_ends_the_session(ws, firejail):
    _secrets(ws)
    proc = _start(ws)
    started = time.monotonic()
    os.killpg(
        proc.pid, signal.SIGINT
    )  # Ctrl-C in the terminal reaches the whole job (the watcher has a session of its own)
    time.sleep(0.3)
    _replace(ws.repo / ".env", "NEW-SECRET\n")
    out, err = proc.communicate(timeout=20)
    assert time.monotonic() - started < 2.3, "the session outlived the replacement"
    assert "NEW-SECRET" not in out and "SURVIVED" not in out
    assert proc.returncode != 0
    assert f"{ws.repo}/.env was replaced (outside the sandbox" in err and "ending the session" in err


def test_a_hidden_directory_replaced_outside_ends_the_session(ws, firejail):
    _secrets(ws)
    proc = _start(ws)
    os.rename(ws.repo / "secrets", ws.repo / "secrets.old")
    (ws.repo / "secrets").mkdir()
    (ws.repo / "secrets" / "key").write_text("NEW-DIR-SECRET\n")
    (ws.repo / "secrets").chmod(0o755)
    (ws.repo / "secrets" / "key").chmod(0o644)
    out, err = proc.communicate(timeout=20)
    assert "NEW-DIR-SECRET" not in out and "SURVIVED" not in out
    assert f"{ws.repo}/secrets was replaced" in err


def test_writing_a_hidden_file_in_place_keeps_it_hidden_and_the_session(ws, firejail):
    _secrets(ws)
    proc = _start(ws)
    with open(ws.repo / ".env", "a") as f:  # same file: the mask still covers it
        f.write("APPENDED-SECRET\n")
    out, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, err
    assert "SURVIVED" in out
    assert "SECRET" not in out and "replaced" not in err


def test_warn_mode_keeps_the_session_and_says_so(ws, firejail):
    _secrets(ws)
    ws.config_file.write_text('on_hidden_change = "warn"\n')
    proc = _start(ws)
    _replace(ws.repo / ".env", "NEW-SECRET\n")
    out, err = proc.communicate(timeout=20)
    assert proc.returncode == 0 and "SURVIVED" in out
    assert f"warning: {ws.repo}/.env was replaced (outside the sandbox" in err
    # the gap the user accepted: the new file is not hidden
    assert "NEW-SECRET" in out


def test_the_watcher_leaves_with_the_agent(ws_self, firejail):
    _secrets(ws_self)
    started = time.monotonic()
    res = ws_self.run("--", "true")  # captured pipes: a lingering watcher would hold them open
    assert res.rc == 0 and time.monotonic() - started < 5
    time.sleep(0.2)
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert f"{AIS} -- true" not in ps


def _session_of_true(ws) -> None:
    """`ai-sandbox -- true` as the workspace's identity, its output to a file, not a pipe: like a terminal,
    nothing waits for the watcher (which holds stderr)."""
    if ws.user:
        chown_tree(ws.base, ws.user)
    cmd = [AIS, *ws.backend_args, "--", "true"]
    if ws.user:
        cmd = setpriv_argv(ws.user.uid, ws.user.gid, cmd)
    with open(ws.base / "out.txt", "wb") as out:
        rc = subprocess.run(cmd, cwd=ws.repo, env=ws.env(), stdout=out, stderr=out, timeout=60).returncode
    assert rc == 0, (ws.base / "out.txt").read_text()


@pytest.mark.backends("firejail", "bwrap")
def test_the_index_marks_are_gone_when_the_launch_returns(ws):
    """The user's own edit to a hidden tracked file, then a session, then `git commit -a` at once: with the
    skip-worktree mark still set (the watcher clears it a moment later) git left the edit out of the commit
    (second red team). The launch waits for the backend and clears the marks itself before returning."""
    _tracked_hidden(ws)
    ws.write("prod.tfvars", "key = 2\n")  # the user's edit, before the session
    _session_of_true(ws)
    assert "S prod.tfvars" not in ws.git("ls-files", "-v")
    ws.git("commit", "-qam", "after")
    assert ws.git("show", "HEAD:prod.tfvars") == "key = 2\n"


@pytest.mark.backends("firejail", "bwrap")
def test_an_edit_git_has_yet_to_look_at_survives_the_marks(ws):
    """The user edits a hidden tracked file within the second git last wrote the index: git cannot tell the
    edit by its stat and re-reads the file at the next `git status` (a racily clean entry, known by an mtime
    not older than the index's). Setting and clearing the marks rewrites the index; on a Debian 13 run the new
    index's later mtime made the entry look clean, and `commit -a` left the edit out. Made deterministic here:
    the file keeps the size and mtime git recorded, and the index the same mtime."""
    ws.write(".ai-sandbox.toml", 'block = ["prod.tfvars"]\n')
    ws.write("prod.tfvars", "key = 1\n")
    ws.git("config", "core.checkStat", "minimal")  # mtime seconds and size only: ctime cannot be set back
    ws.git("add", ".")
    ws.git("commit", "-qm", "tfvars")
    # all three in one second, a minute ago: the commit's index entry, the edit, the index file
    when = (time.time_ns() - 60 * 10**9,) * 2
    os.utime(ws.repo / "prod.tfvars", ns=when)
    ws.git("update-index", "--refresh")  # the entry now records that mtime
    os.utime(ws.repo / ".git" / "index", ns=when)
    ws.write("prod.tfvars", "key = 2\n")  # the user's edit, same size
    os.utime(ws.repo / "prod.tfvars", ns=when)
    assert ws.git("diff", "--name-only") == "prod.tfvars\n"  # racy: git looks at the content (diff writes no index)
    _session_of_true(ws)
    for _ in range(100):  # under firejail the watcher clears the marks a moment after the launch returns
        if "S prod.tfvars" not in ws.git("ls-files", "-v"):
            break
        time.sleep(0.05)
    assert ws.git("status", "--porcelain") == " M prod.tfvars\n"
    ws.git("commit", "-qam", "after")
    assert ws.git("show", "HEAD:prod.tfvars") == "key = 2\n"


@pytest.mark.backends("firejail", "bwrap")
def test_a_launch_killed_outright_takes_the_sandbox_with_it(ws):
    """`kill -9` of the launch, or the watcher's SIGKILL for an agent that ignores SIGTERM: nothing of the session
    runs on (firejail has no --die-with-parent: the watcher ends the backend the launch told it of), and the
    session's end still runs (the watcher does it, once the sandbox is gone)."""
    _secrets(ws)
    ws.git("init", "-q")
    tag = f"ais-kill-{os.getpid()}-{time.monotonic_ns()}"
    proc = _start(ws, f"git config core.fsmonitor /bin/false && trap '' INT TERM HUP; echo READY; sleep 60 # {tag}")
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=20)  # EOF: the watcher, which holds stderr, has ended the session

    def running() -> list[str]:
        ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
        return [line for line in ps.splitlines() if tag in line]

    assert running() == [], "the sandbox outlived its launch"
    assert _fsmonitor(ws) == "", "the session's end did not run"


def _gone(tag: str, within: float = 10.0) -> bool:
    """No process whose command line holds tag, within that many seconds."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
        if not any(tag in line for line in ps.splitlines()):
            return True
        time.sleep(0.05)
    return False


@pytest.mark.backends("firejail", "bwrap")
def test_a_launch_killed_with_nothing_to_watch_takes_the_sandbox_with_it(ws):
    """Not a git repository, nothing hidden: no watcher had anything to watch, so none ran, and under firejail (no
    --die-with-parent) `kill -9` of the launch left firejail and the agent running (forty-fourth red team)."""
    tag = f"ais-plain-{os.getpid()}-{time.monotonic_ns()}"
    plain, home = ws.base / "plain", ws.base / "plainhome"  # an empty home: nothing of it hidden either
    plain.mkdir()
    home.mkdir()
    env = {**ws.env(), "HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config")}
    env.update(XDG_CACHE_HOME=str(home / ".cache"), XDG_STATE_HOME=str(home / ".state"))
    proc = _start(ws, f"echo READY; sleep 60 # {tag}", cwd=plain, env=env)
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=20)
    assert _gone(tag), "the sandbox outlived its launch"


@pytest.mark.backends("firejail", "bwrap")
def test_a_backend_killed_outright_still_ends_the_session_first(ws):
    """The backend dies of SIGKILL (its 30 s limit for an agent that never starts, or anyone's kill -9): the launch
    ends the session, then dies of the same signal. It tried to set SIGKILL's disposition, which raised, and exited 70
    with the session's end left to the watcher (forty-fourth red team)."""
    _secrets(ws)
    ws.git("init", "-q")
    proc = _start(ws, "git config core.fsmonitor /bin/false && echo READY; sleep 60")
    from ai_sandbox import supervise

    backend = [p for p in supervise.children(proc.pid) if Path(f"/proc/{p}/comm").read_text().strip() == ws.backend]
    assert backend, "no backend below the launch"
    os.kill(backend[0], signal.SIGKILL)
    _, err = proc.communicate(timeout=20)
    assert _fsmonitor(ws) == "", f"the session's end had not run when the launch returned: {err}"
    assert proc.returncode == -signal.SIGKILL, err


# Signals that end a process by default and that the launch neither passed on nor ignored: the session's
# `kill -SIG 0` reaches the launch too, since the session runs in its process group (forty-fifth red team)
OWN_GROUP = ("SIGALRM", "SIGVTALRM", "SIGPWR", "SIGSYS", "SIGRTMIN")


@pytest.mark.backends("firejail", "bwrap")
@pytest.mark.parametrize("name", OWN_GROUP)
def test_a_signal_the_session_sends_its_own_process_group_leaves_the_end_to_the_launch(ws, name):
    """The launch died of it and the end fell to the watcher, 50-100 ms after the shell had moved on: a script under
    `set -m` whose next command was `git status` ran the core.fsmonitor the session had planted, 5 times in 5, in
    every pair (forty-fifth red team). The launch now waits for every such signal; the session's own is not
    passed on (its process group, the agent's, got it already), and the end runs before the launch returns."""
    _secrets(ws)
    ws.git("init", "-q")
    sig = int(getattr(signal, name))
    proc = _start(ws, f"git config core.fsmonitor /bin/false && echo READY && kill -{sig} 0; sleep 5")
    proc.wait(timeout=20)
    left = _fsmonitor(ws)  # at once: the shell's next command runs now
    _, err = proc.communicate(timeout=20)
    assert left == "", f"the launch returned before the session's end: {err}"
    assert proc.returncode in (-sig, 128 + sig), (proc.returncode, err)


@pytest.mark.backends("firejail", "bwrap")
def test_a_signal_the_session_sends_its_own_process_group_reaches_it_once(ws):
    """`kill -USR1 0` inside: the agent's process group gets it from the kernel, and the launch, in that group too,
    passed it on again (an agent that counts a second Ctrl-C-like signal as a request to quit would quit)."""
    proc = _start(
        ws, "trap 'echo GOT' USR1; echo READY; kill -USR1 0; for i in 1 2 3 4 5 6 7 8 9 10; do sleep 0.1; done"
    )
    out = proc.stdout.read()  # what readline() read past READY is in its buffer, where communicate() never looks
    _, err = proc.communicate(timeout=20)
    assert out == "GOT\n", (out, err)
    assert proc.returncode == 0, err


# The agent gives the terminal to a process group of its own, sets `tostop` (a background write stops its writer),
# plants a setting, and exits: the launch, no longer in the foreground, writes its closing line.
TAKES_THE_TERMINAL = (
    "import os, signal, subprocess, termios; signal.signal(signal.SIGTTOU, signal.SIG_IGN); "
    "subprocess.run(['git', 'config', 'core.fsmonitor', '/bin/false']); "
    "os.setpgid(0, 0); os.tcsetpgrp(0, os.getpgrp()); a = termios.tcgetattr(0); a[3] |= termios.TOSTOP; "
    "termios.tcsetattr(0, termios.TCSANOW, a)"
)


@pytest.mark.backends("firejail", "bwrap")
def test_a_session_that_takes_the_terminal_cannot_stop_its_end(ws):
    """In an interactive shell, the launch was stopped by SIGTTOU at its closing line, and the shell ran the user's
    next command with the index marks still set, until `fg` (forty-fifth red team, 3 of 3 in every pair)."""
    import pty
    import sys

    _tracked_hidden(ws)
    if ws.user:
        chown_tree(ws.base, ws.user)
    seen = ws.base / "seen.txt"
    bash = ["bash", "--norc", "--noprofile", "-i"]
    if ws.user:
        bash = setpriv_argv(ws.user.uid, ws.user.gid, bash)
    pid, master = pty.fork()
    if pid == 0:  # pragma: no cover - the child
        default_signals()
        os.chdir(ws.repo)
        os.execvpe(bash[0], bash, {**ws.env(), "PS1": "$ "})
    line = (
        f'{AIS} {" ".join(ws.backend_args)} -- {sys.executable} -c "{TAKES_THE_TERMINAL}"; '
        f"git ls-files -v prod.tfvars > {seen}; git config core.fsmonitor >> {seen}; echo D''ONE\n"
    )
    os.write(master, line.encode())
    out = b""
    deadline = time.monotonic() + 30
    while b"DONE" not in out and time.monotonic() < deadline:
        try:
            chunk = os.read(master, 4096)
        except OSError:
            break
        out += chunk
    os.write(master, b"fg; exit\n")  # a stopped launch goes on, and ends
    time.sleep(1)
    os.close(master)
    os.waitpid(pid, 0)
    assert b"DONE" in out, out
    assert seen.read_text() == "H prod.tfvars\n", out.decode(errors="replace")


# No job left behind when the handler exits: under firejail it would hold the session open (backends.md)
HUP_SCRIPT = "trap 'echo HANDLER-RAN; exit 5' HUP; echo READY; while :; do sleep 0.1; done"


@pytest.mark.backends("firejail", "bwrap")
def test_a_hang_up_sent_to_the_launch_reaches_the_agents_handler(ws):
    """As root and as a user: under firejail as a user a shell stands between firejail's init and the launch check,
    and the signal went to it (forty-fourth red team: the handler never ran, and 30 s later the sandbox was killed)."""
    proc = _start(ws, HUP_SCRIPT)
    proc.send_signal(signal.SIGHUP)
    out, err = proc.communicate(timeout=20)
    assert "HANDLER-RAN" in out, err
    assert proc.returncode == 5, err


@pytest.mark.backends("firejail", "bwrap")
def test_the_status_is_the_agents(ws):
    """With a job the agent left running, the status is still the agent's: firejail exited with the last process's
    (forty-fourth red team: a SIGHUP to the launch ended the agent, and the status was its `sleep`'s 0). firejail
    keeps the session while the job runs; bwrap ends it with the agent."""
    proc = _start(ws, "sleep 1 & echo READY; exit 3")
    out, err = proc.communicate(timeout=20)
    assert proc.returncode == 3, err
    proc = _start(ws, "echo READY; exec sleep 30")
    proc.send_signal(signal.SIGHUP)
    out, err = proc.communicate(timeout=20)
    assert proc.returncode in (128 + signal.SIGHUP, -signal.SIGHUP), (proc.returncode, err)
