"""The everyday commands with real git and firejail: explain, init, doctor, alias, profiles, and nesting."""

from __future__ import annotations

import json
import os
import subprocess
import tomllib
from pathlib import Path

import pytest

from tests.conftest import AIS, PY, SYSTEM_BIN, Result, require, setpriv_argv

pytestmark = pytest.mark.sandbox


def _commit(ws, *paths: str) -> None:
    ws.git("add", *paths)
    ws.git("commit", "-qm", "files")


def _project(ws) -> None:
    """A repository with something in every layer."""
    ws.write(".gitignore", ".env\nprivate/\nnode_modules/\ndist/\n")
    ws.write("infra/prod.tfvars", "SECRET-TFVARS\n")
    ws.write("src/app.py", "SOURCE\n")
    ws.write(".ai-sandbox.toml", 'block = ["/infra/prod.tfvars"]\n')
    _commit(ws, ".gitignore", "infra/prod.tfvars", "src/app.py", ".ai-sandbox.toml")
    ws.write(".env", "SECRET-ENV\n")
    ws.write("private/out.bin", "SECRET-PRIVATE\n")
    ws.write("dist/app.js", "BUILT\n")
    ws.write("dist/.env.production", "SECRET-IN-DIST\n")
    ws.write("node_modules/pkg/index.js", "DEP\n")
    ws.write("creds.txt", "SECRET-GLOBAL\n")
    ws.config_file.write_text('block = ["creds.txt"]\n')


# ---------------------------------------------------------------- explain


def test_explain_names_the_layer_and_rule_of_each_path(ws_self):
    _project(ws_self)
    res = ws_self.run(
        "explain",
        ".env",
        "private/out.bin",
        "infra/prod.tfvars",
        "creds.txt",
        "node_modules/pkg",
        "src/app.py",
        "dist/app.js",
        "dist/.env.production",
    )
    assert res.rc == 0, res.err
    rows = {line.split()[0]: line for line in res.out.splitlines() if line.strip()}
    assert "hidden" in rows[".env"] and "ignored" in rows[".env"] and ".gitignore:1: .env" in rows[".env"]
    assert "hidden" in rows["private/out.bin"] and "private/" in rows["private/out.bin"]
    assert "readable" in rows["dist/app.js"] and "dist/ (build output)" in rows["dist/app.js"]
    assert "hidden" in rows["dist/.env.production"] and "secret-looking name (.env*)" in rows["dist/.env.production"]
    assert "explicit" in rows["infra/prod.tfvars"] and ".ai-sandbox.toml:1" in rows["infra/prod.tfvars"]
    assert "global" in rows["creds.txt"] and "config.toml:1" in rows["creds.txt"]
    assert "readable" in rows["node_modules/pkg"] and "dependency directory" in res.out
    assert "readable" in rows["src/app.py"] and "not ignored by git and not blocked" in rows["src/app.py"]


