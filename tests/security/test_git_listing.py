"""What `git ls-files` does not list, through the real `ai-sandbox`, firejail, git and git-crypt, as root
and as an unprivileged user: a directory git cannot open, a .gitignore git cannot read, ignored or blocked
FIFOs and sockets, files git-crypt encrypts because of an attribute outside the repository's own files,
and the git-crypt key of a de-initialised submodule. Each secret is a fresh random string; finding it in
the output means it was read. Every read that could block is bounded by `timeout 3`.
"""

from __future__ import annotations

import contextlib
import errno
import os
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

from tests.conftest import Result, Workspace, require, token

pytestmark = pytest.mark.sandbox


def inside(ws: Workspace, script: str) -> Result:
    res = ws.run("--", "sh", "-c", script + "; true")
    print(f"--- rc={res.rc}\n--- stdout\n{res.out}\n--- stderr\n{res.err}")  # shown when a test fails
    return res


def commit(ws: Workspace, *paths: str) -> None:
    ws.git("add", *paths)
    ws.git("commit", "-qm", "setup")


# --- what git could not list ---------------------------------------------------------------------------


def test_a_directory_git_cannot_list_is_hidden_whole(ws, firejail):
    """Mode 0311: its owner can open files in it by name but not list it. As that user git warns
    `could not open directory 'conf/'`, exits 0 and lists nothing in it; the ignored .env was readable."""
    ws.write(".gitignore", ".env\n")
    commit(ws, ".gitignore")
    secret = token("UNLISTED")
    ws.write("conf/.env", secret + "\n")
    ws.write("conf/deeper/.env", secret + "\n")
    (ws.repo / "conf").chmod(0o311)
    res = inside(ws, "cat conf/.env conf/deeper/.env")
    assert res.rc == 0, res.err
    assert secret not in res.out + res.err
    if ws.unprivileged:
        plan = ws.run("explain", "conf/.env")
        assert "git could not list it" in plan.out, plan.out


def test_a_gitignore_git_cannot_read_refuses_the_launch(ws, firejail):
    """git warns `unable to access 'keys/.gitignore': Permission denied` and lists the files it would have
    ignored as untracked: any message but the one above refuses, in one line, before anything runs."""
    ws.write("keys/README", "KEYS-README\n")
    ws.write("keys/.gitignore", "*.pem\n")
    commit(ws, "keys/README", "keys/.gitignore")
    secret = token("PEM")
    ws.write("keys/server.pem", secret + "\n")
    (ws.repo / "keys" / ".gitignore").chmod(0o000)
    marker = ws.base / "ran"
    res = inside(ws, f"touch '{marker}'; cat keys/server.pem keys/README")
    assert secret not in res.out + res.err
    if ws.unprivileged:  # root reads the .gitignore: no warning, a normal launch
        assert res.rc == 65, res.err
        assert "unexpected message" in res.err and "unable to access" in res.err
        assert len(res.err.strip().splitlines()) == 1 and "Traceback" not in res.err
        assert not marker.exists()
    else:
        assert "KEYS-README" in res.out


# --- FIFOs and sockets ---------------------------------------------------------------------------------


