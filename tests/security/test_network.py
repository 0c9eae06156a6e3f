"""Where an agent steered by what it reads can send data (issue 28), on the real sandbox, as root and as a user,
with the default config: `network = "allowlist"`. The agent gets a network namespace of its own: the host's
loopback, its LAN address, its abstract unix sockets and DNS are out of reach, and the only way out is
ai-sandbox's proxy, which lets through the allowed names only and says why it refused the others. Each probe
asserts on content: a server outside answers with a token that must never reach the agent, or must.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
from pathlib import Path

import pytest

from tests.conftest import (
    BACKENDS,  # noqa: F401  (the module runs once per backend: conftest)
    PY,
    Workspace,
    token,
)
from tests.listeners import Answering, listening

pytestmark = pytest.mark.sandbox

PROBE = r"""
import json, os, socket, sys, urllib.error, urllib.request
args = json.loads(sys.argv[1])
out = {}
def tcp(host, port):
    try:
        s = socket.create_connection((host, port), timeout=3)
        return s.recv(200).decode()
    except Exception as e:
        return "refused: " + type(e).__name__
out["loopback"] = tcp("127.0.0.1", args["loopback"])
out["lan"] = tcp(args["lan"], args["loopback"]) if args["lan"] else "no lan address"
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
try:
    u.sendto(args["udp_token"].encode(), ("127.0.0.1", args["udp"]))
except OSError as e:
    pass
try:
    a = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    a.settimeout(3)
    a.connect("\0" + args["abstract"])
    out["abstract"] = a.recv(200).decode()
except Exception as e:
    out["abstract"] = "refused: " + type(e).__name__
try:
    out["dns"] = str(socket.getaddrinfo("registry.npmjs.org", 443))
except OSError as e:
    out["dns"] = "refused: " + type(e).__name__
def get(url, proxy=None):
    opener = urllib.request.build_opener(*([urllib.request.ProxyHandler(proxy)] if proxy is not None else []))
    try:
        return opener.open(url, timeout=10).read().decode()
    except urllib.error.HTTPError as e:
        return f"{e.code}: " + e.read().decode()
    except Exception as e:
        return "refused: " + type(e).__name__
def via_proxy(url):
    # the proxy itself, whatever NO_PROXY says (urllib would go direct to a loopback name)
    try:
        s = socket.create_connection(("127.0.0.1", 3128), timeout=5)
        s.sendall(f"GET {url} HTTP/1.0\r\nHost: x\r\n\r\n".encode())
        data = b""
        while chunk := s.recv(4096):
            data += chunk
        head, _, body = data.decode().partition("\r\n\r\n")
        return head.split(" ")[1] + ": " + body
    except Exception as e:
        return "refused: " + type(e).__name__
out["env"] = {k: os.environ.get(k, "") for k in ("HTTPS_PROXY", "http_proxy", "ALL_PROXY", "NO_PROXY")}
out["refused"] = get("http://refused.example.invalid/x")
if args["allowed"]:
    out["allowed"] = get(f"http://127.0.0.1:{args['allowed']}/")
    out["allowed_by_proxy"] = via_proxy(f"http://127.0.0.1:{args['allowed']}/")
    out["by_name"] = via_proxy(f"http://localhost:{args['loopback']}/")
    def socks(host, port):  # SOCKS5, CONNECT by name: the reply code, then what the server said
        s = socket.create_connection(("127.0.0.1", 3128), timeout=5)
        s.sendall(b"\x05\x01\x00")
        s.recv(2)
        s.sendall(b"\x05\x01\x00\x03" + bytes([len(host)]) + host.encode() + port.to_bytes(2, "big"))
        rep = s.recv(10)[1]
        if rep:
            return f"socks {rep}"
        s.sendall(b"GET / HTTP/1.0\r\n\r\n")
        data = b""
        while chunk := s.recv(4096):
            data += chunk
        return "socks 0 " + data.decode().partition("\r\n\r\n")[2]
    out["socks_allowed"] = socks("127.0.0.1", args["allowed"])
    out["socks_refused"] = socks("refused.example.invalid", 443)
