"""The pure parts of what git does not list: reading git's warnings, finding FIFOs and sockets beside
git's listing, the git-crypt trigger over every attribute source, and submodule key directories."""

from __future__ import annotations

import os
import socket
import subprocess

import pytest

from ai_sandbox import git
from ai_sandbox.errors import PolicyError
from ai_sandbox.git import Repo, Scan
from ai_sandbox.layers import gitcrypt, unlisted


def test_git_warnings_about_directories_name_them_and_anything_else_refuses():
    err = b"warning: could not open directory 'a b/c/': Permission denied\nwarning: could not open directory 'x/': No such file or directory\n"
    assert git.listing._unlisted(err, "/r") == [("a b/c", "Permission denied"), ("x", "No such file or directory")]
    assert git.listing._unlisted(b"", "/r") == []
    with pytest.raises(PolicyError) as e:
        git.listing._unlisted(b"warning: unable to access 'd/.gitignore': Permission denied\n", "/r")
    assert "unexpected message" in str(e.value) and "d/.gitignore" in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(PolicyError):  # a name with a newline cannot be read back: refuse, never guess
        git.listing._unlisted(b"warning: could not open directory 'a\nb/': Permission denied\n", "/r")


def test_config_names_the_attributes_file_and_a_git_crypt_filter(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    assert git.listing._read_config(b"", "/r") == (f"{tmp_path}/.config/git/attributes", "", False)
    out = b'core.attributesfile\n~/a\0filter.git-crypt.smudge\n"git-crypt" smudge\0filter.lfs.clean\nx\0'
    assert git.listing._read_config(out, "/r") == (f"{tmp_path}/a", "filter.git-crypt.smudge", False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "x"))
    assert git.listing._read_config(b"core.attributesfile\nrel\0", "/r") == ("/r/rel", "", False)
    assert git.listing._read_config(b"", "/r")[0] == f"{tmp_path}/x/git/attributes"


def test_config_says_when_sparse_checkout_would_clear_the_marks():
    sparse = b"core.sparsecheckout\ntrue\0"
    assert git.listing._read_config(sparse, "/r")[2] is True
    assert git.listing._read_config(b"core.sparsecheckout\0", "/r")[2] is True  # a key without value is true
    assert git.listing._read_config(sparse + b"sparse.expectfilesoutsideofpatterns\nyes\0", "/r")[2] is False
    assert git.listing._read_config(b"core.sparsecheckout\nfalse\0", "/r")[2] is False


def test_config_is_asked_only_when_a_config_file_could_matter(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / ".config"))
    for k in [k for k in os.environ if k.startswith("GIT_CONFIG")]:
        monkeypatch.delenv(k)
    monkeypatch.setattr(git.listing, "_git_prefix", lambda: str(tmp_path / "prefix"))
    common = tmp_path / "repo.git"
    common.mkdir()
    (common / "config").write_text("[core]\n\tbare = false\n")
    repo = Repo(root=str(tmp_path), common_dir=str(common))
    if git.listing._config_may_matter(repo):
        pytest.skip("this machine's /etc/gitconfig mentions attributes or includes")
    (tmp_path / ".gitconfig").write_text("[Core]\n\tAttributesFile = ~/x\n")
    assert git.listing._config_may_matter(repo)
    (tmp_path / ".gitconfig").write_text("[include]\n\tpath = other\n")
    assert git.listing._config_may_matter(repo)
    (tmp_path / ".gitconfig").unlink()
    monkeypatch.setenv("GIT_CONFIG_COUNT", "1")
    assert git.listing._config_may_matter(repo)


def _git(cwd, *args):
    subprocess.run(["git", "-c", "safe.directory=*", *args], cwd=cwd, check=True, capture_output=True)


