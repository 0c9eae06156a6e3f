"""The session's proxy: the one way out of the sandbox's own network namespace, outside it (network.py).

The launch forks it before the sandbox starts (`start`). The sandbox inherits one end of a socket pair at
network.FD; the launch check inside binds 127.0.0.1:PORT (and each forwarded loopback endpoint) in the sandbox's
namespace and sends the listening sockets over it. The proxy accepts on them from here: the agent's connections
arrive in this process, which alone can reach the host's network, and goes out only to what the allowlist names.

On the proxy port it speaks HTTP (`CONNECT host:port`, and plain `GET http://host/…`) and SOCKS5 (the first byte
tells). Names are resolved here; an address that is loopback, link-local or private is refused unless an entry
names that host:port, so an allowed name cannot be pointed by DNS at the host's own services. A refusal answers
403 (SOCKS5: "not allowed") with one line naming what to add to the config, and the session's refusals are counted
and printed, one line per host, when the sandbox is gone.

Why not a library (proxy.py, pproxy, mitmproxy): the listening sockets come from another network namespace over
SCM_RIGHTS and the decision per name is ours, with its reason and its count; what is left is a CONNECT/SOCKS5 relay
of ~200 lines of the standard library, which a dependency would not shorten. Threads, not asyncio: nothing here
is imported on the launch path: the forked process imports it once the launch check has sent the sandbox's
sockets (launch._proxy_process), not while the sandbox starts.
"""

from __future__ import annotations

import contextlib
import socket
import sys
import threading

from ai_sandbox import network
from ai_sandbox.network import Network

_HEAD_MAX = 64 * 1024
_TIMEOUT = 30.0


class Refused(Exception):
    """A connection the allowlist does not let through: the line the agent and the user read."""


