"""state.py without a sandbox: the record's bytes (and the first, path-only format), check/record/forget round
trips on a throwaway tree, the index of roots and launch directories, exemptions by a pattern's origin, and
the sessions' logs of moved paths. Policies are built directly from masks; XDG_STATE_HOME is a temp dir.
(tests/unit/test_record.py covers forged provenance text and the first cases of moves and other roots.)"""

from __future__ import annotations

import os
import subprocess

import pytest

from ai_sandbox import state
from ai_sandbox.errors import PolicyError
from ai_sandbox.patterns import BUILT_IN, DEPENDENCY, OUTPUT, PROFILE, PROJECT, USER, Origin, Pattern, Source
from ai_sandbox.policy import CRYPT, EXPLICIT, GLOBAL, IGNORED, UNHIDDEN, How, Kept, Mask, Policy


@pytest.fixture
def env(tmp_path):
    return {"XDG_STATE_HOME": str(tmp_path / "state"), "HOME": str(tmp_path / "home")}


@pytest.fixture
def root(tmp_path):
    """A project: .env, config/master.key, secrets/{a,b}, src/app.py."""
    base = tmp_path / "p"
    for rel in (".env", "config/master.key", "secrets/a", "secrets/b", "src/app.py"):
        (base / rel).parent.mkdir(parents=True, exist_ok=True)
        (base / rel).write_text(rel)
    return str(base)


def _policy(root: str, *rels: str, kept: tuple[Kept, ...] = ()) -> Policy:
    """Masks for rels (a trailing / hides a directory), as the rules would have asked."""
    masks = [Mask(f"{root}/{r.rstrip('/')}", r.endswith("/"), IGNORED, "git-ignored") for r in rels]
    return Policy(root=root, in_git=True, masks=masks, kept=list(kept))


def _id(path: str) -> bytes:
    st = os.lstat(path)
    return b"%d:%d" % (st.st_dev, st.st_ino)


def _launch(policy: Policy, env, cwd: str = "") -> state.Record:
    rec = state.check(policy, env, cwd or policy.root)
    state.record(rec)
    return rec


def _dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


# --- the record's bytes ---------------------------------------------------------------------------------------


def test_the_record_holds_each_hidden_path_with_its_directory_id(root, env):
    rec = state.check(_policy(root, ".env", "config/master.key", "gone/x"), env, root)
    assert rec.path == state.record_path(env, root) and not rec.unchanged
    assert state._entries(rec.content) == [
        (f"{root}/.env", _id(root)),
        (f"{root}/config/master.key", _id(f"{root}/config")),
        (f"{root}/gone/x", b"-"),  # its directory does not exist: no id
    ]
    own = [_id(f"{root}/.env"), _id(f"{root}/config/master.key"), b"-"]
    assert rec.content == state.MAGIC + b"".join(
        os.fsencode(p) + b"\0" + i + b"\0" + o + b"\0" + state.IGNORED_ONLY + b"\0"
        for (p, i), o in zip(state._entries(rec.content), own, strict=True)
    )  # each with its own id, hidden by git's ignores alone (an allowlist may keep it later)
    state.record(rec)
    with open(rec.path, "rb") as f:
        assert f.read() == rec.content
    assert state.load(rec.path) == [f"{root}/.env", f"{root}/config/master.key", f"{root}/gone/x"]
    assert state._content([], {}) == state.MAGIC  # nothing hidden: the header alone


def test_names_with_newlines_and_non_utf8_bytes_round_trip(tmp_path, env):
    base = tmp_path / os.fsdecode(b"caf\xe9")
    odd = ["new\nline", os.fsdecode(b"k\xffy"), "tab\tbed"]
    for rel in odd:
        (base / rel).parent.mkdir(parents=True, exist_ok=True)
        (base / rel).write_text("x")
    r = str(base)
    rec = _launch(_policy(r, *odd), env)
    assert state.load(rec.path) == [f"{r}/{o}" for o in odd]
    assert state.check(_policy(r, *odd), env, r).unchanged
    with pytest.raises(PolicyError) as e:
        state.check(_policy(r, odd[0], odd[2]), env, r)
    assert os.fsdecode(b"k\xffy") in e.value.message


