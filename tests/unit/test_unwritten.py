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
