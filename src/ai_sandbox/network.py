"""Where the agent's data may go: the network mode, the allowlist of domains and where each entry came from.

Pure: the launch builds one `Network` from the user's config, the project's, the agent's profile, the
environment and the command line; the backends, the proxy (proxy.py), `explain` and `--dry-run` read it.

- `on`: the host's network as it is (today's behaviour).
- `allowlist` (the default): the agent gets a network namespace of its own, with nothing of the host's
  loopback or abstract unix sockets. The only way out is a proxy ai-sandbox runs outside for the session
  (proxy.py), which lets through the names of `domains` only. It listens inside on 127.0.0.1:`port`: the launch
  check binds that socket in the sandbox's namespace and hands it to the proxy over a descriptor the sandbox
  inherits (`FD`), so nothing of the host's network is reachable, not even the proxy's own. A host loopback
  endpoint an entry names (`127.0.0.1:8080`, the agent's API at `ANTHROPIC_BASE_URL=http://localhost:4000`)
  answers at the same address inside, forwarded the same way (`forwards`).
- `off`: the namespace with no way out.

Only the user widens: a project's `.ai-sandbox.toml` may narrow the mode, never add domains (config.py).
"""

from __future__ import annotations

from ai_sandbox.records import value

MODES = ("off", "allowlist", "on")  # narrowest first: a project's mode and the user's, the narrower wins
DEFAULT_MODE = "allowlist"
FD = 7  # the descriptor the sandbox inherits: the launch check sends its listening sockets to the proxy over it
PORT = 3128  # the proxy's address inside the sandbox's own namespace: 127.0.0.1:PORT
CONFIG_FILE = "~/.config/ai-sandbox/config.toml"

# Package registries and code hosts: what an agent's builds and git need (allow_default_domains = false drops it).
DEFAULT_DOMAINS = (
    # JavaScript
    "registry.npmjs.org", "registry.yarnpkg.com", "repo.yarnpkg.com", "nodejs.org", "deno.land", "jsr.io",
    # Python
    "pypi.org", "files.pythonhosted.org", "astral.sh",
    # Rust, Go, Ruby, Java, .NET, PHP
    "crates.io", "index.crates.io", "static.crates.io", "static.rust-lang.org", "sh.rustup.rs",
    "proxy.golang.org", "sum.golang.org",
    "rubygems.org", "index.rubygems.org",
    "repo.maven.apache.org", "repo1.maven.org", "plugins.gradle.org", "services.gradle.org", "dl.google.com",
    "api.nuget.org", "packagist.org", "repo.packagist.org",
    # code hosts
    "github.com", "api.github.com", "codeload.github.com", "objects.githubusercontent.com",
    "raw.githubusercontent.com", "gist.githubusercontent.com", "ghcr.io", "pkg-containers.githubusercontent.com",
    "gitlab.com", "registry.gitlab.com", "bitbucket.org",
)  # fmt: skip
DEFAULT_ORIGIN = "built-in: package registries and code hosts"

# Where an agent's API may be pointed from the environment: its host is allowed (and forwarded when on loopback).
ENDPOINT_VARIABLES = (
    "ANTHROPIC_BASE_URL", "ANTHROPIC_BEDROCK_BASE_URL", "ANTHROPIC_VERTEX_BASE_URL", "OPENAI_BASE_URL",
    "OPENAI_API_BASE", "AZURE_OPENAI_ENDPOINT", "GOOGLE_GEMINI_BASE_URL", "GEMINI_API_BASE_URL", "OLLAMA_HOST",
    "OLLAMA_API_BASE", "OPENROUTER_BASE_URL", "LITELLM_BASE_URL",
)  # fmt: skip
# The proxy variables the agent gets (the one deliberate change to its environment), upper and lower case.
PROXY_VARIABLES = ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "NO_PROXY")
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")