def test_the_first_format_holds_paths_only(root, env):
    assert state._entries(f"{root}/.env\0{root}/secrets/a\0".encode()) == [
        (f"{root}/.env", b""),
        (f"{root}/secrets/a", b""),
    ]
    assert state._entries(b"") == [] and state._entries(None) == [] and state._entries(state.MAGIC) == []
    path = state.record_path(env, root)
    os.makedirs(os.path.dirname(path))
    with open(path, "wb") as f:
        f.write(f"{root}/.env\0{root}/secrets/a\0{root}/no-such\0".encode())
    rec = state.check(_policy(root, ".env", "secrets/"), env, root)  # both still hidden: no refusal
    assert not rec.unchanged  # rewritten in the current format once recorded
    with pytest.raises(PolicyError, match="secrets/a was hidden at the last launch"):
        state.check(_policy(root, ".env", "no-such"), env, root)


def test_masks_merged_for_a_limit_are_recorded_as_the_paths_inside(root, env):
    capped = [Mask(f"{root}/secrets/{n}", False, IGNORED, "git-ignored") for n in "ab"]
    merged = Policy(
        root=root,
        in_git=True,
        masks=[
            Mask(f"{root}/secrets", True, IGNORED, "git-ignored", how=How.CAPPED, detail="2"),
            Mask(f"{root}/config", True, IGNORED, "git-ignored", how=How.COLLAPSED),
            Mask(f"{root}/.env", False, IGNORED, "git-ignored"),
        ],
        capped=capped,
    )
    rec = _launch(merged, env)
    assert state.load(rec.path) == [f"{root}/.env", f"{root}/secrets/a", f"{root}/secrets/b"]
    # a launch under the limit asks for the same paths one by one: nothing un-hidden, nothing to rewrite
    assert state.check(_policy(root, ".env", "secrets/a", "secrets/b"), env, root).unchanged


# --- check, record, forget ------------------------------------------------------------------------------------------


def test_the_same_masks_pass_and_the_record_is_not_rewritten(root, env):
    rec = _launch(_policy(root, ".env", "secrets/"), env)
    assert rec.index  # a root never seen: the index learns it
    before = os.stat(rec.path)
    again = state.check(_policy(root, ".env", "secrets/"), env, root)
    assert again.unchanged and again.index == "" and again.settled == []
    state.record(again)
    after = os.stat(rec.path)
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    assert state.check(_policy(root, ".env", "secrets/", "src/"), env, root).unchanged is False  # hides more: fine


def test_a_rule_change_that_unhides_an_existing_path_refuses(root, env):
    _launch(_policy(root, ".env", "secrets/", "config/master.key"), env)
    with pytest.raises(PolicyError) as e:
        state.check(_policy(root, ".env"), env, root)
    msg = e.value.message
    assert msg.startswith(f"{root}/secrets, {root}/config/master.key was hidden at the last launch"), msg
    assert "a rule changed" in msg and "ai-sandbox accept" in e.value.hint
    assert state.findings(_policy(root, ".env"), env, root) == [f"{root}/secrets", f"{root}/config/master.key"]
    (notice,) = state.unhidden_notices(_policy(root, ".env", "secrets/"), env, root)
    assert notice.kind == UNHIDDEN and notice.path == f"{root}/config/master.key"
    # hidden by an enclosing directory instead: not un-hidden
    state.check(_policy(root, ".env", "secrets/", "config/"), env, root)
    # gone: nothing to read, nothing to refuse
    os.remove(f"{root}/config/master.key")
    for name in "ab":
        os.remove(f"{root}/secrets/{name}")
    os.rmdir(f"{root}/secrets")
    assert state.findings(_policy(root, ".env"), env, root) == []


def test_forget_starts_the_record_anew(root, env):
    assert state.forget(env, root, root) == 0  # nothing recorded yet
    _launch(_policy(root, ".env", "secrets/"), env)
    with pytest.raises(PolicyError):
        state.check(_policy(root), env, root)
    assert state.forget(env, root, root) == 1
    with open(state.record_path(env, root), "rb") as f:
        assert f.read() == state.MAGIC
    rec = _launch(_policy(root), env)  # accepted
    assert state.check(_policy(root), env, root).unchanged and state.load(rec.path) == []
    _launch(_policy(root, ".env"), env)
    with pytest.raises(PolicyError, match=r"/\.env was hidden"):
        state.check(_policy(root), env, root)  # recorded again after the accept


# --- a directory above a hidden path moved ------------------------------------------------------------------------