print("@@" + json.dumps(out))
"""


class Servers:
    """Outside the sandbox: a TCP server on every address answering a token, a UDP receiver and an abstract
    unix socket on the host's loopback, and an HTTP server the allowlist may name."""

    def __init__(self) -> None:
        self.token = token("NETLEAK")
        self.http_token = token("ALLOWED")
        self.udp_got: list[bytes] = []
        self.tcp = listening(socket.AF_INET, ("0.0.0.0", 0), self.token.encode())
        self.http = listening(
            socket.AF_INET, ("127.0.0.1", 0), b"HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (
                len(self.http_token), self.http_token.encode()), read_first=True,
        )  # fmt: skip
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.udp.bind(("127.0.0.1", 0))
        self._udp_thread = threading.Thread(target=self._udp, daemon=True)
        self._udp_thread.start()
        self.abstract_name = "ais-test-" + self.token
        self.abstract = listening(socket.AF_UNIX, "\0" + self.abstract_name, self.token.encode())

    def _udp(self) -> None:
        while True:
            try:
                got = self.udp.recv(200)
            except OSError:
                return
            if not got:  # shut down
                return
            self.udp_got.append(got)

    def close(self) -> None:
        for s in (self.tcp, self.http, self.abstract):
            s.close()
        with contextlib.suppress(OSError):
            self.udp.shutdown(socket.SHUT_RDWR)
        self._udp_thread.join(10)
        self.udp.close()


@pytest.fixture
def servers():
    s = Servers()
    yield s
    s.close()


def test_a_closed_servers_set_answers_no_more():
    """The harness itself: once a test's servers are closed, nothing of theirs answers a later test's connection
    (a thread left in accept() kept the port listening, and could accept on the next test's socket)."""
    s = Servers()
    ports = [s.tcp.getsockname()[1], s.http.getsockname()[1]]
    s.close()
    for port in ports:
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=3)


def lan_address() -> str:
    """This machine's own address on its network (what the route out uses), if it has one."""
    with contextlib.suppress(OSError), socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect(("192.0.2.1", 9))  # no packet is sent: the kernel picks the route's source address
        addr = s.getsockname()[0]
        if not addr.startswith("127."):
            return addr
    return ""


def probe(ws: Workspace, servers: Servers, *launch: str, allowed: bool = False) -> tuple[dict, str]:
    args = {
        "loopback": servers.tcp.getsockname()[1],
        "lan": lan_address(),
        "udp": servers.udp.getsockname()[1],
        "udp_token": token("UDP"),
        "abstract": servers.abstract_name,
        "allowed": servers.http.getsockname()[1] if allowed else 0,
    }
    res = ws.run(*launch, "--", PY, "-I", "-c", PROBE, json.dumps(args), timeout=90)
    print(res.out, res.err)
    assert res.rc == 0, res.err
    line = next(line for line in res.out.splitlines() if line.startswith("@@"))
    servers.sent_udp = args["udp_token"]  # type: ignore[attr-defined]
    return json.loads(line[2:]), res.err


def test_the_hosts_servers_lan_and_dns_are_out_of_reach(ws, servers, firejail):
    """Issue 28's table: loopback TCP, the LAN address, UDP, an abstract socket, DNS; a refused name's 403."""
    ws.config_file.write_text("")
    out, err = probe(ws, servers)
    whole = json.dumps(out)
    assert servers.token not in whole, whole
    assert out["loopback"].startswith("refused") and out["lan"].startswith(("refused", "no lan"))
    assert out["abstract"].startswith("refused") and out["dns"].startswith("refused")
    assert servers.sent_udp.encode() not in servers.udp_got  # type: ignore[attr-defined]
    assert out["refused"].startswith("403: ai-sandbox: refused.example.invalid:80 is not in the network allowlist")
    assert "allow_domains" in out["refused"]
    assert out["env"]["HTTPS_PROXY"] == "http://127.0.0.1:3128" and out["env"]["http_proxy"] == "http://127.0.0.1:3128"
    # after the session, outside the agent's terminal: one line per refused host
    assert "ai-sandbox: network: refused refused.example.invalid:80 (once);" in err


