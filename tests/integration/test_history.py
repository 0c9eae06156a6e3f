"""Hidden content git still holds (history.py), with real git: each way it survives is reported by explain,
where and how to remove it, the launch says so in one line, and no output prints the secret itself."""

from __future__ import annotations

import json
import os
import time

import pytest

from tests.conftest import token

pytestmark = pytest.mark.sandbox


def _history_repo(ws) -> dict[str, str]:
    """One hidden path per way git keeps content; returns path -> the secret it held."""
    s = {name: token(name.replace(".", "").upper()) for name in (".env", "api.key", "tok.pem", "old.secret", "cur.env")}
    ws.write(".env", s[".env"] + "\n")  # committed, then untracked and ignored: a branch holds it
    ws.git("add", ".env")
    ws.git("commit", "-qm", "add env")
    ws.git("rm", "-q", "--cached", ".env")
    ws.git("commit", "-qm", "untrack env")
    ws.write("api.key", s["api.key"] + "\n")  # saved by `git stash -u`: refs/stash holds it
    ws.git("stash", "push", "-q", "-u", "-m", "wip")
    ws.write("tok.pem", s["tok.pem"] + "\n")  # stashed, then the stash dropped: a dangling commit
    ws.git("stash", "push", "-q", "-u", "-m", "drop me")
    ws.git("stash", "drop", "-q")
    ws.write("old.secret", s["old.secret"] + "\n")  # committed, then reset away: only the reflog
    ws.git("add", "old.secret")
    ws.git("commit", "-qm", "oops")
    ws.git("reset", "-q", "--hard", "HEAD~1")
    ws.write("cur.env", s["cur.env"] + "\n")  # added, then reset: stored, in no commit
    ws.git("add", "cur.env")
    ws.git("reset", "-q", "cur.env")
    ws.write(".gitignore", ".env\n*.key\n*.pem\nold.secret\ncur.env\n")
    ws.git("add", ".gitignore")
    ws.git("commit", "-qm", "ignore secrets")
    for name in (".env", "api.key", "tok.pem", "old.secret"):  # every one is hidden now (cur.env as added)
        ws.write(name, f"NOW-{name}\n")
    return s


def test_each_way_git_keeps_a_hidden_path_is_reported(ws):
    secrets = _history_repo(ws)
    r = ws.run("explain", "--json")
    assert r.rc == 0, r.err
    doc = json.loads(r.out)
    found = {f["path"].rsplit("/", 1)[1]: f for f in doc["history"]}
    assert found[".env"]["via"] == "ref" and "refs/heads/main" in found[".env"]["refs"]
    assert found["api.key"]["via"] == "ref" and found["api.key"]["refs"] == ["refs/stash"]
    assert found["tok.pem"]["via"] == "unreachable"
    assert found["old.secret"]["via"] == "reflog"
    assert found["cur.env"]["via"] == "store"
    assert set(found) == set(secrets)  # nothing else: README.md and .gitignore are not hidden
    assert "git filter-repo --invert-paths --path .env" in found[".env"]["remedy"]
    assert "git stash drop" in found["api.key"]["remedy"]
    assert "git gc --prune=now" in found["old.secret"]["remedy"]
    messages = {w["path"].rsplit("/", 1)[1]: w["message"] for w in doc["warnings"] if w["kind"] == "history"}
    assert set(messages) == set(secrets)
    text = ws.run("explain", "--history")
    dry = ws.run("--dry-run", "--", "true")
    for out in (r.out, text.out, dry.out, text.err):
        for secret in secrets.values():
            assert secret not in out  # where it is, never what it is
    assert "refs/stash" in text.out and "git filter-repo --invert-paths --path .env" in text.out
    assert "git filter-repo" in dry.out and "dangling commit" in dry.out


def test_the_launch_says_so_from_the_cached_answer_and_refreshes_it_in_the_background(ws):
    _history_repo(ws)
    first = ws.run("--", "true")
    assert first.rc == 0, first.err
    assert "git history" not in first.err  # nothing known yet, and the launch never walks
    cache = ws.home / ".cache" / "ai-sandbox" / "history"
    deadline = time.monotonic() + 60
    while not (cache.is_dir() and any(cache.iterdir())) and time.monotonic() < deadline:
        time.sleep(0.2)  # the watcher's background walk writes it
    second = ws.run("--", "true")
    assert "ai-sandbox: warning: 5 hidden path(s) readable through git history" in second.err
    assert "ai-sandbox explain --history" in second.err
    assert second.err.count("git history") == 1
    (cached,) = cache.iterdir()
    before = cached.stat().st_mtime_ns
    assert len(json.loads(ws.run("explain", "--json").out)["history"]) == 5
    assert cached.stat().st_mtime_ns == before  # the answer was still current: no walk, no rewrite
    ws.git("commit", "-q", "--allow-empty", "-m", "a new commit moves the refs")
    ws.run("explain", "--json")
    assert cached.stat().st_mtime_ns != before  # walked again and remembered


def test_a_history_rewritten_clean_is_no_longer_reported(ws_self):
    ws_self.write(".env", "SECRET\n")
    ws_self.git("add", ".env")
    ws_self.git("commit", "-qm", "env")
    ws_self.write(".gitignore", ".env\n")
    ws_self.git("rm", "-q", "--cached", ".env")
    ws_self.git("add", ".gitignore")
    ws_self.git("commit", "-qm", "ignore")
    assert len(json.loads(ws_self.run("explain", "--json").out)["history"]) == 1
    # the remedy explain gives, done by hand: the history without the file, the old objects gone
    ws_self.git("filter-branch", "-f", "--index-filter", "git rm -q --cached --ignore-unmatch .env", "HEAD")
    ws_self.git("update-ref", "-d", "refs/original/refs/heads/main")
    ws_self.git("reflog", "expire", "--expire=now", "--all")
    ws_self.git("gc", "-q", "--prune=now")
    assert json.loads(ws_self.run("explain", "--json").out)["history"] == []
    assert "git history" not in ws_self.run("--", "true").err


def test_odd_names_are_parsed_whole(ws_self):
    """git's -z output is read by position: a name that looks like a record header (`C`, `:x`), holds a
    newline, a tab or bytes that are not UTF-8 is still one path."""
    names = ["C", ":100644 x", "new\nline.env", "tab\there.env", b"caf\xe9.env"]
    secrets = {}
    for n in names:
        rel = n if isinstance(n, str) else n.decode("latin-1")
        path = os.path.join(os.fsencode(str(ws_self.repo / "odd")), n if isinstance(n, bytes) else n.encode())
        os.makedirs(os.path.dirname(path), exist_ok=True)
        secrets[rel] = token("ODD")
        with open(path, "wb") as f:
            f.write(secrets[rel].encode() + b"\n")
    ws_self.git("add", "-A")
    ws_self.git("commit", "-qm", "odd")
    ws_self.git("rm", "-q", "-r", "--cached", "odd")
    ws_self.write(".gitignore", "odd/\n")
    ws_self.git("add", ".gitignore")
    ws_self.git("commit", "-qm", "ignore odd/")
    doc = json.loads(ws_self.run("explain", "--json").out)
    assert [f["path"] for f in doc["history"]] == [str(ws_self.repo / "odd")]
    found = sorted(os.fsencode(p) for p in doc["history"][0]["history_paths"])
    expected = sorted(b"odd/" + (n if isinstance(n, bytes) else n.encode()) for n in names)
    assert found == expected
    out = ws_self.run("explain", "--history").out
    for secret in secrets.values():
        assert secret not in out
