"""The record of what was hidden (state.py), the origin of allow patterns, and the parsed-config cache,
without a sandbox: policies are built directly over throwaway trees."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess

import pytest

from ai_sandbox import config, launch, paths, profiles, state
from ai_sandbox.errors import ConfigError, PolicyError
from ai_sandbox.patterns import BUILT_IN, DEPENDENCY, OUTPUT, PROFILE, PROJECT, USER, Pattern, PatternSet, Source
from ai_sandbox.policy import IGNORED, Entry, build


def _policy(root, hidden=(), allow=()):
    entries = [Entry(os.path.join(root, rel.rstrip("/")), rel.endswith("/"), IGNORED, "git-ignored") for rel in hidden]
    return build(str(root), entries, PatternSet(list(allow)))


@pytest.fixture
def env(tmp_path):
    return {"XDG_STATE_HOME": str(tmp_path / "state"), "HOME": str(tmp_path)}


def _tree(base, *files):
    for rel in files:
        p = base / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(rel)
    return str(base)


# --- provenance: decided by origin, never by the rule's text -------------------------------------------------


def test_a_project_rule_whose_text_imitates_a_profile_is_not_exempt(tmp_path):
    root = _tree(tmp_path / "p", ".env")
    forged = Pattern("[.(profile ]env", Source(PROJECT, ".ai-sandbox.toml", 1))
    pol = _policy(root, [".env"], [forged])
    (kept,) = pol.kept
    assert "(profile " in str(kept.rule) and kept.origin == PROJECT
    assert state.unhidden(pol, [f"{root}/.env"]) == [f"{root}/.env"]  # un-hidden: the launch refuses
    real = _policy(root, [".env"], [Pattern(".env", Source(PROFILE, name="profile claude"))])
    assert state.unhidden(real, [f"{root}/.env"]) == []  # the agent's own profile keeps it: no refusal


def test_every_pattern_is_made_with_its_origin(tmp_path, monkeypatch):
    home = tmp_path / "cfg"
    (home / "ai-sandbox").mkdir(parents=True)
    (home / "ai-sandbox" / "config.toml").write_text('block = ["*.pem"]\nallow = [".x/"]\n')
    user = config.load_user({"XDG_CONFIG_HOME": str(home)})
    assert [p.origin for p in user.block_patterns + user.allow] == [USER, USER]
    root = tmp_path / "p"
    root.mkdir()
    (root / ".ai-sandbox.toml").write_text('block = ["a"]\nallow = ["b"]\n')
    (root / ".ai-sandbox").write_text("AI_SANDBOX_BLOCK_PATHS=(c)\nAI_SANDBOX_ALLOW_PATHS=(d)\n")
    proj = config.load_project(str(root))
    assert {p.origin for p in proj.block + proj.allow} == {PROJECT}
    prof = profiles.load(os.path.join(paths.shipped_dir(), "claude.toml"))
    assert prof.allow and {p.origin for p in prof.allow} == {PROFILE}
    allow = launch.allowlist(user, prof, proj).patterns
    assert {p.origin for p in allow} == {DEPENDENCY, OUTPUT, BUILT_IN, PROFILE, USER, PROJECT}
    assert Pattern("x").origin == PROJECT  # unsaid: the least trusted


# --- a directory above a hidden path moved --------------------------------------------------------------------


def test_a_moved_directory_is_found_by_inode(tmp_path, env, monkeypatch):
    root = _tree(tmp_path / "p", "config/master.key", "config/app.yml", "deep/a/b/token")
    monkeypatch.chdir(root)
    state.record(state.check(_policy(root, ["config/master.key", "deep/a/b/token"]), env))
    os.rename(f"{root}/config", f"{root}/config.bak")
    os.mkdir(f"{root}/config")
    open(f"{root}/config/master.key", "w").close()  # the same masks as last time: only the inode says
    os.makedirs(f"{root}/node_modules/.c")
    os.rename(f"{root}/deep", f"{root}/node_modules/.c/deep")
    with pytest.raises(PolicyError) as e:
        state.check(_policy(root, ["config/master.key"]), env)
    assert f"{root}/config.bak/master.key" in str(e.value) and "node_modules/.c/deep/a/b/token" in str(e.value)
    # where it went is hidden (an unanchored rule): nothing is readable, the launch goes on
    hidden = _policy(root, ["config/master.key", "config.bak/", "node_modules/"])
    rec = state.check(hidden, env)
    state.record(rec)

    def no_walk(path):
        raise AssertionError("the usual launch walked the project")

    monkeypatch.setattr(os, "scandir", no_walk)
    assert state.check(hidden, env).unchanged  # the same masks, nothing moved: no walk, nothing to write
    monkeypatch.undo()
    root = _tree(tmp_path / "q", "build/secret.txt", ".env")
    monkeypatch.chdir(root)
    state.record(state.check(_policy(root, ["build/secret.txt"]), env))
    os.rename(f"{root}/build", f"{root}/gone")
    os.remove(f"{root}/gone/secret.txt")
    # moved, and what it held no longer in it: deleted, or renamed where no search follows (a nested clone's session:
    # `mv ../a ../z && mv ../z/.env ../z/readme.txt`, nineteenth red team): refused until accepted
    with pytest.raises(PolicyError, match="no longer in it under its name"):
        state.check(_policy(root), env)
    state.forget(env, root, root)
    state.record(state.check(_policy(root), env))
    path = state.record_path(env, root)
    with open(path, "wb") as f:  # the first format: paths only
        f.write(os.fsencode(f"{root}/.env") + b"\0")
    assert state.load(path) == [f"{root}/.env"]
    with pytest.raises(PolicyError, match="a rule changed"):
        state.check(_policy(root), env)


# --- records of other roots -----------------------------------------------------------------------------------


def test_a_new_root_inside_a_recorded_one_is_held_to_its_record(tmp_path, env, monkeypatch):
    outer = _tree(tmp_path / "p", ".env", "sub/.env", "sub/keep.txt")
    sub = f"{outer}/sub"
    monkeypatch.chdir(outer)
    state.record(state.check(_policy(outer, [".env", "sub/.env"]), env))
    monkeypatch.chdir(sub)  # `git init sub`, then a launch from sub/: a root never launched before
    with pytest.raises(PolicyError, match="project root changed"):
        state.check(_policy(sub, [".env"]), env)  # ../.env would be readable
    with pytest.raises(PolicyError, match="project root changed"):
        state.check(_policy(outer[: outer.rindex("/")], []), env, outer)  # a root above (core.worktree)
    # accepted: sub is a project of its own; what the outer launch hid in it is readable from there
    assert state.forget(env, sub, sub, state.from_other_roots(_policy(sub), env, sub)) == 1
    state.record(state.check(_policy(sub), env))
    state.record(state.check(_policy(outer, [".env", "sub/.env"]), env, outer))  # the outer one is unchanged


def test_the_root_the_last_launch_from_here_used_still_applies(tmp_path, env, monkeypatch):
    outer = _tree(tmp_path / "p", "README", "lib/master.key")
    lib = f"{outer}/lib"
    state.record(state.check(_policy(outer), env, outer))  # both roots are known
    state.record(state.check(_policy(lib, ["master.key"]), env, lib))
    # a session deletes lib/.git: from lib/, the next launch is the outer project's, which never hid it
    with pytest.raises(PolicyError, match=f"it was {lib}"):
        state.check(_policy(outer), env, lib)
    # from the outer project too: lib's launches hid it, and a launch of the project holding lib would show it
    with pytest.raises(PolicyError, match=f"it was {lib}"):
        state.check(_policy(outer), env, outer)
    state.forget(env, outer, lib, state.from_other_roots(_policy(outer), env, lib))
    state.check(_policy(outer), env, lib)
    state.check(_policy(outer), env, outer)  # what lib's record held is accepted readable in the outer project


# --- the parsed-config cache and how config files are opened ----------------------------------------------


def test_the_parse_cache_holds_no_bytes_of_the_file(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    (tmp_path / "ai-sandbox").mkdir()
    text = '# the staging password is COMMENT-SECRET-91\nblock = ["*.pem"]\n'
    (tmp_path / "ai-sandbox" / "config.toml").write_text(text)
    config.load_user({"XDG_CONFIG_HOME": str(tmp_path)})
    (entry,) = (tmp_path / "state" / "ai-sandbox" / "parsed").iterdir()
    assert entry.name == hashlib.sha256(text.encode()).hexdigest()
    assert b"COMMENT-SECRET-91" not in entry.read_bytes()
    assert config.load_user({"XDG_CONFIG_HOME": str(tmp_path)}).block_patterns[0].text == "*.pem"  # served


def _git(root, *args):
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=root, check=True, capture_output=True
    )


def test_a_project_config_is_remembered_only_when_git_holds_its_bytes(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    parsed = tmp_path / "state" / "ai-sandbox" / "parsed"
    root = tmp_path / "p"
    root.mkdir()
    _git(root, "init", "-q")
    (root / ".ai-sandbox.toml").write_text('block = ["UNTRACKED-VALUE-7"]\n')
    assert config.load_project(str(root)).block[0].text == "UNTRACKED-VALUE-7"
    assert not parsed.exists() or not list(parsed.iterdir())  # untracked (maybe ignored): never cached
    _git(root, "add", ".ai-sandbox.toml")
    _git(root, "commit", "-qm", "c")
    config.load_project(str(root))
    assert len(list(parsed.iterdir())) == 1  # the same bytes are in .git: nothing new to hide
    (root / ".ai-sandbox.toml").write_text('block = ["EDITED-VALUE-8"]\n')
    config.load_project(str(root))
    assert not any(b"EDITED-VALUE-8" in p.read_bytes() for p in parsed.iterdir())


def test_a_fifo_config_is_refused_without_hanging(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    (tmp_path / "ai-sandbox").mkdir()
    os.mkfifo(tmp_path / "ai-sandbox" / "config.toml")

    def hung(*_):
        raise AssertionError("reading the config hung on a FIFO")

    old = signal.signal(signal.SIGALRM, hung)
    signal.alarm(5)
    try:
        with pytest.raises(ConfigError, match="not a regular file"):
            config.load_user({"XDG_CONFIG_HOME": str(tmp_path)})
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def test_a_linked_project_config_stays_in_the_project(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    root = tmp_path / "p"
    (root / "conf").mkdir(parents=True)
    _git(root, "init", "-q")
    (root / ".gitignore").write_text(".env\n")
    (root / ".env").write_text('TOKEN = "LINKED-SECRET-5"\n')
    (tmp_path / "out.toml").write_text("block = []\n")
    (root / "conf" / "sandbox.toml").write_text('block = ["x"]\n')
    link = root / ".ai-sandbox.toml"
    link.symlink_to("conf/sandbox.toml")
    assert config.load_project(str(root)).block[0].text == "x"  # a link to a plain project file is fine
    link.unlink()
    link.symlink_to(tmp_path / "out.toml")
    with pytest.raises(ConfigError, match="outside the project"):
        config.load_project(str(root))
    link.unlink()
    link.symlink_to(".env")
    with pytest.raises(ConfigError, match="git ignores") as e:
        config.load_project(str(root))
    assert "LINKED-SECRET-5" not in str(e.value)
