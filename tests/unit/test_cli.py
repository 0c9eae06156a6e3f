"""The command line: one declaration of our options (options.OPTIONS) read by the launch parser and the typer
root; nothing after the agent is ours."""

from __future__ import annotations

import os
import subprocess
import sys
import types

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ai_sandbox import main, options
from ai_sandbox.errors import UsageError
from tests.conftest import AIS


@pytest.mark.parametrize(
    "argv, opts, rest, is_cmd",
    [
        (["claude", "--resume"], {}, ["claude", "--resume"], False),
        (["--dry-run", "claude", "--dry-run"], {"--dry-run": True}, ["claude", "--dry-run"], False),
        (["--backend", "firejail", "--", "echo", "--help"], {"--backend": "firejail"}, ["echo", "--help"], True),
        (["--backend=auto", "x"], {"--backend": "auto"}, ["x"], False),
        (["--", "--weird"], {}, ["--weird"], True),
        (["--image", "x", "--engine=podman", "t"], {"--image": "x", "--engine": "podman"}, ["t"], False),
        (["mytool", "--debug", "-h", "--version"], {}, ["mytool", "--debug", "-h", "--version"], False),
        (["--debug", "--", "t", "--", "--help"], {"--debug": True}, ["t", "--", "--help"], True),
        (["-", "x"], {}, ["-", "x"], False),
        ([], {}, [], False),
    ],
)
def test_parse(argv, opts, rest, is_cmd):
    assert main.parse(argv) == (opts, rest, is_cmd)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--nope", "claude"], "unknown option '--nope'"),
        (["--dry", "claude"], "unknown option '--dry'"),  # no abbreviations
        (["-1", "claude"], "unknown option '-1'"),
        (["-x y", "claude"], "unknown option '-x y'"),
        (["--backend"], "--backend"),
        (["--dry-run=yes", "claude"], "--dry-run"),
    ],
)
def test_parse_errors(argv, message):
    with pytest.raises(UsageError, match=message):
        main.parse(argv)


def _argparse(argv):
    """The launch parser as it was, with argparse: the oracle main.parse is compared with."""
    import argparse

    class Parser(argparse.ArgumentParser):
        def error(self, message):
            raise UsageError(message, "")

    p = Parser(prog="ai-sandbox", add_help=False, allow_abbrev=False)
    for o in options.OPTIONS:
        if o.metavar:
            p.add_argument(*o.names, dest=o.dest, metavar=o.metavar)
        else:
            p.add_argument(*o.names, dest=o.dest, action="store_true")
    p.add_argument("agent", nargs=argparse.REMAINDER)
    ns, unknown = p.parse_known_args(argv)
    rest = ns.agent
    is_command = rest[:1] == ["--"]
    if is_command:
        rest = rest[1:]
    elif rest and rest[0].startswith("-") and rest[0] != "-":
        unknown.insert(0, rest[0])
    if unknown:
        raise UsageError(f"unknown option {unknown[0]!r}", "")
    return {o.name: v for o in options.OPTIONS if (v := getattr(ns, o.dest)) not in (None, False)}, rest, is_command


WORDS = ["--dry-run", "--backend", "--backend=auto", "--backend=", "--network", "on", "--image", "-h", "--help",
         "--debug", "--version", "--dry-run=yes", "--", "-", "-1", "-.5", "-5.", "-x y", "--nope", "--ver", "-hx",
         "claude", "x", "--engine=podman", "-٣"]  # fmt: skip


@settings(max_examples=3000, deadline=None)
@given(st.lists(st.sampled_from(WORDS), max_size=6))
def test_parse_answers_as_argparse_did(argv):
    """The hand parser against argparse on every mix of our options, values, dashes and agents: the same
    options, agent and `--`, or a usage error from both."""
    try:
        want = _argparse(argv)
    except UsageError:
        want = None
    try:
        got = main.parse(argv)
    except UsageError:
        got = None
    assert got == want


@pytest.fixture
def failing_launch(monkeypatch):
    """A launch that hits a bug in ai-sandbox: the requests it got are recorded, then it raises."""
    seen = []

    def run(req):
        seen.append(req)
        raise RuntimeError("a bug")

    fake = types.SimpleNamespace(Request=lambda **kw: types.SimpleNamespace(**kw), run=run)
    monkeypatch.setitem(sys.modules, "ai_sandbox.launch", fake)
    monkeypatch.setitem(sys.modules, "ai_sandbox.dryrun", types.SimpleNamespace(run=run))  # --dry-run's
    return seen


@pytest.mark.parametrize(
    "argv",
    [["mytool", "--debug"], ["--", "tool", "--debug"], ["mytool", "--", "--debug"], ["--dry-run", "t", "--debug"]],
)
def test_the_agents_own_debug_is_the_agents(failing_launch, argv, capsys):
    """An agent's `--debug` (or `-h`, `--version`) is its own: it never turns on ai-sandbox's tracebacks."""
    assert main.main(argv) == 70
    assert "internal error: RuntimeError: a bug" in capsys.readouterr().err
    assert failing_launch[0].argv[-1] == "--debug"


def test_our_debug_before_the_agent_shows_the_traceback(failing_launch):
    with pytest.raises(RuntimeError):
        main.main(["--debug", "mytool"])


def test_help_documents_every_option_and_command():
    from ai_sandbox.cli import app

    out = subprocess.run([AIS, "--help"], capture_output=True, text=True, check=True).stdout
    assert "Usage: ai-sandbox [OPTIONS] AGENT [ARGS]..." in out
    for o in options.OPTIONS:
        assert f"{', '.join(o.names)} {o.metavar}".strip() in out
    commands = {c.name or c.callback.__name__ for c in app.registered_commands}
    assert commands == options.SUBCOMMANDS
    for name in commands:
        assert f"\n  {name} " in out


def test_options_before_a_command_reach_it(tmp_path):
    res = subprocess.run([AIS, "--backend=nope", "explain"], capture_output=True, text=True, cwd=tmp_path)
    assert res.returncode == 64 and "unknown backend 'nope'" in res.stderr


def test_usage_errors_exit_64_in_one_line():
    res = subprocess.run([AIS, "--nope", "claude"], capture_output=True, text=True)
    assert res.returncode == 64
    assert res.stderr.count("\n") == 1 and "unknown option '--nope'" in res.stderr
    res = subprocess.run([AIS, "--backend"], capture_output=True, text=True)
    assert res.returncode == 64
    assert res.stderr.startswith("ai-sandbox: error: ") and res.stderr.count("\n") == 1
    res = subprocess.run([AIS], capture_output=True, text=True)
    assert res.returncode == 64


def test_command_usage_errors_exit_64_never_a_traceback():
    for argv in (["explain", "--bogus"], ["init", "a", "b"], ["alias", "--shell"]):
        proc = subprocess.run([AIS, *argv], capture_output=True, text=True)
        assert proc.returncode == 64, (argv, proc.stderr)
        assert "Traceback" not in proc.stderr and "Error:" in proc.stderr


def test_a_broken_user_profile_is_one_line(tmp_path):
    profiles = tmp_path / "ai-sandbox" / "profiles"
    profiles.mkdir(parents=True)
    (profiles / "claude.toml").write_text('executable = "claude"\nalow = []\n')
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path)}
    proc = subprocess.run([AIS, "profiles"], capture_output=True, text=True, env=env)
    assert proc.returncode == 78
    assert f"{profiles / 'claude.toml'}:2: unknown key `alow`" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