def test_an_allowed_host_port_answers_and_a_name_for_a_loopback_address_does_not(ws, servers, firejail):
    """A host loopback endpoint named in allow_domains answers at the same address inside (directly, whatever
    NO_PROXY says, and through the proxy); `localhost` without a port does not open the host's loopback."""
    port = servers.http.getsockname()[1]
    ws.config_file.write_text(f'allow_domains = ["127.0.0.1:{port}", "localhost"]\n')
    out, err = probe(ws, servers, allowed=True)
    assert out["allowed"] == servers.http_token
    assert out["allowed_by_proxy"] == "200: " + servers.http_token
    assert out["socks_allowed"] == "socks 0 " + servers.http_token  # SOCKS5 on the same port
    assert out["socks_refused"] == "socks 2"  # "connection not allowed by ruleset"
    assert servers.token not in json.dumps(out)
    # Debian 13 resolves localhost to ::1 first, Debian 12 to 127.0.0.1
    assert out["by_name"].startswith("403: ai-sandbox: localhost resolves to ")
    assert "a loopback, private or this machine's own address" in out["by_name"]
    assert out["loopback"].startswith("refused")


def test_network_on_is_the_hosts_own_and_says_so(ws, servers, firejail):
    """`--network on`: today's behaviour, no proxy variables added."""
    ws.config_file.write_text("")
    out, _ = probe(ws, servers, "--network", "on")
    assert out["loopback"] == servers.token
    assert out["env"]["HTTPS_PROXY"] == ws.env().get("HTTPS_PROXY", "")
    # the host's abstract sockets: out of reach by Landlock's scope where the kernel has it (6.12+), else the gap
    # docs/network.md names
    from ai_sandbox.verify import landlock_abi

    if landlock_abi() >= 6:
        assert out["abstract"] == "refused: PermissionError"
    else:
        assert out["abstract"] == servers.token


@pytest.mark.parametrize("where", ["user", "project", "command line"])
def test_network_off_reaches_nothing(ws, servers, firejail, where):
    ws.config_file.write_text('network = "off"\n' if where == "user" else "")
    if where == "project":
        ws.write(".ai-sandbox.toml", 'network = "off"\n')
    out, _ = probe(ws, servers, *(["--network", "off"] if where == "command line" else []))
    assert servers.token not in json.dumps(out)
    assert out["refused"].startswith("refused") and out["env"]["HTTPS_PROXY"] == ws.env().get("HTTPS_PROXY", "")
    assert out["loopback"].startswith("refused") and out["dns"].startswith("refused")


@pytest.mark.parametrize("line", ['network = "on"', 'allow_domains = ["evil.example"]'])
def test_a_cloned_repository_cannot_open_the_network(ws, firejail, line):
    ws.config_file.write_text("")
    ws.write(".ai-sandbox.toml", line + "\n")
    res = ws.run("--", "true")
    assert res.rc != 0
    assert "ai-sandbox: error:" in res.err and ".ai-sandbox.toml:1" in res.err and "Traceback" not in res.err
    assert len(res.err.strip().splitlines()) <= 2, res.err


# -- the user's servers (item 5): unix sockets of programs outside the sandbox, in every network mode ---------------

SOCK_PROBE = r"""
import json, os, socket, sys, threading
args = json.loads(sys.argv[1])
out = {}
def unix(path):
    try:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(3)
        s.connect(path)
        return s.recv(200).decode()
    except Exception as e:
        return "refused: " + type(e).__name__
for name, path in args["paths"].items():
    out[name] = unix(path)
def own(path):  # a server and its client, both inside
    try:
        srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        srv.bind(path)
        srv.listen(1)
    except OSError as e:
        return f"cannot bind: {type(e).__name__} {e.strerror}"
    def serve():
        c, _ = srv.accept()
        c.sendall(b"INSIDE")
        c.close()
    threading.Thread(target=serve, daemon=True).start()
    return unix(path)
out["own_tmp"] = own("/tmp/inside-%d.sock" % os.getpid())
rt = os.environ.get("XDG_RUNTIME_DIR", "")
out["own_runtime"] = own(os.path.join(rt, "inside.sock")) if rt else "no runtime directory"
print("@@" + json.dumps(out))
"""


