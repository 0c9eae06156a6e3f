"""The record of what was hidden (state.py) is the same for the container backend: a directory renamed from
inside a container session cannot make the next launch reveal what it held."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.sandbox


def test_a_directory_renamed_inside_the_container_is_refused_next_time(ws_self, container):
    ws_self.write(".gitignore", "/config/master.key\n")
    ws_self.write("config/app.yml", "visible\n")
    ws_self.git("add", ".")
    ws_self.git("commit", "-qm", "config")
    ws_self.write("config/master.key", "SECRET-KEY-MOVED\n")
    # warn: the watcher would end the session for the hidden file its `mv` replaces, racing the shell (stock Debian
    # 13, as a user: rc -15); what this test is about is the next launch's refusal
    cfg = ws_self.config_file
    cfg.parent.mkdir(parents=True, exist_ok=True)
    cfg.write_text((cfg.read_text() if cfg.exists() else "") + 'on_hidden_change = "warn"\n')
    first = container("--", "sh", "-c", "mv config config.bak && mkdir config && touch config/master.key; true")
    assert first.rc == 0, first.err
    assert (ws_self.repo / "config.bak" / "master.key").exists()  # the rename reached the host
    res = container("--", "sh", "-c", "echo @@read; cat config.bak/master.key; true")
    assert "SECRET-KEY-MOVED" not in res.out + res.err and "@@read" not in res.out
    assert res.rc == 65 and len(res.err.strip().splitlines()) == 1 and "config.bak/master.key" in res.err
    assert ws_self.run("accept").rc == 0
    res = container("--", "sh", "-c", "cat config.bak/master.key")
    assert res.rc == 0 and "SECRET-KEY-MOVED" in res.out  # accepted: readable, as the rules now say
