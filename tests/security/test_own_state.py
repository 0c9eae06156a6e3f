"""What a session can reach of ai-sandbox's own files, with the real firejail, as root and as a user.

The generated profile and launch check (the cache directory) are read-only inside, so one session cannot
swap the next one's; what an earlier session (or anything else) left at a generated file's path — a
directory, a FIFO, a link — is removed, never read or followed; and the parsed-config cache is hidden
inside, so a hidden config file's content cannot be read back from it.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.conftest import Result, Workspace, plant_env, running_install, token

pytestmark = pytest.mark.sandbox


def _generated(ws: Workspace) -> dict[str, str]:
    """The generated files of this project's launch, after a launch wrote them."""
    assert ws.run("--", "true").rc == 0
    res = ws.run("explain", "--json")
    assert res.rc == 0, res.err
    return json.loads(res.out)["files"]


def _show(res: Result) -> Result:
    print(f"--- rc={res.rc}\n--- stdout\n{res.out}\n--- stderr\n{res.err}")
    return res


def test_a_session_cannot_change_the_next_launchs_generated_files(ws, firejail):
    """Old code: the cache directory was writable inside; a session could plant the next profile."""
    secret = plant_env(ws)
    files = _generated(ws)
    cache = Path(next(iter(files))).parent
    before = {p: Path(p).read_bytes() for p in files}
    script = (
        'for f in "$CACHE"/*; do printf "x" >> "$f" && echo "APPENDED $f"; done;'
        ' mkdir "$CACHE/planted" && echo PLANTED-DIR; echo > "$CACHE/new" && echo PLANTED-FILE;'
        ' rm -f "$CACHE"/* && echo REMOVED; true'
    )
    res = _show(ws.run("--", "sh", "-c", script, env={"CACHE": str(cache)}))
    assert res.rc == 0, res.err
    assert "APPENDED" not in res.out and "PLANTED" not in res.out and "REMOVED" not in res.out
    assert {p: Path(p).read_bytes() for p in files} == before
    again = _show(ws.run("--", "cat", ".env"))
    assert secret not in again.out + again.err


@pytest.mark.parametrize("kind", ["directory", "fifo", "symlink"])
def test_what_stands_at_a_generated_files_path_is_replaced_not_used(ws, firejail, kind):
    """Old code: a directory there made the launch exit 70, a FIFO made it hang, a link was followed."""
    secret = plant_env(ws)
    files = _generated(ws)
    decoy = ws.base / "decoy.profile"
    decoy.write_text("quiet\n")  # a profile that hides nothing
    for path in files:
        p = Path(path)
        p.unlink()
        if kind == "directory":
            p.mkdir()
            (p / "inside").write_text("x")
        elif kind == "fifo":
            os.mkfifo(p)
        else:
            p.symlink_to(decoy)
    res = _show(ws.run("--", "sh", "-c", "echo AGENT-RAN; cat .env; true", timeout=30))
    assert res.rc == 0, res.err
    assert "AGENT-RAN" in res.out and secret not in res.out + res.err
    for path, content in files.items():
        p = Path(path)
        assert not p.is_symlink() and p.is_file(), path
        if path.endswith(".pyc"):  # the launch check's bytecode: explain gives its size
            assert content == f"{p.stat().st_size} bytes", path
        else:
            assert p.read_bytes() == content.encode("utf-8", "surrogateescape")
    assert decoy.read_text() == "quiet\n"


def test_a_hidden_project_config_cannot_be_read_back_from_the_parse_cache(ws, firejail):
    """Old code: the parse cache under ~/.local/state/ai-sandbox/parsed/ held the raw bytes of every
    config file, readable inside, including a git-ignored `.ai-sandbox.toml`."""
    secret = token("CONFSECRET")
    ws.write(".gitignore", ".env\n.ai-sandbox.toml\n")
    ws.git("add", ".gitignore")
    ws.git("commit", "-qm", "ignore")
    ws.write(".ai-sandbox.toml", f'# staging password: {secret}\nblock = ["notes.txt"]\n')
    first = _show(ws.run("--", "true"))
    assert first.rc == 0, first.err
    state = ws.home / ".local" / "state"
    res = _show(ws.run("--", "sh", "-c", 'grep -r . "$S" 2>&1; cat .ai-sandbox.toml; true', env={"S": str(state)}))
    assert secret not in res.out + res.err
    host = subprocess.run(["grep", "-rl", secret, str(state)], capture_output=True, text=True)
    assert host.stdout == "", f"the secret was stored in {host.stdout}"


