"""The launch contract with the real firejail: environment, arguments, exit status, refusals."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time

import pytest

from tests.conftest import (
    AIS,
    IS_ROOT,
    Result,
    Workspace,
    chown_tree,
    default_signals,
    ensure_test_user,
    plant_env,
    require,
    root_only,
)

pytestmark = pytest.mark.sandbox


def _env_of(output: bytes) -> dict[bytes, bytes]:
    out = {}
    for item in output.split(b"\0"):
        if item:
            name, _, value = item.partition(b"=")
            out[name] = value
    return out


@pytest.mark.backends("firejail", "bwrap")
def test_environment_passes_through_byte_for_byte(ws, firejail, tmp_world):
    libdir = tmp_world / "lib"
    libdir.mkdir()
    extra = {
        "TMPDIR": str(tmp_world),
        "LD_LIBRARY_PATH": str(libdir),
        "GLIBC_TUNABLES": "glibc.malloc.tcache_count=7",
        "MALLOC_ARENA_MAX": "2",
        "TZDIR": "/usr/share/zoneinfo",
        "LOCPATH": "/usr/lib/locale",
        "PROMPT_COMMAND": "echo mine",
        "MULTI_LINE": "line one\nline two\n\ttabbed",
        "UNICODE_VALUE": "café ☕ 日本",
        "EMPTY_VALUE": "",
        "ODD-NAME.x": "kept",
    }
    env = ws.env(extra)
    cmd = ["/usr/bin/env", "-0"]
    for network, gained in (("on", {}), ("allowlist", PROXY)):
        res_out = _run_raw(ws, ["--network", network, "--", *cmd], env)
        inside = _env_of(res_out)
        expected = {os.fsencode(k): os.fsencode(v) for k, v in {**env, **gained}.items()}
        inside.pop(b"_", None)
        expected.pop(b"_", None)
        assert inside == expected, network


# the one change to the agent's environment: the proxy's variables, in allowlist (docs/network.md)
PROXY = {
    name: value
    for upper, value in (
        ("HTTPS_PROXY", "http://127.0.0.1:3128"),
        ("HTTP_PROXY", "http://127.0.0.1:3128"),
        ("ALL_PROXY", "socks5h://127.0.0.1:3128"),
        ("NO_PROXY", "localhost,127.0.0.1,::1"),
    )
    for name in (upper, upper.lower())
}


def _run_raw(ws: Workspace, args: list[str], env: dict[str, str]) -> bytes:
    cmd = [AIS, *ws.backend_args, *args]
    if ws.user:
        chown_tree(ws.base, ws.user)
        cmd = ["setpriv", f"--reuid={ws.user.uid}", f"--regid={ws.user.gid}", "--clear-groups", "--", *cmd]
    proc = subprocess.run(cmd, cwd=ws.repo, env=env, capture_output=True, stdin=subprocess.DEVNULL, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.mark.backends("firejail", "bwrap")
def test_arguments_reach_the_command_verbatim(ws, firejail):
    args = ["--help", "it's", "$HOME", 'a"b', "", "x  y", "nl\nx", "--dry-run", "*", "-", "--"]
    res = ws.run("--", "printf", "[%s]\n", *args)
    assert res.rc == 0, res.err
    assert res.out == "".join(f"[{a}]\n" for a in args)


def test_options_after_the_agent_belong_to_the_agent(ws, firejail):
    res = ws.run("echo", "--dry-run", "--backend", "x")
    assert res.rc == 0, res.err
    assert res.out == "--dry-run --backend x\n"


@pytest.mark.backends("firejail", "bwrap")
def test_exit_status_is_the_commands_own(ws, firejail):
    assert ws.run("--", "sh", "-c", "exit 7").rc == 7
    assert ws.run("--", "sh", "-c", "exit 0").rc == 0
    assert ws.run("--", "sh", "-c", "kill -TERM $$").rc in (143, -15)


def test_unknown_command_is_refused_before_the_sandbox(ws_self, firejail):
    res = ws_self.run("--", "no-such-command-xyz")
    assert res.rc == 127
    assert "no-such-command-xyz: not found on PATH" in res.err
    assert len(res.err.strip().splitlines()) == 1


def without(tools: tuple[str, ...], argv: list[str]) -> list[str]:
    """argv in a mount namespace of its own where every copy of tools in the system's directories is
    /dev/null: ai-sandbox looks for them there, never on PATH (so restricting PATH proves nothing)."""
    root_only("hides the system's sandbox tools in a mount namespace")
    require("unshare")
    from ai_sandbox.tools import SYSTEM_PATH

    found = [os.path.join(d, t) for t in tools for d in SYSTEM_PATH if os.path.isfile(os.path.join(d, t))]
    mounts = "".join(f"mount --bind /dev/null {shlex.quote(p)} && " for p in found)
    return ["unshare", "--mount", "--", "sh", "-c", mounts + 'exec "$@"', "-", *argv]


def without_firejail(argv: list[str]) -> list[str]:
    return without(("firejail",), argv)


def _hidden_run(ws: Workspace, tools: tuple[str, ...], args: list[str]) -> Result:
    proc = subprocess.run(
        without(tools, [AIS, *args]), cwd=ws.repo, env=ws.env(), capture_output=True, text=True, timeout=60
    )
    return Result(proc.returncode, proc.stdout, proc.stderr)


def test_with_no_backend_installed_auto_refuses_and_never_runs_the_agent(ws_self, tmp_world):
    marker = tmp_world / "ran"
    res = _hidden_run(ws_self, ("firejail", "bwrap"), ["--", "touch", str(marker)])
    assert res.rc == 69, res.err
    assert "firejail is not installed" in res.err and "bubblewrap is not installed" in res.err
    assert "apt-get install firejail" in res.err and "apt-get install bubblewrap" in res.err
    assert len(res.err.strip().splitlines()) == 1
    assert "Traceback" not in res.err
    assert not marker.exists()


def test_an_explicit_backend_that_is_missing_refuses(ws_self, tmp_world):
    marker = tmp_world / "ran"
    for tool, backend in (("firejail", "firejail"), ("bwrap", "bwrap")):
        res = _hidden_run(ws_self, (tool,), ["--backend", backend, "--", "touch", str(marker)])
        assert res.rc == 69 and "is not installed" in res.err and len(res.err.splitlines()) == 1, res.err
        assert not marker.exists()


def test_without_firejail_auto_runs_bwrap_and_hides(ws_self):
    secret = plant_env(ws_self)
    res = _hidden_run(ws_self, ("firejail",), ["--", "sh", "-c", "cat /proc/1/comm README.md .env; true"])
    assert res.rc == 0, res.err
    assert res.out.startswith("bwrap\nreadme\n"), res.out
    assert secret not in res.out + res.err
    doc = json.loads(_hidden_run(ws_self, ("firejail",), ["explain", "--json"]).out)
    assert doc["backend"] == "bwrap"


def test_git_failure_refuses_never_an_empty_blacklist(ws_self, firejail, tmp_world):
    ws_self.write(".gitignore", ".env\n")
    ws_self.write(".env", "SECRET\n")
    (ws_self.repo / ".git" / "index").write_bytes(b"garbage, not an index")
    marker = tmp_world / "ran"
    res = ws_self.run("--", "touch", str(marker))
    assert res.rc == 65, res.err
    assert "git ls-files failed" in res.err and str(ws_self.repo) in res.err
    assert "Traceback" not in res.err
    assert not marker.exists()


@pytest.mark.skipif(not IS_ROOT, reason="needs a second user to own the repository")
def test_repository_owned_by_another_user_refuses(ws_self, firejail, tmp_world):
    # the repository stays root's; the command runs as the unprivileged test user
    user = ensure_test_user()
    subprocess.run(["chown", "-R", str(user.uid), str(ws_self.home)], check=True)
    marker = tmp_world / "ran"
    res = ws_self.run("--", "touch", str(marker), as_user=user)
    assert res.rc == 65, res.err
    assert "owned by another user" in res.err and "safe.directory" in res.err
    assert not marker.exists()


def test_dry_run_shows_every_hidden_path_and_runs_nothing(ws_self, tmp_world):
    ws_self.write(".gitignore", ".env\nsecrets/\n")
    ws_self.write(".env", "x")
    ws_self.write("secrets/a", "x")
    marker = tmp_world / "ran"
    res = ws_self.run("--dry-run", "--", "touch", str(marker))
    assert res.rc == 0, res.err
    assert not marker.exists()
    assert "ignored   .env" in res.out and "ignored   secrets/" in res.out
    assert "--profile=" in res.out and f"blacklist {ws_self.repo}/.env" in res.out
    # root owns its project's secrets/: an empty tmpfs of the session, said so on its line
    assert f"tmpfs {ws_self.repo}/secrets" in res.out or f"blacklist {ws_self.repo}/secrets" in res.out
    assert ("[writable scratch" in res.out) == (f"tmpfs {ws_self.repo}/secrets" in res.out)


def test_legacy_config_is_parsed_never_executed(ws, firejail, tmp_world):
    marker = tmp_world / "pwned"
    ws.write("config/prod.yml", "SECRET-LEGACY\n")
    ws.write("config/dev.yml", "DEV-VISIBLE\n")
    ws.git("add", ".")
    ws.git("commit", "-qm", "config")
    ws.write(".ai-sandbox", '# legacy\nAI_SANDBOX_BLOCK_PATHS=(\n  "config/prod.yml"\n)\n')
    res = ws.run("--", "sh", "-c", "cat config/prod.yml config/dev.yml; true")
    assert res.rc == 0, res.err
    assert "DEV-VISIBLE" in res.out and "SECRET-LEGACY" not in res.out

    ws.write(".ai-sandbox", f"AI_SANDBOX_BLOCK_PATHS=(config/prod.yml)\nAI_SANDBOX_ALLOW_PATHS=($(touch {marker}))\n")
    res = ws.run("--", "true")
    assert res.rc == 78
    assert ".ai-sandbox:2" in res.err and "Traceback" not in res.err
    assert not marker.exists()


def test_project_config_cannot_unhide_a_global_block(ws, firejail, tmp_world):
    ws.write(".gitignore", "creds/\n")
    ws.git("add", ".gitignore")
    ws.git("commit", "-qm", "ignore")
    ws.write("creds/token", "SECRET-GLOBAL\n")
    ws.config_file.write_text(f'block = ["{ws.repo}/creds/token", "*.pem"]\n')
    marker = tmp_world / "ran"
    ws.write(".ai-sandbox.toml", 'allow = ["creds/"]\n')
    res = ws.run("--", "touch", str(marker))
    assert res.rc == 78, res.err
    assert ".ai-sandbox.toml:1" in res.err and "creds/" in res.err
    assert not marker.exists()
    ws.write(".ai-sandbox.toml", 'allow = ["*.pem"]\n')
    res = ws.run("--", "touch", str(marker))
    assert res.rc == 78 and "*.pem" in res.err
    ws.write(".ai-sandbox.toml", 'allow = ["../outside/"]\n')
    res = ws.run("--", "touch", str(marker))
    assert res.rc == 78 and "outside the project" in res.err
    assert not marker.exists()


@pytest.mark.parametrize(
    "content, where",
    [
        ("block = [", ".ai-sandbox.toml"),
        ('block = "secrets/"', ".ai-sandbox.toml:1"),
        ('blok = ["x"]', ".ai-sandbox.toml:1"),
        ('block = ["ok", 3]', ".ai-sandbox.toml:1"),
    ],
)
def test_malformed_project_config_is_one_clear_line(ws_self, firejail, tmp_world, content, where):
    ws_self.write(".ai-sandbox.toml", content + "\n")
    marker = tmp_world / "ran"
    res = ws_self.run("--", "touch", str(marker))
    assert res.rc == 78
    assert where in res.err and "Traceback" not in res.err
    assert len(res.err.strip().splitlines()) == 1
    assert not marker.exists()


@pytest.mark.backends("firejail", "bwrap")
def test_the_terminal_stays_a_terminal(ws_self, firejail):
    require("script")
    cmd = f"{shlex.join([AIS, *ws_self.backend_args])} -- sh -c 'test -t 0 && test -t 1 && echo IS-A-TTY'"
    proc = subprocess.run(
        ["script", "-qec", cmd, "/dev/null"], cwd=ws_self.repo, env=ws_self.env(), capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    assert "IS-A-TTY" in proc.stdout


def _ready(ws: Workspace, argv: list[str]) -> subprocess.Popen[str]:
    """`ai-sandbox -- ARGV` started, once the agent has printed READY."""
    proc = subprocess.Popen(
        [AIS, *ws.backend_args, "--", *argv],
        cwd=ws.repo,
        env=ws.env(),
        stdout=subprocess.PIPE,
        text=True,
        preexec_fn=default_signals,
    )
    assert proc.stdout is not None and proc.stdout.readline() == "READY\n"
    return proc


@pytest.mark.backends("firejail", "bwrap")
def test_an_interrupt_reaches_the_agent(ws_self, firejail):
    script = 'trap "echo GOT-SIGNAL; exit 3" INT TERM; echo READY; sleep 30 & wait'
    proc = _ready(ws_self, ["sh", "-c", script])
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=20)
    assert "GOT-SIGNAL" in out  # firejail forwards it as SIGTERM, bwrap's supervisor as itself; the handler ran
    assert proc.returncode != 0


# The agent counts what reaches it for 3 s, then says so: a second delivery of one Ctrl-C would make an agent
# like Claude Code quit (it exits on a double Ctrl-C).
_COUNTER = """
import signal, sys, time
got = []
for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
    signal.signal(s, lambda n, f: got.append(signal.Signals(n).name))