class Proxy:
    def __init__(self, net: Network) -> None:
        self.net = net
        self.refused: dict[str, int] = {}
        self.lock = threading.Lock()
        self.local = local_addresses()

    # -- decisions ---------------------------------------------------------------------------------------------
    def open(self, host: str, port: int) -> socket.socket:
        """A connection to host:port if the allowlist lets it through; Refused otherwise."""
        host = network.normalize_host(host)
        if not network.host_name(host) or not 0 < port < 65536:
            # never counted nor printed: the agent chose these bytes (escape codes for the user's terminal: red team)
            raise Refused(f"ai-sandbox: {host[:100]!r} is not a host name")
        entry = self.net.allowed(host, port)
        if entry is None:
            self._count(host, port)
            raise Refused(
                f"ai-sandbox: {host}:{port} is not in the network allowlist: {network.refusal_hint(host, port)}"
            )
        literal = network.address(host)
        if self.net.upstream and not network.is_loopback(host) and (literal is None or not self._own(literal)):
            return self._through_upstream(host, port)  # which resolves the name: literal addresses are checked here
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        usable = [i for i in infos if entry.names_port or not self._own(str(i[4][0]))]
        if not usable:
            self._count(host, port)
            raise Refused(
                f"ai-sandbox: {host} resolves to {infos[0][4][0]}, a loopback, private or this machine's own address, "
                f'which only an entry naming "{host}:{port}" in allow_domains lets through'
            )
        last: OSError | None = None
        for family, kind, proto, _, addr in usable:
            s = socket.socket(family, kind, proto)
            s.settimeout(_TIMEOUT)
            try:
                s.connect(addr)
                s.settimeout(None)
                return s
            except OSError as e:
                s.close()
                last = e
        raise last or OSError(f"cannot connect to {host}:{port}")

    def _own(self, address: str) -> bool:
        """Loopback, private, link-local, or an address of this machine's own interfaces (its public one too: a
        server of the user's bound on 0.0.0.0 answers there; red team)."""
        return network.private_address(address) or address.split("%", 1)[0] in self.local

    def _through_upstream(self, host: str, port: int) -> socket.socket:
        """Through the caller's own HTTP proxy, where the machine reaches out only that way."""
        uhost, _, uport = self.net.upstream.rpartition(":")
        s = socket.create_connection((uhost.strip("[]"), int(uport)), timeout=_TIMEOUT)
        target = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        s.sendall(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
        head = _read_head(s)
        if head is None or head[0].split(b" ")[1:2] != [b"200"]:
            s.close()
            raise OSError(f"the upstream proxy {self.net.upstream} refused {target}")
        s.settimeout(None)
        if head[1]:
            raise OSError("the upstream proxy sent data before the tunnel")
        return s

    def _count(self, host: str, port: int) -> None:
        with self.lock:
            key = f"{host}:{port}"
            self.refused[key] = self.refused.get(key, 0) + 1

    # -- the agent's side --------------------------------------------------------------------------------------
    def serve(self, listener: socket.socket, forward: tuple[str, int] | None) -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=self._one, args=(conn, forward), daemon=True).start()

    def _one(self, conn: socket.socket, forward: tuple[str, int] | None) -> None:
        try:
            if forward is not None:  # a host loopback endpoint the allowlist names: the same address outside
                family = socket.AF_INET6 if ":" in forward[0] else socket.AF_INET
                up = socket.socket(family, socket.SOCK_STREAM)
                up.connect(forward)
                _relay(conn, up)
                return
            first = conn.recv(1, socket.MSG_PEEK)
            if first == b"\x05":
                self._socks(conn)
            elif first:
                self._http(conn)
        except (OSError, ValueError):
            pass
        finally:
            with contextlib.suppress(OSError):
                conn.close()

    def _http(self, conn: socket.socket) -> None:
        head = _read_head(conn)
        if head is None:
            return
        lines, rest = head
        parts = lines.split(b"\r\n")[0].split(b" ")
        if len(parts) != 3:
            _answer(conn, 400, "ai-sandbox: not an HTTP request")
            return
        method, target, version = (p.decode("latin-1") for p in parts)
        if method == "CONNECT":
            host, port = _split_hostport(target, 443)
            up = self._opened(conn, host, port)
            if up is None:
                return
            conn.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            if rest:
                up.sendall(rest)
            _relay(conn, up)
            return
        if not target.lower().startswith("http://"):
            _answer(conn, 400, "ai-sandbox: a proxy request names an absolute http:// URL (https goes through CONNECT)")
            return
        hostport, _, path = target[7:].partition("/")
        host, port = _split_hostport(hostport, 80)
        up = self._opened(conn, host, port)
        if up is None:
            return
        headers = [
            h for h in lines.split(b"\r\n")[1:] if not h.lower().startswith((b"proxy-connection:", b"proxy-auth"))
        ]
        request = f"{method} /{path} {version}".encode("latin-1")
        up.sendall(b"\r\n".join([request, *headers]) + b"\r\n\r\n" + rest)
        _relay(conn, up)

    def _opened(self, conn: socket.socket, host: str, port: int) -> socket.socket | None:
        """open(), or the HTTP answer that says why not (403 refused, 502 unreachable) and None."""
        try:
            return self.open(host, port)
        except Refused as e:
            _answer(conn, 403, str(e))
        except OSError as e:
            _answer(conn, 502, f"ai-sandbox: cannot reach {host}:{port}: {e}")
        return None

    def _socks(self, conn: socket.socket) -> None:
        greeting = _recv_exact(conn, 2)
        _recv_exact(conn, greeting[1])
        conn.sendall(b"\x05\x00")  # no authentication
        ver, cmd, _, atyp = _recv_exact(conn, 4)
        if atyp == 1:
            host = socket.inet_ntop(socket.AF_INET, _recv_exact(conn, 4))
        elif atyp == 4:
            host = socket.inet_ntop(socket.AF_INET6, _recv_exact(conn, 16))
        elif atyp == 3:
            host = _recv_exact(conn, _recv_exact(conn, 1)[0]).decode("idna")
        else:
            conn.sendall(b"\x05\x08\x00\x01" + bytes(6))
            return
        port = int.from_bytes(_recv_exact(conn, 2), "big")
        if ver != 5 or cmd != 1:  # CONNECT only: no BIND, no UDP
            conn.sendall(b"\x05\x07\x00\x01" + bytes(6))
            return
        try:
            up = self.open(host, port)
        except Refused:  # SOCKS5 has no room for a reason: "connection not allowed by ruleset"
            conn.sendall(b"\x05\x02\x00\x01" + bytes(6))
            return
        except OSError:
            conn.sendall(b"\x05\x05\x00\x01" + bytes(6))
            return
        conn.sendall(b"\x05\x00\x00\x01" + bytes(6))
        _relay(conn, up)

    def summary(self, most: int = 20) -> list[str]:
        """One line per refused host:port, most refused first, at most `most` of them (the agent chooses how many
        hosts it tries): what the user reads after the session."""
        out = []
        ranked = sorted(self.refused.items(), key=lambda kv: (-kv[1], kv[0]))
        for key, n in ranked[:most]:
            host, _, port = key.rpartition(":")
            times = "once" if n == 1 else f"{n} times"
            out.append(f"ai-sandbox: network: refused {key} ({times}); {network.refusal_hint(host, int(port))}")
        if len(ranked) > most:
            rest = sum(n for _, n in ranked[most:])
            out.append(f"ai-sandbox: network: and {len(ranked) - most} more hosts refused ({rest} requests)")
        return out


