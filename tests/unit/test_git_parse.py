"""git/'s reading of git's output, from bytes written here (and once from a real `git ls-files`): NUL-separated
listings, collapsed ignored directories, warnings, config records, the raw index of `ls-files --stage -t`,
rev-parse answers and check-ignore/check-attr records. Names with newlines, tabs and non-UTF-8 bytes included.
(tests/unit/test_git_listing.py and test_skipworktree.py cover the first cases of warnings, config and index.)"""

from __future__ import annotations

import os
import subprocess

import pytest

from ai_sandbox import git
from ai_sandbox.errors import PolicyError
from ai_sandbox.git import Repo, Scan
from tests.conftest import require

SHA = "1" * 40
ROOT = "/r"


def _index(*entries: tuple[str, str, bytes], stage: int = 0) -> bytes:
    """`ls-files -z --stage -t` records: `TAG MODE SHA STAGE<TAB>PATH<NUL>`."""
    return b"".join(f"{tag} {mode} {SHA} {stage}\t".encode() + path + b"\0" for tag, mode, path in entries)


def _scan(index: bytes) -> Scan:
    return Scan(Repo(root=ROOT, common_dir=ROOT + "/.git"), index=index)


# --- NUL-separated listings ---------------------------------------------------------------------------------


def test_a_listing_splits_on_nul_only_and_keeps_every_byte_of_a_name():
    out = b"a\nb\0tab\there\0caf\xe9/\0 lead and trail \0\0"
    names = git.run._split_z(out)
    assert names == ["a\nb", "tab\there", "caf\udce9/", " lead and trail "]
    assert [os.fsencode(n) for n in names] == [b"a\nb", b"tab\there", b"caf\xe9/", b" lead and trail "]
    assert git.run._split_z(b"") == [] and git.run._split_z(b"\0") == []


def test_a_multibyte_name_is_decoded_whole():
    assert git.run._split_z("é\0日本/\0".encode()) == ["é", "日本/"]


# --- _collapse: a directory git lists whole, then its contents -----------------------------------------------


def test_collapse_keeps_a_directory_and_drops_what_git_listed_inside_it():
    listed = ["build/", "build/a.o", "build/sub/", "build/sub/b.o", ".env", "logs/x.log"]
    assert git.listing._collapse(listed) == [(".env", False), ("build", True), ("logs/x.log", False)]


def test_collapse_does_not_swallow_a_sibling_that_shares_a_prefix():
    listed = ["out/", "out/x", "out.txt", "outer/", "outer/y", "out-b", "out0"]
    assert git.listing._collapse(listed) == [
        ("out-b", False),
        ("out.txt", False),
        ("out", True),
        ("out0", False),
        ("outer", True),
    ]


def test_collapse_resets_after_a_file_and_keeps_odd_names():
    listed = ["a/", "a/x", "b", "b/x", "n\nl/", "n\nl/f", "caf\udce9", "c\td/"]
    assert git.listing._collapse(listed) == [
        ("a", True),
        ("b", False),
        ("b/x", False),  # b is a file entry: nothing below it is dropped
        ("c\td", True),
        ("caf\udce9", False),
        ("n\nl", True),
    ]
    assert git.listing._collapse([]) == []


# --- _unlisted: directories git could not open, and anything else -----------------------------------------


def test_a_quote_colon_inside_a_directory_name_stays_in_the_name():
    err = b"warning: could not open directory 'a/': b/': Permission denied\n\n   \n"
    assert git.listing._unlisted(err, ROOT) == [("a/': b", "Permission denied")]


def test_a_non_utf8_directory_name_is_kept_as_bytes_decode():
    err = b"warning: could not open directory 'caf\xe9/': Permission denied\n"
    assert git.listing._unlisted(err, ROOT) == [("caf\udce9", "Permission denied")]


@pytest.mark.parametrize(
    "line",
    [
        b"warning: could not open directory '': Permission denied",  # no name
        b"warning: could not open directory 'x': Permission denied",  # not a directory's form
        b"warning: could not open directory x/: Permission denied",  # no quotes
        b"error: could not open directory 'x/': Permission denied",
        b"hint: something",
        b"warning: could not open directory 'x/': Permission denied extra\nfatal: broken",
    ],
)
def test_an_unexpected_message_refuses_naming_the_root(line):
    with pytest.raises(PolicyError) as e:
        git.listing._unlisted(line + b"\n", "/some/root")
    assert "unexpected message in /some/root" in e.value.message and e.value.hint


