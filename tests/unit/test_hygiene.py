"""The check that the suite leaves the machine as it found it (tests/hygiene.py) sees what it must."""

from __future__ import annotations

import subprocess
import time

from tests import hygiene


def test_a_file_written_into_the_home_is_named(tmp_path):
    home = tmp_path / "home"
    (home / ".local" / "share" / "kept").mkdir(parents=True)
    (home / ".bashrc").write_text("x")
    look = hygiene.Home(home)
    assert look.written() == []
    (home / ".bashrc").write_text("changed")  # a change of a file already there is not a new entry
    (home / ".local" / "share" / "containers" / "storage").mkdir(parents=True)
    (home / ".local" / "share" / "kept" / "parsed-1").write_text("x")  # three levels down: seen
    (home / ".cache").mkdir()
    assert look.written() == [
        str(home / ".cache"),
        str(home / ".local" / "share" / "containers"),
        str(home / ".local" / "share" / "kept" / "parsed-1"),
    ]
    assert look.written(ignore=(str(home / ".local"),)) == [str(home / ".cache")]


def test_a_daemon_a_test_leaves_running_is_found_and_ended():
    assert hygiene.become_subreaper()
    marker = f"{time.time_ns()}"
    # the shell starts a sleep in the background and exits: the sleep, orphaned, comes to us
    subprocess.run(["sh", "-c", f"sleep 300 {marker} >/dev/null 2>&1 &"], check=True)
    for _ in range(100):
        left = [(pid, cmd) for pid, cmd in hygiene.children() if marker in cmd]
        if left:
            break
        time.sleep(0.02)
    assert left, "the orphaned sleep was not found among our children"
    hygiene.end(left)
    assert not [cmd for _, cmd in hygiene.children() if marker in cmd]