print("READY", flush=True)
end = time.monotonic() + 3
while time.monotonic() < end:
    time.sleep(0.02)
print("GOT", ",".join(got) or "-", flush=True)
sys.exit(len(got))
"""


def _on_a_terminal(ws: Workspace, argv: list[str], keys: bytes) -> tuple[str, int]:
    """argv on a new pseudo-terminal as its controlling terminal; keys typed once it says READY. (output, exit
    status)"""
    import pty

    pid, master = pty.fork()
    if pid == 0:  # pragma: no cover - the child
        default_signals()
        os.chdir(ws.repo)
        os.execve(argv[0], argv, ws.env())
    out = b""
    typed = False
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
        if not typed and b"READY" in out:
            os.write(master, keys)
            typed = True
    os.close(master)
    _, status = os.waitpid(pid, 0)
    return out.decode("utf-8", "replace"), os.waitstatus_to_exitcode(status)


# firejail, measured: Ctrl-C reaches the agent as SIGINT from the terminal and again as SIGTERM from firejail
# (which gets the terminal's SIGINT too, whatever it inherited, and passes it on as SIGTERM). Both backends run under
# ai-sandbox's own supervisor (supervise.py), which passes other signals to the agent itself.
FIREJAIL_CTRL_C = pytest.param(
    "firejail", marks=pytest.mark.xfail(strict=True, reason="firejail adds a SIGTERM to Ctrl-C")
)


@pytest.mark.backends(FIREJAIL_CTRL_C, "bwrap")
def test_ctrl_c_on_the_terminal_reaches_the_agent_once_and_the_sandbox_stays(ws_self):
    out, rc = _on_a_terminal(ws_self, [AIS, *ws_self.backend_args, "--", sys.executable, "-c", _COUNTER], b"\x03")
    assert "GOT SIGINT\r\n" in out, out
    assert rc == 1, out  # the agent's own status: it ran to its end, one signal received


# The agent counts what reaches it for 3 s, then writes it down: its terminal is gone by then.
_HANGUP_COUNTER = """
import signal, time
got = []
for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
    signal.signal(s, lambda n, f: got.append(signal.Signals(n).name))