def test_a_moved_directory_is_found_by_inode_wherever_it_went(root, env):
    _launch(_policy(root, "config/master.key", "secrets/a"), env)
    os.makedirs(f"{root}/src/deep")
    os.rename(f"{root}/config", f"{root}/src/deep/renamed")
    with pytest.raises(PolicyError) as e:
        state.check(_policy(root, "secrets/a"), env, root)
    assert f"{root}/config/master.key (now {root}/src/deep/renamed/master.key)" in e.value.message
    assert "a directory above it was moved" in e.value.message
    # hidden where it is now, by any rule: nothing readable
    state.check(_policy(root, "secrets/a", "src/deep/renamed/master.key"), env, root)
    state.check(_policy(root, "secrets/a", "src/"), env, root)  # the walk does not enter a hidden directory


def test_a_directory_replaced_by_another_of_the_same_name_is_not_the_recorded_one(root, env):
    _launch(_policy(root, "config/master.key"), env)
    os.rename(f"{root}/config", f"{root}/old")
    os.mkdir(f"{root}/config")
    with open(f"{root}/config/master.key", "w") as f:
        f.write("decoy")
    # the same masks, yet the recorded directory now stands at old/: its master.key is readable there
    with pytest.raises(PolicyError, match=r"config/master.key \(now .*/old/master.key\)"):
        state.check(_policy(root, "config/master.key"), env, root)


def test_an_inode_is_the_recorded_directory_only_on_the_recorded_device(root, env):
    st = os.lstat(f"{root}/src")
    with open(f"{root}/src/master.key", "w") as f:
        f.write("key")
    path = state.record_path(env, root)
    os.makedirs(os.path.dirname(path))
    for dev, refused in ((st.st_dev + 1, False), (st.st_dev, True)):
        with open(path, "wb") as f:  # config/ was recorded with src/'s inode number
            f.write(state.MAGIC + f"{root}/config/master.key\0{dev}:{st.st_ino}\0-\0i\0".encode())
        found = state.findings(_policy(root, "config/master.key"), env, root)
        assert found == ([f"{root}/config/master.key (now {root}/src/master.key)"] if refused else []), dev


# --- the sessions' logs of what moved away -------------------------------------------------------------------------


def _moved_out(root: str, env, tmp_path) -> Policy:
    """secrets/ held hidden paths; a session moved it out of the project."""
    _launch(_policy(root, "secrets/a", "secrets/b", ".env"), env)
    os.rename(f"{root}/secrets", str(tmp_path / "stash"))
    return _policy(root, "secrets/a", "secrets/b", ".env")


def _log(env, root: str, pid: int, data: bytes) -> str:
    path = f"{state.moved_log(env, root)}.{pid}"
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)
    return path


def test_a_path_moved_out_of_the_project_refuses_only_when_a_session_logged_it(root, env, tmp_path):
    policy = _moved_out(root, env, tmp_path)
    assert state.findings(policy, env, root) == []  # no session saw it move (moved outside of any session)
    other = _log(env, root, _dead_pid(), f"{root}/src\0".encode())
    assert state.findings(policy, env, root) == []  # a session logged something else
    above = _log(env, root, _dead_pid(), f"{root}/secrets\0".encode())  # a directory above both
    with pytest.raises(PolicyError) as e:
        state.check(policy, env, root)
    assert f"{root}/secrets/a, {root}/secrets/b was hidden" in e.value.message
    assert "moved away during a session" in e.value.message
    os.remove(above)
    _log(env, root, _dead_pid(), f"{root}/secrets/b\0".encode())
    assert state.findings(policy, env, root) == [f"{root}/secrets/b"]
    assert os.path.exists(other)  # a check alone settles nothing


def test_a_log_of_star_means_any_path_may_have_moved(root, env, tmp_path):
    policy = _moved_out(root, env, tmp_path)
    _log(env, root, _dead_pid(), b"*\0")
    assert state.findings(policy, env, root) == [f"{root}/secrets/a", f"{root}/secrets/b"]
    assert [log.paths for log in state._all_logs(env)] == [None]


def test_only_the_logs_of_ended_sessions_are_settled_by_a_launch(root, env, tmp_path):
    _launch(_policy(root, ".env"), env)
    ended = _log(env, root, _dead_pid(), f"{root}/src\0".encode())
    running = _log(env, root, os.getpid(), f"{root}/src\0".encode())
    stray = state.moved_log(env, root) + ".notapid"
    with open(stray, "wb") as f:
        f.write(b"*\0")
    rec = state.check(_policy(root, ".env"), env, root)
    assert rec.settled == [ended]
    state.record(rec)
    assert not os.path.exists(ended) and os.path.exists(running) and os.path.exists(stray)
    assert [log.paths for log in state._all_logs(env)] == [{f"{root}/src"}]  # a stray name is no session's log
    state.forget(env, root, root)
    assert os.path.exists(running)


