"""The pure policy: layer merge, allowlists and splitting, folding, symlinks, widening. No sandbox needed."""

from __future__ import annotations

import os

import pytest

from ai_sandbox import profiles
from ai_sandbox.errors import PolicyError
from ai_sandbox.patterns import OUTPUT, PROJECT, Pattern, PatternSet, Source
from ai_sandbox.policy import CRYPT, EXPLICIT, GLOBAL, IGNORED, Entry, build

ROOT = "/p"


def allow(*texts: str) -> PatternSet:
    return PatternSet([Pattern(t, "test") for t in texts])


def ignored(rel: str, is_dir: bool = False) -> Entry:
    return Entry(f"{ROOT}/{rel}", is_dir, IGNORED, "ignored by git")


def paths(policy) -> list[str]:
    return [m.path for m in policy.masks]


def identity(p: str) -> str:
    return p


def test_allowlist_subtracts_from_the_ignored_layer_only():
    entries = [
        ignored(".claude", True),
        ignored("node_modules", True),
        ignored(".env"),
        Entry(f"{ROOT}/.claude", True, EXPLICIT, "block"),
        Entry(f"{ROOT}/node_modules", True, GLOBAL, "global"),
    ]
    pol = build(ROOT, entries, allow(".claude/", "node_modules/"), realpath=identity)
    assert paths(pol) == [f"{ROOT}/.claude", f"{ROOT}/.env", f"{ROOT}/node_modules"]
    assert {k.path for k in pol.kept} == {f"{ROOT}/.claude", f"{ROOT}/node_modules"}
    layers = {m.path: m.layer for m in pol.masks}
    assert layers[f"{ROOT}/.claude"] == EXPLICIT and layers[f"{ROOT}/node_modules"] == GLOBAL


def test_dir_patterns_do_not_allow_files():
    pol = build(ROOT, [ignored(".claude")], allow(".claude/"), realpath=identity)
    assert paths(pol) == [f"{ROOT}/.claude"]


def test_git_crypt_entries_are_never_allowed():
    pol = build(ROOT, [Entry(f"{ROOT}/vault/x", False, CRYPT, "crypt")], allow("vault/x", "*"), realpath=identity)
    assert paths(pol) == [f"{ROOT}/vault/x"]


def test_allowed_path_inside_hidden_dir_splits_it(tmp_path):
    root = str(tmp_path)
    for rel in ("build/public/index.html", "build/private.key", "build/cache/a", "build/public2/x"):
        os.makedirs(os.path.dirname(f"{root}/{rel}"), exist_ok=True)
        open(f"{root}/{rel}", "w").close()
    pol = build(root, [Entry(f"{root}/build", True, IGNORED, "ignored")], allow("build/public/"), realpath=identity)
    assert sorted(paths(pol)) == [f"{root}/build/cache", f"{root}/build/private.key", f"{root}/build/public2"]
    assert [k.path for k in pol.kept] == [f"{root}/build/public"]
    assert all(m.note == f"split from {root}/build" for m in pol.masks)


def test_split_goes_as_deep_as_the_pattern(tmp_path):
    root = str(tmp_path)
    for rel in ("out/a/keep/x", "out/a/drop/y", "out/b/z"):
        os.makedirs(os.path.dirname(f"{root}/{rel}"), exist_ok=True)
        open(f"{root}/{rel}", "w").close()
    pol = build(root, [Entry(f"{root}/out", True, IGNORED, "ignored")], allow("/out/*/keep/"), realpath=identity)
    assert sorted(paths(pol)) == [f"{root}/out/a/drop", f"{root}/out/b"]


def test_nested_masks_fold_into_their_parent():
    entries = [ignored("a", True), ignored("a/b/c"), Entry(f"{ROOT}/a/x", False, EXPLICIT, "block"), ignored("ab")]
    pol = build(ROOT, entries, allow(), realpath=identity)
    assert paths(pol) == [f"{ROOT}/a", f"{ROOT}/ab"]
    assert {m.path for m in pol.covered} == {f"{ROOT}/a/b/c", f"{ROOT}/a/x"}