def test_the_walk_finds_special_files_where_git_walked_only(tmp_path):
    """FIFOs and sockets in tracked and untracked directories; none in ignored directories, .git or a
    nested repository; .gitattributes files are noted, ignored ones too."""
    root = tmp_path / "r"
    root.mkdir()
    _git(root, "init", "-q")
    (root / ".gitignore").write_text("ignored/\n.gitattributes\n")
    (root / "src").mkdir()
    (root / "src" / "a.py").write_text("")
    _git(root, "add", ".gitignore", "src/a.py")
    for d in ("ignored", "untracked/deep", "nested/inner"):
        (root / d).mkdir(parents=True)
    _git(root / "nested", "init", "-q")
    for rel in ("src/p", "untracked/deep/q", "ignored/r", "nested/inner/s", ".git/t"):
        os.mkfifo(root / rel)
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(root / "src" / "s.sock"))
    (root / ".gitattributes").write_text("")
    repo = Repo(root=str(root), common_dir=str(root / ".git"))
    walk = unlisted.Walk(str(root))
    scan = git.scan(repo)
    walk.finish(scan, ["nested"])
    sock.close()
    assert sorted(walk.special) == ["src/p", "src/s.sock", "untracked/deep/q"]
    assert walk.attributes == [".gitattributes"]
    assert git.ignored_among(repo, ["src/p", "src/x.log"]) == []
    (root / ".gitignore").write_text("ignored/\np\n")
    assert git.ignored_among(repo, ["src/p", "untracked/deep/q"]) == ["src/p"]


def _memo_walk(root, memo_file, monkeypatch, listed):
    """One launch's walk with a memo file; `listed` collects the directories listed anew."""
    real = unlisted._listing
    monkeypatch.setattr(unlisted, "_listing", lambda path, st: listed.append(path) or real(path, st))
    memo = unlisted.Memo(str(memo_file))
    walk = unlisted.Walk(str(root), memo)
    walk.finish(Scan(Repo(root=str(root), common_dir=str(root / ".git"))), [])
    memo.save([str(root)])
    return sorted(walk.special)


def test_remembered_listings_are_reused_only_while_the_directory_is_unchanged(tmp_path, monkeypatch):
    """A warm launch lists nothing; a FIFO created later changes its directory's ctime and is found; a
    directory changed within the racy second is listed again at the next launch."""
    root = tmp_path / "r"
    (root / "a" / "b").mkdir(parents=True)
    (root / "c").mkdir()
    memo_file = tmp_path / "cache" / "listings"
    monkeypatch.setattr(unlisted, "RACY_NS", 0)  # every directory counts as settled
    first: list[str] = []
    assert _memo_walk(root, memo_file, monkeypatch, first) == []
    assert len(first) == 4  # r, a, a/b, c
    warm: list[str] = []
    assert _memo_walk(root, memo_file, monkeypatch, warm) == []
    assert warm == []
    os.mkfifo(root / "a" / "b" / "fifo")
    after: list[str] = []
    assert _memo_walk(root, memo_file, monkeypatch, after) == ["a/b/fifo"]
    assert after == [str(root / "a" / "b") + "/"]
    monkeypatch.setattr(unlisted, "RACY_NS", 10**18)  # now nothing is settled: listed, never remembered
    os.mkfifo(root / "c" / "fifo2")
    racy: list[str] = []
    assert _memo_walk(root, memo_file, monkeypatch, racy) == ["a/b/fifo", "c/fifo2"]
    again: list[str] = []
    assert _memo_walk(root, memo_file, monkeypatch, again) == ["a/b/fifo", "c/fifo2"]
    assert str(root / "c") + "/" in again


def test_a_directory_replaced_under_the_same_name_is_listed_again(tmp_path, monkeypatch):
    root = tmp_path / "r"
    (root / "d").mkdir(parents=True)
    memo_file = tmp_path / "listings"
    monkeypatch.setattr(unlisted, "RACY_NS", 0)
    _memo_walk(root, memo_file, monkeypatch, [])
    os.rename(root / "d", tmp_path / "d-old")
    (root / "d").mkdir()
    os.mkfifo(root / "d" / "p")
    assert _memo_walk(root, memo_file, monkeypatch, []) == ["d/p"]


