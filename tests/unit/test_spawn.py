"""spawn.py, which runs the launch's git calls instead of subprocess: what the child gets and what comes back, with
real programs."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from ai_sandbox import spawn

SH = "/bin/sh"


def test_output_status_and_input_both_ways_at_once():
    """Megabytes in and out on stdout and stderr together: neither side blocks the other on a full pipe."""
    data = os.urandom(3 << 20)
    script = "tee /dev/stderr; exit 3"
    done = spawn.run([SH, "-c", script], os.environ, stdin=data, timeout=60)
    assert (done.returncode, done.stdout, done.stderr) == (3, data, data)


def test_many_at_once_are_collected_by_name():
    kids = {str(n): spawn.start([SH, "-c", f"printf {n}; printf e{n} >&2; exit {n}"], os.environ) for n in range(5)}
    done = spawn.collect(kids, 60)
    assert {k: (v.returncode, v.stdout, v.stderr) for k, v in done.items()} == {
        str(n): (n, str(n).encode(), f"e{n}".encode()) for n in range(5)
    }


def test_a_program_past_its_time_is_killed_and_reaped():
    t = time.monotonic()
    child = spawn.start([SH, "-c", "echo started; exec sleep 30"], os.environ)
    with pytest.raises(spawn.TimedOut):
        spawn.collect({"": child}, 0.5)
    assert time.monotonic() - t < 10
    with pytest.raises(ChildProcessError):  # reaped: nothing is left to wait for
        os.waitpid(child.pid, os.WNOHANG)


def test_a_signal_is_a_negative_status_and_a_reader_that_stops_is_no_error():
    assert spawn.run([SH, "-c", "kill -TERM $$"], os.environ).returncode == -15
    assert spawn.run(["/bin/true"], os.environ, stdin=b"x" * (8 << 20)).returncode == 0


def test_a_missing_program_is_file_not_found_and_leaves_no_descriptor():
    before = set(os.listdir("/proc/self/fd"))
    with pytest.raises(FileNotFoundError):
        spawn.run(["/nonexistent/git"], os.environ, stdin=b"x")
    assert set(os.listdir("/proc/self/fd")) <= before


def test_the_child_gets_no_other_descriptor_and_default_sigpipe():
    """What subprocess gives (close_fds, restore_signals): a descriptor the launcher made inheritable (the proxy's
    channel, for the sandbox) is not git's, and git dies of SIGPIPE rather than seeing EPIPE."""
    r, w = os.pipe()
    os.set_inheritable(w, True)
    try:
        done = spawn.run([SH, "-c", "ls /proc/$$/fd; grep SigIgn /proc/$$/status"], os.environ)
    finally:
        os.close(r)
        os.close(w)
    fds = {int(x) for x in done.stdout.split()[:-2]}
    assert {0, 1, 2} <= fds and w not in fds and r not in fds, done.stdout
    ignored = int(done.stdout.split()[-1], 16)
    assert not ignored & (1 << 12)  # SIGPIPE (13): Python ignores it; the child has it back


def test_a_launcher_without_stdio_still_pipes_the_output():
    """With its own stdin, stdout and stderr closed, os.pipe() returns 0-2: the ends are moved above them first."""
    code = (
        "import os, sys\n"
        "out = os.dup(1)\n"
        "for fd in (0, 1, 2): os.close(fd)\n"
        "from ai_sandbox import spawn\n"
        "d = spawn.run(['/bin/sh', '-c', 'echo out; echo err >&2'], os.environ, stdin=b'in')\n"
        "os.write(out, repr((d.returncode, d.stdout, d.stderr)).encode())\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.stdout == repr((0, b"out\n", b"err\n")), proc.stderr
