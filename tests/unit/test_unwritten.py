"""unwritten.py's reading of the stash list, without a sandbox: git's own list, asked of plumbing, object ids only
(the session can write the reflog: eighteenth to twenty-second red teams)."""

from __future__ import annotations

import os
import subprocess

from ai_sandbox import git, unwritten

ENV = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e", "GIT_COMMITTER_NAME": "t"}
ENV["GIT_COMMITTER_EMAIL"] = "t@e"


def _git(root: str, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, env=ENV, check=True, capture_output=True, text=True).stdout


def test_the_stash_list_is_what_git_lists_whatever_the_file_says(tmp_path):
    root = str(tmp_path)
    _git(root, "init", "-q")
    _git(root, "commit", "-q", "--allow-empty", "-m", "i")
    (tmp_path / "f").write_text("x")
    _git(root, "add", "f")
    _git(root, "stash", "push", "-q")
    real = _git(root, "rev-parse", "stash@{0}").strip()
    log = str(tmp_path / ".git" / "logs" / "refs" / "stash")
    with open(log, "ab") as f:  # lines git skips: forged, a ref name that runs code when pasted, escapes
        f.write(b"junk %s junk\n" % (b"a" * 40))
        f.write(b"%s refs/s/$(touch${IFS}/tmp/PWNED) t <t@e> 1 +0000\tx\n" % (b"0" * 40))
        f.write(b"%s %s t <t@e> 0 +0000\tzero time\n" % (b"0" * 40, b"b" * 40))
    assert unwritten.stashes(log, root) == [real] == git.stash_ids(root)
    _git(root, "stash", "drop", "-q")
    assert unwritten.stashes(log, root) == []  # no stash: none, whatever is left of the file


def _key(root: str) -> tuple[int, ...] | None:
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        return unwritten.index_key(fd)
    finally:
        os.close(fd)


def test_the_index_key_changes_whenever_git_writes_the_index(tmp_path):
    """The session's end skips git's listing of a tree whose index key is the launch's: so every write of the
    index changes the key (a rename in place by git, or a write in place by anyone), and a read leaves it."""
    root = str(tmp_path)
    _git(root, "init", "-q")
    (tmp_path / "a").write_text("a")
    _git(root, "add", "a")
    _git(root, "commit", "-qm", "i")
    _git(root, "update-index", "--refresh")
    key = _key(root)
    assert key is not None
    _git(root, "ls-files", "--stage")
    assert _key(root) == key  # a read
    for step in (
        ["update-index", "--skip-worktree", "a"],
        ["update-index", "--no-skip-worktree", "a"],
        ["rm", "-q", "--cached", "a"],
        ["add", "a"],
    ):
        _git(root, *step)
        assert _key(root) != key, step
        key = _key(root)
    index = tmp_path / ".git" / "index"
    data = index.read_bytes()
    st = index.stat()
    with open(index, "r+b") as f:  # the same bytes, written in place, its mtime put back: the ctime tells
        f.write(data)
    os.utime(index, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert _key(root) != key


def test_no_index_key_where_git_may_read_another_index(tmp_path):
    """A `.git` file names its git directory, which a session can point elsewhere: no key, the end looks."""
    root = str(tmp_path)
    _git(root, "init", "-q")
    assert _key(root) is None  # no index yet
    (tmp_path / "a").write_text("a")
    _git(root, "add", "a")
    assert _key(root) is not None
    os.rename(tmp_path / ".git", tmp_path / "gitdir")
    (tmp_path / ".git").write_text(f"gitdir: {tmp_path}/gitdir\n")
    assert _key(root) is None