def test_a_broken_memo_is_ignored(tmp_path, monkeypatch):
    root = tmp_path / "r"
    root.mkdir()
    os.mkfifo(root / "p")
    memo_file = tmp_path / "listings"
    memo_file.write_bytes(b"not marshal data")
    assert _memo_walk(root, memo_file, monkeypatch, []) == ["p"]


def test_the_walk_reports_a_directory_it_cannot_list(tmp_path):
    walk = unlisted.Walk(str(tmp_path / "missing"))
    walk.finish(Scan(Repo(root=str(tmp_path), common_dir=str(tmp_path))), [])
    assert walk.failed and walk.failed[0][0] == ""


def _crypt_scan(tmp_path, monkeypatch):
    root = tmp_path / "r"
    (root / ".git" / "info").mkdir(parents=True)
    scan = Scan(Repo(root=str(root), common_dir=str(root / ".git")))
    scan.attributes_file = str(tmp_path / "user-attributes")
    monkeypatch.setattr(git.listing, "_SYSTEM_ATTRIBUTES", str(tmp_path / "system-attributes"))
    monkeypatch.setattr(git.listing, "_git_prefix", lambda: "/usr")
    return root, scan, unlisted.Walk(str(root))


@pytest.mark.parametrize("where", ["user", "system", "info", "ignored", "macro"])
def test_git_crypt_is_looked_for_in_every_attribute_source(tmp_path, monkeypatch, where):
    root, scan, walk = _crypt_scan(tmp_path, monkeypatch)
    assert not gitcrypt._mentions_git_crypt(scan, walk)
    path = {
        "user": tmp_path / "user-attributes",
        "system": tmp_path / "system-attributes",
        "info": root / ".git" / "info" / "attributes",
        "ignored": root / "sub" / ".gitattributes",
        "macro": tmp_path / "user-attributes",
    }[where]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("[attr]secret filter=git-crypt\n" if where == "macro" else "*.key filter=git-crypt\n")
    if where == "ignored":
        walk.attributes.append("sub/.gitattributes")  # the walk lists every .gitattributes, ignored or not
    assert gitcrypt._mentions_git_crypt(scan, walk)


def test_git_crypt_doubt_means_asking_git(tmp_path, monkeypatch):
    """A tracked .gitattributes missing from the work tree (git reads the index's copy), or one that
    cannot be read, sends the question to git."""
    root, scan, walk = _crypt_scan(tmp_path, monkeypatch)
    walk.tracked_attributes = ["lib/.gitattributes"]
    assert gitcrypt._mentions_git_crypt(scan, walk)
    walk.tracked_attributes = []
    (tmp_path / "user-attributes").mkdir()  # reading it fails with EISDIR
    assert gitcrypt._mentions_git_crypt(scan, walk)


def test_submodule_key_directories_are_found_by_name_and_nesting(tmp_path):
    common = tmp_path / ".git"

    def gitdir(rel: str, key: bool) -> None:
        d = common / rel
        (d / "objects" / "ab").mkdir(parents=True)
        (d / "HEAD").write_text("ref: refs/heads/main\n")
        if key:
            (d / "git-crypt" / "keys").mkdir(parents=True)

    gitdir("modules/libs/crypto", True)  # name "libs/crypto"
    gitdir("modules/plain", False)
    gitdir("modules/plain/modules/inner", True)  # a submodule of a submodule
    (common / "modules" / "plain" / "objects" / "ab" / "git-crypt").mkdir()  # never looked at
    assert gitcrypt.module_keys(str(common)) == sorted(
        [
            (str(common / "modules/libs/crypto/git-crypt"), "libs/crypto"),
            (str(common / "modules/plain/modules/inner/git-crypt"), "inner"),
        ]
    )
    assert gitcrypt.module_keys(str(tmp_path / "none")) == []


