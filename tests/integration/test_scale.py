"""A repository past the kernel's mount limit still launches, with every secret hidden.

fs.mount-max is 100,000 (firejail fails with ENOSPC past it, measured); this repo has 101,000 separately
ignored files, so without the mask limit firejail would refuse to start (bwrap's limit is 10,000: the
launch check's mounts grow faster than linearly past it). One test per backend, ~10 s each.
"""

from __future__ import annotations

import json
import os

import pytest

pytestmark = pytest.mark.sandbox

DIRS, PER_DIR = 101, 1000


@pytest.mark.backends("firejail", "bwrap")
def test_more_ignored_files_than_the_kernel_can_mount_still_launch_and_stay_hidden(ws_self, firejail):
    ws = ws_self
    ws.write(".gitignore", "*.secret\n")
    for d in range(DIRS):
        ws.write(f"d{d:03}/README.md", f"README-{d}\n")  # tracked: git cannot fold the directory
    ws.git("add", ".")
    ws.git("commit", "-qm", "dirs")
    token = f"SCALE-{os.getpid()}"
    for d in range(DIRS):
        base = ws.repo / f"d{d:03}"
        for i in range(PER_DIR):
            (base / f"f{i}.secret").write_text(f"{token}-{d}-{i}\n")
    script = "cat d000/f0.secret d100/f999.secret d050/f500.secret; cat d100/README.md; true"
    res = ws.run("--", "sh", "-c", script, timeout=300)
    assert res.rc == 0, res.err
    assert token not in res.out + res.err
    limit = 10_000 if ws.backend == "bwrap" else 30_000
    assert f"more than the backend can mount ({limit})" in res.err
    plan = ws.run("explain", "--json", timeout=300)
    assert plan.rc == 0, plan.err
    doc = json.loads(plan.out)
    assert 1000 < len(doc["hidden"]) <= limit