print("READY", flush=True)
end = time.monotonic() + 3
while time.monotonic() < end:
    time.sleep(0.02)
with open("counted.txt", "w") as f:
    f.write(",".join(got) or "-")
"""


@pytest.mark.backends("firejail", "bwrap")
def test_a_closed_terminal_reaches_the_agent_once(ws_self):
    """The terminal closes (a window shut, an ssh connection lost): the agent gets its SIGHUP, once, and its
    handler runs (under firejail, when the launch became firejail, firejail died of the hang-up and took the
    agent down with it)."""
    import pty

    # a shell leads the terminal's session, as the user's does, and dies of the hang-up: the kernel then sends
    # SIGHUP to the foreground process group, the launch's
    launch = [AIS, *ws_self.backend_args, "--", sys.executable, "-c", _HANGUP_COUNTER]
    argv = ["/bin/sh", "-c", '"$@"; exit $?', "sh", *launch]
    pid, master = pty.fork()
    if pid == 0:  # pragma: no cover - the child
        default_signals()
        os.chdir(ws_self.repo)
        os.execve(argv[0], argv, ws_self.env())
    out = b""
    while b"READY\r\n" not in out:
        chunk = os.read(master, 4096)
        assert chunk, out
        out += chunk
    # the agent's write of its line done and its loop begun: a hang-up within that write made it fail (EIO), and
    # the agent died of the exception (CI, once, as a user under bwrap)
    time.sleep(0.3)
    os.close(master)  # the hang-up
    os.waitpid(pid, 0)
    counted = ws_self.repo / "counted.txt"
    deadline = time.monotonic() + 20
    while not counted.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert counted.exists(), f"the agent was ended without its handler running: {out!r}"
    time.sleep(0.1)  # written whole
    assert counted.read_text() == "SIGHUP", out


@pytest.mark.backends("firejail", "bwrap")
def test_a_signal_sent_to_the_launch_reaches_the_agent(ws_self):
    """`kill -HUP PID` of what the shell started: the agent gets it, handles it, and its exit status is the
    launch's (under firejail, when the launch became firejail, a SIGHUP ended the agent without its handler
    running)."""
    proc = _ready(ws_self, [sys.executable, "-c", _COUNTER])
    proc.send_signal(signal.SIGHUP)
    out, _ = proc.communicate(timeout=20)
    assert out == "GOT SIGHUP\n"
    assert proc.returncode == 1


@pytest.mark.backends("firejail", "bwrap")
def test_the_agent_inherits_the_callers_signal_dispositions(ws_self):
    """nohup's ignored SIGHUP stays ignored; nothing else is (Python, which runs ai-sandbox and the launch
    check, ignores SIGPIPE, and an exec keeps that: `agent | head` would then see EPIPE instead of ending)."""

    def ignore_hup() -> None:
        signal.signal(signal.SIGHUP, signal.SIG_IGN)

    proc = subprocess.run(
        [AIS, *ws_self.backend_args, "--", "grep", "^SigIgn:", "/proc/self/status"],
        cwd=ws_self.repo,
        env=ws_self.env(),
        capture_output=True,
        text=True,
        preexec_fn=ignore_hup,
    )
    assert proc.returncode == 0, proc.stderr
    # what this test itself inherited ignored stays so (a background job's SIGINT and SIGQUIT, a CI runner's
    # signal 32), except SIGPIPE and SIGXFSZ, which Python ignores in every process of its own
    with open("/proc/self/status") as f:
        own = int(next(line for line in f if line.startswith("SigIgn:")).split()[1], 16)
    mask = own & ~(1 << (signal.SIGPIPE - 1) | 1 << (signal.SIGXFSZ - 1))
    assert int(proc.stdout.split()[1], 16) == mask | 1 << (signal.SIGHUP - 1), proc.stdout
    plain = ws_self.run("--", "sh", "-c", "yes | head -n 1; grep ^SigIgn: /proc/self/status")
    assert plain.rc == 0 and plain.out.split() == ["y", "SigIgn:", f"{mask:016x}"], plain.out + plain.err


def test_a_slow_scan_shows_a_status_on_a_terminal_only(ws_self, firejail, tmp_world):
    """git is made slow where ai-sandbox runs it from (the system's own, never PATH's): in a mount
    namespace, a wrapper that sleeps is bound over it."""
    require("script")
    root_only("replaces the system's git in a mount namespace")
    git = require("git")
    real = tmp_world / "real-git"
    shutil.copy(git, real)
    slow = tmp_world / "slow-git"
    slow.write_text(f'#!/bin/sh\nsleep 1\nexec {real} "$@"\n')  # one git call outlasts the 0.4 s delay
    slow.chmod(0o755)
    wrap = ["unshare", "--mount", "--", "sh", "-c", f'mount --bind {slow} {git} && exec "$@"', "-"]
    # a terminal that draws: on TERM=dumb (a CI runner's, or a bare chroot's) rich shows no status, rightly
    env = {**ws_self.env(), "TERM": "xterm-256color"}
    proc = subprocess.run(
        [*wrap, "script", "-qec", f"{AIS} -- echo AGENT-OUTPUT", "/dev/null"],
        cwd=ws_self.repo,
        env=env,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    assert "reading the repository" in proc.stdout and "AGENT-OUTPUT" in proc.stdout
    assert "\x1b[?25h" in proc.stdout  # the status ended (cursor shown again) before the agent started
    quiet = subprocess.run(
        [*wrap, AIS, "--", "echo", "AGENT-OUTPUT"], cwd=ws_self.repo, env=env, capture_output=True, text=True
    )
    assert quiet.stdout == "AGENT-OUTPUT\n" and quiet.stderr == ""  # not a terminal: not a byte of ours


@pytest.mark.backends("firejail", "bwrap")
def test_the_system_is_as_outside_except_var_tmp(ws, firejail):
    """firejail's defaults remount /etc and /var read-only (noexec for users); the agent must not notice.
    /usr stays read-only (no firejail option lifts it), which only root could notice: see docs/backends.md."""
    res = ws.run("--", "cat", "/proc/self/mountinfo")
    assert res.rc == 0, res.err
    points = {line.split()[4]: line.split()[5] for line in res.out.splitlines()}
    for path in ("/etc", "/var", "/var/log", "/home"):
        assert "ro" not in points.get(path, "rw").split(","), f"{path} is read-only inside: {points[path]}"
    assert "noexec" not in points.get("/etc", "") + points.get("/var", "")


@pytest.mark.backends("firejail", "bwrap")
def test_over_the_mask_limit_directories_are_hidden_whole_and_said(ws, firejail):
    """Past max_masks the policy widens (never narrows): secrets stay unreadable, the launch says which
    way, --dry-run lists the widened directories, and lifting the limit later is no "un-hiding"."""
    secrets = {f"data/s{i}.secret": f"SECRET-{i}-{os.getpid()}" for i in range(6)}
    ws.write(".gitignore", "*.secret\n")
    ws.write("data/README.md", "DATA-README\n")
    ws.write("src/app.py", "APP-VISIBLE\n")
    ws.git("add", ".")
    ws.git("commit", "-qm", "data")
    for rel, content in secrets.items():
        ws.write(rel, content + "\n")
    ws.write("src/x.secret", "SECRET-SRC\n")
    ws.config_file.write_text("max_masks = 3\n")
    res = ws.run("--", "sh", "-c", "cat src/app.py data/*; ls data; cat src/x.secret; true")
    assert res.rc == 0, res.err
    assert "APP-VISIBLE" in res.out
    assert not any(s in res.out for s in [*secrets.values(), "SECRET-SRC"])
    assert "DATA-README" not in res.out  # the cost of widening: data/ is hidden whole
    assert "more than the backend can mount (3)" in res.err and "1 directories are hidden whole" in res.err
    plan = ws.run("--dry-run", "--", "true")
    assert "widened: over the mask limit of 3" in plan.out and "holds 6 hidden paths" in plan.out
    ws.config_file.write_text("")
    res = ws.run("--", "sh", "-c", "cat data/README.md data/s0.secret; true")
    assert res.rc == 0, res.err  # not refused as an un-hiding: the record holds the files, not data/
    assert "DATA-README" in res.out and secrets["data/s0.secret"] not in res.out


def test_a_bad_max_masks_is_one_clear_line(ws_self, firejail):
    for value in ("0", "true", '"10"', "100000"):
        ws_self.config_file.write_text(f"max_masks = {value}\n")
        res = ws_self.run("--", "true")
        assert res.rc == 78 and res.err.count("\n") == 1 and "max_masks" in res.err, (value, res.err)


@pytest.mark.backends("bwrap")
def test_nested_sandboxes_work_inside_for_a_user_and_not_for_root(ws):
    """A user's agent may start its own sandbox (Claude Code's bash sandbox is bwrap): a user namespace in
    ours. Root's has no capability left, so it cannot; and neither can lift a mask (tests/security)."""
    require("unshare")
    script = "bwrap --dev-bind / / true && echo NESTED-BWRAP; unshare -Ur true && echo NESTED-USERNS; true"
    res = ws.run("--", "sh", "-c", script)
    assert res.rc == 0, res.err
    if ws.unprivileged:
        assert res.out == "NESTED-BWRAP\nNESTED-USERNS\n", res.out + res.err
    else:
        assert res.out == "", res.out
