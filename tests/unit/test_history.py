"""The pure parts of history.py and secretscan.py: which hidden path covers a history path, what each
finding tells the user to do, and the launch's lines."""

from __future__ import annotations

from ai_sandbox import history, secretscan


def _finding(**kw) -> history.Finding:
    base = dict(
        mask="/p/.env", is_dir=False, paths=[".env"], path_count=1, versions=2, first_commit="a" * 40,
        first_date=1_700_000_000, via="ref", refs=["refs/heads/main"], root="/p",
    )  # fmt: skip
    base.update(kw)
    return history.Finding(**base)


def test_owner_is_the_path_itself_or_the_nearest_hidden_directory():
    t = history.Target("/p", files={".env", "a/b.key"}, dirs={"secrets", "x/y"})
    assert t.owner(".env") == ".env"
    assert t.owner("secrets/deep/k.pem") == "secrets"
    assert t.owner("x/y/z") == "x/y"
    assert t.owner("x/yz") is None and t.owner("secretsX") is None and t.owner("a/b.key.bak") is None
    whole = history.Target("/p/sub", dirs={""})
    assert whole.owner("anything/at/all") == ""


def test_each_way_of_reaching_content_gets_its_remedy():
    assert "git filter-repo --invert-paths --path .env" in _finding().remedy()
    stash = _finding(refs=["refs/stash"]).remedy()
    assert "git stash drop" in stash and "filter-repo" not in stash
    for via in ("reflog", "unreachable", "store"):
        assert "git reflog expire --expire-unreachable=now --all && git gc --prune=now" in _finding(via=via).remedy()
    odd = _finding(paths=["a b;$(x)"], mask="/p/a b;$(x)").remedy()
    assert "--path 'a b;$(x)'" in odd  # quoted for copy and paste
    hidden_dir = _finding(is_dir=True, paths=["certs/key.pem", "certs/old.pem"], mask="/p/certs").remedy()
    assert "--path certs/`" in hidden_dir  # the directory, not its first file with a slash added


def test_messages_say_where_and_never_what():
    msg = _finding().message()
    assert "2 version(s)" in msg and "2023-11-14" in msg and "refs/heads/main" in msg
    assert "`git show aaaaaaaaaaaa:.env`" in msg
    assert "object store" in _finding(via="store", first_commit="", first_date=0).message()
    assert "dangling commit" in _finding(via="unreachable", refs=[]).message()


def test_the_launch_line_counts_hidden_paths_once_and_shows_three():
    assert history.Cached("k", []).loud("/p") is None
    found = [_finding(mask=f"/p/{n}") for n in ("a", "b", "c", "d")] + [_finding(mask="/p/a", via="store")]
    line = history.Cached("k", found).loud("/p")
    assert line is not None and line.startswith("4 hidden path(s) readable through git history (a, b, c, …)")


def test_the_secret_line_counts_secrets_and_files():
    assert secretscan.loud([], "/p") is None
    found = [secretscan.Secret("/p/a.py", 1, ["AWS Access Key"], "project")] * 2
    found.append(secretscan.Secret("/p/b/.npmrc", 1, ["NPM tokens"], "project"))
    line = secretscan.loud(found, "/p")
    assert line is not None and line.startswith("the last secret scan found 3 secret(s) in 2 file(s)")
    assert "(a.py, b/.npmrc)" in line