def local_addresses() -> frozenset[str]:
    """This machine's own interface addresses, IPv4 (the kernel's local routes) and IPv6."""
    found: set[str] = set()
    try:
        with open("/proc/net/fib_trie", encoding="ascii", errors="replace") as f:
            last = ""
            for line in f:
                parts = line.split()
                if parts[:1] == ["|--"] and len(parts) == 2:
                    last = parts[1]
                elif "/32 host LOCAL" in line and last:
                    found.add(last)
    except OSError:
        pass
    try:
        with open("/proc/net/if_inet6", encoding="ascii") as f:
            for line in f:
                raw = line.split()[0]
                found.add(socket.inet_ntop(socket.AF_INET6, bytes.fromhex(raw)))
    except (OSError, ValueError):
        pass
    return frozenset(found)


def _split_hostport(text: str, default: int) -> tuple[str, int]:
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        return host, int(rest[1:]) if rest.startswith(":") else default
    host, sep, port = text.rpartition(":")
    if sep and port.isdigit() and ":" not in host:
        return host, int(port)
    return text, default


def _read_head(s: socket.socket) -> tuple[bytes, bytes] | None:
    """An HTTP head (up to its blank line) and what came after it; None when the peer closed first."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = s.recv(4096)
        if not chunk or len(data) > _HEAD_MAX:
            return None
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    return head, rest


def _recv_exact(s: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = s.recv(n - len(data))
        if not chunk:
            raise ValueError("closed")
        data += chunk
    return data


def _answer(conn: socket.socket, code: int, line: str) -> None:
    reason = {400: "Bad Request", 403: "Forbidden", 502: "Bad Gateway"}[code]
    body = (line + "\n").encode()
    conn.sendall(
        f"HTTP/1.1 {code} {reason}\r\nContent-Type: text/plain\r\nContent-Length: {len(body)}\r\n"
        f"Connection: close\r\nX-AI-Sandbox: {line[len('ai-sandbox: ') :]}\r\n\r\n".encode("utf-8", "replace")
        + body
    )


def _pipe(src: socket.socket, dst: socket.socket) -> None:
    try:
        while data := src.recv(65536):
            dst.sendall(data)
    except OSError:
        pass
    with contextlib.suppress(OSError):
        dst.shutdown(socket.SHUT_WR)


def _relay(a: socket.socket, b: socket.socket) -> None:
    t = threading.Thread(target=_pipe, args=(b, a), daemon=True)
    t.start()
    _pipe(a, b)
    t.join()
    with contextlib.suppress(OSError):
        b.close()


def _receive(ctl: socket.socket) -> list[socket.socket]:
    """The listening sockets the launch check sends from inside; none if it never does."""
    try:
        _, fds, _, _ = socket.recv_fds(ctl, 16, 64)
    except OSError:
        return []
    return [socket.socket(fileno=fd) for fd in fds]


def _forward_of(listener: socket.socket, net: Network) -> tuple[str, int] | None | bool:
    """What a received listener is, from where it is bound (never from what the message says): the proxy port
    (None), a forwarded endpoint (its host address), or False for anything else (closed)."""
    try:
        addr, port = listener.getsockname()[:2]
    except OSError:
        return False
    if (addr, port) == ("127.0.0.1", net.port):
        return None
    return (addr, port) if (addr, port) in net.forwards else False


def run(net: Network, ctl: socket.socket) -> None:
    """The proxy process: serve what the sandbox sends until the sandbox is gone, then say what was refused."""
    proxy = Proxy(net)
    for listener in _receive(ctl):
        forward = _forward_of(listener, net)
        if forward is False:
            listener.close()
            continue
        threading.Thread(target=proxy.serve, args=(listener, forward), daemon=True).start()
    with contextlib.suppress(OSError):
        while ctl.recv(4096):  # the sandbox's end closes when the sandbox is gone
            pass
    for line in proxy.summary():
        print(line, file=sys.stderr)
    sys.stderr.flush()


def serve(net: Network, channel: int) -> None:
    """The proxy process (launch._proxy_process, once the sandbox's sockets are on their way): serve on the channel."""
    run(net, socket.socket(fileno=channel))