def test_linked_worktree_keys_are_hidden_too(tmp_path):
    (tmp_path / "worktrees" / "wt" / "git-crypt").mkdir(parents=True)
    (tmp_path / "git-crypt").mkdir()
    assert gitcrypt._own_keys(str(tmp_path)) == [str(tmp_path / "git-crypt"), str(tmp_path / "worktrees/wt/git-crypt")]


# ------------------------------------------------------------------ index entries in hidden directories

_INDEX_PATHS = [
    b"a/x", b"a/y/z", b"a b/x", b"a-/x", b"ab/x", b"a.txt", b"a", b"b/a/x", b"b/ab", b"c/\xff\xfe/d", b"c/\xff",
    b"d\tt/x", b"e\nn/y", b"f/g/h/i/j", b"f/g/hi", b"f/gh", "é/ü".encode(), b"sub", b"z",
]  # fmt: skip
_SPEC_NAMES = sorted({p[:i] for p in _INDEX_PATHS for i in range(1, len(p) + 1)} | {b"nowhere", b"a/", b"f/g/h/i/j/k"})


@pytest.fixture(scope="module")
def crafted_index(tmp_path_factory):
    """A repository whose index alone holds odd names, conflict stages and a submodule (no work tree needed)."""
    root = tmp_path_factory.mktemp("index")
    run = lambda *a, **k: subprocess.run(["git", *a], cwd=root, check=True, capture_output=True, **k)  # noqa: E731
    run("init", "-q")
    oid = run("hash-object", "-w", "--stdin", input=b"x\n").stdout.strip()
    lines = []
    for p in _INDEX_PATHS:
        if p == b"sub":
            lines.append(b"160000 " + oid + b" 0\t" + p)
        elif p.startswith(b"f/g/h"):
            lines += [b"100644 " + oid + b" %d\t" % stage + p for stage in (1, 2, 3)]
        else:
            lines.append(b"100644 " + oid + b" 0\t" + p)
    run("update-index", "-z", "--index-info", input=b"\0".join(lines) + b"\0")
    return str(root)


def _by_git_pathspecs(root: str, dirs: list[str], files: list[str]) -> list[tuple[str, str, str, str]]:
    """What index_entries did before it picked the entries itself: git's own literal pathspecs."""
    specs = [*(d + "/" for d in dirs), *files]
    if not specs:
        return []
    out = subprocess.run(["git", "ls-files", "-z", "--stage", "--", *specs], cwd=root, check=True,
                         capture_output=True, env={**os.environ, "GIT_LITERAL_PATHSPECS": "1"}).stdout  # fmt: skip
    entries = []
    for rec in out.split(b"\0"):
        meta, tab, path = rec.partition(b"\t")
        if tab:
            mode, oid, stage = meta.decode().split(" ")
            entries.append((mode, oid, stage, os.fsdecode(path)))
    return entries


