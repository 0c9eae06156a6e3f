"""The secret scan of readable files (secretscan.py, detect-secrets): a planted AWS key and private key are
found in tracked and untracked files, named by file and line, never printed; a repeat scan reads nothing
unchanged; hidden files are not the scan's business; init suggests blocking what it found."""

from __future__ import annotations

import json
import random
import string

import pytest

pytestmark = pytest.mark.sandbox


def _aws_key() -> str:
    return "AKIA" + "".join(random.choices(string.ascii_uppercase + "234567", k=16))


def _private_key() -> str:
    body = "".join(random.choices(string.ascii_letters + string.digits, k=64))
    return f"-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA{body}\n-----END RSA PRIVATE KEY-----\n"


def _plant(ws) -> dict[str, str]:
    aws, pem, hidden = _aws_key(), _private_key(), _aws_key()
    ws.write("config/settings.py", f'import os\n\nAWS_ACCESS_KEY_ID = "{aws}"\n')
    ws.git("add", "config/settings.py")
    ws.git("commit", "-qm", "settings")
    ws.write("notes/deploy.txt", "how to deploy\n" + pem)  # untracked, not ignored
    ws.write(".gitignore", ".env\n")
    ws.write(".env", f"AWS_ACCESS_KEY_ID={hidden}\n")  # hidden: the agent cannot read it
    return {"aws": aws, "pem": pem.splitlines()[1], "hidden": hidden}


def test_finds_keys_in_tracked_and_untracked_files_without_printing_them(ws):
    planted = _plant(ws)
    r = ws.run("explain", "--json", "--secrets")
    assert r.rc == 0, r.err
    scan = json.loads(r.out)["secrets"]
    found = {(f["path"].split("/repo/", 1)[1], f["line"]): f["kinds"] for f in scan["findings"]}
    assert "AWS Access Key" in found[("config/settings.py", 3)]
    assert "Private Key" in found[("notes/deploy.txt", 2)]
    assert not any(p == ".env" for p, _ in found)  # hidden already
    text = ws.run("explain", "--secrets")
    assert "config/settings.py:3  AWS Access Key" in text.out and "notes/deploy.txt:2" in text.out
    for out in (r.out, r.err, text.out, text.err):
        for secret in planted.values():
            assert secret not in out
    assert scan["reused"] == 0 and scan["scanned"] >= 3
    again = json.loads(ws.run("explain", "--json", "--secrets").out)["secrets"]
    assert again["reused"] == again["scanned"] == scan["scanned"]  # the cache answered every file
    assert again["findings"] == scan["findings"]
    ws.write("notes/deploy.txt", "rotated, gone\n")
    third = json.loads(ws.run("explain", "--json", "--secrets").out)["secrets"]
    assert third["reused"] == scan["scanned"] - 1  # only the changed file was read again
    assert [f["path"].rsplit("/", 1)[1] for f in third["findings"]] == ["settings.py"]


def test_the_launch_reports_the_last_scan_and_init_suggests_blocking(ws):
    planted = _plant(ws)
    assert "secret scan" not in ws.run("--", "true").err  # never scanned: the launch does not scan
    ws.run("explain", "--secrets")
    launch = ws.run("--", "true")
    assert launch.rc == 0, launch.err
    assert "the last secret scan found 2 secret(s) in 2 file(s) the agent can read" in launch.err
    assert "config/settings.py" in launch.err and planted["aws"] not in launch.err
    ws.run("init")
    text = (ws.repo / ".ai-sandbox.toml").read_text()
    assert '# "/config/settings.py",  # secret scan: line 3: AWS Access Key' in text
    assert '# "/notes/deploy.txt",  # secret scan: line 2: Private Key' in text
    assert planted["aws"] not in text
    doctor = ws.run("doctor")
    assert "! secret scan: 2 secret(s) in 2 readable file(s)" in doctor.out


def test_the_agents_home_state_is_scanned_with_its_profile(ws_self):
    key = _aws_key()
    (ws_self.home / ".claude").mkdir()
    (ws_self.home / ".claude" / "settings.json").write_text(json.dumps({"env": {"AWS_ACCESS_KEY_ID": key}}) + "\n")
    plain = json.loads(ws_self.run("explain", "--json", "--secrets").out)["secrets"]["findings"]
    assert plain == []  # no agent named: its state is not the project's
    doc = json.loads(ws_self.run("explain", "--json", "--secrets", "--agent", "claude").out)
    found = doc["secrets"]["findings"]
    assert [(f["path"], f["scope"]) for f in found] == [(str(ws_self.home / ".claude" / "settings.json"), "agent home")]
    assert key not in json.dumps(doc)