def test_explain_json_is_what_the_sandbox_enforces(ws_self, firejail):
    _project(ws_self)
    res = ws_self.run("explain", "--json")
    assert res.rc == 0, res.err
    doc = json.loads(res.out)
    assert doc["schema"] == 1 and doc["git"] is True and doc["project"] == str(ws_self.repo)
    hidden = {(h["path"], h["layer"]) for h in doc["hidden"]}
    root = str(ws_self.repo)
    assert hidden == {
        (f"{root}/.env", "ignored"),
        (f"{root}/private", "ignored"),
        (f"{root}/dist/.env.production", "ignored"),
        (f"{root}/infra/prod.tfvars", "explicit"),
        (f"{root}/creds.txt", "global"),
    }
    # the profile the launch writes blacklists exactly these paths (and ai-sandbox's parse cache and lock files),
    # and the launch check it writes verifies the same
    (profile,) = (c for p, c in doc["files"].items() if p.endswith(".profile"))
    (check,) = (c for p, c in doc["files"].items() if os.path.basename(p).startswith("check-"))
    assert all(p.endswith((".profile", ".pyc")) or "/check-" in p for p in doc["files"])  # .pyc: the check's code
    state = ws_self.home / ".local" / "state" / "ai-sandbox"
    own = {str(state / "parsed"), str(state / "locks")}
    # and the host's sockets (network.md): those under /run, and X11's, which firejail's private /tmp shows again
    own |= set(doc["network"]["sockets"]["masked"]) | (
        {"/tmp/.X11-unix"} if os.path.lexists("/tmp/.X11-unix") else set()
    )
    blacklisted = {line.removeprefix("blacklist ") for line in profile.splitlines() if line.startswith("blacklist ")}
    scratch = {line.removeprefix("tmpfs ") for line in profile.splitlines() if line.startswith("tmpfs ")}
    assert blacklisted | scratch == {p for p, _ in hidden} | own and not blacklisted & scratch
    assert scratch == {h["path"] for h in doc["hidden"] if h["writes"] == "scratch"}
    records = check.split("\n", 1)[1].split("\0")
    assert {r[1:] for r in records if r[:1] in ("M", "m")} == blacklisted
    assert {r[1:] for r in records if r.startswith("T")} == scratch
    cmd = "cat .env private/out.bin dist/.env.production infra/prod.tfvars creds.txt src/app.py dist/app.js; true"
    inside = ws_self.run("--", "sh", "-c", cmd)
    assert "SOURCE" in inside.out and "BUILT" in inside.out and "SECRET" not in inside.out
    paths = json.loads(ws_self.run("explain", "--json", ".env", "src").out)["paths"]
    assert paths[0]["hidden"] is True and paths[0]["layer"] == "ignored"
    assert paths[1]["hidden"] is False and paths[1]["layer"] is None


def test_explain_warns_about_history_hard_links_symlinks_and_widening(ws_self, tmp_world):
    ws_self.write("config/prod.yml", "SECRET\n")
    ws_self.write("sub/tracked.txt", "visible\n")
    _commit(ws_self, "config/prod.yml", "sub/tracked.txt")
    ws_self.write(".ai-sandbox.toml", 'block = ["config/prod.yml"]\n')
    ws_self.write(".gitignore", ".env\nlink\nodd*\n")
    ws_self.write(".env", "SECRET\n")
    os.link(ws_self.repo / ".env", tmp_world / "env-copy")
    outside = tmp_world / "outside-secret"
    outside.write_text("SECRET\n")
    os.symlink(outside, ws_self.repo / "link")
    ws_self.write("sub/odd,name", "SECRET\n")
    doc = json.loads(ws_self.run("explain", "--json").out)
    kinds: dict[str, list[dict]] = {}
    for w in doc["warnings"]:
        kinds.setdefault(w["kind"], []).append(w)
    history = " ".join(w["message"] for w in kinds["history"])
    assert "git show HEAD:config/prod.yml" in history
    assert "git show HEAD:sub/tracked.txt" in history  # the widened directory hides a tracked file too
    assert [w["path"] for w in kinds["hardlink"]] == [str(ws_self.repo / ".env")]
    assert str(outside) in kinds["symlink"][0]["message"]
    assert "odd,name" in kinds["widened"][0]["message"]
    text = ws_self.run("explain").out
    assert "git show HEAD:config/prod.yml" in text and "hard link" in text
    dry = ws_self.run("--dry-run", "--", "true").out
    assert "git show HEAD:config/prod.yml" in dry and ".gitignore:1: .env" in dry


def test_explain_for_an_agent_uses_its_profile(ws_self):
    ws_self.write(".gitignore", "opencode.json\n")
    _commit(ws_self, ".gitignore")
    ws_self.write("opencode.json", "{}\n")
    plain = json.loads(ws_self.run("explain", "--json", "opencode.json").out)["paths"][0]
    agent = json.loads(ws_self.run("explain", "--json", "--agent", "opencode", "opencode.json").out)
    assert plain["hidden"] is True
    assert agent["agent"] == "opencode" and agent["paths"][0]["hidden"] is False
    assert "profile opencode" in agent["paths"][0]["rule"]