@value
class Domain:
    """One allowlist entry: `example.com`, `*.example.com` (its subdomains, not itself) or either with `:port`
    (that port only; without one, any port). `origin`: where it was written, as people read it."""

    host: str  # lower case, no brackets, no trailing dot; `*.` kept for a wildcard
    port: int  # 0: any port
    origin: str

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}" if self.port else host

    def matches(self, host: str, port: int) -> bool:
        if self.port and self.port != port:
            return False
        if self.host.startswith("*."):
            return host.endswith(self.host[1:]) and len(host) > len(self.host) - 1
        return host == self.host

    @property
    def names_port(self) -> bool:
        """An exact host:port entry: the one kind that may reach a private or loopback address."""
        return bool(self.port) and not self.host.startswith("*.")


@value
class Network:
    """The launch's network: its mode, why, and in `allowlist` what the proxy lets through."""

    mode: str = "on"
    why: str = ""  # where the mode came from: "default", "--network", a config file's line
    domains: tuple[Domain, ...] = ()
    forwards: tuple[tuple[str, int], ...] = ()  # host loopback endpoints answered at the same address inside
    port: int = PORT  # the proxy's port inside (moved past a forwarded port)
    upstream: str = ""  # the caller's own HTTP proxy (http://host:port), which the proxy goes through

    @property
    def private(self) -> bool:
        """Does the agent get a network namespace of its own?"""
        return self.mode != "on"

    def allowed(self, host: str, port: int) -> Domain | None:
        """The entry that lets host:port through, if any (host as normalize_host gives it)."""
        if self.mode != "allowlist":
            return None
        host = normalize_host(host)
        exact = [d for d in self.domains if d.names_port and d.matches(host, port)]
        return exact[0] if exact else next((d for d in self.domains if d.matches(host, port)), None)

    def environment(self) -> dict[str, str]:
        """The variables the agent's environment gains (upper and lower case): the proxy for everything but
        the namespace's own loopback, where the agent's own servers and the forwarded endpoints answer."""
        if self.mode != "allowlist":
            return {}
        url = f"http://127.0.0.1:{self.port}"
        values = {"HTTPS_PROXY": url, "HTTP_PROXY": url, "ALL_PROXY": f"socks5h://127.0.0.1:{self.port}"}
        values["NO_PROXY"] = "localhost,127.0.0.1,::1"
        return {**values, **{k.lower(): v for k, v in values.items()}}


def refusal_hint(host: str, port: int) -> str:
    """The config line that would let host:port through, for the 403 and the line after the session."""
    return f'add "{host}" (or "{host}:{port}") to allow_domains in {CONFIG_FILE}, or run with --network on'


