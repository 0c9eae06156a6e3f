"""The bwrap backend's pure parts (its arguments, its launch-check spec) and auto's choice between backends.
What bwrap really does with them is proved by the sandbox tests run against it (BACKENDS in tests/integration
and tests/security)."""

from __future__ import annotations

import os
import time

import pytest

from ai_sandbox import verify
from ai_sandbox.backends import choose
from ai_sandbox.backends import firejail as firejail_backend
from ai_sandbox.backends.bwrap import ARGS_FD, MAX_SCRATCH, SYSTEM_READ_ONLY, Bwrap
from ai_sandbox.backends.plan import Settings
from ai_sandbox.backends.registry import make
from ai_sandbox.errors import UnavailableError
from ai_sandbox.policy import GLOBAL, Mask, Policy
from ai_sandbox.report import descriptor_lines
from ai_sandbox.verify import IGNORED_ENV


def _env(tmp_path) -> dict[str, str]:
    return {"HOME": str(tmp_path), "XDG_CACHE_HOME": str(tmp_path / "cache"), "PATH": "/usr/bin:/bin"}


def _args(plan) -> list[str]:
    return os.fsdecode(plan.fds[ARGS_FD]).split("\0")[:-1]


def test_every_name_is_expressible_but_one_longer_than_the_kernel_takes():
    b = Bwrap()
    for name in ("/p/a,b.env", "/p/#x.env", "/p/sec\nx", "/p/sec\tx ", "/p/a..b", "/p/[ab]", "/p/a  b"):
        assert b.unexpressible(name) is None, name
    assert "longer than 4095 bytes" in (b.unexpressible("/" + "x" * 5000) or "")


def test_masks_go_to_the_launch_check_never_to_bwrap(tmp_path):
    """bwrap would create a missing mask path on the host and pays the square of its mounts: every mask is an
    M record of the check (which mounts it), none is a bwrap argument."""
    (tmp_path / "d").mkdir()
    (tmp_path / ".env").write_text("x")
    masks = [
        Mask(str(tmp_path / ".env"), False, GLOBAL, "t"),
        Mask(str(tmp_path / "d"), True, GLOBAL, "t"),
        Mask(str(tmp_path / "missing"), False, GLOBAL, "t"),
    ]
    b = Bwrap(Settings(cwd=str(tmp_path)), user=(12345, 12345))  # owns nothing here: no scratch
    plan = b.plan(Policy(root=str(tmp_path), in_git=False, masks=masks), ["/bin/true"], _env(tmp_path))
    args = _args(plan)
    assert not any(m.path in args for m in masks)
    [(check_path, spec)] = [(p, c) for p, c in plan.files.items() if "/check-" in p]
    records = verify.parse_spec(spec)
    assert records is not None and ("K", "bwrap") in records
    assert ("M", str(tmp_path / ".env")) in records and ("M", str(tmp_path / "d")) in records
    assert ("m", str(tmp_path / "missing")) in records  # nothing to read; existing ones must still exist inside
    assert ("W", str(tmp_path)) in records  # entered by name once the masks exist (bwrap starts in /)
    assert plan.argv[:4] == [b.executable or "bwrap", "--args", str(ARGS_FD), "--"]
    assert plan.argv[-1] == "/bin/true" and check_path in plan.argv
    assert plan.supervised and IGNORED_ENV in plan.env


def test_system_directories_and_own_files_are_read_only_and_caps_kept_for_the_check_only(tmp_path):
    plan = Bwrap(Settings(cwd=str(tmp_path))).plan(
        Policy(root=str(tmp_path), in_git=False), ["/bin/true"], _env(tmp_path)
    )
    lines = descriptor_lines(plan.fds[ARGS_FD])
    for d in SYSTEM_READ_ONLY:
        if os.path.isdir(d) and not os.path.islink(d):
            assert f"--ro-bind {d} {d}" in lines
    assert lines[:4] == ["--dev-bind / /", "--unshare-pid", "--die-with-parent", "--chdir /"]
    assert "--cap-drop ALL" in lines and "--cap-add CAP_SYS_ADMIN" in lines and "--cap-add CAP_SETPCAP" in lines
    assert "--tmpfs /dev" in lines and "--tmpfs /dev/shm" in lines
    assert not any(line.startswith("--dev /") for line in lines)  # bwrap's --dev nests a user namespace