# --- _read_config: `git config -z --get-regexp` records -------------------------------------------------------


def test_the_last_value_of_a_key_wins_and_booleans_read_as_git_does(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    sparse = git.listing._read_config(b"core.sparsecheckout\ntrue\0core.sparsecheckout\nfalse\0", ROOT)
    assert sparse == (f"{tmp_path}/git/attributes", "", False)
    for word in (b"yes", b"on", b"1", b"TRUE", b" true "):
        assert git.listing._read_config(b"core.sparsecheckout\n" + word + b"\0", ROOT)[2] is True, word
    for word in (b"no", b"off", b"0", b""):
        assert git.listing._read_config(b"core.sparsecheckout\n" + word + b"\0", ROOT)[2] is False, word
    expect = b"core.sparsecheckout\ntrue\0sparse.expectfilesoutsideofpatterns\0"  # no value: true
    assert git.listing._read_config(expect, ROOT)[2] is False


def test_config_paths_and_the_git_crypt_key(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    assert git.listing._read_config(b"core.attributesfile\n/etc/attrs\0", ROOT)[0] == "/etc/attrs"
    assert (
        git.listing._read_config(b"core.attributesfile\n\0", ROOT)[0] == f"{tmp_path}/git/attributes"
    )  # empty: default
    assert git.listing._read_config(b"attr.tree\nHEAD\0", ROOT)[1] == "attr.tree"
    both = b"filter.a.clean\ngit-crypt clean\0filter.b.smudge\n/usr/bin/git-crypt smudge\0"
    assert git.listing._read_config(both, ROOT)[1] == "filter.b.smudge"  # the last one named
    assert git.listing._read_config(b"filter.lfs.clean\ngit-lfs clean -- %f\0", ROOT)[1] == ""
    newline = b"core.attributesfile\nwith\nnewline\0"  # the value is everything after the first newline
    assert git.listing._read_config(newline, ROOT)[0] == "/r/with\nnewline"


# --- the index: `ls-files -z --stage -t` --------------------------------------------------------------------------


def test_gitlinks_are_submodules_and_not_tracked_files():
    scan = _scan(_index(("H", "100644", b"a.txt"), ("H", "160000", b"libs/sub"), ("H", "120000", b"link")))
    assert scan.gitlinks == ["libs/sub"]
    assert scan.tracked == ["a.txt", "link"]
    assert scan.skip_worktree == set()


def test_a_file_whose_name_holds_the_gitlink_mode_is_a_file():
    scan = _scan(_index(("H", "100644", b"160000 notes"), ("S", "100755", b"x 160000 y")))
    assert scan.gitlinks == []
    assert scan.tracked == ["160000 notes", "x 160000 y"] and scan.skip_worktree == {"x 160000 y"}


def test_skip_worktree_entries_are_tagged_s_whatever_their_mode():
    raw = _index(("S", "100644", b"secret.env"), ("S", "160000", b"vendor/lib"), ("H", "100644", b"S plain"))
    scan = _scan(raw)
    assert scan.skip_worktree == {"secret.env", "vendor/lib"}  # `S plain` is a name, not a tag
    assert scan.gitlinks == ["vendor/lib"] and scan.tracked == ["secret.env", "S plain"]


def test_an_entry_also_assume_unchanged_is_still_a_skip_worktree_one():
    """The scan lists with -v (hiddenedits.py): an entry with both marks is tagged s, first in the listing or not."""
    for raw in (
        _index(("s", "100644", b"both.env"), ("h", "100644", b"assumed"), ("S", "100644", b"skipped")),
        _index(("h", "100644", b"assumed"), ("s", "100644", b"both.env")),
    ):
        scan = _scan(raw)
        assert scan.skip_worktree == {"both.env", "skipped"} & set(scan.tracked)
        assert set(scan.skipped) == scan.skip_worktree


def test_an_unmerged_path_is_listed_once_whatever_its_stages():
    raw = _index(("M", "100644", b"conflict.txt"), stage=1) + _index(("M", "100644", b"conflict.txt"), stage=2)
    raw += _index(("M", "100644", b"conflict.txt"), stage=3) + _index(("H", "100644", b"z"))
    assert _scan(raw).tracked == ["conflict.txt", "z"]


def test_index_names_with_newlines_tabs_and_non_utf8_bytes():
    raw = _index(
        ("H", "100644", b"a\nb"), ("H", "100644", b"t\tab"), ("S", "100644", b"caf\xe9"), ("H", "160000", b"m\nod")
    )
    scan = _scan(raw)
    assert scan.tracked == ["a\nb", "t\tab", "caf\udce9"]
    assert scan.gitlinks == ["m\nod"] and scan.skip_worktree == {"caf\udce9"}
    assert scan.is_tracked("t\tab") and scan.is_tracked("caf\udce9") and scan.is_tracked("a\nb")
    assert not scan.is_tracked("ab") and not scan.is_tracked("a") and not scan.is_tracked("caf")
    assert scan.has_tracked_named(b"caf\xe9") and not scan.has_tracked_named(b"nothing")


def test_an_empty_index_has_nothing():
    scan = _scan(b"")
    assert (scan.tracked, scan.gitlinks, scan.skip_worktree) == ([], [], set())
    assert not scan.is_tracked("a")


def _real_git(cwd, *args: str) -> bytes:
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(cwd)}
    return subprocess.run(
        ["git", "-c", "safe.directory=*", *args], cwd=cwd, env=env, check=True, capture_output=True
    ).stdout


def test_the_index_git_really_writes_decodes_as_expected(tmp_path):
    require("git")
    _real_git(tmp_path, "init", "-q")
    for name in (b"plain.txt", b"new\nline", b"caf\xe9", b"hidden.env"):
        (tmp_path / os.fsdecode(name)).write_bytes(b"x")
    _real_git(tmp_path, "add", "--", "plain.txt", "new\nline", os.fsdecode(b"caf\xe9"), "hidden.env")
    _real_git(tmp_path, "update-index", "--add", "--cacheinfo", f"160000,{SHA},vendor/sub")
    _real_git(tmp_path, "update-index", "--skip-worktree", "--", "hidden.env")
    scan = _scan(_real_git(tmp_path, "ls-files", "-z", "--stage", "-t"))
    assert sorted(scan.tracked) == sorted(["plain.txt", "new\nline", "caf\udce9", "hidden.env"])
    assert scan.gitlinks == ["vendor/sub"] and scan.skip_worktree == {"hidden.env"}
    assert scan.is_tracked("new\nline") and not scan.is_tracked("vendor")


# --- rev-parse answers -------------------------------------------------------------------------------------------


def test_rev_parse_names_the_root_and_the_common_dir(tmp_path):
    sub = tmp_path / "a"
    sub.mkdir()
    repo = git.repo._repo_of(str(sub), f"{tmp_path}\n../.git\n".encode())
    assert repo == Repo(root=str(tmp_path), common_dir=f"{tmp_path}/.git")
    assert git.repo._repo_of(str(sub), f"{tmp_path}\n/elsewhere/x.git\n".encode()).common_dir == "/elsewhere/x.git"


def test_rev_parse_with_a_newline_or_a_root_not_above_refuses(tmp_path):
    with pytest.raises(PolicyError, match="newline"):
        git.repo._repo_of(str(tmp_path), f"{tmp_path}/new\nline\n.git\n".encode())
    with pytest.raises(PolicyError, match="does not contain it"):
        git.repo._repo_of(str(tmp_path), b"/nowhere/else\n.git\n")
    assert git.repo._answer(str(tmp_path), b"a\nb\nc\nd\n") == tuple(f"{tmp_path}/{x}" for x in "abcd")
    with pytest.raises(PolicyError, match="newline"):
        git.repo._answer(str(tmp_path), b"a\nb\nc\nd\ne\n")


# --- check-ignore, check-attr and ls-files -s records (git's process replaced) -------------------------------------


@pytest.fixture
def answers(monkeypatch):
    """git's answers by subcommand: (returncode, stdout, stderr); the calls made are recorded."""
    table: dict[str, tuple[int, bytes, bytes]] = {}
    calls: list[tuple[list[str], bytes | None]] = []

    def run(args, cwd, stdin=None, env=None, timeout=git.TIMEOUT):
        calls.append((args, stdin))
        rc, out, err = table[args[0]]
        return subprocess.CompletedProcess(args, rc, out, err)

    for module in (git.run, git.listing, git.repo):  # each calls the _run it imported
        monkeypatch.setattr(module, "_run", run)
    return table, calls


def test_ignore_rules_read_source_line_pattern_path_records(answers):
    table, calls = answers
    out = b".gitignore\x003\x00*.env\x00a.env\x00sub/.gitignore\x001\x00n\nl\x00sub/n\nl\x00\x00\x00\x00plain\x00"
    table["check-ignore"] = (0, out, b"")
    rules = git.ignore_rules(Repo(ROOT, ROOT + "/.git"), ["a.env", "sub/n\nl", "plain"])
    assert rules == {"a.env": ".gitignore:3: *.env", "sub/n\nl": "sub/.gitignore:1: n\nl"}
    assert calls[0][1] == b"a.env\0sub/n\nl\0plain\0"
    assert git.ignore_rules(Repo(ROOT, ROOT + "/.git"), []) == {} and len(calls) == 1
    table["check-ignore"] = (128, b"", b"fatal: bad\n")
    with pytest.raises(PolicyError, match="git check-ignore failed in /r: bad"):
        git.ignore_rules(Repo(ROOT, ROOT + "/.git"), ["x"])


def test_ignored_among_and_filter_attributes_read_nul_records(answers):
    table, _ = answers
    table["check-ignore"] = (0, b"a\0caf\xe9\0", b"")
    assert git.ignored_among(Repo(ROOT, ROOT + "/.git"), ["a", "b", "caf\udce9"]) == ["a", "caf\udce9"]
    table["check-ignore"] = (1, b"", b"")  # none is ignored
    assert git.ignored_among(Repo(ROOT, ROOT + "/.git"), ["a"]) == []
    table["ls-files"] = (0, b"x.bin\0n\nl\0", b"")
    table["check-attr"] = (0, b"x.bin\0filter\0git-crypt\0n\nl\0filter\0unspecified\0", b"")
    assert git.filter_attributes(Repo(ROOT, ROOT + "/.git")) == {"x.bin": "git-crypt", "n\nl": "unspecified"}
    table["ls-files"] = (0, b"", b"")
    assert git.filter_attributes(Repo(ROOT, ROOT + "/.git")) == {}


def test_a_git_failure_is_never_read_as_an_empty_answer(answers):
    table, _ = answers
    table["check-ignore"] = (128, b"", b"\nfatal: not a git repository\nmore\n")
    with pytest.raises(PolicyError) as e:
        git.ignored_among(Repo(ROOT, ROOT + "/.git"), ["a"])
    assert e.value.message == "git check-ignore failed in /r: not a git repository"
    table["check-ignore"] = (128, b"", b"fatal: detected dubious ownership in repository at '/r'\n")
    with pytest.raises(PolicyError) as e:
        git.ignored_among(Repo(ROOT, ROOT + "/.git"), ["a"])
    assert "owned by another user" in e.value.message and "safe.directory /r" in e.value.hint


@pytest.mark.parametrize(
    ("rc", "out", "blob"),
    [
        (0, f"100644 {SHA} 0\tf\0".encode(), SHA.encode()),
        (0, f"100755 {SHA} 0\tf\0".encode(), SHA.encode()),
        (0, f"120000 {SHA} 0\tf\0".encode(), None),  # a symlink
        (0, f"160000 {SHA} 0\tf\0".encode(), None),  # a submodule
        (0, b"", None),  # not in the index
        (128, f"100644 {SHA} 0\tf\0".encode(), None),
    ],
)
def test_indexed_blob_is_a_regular_file_s_object_id(answers, rc, out, blob):
    table, _ = answers
    table["ls-files"] = (rc, out, b"")
    assert git.indexed_blob(ROOT, "f") == blob