def test_duplicate_paths_keep_the_first_layer():
    entries = [Entry(f"{ROOT}/k", False, EXPLICIT, "block"), Entry(f"{ROOT}/k", False, GLOBAL, "global")]
    pol = build(ROOT, entries, allow(), realpath=identity)
    assert [(m.path, m.layer) for m in pol.masks] == [(f"{ROOT}/k", GLOBAL)]


def test_symlinks_are_resolved_and_system_paths_never_masked():
    """(A link into /etc refuses instead: tests/unit/test_policy_targets.py.)"""
    links = {f"{ROOT}/ls.link": "/usr/bin/ls", f"{ROOT}/cred": "/home/u/.secret", f"{ROOT}/src.link": f"{ROOT}/src"}
    entries = [ignored("ls.link"), ignored("cred"), ignored("src.link")]
    pol = build(ROOT, entries, allow(), home="/home/u", realpath=lambda p: links.get(p, p))
    assert paths(pol) == ["/home/u/.secret"]
    assert pol.masks[0].origin == f"{ROOT}/cred" and pol.masks[0].note == "symlink target"
    assert any("/usr/bin/ls" in w.message and "never masked" in w.message for w in pol.warnings)
    assert any("src.link" in w.message for w in pol.warnings)


def test_links_to_home_or_the_project_are_not_masked():
    links = {f"{ROOT}/h": "/home/u", f"{ROOT}/up": "/"}
    pol = build(ROOT, [ignored("h"), ignored("up")], allow(), home="/home/u", realpath=lambda p: links.get(p, p))
    assert paths(pol) == []


def test_global_block_holding_the_project_is_refused():
    with pytest.raises(PolicyError, match="contains this project"):
        build("/home/u/code/p", [Entry("/home/u/code", True, GLOBAL, "g")], allow(), realpath=identity)


def test_global_block_may_hide_a_file_under_etc_but_never_etc():
    entries = [Entry("/etc/app/token", False, GLOBAL, "g"), Entry("/etc", True, GLOBAL, "g")]
    pol = build(ROOT, entries, allow(), realpath=identity)
    assert paths(pol) == ["/etc/app/token"]


def bad_commas(path: str) -> str | None:
    return "has a comma" if "," in path else None


def test_unexpressible_paths_widen_to_the_nearest_expressible_parent():
    pol = build(
        ROOT, [ignored("data/x,y/deep/s,t"), ignored("data/ok")], allow(), express=bad_commas, realpath=identity
    )
    assert paths(pol) == [f"{ROOT}/data/ok", f"{ROOT}/data"] or paths(pol) == [f"{ROOT}/data"]
    widened = [m for m in pol.masks if m.note.startswith("widened")]
    assert widened and widened[0].origin == f"{ROOT}/data/x,y/deep/s,t"


def test_widening_folds_what_the_parent_now_covers():
    pol = build(ROOT, [ignored("d/a,b"), ignored("d/c")], allow(), express=bad_commas, realpath=identity)
    assert paths(pol) == [f"{ROOT}/d"]


def test_widening_to_the_root_is_refused():
    with pytest.raises(PolicyError, match="rename"):
        build(ROOT, [ignored("a,b")], allow(), express=bad_commas, realpath=identity)


def test_widening_over_an_allowed_path_is_reported():
    pol = build(
        ROOT, [ignored("d/a,b"), ignored("d/.claude", True)], allow(".claude/"), express=bad_commas, realpath=identity
    )
    assert paths(pol) == [f"{ROOT}/d"]
    assert any(".claude" in w.message and "hidden anyway" in w.message for w in pol.warnings)


def test_hidden_lookup_covers_children():
    pol = build(ROOT, [ignored("dir", True), ignored("f")], allow(), realpath=identity)
    assert pol.hidden(f"{ROOT}/dir/x/y").path == f"{ROOT}/dir"
    assert pol.hidden(f"{ROOT}/dirx") is None
    assert pol.hidden(f"{ROOT}/f").path == f"{ROOT}/f"