def test_a_session_cannot_change_ai_sandboxs_code_or_the_launch_checks_interpreter(ws, firejail):
    """The next launch runs this code (and the check inside runs this interpreter): a session that could
    write them could switch the check off. Old code: root inside could write the package (it owns it; no
    capability is needed); the red team then found the rest writable too — the environment's
    site-packages (a `.pth` file runs at the next launch), the interpreter's installation, the shipped
    profiles of a source checkout (whose `allow` the record trusts). Opening for append writes nothing,
    and what is planted is removed, so a failure of this test changes no byte."""
    run = running_install()
    targets = {
        "CODE": os.path.join(run["package"], "__init__.py"),
        "PYBIN": run["python"],  # the launch check's interpreter
        "PROFILE": os.path.join(run["profiles"], "claude.toml"),
    }
    plants = {
        "PKGDIR": os.path.join(run["package"], "planted-by-session"),
        "SITE": os.path.join(run["site"], "zz-planted-by-session.pth"),
        "BASE": os.path.join(os.path.realpath(run["base_prefix"]), "planted-by-session"),
    }
    if run["hooks"]:  # Debian's sitecustomize.py links into /etc/python3.X, which root inside could write
        plants["HOOKDIR"] = os.path.join(run["hooks"], "planted-by-session")
        targets["HOOK"] = os.path.join(run["hooks"], "sitecustomize.py")
    try:
        script = " ".join(f'true >> "${k}" && echo WROTE-{k};' for k in targets)
        script += " ".join(f'touch "${k}" && echo PLANTED-{k};' for k in plants) + " true"
        res = _show(ws.run("--", "sh", "-c", script, env={**targets, **plants}))
        assert res.rc == 0, res.err
        assert "WROTE-" not in res.out and "PLANTED-" not in res.out
    finally:
        for p in plants.values():
            if os.path.lexists(p):
                os.unlink(p)


@pytest.mark.backends("firejail", "bwrap")
def test_a_session_cannot_plant_bytecode_where_the_next_launch_reads_it(ws):
    """With PYTHONPYCACHEPREFIX set (often under ~/.cache, writable inside), the next launch reads its bytecode
    there: a .pyc with the source's 16-byte header and code of the session's choosing ran in the launcher,
    outside, and (copied by host.compiled_verifier) as the launch check (thirtieth red team, F1). Old code: the
    prefix was writable inside."""
    secret = plant_env(ws)
    prefix = ws.home / ".cache" / "pycache"
    prefix.mkdir(parents=True)
    env = {"PYTHONPYCACHEPREFIX": str(prefix), "PLANT": str(prefix / "planted-by-session")}
    assert ws.run("--", "true", env=env).rc == 0  # the launcher keeps its own bytecode there, outside
    res = _show(ws.run("--", "sh", "-c", 'mkdir -p "$PLANT" && echo PLANTED; cat .env; true', env=env))
    assert res.rc == 0, res.err
    assert "PLANTED" not in res.out and secret not in res.out + res.err
    assert not (prefix / "planted-by-session").exists()


def test_the_directory_holding_the_package_and_the_bytecode_prefix_are_read_only_inside(monkeypatch, tmp_path):
    """The directory that holds ai_sandbox is an entry of the launcher's sys.path: an editable install's `src/`
    (beside the package, not in it) took a planted `_sha2.py` or `msvcrt.py`, which the next launch's failing
    imports found (thirtieth red team, F2). It, and the bytecode prefix, are among the paths made read-only."""
    import ai_sandbox
    from ai_sandbox.backends import host

    monkeypatch.setattr("sys.pycache_prefix", str(tmp_path))
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "c"), "XDG_STATE_HOME": str(tmp_path / "s"),
           "XDG_CACHE_HOME": str(tmp_path / "k")}  # fmt: skip
    own = host.own_files(env, lambda p: None)
    holder = os.path.realpath(os.path.dirname(os.path.dirname(ai_sandbox.__file__)))
    for path in (holder, os.path.realpath(tmp_path)):
        assert any(path == p or path.startswith(p.rstrip("/") + "/") for p in own.protect), (path, own.protect)


