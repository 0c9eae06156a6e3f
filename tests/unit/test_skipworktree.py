"""Which hidden paths are tracked, read from git's raw index; the journal of marks across sessions."""

from __future__ import annotations

import os
import subprocess

import pytest

from ai_sandbox import skipworktree, state
from ai_sandbox.errors import PolicyError
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


def test_only_masks_that_can_hide_tracked_files_are_looked_up(tmp_path):
    root = str(tmp_path)
    for rel in ("prod.tfvars", "vault/x", "vault/y", "src/app.py", "dist/keep.js"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x\n")
    raw = b"".join(
        f"{tag} 100644 {'0' * 40} 0\t{path}\0".encode()
        for tag, path in (("H", "prod.tfvars"), ("S", "vault/x"), ("H", "vault/y"), ("H", "src/app.py"),
                          ("H", "dist/keep.js"), ("H", "vault/gone"))
    )  # fmt: skip
    scan = Scan(Repo(root=root, common_dir=root + "/.git"), index=raw)
    policy = Policy(root=root, in_git=True)
    policy.masks = [
        Mask(f"{root}/prod.tfvars", False, EXPLICIT, "block"),
        Mask(f"{root}/vault", True, CRYPT, "crypt"),
        Mask(f"{root}/dist", True, IGNORED, "ignored"),  # ignored: untracked by definition, not looked at
    ]
    marks = skipworktree.hidden_tracked(policy, [_Tree("", scan)])
    # vault/gone is tracked but missing from the work tree: nothing to hide, and no mark (git inside sees it deleted)
    assert marks.needs == {root: ["prod.tfvars", "vault/x", "vault/y"]} and marks.flagged == {root: {"vault/x"}}
    assert marks.paths == [f"{root}/prod.tfvars", f"{root}/vault/x", f"{root}/vault/y"] and marks.sparse == []
    policy.masks = [Mask(f"{root}/dist", True, IGNORED, "ignored")]
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
    real = skipworktree.update_index

    def killed_after(env: dict[str, str], tree: str, flag: str, paths: list[str], wait: float) -> None:
        real(env, tree, flag, paths, wait)
        raise KeyboardInterrupt  # the signal, right after git wrote the index

    monkeypatch.setattr(skipworktree, "update_index", killed_after)
    marks = skipworktree.Marks(needs={str(repo): ["prod.tfvars"]})
    with pytest.raises(KeyboardInterrupt):
        skipworktree.protect(env, str(repo), marks)
    monkeypatch.setattr(skipworktree, "update_index", real)
    listing = subprocess.run(["git", "-C", str(repo), "ls-files", "-t"], capture_output=True, text=True).stdout
    assert listing == "S prod.tfvars\n"  # set, and the session is gone
    skipworktree.release(env, str(repo), os.getpid())
    listing = subprocess.run(["git", "-C", str(repo), "ls-files", "-t"], capture_output=True, text=True).stdout
    assert listing == "H prod.tfvars\n"


def _git(repo, *args: str) -> str:
    import subprocess

    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e", "GIT_COMMITTER_NAME": "t"}
    env["GIT_COMMITTER_EMAIL"] = "t@e"
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True, env=env).stdout


def _flags(repo) -> dict[str, str]:
    return {ln[2:]: ln[0] for ln in _git(repo, "ls-files", "-t").splitlines()}


