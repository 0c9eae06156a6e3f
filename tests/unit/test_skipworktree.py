"""Which hidden paths are tracked, read from git's raw index; the journal of marks across sessions."""

from __future__ import annotations

import os

from ai_sandbox import skipworktree
from ai_sandbox.git import Repo, Scan
from ai_sandbox.policy import CRYPT, EXPLICIT, IGNORED, Mask, Policy

ROOT = "/p"


def _scan(*entries: tuple[str, str]) -> Scan:
    raw = b"".join(f"{tag} 100644 {'0' * 40} 0\t{path}\0".encode() for tag, path in entries)
    return Scan(Repo(root=ROOT, common_dir=ROOT + "/.git"), index=raw)


class _Tree:
    def __init__(self, prefix: str, scan: Scan) -> None:
        self.prefix, self.scan = prefix, scan


def test_tracked_is_found_in_the_raw_index_not_inside_another_name():
    scan = _scan(("H", "a\tprod.tfvars"), ("S", "b.tfvars"))
    assert not scan.is_tracked("prod.tfvars")  # only the tail of `a<TAB>prod.tfvars`
    assert scan.is_tracked("a\tprod.tfvars") and scan.is_tracked("b.tfvars")
    assert scan.skip_worktree == {"b.tfvars"} and scan.tracked == ["a\tprod.tfvars", "b.tfvars"]


def test_only_masks_that_can_hide_tracked_files_are_looked_up():
    scan = _scan(("H", "prod.tfvars"), ("S", "vault/x"), ("H", "vault/y"), ("H", "src/app.py"), ("H", "dist/keep.js"))
    policy = Policy(root=ROOT, in_git=True)
    policy.masks = [
        Mask(f"{ROOT}/prod.tfvars", False, EXPLICIT, "block"),
        Mask(f"{ROOT}/vault", True, CRYPT, "crypt"),
        Mask(f"{ROOT}/dist", True, IGNORED, "ignored"),  # ignored: untracked by definition, not looked at
    ]
    marks = skipworktree.hidden_tracked(policy, [_Tree("", scan)])
    assert marks.needs == {ROOT: ["prod.tfvars", "vault/x", "vault/y"]} and marks.flagged == {ROOT: {"vault/x"}}
    assert marks.paths == [f"{ROOT}/prod.tfvars", f"{ROOT}/vault/x", f"{ROOT}/vault/y"] and marks.sparse == []
    policy.masks = [Mask(f"{ROOT}/dist", True, IGNORED, "ignored")]
    marks = skipworktree.hidden_tracked(policy, [_Tree("", scan)])
    assert marks.needs == {} and marks.flagged == {}


def test_a_session_that_is_gone_is_not_live(tmp_path):
    doc = {"sessions": {str(os.getpid()): {"start": skipworktree._start_time(os.getpid()), "needs": {}}}}
    doc["sessions"]["999999999"] = {"start": "1", "needs": {}}
    doc["sessions"][str(os.getppid())] = {"start": "0", "needs": {}}  # a reused pid: another start time
    assert list(skipworktree._live_sessions(doc)) == [str(os.getpid())]


def test_a_journal_of_the_wrong_shape_refuses_in_one_line(tmp_path):
    import pytest

    from ai_sandbox.errors import PolicyError

    path = tmp_path / "journal"
    for text in ('{"sessions":{"abc":{}}}', '{"owned":[]}', "[]", "not json", '{"owned":{"/p":[1]}}'):
        path.write_text(text)
        with pytest.raises(PolicyError, match="lists the git index marks"):
            skipworktree._load(str(path))
    path.write_text('{"owned":{"/p":["a"]},"sessions":{"12":{"start":"5","needs":{"/p":["a"]}}}}')
    assert skipworktree._load(str(path))["owned"] == {"/p": ["a"]}


def test_the_journal_names_the_marks_before_git_sets_them(tmp_path, monkeypatch):
    """A closed terminal's SIGHUP can end the launch the moment `update-index` has set the marks: the
    journal must already name them, or the watcher finds nothing to clear and they stay set (seen in CI)."""
    import subprocess

    import pytest

    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "prod.tfvars").write_text("x\n")
    subprocess.run(["git", "-C", str(repo), "add", "prod.tfvars"], check=True)
    env = {"XDG_STATE_HOME": str(tmp_path / "state"), "HOME": str(tmp_path)}
    real = skipworktree._update_index

    def killed_after(tree: str, flag: str, paths: list[str], wait: float) -> None:
        real(tree, flag, paths, wait)
        raise KeyboardInterrupt  # the signal, right after git wrote the index

    monkeypatch.setattr(skipworktree, "_update_index", killed_after)
    marks = skipworktree.Marks(needs={str(repo): ["prod.tfvars"]})
    with pytest.raises(KeyboardInterrupt):
        skipworktree.protect(env, str(repo), marks)
    monkeypatch.setattr(skipworktree, "_update_index", real)
    listing = subprocess.run(["git", "-C", str(repo), "ls-files", "-t"], capture_output=True, text=True).stdout
    assert listing == "S prod.tfvars\n"  # set, and the session is gone
    skipworktree.release(env, str(repo), os.getpid())
    listing = subprocess.run(["git", "-C", str(repo), "ls-files", "-t"], capture_output=True, text=True).stdout
    assert listing == "H prod.tfvars\n"