class UnixServers:
    """Unix sockets outside the sandbox, owned by the agent's identity, each answering a token: in a directory of
    /tmp, in the runtime directory, where Docker Desktop keeps its socket in the home, under /run (root only), and
    one the config passes (allow_sockets) and the ssh agent's."""

    def __init__(self, ws: Workspace, tmp_path) -> None:
        import pwd

        self.token = token("SOCKLEAK")
        self.passed_token = token("PASSED")
        uid = ws.user.uid if ws.user else os.getuid()
        gid = ws.user.gid if ws.user else os.getgid()
        self.runtime = f"/run/user/{uid}"
        self.made_runtime = False
        if not os.path.isdir(self.runtime) and os.geteuid() == 0:
            os.makedirs(self.runtime, mode=0o700)
            os.chown(self.runtime, uid, gid)
            self.made_runtime = True
        if not os.path.isdir(self.runtime):
            self.runtime = ""  # a user without a login session: no runtime directory to test
        tmpdir = Path(f"/tmp/ais-servers-{self.token}")
        tmpdir.mkdir()
        self.dirs = [tmpdir]
        self.paths = {"tmp": str(tmpdir / "server.sock"), "docker desktop": str(ws.home / ".docker/run/docker.sock")}
        if self.runtime:
            self.paths["runtime (podman)"] = f"{self.runtime}/ais-{self.token}/podman.sock"
        if os.geteuid() == 0:
            self.paths["/run (system)"] = f"/run/ais-{self.token}.sock"
        self.passed = {"allow_sockets": str(tmpdir / "passed.sock"), "ssh agent": f"/tmp/ssh-{self.token}/agent.1"}
        self.servers = []
        for path in self.paths.values():
            self.servers.append(self._serve(path, self.token.encode(), uid, gid))
        for path in self.passed.values():
            self.servers.append(self._serve(path, self.passed_token.encode(), uid, gid))
        self.dirs += [Path(self.passed["ssh agent"]).parent]
        if self.runtime:
            self.dirs.append(Path(self.paths["runtime (podman)"]).parent)
        del pwd

    def _serve(self, path: str, answer: bytes, uid: int, gid: int) -> Answering:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(path)
        os.chown(path, uid, gid) if os.geteuid() == 0 else None
        d = os.path.dirname(path)
        while os.geteuid() == 0 and d not in ("/tmp", "/run", self.runtime, "/") and not d.endswith("/home"):
            os.chown(d, uid, gid)
            d = os.path.dirname(d)
        s.listen(8)
        return Answering(s, answer)

    def close(self) -> None:
        import shutil

        for s in self.servers:
            s.close()
        for p in self.paths.values():
            with contextlib.suppress(OSError):
                os.unlink(p)
        for d in self.dirs:
            shutil.rmtree(d, ignore_errors=True)
        if self.made_runtime:
            shutil.rmtree(self.runtime, ignore_errors=True)


@pytest.fixture
def unix_servers(ws, tmp_path):
    s = UnixServers(ws, tmp_path)
    yield s
    s.close()


@pytest.mark.parametrize("mode", ["allowlist", "on"])
def test_the_users_servers_are_out_of_reach_in_every_mode(ws, unix_servers, firejail, mode):
    """A socket in /tmp, in the runtime directory (the session bus, podman, Wayland live there), Docker Desktop's in
    the home, one under /run: none answers inside, in allowlist and in `on` alike. The ssh agent and what
    allow_sockets names do; programs inside still talk over unix sockets of their own."""
    s = unix_servers
    ws.config_file.write_text(f'network = "{mode}"\nallow_sockets = ["{s.passed["allow_sockets"]}"]\n')
    env = {"SSH_AUTH_SOCK": s.passed["ssh agent"], "XDG_RUNTIME_DIR": s.runtime} if s.runtime else {
        "SSH_AUTH_SOCK": s.passed["ssh agent"]}  # fmt: skip
    if not s.runtime:
        env["XDG_RUNTIME_DIR"] = ""
    args = {"paths": {**s.paths, **s.passed}}
    res = ws.run("--", PY, "-I", "-c", SOCK_PROBE, json.dumps(args), env=env, timeout=90)
    print(res.out, res.err)
    assert res.rc == 0, res.err
    out = json.loads(next(line for line in res.out.splitlines() if line.startswith("@@"))[2:])
    assert s.token not in json.dumps(out), out
    for name in s.paths:
        assert out[name].startswith("refused"), (name, out[name])
    assert out["allow_sockets"] == s.passed_token and out["ssh agent"] == s.passed_token
    assert out["own_tmp"] == "INSIDE"
    if s.runtime and (ws.backend == "bwrap" or s.runtime == f"/run/user/{ws.user.uid if ws.user else os.getuid()}"):
        assert out["own_runtime"] == "INSIDE"