def test_index_entries_picked_here_are_the_ones_git_picks_by_pathspec(crafted_index):
    """The whole index is listed and the entries picked here: the same entries as git's own literal pathspecs on a
    sorted index, for names that are prefixes of others, odd bytes, tabs and newlines, every stage."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    names = st.sampled_from([os.fsdecode(n).rstrip("/") for n in _SPEC_NAMES if n.rstrip(b"/")])

    @settings(max_examples=300, deadline=None)
    @given(dirs=st.lists(names, max_size=40, unique=True), files=st.lists(names, max_size=40, unique=True))
    def same(dirs: list[str], files: list[str]) -> None:
        assert git.index_entries(crafted_index, dirs, files) == _by_git_pathspecs(crafted_index, dirs, files)

    same()

    # an index whose entries are out of order (a session can write one: git reads it, and its own pathspec lookup
    # then misses entries) is asked entry by entry, with the same answer
    records = [ln for ln in subprocess.run(["git", "ls-files", "-z", "--stage"], cwd=crafted_index, check=True,
               capture_output=True).stdout.split(b"\0") if ln]  # fmt: skip

    @settings(max_examples=200, deadline=None)
    @given(dirs=st.lists(names, max_size=6, unique=True), files=st.lists(names, max_size=6, unique=True),
           order=st.permutations(range(len(records))))  # fmt: skip
    def unsorted(dirs: list[str], files: list[str], order: list[int]) -> None:
        shuffled = [records[i] for i in order]
        picked = set(git.listing._pick(records, dirs, files))
        want = [r for r in shuffled if r in picked]
        assert git.listing._pick(shuffled, dirs, files) == want

    unsorted()
    got = git.index_entries(crafted_index, ["f/g", "c"], ["a"])
    assert [(e[2], e[3]) for e in got] == [
        ("0", "a"), ("0", "c/\udcff"), ("0", "c/\udcff\udcfe/d"),
        ("1", "f/g/h/i/j"), ("2", "f/g/h/i/j"), ("3", "f/g/h/i/j"), ("1", "f/g/hi"), ("2", "f/g/hi"), ("3", "f/g/hi"),
    ]  # fmt: skip


def test_an_index_out_of_order_or_thousands_deep_is_still_read_whole(tmp_path):
    """Thirty-second red team: git's own pathspec lookup missed an entry a session moved to the front of the index
    it wrote (so a checkout over a hidden file went unnamed), and the check of an unsorted index recursed once per
    directory level (RecursionError at 1,500)."""
    import hashlib
    import struct

    run = lambda *a, **k: subprocess.run(["git", *a], cwd=tmp_path, check=True, capture_output=True, **k)  # noqa: E731
    run("init", "-q")
    oid = run("hash-object", "-w", "--stdin", input=b"x\n").stdout.strip().decode()
    for name in ("a", "conf/app.py", "conf/.env", "z"):
        run("update-index", "--add", "--cacheinfo", f"100644,{oid},{name}")
    raw = (tmp_path / ".git" / "index").read_bytes()
    count, at, entries = struct.unpack(">I", raw[8:12])[0], 12, []
    for _ in range(count):  # index v2: 62 bytes of stat data, the name, NULs to a multiple of 8
        size = struct.unpack(">H", raw[at + 60 : at + 62])[0] & 0xFFF
        end = at + ((62 + size + 8) & ~7)
        entries.append((raw[at + 62 : at + 62 + size], raw[at:end]))
        at = end
    entries.sort(key=lambda e: e[0] != b"conf/.env")  # the session's entry first
    body = raw[:12] + b"".join(e[1] for e in entries)
    (tmp_path / ".git" / "index").write_bytes(body + hashlib.sha1(body).digest())
    assert run("ls-files", "-s", "--", "conf/.env").stdout == b""  # git's lookup misses it
    assert [e[3] for e in git.index_entries(str(tmp_path), [], ["conf/.env"])] == ["conf/.env"]
    assert [e[3] for e in git.index_entries(str(tmp_path), ["conf"], [])] == ["conf/.env", "conf/app.py"]

    oid_b = oid.encode()
    deep = b"/".join([b"d"] * 3000) + b"/x"
    records = [b"100644 " + oid_b + b" 0\tz", b"100644 " + oid_b + b" 0\ta", b"100644 " + oid_b + b" 0\t" + deep]
    assert git.listing._pick(records, ["d/d"], []) == [records[2]]
    assert git.listing._pick(records, ["e"], []) == []


def test_an_attribute_file_whose_read_would_block_is_refused(tmp_path):
    """/proc/kmsg is a regular file whose read blocks: as root, a session's .git/info/attributes linked there made
    every later launch wait for git's time limit (forty-third red team's re-attack). Refused at once now."""
    from ai_sandbox.errors import PolicyError
    from ai_sandbox.layers import gitcrypt

    path = tmp_path / "attributes"
    path.write_text("*.bin binary\n")
    with pytest.raises(PolicyError, match="is not a regular file"):
        gitcrypt._refuse_unending(str(path), blocks=True)
    gitcrypt._refuse_unending(str(path))  # a regular file that reads: git is asked, as before