def test_every_directory_the_launcher_imports_from_is_read_only_inside_but_pythonpath(monkeypatch, tmp_path):
    """Every entry of the launcher's sys.path is where a failing import (`msvcrt` in subprocess) looks: pipx's
    shared site-packages, which its `pipx_shared.pth` adds, took a planted `msvcrt.py` that the next launch ran
    outside (thirty-first red team, G1, with confine_writes = false). PYTHONPATH's entries are the user's
    (`src` of the project, which the agent edits): doctor warns of those, and make install's -I ignores them."""
    from ai_sandbox.backends import host

    shared, mine = tmp_path / "pipx-shared", tmp_path / "project-src"
    shared.mkdir()
    mine.mkdir()
    monkeypatch.setattr("sys.path", [*__import__("sys").path, str(shared), str(mine)])
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "c"), "XDG_STATE_HOME": str(tmp_path / "s"),
           "XDG_CACHE_HOME": str(tmp_path / "k"), "PYTHONPATH": f"{tmp_path}/nowhere:{mine}"}  # fmt: skip
    own = host.own_files(env, lambda p: None)
    covered = lambda path: any(path == p or path.startswith(p.rstrip("/") + "/") for p in own.protect)  # noqa: E731
    assert covered(os.path.realpath(shared)), own.protect
    assert not covered(os.path.realpath(mine)), own.protect


def test_a_directory_a_pth_file_adds_cannot_be_planted_in(ws, firejail):
    """The same with the real sandbox: a `.pth` in the launcher's site-packages names a directory outside it (as
    pipx's does), and a session cannot put a module there. The .pth is removed whatever happens."""
    run = running_install()
    shared = ws.base / "pipx-shared"
    shared.mkdir()
    pth = os.path.join(run["site"], "zz-test-shared.pth")
    try:
        with open(pth, "w") as f:
            f.write(str(shared) + "\n")
        res = _show(ws.run("--", "sh", "-c", f'echo "raise SystemExit" > {shared}/msvcrt.py && echo PLANTED; true'))
        assert res.rc == 0, res.err
        assert "PLANTED" not in res.out and not (shared / "msvcrt.py").exists()
    finally:
        os.unlink(pth)


@pytest.mark.parametrize("holder", [".", ".."])
def test_an_import_path_entry_that_holds_the_project_refuses(ws, firejail, holder):
    """Thirty-second red team: a `.pth` in the launcher's site-packages named the project (a flat-layout editable
    install of it, in the venv ai-sandbox runs from); left writable, a session's `sitecustomize.py` there ran in
    the next launch, outside, since Python imports it at every start. Old code: the launch went on."""
    secret = plant_env(ws)
    run = running_install()
    entry = os.path.realpath(ws.repo if holder == "." else ws.repo.parent)
    pth = os.path.join(run["site"], "zz-test-project.pth")
    try:
        with open(pth, "w") as f:
            f.write(entry + "\n")
        res = _show(ws.run("--", "sh", "-c", "echo @@ran; cat .env; true"))
    finally:
        os.unlink(pth)
    assert res.rc == 69 and "@@ran" not in res.out and secret not in res.out + res.err
    assert "is on ai-sandbox's own import path" in res.err and "make install" in res.err, res.err