def test_allow_ssh_agent_false_cuts_it(ws, unix_servers, firejail):
    s = unix_servers
    ws.config_file.write_text("allow_ssh_agent = false\n")
    args = {"paths": {"ssh agent": s.passed["ssh agent"]}}
    res = ws.run("--", PY, "-I", "-c", SOCK_PROBE, json.dumps(args), env={"SSH_AUTH_SOCK": s.passed["ssh agent"]})
    assert res.rc == 0, res.err
    out = json.loads(next(line for line in res.out.splitlines() if line.startswith("@@"))[2:])
    assert out["ssh agent"].startswith("refused") and s.passed_token not in res.out


def test_the_users_tmux_cannot_be_driven(ws, firejail, tmp_path):
    """Issue 28's worst row: `tmux send-keys` to the user's tmux server ran `cat .env` outside. The real tmux,
    started outside as the agent's identity, on its default socket directory (/tmp/tmux-UID)."""
    import shutil
    import subprocess
    import time

    from tests.stage import setpriv_argv

    tmux = shutil.which("tmux")
    assert tmux, "tmux is one of make test's system tools"
    ws.config_file.write_text("")
    secret = ws.write(".env", f"KEY={token('SECRET')}\n").read_text()
    ws.write(".gitignore", ".env\nout.txt\n")
    name = token("aistest").lower()
    out = ws.repo / "out.txt"
    start = [tmux, "-L", name, "new-session", "-d", "-s", "s", "sh"]
    if ws.user:
        from tests.conftest import chown_tree

        chown_tree(ws.base, ws.user)
        start = setpriv_argv(ws.user.uid, ws.user.gid, start)
    env = {**ws.env(), "TMUX": ""}
    env.pop("TMUX_TMPDIR", None)
    subprocess.run(start, check=True, env=env, cwd=ws.repo, timeout=20)
    try:
        res = ws.run(
            "--", "sh", "-c", f'{tmux} -L {name} send-keys -t s "cat {ws.repo}/.env > {out}" Enter; echo rc=$?'
        )
        print(res.out, res.err)
        assert res.rc == 0, res.err
        assert "rc=1" in res.out  # no server running (the socket directory is the sandbox's own)
        time.sleep(1)
        assert not out.exists() or secret.strip() not in out.read_text()
    finally:
        stop = [tmux, "-L", name, "kill-server"]
        subprocess.run(setpriv_argv(ws.user.uid, ws.user.gid, stop) if ws.user else stop, env=env, timeout=20)


def test_an_allowed_registry_answers_through_the_proxy(ws, firejail):
    """The built-in list at work: PyPI (which `make test` itself installs from) answers through the proxy, over
    HTTPS (CONNECT), with the agent's own DNS gone; the same request with the proxy bypassed cannot connect."""
    ws.config_file.write_text("")
    code = (
        "import urllib.request as u, sys\n"
        "print('@@proxied', u.urlopen('https://pypi.org/simple/six/', timeout=30).read()[:4000].decode().count('six-'))\n"
        "try:\n"
        "    u.build_opener(u.ProxyHandler({})).open('https://pypi.org/simple/six/', timeout=10)\n"
        "    print('@@direct reached')\n"
        "except Exception as e:\n"
        "    print('@@direct', type(e).__name__)\n"
    )
    res = ws.run("--", PY, "-I", "-c", code, timeout=90)
    print(res.out, res.err)
    assert res.rc == 0, res.err
    counts = [line.split()[1] for line in res.out.splitlines() if line.startswith("@@proxied")]
    assert counts and int(counts[0]) > 0
    assert "@@direct reached" not in res.out and "@@direct URLError" in res.out


# -- the twenty-ninth red team's findings ---------------------------------------------------------------------------


@pytest.mark.parametrize("tmpdir", ["/tmp", "sub"])
def test_tmpdir_never_brings_the_hosts_tmp_back(ws, unix_servers, firejail, tmpdir):
    """TMPDIR=/tmp kept the host's /tmp whole (and the user's tmux ran the agent's commands); a TMPDIR below /tmp kept
    its entry whole, with the sockets in it. TMPDIR is made, empty, in the sandbox's own /tmp."""
    s = unix_servers
    ws.config_file.write_text("")
    value = tmpdir if tmpdir == "/tmp" else os.path.dirname(s.paths["tmp"])  # the directory holding a server's socket
    code = SOCK_PROBE.replace(
        'print("@@"',
        'out["tmpdir"] = os.path.isdir(os.environ["TMPDIR"]) and os.access(os.environ["TMPDIR"], os.W_OK)\nprint("@@"',
    )
    res = ws.run("--", PY, "-I", "-c", code, json.dumps({"paths": s.paths}), env={"TMPDIR": value}, timeout=90)
    print(res.out, res.err)
    assert res.rc == 0, res.err
    out = json.loads(next(line for line in res.out.splitlines() if line.startswith("@@"))[2:])
    assert s.token not in json.dumps(out) and out["tmp"].startswith("refused")
    assert out["tmpdir"] is True  # the agent's TMPDIR is there, writable


