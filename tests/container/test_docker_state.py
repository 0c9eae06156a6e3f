"""The container backend and what a session (or anything else) left in ai-sandbox's cache directory: the
empty file and directory every mask is a bind of are recreated when something else stands at their path,
so a planted link can never show other content in place of a hidden path. Through podman, as root."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

pytestmark = pytest.mark.sandbox


@pytest.mark.parametrize("kind", ["symlink", "fifo"])
def test_a_planted_mask_source_is_replaced(ws_self, container, kind):
    """Old code: a link at mask-empty-dir was followed (the masks showed the link's target, here a
    directory of another project's secrets); a FIFO at mask-empty-file made the bind fail."""
    ws_self.write(".gitignore", ".env\nsecrets/\n")
    ws_self.git("add", ".gitignore")
    ws_self.git("commit", "-qm", "ignore")
    ws_self.write(".env", "SECRET-ENV\n")
    ws_self.write("secrets/key", "SECRET-DIR\n")
    files = json.loads(container("explain", "--json").out)["files"]
    cache = Path(next(iter(files))).parent
    elsewhere = ws_self.base / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "planted").write_text("PLANTED-CONTENT\n")
    cache.mkdir(parents=True, exist_ok=True)
    empty_dir, empty_file = cache / "mask-empty-dir", cache / "mask-empty-file"
    for p in (empty_dir, empty_file):
        if p.is_dir() and not p.is_symlink():
            p.rmdir()
        elif os.path.lexists(p):
            p.unlink()
    if kind == "symlink":
        empty_dir.symlink_to(elsewhere)
        empty_file.symlink_to(elsewhere / "planted")
    else:
        os.mkfifo(empty_file)
        empty_dir.mkdir()
    res = container("--", "sh", "-c", "cat .env secrets/key secrets/planted; ls -a secrets; true", timeout=60)
    assert res.rc == 0, res.err
    assert "SECRET" not in res.out and "PLANTED" not in res.out and "planted" not in res.out
    assert not empty_dir.is_symlink() and empty_dir.is_dir() and os.listdir(empty_dir) == []
    assert not empty_file.is_symlink() and empty_file.is_file() and empty_file.read_bytes() == b""


def test_an_ignored_fifo_is_hidden_in_the_container(ws_self, container):
    """git lists no FIFO: the walk finds it, the container backend masks it with the empty file, and a
    writer feeding the FIFO outside reaches no reader inside. A FIFO nothing hides stays readable (the
    control: the read works)."""
    from tests.security.test_git_listing import Feeder

    ws_self.write(".gitignore", "*.pipe\n")
    ws_self.git("add", ".gitignore")
    ws_self.git("commit", "-qm", "ignore")
    feeder = Feeder()
    try:
        feeder.fifo(ws_self.repo / "secret.pipe", "FIFO-SECRET")
        feeder.fifo(ws_self.repo / "visible-fifo", "FIFO-VISIBLE")
        res = container("--", "sh", "-c", "timeout 3 cat secret.pipe; timeout 3 cat visible-fifo; true", timeout=60)
    finally:
        feeder.close()
    assert res.rc == 0, res.err
    assert "FIFO-VISIBLE" in res.out and "FIFO-SECRET" not in res.out + res.err
