"""watch.py without a sandbox: inotify event parsing from packed bytes, the session's moved log, when start()
forks at all, and the watch loop run in this process against a throwaway child (no fork of pytest)."""

from __future__ import annotations

import os
import signal
import struct
import subprocess
import sys
import threading

import pytest

from ai_sandbox import watch
from ai_sandbox.errors import UnavailableError
from ai_sandbox.policy import IGNORED, Mask, Policy

IN_CREATE, IN_DELETE, IN_MOVED_FROM, IN_MOVED_TO = 0x100, 0x200, 0x40, 0x80
IN_DELETE_SELF, IN_MOVE_SELF, IN_IGNORED, IN_Q_OVERFLOW = 0x400, 0x800, 0x8000, 0x4000
IN_ISDIR = 0x40000000


def _event(wd: int, mask: int, name: bytes = b"", cookie: int = 0, pad: int = 16) -> bytes:
    """One `struct inotify_event` as the kernel writes it: the name NUL-padded to a multiple of pad."""
    raw = name + b"\0" * ((-len(name) - 1) % pad + 1) if name else b""
    return struct.pack("iIII", wd, mask, cookie, len(raw)) + raw


def _events(data: bytes, by_wd: dict[int, str], known: list[str]) -> list[str] | None:
    r, w = os.pipe2(os.O_NONBLOCK)
    try:
        if data:
            os.write(w, data)
        return watch._events(r, by_wd, dict.fromkeys(known))
    finally:
        os.close(r)
        os.close(w)


# --- _events: which hidden paths a batch of inotify events may have touched ------------------------------


def test_events_name_the_hidden_paths_in_the_watched_directories():
    by_wd = {1: "/p", 2: "/p/config"}
    known = ["/p/.env", "/p/config/master.key"]
    batch = (
        _event(1, IN_MOVED_TO, b".env", cookie=7)
        + _event(1, IN_CREATE, b"README.md")  # not hidden: not a suspect
        + _event(2, IN_DELETE, b"master.key")
        + _event(9, IN_CREATE, b".env")  # a watch descriptor this watcher does not know
        + _event(2, IN_CREATE | IN_ISDIR, b"new")
    )
    assert _events(batch, by_wd, known) == ["/p/.env", "/p/config/master.key"]


def test_events_keep_the_order_and_repeats_and_read_names_of_any_length():
    long = b"n" * 200
    by_wd = {3: "/d"}
    known = ["/d/a", "/d/" + long.decode()]
    batch = _event(3, IN_MOVED_FROM, b"a", pad=4) + _event(3, IN_CREATE, long) + _event(3, IN_MOVED_TO, b"a")
    assert _events(batch, by_wd, known) == ["/d/a", "/d/" + long.decode(), "/d/a"]


def test_an_event_without_a_name_is_about_the_directory_itself_and_names_no_path():
    assert _events(_event(1, IN_CREATE), {1: "/p"}, ["/p"]) == []


def test_a_name_that_is_not_utf8_is_decoded_as_paths_are():
    name = b"s\xffcret"
    path = "/p/" + os.fsdecode(name)
    assert _events(_event(1, IN_DELETE, name), {1: "/p"}, [path]) == [path]


@pytest.mark.parametrize("mask", [IN_DELETE_SELF, IN_MOVE_SELF, IN_IGNORED, IN_Q_OVERFLOW])
def test_a_watched_directory_gone_or_an_overflow_means_check_everything(mask):
    wd = -1 if mask == IN_Q_OVERFLOW else 1
    batch = _event(1, IN_CREATE, b".env") + _event(wd, mask)
    assert _events(batch, {1: "/p"}, ["/p/.env"]) is None


def test_nothing_to_read_is_no_suspect_and_a_torn_event_is_not_read():
    assert _events(b"", {1: "/p"}, ["/p/.env"]) == []
    whole = _event(1, IN_CREATE, b".env")
    assert _events(whole + whole[:10], {1: "/p"}, ["/p/.env"]) == ["/p/.env"]


