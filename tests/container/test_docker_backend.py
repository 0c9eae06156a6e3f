"""The container backend driven through podman (the same command line as docker) with a busybox image:
the project readable and writable back to the host, every layer's secrets hidden, allowlists honoured,
the environment passed through, exit codes, odd paths."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.conftest import AIS, new_workspace, require

pytestmark = pytest.mark.sandbox

READ_ALL = "cat .env secrets/key infra/prod.tfvars creds.txt src/app.py .claude/settings.json node_modules/x/i.js; ls -a secrets; true"


def _layers(ws) -> None:
    ws.write(".gitignore", ".env\nsecrets/\n.claude/\nnode_modules/\n")
    ws.write("src/app.py", "SOURCE-VISIBLE\n")
    ws.write("infra/prod.tfvars", "SECRET-EXPLICIT\n")
    ws.write(".ai-sandbox.toml", 'block = ["*.tfvars"]\n')
    ws.git("add", ".")
    ws.git("commit", "-qm", "layers")
    ws.write(".env", "SECRET-IGNORED\n")
    ws.write("secrets/key", "SECRET-DIR\n")
    ws.write("creds.txt", "SECRET-GLOBAL\n")
    ws.write(".claude/settings.json", "TOOL-VISIBLE\n")
    ws.write("node_modules/x/i.js", "DEP-VISIBLE\n")
    ws.config_file.write_text('block = ["creds.txt"]\n')


def test_every_layer_hidden_and_allowlists_honoured(ws_self, container):
    _layers(ws_self)
    res = container("--", "sh", "-c", READ_ALL)
    assert res.rc == 0, res.err
    for visible in ("SOURCE-VISIBLE", "TOOL-VISIBLE", "DEP-VISIBLE"):
        assert visible in res.out
    assert "SECRET" not in res.out and "key" not in res.out.split()


def test_git_crypt_key_and_files_hidden(ws_self, container):
    ws_self.write(".gitattributes", "vault/** filter=git-crypt diff=git-crypt\n")
    ws_self.write("vault/token", "SECRET-CRYPT\n")
    ws_self.git("add", ".gitattributes")
    ws_self.git("commit", "-qm", "attrs")
    key = ws_self.repo / ".git" / "git-crypt" / "keys"
    key.mkdir(parents=True)
    (key / "default").write_text("SECRET-KEY\n")
    res = container("--", "sh", "-c", "cat vault/token .git/git-crypt/keys/default README.md; true")
    assert res.rc == 0, res.err
    assert "readme" in res.out and "SECRET" not in res.out


def test_the_project_is_writable_back_to_the_host_at_the_same_path(ws_self, container):
    (ws_self.repo / "sub").mkdir()
    res = container("--", "sh", "-c", 'pwd; echo written > from-container; echo "$HOME"', cwd=ws_self.repo / "sub")
    assert res.rc == 0, res.err
    lines = res.out.splitlines()
    assert lines[0] == str(ws_self.repo / "sub")  # working directory: the current one, same absolute path
    assert lines[1] == str(ws_self.home)  # HOME unchanged
    made = ws_self.repo / "sub" / "from-container"
    assert made.read_text() == "written\n"
    assert made.stat().st_uid == os.getuid()  # owned by the caller


def test_hidden_paths_cannot_be_written_through(ws_self, container):
    _layers(ws_self)
    res = container("--", "sh", "-c", "echo x > .env; echo y > secrets/new; rm -f secrets/key; true")
    assert res.rc == 0
    assert (ws_self.repo / ".env").read_text() == "SECRET-IGNORED\n"
    assert sorted(p.name for p in (ws_self.repo / "secrets").iterdir()) == ["key"]


def test_the_agents_home_state_is_mounted_read_write(ws_self, container, tmp_world):
    profiles = ws_self.home / ".config" / "ai-sandbox" / "profiles"
    profiles.mkdir()
    (profiles / "fakeagent.toml").write_text('executable = "sh"\nhome = ["~/.fakeagent/", "~/.fakeagent.json"]\n')
    (ws_self.home / ".fakeagent.json").write_text("{}\n")
    (ws_self.home / "other-secret").write_text("SECRET-HOME\n")
    script = 'echo state > ~/.fakeagent/state; echo "{1}" > ~/.fakeagent.json; cat ~/other-secret; ls ~; true'
    res = container("fakeagent", "-c", script)
    assert res.rc == 0, res.err
    assert (ws_self.home / ".fakeagent" / "state").read_text() == "state\n"  # created, then written through
    assert (ws_self.home / ".fakeagent.json").read_text() == "{1}\n"
    assert "SECRET-HOME" not in res.out and "other-secret" not in res.out  # the rest of home is absent


def test_user_mounts_and_global_blocks_inside_them(ws_self, container):
    tools = ws_self.home / "tools"
    tools.mkdir()
    (tools / "visible.txt").write_text("MOUNT-VISIBLE\n")
    (tools / "token").write_text("SECRET-IN-MOUNT\n")
    ws_self.config_file.write_text(f'mounts = ["~/tools"]\nblock = ["{tools}/token"]\n')
    res = container("--", "sh", "-c", f"cat {tools}/visible.txt {tools}/token; true")
    assert res.rc == 0, res.err
    assert "MOUNT-VISIBLE" in res.out and "SECRET-IN-MOUNT" not in res.out


def test_environment_passes_through(ws_self, container):
    extra = {
        "MULTI_LINE": "line one\nline two\n\ttabbed",
        "UNICODE_VALUE": "café ☕ 日本",
        "EMPTY_VALUE": "",
        "QUOTES": 'it\'s "quoted" $HOME `x`',
        "TERM": "xterm-256color",
        "DYLD_LIBRARY_PATH": "/nonsense/on/linux",
    }
    env = ws_self.env(extra)
    res = container("--", "cat", "/proc/self/environ", env=extra)
    assert res.rc == 0, res.err
    inside = dict(item.split("=", 1) for item in res.out.split("\0") if item)
    for name, value in env.items():
        if name in ("PATH", "TMPDIR") or name.startswith("DYLD_"):
            continue  # meaningless in a Linux container: PATH is the image's
        assert inside.get(name) == value, name
    assert "DYLD_LIBRARY_PATH" not in inside and inside["PATH"] == "/usr/bin:/bin"


def test_exit_codes_and_arguments(ws_self, container):
    assert container("--", "sh", "-c", "exit 7").rc == 7
    args = ["it's", "$HOME", 'a"b', "", "x  y", "--help"]
    res = container("--", "printf", "[%s]\\n", *args)
    assert res.rc == 0, res.err
    assert res.out == "".join(f"[{a}]\n" for a in args)


def test_a_missing_image_fails_fast_with_how_to_build_one(ws_self, podman_env):
    res = ws_self.run(
        "--backend", "docker", "--engine", "podman", "--image", "no-such-image", "--", "true", env=podman_env
    )
    assert res.rc == 69
    assert "image 'no-such-image' not found in podman" in res.err and "podman build -t no-such-image" in res.err
    assert len(res.err.strip().splitlines()) == 1


def test_odd_project_paths_and_odd_hidden_names(tmp_world, podman_env):
    odd = tmp_world / 'my proj, "q":1 #x'
    odd.mkdir()
    w = new_workspace(odd, "root")
    w.write(".gitignore", "*.secret\nhidden,dir/\n")
    names = ["a,b.secret", 'q"uote.secret', "co:lon.secret", "sp ace.secret", "hash#.secret", "br[ack]et.secret"]
    for i, n in enumerate(names):
        w.write(n, f"SECRET-{i}\n")
    w.write("hidden,dir/inner", "SECRET-DIR\n")
    res = w.run(
        "--backend", "docker", "--engine", "podman", "--image", "ai-sandbox-test-busybox",
        "--", "sh", "-c", "cat ./*.secret hidden,dir/inner README.md; pwd; true",
        env=podman_env,
    )  # fmt: skip
    assert res.rc == 0, res.err
    assert "SECRET" not in res.out
    assert "readme" in res.out and res.out.strip().endswith(str(Path(w.repo)))


def test_dry_run_explain_and_doctor_know_the_backend(ws_self, container, podman_env):
    _layers(ws_self)
    dry = container("--dry-run", "--", "true")
    assert dry.rc == 0, dry.err
    assert "backend  docker" in dry.out and "run --rm -i --pull=never" in dry.out
    assert f"target={ws_self.repo}/.env,readonly" in dry.out
    doc = container("explain", "--json")
    assert doc.rc == 0, doc.err
    assert '"backend": "docker"' in doc.out
    res = container("doctor")
    assert res.rc == 0, res.out + res.err
    assert "✓ backend docker: podman version" in res.out and "✓ sandbox hides files (docker)" in res.out


def test_a_terminal_gets_a_tty_and_a_pipe_does_not(ws_self, container, podman_env):
    require("script")
    args = "--backend docker --engine podman --image ai-sandbox-test-busybox"
    # the sleep: podman's tty attach can lose the output of a container that exits at once
    cmd = f"{AIS} {args} -- sh -c 'test -t 0 && echo IS-A-TTY || echo NO-TTY; sleep 0.5'"
    proc = subprocess.run(
        ["script", "-qec", cmd, "/dev/null"],
        cwd=ws_self.repo,
        env=ws_self.env(podman_env),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert "IS-A-TTY" in proc.stdout
    assert "NO-TTY" in container("--", "sh", "-c", "test -t 0 && echo IS-A-TTY || echo NO-TTY").out


def test_over_the_mask_limit_the_container_still_starts_and_hides(ws_self, container):
    """2,000 masks by default (a --mount argument each; measured: podman's command line passes ARG_MAX
    near 14,000 masks), fewer for rootless podman (runc takes the mount sources in one 64 KiB message: the
    container failed to start as a user). 2,400 separately ignored files: directories are hidden whole,
    nothing leaks."""
    ws_self.write(".gitignore", "*.secret\n")
    for d in range(12):
        ws_self.write(f"d{d}/README.md", f"README-{d}\n")
    ws_self.git("add", ".")
    ws_self.git("commit", "-qm", "dirs")
    token = f"CAP-{os.getpid()}"
    for d in range(12):
        for i in range(200):
            (ws_self.repo / f"d{d}" / f"f{i}.secret").write_text(f"{token}-{d}-{i}\n")
    res = container("--", "sh", "-c", "cat d0/f0.secret d11/f199.secret; cat d11/README.md; true")
    assert res.rc == 0, res.err
    assert token not in res.out + res.err
    source = ws_self.home / ".cache" / "ai-sandbox" / "mask-empty-file"
    limit = 2000 if os.geteuid() == 0 else min(2000, 60_000 // (len(str(source)) + 1))
    assert f"more than the backend can mount ({limit})" in res.err


def test_a_command_line_past_arg_max_is_one_clear_line(ws_self, container):
    """max_masks raised past what the command line can carry: execve fails (E2BIG) before anything runs."""
    ws_self.write(".gitignore", "*.secret\n")
    for d in range(40):
        ws_self.write(f"{'x' * 200}{d}/README.md", "r\n")
    ws_self.git("add", ".")
    ws_self.git("commit", "-qm", "dirs")
    for d in range(40):
        for i in range(250):
            (ws_self.repo / f"{'x' * 200}{d}" / f"{'y' * 40}{i}.secret").write_text("s\n")
    ws_self.config_file.write_text("max_masks = 90000\n")
    marker = ws_self.base / "ran"
    res = container("--", "touch", str(marker))
    assert res.rc == 69, res.err
    assert "Argument list too long" in res.err and "lower max_masks" in res.err
    assert len(res.err.strip().splitlines()) == 1 and "Traceback" not in res.err
    assert not marker.exists()


def test_nothing_planted_in_the_container_runs_later_outside(ws_self, container):
    """Write containment (docs/writes.md) in the container: the home is a tmpfs (the agent's state and the user's
    mounts aside), the git hooks and editor settings are read-only mounts; the project and the user's `writable`
    take writes back to the host."""
    ws = ws_self
    (ws.home / ".bashrc").write_text("# the user's\n")
    (ws.home / "extra").mkdir()
    (ws.repo / ".vscode").mkdir()
    ws.config_file.write_text('writable = ["~/extra"]\n')
    mark = "PLANTED-" + os.urandom(4).hex()
    planted = ["~/.bashrc", "~/.local/bin/git", "~/.gitconfig", ".git/hooks/pre-commit", ".vscode/tasks.json"]
    script = "; ".join(f'(mkdir -p "$(dirname {p})"; echo {mark} >> {p}) 2>/dev/null' for p in planted)
    script += f"; echo {mark} > ~/extra/kept; echo {mark} > work.txt; true"
    res = container("--", "sh", "-c", script)
    assert res.rc == 0, res.err
    for p in planted:
        host = ws.home / p[2:] if p.startswith("~/") else ws.repo / p
        assert not host.exists() or mark not in host.read_text(), p
    assert (ws.home / ".bashrc").read_text() == "# the user's\n"
    assert mark in (ws.home / "extra" / "kept").read_text()  # the user's writable: mounted read-write
    assert mark in (ws.repo / "work.txt").read_text()
