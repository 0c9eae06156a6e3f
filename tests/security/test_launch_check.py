"""The launch check (verify.py): every launch proves, from inside the sandbox, that each mask and each
read-only rule is in force before the agent starts — and refuses in one line, exit 69, when one is not.

Two kinds of test, all with the real firejail, as root and as the unprivileged user:
- the causes found by the outside review, through the real `ai-sandbox`: firejail running the command
  unsandboxed inside a PID namespace (a container), and names or directories with runs of blanks, which
  firejail's profile parser collapses so that their line silently does nothing;
- the check as the second line of defence: a plan whose profile was made to omit or mangle a rule (as a
  firejail version or a case nobody thought of could), run as the launch runs it; the check must stop it.
Each secret is a fresh random string; finding it in the output means it was read.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from unittest import mock

import pytest

from ai_sandbox.backends.firejail import Firejail
from ai_sandbox.backends.plan import Settings
from ai_sandbox.fs import make_dirs, write_files
from ai_sandbox.policy import IGNORED, Mask, Policy
from tests.conftest import AIS, Result, Workspace, chown_tree, plant_env, require, root_only, running_install, token

pytestmark = pytest.mark.sandbox


def _as(ws: Workspace, argv: list[str]) -> list[str]:
    if ws.user:
        return ["setpriv", f"--reuid={ws.user.uid}", f"--regid={ws.user.gid}", "--clear-groups", "--", *argv]
    return argv


def _run(
    ws: Workspace, argv: list[str], env: dict[str, str] | None = None, cwd: Path | None = None, wrap: bool = True
) -> Result:
    if ws.user:
        chown_tree(ws.base, ws.user)
    proc = subprocess.run(
        _as(ws, argv) if wrap else argv,
        cwd=cwd or ws.repo,
        env=env or ws.env(),
        capture_output=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    dec = lambda b: b.decode("utf-8", "surrogateescape")  # noqa: E731
    res = Result(proc.returncode, dec(proc.stdout), dec(proc.stderr))
    print(f"--- rc={res.rc}\n--- stdout\n{res.out}\n--- stderr\n{res.err}")
    return res


def _refused(res: Result, *secrets: str) -> None:
    assert res.rc == 69, (res.rc, res.err)
    assert "Traceback" not in res.err
    assert len(res.err.strip().splitlines()) == 1, res.err
    assert res.err.startswith("ai-sandbox: error:"), res.err
    for s in secrets:
        assert s not in res.out + res.err
    assert "AGENT-RAN" not in res.out


# --- firejail that does not sandbox -----------------------------------------------------------------------


def test_firejail_running_unsandboxed_in_a_pid_namespace_is_stopped(ws, firejail):
    """In a container firejail detects "an existing sandbox" and runs the command with every secret
    readable (old code: the .env content was printed, exit 0). unshare needs root; the user case drops
    to the user inside the new namespace, as a container's user would be. Asked for by name, firejail is
    refused there; `auto` finds out with a real start and takes bwrap, which does sandbox there."""
    root_only("unshare --pid")
    require("unshare")
    require("bwrap")
    secret = plant_env(ws)
    script = "echo AGENT-RAN; cat /proc/1/comm .env"
    if ws.user:
        chown_tree(ws.base, ws.user)
    agent = [AIS, "--backend", "firejail", "--", "sh", "-c", script]
    res = _run(ws, ["unshare", "--pid", "--fork", "--mount-proc", *_as(ws, agent)], wrap=False)
    _refused(res, secret)
    assert "existing sandbox" in res.err
    agent = [AIS, "--", "sh", "-c", script]
    res = _run(ws, ["unshare", "--pid", "--fork", "--mount-proc", *_as(ws, agent)], wrap=False)
    assert res.out.startswith("AGENT-RAN\nbwrap\n"), (res.out, res.err)
    assert secret not in res.out + res.err and "Permission denied" in res.err


def test_doctor_explain_and_dry_run_say_firejail_does_not_sandbox_here(ws_self, firejail):
    root_only("unshare --pid")
    require("unshare")
    require("bwrap")
    plant_env(ws_self)
    pid_ns = ["unshare", "--pid", "--fork", "--mount-proc"]
    doctor = _run(ws_self, [*pid_ns, AIS, "doctor"])
    assert doctor.rc == 0, doctor.out
    assert "! backend firejail: firejail does not sandbox here (existing sandbox / container detected)" in doctor.out
    assert "outside the container" in doctor.out and "✓ backend bwrap" in doctor.out and "in use" in doctor.out
    doctor = _run(ws_self, [*pid_ns, AIS, "--backend", "firejail", "doctor"])
    assert doctor.rc == 69
    assert "✗ backend firejail: firejail does not sandbox here (existing sandbox / container detected)" in doctor.out
    import json

    explain = json.loads(_run(ws_self, [*pid_ns, AIS, "explain", "--json"]).out)
    assert explain["backend"] == "bwrap" and explain["unavailable"] is None
    explain = json.loads(_run(ws_self, [*pid_ns, AIS, "--backend", "firejail", "explain", "--json"]).out)
    assert "existing sandbox" in explain["unavailable"]
    dry = _run(ws_self, [*pid_ns, AIS, "--backend", "firejail", "--dry-run", "--", "true"])
    assert "a launch would refuse: firejail does not sandbox here" in dry.out.replace("\n", " ")


# --- runs of blanks, which firejail's profile parser collapses --------------------------------------------


def test_a_name_with_a_run_of_blanks_is_hidden(ws, firejail):
    """Old code wrote `blacklist …/secret  file.txt`; firejail read `secret file.txt` and masked nothing."""
    a, b = token("FILESECRET"), token("DIRSECRET")
    ws.write(".gitignore", "*  file.txt\nsecret  dir/\n")
    ws.git("add", ".gitignore")
    ws.git("commit", "-qm", "ignore")
    ws.write("conf/secret  file.txt", a + "\n")
    ws.write("conf/app.txt", "APP-VISIBLE\n")
    ws.write("conf/secret  dir/key", b + "\n")
    res = _run(ws, [AIS, "--", "sh", "-c", 'cat "conf/secret  file.txt" "conf/secret  dir/key"; ls -a conf; true'])
    assert res.rc == 0, res.err
    assert a not in res.out + res.err and b not in res.out + res.err


def test_a_run_of_blanks_in_the_project_root_refuses(ws, firejail):
    """Every mask line of a project in `my  project/` named a path firejail never saw (old code: the
    secret was printed). Nothing in the project can be hidden exactly, and the root must stay visible."""
    secret = token("ROOTSECRET")
    root = ws.base / "my  project"
    root.mkdir()
    ws.git("init", "-q", cwd=root)
    (root / ".gitignore").write_text(".env\n")
    (root / ".env").write_text(secret + "\n")
    res = _run(ws, [AIS, "--", "sh", "-c", "echo AGENT-RAN; cat .env"], cwd=root)
    assert res.rc == 65, res.err
    assert secret not in res.out + res.err and "AGENT-RAN" not in res.out
    assert "run of blanks" in res.err


@pytest.mark.parametrize("var", ["XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME"])
def test_a_run_of_blanks_in_ai_sandboxs_own_directories_refuses(ws, firejail, var):
    """The config, the hidden-paths record and the generated profile are read-only inside; with two
    blanks in their path the read-only line did nothing (old code: the session could rewrite the next
    one's rules, or the launch went on silently)."""
    plant_env(ws)
    odd = ws.home / "odd  dir"
    odd.mkdir()
    env = ws.env({var: str(odd)})
    res = _run(ws, [AIS, "--", "sh", "-c", "echo AGENT-RAN"], env=env)
    _refused(res)
    assert "odd  dir" in res.err


# --- the check as the second line of defence ---------------------------------------------------------------


def _plan(ws: Workspace, policy: Policy, script: str, profile_filter=None, cwd: Path | None = None):
    """The exact command a launch would exec for policy, with the profile passed through profile_filter."""
    env = ws.env()
    fj = Firejail(Settings(cwd=str(cwd or ws.repo)), (ws.user.uid, ws.user.gid) if ws.user else None)
    # planned as the ai-sandbox the tests run would plan it: its check, code and environment (a staged
    # copy's, which the test user can reach, when the suite stages one)
    run = running_install()
    with (
        mock.patch("ai_sandbox.backends.host.verifier", lambda: (run["python"], run["check"])),
        mock.patch("ai_sandbox.paths.shipped_dir", lambda: run["profiles"]),
        mock.patch.object(sys, "prefix", run["prefix"]),
        mock.patch.object(sys, "base_prefix", run["base_prefix"]),
        mock.patch("ai_sandbox.backends.host._launcher_path", lambda: run["path"]),
    ):
        plan = fj.plan(policy, ["/bin/sh", "-c", script], env)
    if profile_filter is not None:
        plan.extra_files = {p: profile_filter(c) if p.endswith(".profile") else c for p, c in plan.extra_files.items()}
    make_dirs(plan.dirs)
    write_files(plan.files)
    return plan


def _policy(ws: Workspace, *masks: tuple[str, bool]) -> Policy:
    return Policy(
        root=str(ws.repo),
        in_git=True,
        masks=[Mask(str(ws.repo / rel), is_dir, IGNORED, "test") for rel, is_dir in masks],
    )


def test_the_check_passes_a_faithful_profile_and_the_environment_arrives_exactly(ws, firejail):
    secret = plant_env(ws)
    plan = _plan(ws, _policy(ws, (".env", False)), 'echo AGENT-RAN; cat .env; printf "%s|" "$TMPDIR" "$ODD"; env')
    plan.env.update(TMPDIR="/tmp/x y", ODD="a\nb\\c")  # firejail strips TMPDIR; the check puts it back
    from ai_sandbox import verify

    plan.env.update(verify.pack_env({k: v for k, v in plan.env.items() if not k.startswith(verify.ENV_PREFIX)}))
    res = _run(ws, plan.argv, env=plan.env)
    assert res.rc == 0, res.err
    assert "AGENT-RAN" in res.out and secret not in res.out
    assert "/tmp/x y|a\nb\\c|" in res.out
    assert "container=" not in res.out and verify.ENV_PREFIX not in res.out


@pytest.mark.parametrize(
    "mangle",
    [
        pytest.param(lambda c: c.replace(b"blacklist ", b"# blacklist "), id="missing-mask"),
        pytest.param(lambda c: c.replace(b"/.env\n", b"/.e  nv\n"), id="mangled-mask-line"),  # as blanks collapsed
        pytest.param(lambda c: c.replace(b"read-only ", b"# read-only "), id="missing-read-only"),
        pytest.param(lambda c: c.replace(b"caps.drop all", b"# caps"), id="capabilities-kept"),
    ],
)
def test_the_check_stops_a_profile_that_does_less_than_the_policy(ws, firejail, mangle):
    secret = plant_env(ws)
    plan = _plan(ws, _policy(ws, (".env", False)), "echo AGENT-RAN; cat .env", profile_filter=mangle)
    res = _run(ws, plan.argv, env=plan.env)
    _refused(res, secret)


def test_the_check_stops_a_project_the_sandbox_does_not_show(ws, firejail):
    """firejail's /var/tmp is private: the agent would start in $HOME instead of the project."""
    base = Path("/var/tmp") / token("ais-check")
    base.mkdir()
    try:
        (base / "app.txt").write_text("APP\n")
        if ws.user:
            chown_tree(base, ws.user)
        policy = Policy(root=str(base), in_git=False)
        plan = _plan(ws, policy, "echo AGENT-RAN; pwd", cwd=base)
        res = _run(ws, plan.argv, env=plan.env, cwd=base)
        _refused(res)
        assert "not visible inside the sandbox" in res.err
    finally:
        subprocess.run(["rm", "-rf", str(base)], check=False)


def test_an_ignored_symlink_loop_is_no_reason_to_refuse(ws, firejail):
    """Found by the red team: a link that leads nowhere (here to itself) cannot be masked by firejail, and
    the check refused (exit 69) although nothing can be read through it."""
    secret = plant_env(ws)
    ws.write(".gitignore", ".env\n*.lnk\n")
    ws.git("add", ".gitignore")
    ws.git("commit", "-qm", "ignore links")
    os.symlink("loop.lnk", ws.repo / "loop.lnk")
    res = _run(ws, [AIS, "--", "sh", "-c", "echo AGENT-RAN; cat .env loop.lnk; true"])
    assert res.rc == 0, res.err
    assert "AGENT-RAN" in res.out and secret not in res.out + res.err


@pytest.mark.parametrize("tool", ["firejail", "git"])
def test_a_firejail_or_git_planted_on_path_is_never_run(ws, firejail, tool):
    """Found by the red team: `~/.local/bin` comes first on Debian's PATH and a session can write it. A
    `firejail` planted there that runs its command directly (the launch check never starts, so nothing
    can refuse), or a `git` that lists nothing ignored, ran the next launch unprotected. ai-sandbox runs
    the system's own (tools.SYSTEM_PATH)."""
    secret = plant_env(ws)
    bindir = ws.home / ".local" / "bin"
    bindir.mkdir(parents=True)
    fake = {
        "firejail": '#!/bin/sh\nwhile [ "$1" != -- ]; do shift; done; shift\n'
        'case "$1" in *python*) shift 4;; esac\nexec "$@"\n',
        "git": f'#!/bin/sh\nfor a; do case "$a" in ls-files|check-attr) exit 0;; esac; done\nexec {require("git")} "$@"\n',
    }[tool]
    (bindir / tool).write_text(fake)
    (bindir / tool).chmod(0o755)
    env = ws.env({"PATH": f"{bindir}:{os.environ['PATH']}"})
    res = _run(ws, [AIS, "--", "sh", "-c", "echo AGENT-RAN; cat .env; true"], env=env)
    assert res.rc == 0, res.err
    assert "AGENT-RAN" in res.out and secret not in res.out + res.err


def test_a_file_of_ai_sandbox_with_another_hard_link_refuses(ws, firejail):
    """Twenty-seventh red team, F5: `uv tool install` hard-links what it installs to its cache, ~/.cache/uv, which
    stays writable under write containment: a session appended to ai_sandbox/__init__.py through the cache's link,
    and the next launch ran it outside. A module of the launcher with another hard link refuses (one line)."""
    import shutil

    from tests.conftest import PY

    pkg = ws.base / "pkg"
    shutil.copytree(running_install()["package"], pkg / "ai_sandbox", ignore=shutil.ignore_patterns("__pycache__"))
    env = ws.env({"PYTHONPATH": str(pkg)})
    argv = [PY, "-m", "ai_sandbox", "--", "echo", "@@ran"]
    assert "@@ran" in _run(ws, argv, env=env).out  # the copy runs
    os.link(pkg / "ai_sandbox" / "notices.py", ws.base / "cache-link")  # as uv's cache holds it
    res = _run(ws, argv, env=env)
    assert res.rc == 65 and "@@ran" not in res.out, res.out + res.err
    assert len(res.err.strip().splitlines()) == 1 and "notices.py has another hard link" in res.err, res.err
    ws.config_file.write_text("confine_writes = false\n")  # nothing is read-only then: nothing to go around
    assert "@@ran" in _run(ws, argv, env=env).out
    # the bytecode too, which Python runs in place of the source (twenty-eighth red team)
    ws.config_file.unlink()
    (ws.base / "cache-link").unlink()
    assert "@@ran" in _run(ws, argv, env=env).out
    subprocess.run([PY, "-m", "compileall", "-q", str(pkg)], check=True)  # as an installer may
    pyc = next((pkg / "ai_sandbox" / "__pycache__").glob("main.*.pyc"))
    os.link(pyc, ws.base / "cache-link")
    res = _run(ws, argv, env=env)
    assert res.rc == 65 and f"{pyc.name} has another hard link" in res.err, res.out + res.err