def test_the_real_runtime_directory_is_emptied_when_xdg_runtime_dir_is_elsewhere(ws, unix_servers, firejail):
    """XDG_RUNTIME_DIR elsewhere (WSL's) left /run/user/UID, the session bus and systemd's user manager, in reach."""
    s = unix_servers
    if not s.runtime:
        assert os.geteuid() != 0  # only a user without a login session has none: nothing there to reach
        return
    elsewhere = ws.base / "xdg"
    elsewhere.mkdir()
    ws.config_file.write_text("")
    args = {"paths": {"runtime (podman)": s.paths["runtime (podman)"]}}
    res = ws.run("--", PY, "-I", "-c", SOCK_PROBE, json.dumps(args), env={"XDG_RUNTIME_DIR": str(elsewhere)})
    print(res.out, res.err)
    assert res.rc == 0, res.err
    assert s.token not in res.out and "refused" in res.out


def test_the_refusal_lines_carry_no_bytes_the_agent_chose(ws, firejail):
    """A CONNECT target with escape codes and newlines was printed raw to the user's terminal after the session, and
    20,000 refused names printed 183 MB: no such target is counted, and the lines stop at 20."""
    ws.config_file.write_text("")
    code = (
        "import socket\n"
        "def ask(target):\n"
        "    s = socket.create_connection(('127.0.0.1', 3128))\n"
        "    s.sendall(b'CONNECT ' + target + b' HTTP/1.1\\r\\n\\r\\n')\n"
        "    print('@@', s.recv(300)[:12])\n"
        "ask(b'x:1\\n\\x1b[1;32mai-sandbox:\\x1b[0m clean\\n\\x1b]0;owned\\x07:443')\n"
        "for i in range(30):\n"
        "    ask(b'h%d.example.invalid:443' % i)\n"
    )
    res = ws.run("--", PY, "-I", "-c", code, timeout=90)
    assert res.rc == 0, res.err
    assert "\x1b" not in res.err and "\x07" not in res.err and "clean" not in res.err
    lines = [line for line in res.err.splitlines() if line.startswith("ai-sandbox: network:")]
    assert len(lines) == 21 and lines[-1] == "ai-sandbox: network: and 10 more hosts refused (10 requests)"


def test_an_endpoint_on_the_unspecified_address_is_the_loopback_one_and_nothing_else(ws, servers, firejail):
    """OLLAMA_HOST=0.0.0.0 made an exact entry 0.0.0.0:80, which reached the host's loopback port 80; Ollama's port is
    11434, on the loopback."""
    ws.config_file.write_text("")
    code = (
        "import socket\n"
        "s = socket.create_connection(('127.0.0.1', 3128))\n"
        f"s.sendall(b'CONNECT 0.0.0.0:{servers.tcp.getsockname()[1]} HTTP/1.1\\r\\n\\r\\n')\n"
        "print('@@', s.recv(300))\n"
    )
    res = ws.run("--", PY, "-I", "-c", code, env={"OLLAMA_HOST": "0.0.0.0"}, timeout=90)
    assert res.rc == 0, res.err
    assert servers.token not in res.out and "403" in res.out
    doc = json.loads(ws.run("explain", "--json", env={"OLLAMA_HOST": "0.0.0.0"}).out)
    assert doc["network"]["forwarded"] == ["127.0.0.1:11434"]


def test_this_machines_own_address_is_refused_unless_its_port_is_named(ws, servers, firejail):
    """An allowed name for this machine's public address reached the user's server bound on 0.0.0.0, on any port."""
    lan = lan_address()
    if not lan:
        assert not [a for a in _addresses() if not a.startswith("127.")]  # no other address to reach
        return
    port = servers.tcp.getsockname()[1]
    ws.config_file.write_text(f'allow_domains = ["{lan}"]\n')
    code = (
        "import socket\n"
        "s = socket.create_connection(('127.0.0.1', 3128))\n"
        f"s.sendall(b'CONNECT {lan}:{port} HTTP/1.1\\r\\n\\r\\n')\n"
        "data = b''\n"
        "while chunk := s.recv(400):\n"
        "    data += chunk\n"
        "print('@@', data.decode())\n"
    )
    res = ws.run("--", PY, "-I", "-c", code, timeout=90)
    assert res.rc == 0, res.err
    assert servers.token not in res.out and "this machine's own address" in res.out
    ws.config_file.write_text(f'allow_domains = ["{lan}:{port}"]\n')
    res = ws.run("--", PY, "-I", "-c", code, timeout=90)
    assert servers.token in res.out  # named exactly, it is the user's choice