def normalize_host(host: str) -> str:
    """A host as entries hold it: lower case, no trailing dot, no IPv6 brackets (an IDN is written xn--…); the
    unspecified address as the loopback one it reaches (OLLAMA_HOST=0.0.0.0: red team)."""
    host = host.lower().rstrip(".")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    return {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(host, host)


def host_name(host: str) -> bool:
    """Is host (normalized) a name or an address a connection may name? Nothing else reaches the allowlist, the
    upstream proxy or the user's terminal."""
    return _host_ok(host) and not host.startswith("*.") and len(host) <= 253


def address(host: str) -> str | None:
    """host as an IP address, when it is one."""
    import ipaddress

    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        return None


def parse_entry(entry: str, origin: str) -> Domain | None:
    """An allow_domains entry as a Domain; None when it is not one (the caller says where)."""
    text = entry  # blanks are no part of a name: refused below, never trimmed
    port = 0
    if text.startswith("["):  # [::1]:8080
        close = text.find("]")
        if close < 0:
            return None
        host, rest = text[1:close], text[close + 1 :]
        if rest:
            if not rest.startswith(":") or not rest[1:].isdigit():
                return None
            port = int(rest[1:])
    elif text.count(":") == 1:
        host, _, p = text.partition(":")
        if not p.isdigit():
            return None
        port = int(p)
    else:
        host = text
    host = normalize_host(host)
    if not 0 <= port <= 65535 or not _host_ok(host):
        return None
    return Domain(host, port, origin)


def _host_ok(host: str) -> bool:
    if ":" in host:  # an IPv6 address
        import ipaddress

        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            return False
        return True
    body = host[2:] if host.startswith("*.") else host
    labels = body.split(".")
    return bool(body) and all(
        label and len(label) <= 63 and all(c.isascii() and (c.isalnum() or c in "-_") for c in label) for label in labels
    ) and ("." in body or not host.startswith("*."))  # `*.com` is fine, `*.` alone is not  # fmt: skip


def endpoint(url: str, default_port: int = 0) -> tuple[str, int] | None:
    """The host and port an endpoint variable's URL names (`http://localhost:4000/v1`, `host:11434`); without a
    port, default_port or the scheme's."""
    text = url.strip()
    if not text:
        return None
    scheme, sep, rest = text.partition("://")
    if not sep:
        scheme, rest = "http", text
    hostport = rest.split("/", 1)[0].rsplit("@", 1)[-1]
    default = default_port or (443 if scheme.lower() in ("https", "wss") else 80)
    domain = parse_entry(hostport, "")
    if domain is None or domain.host.startswith("*."):
        return None
    return domain.host, domain.port or default


def is_loopback(host: str) -> bool:
    return normalize_host(host) in LOOPBACK_NAMES or normalize_host(host).startswith("127.")


def build(
    mode: str,
    why: str,
    *,
    user: list[tuple[str, str]],
    profile: list[tuple[str, str]],
    env: dict[str, str] | None = None,
    defaults: bool = True,
) -> Network:
    """The launch's Network. user/profile: (entry, origin) pairs already checked (config.py, profiles.py)."""
    if mode != "allowlist":
        return Network(mode=mode, why=why)
    env = env or {}
    domains: list[Domain] = []
    for entry, origin in [*user, *profile]:
        d = parse_entry(entry, origin)
        if d is not None:
            domains.append(d)
    for name in ENDPOINT_VARIABLES:
        found = endpoint(env.get(name, ""), 11434 if name.startswith("OLLAMA") else 0)  # Ollama's own default
        if found is not None:
            domains.append(Domain(normalize_host(found[0]), found[1], f"environment: {name}"))
    if defaults:
        domains += [Domain(d, 0, DEFAULT_ORIGIN) for d in DEFAULT_DOMAINS]
    unique = list({(d.host, d.port): d for d in reversed(domains)}.values())[::-1]  # the first origin named
    forwards: list[tuple[str, int]] = []
    for d in unique:
        if d.port and is_loopback(d.host):
            for address in ("127.0.0.1", "::1") if d.host in ("localhost", "::1") else (d.host,):
                if (address, d.port) not in forwards:
                    forwards.append((address, d.port))
    taken = {p for _, p in forwards}
    port = PORT
    while port in taken:
        port += 1
    return Network(mode, why, tuple(unique), tuple(forwards), port, upstream=_upstream(env))


def _upstream(env: dict[str, str]) -> str:
    """The caller's own HTTP proxy, which the proxy must go through where the machine reaches out only that way."""
    for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        url = env.get(name, "").strip()
        if url.lower().startswith("http://") or (url and "://" not in url):
            found = endpoint(url if "://" in url else "http://" + url)
            if found is not None:
                host = f"[{found[0]}]" if ":" in found[0] else found[0]
                return f"{host}:{found[1]}"
    return ""


def narrower(a: str, b: str) -> str:
    return a if MODES.index(a) <= MODES.index(b) else b


# Addresses a name must not resolve to unless an entry names that host:port: the host's own and its LAN's.
_PRIVATE_V4 = (
    ("0.0.0.0", 8), ("10.0.0.0", 8), ("100.64.0.0", 10), ("127.0.0.0", 8), ("169.254.0.0", 16),
    ("172.16.0.0", 12), ("192.168.0.0", 16), ("224.0.0.0", 4), ("240.0.0.0", 4),
)  # fmt: skip
_PRIVATE_V6 = (("::", 128), ("::1", 128), ("fc00::", 7), ("fe80::", 10), ("ff00::", 8))


def private_address(address: str) -> bool:
    """Loopback, link-local, private (RFC 1918, unique local, shared), multicast or unspecified: the host's
    own services and its LAN's, which DNS must not be able to point an allowed name at."""
    import ipaddress

    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return True
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    table = _PRIVATE_V4 if ip.version == 4 else _PRIVATE_V6
    return any(ip in ipaddress.ip_network(f"{net}/{bits}") for net, bits in table)
