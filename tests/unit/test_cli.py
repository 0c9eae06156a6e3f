"""The command line: the hand-written launch parser and the typer help stay in step."""

from __future__ import annotations

import os
import subprocess

import pytest

from ai_sandbox import main
from ai_sandbox.errors import UsageError
from tests.conftest import AIS, PY


@pytest.mark.parametrize(
    "argv, opts, rest, is_cmd",
    [
        (["claude", "--resume"], {}, ["claude", "--resume"], False),
        (["--dry-run", "claude", "--dry-run"], {"--dry-run": True}, ["claude", "--dry-run"], False),
        (["--backend", "firejail", "--", "echo", "--help"], {"--backend": "firejail"}, ["echo", "--help"], True),
        (["--backend=auto", "x"], {"--backend": "auto"}, ["x"], False),
        (["--", "--weird"], {}, ["--weird"], True),
    ],
)
def test_parse(argv, opts, rest, is_cmd):
    assert main.parse(argv) == (opts, rest, is_cmd)


@pytest.mark.parametrize("argv", [["--nope", "claude"], ["--backend"]])
def test_parse_errors(argv):
    with pytest.raises(UsageError):
        main.parse(argv)


def test_help_documents_every_launch_option():
    out = subprocess.run([AIS, "--help"], capture_output=True, text=True, check=True).stdout
    for opt in sorted(main.FLAGS | main.VALUED | {"--version"}):
        assert opt in out


def test_usage_errors_exit_64_in_one_line():
    res = subprocess.run([AIS, "--nope", "claude"], capture_output=True, text=True)
    assert res.returncode == 64
    assert res.stderr.count("\n") == 1 and "unknown option '--nope'" in res.stderr
    res = subprocess.run([AIS], capture_output=True, text=True)
    assert res.returncode == 64


def test_launch_path_does_not_import_typer_rich_or_pathspec():
    code = (
        "import sys; from ai_sandbox import launch, main; "
        "print(sorted(m for m in ('typer', 'rich', 'pathspec', 'git') if m in sys.modules))"
    )
    out = subprocess.run([PY, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


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
