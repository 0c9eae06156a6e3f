"""The commit-graph files that changed during a session (commitgraph.py): which object directories are looked at,
what counts as a change, and what the end removes — git's graph files only, never through a link — on real
repositories written by real git (the forgery itself, through the sandbox: tests/security/test_git_settings.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ai_sandbox import commitgraph
from tests.unit.test_replacerefs import _git  # git with a fixed identity, no system or user config


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    r = tmp_path / "r"
    r.mkdir()
    _git(r, "init", "-q")
    (r / "a").write_text("a\n")
    _git(r, "add", "a")
    _git(r, "commit", "-qm", "a")
    return r


def _look(repo: Path) -> commitgraph.Graphs | None:
    return commitgraph.look(str(repo / ".git"), str(repo))


def _end(
    repo: Path, before: commitgraph.Graphs | None, capsys: pytest.CaptureFixture[str], now: Path | None = None
) -> str:
    commitgraph.undo(before, str(repo), str(now or repo), set())
    return capsys.readouterr().err


def test_no_graph_and_none_written_is_nothing(repo, capsys):
    before = _look(repo)
    assert before == {os.path.realpath(repo / ".git" / "objects"): {}}
    assert _end(repo, before, capsys) == ""


def test_a_graph_of_yours_left_alone_stays(repo, capsys):
    _git(repo, "commit-graph", "write", "--reachable", "--split")
    before = _look(repo)
    assert _end(repo, before, capsys) == ""
    assert (repo / ".git/objects/info/commit-graphs/commit-graph-chain").is_file()


@pytest.mark.parametrize("split", [False, True])
def test_a_graph_written_or_rewritten_during_the_session_is_removed_and_said(repo, capsys, split):
    _git(repo, "commit-graph", "write", "--reachable")
    before = _look(repo)
    _git(repo, "commit", "-q", "--allow-empty", "-m", "b")
    _git(repo, "commit-graph", "write", "--reachable", *(["--split"] if split else []))
    said = _end(repo, before, capsys)
    assert "removed the commit-graph files that changed during the session" in said
    assert not list((repo / ".git/objects/info").glob("commit-graph*")) or (
        split and not list((repo / ".git/objects/info/commit-graphs").iterdir())
    )
    assert _git(repo, "commit-graph", "verify") == ""  # git works on without it


def test_a_graph_rewritten_in_place_with_its_old_times_is_still_a_change(repo, capsys):
    _git(repo, "commit-graph", "write", "--reachable")
    graph = repo / ".git/objects/info/commit-graph"
    before = _look(repo)
    st = graph.stat()
    os.chmod(graph, 0o644)
    with open(graph, "r+b") as f:  # same size, same inode
        f.seek(100)
        f.write(b"\0")
    os.utime(graph, ns=(st.st_atime_ns, st.st_mtime_ns))
    os.chmod(graph, st.st_mode)
    assert "removed the commit-graph files" in _end(repo, before, capsys)
    assert not graph.exists()


def test_only_gits_files_go_and_never_through_a_link(repo, capsys, tmp_path):
    """A commit-graphs/ that the session made a link to a directory of its choosing: the link goes, its target and
    what is in it stay (unlink never follows a link); a name git never reads as a graph stays."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "commit-graph-chain").write_text("x\n")
    (elsewhere / "keep.txt").write_text("x\n")
    before = _look(repo)
    os.symlink(elsewhere, repo / ".git/objects/info/commit-graphs")
    (repo / ".git/objects/info/notes.txt").write_text("mine\n")
    said = _end(repo, before, capsys)
    assert "(commit-graphs)" in said, said
    assert not os.path.lexists(repo / ".git/objects/info/commit-graphs")
    assert sorted(p.name for p in elsewhere.iterdir()) == ["commit-graph-chain", "keep.txt"]
    assert (repo / ".git/objects/info/notes.txt").exists()


def test_what_is_no_graph_of_gits_in_commit_graphs_stays(repo, capsys):
    before = _look(repo)
    graphs = repo / ".git/objects/info/commit-graphs"
    graphs.mkdir()
    (graphs / "commit-graph-chain").write_text("x\n")
    (graphs / "mine.txt").write_text("x\n")
    (graphs / ("graph-" + "a" * 40 + ".graph")).mkdir()  # a directory by a graph's name: git reads none there
    (repo / ".git/objects/info/commit-graph").mkdir()
    said = _end(repo, before, capsys)
    assert "(commit-graphs/commit-graph-chain)" in said, said
    assert sorted(p.name for p in graphs.iterdir()) == ["graph-" + "a" * 40 + ".graph", "mine.txt"]


def test_an_info_directory_swapped_for_a_link_is_named_and_nothing_removed(repo, capsys):
    before = _look(repo)
    objects = repo / ".git/objects"
    os.rename(objects / "info", objects / "i2")
    os.symlink("i2", objects / "info")
    _git(repo, "commit-graph", "write", "--reachable")
    said = _end(repo, before, capsys)
    assert "did not remove" in said and f"{os.path.realpath(objects)}/info is a link" in said, said
    assert (objects / "i2" / "commit-graph").is_file()


