"""The replace refs a session adds (replacerefs.py): which are the session's, and the launch's quick look that runs
no git where a repository can hold none, measured against git's own listing."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from ai_sandbox.replacerefs import _may_hold, added, listed

A, B, C = "a" * 40, "b" * 40, "c" * 40


def test_a_ref_new_or_naming_another_object_is_the_sessions_and_one_removed_is_nothing():
    before = {"refs/replace/" + A: B, "refs/replace/" + B: C}
    now = {"refs/replace/" + A: B, "refs/replace/" + B: A, "refs/replace/" + C: A}
    assert added(before, now) == {"refs/replace/" + B: A, "refs/replace/" + C: A}
    assert added(before, {}) == {}
    assert added({}, {}) == {}


def _git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(repo)}
    cmd = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@e", *args]
    return subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    _git(tmp_path, "init", "-q")
    (tmp_path / "a").write_text("a\n")
    _git(tmp_path, "add", "a")
    _git(tmp_path, "commit", "-qm", "a")
    _git(tmp_path, "tag", "v1")
    return tmp_path


def test_a_repository_with_no_replace_ref_needs_no_git_even_with_packed_refs(repo):
    assert not _may_hold(str(repo / ".git"))
    _git(repo, "pack-refs", "--all")
    assert (repo / ".git" / "packed-refs").is_file() and not _may_hold(str(repo / ".git"))
    assert listed(str(repo)) == {}


@pytest.mark.parametrize("pack", [False, True])
def test_a_replace_ref_loose_or_packed_is_found_and_listed_as_git_reads_it(repo, pack):
    head, blob = _git(repo, "rev-parse", "HEAD"), _git(repo, "rev-parse", "HEAD:a")
    other = _git(repo, "commit-tree", _git(repo, "write-tree"), "-m", "copy")
    _git(repo, "replace", head, other)
    if pack:
        _git(repo, "pack-refs", "--all")
        assert not (repo / ".git" / "refs" / "replace" / head).exists()
    assert _may_hold(str(repo / ".git"))
    assert listed(str(repo)) == {f"refs/replace/{head}": other}
    _git(repo, "replace", "-d", head)
    assert blob and listed(str(repo)) == {}


def test_a_packed_refs_that_is_no_regular_file_is_never_given_to_git(repo):
    """A FIFO a session left as packed-refs held git for its whole time limit (20 s) at the launch: listed says it
    cannot tell (the end then names what is there), at once. A link is read as git reads it."""
    packed = repo / ".git" / "packed-refs"
    os.mkfifo(packed)
    assert _may_hold(str(repo / ".git")) is None
    assert listed(str(repo)) is None
    packed.unlink()
    head = _git(repo, "rev-parse", "HEAD")
    (repo / "elsewhere").write_text(f"{head} refs/replace/{head}\n")
    packed.symlink_to(repo / "elsewhere")
    assert _may_hold(str(repo / ".git")) is True
    packed.unlink()
    (repo / ".git" / "reftable").mkdir()
    assert _may_hold(str(repo / ".git")) is True


def test_removing_a_symbolic_replace_ref_leaves_the_branch_it_names(repo, capsys):
    """A session's replace ref may be symbolic (`git symbolic-ref refs/replace/<HEAD> refs/heads/victim`): a plain
    `update-ref -d` deletes the branch it names (measured), the user's work. Only the ref itself goes."""
    from ai_sandbox.replacerefs import remove

    _git(repo, "commit", "-qm", "two", "--allow-empty")
    _git(repo, "branch", "victim", "HEAD~1")
    head, victim = _git(repo, "rev-parse", "HEAD"), _git(repo, "rev-parse", "victim")
    _git(repo, "symbolic-ref", f"refs/replace/{head}", "refs/heads/victim")
    refs = listed(str(repo))
    assert refs == {f"refs/replace/{head}": victim}
    remove(str(repo), added({}, refs or {}), {})
    assert _git(repo, "rev-parse", "victim") == victim
    assert listed(str(repo)) == {}
    line = capsys.readouterr().err
    assert line.startswith("ai-sandbox: removed the git replace refs") and f"refs/replace/{head}" in line, line


def test_only_a_lock_file_made_since_the_launch_is_taken_for_the_sessions(repo, capsys):
    """A lock left before the launch (yours, or a crashed git's) stays, and so the delete fails and says so; one made
    since is removed and the delete done (forty-ninth red team, F4)."""
    import time

    from ai_sandbox.replacerefs import remove

    head = _git(repo, "rev-parse", "HEAD")
    other = _git(repo, "commit-tree", _git(repo, "write-tree"), "-m", "copy")
    _git(repo, "replace", head, other)
    lock = repo / ".git" / "packed-refs.lock"
    lock.write_text("")
    since = time.time_ns() + 10_000_000_000  # the launch came after the lock
    remove(str(repo), {f"refs/replace/{head}": other}, {}, since)
    assert "could not remove" in capsys.readouterr().err and lock.exists()
    remove(str(repo), {f"refs/replace/{head}": other}, {}, since - 20_000_000_000)
    said = capsys.readouterr().err
    assert "removed the git replace refs" in said and "packed-refs.lock" in said, said
    assert not lock.exists() and listed(str(repo)) == {}