# --- a hidden path swapped in place: its own device and inode ------------------------------------------------------


def _swap(a: str, b: str) -> None:
    """What renameat2(RENAME_EXCHANGE) does, in three renames."""
    os.rename(a, a + ".swap")
    os.rename(b, a)
    os.rename(a + ".swap", b)


def test_the_record_holds_each_masks_own_id(root, env):
    rec = state.check(_policy(root, ".env", "secrets/"), env, root)
    assert state._rows(rec.content) == [
        (f"{root}/.env", _id(root), _id(f"{root}/.env"), state.IGNORED_ONLY),
        (f"{root}/secrets", _id(root), _id(f"{root}/secrets"), state.IGNORED_ONLY),
    ]


def test_a_hidden_directory_swapped_with_a_readable_one_refuses_where_a_session_logged_it(root, env):
    """make fuzz: a nested clone's session (which does not hide the project's files) swapped the project's hidden
    secrets/ with its src/: the recorded path is there and hidden again, but what it held is readable as src/."""
    _launch(_policy(root, "secrets/"), env)
    _swap(f"{root}/secrets", f"{root}/src")
    assert state.findings(_policy(root, "secrets/"), env, root) == []  # no session did it: yours
    _log(env, root, _dead_pid(), f"{root}/secrets\0".encode())  # the clone's watcher noted it
    assert state.findings(_policy(root, "secrets/"), env, root) == [f"{root}/secrets (now {root}/src)"]
    _swap(f"{root}/secrets", f"{root}/src")
    _swap(f"{root}/secrets/a", f"{root}/secrets/b")  # into another hidden place: still hidden
    assert state.findings(_policy(root, "secrets/"), env, root) == []


def test_a_hidden_file_swapped_with_a_readable_one_refuses_where_a_session_logged_it(root, env):
    _launch(_policy(root, ".env"), env)
    os.rename(f"{root}/.env", f"{root}/src/env.txt")
    with open(f"{root}/.env", "w") as f:
        f.write("decoy")
    _log(env, root, _dead_pid(), f"{root}/.env\0".encode())
    assert state.findings(_policy(root, ".env"), env, root) == [f"{root}/.env (now {root}/src/env.txt)"]


def test_a_hidden_file_replaced_is_refused_only_where_a_session_logged_it_and_it_is_found_nowhere(root, env):
    """An editor saving .env through a temp file and a rename gives it a new inode: yours, not a session's."""

    def save(text: str) -> None:  # a new file, renamed over the old one (which is gone then)
        with open(f"{root}/.env.tmp", "w") as f:
            f.write(text)
        os.rename(f"{root}/.env.tmp", f"{root}/.env")

    _launch(_policy(root, ".env"), env)
    save("edited")
    assert state.findings(_policy(root, ".env"), env, root) == []
    _launch(_policy(root, ".env"), env)
    save("edited again")
    _log(env, root, _dead_pid(), f"{root}/.env\0".encode())  # a session that did not hide it noted it
    assert state.findings(_policy(root, ".env"), env, root) == [f"{root}/.env"]


@pytest.mark.parametrize("where", ["inside", "outside"])
def test_a_replaced_hidden_file_found_hidden_under_another_name_refuses_when_it_has_more_names(root, env, where):
    """Fourteenth red team: a nested clone's session hard-linked the project's `.env` to `a.key` (hidden too), moved
    `.env` to a readable place (in the project or out of it) and put a decoy at its name. The search met `a.key`
    first, took the file for found and hidden, and the next launch showed it at its other name."""
    policy = _policy(root, ".env", "a.key")
    _launch(policy, env)
    os.link(f"{root}/.env", f"{root}/a.key")
    far = f"{root}/src/notes.txt" if where == "inside" else f"{os.path.dirname(root)}/far"
    os.rename(f"{root}/.env", far)
    with open(f"{root}/.env", "w") as f:
        f.write("decoy")
    _log(env, root, _dead_pid(), f"{root}/.env\0".encode())
    assert state.findings(policy, env, root) == [f"{root}/.env (now {root}/a.key, which has another name)"]