def test_scratch_directories_are_the_agents_own_and_capped(tmp_path):
    owned = []
    for i in range(MAX_SCRATCH + 3):
        d = tmp_path / f"s{i}"
        d.mkdir()
        owned.append(Mask(str(d), True, GLOBAL, "t"))
    tracked_dir = tmp_path / "t"
    tracked_dir.mkdir()
    policy = Policy(
        root=str(tmp_path),
        in_git=True,
        masks=[Mask(str(tracked_dir), True, GLOBAL, "t"), *owned],
        tracked=[str(tracked_dir / "x")],
    )
    scratch = Bwrap(user=(os.geteuid(), os.getegid())).scratch(policy)
    assert len(scratch) == MAX_SCRATCH and str(tracked_dir) not in scratch
    assert Bwrap(user=(os.geteuid() + 1, 0)).scratch(policy) == []


class _Fake:
    host_commands = True
    max_masks = 1
    executable = None

    state_files = ()

    def __init__(self, name: str, why: str | None, log: list[str], cheap: str | None = None) -> None:
        self.name, self.why, self.log, self.cheap = name, why, log, cheap

    def unavailable(self):
        return None if self.cheap is None else UnavailableError(self.cheap, f"fix {self.name}'s config")

    def probe(self, env):
        self.log.append(self.name)
        return None if self.why is None else UnavailableError(self.why, f"fix {self.name}")


@pytest.fixture
def fakes(monkeypatch):
    """Backends whose probe answers as told and is counted: auto's choice and its cache, alone."""
    state: dict[str, str | None] = dict.fromkeys(choose.ORDER)  # every Linux backend sandboxes, but:
    state["firejail"] = "does not sandbox here"
    log: list[str] = []
    monkeypatch.setattr(choose, "make", lambda n, settings: _Fake(n, state[n], log, state.get(f"{n}-cheap")))
    monkeypatch.setattr(choose, "_inside", lambda: None)  # the suite may itself run in a sandbox
    return state, log


def test_inside_a_sandbox_auto_is_that_sandbox_and_starts_nothing(fakes, tmp_path, monkeypatch):
    _, log = fakes
    monkeypatch.setattr(choose, "_inside", lambda: "bwrap")
    assert choose.linux(Settings(), _env(tmp_path)).name == "bwrap" and log == []


def test_auto_takes_bwrap_where_firejail_does_not_sandbox_and_remembers(fakes, tmp_path):
    state, log = fakes
    env = _env(tmp_path)
    assert choose.linux(Settings(), env).name == "bwrap"
    assert log == ["firejail", "bwrap"]
    assert choose.linux(Settings(), env).name == "bwrap"
    assert log == ["firejail", "bwrap"]  # answered from the cache
    assert choose.linux(Settings(), env, fresh=True).name == "bwrap"
    assert log == ["firejail", "bwrap"] * 2


def test_auto_refuses_with_both_reasons_and_fixes(fakes, tmp_path):
    state, _ = fakes
    state["bwrap"] = "cannot create its namespaces"
    with pytest.raises(UnavailableError) as e:
        choose.linux(Settings(), _env(tmp_path))
    assert "firejail: does not sandbox here" in e.value.message and "bwrap: cannot create" in e.value.message
    assert "fix firejail" in e.value.hint and "fix bwrap" in e.value.hint


def test_a_cached_verdict_for_another_state_is_not_used(fakes, tmp_path, monkeypatch):
    state, log = fakes
    env = _env(tmp_path)
    choose.linux(Settings(), env)
    monkeypatch.setattr(choose, "state_key", lambda backends: "another boot")
    choose.linux(Settings(), env)
    assert log == ["firejail", "bwrap"] * 2