@pytest.mark.parametrize("root", ["/var/www/app", "/usr/local/src/tool", "/srv/site", "/opt/app"])
def test_a_project_under_a_system_directory_still_hides_its_secrets(root):
    """/var/www/app/.env is under /var, which is never masked from outside; inside the project it is."""
    entries = [Entry(f"{root}/.env", False, IGNORED, "ignored"), Entry(f"{root}/node_cache", True, IGNORED, "i")]
    pol = build(root, entries, allow(), realpath=identity, express=bad_commas)
    assert paths(pol) == [f"{root}/.env", f"{root}/node_cache"]
    pol = build(
        root, [Entry(f"{root}/d/a,b", False, IGNORED, "ignored")], allow(), express=bad_commas, realpath=identity
    )
    assert paths(pol) == [f"{root}/d"]


def test_a_link_from_a_project_under_var_to_the_rest_of_var_is_not_masked():
    links = {"/var/www/app/log": "/var/log"}
    pol = build(
        "/var/www/app", [Entry("/var/www/app/log", True, IGNORED, "i")], allow(), realpath=lambda p: links.get(p, p)
    )
    assert paths(pol) == []


def test_a_walked_entry_that_is_a_symlink_is_still_resolved(tmp_path):
    """git lists a link as a file: the fast path for walked entries must still look at the leaf."""
    root = tmp_path / "p"
    root.mkdir()
    outside = tmp_path / "cred"
    outside.write_text("x")
    os.symlink(outside, root / "cred.link")
    (root / "plain.log").write_text("x")
    (root / "dist").mkdir()
    entries = [
        Entry(str(root / n), n == "dist", IGNORED, "ignored", walked=True) for n in ("cred.link", "plain.log", "dist")
    ]
    pol = build(str(root), entries, allow())
    assert sorted(paths(pol)) == sorted([str(outside), str(root / "plain.log"), str(root / "dist")])
    assert [m.origin for m in pol.masks if m.path == str(outside)] == [str(root / "cred.link")]