def test_explain_refuses_a_broken_config_in_one_line(ws_self):
    ws_self.write(".ai-sandbox.toml", "block = [\n")
    res = ws_self.run("explain")
    assert res.rc == 78 and ".ai-sandbox.toml" in res.err
    assert len(res.err.strip().splitlines()) == 1 and "Traceback" not in res.err


# ---------------------------------------------------------------- init


def test_init_writes_a_commented_template_with_suggestions(ws_self, firejail):
    ws_self.write(".gitignore", "node_modules/\ndist/\n")
    ws_self.write("infra/prod.tfvars", "SECRET-TF\n")
    ws_self.write("keys/deploy.pem", "SECRET-PEM\n")
    ws_self.write(".env.example", "TEMPLATE\n")
    ws_self.write("src/secret_manager.py", "code\n")
    _commit(ws_self, ".")
    ws_self.write("node_modules/x/i.js", "")
    ws_self.write("dist/app.js", "")
    ws_self.write(".envrc", "export TOKEN=SECRET-ENVRC\n")  # untracked, not ignored: readable today
    res = ws_self.run("init", cwd=ws_self.repo / "src")
    assert res.rc == 0, res.err
    path = ws_self.repo / ".ai-sandbox.toml"
    text = path.read_text()
    assert tomllib.loads(text) == {"block": [], "allow": []}  # suggestions only, all commented
    for suggestion in ('# "/infra/prod.tfvars",', '# "/keys/deploy.pem",', '# "/.envrc",'):
        assert suggestion in text
    assert ".env.example" not in text and "secret_manager" not in text
    assert "node_modules/" in text and "dependencies" in text
    assert "dist/" in text and "build outputs" in text
    # uncommenting a suggestion hides the file
    path.write_text(text.replace('# "/infra/prod.tfvars",', '"/infra/prod.tfvars",'))
    res = ws_self.run("--", "sh", "-c", "cat infra/prod.tfvars; true")
    assert res.rc == 0 and "SECRET-TF" not in res.out


def test_init_refuses_to_clobber_and_force_keeps_entries(ws_self):
    path = ws_self.write(".ai-sandbox.toml", 'block = ["mine/", "odd \\"quoted\\" name"]\nallow = ["build/keep/"]\n')
    before = path.read_text()
    res = ws_self.run("init")
    assert res.rc == 73 and "already exists" in res.err and "--force" in res.err
    assert path.read_text() == before
    res = ws_self.run("init", "--force")
    assert res.rc == 0, res.err
    data = tomllib.loads(path.read_text())
    assert data == {"block": ["mine/", 'odd "quoted" name'], "allow": ["build/keep/"]}


def test_init_migrates_the_legacy_file(ws_self):
    home = ws_self.home
    ws_self.write(
        ".ai-sandbox", f'AI_SANDBOX_BLOCK_PATHS=({ws_self.repo}/config/prod.yml "$HOME/.aws" /opt/elsewhere)\n'
    )
    ws_self.write(".gitignore", "")
    res = ws_self.run("init")
    assert res.rc == 0, res.err
    text = (ws_self.repo / ".ai-sandbox.toml").read_text()
    assert tomllib.loads(text)["block"] == ["/config/prod.yml", "~/.aws"]
    assert "/opt/elsewhere" in text and "Not migrated" in text
    assert str(home) not in text


def test_init_outside_git_refuses(tmp_world):
    d = tmp_world / "plain"
    d.mkdir()
    proc = subprocess.run([AIS, "init", str(d)], capture_output=True, text=True)
    assert proc.returncode == 64 and "not inside a git work tree" in proc.stderr
    assert not (d / ".ai-sandbox.toml").exists()


# ---------------------------------------------------------------- doctor


def test_doctor_passes_with_a_working_sandbox(ws_self, firejail):
    res = ws_self.run("doctor")
    assert res.rc == 0, res.out + res.err
    assert "✓ backend firejail: firejail version" in res.out
    assert "✓ sandbox hides files" in res.out and "✓ project policy" in res.out