# --- the index of roots and launch directories ----------------------------------------------------------------------


def test_the_index_round_trips_odd_names(tmp_path):
    roots = {"/p": b"1:2", "/n\nl": b"3:4", os.fsdecode(b"/caf\xe9"): b"-"}
    cwds = {"/p/sub": "/p", "/n\nl/x": "/n\nl"}
    covers = {"/p": {"/wt one", "/n\nl"}}
    data = state._Index(roots, cwds, covers).dump()
    assert data.startswith(b"root\0/caf\xe9\0-\0") and data.count(b"\0") == 3 * 7  # sorted (kind, key, value)
    (tmp_path / "index").write_bytes(data)
    assert state._load_index(str(tmp_path / "index")) == state._Index(roots, cwds, covers)
    assert state._load_index(str(tmp_path / "none")) == state._Index()


def test_the_last_root_is_the_nearest_launch_directory_above():
    cwds = {"/p": "/p", "/p/lib": "/p/lib", "/q/a": "/q"}
    assert state._last_root(cwds, "/p/lib/x/y") == "/p/lib"
    assert state._last_root(cwds, "/p/libs") == "/p"  # a sibling named like it is not inside it
    assert state._last_root(cwds, "/q") is None


def test_which_other_roots_apply():
    roots = {"/a": b"1:1", "/a/b/c": b"1:3", "/ab": b"1:5", "/x": b"1:4", "/y": b"-", "/a/b": b"1:4", "/w": b"1:6"}
    index = state._Index(roots, {}, {"/w": {"/a/b/c"}})
    # the first launch at /a/b: the whole records of the roots above and below it, and of one that is this
    # directory by inode; and what a root whose launches covered a checkout inside it hid in it
    assert state._related(index, "/a/b", b"1:4", "/a/b", True, anywhere=False) == {
        "/a": (), "/a/b/c": (), "/x": (), "/w": ("/a/b",)
    }  # fmt: skip
    # and every other record, for what moved into this root since (a clone carried out of its project)
    assert state._related(index, "/a/b", b"1:4", "/a/b", True)["/ab"] == ("/a/b",)
    assert state._related(index, "/a", b"-", "/a", True, anywhere=False) == {
        "/a/b/c": (),
        "/a/b": (),
        "/w": ("/a",),
    }  # fmt: skip  ("-": no inode)
    # a known root: what every root whose trees overlap its own hid in them, and the root the last launch from
    # here used, whole
    index.cwds = {"/a/b": "/a"}
    assert state._related(index, "/a/b", b"1:4", "/a/b/c/d", False) == {"/a": (), "/a/b/c": ("/a/b",), "/w": ("/a/b",)}
    index.cwds = {"/a/b": "/a/b"}
    assert state._related(index, "/a/b", b"1:4", "/a/b", False) == {
        "/a": ("/a/b",), "/a/b/c": ("/a/b",), "/w": ("/a/b",)
    }  # fmt: skip
    # with the other checkouts this launch covers: their records, and what others hid in them
    assert state._related(state._Index(roots), "/a/b", b"1:4", "/a/b", False, ("/y",))["/y"] == ("/a/b", "/y")
    assert "/ab" not in state._related(index, "/a/b", b"1:4", "/a/b", False)  # a name that only starts alike


def test_record_and_forget_keep_the_index(tmp_path, env):
    outer = tmp_path / "p"
    (outer / "sub" / "deep").mkdir(parents=True)
    o, s = str(outer), str(outer / "sub")
    _launch(_policy(o), env, o)
    _launch(_policy(o), env, f"{s}/deep")  # from deep inside, the outer root
    index = state._index_path(env)
    known = state._load_index(index)
    assert known.roots == {o: _id(o)} and known.cwds == {o: o}  # /p covers sub/deep already: not written again
    _launch(_policy(s), env, s)  # `git init sub`, accepted
    known = state._load_index(index)
    assert known.roots == {o: _id(o), s: _id(s)} and known.cwds == {o: o, s: s}
    before = os.stat(index).st_mtime_ns
    state.record(state.check(_policy(s), env, s))
    assert os.stat(index).st_mtime_ns == before  # nothing new: not rewritten
    with open(index, "ab") as f:
        f.write(f"cwd\0{s}/deep\0{o}\0".encode())  # a launch from sub/deep once used the outer root
    assert state.forget(env, s, f"{s}/deep") == 2  # sub's own record, and the outer root's, last used from there
    assert state._load_index(index).cwds == {o: o, s: s}  # launch directories inside sub belong to sub now