def test_a_walked_entry_naming_home_is_never_masked(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    pol = build(str(tmp_path), [Entry(str(home), True, IGNORED, "ignored", walked=True)], allow(), home=str(home))
    assert paths(pol) == []


# --- the backend's mask limit ---------------------------------------------------------------------------


def tree(root, *rels: str) -> None:
    for rel in rels:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x")


def blocked(root, *rels: str) -> list[Entry]:
    return [Entry(str(root / r), False, EXPLICIT, "block") for r in rels]


def test_under_the_limit_nothing_changes(tmp_path):
    tree(tmp_path, "a/x", "a/y")
    pol = build(str(tmp_path), blocked(tmp_path, "a/x", "a/y"), allow(), limit=2)
    assert paths(pol) == [f"{tmp_path}/a/x", f"{tmp_path}/a/y"] and not pol.capped


def test_over_the_limit_a_directory_with_nothing_readable_is_hidden_whole_first(tmp_path):
    tree(tmp_path, "logs/a.log", "logs/b.log", "data/s1", "data/s2", "data/README")
    entries = blocked(tmp_path, "logs/a.log", "logs/b.log", "data/s1", "data/s2")
    pol = build(str(tmp_path), entries, allow(), limit=3)
    assert paths(pol) == [f"{tmp_path}/data/s1", f"{tmp_path}/data/s2", f"{tmp_path}/logs"]
    assert pol.masks[-1].note.startswith("collapsed") and pol.masks[-1].layer == EXPLICIT
    assert {m.path for m in pol.capped} == {f"{tmp_path}/logs/a.log", f"{tmp_path}/logs/b.log"}
    assert not any(w.kind == "capped" for w in pol.warnings)  # nothing readable was lost: no warning


def test_then_the_directory_holding_most_masks_is_hidden_whole_and_said_loudly(tmp_path):
    tree(tmp_path, "data/README", *(f"data/s{i}" for i in range(5)), "other/x", "other/keep")
    entries = blocked(tmp_path, *(f"data/s{i}" for i in range(5)), "other/x")
    pol = build(str(tmp_path), entries, allow(), limit=2)
    assert paths(pol) == [f"{tmp_path}/data", f"{tmp_path}/other/x"]
    assert pol.masks[0].note.startswith("widened: over the mask limit") and "5 hidden paths" in pol.masks[0].reason
    assert len(pol.capped) == 5
    assert [w.kind for w in pol.warnings] == ["capped"] and "data" not in pol.warnings[0].message


def test_masks_spread_over_many_directories_widen_to_their_nearest_common_directory(tmp_path):
    tree(tmp_path, *(f"pkg/p{i}/{n}" for i in range(4) for n in ("secret", "src")), "top")
    pol = build(str(tmp_path), blocked(tmp_path, *(f"pkg/p{i}/secret" for i in range(4)), "top"), allow(), limit=2)
    assert paths(pol) == [f"{tmp_path}/pkg", f"{tmp_path}/top"]


def test_a_kept_path_inside_a_capped_directory_is_reported(tmp_path):
    tree(tmp_path, "d/.claude/settings.json", "d/a", "d/b", "d/c")
    entries = [*blocked(tmp_path, "d/a", "d/b", "d/c"), Entry(f"{tmp_path}/d/.claude", True, IGNORED, "ignored")]
    pol = build(str(tmp_path), entries, allow(".claude/"), limit=1)
    assert paths(pol) == [f"{tmp_path}/d"]
    assert any(w.kind == "allowed-but-hidden" and ".claude" in w.message for w in pol.warnings)


def test_over_the_limit_with_nothing_to_widen_is_refused(tmp_path):
    tree(tmp_path, "a", "b", "c")
    with pytest.raises(PolicyError, match="more than the backend can mount"):
        build(str(tmp_path), blocked(tmp_path, "a", "b", "c"), allow(), limit=2)
    home = tmp_path / "home"
    tree(home, ".x", ".y")
    globals_ = [Entry(str(home / n), False, GLOBAL, "g") for n in (".x", ".y")]
    with pytest.raises(PolicyError, match="max_masks"):
        build(str(tmp_path / "proj"), globals_, allow(), home=str(home), limit=1)


# --- build outputs: readable and writable, secret-looking names inside stay hidden ----------------------------


def _outputs(*texts: str) -> PatternSet:
    return PatternSet([Pattern(t, Source(OUTPUT, name="build output")) for t in texts])


def test_secret_looking_names_inside_build_outputs_stay_hidden(tmp_path):
    root = str(tmp_path)
    for rel in ("dist/app.js", "dist/.env.production", "dist/assets/server.KEY", "dist/secrets/a", "dist/ok/x.js"):
        os.makedirs(os.path.dirname(f"{root}/{rel}"), exist_ok=True)
        open(f"{root}/{rel}", "w").close()
    entries = [Entry(f"{root}/dist", True, IGNORED, "ignored by git")]
    pol = build(root, entries, _outputs("dist/"), realpath=identity, secret=profiles.secret_name)
    assert [k.path for k in pol.kept] == [f"{root}/dist"]
    assert paths(pol) == [f"{root}/dist/.env.production", f"{root}/dist/assets/server.KEY", f"{root}/dist/secrets"]
    assert "secret-looking name (.env*) inside build output dist/" in pol.masks[0].reason
    # without the name check (an old policy) the directory is simply readable: this is what the check adds
    assert paths(build(root, entries, _outputs("dist/"), realpath=identity)) == []


def test_a_persons_allow_keeps_a_secret_looking_name_in_a_build_output(tmp_path):
    root = str(tmp_path)
    os.makedirs(f"{root}/dist")
    open(f"{root}/dist/token-secret.js", "w").close()
    pats = _outputs("dist/").patterns + [Pattern("dist/token-secret.js", Source(PROJECT, ".ai-sandbox.toml", 2))]
    pol = build(root, [Entry(f"{root}/dist", True, IGNORED, "i")], PatternSet(pats), secret=profiles.secret_name)
    assert paths(pol) == []


def test_a_build_output_with_a_secret_looking_name_is_hidden_and_an_unlistable_one_whole(tmp_path):
    root = str(tmp_path)
    entries = [Entry(f"{root}/.env.log", False, IGNORED, "i"), Entry(f"{root}/out", True, IGNORED, "i")]
    os.makedirs(f"{root}/out")

    def scandir(path: str) -> list[tuple[str, bool]]:
        raise PermissionError(path)

    pol = build(
        root, entries, _outputs("*.log", "out/"), realpath=identity, secret=profiles.secret_name, scandir=scandir
    )
    assert paths(pol) == [f"{root}/.env.log", f"{root}/out"] and pol.kept == []
    assert any("cannot list" in w.message for w in pol.warnings)


def test_secret_names_are_narrow():
    for name in (
        ".env",
        ".ENV.local",
        ".envrc",
        "prod.tfvars",
        "id_ed25519",
        "db-credentials.json",
        "a.p12",
        "secrets",
    ):
        assert profiles.secret_name(name), name
    for name in (
        "app.js",
        "password-reset.3f2a.js",
        "secret-santa.js",
        "tokenizer.js",
        "environment.ts",
        ".env.example",
    ):
        assert profiles.secret_name(name) is None, name


def test_a_build_output_name_inside_a_secret_looking_directory_stays_hidden(tmp_path):
    """`secrets/*` with `!secrets/.gitkeep`: git lists secrets/logs/ on its own, and `logs/` is a build output."""
    root = str(tmp_path)
    os.makedirs(f"{root}/secrets/logs")
    entries = [Entry(f"{root}/secrets/logs", True, IGNORED, "i"), Entry(f"{root}/secrets/app.log", False, IGNORED, "i")]
    pol = build(root, entries, _outputs("logs/", "*.log"), realpath=identity, secret=profiles.secret_name)
    assert paths(pol) == [f"{root}/secrets/app.log", f"{root}/secrets/logs"] and pol.kept == []


def test_a_build_output_name_linking_out_of_the_project_is_not_kept(tmp_path):
    root = str(tmp_path / "p")
    os.makedirs(root)
    (tmp_path / "outside.txt").write_text("x")
    os.symlink(tmp_path / "outside.txt", f"{root}/app.log")
    entries = [Entry(f"{root}/app.log", False, IGNORED, "i")]
    pol = build(root, entries, _outputs("*.log"), secret=profiles.secret_name)
    assert paths(pol) == [str(tmp_path / "outside.txt")] and pol.kept == []


def test_the_cap_orders_both_widening_steps_by_what_collapsing_left():
    """Step 3's order (deepest first, then most masks below) is taken before step 2 widens anything, as it
    always was: a rewrite that re-sorted after step 2 hid /r/c/y whole too (found comparing 3,000 random
    trees against the old code: 23 differed)."""
    files = ["a/a/b/y", "a/a/w.env", "a/a/z", "a/b/b/y", "a/c/b/y", "b/a/b/b/y", "b/a/c/a/x", "b/a/w.env",
             "b/b/a/a/z", "b/b/z", "b/c/a/a/x", "b/c/b/z", "b/y", "b/z", "c/c/b/w.env", "c/c/c/a/w.env",
             "c/c/c/b/x", "c/y"]  # fmt: skip
    listing: dict[str, set[str]] = {}
    for f in files:
        parts = f.split("/")
        for i in range(len(parts)):
            listing.setdefault("/".join(["/r", *parts[:i]]), set()).add(parts[i])
    entries = [Entry(f"/r/{f}", False, IGNORED, "ignored") for f in files]
    pol = build("/r", entries, allow(), listdir=lambda d: sorted(listing.get(d, ())), realpath=lambda p: p, limit=5)
    assert [(m.path, m.note) for m in pol.masks] == [
        ("/r/a", "widened: over the mask limit of 5"),
        ("/r/b", "widened: over the mask limit of 5"),
        ("/r/c/c", "widened: over the mask limit of 5"),
        ("/r/c/y", ""),
    ]


def test_a_link_changed_while_the_launch_resolves_it_refuses_the_launch_in_one_line():
    """os.path.realpath raises when a link is swapped between its lstat and its readlink (EINVAL: a red team's
    helper swapped one in a loop outside during launches, which ended in `internal error`): the launch is refused
    with the path named, as for any rule it cannot keep."""

    def swapped(path: str) -> str:
        raise OSError(22, "Invalid argument", path)

    with pytest.raises(PolicyError) as e:
        build(ROOT, [Entry(f"{ROOT}/conf/x.pem", False, EXPLICIT, "block")], allow(), realpath=swapped)
    assert f"{ROOT}/conf/x.pem" in str(e.value)
    assert "\n" not in str(e.value)