def test_an_alternate_in_the_project_is_looked_at_and_one_elsewhere_is_not(repo, tmp_path, capsys):
    inner, outer = repo / ".o", tmp_path / "outer"
    for d in (inner, outer):
        (d / "info").mkdir(parents=True)
    (repo / ".git/objects/info/alternates").write_text(f'{inner}\n# a comment\n\n{outer}\n"{repo}/.o"\n')
    before = _look(repo)
    assert list(before or {}) == [os.path.realpath(repo / ".git/objects"), os.path.realpath(inner)]
    (inner / "info" / "commit-graph").write_text("forged\n")
    (outer / "info" / "commit-graph").write_text("not looked at\n")
    said = _end(repo, before, capsys)
    assert f"{os.path.realpath(inner)}/info (commit-graph)" in said, said
    assert (outer / "info" / "commit-graph").exists() and not (inner / "info" / "commit-graph").exists()


def test_a_quoted_alternate_is_read_as_git_unquotes_it(repo, capsys):
    odd = repo / "o\tx"
    (odd / "info").mkdir(parents=True)
    (repo / ".git/objects/info/alternates").write_text(f'"{repo}/o\\tx"\n')
    assert os.path.realpath(odd) in (_look(repo) or {})


def test_a_nested_repository_the_session_moved_is_looked_at_where_it_is_now(repo, capsys, tmp_path):
    nested = repo / "lib"
    nested.mkdir()
    _git(nested, "init", "-q")
    before = commitgraph.look(str(nested / ".git"), str(repo))
    moved = repo / "lib2"
    os.rename(nested, moved)
    _git(moved, "commit", "-q", "--allow-empty", "-m", "x")
    _git(moved, "commit-graph", "write", "--reachable")
    said = _end(nested, before, capsys, now=moved)
    assert f"{os.path.realpath(moved)}/.git/objects/info (commit-graph)" in said, said


def test_a_directory_the_launch_could_not_list_is_taken_for_changed(repo, capsys, monkeypatch):
    graphs = repo / ".git/objects/info/commit-graphs"
    graphs.mkdir()
    monkeypatch.setattr(commitgraph, "_MAX", 2)
    for i in range(3):
        (graphs / f"tmp_graph_{i}").write_text("x\n")
    before = _look(repo)
    assert before == {os.path.realpath(repo / ".git/objects"): None}
    assert "removed the commit-graph files" in _end(repo, before, capsys)
    assert not list(graphs.iterdir())


def test_worktrees_of_one_repository_are_looked_at_once(repo, capsys):
    before = _look(repo)
    _git(repo, "commit-graph", "write", "--reachable")
    done: set[str] = set()
    commitgraph.undo(before, str(repo), str(repo), done)
    commitgraph.undo(before, str(repo), str(repo), done)
    assert capsys.readouterr().err.count("removed the commit-graph files") == 1


def test_no_count_of_decoys_keeps_the_chain(repo, capsys, monkeypatch):
    """Fiftieth red team, F3: a forged chain beside 400,000 files named like git's temporary ones
    (`tmp_graph_chain<N>`, which sorted with the chain) filled the removal's cap, and the chain stayed."""
    monkeypatch.setattr(commitgraph, "_REMOVED", 3)
    before = _look(repo)
    _git(repo, "commit-graph", "write", "--reachable", "--split")
    graphs = repo / ".git/objects/info/commit-graphs"
    for i in range(20):
        (graphs / f"tmp_graph_chain{i}").write_text("")
    assert "removed the commit-graph files" in _end(repo, before, capsys)
    assert not (graphs / "commit-graph-chain").exists()
    assert _git(repo, "commit-graph", "verify") == ""


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a directory of any mode")
def test_a_graph_directory_the_end_cannot_list_is_said(repo, capsys):
    """Fifty-first red team, F1: a session's chain in a commit-graphs/ of mode 0111 (git opens the chain by its name;
    the end cannot list the directory) was taken for a link, and nothing was said."""
    before = _look(repo)
    _git(repo, "commit-graph", "write", "--reachable", "--split")
    graphs = repo / ".git/objects/info/commit-graphs"
    graphs.chmod(0o111)
    try:
        said = _end(repo, before, capsys)
    finally:
        graphs.chmod(0o755)
    assert "could not remove the commit-graph files" in said, said


@pytest.mark.parametrize("line", [b'"\\x"', b"a\0b", b'"a\\000b"'])
def test_an_alternates_line_git_cannot_read_is_no_error_of_the_launch(repo, line):
    """Fifty-first red team, F2: a quoted line with a bad escape made every later launch end in an internal error."""
    (repo / ".git/objects/info/alternates").write_bytes(line + b"\n")
    assert list(_look(repo) or {}) == [os.path.realpath(repo / ".git/objects")]