# --- exemptions: decided by who wrote the allow pattern, never by its text -----------------------------------------


def _kept(path: str, is_dir: bool, origin: Origin) -> Kept:
    """Kept by a rule whose text and name read like a profile's, whoever wrote it."""
    name = os.path.basename(path)
    return Kept(path, is_dir, "git-ignored", Pattern(name, Source(origin, name=f"{name} (profile claude)")))


@pytest.mark.parametrize(("origin", "exempt"), [(BUILT_IN, True), (PROFILE, True), (USER, False), (PROJECT, False)])
def test_a_path_kept_readable_is_exempt_only_when_code_keeps_it(root, env, origin, exempt):
    _launch(_policy(root, ".env", "secrets/"), env)
    kept = (_kept(f"{root}/.env", False, origin), _kept(f"{root}/secrets", True, origin))
    found = state.findings(_policy(root, kept=kept), env, root)
    assert found == ([] if exempt else [f"{root}/.env", f"{root}/secrets"])


@pytest.mark.parametrize("origin", [DEPENDENCY, OUTPUT, BUILT_IN, PROFILE])
def test_a_kept_directory_exempts_itself_not_what_was_hidden_inside(root, env, origin):
    """Whichever allowlist of ai-sandbox's keeps a directory: git lists it whole only because a session made it
    so (F4: `.gemini/` ignored and `git rm --cached`; `out/`'s one tracked file removed)."""
    _launch(_policy(root, "secrets/", "config/master.key"), env)
    kept = (_kept(f"{root}/secrets", True, origin), _kept(f"{root}/config", True, origin))
    assert state.findings(_policy(root, kept=kept), env, root) == [f"{root}/config/master.key"]


@pytest.mark.parametrize("origin", [DEPENDENCY, OUTPUT, BUILT_IN, PROFILE])
@pytest.mark.parametrize("layer", [EXPLICIT, CRYPT, GLOBAL])
def test_a_path_a_block_hid_is_never_exempt_because_an_allowlist_keeps_it_now(root, env, origin, layer):
    """Red team 9: `block = ["app.log", "dist/"]` over git-ignored build outputs; the session deleted the block and
    the next launch showed both, kept by the build-output allowlist. What git's ignores alone hid stays exempt (an
    agent's own directory, hidden for another agent)."""
    blocked = [Mask(f"{root}/secrets", True, layer, "a block"), Mask(f"{root}/.env", False, IGNORED, "git-ignored")]
    rec = _launch(Policy(root=root, in_git=True, masks=blocked), env)
    assert state._blocked(rec.content) == {f"{root}/secrets"}
    kept = (_kept(f"{root}/secrets", True, origin), _kept(f"{root}/.env", False, origin))
    assert state.findings(_policy(root, kept=kept), env, root) == [f"{root}/secrets"]


def test_a_record_of_the_second_format_counts_every_path_as_blocked(root, env):
    """Tenth red team: read as "ignored only", a format 2 record let the first launch after an upgrade exempt a
    build output whose block a session had deleted."""
    path = state.record_path(env, root)
    os.makedirs(os.path.dirname(path))
    with open(path, "wb") as f:
        f.write(state.MAGIC_2 + f"{root}/.env\0{_id(root).decode()}\0{root}/secrets\0-\0".encode())
    assert state._entries(state._read(path)) == [(f"{root}/.env", _id(root)), (f"{root}/secrets", b"-")]
    assert state._blocked(state._read(path)) == {f"{root}/.env", f"{root}/secrets"}
    with pytest.raises(PolicyError, match="secrets was hidden at the last launch"):
        state.check(_policy(root, ".env"), env, root)
    kept = (_kept(f"{root}/secrets", True, OUTPUT),)  # kept by an allowlist now: not exempt either
    assert state.findings(_policy(root, ".env", kept=kept), env, root) == [f"{root}/secrets"]
    assert not state.check(_policy(root, ".env", "secrets/"), env, root).unchanged  # rewritten as the third


# --- the global blocks outside the project: one record for the user ------------------------------------------------


def _aws(tmp_path) -> tuple[str, str]:
    """~/.aws/credentials, blocked by the user's config; and a second project."""
    home = tmp_path / "home"
    (home / ".aws").mkdir(parents=True)
    (home / ".aws" / "credentials").write_text("k")
    other = tmp_path / "other"
    other.mkdir()
    return str(home / ".aws" / "credentials"), str(other)