# --- _settle_log: the session's log of what moved ----------------------------------------------------------


def test_the_log_names_exactly_what_changed_and_goes_when_nothing_did(tmp_path):
    log = tmp_path / "hidden" / "k.moved.123"
    log.parent.mkdir()
    log.write_bytes(b"*\0")
    watch._settle_log(str(log), ["/p/a", "/p/b\nc", "/p/" + os.fsdecode(b"\xfe")])
    assert log.read_bytes() == b"/p/a\0/p/b\nc\0/p/\xfe\0"
    watch._settle_log(str(log), [])
    assert not log.exists()
    watch._settle_log(str(log), [])  # already gone: nothing to do, no error


def test_no_log_is_written_without_a_log_path_and_a_write_failure_leaves_any(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    watch._settle_log("", ["/p/a"])
    assert os.listdir(tmp_path) == []
    blocker = tmp_path / "file"
    blocker.write_text("")
    watch._settle_log(str(blocker / "log"), ["/p/a"])  # cannot be written: no exception, no file
    assert blocker.read_text() == ""


# --- start(): when it forks, and what it writes first --------------------------------------------------------


def _policy(root: str, *rels: str) -> Policy:
    return Policy(root=root, in_git=True, masks=[Mask(f"{root}/{r}", False, IGNORED, "git-ignored") for r in rels])


def _no_fork():
    raise AssertionError("forked")


@pytest.mark.parametrize("mode", ["end", "warn"])
def test_start_does_nothing_when_nothing_is_hidden(tmp_path, monkeypatch, mode):
    monkeypatch.setattr(os, "fork", _no_fork)
    log = tmp_path / "k.moved"
    assert watch.start(_policy(str(tmp_path)), mode, str(log)) is None
    assert os.listdir(tmp_path) == []


def _blocked() -> set[int]:
    return set(signal.pthread_sigmask(signal.SIG_BLOCK, []))


def test_start_writes_any_to_the_log_then_forks_and_the_parent_returns(tmp_path, monkeypatch):
    forks = []
    monkeypatch.setattr(os, "fork", lambda: forks.append(_blocked()) or 4242)
    before = _blocked()
    log = tmp_path / "hidden" / "k.moved"
    watch.start(_policy(str(tmp_path), ".env"), "end", str(log))
    assert (tmp_path / "hidden" / f"k.moved.{os.getpid()}").read_bytes() == b"*\0"
    assert not log.exists()
    assert len(forks) == 1 and set(watch._OUTLIVED) <= forks[0]  # blocked across the fork
    assert _blocked() == before  # and unblocked again in the parent


def test_start_with_only_on_end_forks_but_writes_no_log(tmp_path, monkeypatch):
    forks = []
    monkeypatch.setattr(os, "fork", lambda: forks.append(1) or 4242)
    watch.start(_policy(str(tmp_path)), "end", str(tmp_path / "k.moved"), on_end=lambda pid: None)
    watch.start(_policy(str(tmp_path), ".env"), "end", "", on_end=lambda pid: None)  # no log asked for
    assert forks == [1, 1] and os.listdir(tmp_path) == []


def test_start_runs_the_agent_without_a_watcher_when_fork_fails(tmp_path, monkeypatch):
    def fail():
        raise OSError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(os, "fork", fail)
    before = _blocked()
    watch.start(_policy(str(tmp_path), ".env"), "end", str(tmp_path / "k.moved"))
    assert _blocked() == before
    # the log says "any": the next launch is as careful as if the watcher had been killed
    assert (tmp_path / f"k.moved.{os.getpid()}").read_bytes() == b"*\0"


def test_start_refuses_when_the_log_cannot_be_written(tmp_path, monkeypatch):
    monkeypatch.setattr(os, "fork", _no_fork)
    blocker = tmp_path / "state"
    blocker.write_text("")
    with pytest.raises(UnavailableError) as e:
        watch.start(_policy(str(tmp_path), ".env"), "end", str(blocker / "k.moved"))
    assert f"cannot write {blocker}/k.moved.{os.getpid()}" in str(e.value)


# --- the loop, in this process: a child `sleep` stands for the sandbox -----------------------------------------


@pytest.fixture
def target():
    if not hasattr(os, "pidfd_open"):
        pytest.skip("no pidfd_open here")
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    alive = os.pidfd_open(proc.pid)
    yield proc, alive
    proc.kill()
    proc.wait()
    os.close(alive)


def _replace(path: str) -> None:
    """An editor's save: a new file renamed over the old one (a new inode at the same path)."""
    with open(path + ".tmp", "w") as f:
        f.write("new")
    os.rename(path + ".tmp", path)


@pytest.mark.parametrize("use_inotify", [True, False])
def test_a_replaced_hidden_file_ends_the_session(tmp_path, target, capsys, monkeypatch, use_inotify):
    proc, alive = target
    secret, other = str(tmp_path / ".env"), str(tmp_path / "notes")
    for p in (secret, other):
        with open(p, "w") as f:
            f.write("old")
    paths = [secret]
    known = {p: watch._ident(p) for p in paths}
    ifd, by_wd = watch._inotify(paths) if use_inotify else (None, {})
    if use_inotify:
        assert ifd is not None and by_wd == {next(iter(by_wd)): str(tmp_path)}
    monkeypatch.setattr(watch, "RECHECK", 0.05)  # the full re-check, for what inotify cannot see
    _replace(other)  # not hidden: no reason to act
    _replace(secret)
    guard = threading.Timer(10, proc.kill)  # a watcher that misses it would wait forever: SIGKILL, then fail
    guard.start()
    try:
        fds = [f for f in (alive, ifd) if f is not None]
        watch._watch(paths, known, proc.pid, "end", alive, ifd, by_wd, fds)
    finally:
        guard.cancel()
        if ifd is not None:
            os.close(ifd)
    assert proc.wait(timeout=5) == -signal.SIGTERM
    err = capsys.readouterr().err
    assert f"{secret} was replaced" in err and "ending the session" in err and "notes" not in err


def test_warn_mode_only_warns(target, tmp_path, capsys):
    proc, alive = target
    watch._act(str(tmp_path / ".env"), proc.pid, "warn", alive)
    err = capsys.readouterr().err
    assert err.startswith("\r\nai-sandbox: warning: ") and ".env was replaced" in err
    assert proc.poll() is None  # still running


def test_the_loop_returns_once_the_sandbox_is_gone(target, tmp_path):
    proc, alive = target
    path = str(tmp_path / ".env")
    with open(path, "w") as f:
        f.write("old")
    proc.kill()
    proc.wait()
    watch._watch([path], {path: watch._ident(path)}, proc.pid, "end", alive, None, {}, [alive])
    assert watch._ident(path) is not None  # nothing acted on


def test_a_replaced_path_is_named_without_its_escape_codes(capsys):
    """The watcher's line went to the terminal raw: a hidden `y\\x1b[2J.env` replaced from outside cleared the
    screen (second red team)."""
    from ai_sandbox import watch

    watch._act("/p/y\x1b[2J.env", os.getpid(), "warn", None)
    err = capsys.readouterr().err
    assert "\x1b" not in err and "y\\x1b[2J.env" in err


def test_another_roots_paths_and_directories_that_moved_are_named_and_none_else(tmp_path):
    """What other roots' records hold (state.Record.guarded), looked at when the session starts: a directory renamed
    away, replaced by a link back to itself, or deleted, and a recorded path moved out of its directory, count as
    moved; untouched ones do not."""
    dirs = {name: tmp_path / name for name in ("same", "gone", "linked", "deleted")}
    for d in dirs.values():
        d.mkdir()
    (dirs["same"] / ".env").write_text("x\n")
    (dirs["same"] / "key").write_text("x\n")
    names = [str(d) for d in dirs.values()] + [str(dirs["same"] / ".env"), str(dirs["same"] / "key")]
    look = watch._looks(names)
    os.rename(dirs["gone"], tmp_path / "far")
    os.rename(dirs["linked"], tmp_path / "elsewhere")
    os.symlink(tmp_path / "elsewhere", dirs["linked"])
    os.rmdir(dirs["deleted"])
    os.rename(dirs["same"] / ".env", tmp_path / "stash")
    moved = [str(dirs[n]) for n in ("gone", "linked", "deleted")] + [str(dirs["same"] / ".env")]
    assert sorted(watch._moved_dirs(look)) == sorted(moved)


def test_a_mask_replaced_from_outside_in_a_directory_still_in_place_is_not_noted(tmp_path):
    """A mask cannot be renamed or deleted from inside (a mount point): another file at its path, in a directory
    that is what it was, is yours (an editor saving .env through a rename), and noting it made the next launch
    refuse for it (state.py searches for what a log names by its own inode)."""
    secret = tmp_path / ".env"
    secret.write_text("x\n")
    paths = [str(secret)]
    was = watch._ident(str(secret))
    parents, ids = watch._parents(paths), {str(tmp_path): watch._dir_key(str(tmp_path))}
    (tmp_path / ".env.tmp").write_text("edited\n")
    os.rename(tmp_path / ".env.tmp", secret)
    assert watch._ident(str(secret)) != was
    assert watch._changed(paths, parents, ids) == []
    os.rename(tmp_path, str(tmp_path) + ".old")  # its directory moved: noted
    os.mkdir(tmp_path)
    assert watch._changed(paths, parents, ids) == [str(secret)]


def test_late_names_a_recorded_path_that_is_another_file_now(tmp_path, monkeypatch):
    """A launch recorded while the session ran (it did not hide that path): swapped or replaced since, it is noted,
    as one gone is (make fuzz: a nested clone's session swapping the project's secrets/ with its src/)."""
    from ai_sandbox import state

    root = tmp_path / "p"
    for d in ("secrets", "src", "keep"):
        (root / d).mkdir(parents=True)
    env = {"XDG_STATE_HOME": str(tmp_path / "state"), "HOME": str(tmp_path)}
    policy = Policy(
        root=str(root), in_git=True, masks=[Mask(f"{root}/{d}", True, IGNORED, "x") for d in ("secrets", "keep")]
    )
    state.record(state.check(policy, env, str(root)))
    record = state.record_path(env, str(root))
    assert watch._late(record, []) == []
    os.rename(root / "secrets", root / "tmp")
    os.rename(root / "src", root / "secrets")
    os.rename(root / "tmp", root / "src")
    assert watch._late(record, []) == [f"{root}/secrets"]


def test_a_guarded_path_whose_file_is_gone_from_every_directory_was_not_moved(tmp_path):
    """Held from the look: a file whose last name was replaced (an editor's save) has no link left, and is not
    noted; one swapped or moved still has one, and is."""
    for name in ("saved", "moved", "linked"):
        (tmp_path / name).write_text("x\n")
    names = [str(tmp_path / n) for n in ("saved", "moved", "linked")]
    look, held = watch._looks(names), watch._hold(names)
    try:
        (tmp_path / "new").write_text("edited\n")
        os.rename(tmp_path / "new", tmp_path / "saved")
        os.rename(tmp_path / "moved", tmp_path / "far")
        (tmp_path / "moved").write_text("decoy\n")
        os.link(tmp_path / "linked", tmp_path / "other")
        os.remove(tmp_path / "linked")
        (tmp_path / "linked").write_text("decoy\n")
        assert sorted(watch._moved_dirs(look, held)) == [str(tmp_path / "linked"), str(tmp_path / "moved")]
        assert sorted(watch._moved_dirs(look)) == sorted(names)  # nothing held: every one that changed
    finally:
        for fd in held.values():
            os.close(fd)