def _addresses() -> list[str]:
    from ai_sandbox.proxy import local_addresses

    return sorted(local_addresses())


def test_deep_and_unlistable_sockets_under_run_are_masked(ws, firejail):
    """The scan stopped at 4 levels and skipped the directories a user cannot list (a socket there is reached by
    name)."""
    import shutil

    if os.geteuid() != 0:
        return  # only root can make a server's socket under /run: test_the_users_servers covers the rest
    tok = token("DEEP")
    top = Path(f"/run/ais-{tok}")
    deep = top / "a" / "b" / "c" / "d" / "e" / "s.sock"
    hidden = top / "closed" / "s.sock"
    uid = ws.user.uid if ws.user else 0
    servers = []
    try:
        for path in (deep, hidden):
            path.parent.mkdir(parents=True)
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.bind(str(path))
            os.chown(path, uid, uid)
            s.listen(4)
            servers.append(Answering(s, tok.encode()))
        (top / "closed").chmod(0o711)  # enter, not list
        ws.config_file.write_text("")
        args = {"paths": {"deep": str(deep), "unlistable": str(hidden)}}
        res = ws.run("--", PY, "-I", "-c", SOCK_PROBE, json.dumps(args), timeout=90)
        print(res.out, res.err)
        assert res.rc == 0, res.err
        assert tok not in res.out
    finally:
        for s in servers:
            s.close()
        shutil.rmtree(top, ignore_errors=True)


def test_a_literal_private_address_never_reaches_the_upstream_proxy(ws, firejail):
    """Through the caller's own proxy, an allowed literal private address was handed to it (`CONNECT 10.1.2.3:22`,
    the cloud metadata address), and a name with newlines too."""
    got: list[bytes] = []

    def refuse(c: socket.socket) -> None:
        got.append(c.recv(1000))
        c.sendall(b"HTTP/1.1 403 no\r\n\r\n")

    up = listening(socket.AF_INET, ("127.0.0.1", 0), refuse)
    try:
        ws.config_file.write_text('allow_domains = ["10.1.2.3", "169.254.169.254", "*.example.com"]\n')
        code = (
            "import socket\n"
            "for t in (b'10.1.2.3:22', b'169.254.169.254:80', b'evil.org:443\\nx-smuggled:y\\nz.example.com:443'):\n"
            "    s = socket.create_connection(('127.0.0.1', 3128))\n"
            "    s.sendall(b'CONNECT ' + t + b' HTTP/1.1\\r\\n\\r\\n')\n"
            "    print('@@', s.recv(300)[:40])\n"
        )
        env = {"HTTPS_PROXY": f"http://127.0.0.1:{up.getsockname()[1]}"}
        res = ws.run("--", PY, "-I", "-c", code, env=env, timeout=90)
        print(res.out, res.err, got)
        assert res.rc == 0, res.err
        assert not any(b"10.1.2.3" in g or b"169.254" in g or b"smuggled" in g for g in got), got
    finally:
        up.close()


def test_an_agent_linked_from_a_tmp_directory_still_starts(ws, firejail):
    """The sandbox's own /tmp keeps the entry holding the agent as named, not only where its link leads: a venv's
    python under /tmp is a link to an interpreter elsewhere (CI: `cannot start /tmp/…/.venv/bin/python3`)."""
    import shutil

    d = Path(f"/tmp/ais-agent-{token('AG').lower()}")
    (d / "bin").mkdir(parents=True)
    try:
        (d / "bin" / "tool").symlink_to(shutil.which("echo") or "/bin/echo")
        d.chmod(0o755)
        (d / "bin").chmod(0o755)
        ws.config_file.write_text("")
        res = ws.run("--", str(d / "bin" / "tool"), "started")
        assert res.rc == 0 and res.out == "started\n", res.err
    finally:
        shutil.rmtree(d)