def test_doctor_reports_every_backend_and_uses_the_one_that_works(ws_self):
    from tests.integration.test_launch import without

    def doctor(*tools: str) -> Result:
        proc = subprocess.run(
            without(tools, [AIS, "doctor"]), cwd=ws_self.repo, env=ws_self.env(), capture_output=True, text=True
        )
        assert "Traceback" not in proc.stderr
        return Result(proc.returncode, proc.stdout, proc.stderr)

    res = doctor("firejail")
    assert res.rc == 0, res.out
    assert "! backend firejail: firejail is not installed" in res.out and "apt-get install firejail" in res.out
    assert "✓ backend bwrap: bubblewrap" in res.out and "— in use" in res.out
    assert "✓ sandbox hides files (bwrap)" in res.out
    res = doctor("firejail", "bwrap")
    assert res.rc == 69
    assert "✗ backend firejail: firejail is not installed" in res.out
    assert "✗ backend bwrap: bubblewrap is not installed" in res.out and "apt-get install bubblewrap" in res.out


def test_doctor_warns_when_the_launcher_reads_pythonpath(ws_self, firejail):
    """The venv's pip entry script starts Python without -I: a PYTHONPATH naming a project's directory is
    searched before the standard library, so doctor says so; started isolated, it is not read."""
    planted = ws_self.repo / "src"
    planted.mkdir()
    res = ws_self.run("doctor", env={"PYTHONPATH": str(planted)})
    assert res.rc == 0, res.out + res.err
    assert "! launcher: this Python reads PYTHONPATH" in res.out and "env -u PYTHONPATH ai-sandbox" in res.out
    plain = {k: v for k, v in ws_self.env().items() if k not in ("PYTHONPATH", "PYTHONWARNINGS")}
    quiet = ws_self.run("doctor", env=plain, raw_env=True)
    assert "✓ launcher: no PYTHONPATH" in quiet.out, quiet.out
    argv = [PY, "-I", "-m", "ai_sandbox", "doctor"]
    isolated = subprocess.run(
        setpriv_argv(ws_self.user.uid, ws_self.user.gid, argv) if ws_self.user else argv,
        cwd=ws_self.repo,
        env=ws_self.env({"PYTHONPATH": str(planted)}),
        capture_output=True,
        text=True,
    )
    assert "✓ launcher: Python started isolated (-I)" in isolated.stdout, isolated.stdout + isolated.stderr


def test_doctor_fails_on_a_broken_user_config(ws_self, firejail):
    ws_self.config_file.write_text("backend = 3\n")
    res = ws_self.run("doctor")
    assert res.rc == 69 and "✗ user config" in res.out and "config.toml:1" in res.out


# ---------------------------------------------------------------- alias, profiles, nesting


def _fake_agent(base: Path, name: str = "claude") -> Path:
    """An 'agent' that shows its arguments and tries to read the project's secret."""
    bindir = base / "agents"
    bindir.mkdir(exist_ok=True)
    agent = bindir / name
    agent.write_text("#!/bin/sh\nprintf '[%s]' \"$@\"; echo; cat .env 2>/dev/null; echo AGENT-RAN\n")
    agent.chmod(0o755)
    return bindir