def test_a_damaged_cache_is_asked_again(fakes, tmp_path):
    _, log = fakes
    env = _env(tmp_path)
    os.makedirs(os.path.dirname(choose.cache_file(env)))
    with open(choose.cache_file(env), "w") as f:
        f.write('{"key": 1, "verdicts": []}')
    assert choose.linux(Settings(), env).name == "bwrap" and log == ["firejail", "bwrap"]


def test_a_backend_refused_by_its_cheap_checks_is_not_taken_from_the_cache(fakes, tmp_path):
    """firejail.users stops naming the user after auto cached "firejail works": the next launch takes bwrap,
    with no doctor run, and takes firejail again once the file names the user."""
    state, log = fakes
    state["firejail"] = None
    env = _env(tmp_path)
    assert choose.linux(Settings(), env).name == "firejail" and log == ["firejail"]
    state["firejail-cheap"] = "firejail refuses user u"
    assert choose.linux(Settings(), env).name == "bwrap" and log == ["firejail", "bwrap"]
    state["firejail-cheap"] = None
    assert choose.linux(Settings(), env).name == "firejail" and log == ["firejail", "bwrap"]  # from the cache


def test_a_does_not_work_is_asked_again_after_a_day(fakes, tmp_path, monkeypatch):
    """What no key sees (an AppArmor profile loaded, a container's seccomp relaxed) is noticed within a day."""
    _, log = fakes
    env = _env(tmp_path)
    choose.linux(Settings(), env)
    choose.linux(Settings(), env)
    assert log == ["firejail", "bwrap"]
    now = time.time()
    monkeypatch.setattr(choose.time, "time", lambda: now + choose.RECHECK + 1)
    assert choose.linux(Settings(), env).name == "bwrap"
    assert log == ["firejail", "bwrap", "firejail"]  # bwrap's "works" still holds: a launch proves it anyway


def test_the_state_key_changes_with_a_backends_own_config(tmp_path):
    fj = make("firejail", Settings())
    users = tmp_path / "firejail.users"
    fj.state_files = (str(users),)
    before = choose.state_key([fj])
    users.write_text("root\n")
    created = choose.state_key([fj])
    users.write_text("root\nalice\n")
    assert len({before, created, choose.state_key([fj])}) == 3


@pytest.mark.parametrize(
    ("content", "uid", "refused"),
    [
        (None, 1000, False),  # no firejail.users: everyone may
        ("root\n", 0, False),  # root always may
        ("root\n", 1000, True),
        ("# alice\nroot\n", 1000, True),  # a comment names nobody
        ("root\n{name}\n", 1000, False),
        ("root\n{name}", 1000, False),  # no newline at the end
        ("root\n {name}\n", 1000, True),  # firejail compares the whole line
    ],
)
def test_firejail_users_is_read_as_firejail_reads_it(tmp_path, monkeypatch, content, uid, refused):
    import pwd

    monkeypatch.setattr(pwd, "getpwuid", lambda u: pwd.struct_passwd(("alice", "x", u, u, "", "/h", "/bin/sh")))
    users = tmp_path / "firejail.users"
    if content is not None:
        users.write_text(content.format(name="alice"))
    err = firejail_backend.refused_user(str(users), uid)
    assert (err is not None) == refused
    if err:
        assert "firejail refuses user alice" in err.message and "firecfg --add-users alice" in err.hint


def test_descriptor_lines_keep_perms_with_the_option_it_modifies():
    data = b"\0".join([b"--perms", b"700", b"--tmpfs", b"/p/a b", b"--ro-bind", b"/u", b"/u"]) + b"\0"
    assert descriptor_lines(data) == ["--perms 700 --tmpfs '/p/a b'", "--ro-bind /u /u"]
    assert descriptor_lines(b"") == []