class Feeder:
    """Writes a secret into each FIFO whenever a reader opens it, and sends one to each client of each
    Unix socket; runs outside the sandbox, as the test, until stopped."""

    def __init__(self) -> None:
        self.stop = threading.Event()
        self.threads: list[threading.Thread] = []

    def fifo(self, path: Path, secret: str) -> None:
        os.mkfifo(path)
        self._run(self._feed_fifo, str(path), secret.encode() + b"\n")

    def sock(self, path: Path, secret: str) -> None:
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        server.bind(str(path))
        server.listen(4)
        server.settimeout(0.05)
        self._run(self._serve, server, secret.encode() + b"\n")

    def _run(self, target, *args) -> None:
        t = threading.Thread(target=target, args=args, daemon=True)
        t.start()
        self.threads.append(t)

    def _feed_fifo(self, path: str, data: bytes) -> None:
        while not self.stop.is_set():
            try:
                fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)  # ENXIO until a reader has it open
            except OSError as e:
                if e.errno != errno.ENXIO:
                    return
                time.sleep(0.01)
                continue
            with contextlib.suppress(OSError):  # the reader went away
                os.write(fd, data)
            os.close(fd)
            time.sleep(0.05)

    def _serve(self, server: socket.socket, data: bytes) -> None:
        with server:
            while not self.stop.is_set():
                try:
                    conn, _ = server.accept()
                except OSError:
                    continue
                with conn:
                    conn.sendall(data)

    def close(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(2)


@pytest.fixture
def feeder():
    f = Feeder()
    yield f
    f.close()


READ_SOCK = (
    "import socket, sys\n"
    "for p in sys.argv[1:]:\n"
    "    s = socket.socket(socket.AF_UNIX)\n"
    "    s.settimeout(2)\n"
    "    try:\n"
    "        s.connect(p); print(s.recv(200).decode())\n"
    "    except OSError as e:\n"
    "        print(p, e)\n"
)


def test_ignored_or_blocked_fifos_and_sockets_are_hidden(ws, firejail, feeder):
    """git lists no FIFO or socket, ignored or not: ai-sandbox finds them in the directories git walked
    (with tracked files, and untracked ones) and asks git which are ignored; block patterns match them too.
    A FIFO nobody ignores stays readable: the control that proves the reads work."""
    ws.write(".gitignore", "*.pipe\n*.sock\n")
    ws.write("src/app.py", "APP\n")
    ws.write(".ai-sandbox.toml", 'block = ["*.fifo"]\n')
    commit(ws, ".gitignore", "src/app.py", ".ai-sandbox.toml")
    (ws.repo / "scratch" / "deep").mkdir(parents=True)  # an untracked directory: git walks it, lists it whole
    secrets = {rel: token("SPECIAL") for rel in ("src/in.pipe", "scratch/deep/out.pipe", "src/blocked.fifo")}
    for rel, value in secrets.items():
        feeder.fifo(ws.repo / rel, value)
    sock_secret = token("SOCKET")
    feeder.sock(ws.repo / "src" / "agent.sock", sock_secret)
    control = token("VISIBLE")
    feeder.fifo(ws.repo / "src" / "open-fifo", control)
    (ws.base / "read_sock.py").write_text(READ_SOCK)
    script = " ; ".join(f"timeout 3 cat {rel}" for rel in [*secrets, "src/open-fifo"])
    res = inside(ws, f"{script}; timeout 3 python3 {ws.base}/read_sock.py src/agent.sock")
    assert res.rc == 0, res.err
    assert control in res.out  # a FIFO that is neither ignored nor blocked is read as usual
    for value in [*secrets.values(), sock_secret]:
        assert value not in res.out + res.err
    plan = ws.run("explain", "src/in.pipe", "src/blocked.fifo", "src/agent.sock")
    assert plan.out.count("hidden") == 3, plan.out
    assert "FIFO" in plan.out and "*.fifo" in plan.out


# --- git-crypt -----------------------------------------------------------------------------------------


def _crypt_status(ws: Workspace) -> str:
    proc = subprocess.run(
        ["git-crypt", "status", "-e"], cwd=ws.repo, env=ws.env(), capture_output=True, text=True, check=False
    )
    return proc.stdout


@pytest.mark.parametrize("source", ["xdg", "core.attributesFile", "ignored .gitattributes", "macro"])
def test_git_crypt_files_marked_outside_the_repository_attributes_are_hidden(ws, firejail, source):
    """The `filter=git-crypt` attribute from the user's attributes file ($XDG_CONFIG_HOME/git/attributes,
    or the file core.attributesFile names), from a .gitattributes that is itself ignored, or through a
    macro defined in the user's file: `git crypt status -e` lists the file, so it must be hidden. No key
    is involved (a key directory alone makes ai-sandbox ask git): the attribute sources are what is tested."""
    require("git-crypt")
    rule = "*.key filter=git-crypt diff=git-crypt\n"
    user_attrs = ws.home / ".config" / "git" / "attributes"
    user_attrs.parent.mkdir(parents=True)
    if source == "xdg":
        user_attrs.write_text(rule)
    elif source == "core.attributesFile":
        (ws.home / "attrs").write_text(rule)
        (ws.home / ".gitconfig").write_text("[core]\n\tattributesFile = ~/attrs\n")
    elif source == "ignored .gitattributes":
        ws.write(".gitignore", ".gitattributes\n")
        ws.write(".gitattributes", rule)
        commit(ws, ".gitignore")
    else:
        user_attrs.write_text("[attr]secret filter=git-crypt diff=git-crypt\n")
        ws.write(".gitattributes", "*.key secret\n")
        commit(ws, ".gitattributes")
    secret = token("CRYPTED")
    ws.write("deploy.key", secret + "\n")
    assert "deploy.key" in _crypt_status(ws), "the setup must make git-crypt list the file"
    res = inside(ws, "cat deploy.key README.md")
    assert res.rc == 0, res.err
    assert "readme" in res.out
    assert secret not in res.out + res.err


def test_git_crypt_key_of_a_deinitialised_submodule_is_hidden(ws, firejail):
    """`git submodule deinit` empties the checkout but keeps .git/modules/<name>/, git-crypt key included;
    the name holds a '/' (libs/crypto), so the key sits at .git/modules/libs/crypto/git-crypt/."""
    require("git-crypt")
    src = ws.base / "cryptsrc"
    src.mkdir()
    ws.git("init", "-q", "-b", "main", cwd=src)
    (src / "lib.txt").write_text("LIB\n")
    ws.git("add", "lib.txt", cwd=src)
    ws.git("commit", "-qm", "lib", cwd=src)
    ws.git("-c", "protocol.file.allow=always", "submodule", "add", "-q", str(src), "libs/crypto")
    ws.git("commit", "-qm", "submodule")
    sub = ws.repo / "libs" / "crypto"
    subprocess.run(["git-crypt", "init"], cwd=sub, env=ws.env(), check=True, capture_output=True)
    ws.git("submodule", "deinit", "-q", "-f", "libs/crypto")
    key_dir = ws.repo / ".git" / "modules" / "libs" / "crypto" / "git-crypt"
    key = (key_dir / "keys" / "default").read_bytes().hex()
    assert not (sub / "lib.txt").exists() and key_dir.is_dir()
    res = inside(ws, f"od -An -tx1 -v '{key_dir}/keys/default' | tr -d ' \\n'; ls -a '{key_dir}/keys'")
    assert res.rc == 0, res.err
    assert key[-40:-8] not in res.out.replace("\n", "")  # key material (a fixed header and trailer frame it)
    assert "default" not in res.out


def test_block_patterns_reach_files_inside_untracked_directories(ws, firejail):
    """Found by the red team: git lists an untracked directory as one entry (`svc/`), so `block = [".env",
    "*.pem", "secrets/"]` never saw `svc/.env`: a new service not yet committed was readable whole."""
    a, b, c = token("ENVSECRET"), token("PEMSECRET"), token("DIRSECRET")
    ws.write(".ai-sandbox.toml", 'block = ["*.pem", ".env", "secrets/"]\n')
    commit(ws, ".ai-sandbox.toml")
    ws.write("svc/.env", a + "\n")
    ws.write("svc/api/tls.pem", b + "\n")
    ws.write("svc/secrets/k", c + "\n")
    ws.write("svc/app.py", "APP-VISIBLE\n")
    ws.write("new*/.env", a + "\n")  # an untracked directory named like a glob
    res = inside(ws, "cat svc/.env svc/api/tls.pem svc/secrets/k svc/app.py 'new*/.env'; ls svc/secrets")
    assert "APP-VISIBLE" in res.out
    for secret in (a, b, c):
        assert secret not in res.out + res.err