@pytest.mark.parametrize("moved", [".local", ".config", ".cache"])
def test_a_session_cannot_move_ais_own_directories_aside(ws, firejail, moved):
    """Found by the red team: the read-only mounts of ~/.local/state/ai-sandbox, ~/.config/ai-sandbox and
    ~/.cache/ai-sandbox moved along with a renamed parent, and the session then wrote fresh ones — no
    record (the next launch un-hid .env unasked), its own agent profile (whose `allow` the record
    trusts), its own generated profile. Every directory above them that the agent could rename is now a
    mount point (EBUSY)."""
    secret = plant_env(ws)
    stub = ws.base / "bin" / "claude"
    stub.parent.mkdir()
    stub.write_text('#!/bin/sh\nexec sh -c "$@"\n')
    stub.chmod(0o755)
    path = {"PATH": f"{stub.parent}:{os.environ['PATH']}"}
    assert ws.run("claude", "true", env=path).rc == 0  # the first launch records .env as hidden
    script = (
        f'mv "$HOME/{moved}" "$HOME/{moved}.moved" && echo MOVED;'
        ' mkdir -p "$HOME/.config/ai-sandbox/profiles" "$HOME/.local/state" "$HOME/.cache";'
        ' printf "allow = [\\".env\\"]\\n" > "$HOME/.config/ai-sandbox/profiles/claude.toml";'
        ' printf "secrets/\\n" > .gitignore; true'
    )
    first = _show(ws.run("claude", script, env=path))
    assert first.rc == 0, first.err
    assert "MOVED" not in first.out
    assert (ws.home / moved).is_dir() and not (ws.home / f"{moved}.moved").exists()
    second = _show(ws.run("claude", "cat .env; true", env=path))
    assert secret not in second.out + second.err


def test_a_link_on_the_way_to_ais_own_directories_refuses(ws, firejail):
    """Found by the second red-team round: with `~/.config -> dotfiles/config`, only the link's target was
    protected; a session replaced the link by a directory holding its own agent profile (whose `allow`
    the record trusts), and the next session read the secret."""
    secret = plant_env(ws)
    target = ws.home / "dotfiles" / "config"
    target.mkdir(parents=True)
    (ws.home / ".config" / "ai-sandbox").rmdir()
    (ws.home / ".config").rmdir()
    (ws.home / ".config").symlink_to(target)
    stub = ws.base / "bin" / "claude"
    stub.parent.mkdir()
    stub.write_text('#!/bin/sh\nexec sh -c "$@"\n')
    stub.chmod(0o755)
    env = {"PATH": f"{stub.parent}:{os.environ['PATH']}"}
    first = _show(ws.run("claude", "echo AGENT-RAN", env=env))
    assert first.rc == 69 and "AGENT-RAN" not in first.out
    assert ".config is a symlink" in first.err and len(first.err.strip().splitlines()) == 1
    attack = (
        'rm "$HOME/.config" && mkdir -p "$HOME/.config/ai-sandbox/profiles" &&'
        ' printf "allow = [\\".env\\"]\\n" > "$HOME/.config/ai-sandbox/profiles/claude.toml"; true'
    )
    _show(ws.run("claude", attack, env=env))
    second = _show(ws.run("claude", "cat .env; true", env=env))
    assert secret not in second.out + second.err


def test_what_a_link_in_the_config_leads_to_is_read_only_inside(ws, firejail):
    """A profiles directory kept in a dotfiles checkout (`profiles -> ~/dotfiles/profiles`): the config is
    read-only inside, the link's target was not, and a profile written there was trusted next time."""
    secret = plant_env(ws)
    target = ws.home / "dotfiles" / "profiles"
    target.mkdir(parents=True)
    (ws.home / ".config" / "ai-sandbox" / "profiles").symlink_to(target)
    stub = ws.base / "bin" / "claude"
    stub.parent.mkdir()
    stub.write_text('#!/bin/sh\nexec sh -c "$@"\n')
    stub.chmod(0o755)
    env = {"PATH": f"{stub.parent}:{os.environ['PATH']}"}
    assert _show(ws.run("claude", "true", env=env)).rc == 0
    attack = f'printf "allow = [\\".env\\"]\\n" > "{target}/claude.toml" && echo PLANTED; true'
    res = _show(ws.run("claude", attack, env=env))
    assert "PLANTED" not in res.out
    second = _show(ws.run("claude", "cat .env; true", env=env))
    assert secret not in second.out + second.err