def _with_global(root: str, path: str, *rels: str) -> Policy:
    policy = _policy(root, *rels)
    policy.masks.append(Mask(path, False, GLOBAL, "block (config.toml:1)"))
    return policy


def test_a_global_block_outside_the_project_is_the_users_record_not_the_projects(root, env, tmp_path):
    creds, other = _aws(tmp_path)
    rec = _launch(_with_global(root, creds, ".env"), env)
    assert state.load(rec.path) == [f"{root}/.env"]
    assert state.load(state.global_record_path(env)) == [creds]
    # inside the project, a global block is the project's: another project does not hide it
    inner = _with_global(root, f"{root}/config/master.key", ".env")
    assert state._recorded(inner) == ([f"{root}/.env", f"{root}/config/master.key"], [], {f"{root}/config/master.key"})


def test_a_global_block_moved_beside_itself_refuses_in_every_project(root, env, tmp_path):
    """F1: a session renames ~/.aws (visible, its parent writable): found by its inode in the home's listing,
    also by a project that never launched."""
    creds, other = _aws(tmp_path)
    _launch(_with_global(root, creds), env)
    home = os.path.dirname(os.path.dirname(creds))
    os.rename(os.path.dirname(creds), f"{home}/.aws_old")
    for project in (root, other):
        with pytest.raises(PolicyError) as e:
            state.check(_policy(project), env, project)
        assert f"{creds} (now {home}/.aws_old/credentials)" in e.value.message


def test_a_launch_whose_root_holds_a_global_block_keeps_it_in_the_users_record(root, env, tmp_path):
    """Fifteenth red team: a launch from the home itself (no repository: the home is its root) recorded
    ~/.aws/credentials as its own and wrote the user's record empty; its session moved ~/.aws aside, and every
    other project's next launch, with nothing recorded, showed ~/.aws_old/credentials."""
    creds, other = _aws(tmp_path)
    home = os.path.dirname(os.path.dirname(creds))
    _launch(_with_global(other, creds), env)
    _launch(_with_global(home, creds), env)
    assert state.load(state.global_record_path(env)) == [creds]
    os.rename(os.path.dirname(creds), f"{home}/.aws_old")
    with pytest.raises(PolicyError) as e:
        state.check(_policy(other), env, other)
    assert f"{creds} (now {home}/.aws_old/credentials)" in e.value.message


def test_a_global_block_moved_where_only_this_projects_rules_hide_it_refuses(root, env, tmp_path):
    """Sixteenth red team: a session moved ~/.aws into its project and ignored it there; the project's next launch
    found the directory hidden (by the project's own rules) and passed, and wrote the user's record anew: every other
    project's launch then showed ~/projQ/.aws/credentials. The user's record holds for every project: moved, the
    block is hidden still only where a global block hides its new place."""
    creds, other = _aws(tmp_path)
    _launch(_with_global(root, creds), env)
    os.rename(os.path.dirname(creds), f"{root}/.aws")
    policy = _with_global(root, creds, ".aws/")
    assert state.findings(policy, env, root) == [f"{creds} (now {root}/.aws/credentials)"]
    anywhere = _with_global(root, creds)  # a global block that hides it wherever it is
    anywhere.masks.append(Mask(f"{root}/.aws", True, GLOBAL, "block (config.toml:1)"))
    assert state.findings(anywhere, env, root) == []


def test_a_global_block_moved_far_refuses_when_any_projects_session_logged_it(root, env, tmp_path):
    creds, other = _aws(tmp_path)
    _launch(_with_global(root, creds), env)
    os.makedirs(tmp_path / "far")
    os.rename(os.path.dirname(creds), tmp_path / "far" / "aws")
    assert state.findings(_policy(other), env, other) == []  # moved outside any session: the user's own move
    _log(env, other, _dead_pid(), f"{os.path.dirname(creds)}\0".encode())  # a session of the other project
    for project in (root, other):
        assert state.findings(_policy(project), env, project) == [creds]


