"""What a red team did to the findings of history.py and secretscan.py, kept as tests: a session prepares
the repository, and the user's next explain, launch or the background refresh (outside the sandbox) runs."""

from __future__ import annotations

import json
import os
import random
import string
import time

import pytest

from tests.conftest import token

pytestmark = pytest.mark.sandbox


def _aws_key() -> str:
    return "AKIA" + "".join(random.choices(string.ascii_uppercase + "234567", k=16))


def test_a_partial_clone_cannot_make_the_history_walk_run_a_command(ws):
    """A missing object in a promisor repository makes git fetch it through remote.*.uploadpack, a shell
    command the repository names; ai-sandbox's git calls allow no transport."""
    marker = ws.base / "ran"
    ws.write(".gitignore", ".env\n")
    ws.git("add", ".gitignore")
    ws.git("commit", "-qm", "ignore")
    ws.write(".env", token("SECRET") + "\n")  # its blob is in no object store: cat-file asks the promisor
    for key, value in (
        ("core.repositoryformatversion", "1"),
        ("extensions.partialClone", "origin"),
        ("remote.origin.url", str(ws.base)),
        ("remote.origin.promisor", "true"),
        ("remote.origin.uploadpack", f"touch {marker}; false"),
    ):
        ws.git("config", key, value)
    r = ws.run("explain", "--json")
    assert r.rc == 0, r.err
    ws.run("--", "true")
    time.sleep(2)  # the background refresh
    assert not marker.exists()


def test_git_errors_from_the_history_walk_never_quote_the_repository(ws):
    secret = token("SECRET")
    ws.write(".gitignore", ".env\n")
    ws.git("add", ".gitignore")
    ws.git("commit", "-qm", "ignore")
    ws.write(".env", f"API_KEY={secret}\n")
    os.symlink("../.env", ws.repo / ".git" / "packed-refs")  # what a session can do from inside
    for args in (("explain", "--json"), ("explain",), ("--dry-run", "--", "true"), ("explain", "--history")):
        r = ws.run(*args)
        assert r.rc == 0, r.err  # history that cannot be read is a notice, not a refusal
        assert secret not in r.out + r.err
    doc = json.loads(ws.run("explain", "--json").out)
    assert any("git history could not be read" in w["message"] for w in doc["warnings"])


def test_damaged_caches_never_block_or_break_a_launch(ws_self):
    ws_self.write(".gitignore", ".env\n")
    ws_self.git("add", ".gitignore")
    ws_self.git("commit", "-qm", "ignore")
    ws_self.write(".env", "x\n")
    ws_self.run("explain", "--secrets")
    cache = ws_self.home / ".cache" / "ai-sandbox"
    (history,) = (cache / "history").iterdir()
    (found,) = (cache / "secrets").glob("*.found")
    for damage in ("fifo", "types", "garbage"):
        for f in (history, found):
            f.unlink()
            if damage == "fifo":
                os.mkfifo(f)
            else:
                f.write_text('{"version": 1, "key": 5, "findings": [{"mask": 5}], "found": [[1, "x", 3, 4]]}'
                             if damage == "types" else "\0{[")  # fmt: skip
        r = ws_self.run("--", "echo", "ran", timeout=30)
        assert r.rc == 0 and "ran" in r.out, (damage, r.err)


def test_names_cannot_steer_the_terminal_and_links_are_not_followed(ws_self, tmp_world):
    outside = tmp_world / "outside.py"
    outside.write_text(f'KEY = "{_aws_key()}"\n')
    os.symlink(outside, ws_self.repo / "link.py")
    ws_self.write("evil\x1b[2K\rname.py", f'AWS_ACCESS_KEY_ID = "{_aws_key()}"\n')
    ws_self.git("add", "-A")
    ws_self.git("commit", "-qm", "files")
    found = json.loads(ws_self.run("explain", "--json", "--secrets").out)["secrets"]["findings"]
    assert [os.path.basename(f["path"]) for f in found] == ["evil\x1b[2K\rname.py"]  # not link.py's target
    launch = ws_self.run("--", "true")
    assert "secret scan found 1 secret(s)" in launch.err
    assert "\x1b" not in launch.err and "\r" not in launch.err
    assert "\x1b" not in ws_self.run("doctor").out
