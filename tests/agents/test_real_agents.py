"""The real agents, from the npm registry, start through `ai-sandbox` with real firejail, as an unprivileged user.

Without credentials or network they cannot do any work, but they get far enough to prove the launch: Claude Code
reaches its login check and writes its state in HOME, Codex and Gemini answer --version.
"""

from __future__ import annotations

import os
import uuid

import pytest

from tests.agents.conftest import require_node_for, versions
from tests.conftest import Workspace

pytestmark = [pytest.mark.agents, pytest.mark.sandbox]


def _with_secret(w: Workspace) -> str:
    """An ignored .env holding a unique secret, and an ignored .claude/ (the profile keeps it readable)."""
    secret = f"agent-secret-{uuid.uuid4().hex}"
    w.write(".gitignore", ".env\n.claude/\n")
    w.git("add", ".gitignore")
    w.git("commit", "-qm", "ignore")
    w.write(".env", f"API_TOKEN={secret}\n")
    w.write(".claude/settings.local.json", "{}\n")
    return secret


def test_claude_reaches_its_login_check_and_keeps_its_state(agent_ws, agent_env):
    w = agent_ws
    secret = _with_secret(w)

    res = w.run("claude", "-p", "hi", env=agent_env, raw_env=True, timeout=60)
    assert "Not logged in" in res.out + res.err, f"rc={res.rc}\nstdout: {res.out}\nstderr: {res.err}"
    assert res.rc == 1, res.err

    # its state landed in the real HOME, owned by whoever ran it
    uid = w.user.uid if w.user else os.geteuid()
    for path in (w.home / ".claude.json", w.home / ".claude"):
        assert path.exists(), f"claude wrote no {path}: {sorted(p.name for p in w.home.iterdir())}"
        assert path.stat().st_uid == uid, f"{path} is owned by uid {path.stat().st_uid}, not {uid}"
    assert (w.home / ".claude" / "projects").is_dir()

    # what that launch could not read: the same policy, applied to a command that tries
    res = w.run("--", "cat", ".env", env=agent_env, raw_env=True)
    assert res.rc != 0
    assert secret not in res.out + res.err


def test_claude_is_launched_with_its_profile(agent_ws, agent_env, agents_bin):
    w = agent_ws
    _with_secret(w)
    res = w.run("--dry-run", "claude", "-p", "hi", env=agent_env, raw_env=True)
    assert res.rc == 0, res.err
    assert "agent    claude: claude -p hi" in res.out
    assert "(profile claude)" in res.out  # the git-ignored .claude/ stays readable because of the profile
    assert f"{agents_bin / 'claude'} -p hi" in res.out
    assert ".env" in res.out.split("readable although")[0]


@pytest.mark.parametrize("agent", ["codex", "gemini"])
def test_agent_answers_its_version(agent_ws, agent_env, agents_bin, agent):
    require_node_for(agents_bin, agent)
    res = agent_ws.run(agent, "--version", env=agent_env, raw_env=True, timeout=60)
    assert res.rc == 0, f"stdout: {res.out}\nstderr: {res.err}"
    assert versions()[agent] in res.out


@pytest.mark.parametrize("backend", ["firejail", "bwrap"])
def test_claude_saves_its_config_with_writes_confined(agent_ws, agent_env, backend):
    """With write containment (the default) the home is read-only inside; Claude Code saves ~/.claude.json by rename there,
    which failed silently (its lock's mkdir: EROFS). Kept in ~/.claude/ with a link in its place, it is saved: a
    key Claude Code writes at each start, removed between two runs, is back after the second."""
    import json

    w = agent_ws
    _with_secret(w)
    assert not w.config_file.exists()  # the defaults
    args = [] if backend == "firejail" else ["--backend", "bwrap"]
    cfg = w.home / ".claude.json"
    for run in range(2):
        res = w.run(*args, "claude", "-p", "hi", env=agent_env, raw_env=True, timeout=60)
        assert "Not logged in" in res.out + res.err, f"rc={res.rc}\nstdout: {res.out}\nstderr: {res.err}"
        assert cfg.is_symlink(), sorted(p.name for p in w.home.iterdir())
        data = json.loads(cfg.read_text())
        assert "migrationVersion" in data, f"run {run}: Claude Code saved nothing: {data}"
        del data["migrationVersion"]
        (w.home / ".claude" / ".claude.json").write_text(json.dumps(data))