def test_a_log_that_says_any_counts_for_its_own_projects_paths_and_for_the_global_ones(root, env, tmp_path):
    creds, other = _aws(tmp_path)
    _launch(_with_global(root, creds, "secrets/a"), env)
    os.rename(f"{root}/secrets", tmp_path / "stash")
    os.rename(os.path.dirname(creds), tmp_path / "aws")
    _log(env, other, _dead_pid(), b"*\0")  # another project's session could not narrow its log
    assert state.findings(_policy(root), env, root) == [creds]  # it hid ~/.aws too; not this project's secrets/
    _log(env, root, _dead_pid(), b"*\0")
    assert sorted(state.findings(_policy(root), env, root)) == sorted([creds, f"{root}/secrets/a"])


def test_a_session_that_ended_before_the_record_was_written_moved_nothing_it_holds(root, env, tmp_path):
    """A log is final once its session ended: a record written after that already saw the world as the session
    left it. (Logs of other projects stay until those launch again; an old one must not refuse forever.)"""
    creds, other = _aws(tmp_path)
    old = _log(env, other, _dead_pid(), f"{os.path.dirname(creds)}\0".encode())
    os.utime(old, ns=(1, 1))
    _launch(_with_global(root, creds), env)
    os.rename(os.path.dirname(creds), tmp_path / "aws")
    assert state.findings(_policy(root), env, root) == []
    os.utime(old)  # the same log, from a session that ended after the record was written
    assert state.findings(_policy(root), env, root) == [creds]


def test_accept_starts_the_global_record_anew_too(root, env, tmp_path):
    creds, other = _aws(tmp_path)
    _launch(_with_global(root, creds), env)
    os.rename(os.path.dirname(creds), tmp_path / "home" / "aws2")
    assert state.findings(_policy(other), env, other)
    assert state.forget(env, other, other) == 1  # the global record applied; the project had none
    assert state.findings(_policy(other), env, other) == []
    assert state.load(state.global_record_path(env)) == []


def test_a_directory_flipped_back_after_the_launch_looked_refuses(root, env):
    """Thirty-third red team: a process outside the sandbox flipped config/ and a decoy in a loop. A launch looked
    (idents.py) while they were swapped, and its record check searched for the recorded config/ after the flip back:
    found where it was, hidden by the same rule, it passed, and the record learned the decoy; the next sessions hid
    the decoy's file while the agent read the real one. The recorded directory found at its own path when the look
    saw another there means it was being swapped: refused."""
    from ai_sandbox import idents

    policy = _policy(root, "config/master.key")
    _launch(policy, env)
    os.makedirs(f"{root}/decoy")
    with open(f"{root}/decoy/master.key", "w") as f:
        f.write("decoy")
    _swap(f"{root}/config", f"{root}/decoy")
    seen = idents.take(policy)  # the launch's look, while swapped
    _swap(f"{root}/config", f"{root}/decoy")  # and back, before the record check searches
    with pytest.raises(PolicyError, match="swapped while the launch looked"):
        state.check(policy, env, root, seen=seen)
    state.check(policy, env, root, seen=idents.take(policy))  # a look with the directories in place passes


def test_a_directory_flipped_while_the_record_searches_refuses(tmp_path, env, monkeypatch):
    """Thirty-third red team, as a user with firejail: the recorded directory was not found by the record's search,
    which listed x/ while a process outside had swapped it with y/, then y/ after the swap back: both listings showed
    y's entries, the moved directory was nowhere, and no session had logged it: passed, and the record learned the
    decoy. Each directory the search enters must be the one its parent listed (by inode): otherwise something is
    moving directories while the launch looks, and it refuses."""
    root = tmp_path / "p"
    (root / "config").mkdir(parents=True)
    (root / "config" / "master.key").write_text("key")
    (root / "x").mkdir()
    (root / "y").mkdir()
    policy = _policy(str(root), "config/master.key")
    _launch(policy, env)
    os.rename(root / "config", root / "x" / "config")  # moved, and hidden there by nothing
    os.mkdir(root / "config")  # a decoy at its path

    def flipped(real):
        def call(path, *a, **k):
            if isinstance(path, str) and path == str(root / "x"):
                _swap(str(root / "x"), str(root / "y"))  # while x/ is looked at, it is y's directory
                try:
                    return real(path, *a, **k)
                finally:
                    _swap(str(root / "x"), str(root / "y"))
            return real(path, *a, **k)

        return call

    monkeypatch.setattr(os, "scandir", flipped(os.scandir))
    monkeypatch.setattr(os, "open", flipped(os.open))
    with pytest.raises(PolicyError, match="master.key"):
        state.check(policy, env, str(root))