SHELL_RUN = {
    "bash": ["bash", "-c", 'eval "$(ai-sandbox alias --shell bash)"; claude "two words" x'],
    "zsh": ["zsh", "-fc", 'eval "$(ai-sandbox alias --shell zsh)"; claude "two words" x'],
    "fish": ["fish", "--no-config", "-c", 'ai-sandbox alias --shell fish | source; claude "two words" x'],
}


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_alias_output_runs_the_agent_sandboxed_in_each_shell(ws, firejail, tmp_world, shell):
    require(shell)
    ws.write(".gitignore", ".env\n")
    ws.write(".env", "SECRET-ALIAS\n")
    bindir = _fake_agent(tmp_world)
    path = f"{bindir}:{Path(AIS).parent}:{SYSTEM_BIN}"
    cmd = SHELL_RUN[shell]
    if ws.user:
        ws.run("--version")  # hands the workspace to the user
        cmd = ["setpriv", f"--reuid={ws.user.uid}", f"--regid={ws.user.gid}", "--clear-groups", "--", *cmd]
    proc = subprocess.run(cmd, cwd=ws.repo, env=ws.env({"PATH": path}), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "[two words][x]" in proc.stdout and "AGENT-RAN" in proc.stdout
    assert "SECRET-ALIAS" not in proc.stdout


def test_alias_lists_installed_agents_unless_all(ws_self, tmp_world):
    bindir = _fake_agent(tmp_world, "codex")
    env = {"PATH": f"{bindir}:{SYSTEM_BIN}"}
    out = ws_self.run("alias", "--shell", "bash", env=env).out
    assert "function codex {" in out and "function claude" not in out
    out = ws_self.run("alias", "--shell", "bash", "--all", env=env).out
    assert all(f"function {n} {{" in out for n in ("aider", "claude", "codex", "gemini", "opencode"))
    res = ws_self.run("alias", "--shell", "tcsh")
    assert res.rc == 64 and "unknown shell" in res.err


@pytest.mark.backends("firejail", "bwrap")
def test_a_nested_launch_runs_directly_inside_the_sandbox(ws, firejail, tmp_world):
    ws.write(".gitignore", ".env\n")
    ws.write(".env", "SECRET-NESTED\n")
    bindir = _fake_agent(tmp_world)
    path = f"{bindir}:{Path(AIS).parent}:{SYSTEM_BIN}"
    # the agent's shell has the wrappers from its rc file: `claude` inside means ai-sandbox inside
    script = 'eval "$(ai-sandbox alias --shell bash)"; claude nested; echo "status=$?"'
    res = ws.run("--", "bash", "-c", script, env={"PATH": path})
    assert res.rc == 0, res.err
    assert "[nested]" in res.out and "AGENT-RAN" in res.out and "status=0" in res.out
    assert "SECRET-NESTED" not in res.out


@pytest.mark.backends("firejail", "bwrap")
def test_a_nested_launch_refuses_what_the_outer_sandbox_does_not_hide(ws_self, firejail, tmp_world):
    other = tmp_world / "other"
    other.mkdir()
    ws_self.git("init", "-q", cwd=other)
    (other / ".gitignore").write_text(".env\n")
    (other / ".env").write_text("SECRET-OTHER\n")
    res = ws_self.run("--", "sh", "-c", f"cd {other} && {AIS} -- cat .env; echo status=$?")
    assert "SECRET-OTHER" not in res.out
    assert "status=69" in res.out
    assert "already inside a sandbox" in res.err and str(other / ".env") in res.err


def test_profiles_lists_agents_and_marks_the_installed_ones(ws_self, tmp_world):
    bindir = _fake_agent(tmp_world, "gemini")
    user_profiles = ws_self.home / ".config" / "ai-sandbox" / "profiles"
    user_profiles.mkdir()
    (user_profiles / "mytool.toml").write_text('description = "my own tool"\nexecutable = "gemini"\n')
    res = ws_self.run("profiles", env={"PATH": f"{bindir}:{SYSTEM_BIN}", "COLUMNS": "200"})
    assert res.rc == 0, res.err
    rows = {line.split()[1]: line for line in res.out.splitlines() if line.strip() and line.split()[0] in "✓·"}
    assert set(rows) >= {"aider", "claude", "codex", "gemini", "opencode", "mytool"}
    assert rows["gemini"].startswith("✓") and str(bindir / "gemini") in rows["gemini"]
    assert rows["aider"].startswith("·") and "not installed" in rows["aider"]
    assert str(user_profiles / "mytool.toml") in rows["mytool"] and "built-in" in rows["claude"]


def test_a_wrapper_script_named_like_the_agent_is_skipped(ws_self, firejail, tmp_world):
    real = _fake_agent(tmp_world)
    wrappers = tmp_world / "wrappers"
    wrappers.mkdir()
    (wrappers / "claude").write_text(f'#!/bin/sh\nexec {AIS} claude "$@"\n')
    (wrappers / "claude").chmod(0o755)
    res = ws_self.run("claude", "hi", env={"PATH": f"{wrappers}:{real}:{SYSTEM_BIN}"}, timeout=30)
    assert res.rc == 0, res.err
    assert "[hi]" in res.out
    res = ws_self.run("claude", "hi", env={"PATH": f"{wrappers}:{SYSTEM_BIN}"}, timeout=30)
    assert res.rc == 127 and "only wrappers" in res.err


def test_shell_completion_offers_the_commands(ws_self):
    env = ws_self.env({"_AI_SANDBOX_COMPLETE": "complete_bash", "COMP_WORDS": "ai-sandbox ex", "COMP_CWORD": "1"})
    proc = subprocess.run([AIS], env=env, capture_output=True, text=True, cwd=ws_self.repo)
    assert proc.returncode == 0 and proc.stdout.split() == ["explain"]


# ---------------------------------------------------------------- accept


def test_a_rule_change_is_refused_until_accepted(ws_self, firejail):
    ws_self.write(".gitignore", ".env\n")
    ws_self.write(".env", "SECRET-ACCEPT\n")
    assert ws_self.run("--", "true").rc == 0  # records .env as hidden
    ws_self.write(".gitignore", "")  # the user (or a session) un-ignores it
    res = ws_self.run("--", "cat", ".env")
    assert res.rc == 65 and "SECRET-ACCEPT" not in res.out
    assert f"{ws_self.repo}/.env was hidden at the last launch" in res.err and "ai-sandbox accept" in res.err
    assert "unhidden" in ws_self.run("explain").out
    assert "a launch would refuse" in ws_self.run("--dry-run", "--", "true").out
    res = ws_self.run("accept")
    assert res.rc == 0 and "forgot what the last launch hid" in res.out
    res = ws_self.run("--", "cat", ".env")
    assert res.rc == 0 and "SECRET-ACCEPT" in res.out  # the user's decision, now in force


def test_switching_agents_is_not_a_rule_change(ws_self, firejail):
    ws_self.write(".gitignore", "opencode.json\n")
    ws_self.write("opencode.json", "{}\n")
    assert ws_self.run("--", "true").rc == 0  # generic: opencode.json hidden
    bindir = ws_self.base / "bin"
    bindir.mkdir()
    (bindir / "opencode").write_text("#!/bin/sh\ncat opencode.json\n")
    (bindir / "opencode").chmod(0o755)
    res = ws_self.run("opencode", env={"PATH": f"{bindir}:{SYSTEM_BIN}"})
    assert res.rc == 0, res.err  # its profile keeps it readable: not a change of rules
    assert res.out == "{}\n"


@pytest.mark.backends("firejail", "bwrap")
def test_a_key_in_a_build_output_is_hidden_whatever_wide_pattern_it_also_matches(ws_self):
    """`secret.asc` is an armored key by `*.asc`; `*secret*` (data files only) matched it first and passed over
    it, which left it readable in dist/ while `key.asc` was hidden (thirtieth red team, F3)."""
    ws_self.write(".gitignore", "dist/\n")
    _commit(ws_self, ".gitignore")
    ws_self.write("dist/app.js", "BUILT\n")
    ws_self.write("dist/secret.asc", "ARMORED-SECRET\n")
    ws_self.write("dist/Secrets.age", "AGE-SECRET\n")
    res = ws_self.run("--", "sh", "-c", "cat dist/app.js dist/secret.asc dist/Secrets.age; true")
    assert res.rc == 0, res.err
    assert "BUILT" in res.out and "ARMORED-SECRET" not in res.out + res.err and "AGE-SECRET" not in res.out + res.err
