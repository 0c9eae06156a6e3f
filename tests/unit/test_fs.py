"""fs.write_files: generated files are named by their content's hash, so the cache must not only grow."""

from __future__ import annotations

import os
import time

from ai_sandbox import fs


def test_a_new_generated_file_removes_those_of_its_kind_no_launch_used_for_a_day(tmp_path):
    old, used, other_kind = tmp_path / "check-old", tmp_path / "check-used", tmp_path / "firejail-old.profile"
    for p in (old, used, other_kind):
        p.write_bytes(b"x")
        os.utime(p, (time.time() - 2 * fs.GENERATED_AGE,) * 2)
    fs.write_files({str(used): b"x"})  # reused by a launch: touched
    fs.write_files({str(tmp_path / "check-new"): b"new"})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["check-new", "check-used", "firejail-old.profile"]
