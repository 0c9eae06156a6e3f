"""Every backend in the registry: what its entry says is what its class does, and its plan runs the launch check
its entry names before the agent (or says why none runs). A backend cannot be added without this holding."""

from __future__ import annotations

import os

import pytest

from ai_sandbox import verify
from ai_sandbox.backends.plan import Checked, Settings, Unchecked
from ai_sandbox.backends.registry import REGISTRY, auto_help, make, on
from ai_sandbox.policy import GLOBAL, Mask, Policy


@pytest.mark.parametrize("name", list(REGISTRY))
def test_each_entry_is_its_class(name):
    entry = REGISTRY[name]
    backend = make(name, Settings())
    assert backend.name == name
    assert entry.platform in ("linux", "darwin")
    assert entry.inside in (*verify.SANDBOXES, "")
    assert isinstance(backend.private_dirs, tuple) and isinstance(backend.max_masks, int)
    assert entry.summary and name in auto_help() + " ".join(REGISTRY)


@pytest.mark.parametrize("name", list(REGISTRY))
def test_each_plan_runs_the_check_its_entry_names_before_the_agent(name, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    root = tmp_path / "p"
    root.mkdir()
    (root / ".env").write_text("x\n")
    policy = Policy(root=str(root), in_git=False, masks=[Mask(str(root / ".env"), False, GLOBAL, "test")])
    agent = ["/bin/echo", "--help", "AGENT-ARG"]
    plan = make(name, Settings(cwd=str(root))).plan(policy, agent, dict(os.environ))
    assert plan.argv[-len(agent) :] == agent and plan.agent == agent
    entry = REGISTRY[name]
    if not entry.inside:
        assert isinstance(plan.check, Unchecked) and plan.check.reason
        assert plan.argv == [*plan.sandbox, *agent]
        return
    assert isinstance(plan.check, Checked)
    assert plan.argv == [*plan.sandbox, *plan.check.argv, *agent]  # the check, then the agent
    python, flags, script, spec = plan.check.argv[0], plan.check.argv[1:3], plan.check.argv[3], plan.check.argv[4]
    assert flags == ("-I", "-S") and os.access(python, os.X_OK)
    if os.path.basename(script) != "verify.py":  # verify's bytecode, copied into the cache (host.compiled_verifier)
        assert plan.check.compiled is not None and plan.check.compiled[0] == script
        with open(verify.__cached__, "rb") as f:
            assert plan.files[script] == f.read()
    assert plan.files[spec] == plan.check.spec  # written before the exec
    records = verify.parse_spec(plan.check.spec)
    assert records is not None
    assert ("K", entry.inside) in records
    assert str(root / ".env") in [r for k, r in records if k in "Mm"]  # with ai-sandbox's own hidden files


def test_auto_tries_the_linux_backends_in_the_registrys_order():
    assert on("linux") == ("firejail", "bwrap") and on("darwin") == ("docker",)
    assert auto_help().startswith("auto: firejail, else bwrap on Linux")


def test_the_launch_check_refuses_a_sandbox_it_does_not_know():
    found = verify.problems([("K", "seatbelt"), ("m", "/nonexistent")])
    assert found is not None and "seatbelt" in found[0]


def test_the_spec_round_trips_every_record_kind_and_odd_names():
    names = ["/p/a b", "/p/new\nline", os.fsdecode(b"/p/caf\xe9"), "/p/x:y", "/p/\r"]
    records = [(k, n) for k in "KMmWTRBCS" for n in names]
    data = verify.spec([k.encode() + os.fsencode(n) for k, n in records])
    assert verify.parse_spec(data) == records
    assert verify.parse_spec(b"not a spec") is None


def test_the_launch_check_runs_from_bytecode_only_when_it_is_the_source_s(tmp_path, monkeypatch):
    """The check runs from verify's .pyc, copied into the cache, only when the .pyc matches the source by
    Python's own test (mtime and size): a stale one (an install that could not rewrite it) is never run, the
    source is; and it runs: the copy exits as verify.py does."""
    import py_compile
    import subprocess

    from ai_sandbox.backends import host

    pyc = tmp_path / "verify.cpython.pyc"
    py_compile.compile(verify.__file__, cfile=str(pyc), doraise=True)
    monkeypatch.setattr(verify, "__cached__", str(pyc))
    got = host.compiled_verifier(str(tmp_path / "cache"))
    assert got is not None and got[1] == pyc.read_bytes() and got[0].startswith(str(tmp_path / "cache" / "verify-"))
    copy = tmp_path / "copy.pyc"
    copy.write_bytes(got[1])
    python = host.verifier()[0]
    for script in (str(copy), verify.__file__):
        out = subprocess.run([python, "-I", "-S", script], capture_output=True, text=True)
        assert out.returncode == verify.EXIT_UNENFORCED and "needs a spec and a command" in out.stderr
    data = bytearray(pyc.read_bytes())
    for at in (8, 12):  # the source's mtime, then its size, no longer the .pyc's
        stale = bytearray(data)
        stale[at] ^= 1
        pyc.write_bytes(bytes(stale))
        assert host.compiled_verifier(str(tmp_path / "cache")) is None
    monkeypatch.setattr(verify, "__cached__", str(tmp_path / "missing.pyc"))
    assert host.compiled_verifier(str(tmp_path / "cache")) is None