def _conf(tmp_path):
    """conf/prod.tfvars (ai-sandbox will mark it) and conf/local.yml (the user marked it), committed."""
    repo = tmp_path / "repo"
    _git(tmp_path, "init", "-q", str(repo))
    (repo / "conf").mkdir()
    (repo / "conf" / "prod.tfvars").write_text("secret\n")
    (repo / "conf" / "local.yml").write_text("mine\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "conf")
    _git(repo, "update-index", "--skip-worktree", "conf/local.yml")
    env = {"XDG_STATE_HOME": str(tmp_path / "state"), "HOME": str(tmp_path)}
    return repo, env


def _marks(repo, *needed: str) -> skipworktree.Marks:
    from ai_sandbox import git

    scan = git.Scan(git.Repo(root=str(repo), common_dir=""), index=skipworktree._index_listing(str(repo)))
    return skipworktree.Marks(
        needs={str(repo): list(needed)},
        flagged={str(repo): scan.skip_worktree.intersection(needed)},
        blobs={str(repo): {p: scan.blob_of(p) for p in needed}},
        marked={str(repo): scan.skipped},
    )


def test_a_mark_git_carried_to_a_new_path_is_cleared_there_and_the_users_own_stays(tmp_path):
    """F3: `git mv conf conf2` inside the session; old code cleared conf/prod.tfvars only (gone)."""
    repo, env = _conf(tmp_path)
    skipworktree.protect(env, str(repo), _marks(repo, "conf/prod.tfvars"))
    assert _flags(repo) == {"conf/local.yml": "S", "conf/prod.tfvars": "S"}
    _git(repo, "mv", "conf", "conf2")  # what the agent's git does inside
    assert _flags(repo) == {"conf2/local.yml": "S", "conf2/prod.tfvars": "S"}  # git carries both bits
    skipworktree.release(env, str(repo), os.getpid())
    assert _flags(repo) == {"conf2/local.yml": "S", "conf2/prod.tfvars": "H"}
    assert not os.path.exists(skipworktree.journal_path(env, str(repo)))


def test_a_mark_left_moved_by_a_killed_session_is_followed_by_the_next_launch(tmp_path):
    """The watcher was killed after `git mv`: the next launch, which hides the file under its new name, must not
    take the moved bit for the user's (old code: never cleared again), and clears it when its session ends."""
    repo, env = _conf(tmp_path)
    skipworktree.protect(env, str(repo), _marks(repo, "conf/prod.tfvars"))
    _git(repo, "mv", "conf", "conf2")
    path = skipworktree.journal_path(env, str(repo))
    doc = skipworktree._load(path)
    doc["sessions"] = {"999999999": {"start": "1", "needs": {str(repo): ["conf/prod.tfvars"]}}}  # gone
    skipworktree._save(path, skipworktree._entries(doc, "owned"), skipworktree._entries(doc, "theirs"), {})
    skipworktree.protect(env, str(repo), _marks(repo, "conf2/prod.tfvars"))
    doc = skipworktree._load(path)
    assert doc["owned"] == {str(repo): {"conf2/prod.tfvars": _git(repo, "rev-parse", ":conf2/prod.tfvars").strip()}}
    assert doc["theirs"] == {str(repo): {"conf2/local.yml": _git(repo, "rev-parse", ":conf2/local.yml").strip()}}
    skipworktree.release(env, str(repo), os.getpid())
    assert _flags(repo) == {"conf2/local.yml": "S", "conf2/prod.tfvars": "H"}


def test_marks_left_by_a_session_that_moved_the_root_are_cleared_by_a_launch_at_its_new_place(tmp_path):
    """Ninth red team: `mv p p2` inside, and another git's index.lock left behind, so the session's end kept the mark
    and said "until the next launch clears it"; launches from p2 have a journal of their own, took the mark for the
    user's, and never cleared it. Now a launch takes over a gone session's journal of the tree it moved from."""
    repo, env = _conf(tmp_path)
    skipworktree.protect(env, str(repo), _marks(repo, "conf/prod.tfvars"))
    old = skipworktree.journal_path(env, str(repo))
    doc = skipworktree._load(old)
    skipworktree._save(  # the session is gone, its end could not clear the mark
        old, skipworktree._entries(doc, "owned"), skipworktree._entries(doc, "theirs"), {}, skipworktree._ids(doc)
    )
    moved = tmp_path / "moved"
    repo.rename(moved)
    skipworktree.protect(env, str(moved), _marks(moved, "conf/prod.tfvars"))
    assert not os.path.exists(old)  # taken over whole
    doc = skipworktree._load(skipworktree.journal_path(env, str(moved)))
    assert set(doc["owned"][str(moved)]) == {"conf/prod.tfvars"} and set(doc["theirs"][str(moved)]) == {
        "conf/local.yml"
    }
    skipworktree.release(env, str(moved), os.getpid())
    assert _flags(moved) == {"conf/local.yml": "S", "conf/prod.tfvars": "H"}


def test_the_first_journals_lists_of_paths_still_load(tmp_path):
    path = tmp_path / "journal"
    path.write_text('{"owned":{"/p":["a"]}}')
    doc = skipworktree._load(str(path))
    assert skipworktree._entries(doc, "owned") == {"/p": {"a": ""}} and skipworktree._entries(doc, "theirs") == {}


# --- _follow: whose mark is where after the session's git mv, as a control run without the sandbox has it ---------


@pytest.mark.parametrize(
    ("moves", "ours", "users"),
    [
        # ninth red team: ours (d/, object X) moved to where the user's was (e/, object Y), the user's moved aside
        ({"tmp/c": "Y", "e/c": "X"}, {"e/c"}, {"tmp/c"}),
        # the variant: ours moved aside, the user's moved to where ours was
        ({"tmp/c": "X", "d/c": "Y"}, {"tmp/c"}, {"d/c"}),
        # nothing moved
        ({"d/c": "X", "e/c": "Y"}, {"d/c"}, {"e/c"}),
    ],
)
def test_a_mark_of_ours_moved_onto_the_users_path_is_told_apart_by_its_object(moves, ours, users):
    owned, theirs = {"d/c": "X"}, {"e/c": "Y"}
    assert skipworktree._follow(owned, theirs, moves) == []
    assert set(owned) == ours and set(theirs) == users


def test_a_users_mark_gone_missing_with_one_of_ours_makes_what_is_taken_doubtful():
    """Ninth red team: ours removed from the index (`git rm --cached`), the user's given another object (`git reset
    REV -- PATH`) and moved (`git mv d d2`). Which new entry was whose cannot be told: all are taken (a mark of ours
    left set hides the user's edits for good) and said, not silently."""
    owned, theirs = {"s.tfvars": "S"}, {"d/u.txt": "U2"}
    assert skipworktree._follow(owned, theirs, {"d2/u.txt": "U1"}) == ["d2/u.txt"]
    assert owned == {"d2/u.txt": "U1"} and theirs == {}


def test_a_mark_whose_object_a_reset_changed_stays_whoever_it_is():
    owned, theirs = {"d/c": "X"}, {"e/c": "Y"}
    assert skipworktree._follow(owned, theirs, {"d/c": "X2", "e/c": "Y2"}) == []
    assert owned == {"d/c": "X"} and theirs == {"e/c": "Y2"}


# --- the tenth red team: the scan's view gone stale, journals from outside, inodes reused ---------------------------


def test_a_mark_the_scan_saw_set_and_another_session_cleared_since_is_set_again(tmp_path):
    """Session A's mark was set when launch B's scan ran; A ended before B's protect and cleared it. Old code took
    the scan's word: B ran without the mark, and git inside saw the hidden file modified."""
    repo, env = _conf(tmp_path)
    _git(repo, "update-index", "--skip-worktree", "conf/prod.tfvars")  # A's mark, as B's scan sees it
    marks = _marks(repo, "conf/prod.tfvars")
    assert marks.flagged[str(repo)] == {"conf/prod.tfvars"}
    _git(repo, "update-index", "--no-skip-worktree", "conf/prod.tfvars")  # A's end, before B's protect
    skipworktree.protect(env, str(repo), marks)
    assert _flags(repo)["conf/prod.tfvars"] == "S"
    skipworktree.release(env, str(repo), os.getpid())
    assert _flags(repo) == {"conf/local.yml": "S", "conf/prod.tfvars": "H"}


@pytest.mark.parametrize("stray", ["fifo", "directory", "link"])
def test_what_is_put_beside_the_journals_from_outside_never_hangs_or_blocks_a_launch(tmp_path, stray):
    repo, env = _conf(tmp_path)
    d = os.path.dirname(skipworktree.journal_path(env, str(repo)))
    os.makedirs(d)
    target = tmp_path / "precious"
    target.write_text("keep me\n")
    if stray == "fifo":
        os.mkfifo(os.path.join(d, "abc"))
    elif stray == "directory":
        os.mkdir(os.path.join(d, "README"))
    else:  # a lock file that is a link: never followed, never truncated
        lock = state.lock_path(skipworktree.journal_path(env, str(repo)))
        os.makedirs(os.path.dirname(lock))
        os.symlink(target, lock)
    if stray == "link":
        with pytest.raises(PolicyError, match="lock"):
            skipworktree.protect(env, str(repo), _marks(repo, "conf/prod.tfvars"))
        assert target.read_text() == "keep me\n"
        return
    skipworktree.protect(env, str(repo), _marks(repo, "conf/prod.tfvars"))
    skipworktree.release(env, str(repo), os.getpid())
    assert _flags(repo) == {"conf/local.yml": "S", "conf/prod.tfvars": "H"}


def test_a_gone_sessions_journal_is_never_taken_over_by_a_tree_that_only_got_its_inode(tmp_path):
    """A repository deleted with a mark kept, and a new one that got its directory's inode: old code took every
    mark of the new one for ai-sandbox's (the old mark found nowhere) and cleared the user's own."""
    repo, env = _conf(tmp_path)
    st = os.lstat(repo)
    gone = str(tmp_path / "gone")
    skipworktree._save(
        skipworktree.journal_path(env, gone),
        {gone: {"conf/old.tfvars": "0" * 40}},
        {},
        {},
        {gone: f"{st.st_dev}:{st.st_ino}"},
    )
    skipworktree.protect(env, str(repo), _marks(repo, "conf/prod.tfvars"))
    skipworktree.release(env, str(repo), os.getpid())
    assert _flags(repo) == {"conf/local.yml": "S", "conf/prod.tfvars": "H"}  # the user's own mark stays


def test_a_mark_whose_object_a_reset_changed_stays_ours_when_a_decoy_takes_its_old_object():
    """Eleventh red team: `git reset HEAD~ -- .env` (the bit stays, the object changes), then a decoy marked with
    .env's old object. Old code followed ours to the decoy only: .env kept the bit for good, silently."""
    owned, theirs = {".env": "X"}, {}
    assert skipworktree._follow(owned, theirs, {".env": "X2", "decoy": "X"}) == [".env", "decoy"]
    assert set(owned) == {".env", "decoy"} and theirs == {}


def test_entries_taken_because_a_mark_of_ours_went_missing_are_always_said():
    """Eleventh red team: `git rm --cached --sparse .env` inside, and the user marking local.cfg outside meanwhile:
    ours is found nowhere, and the one new entry, the user's, was taken silently."""
    owned, theirs = {".env": "X"}, {}
    assert skipworktree._follow(owned, theirs, {"local.cfg": "L"}) == ["local.cfg"]


def test_index_locks_left_in_many_work_trees_are_waited_for_once_in_all(tmp_path):
    """Twelfth red team: an agent left an index.lock in each of N worktrees; the session end waited for each in turn
    (N x 10 s) while it held every journal's lock, and every other launch with hidden tracked files waited with it.
    One deadline for all the trees: the marks it cannot clear stay set, and are said."""
    import time

    repos = []
    for i in range(4):
        (tmp_path / str(i)).mkdir()
        repo, env = _conf(tmp_path / str(i))
        _git(repo, "update-index", "--skip-worktree", "conf/prod.tfvars")
        (repo / ".git" / "index.lock").write_text("")
        repos.append(repo)
    owned = {str(r): {"conf/prod.tfvars": ""} for r in repos}
    out = skipworktree.Cleared()
    start = time.monotonic()
    skipworktree._clear_unneeded(env, owned, {}, {}, wait=1.0, out=out)
    took = time.monotonic() - start
    assert sorted(out.kept) == sorted(str(r) for r in repos)  # each kept, and said
    assert took < 3.0, f"waited {took:.1f} s: once per tree (4 x 1 s) instead of once in all"


def test_a_files_object_id_is_the_one_git_gives_it(tmp_path):
    """skipworktree.blob_id hashes as `git hash-object` does, in a SHA-1 and a SHA-256 repository: a file, an
    empty one, binary bytes, a link (its target)."""
    for fmt, size in (("sha1", 40), ("sha256", 64)):
        repo = tmp_path / fmt
        subprocess.run(["git", "init", "-q", f"--object-format={fmt}", str(repo)], check=True)
        (repo / "a.txt").write_text("text\n")
        (repo / "empty").write_bytes(b"")
        (repo / "bin").write_bytes(bytes(range(256)) * 3)
        (repo / "link").symlink_to("a.txt")
        for name in ("a.txt", "empty", "bin", "link"):
            want = subprocess.run(
                ["git", "hash-object", "--no-filters", name], cwd=repo, capture_output=True, text=True, check=True
            ).stdout.strip()
            if name == "link":  # git hashes a link's target, as it stores it
                want = subprocess.run(
                    ["git", "hash-object", "--stdin"], input="a.txt", cwd=repo, capture_output=True, text=True
                ).stdout.strip()
            assert skipworktree.blob_id(str(repo / name), size) == want, (fmt, name)
        assert skipworktree.blob_id(str(repo / "missing"), size) is None


def test_a_file_that_cannot_be_hashed_safely_is_not_named(tmp_path, monkeypatch):
    """A FIFO (never waited on) and a file past the read limit (another session may swap one in) have no id."""
    os.mkfifo(tmp_path / "fifo")
    assert skipworktree.blob_id(str(tmp_path / "fifo"), 40) is None
    (tmp_path / "big").write_bytes(b"x" * 100)
    monkeypatch.setattr(skipworktree, "_EDITED_LIMIT", 99)
    assert skipworktree.blob_id(str(tmp_path / "big"), 40) is None
    monkeypatch.setattr(skipworktree, "_EDITED_LIMIT", 100)
    assert skipworktree.blob_id(str(tmp_path / "big"), 40) is not None
