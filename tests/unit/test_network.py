"""The network's pure rules (network.py) and its config keys: which names an allowlist lets through, which
addresses count as the host's own, what the agent's environment gains, and who may widen it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ai_sandbox import config, network
from ai_sandbox.errors import ConfigError
from ai_sandbox.network import Domain, build, endpoint, parse_entry, private_address


@pytest.mark.parametrize(
    ("entry", "host", "port"),
    [
        ("example.com", "example.com", 0),
        ("Example.COM.", "example.com", 0),
        ("*.example.com", "*.example.com", 0),
        ("example.com:8443", "example.com", 8443),
        ("localhost:8080", "localhost", 8080),
        ("127.0.0.1:4000", "127.0.0.1", 4000),
        ("[::1]:8080", "::1", 8080),
        ("::1", "::1", 0),
        ("my_host.internal:5432", "my_host.internal", 5432),
    ],
)
def test_entries_that_parse(entry, host, port):
    d = parse_entry(entry, "here")
    assert d is not None and (d.host, d.port) == (host, port)


@pytest.mark.parametrize(
    "entry",
    ["", "*", "*.", "http://example.com", "example.com/path", "example.com:http", "example.com:70000", "a b.com",
     "[::1", "[::1]x", "ex ample.com", "example.com:", "user@example.com", "*.*.com", "é.com\n"],
)  # fmt: skip
def test_entries_that_do_not(entry):
    assert parse_entry(entry, "here") is None


def test_a_wildcard_is_the_subdomains_only():
    d = Domain("*.example.com", 0, "")
    assert d.matches("api.example.com", 443) and d.matches("a.b.example.com", 80)
    assert not d.matches("example.com", 443)
    assert not d.matches("evilexample.com", 443)
    assert not d.matches("example.com.evil.org", 443)


def test_a_port_narrows_an_entry():
    d = Domain("example.com", 8443, "")
    assert d.matches("example.com", 8443) and not d.matches("example.com", 443)
    assert Domain("example.com", 0, "").matches("example.com", 22)


def _net(**kw):
    args = dict(user=[], profile=[], env={}, defaults=True) | kw
    return build("allowlist", "default", **args)


def test_the_allowlist_is_the_users_the_profiles_the_environments_and_the_built_in_ones():
    net = _net(
        user=[("corp.example:443", "~/.config/ai-sandbox/config.toml:2")],
        profile=[("api.anthropic.com", "profile claude")],
        env={"ANTHROPIC_BASE_URL": "https://gateway.example.org/v1", "OPENAI_BASE_URL": ""},
    )
    origins = {str(d): d.origin for d in net.domains}
    assert origins["corp.example:443"] == "~/.config/ai-sandbox/config.toml:2"
    assert origins["api.anthropic.com"] == "profile claude"
    assert origins["gateway.example.org:443"] == "environment: ANTHROPIC_BASE_URL"
    assert origins["registry.npmjs.org"] == network.DEFAULT_ORIGIN
    assert net.allowed("PyPI.org", 443) is not None
    assert net.allowed("evil.example.net", 443) is None
    assert net.allowed("gateway.example.org", 80) is None  # the variable named port 443


def test_allow_default_domains_false_drops_the_built_in_list_only():
    net = _net(user=[("pypi.org", "cfg:1")], defaults=False)
    assert net.allowed("pypi.org", 443) is not None
    assert net.allowed("registry.npmjs.org", 443) is None


def test_the_first_origin_of_a_repeated_entry_is_named():
    net = _net(user=[("registry.npmjs.org", "cfg:3")])
    assert [d.origin for d in net.domains if d.host == "registry.npmjs.org"] == ["cfg:3"]


def test_loopback_endpoints_are_forwarded_and_the_proxy_port_moves_past_them():
    net = _net(
        user=[("localhost:3128", "cfg:1"), ("127.0.0.1:9000", "cfg:2")],
        env={"ANTHROPIC_BASE_URL": "http://127.0.0.1:3129"},
    )
    assert ("127.0.0.1", 3128) in net.forwards and ("::1", 3128) in net.forwards
    assert ("127.0.0.1", 9000) in net.forwards and ("127.0.0.1", 3129) in net.forwards
    assert net.port == 3130
    assert net.environment()["HTTPS_PROXY"] == "http://127.0.0.1:3130"


def test_an_exact_host_port_entry_wins_over_a_name_so_it_may_reach_a_private_address():
    net = _net(user=[("db.internal", "cfg:1"), ("db.internal:5432", "cfg:2")])
    found = net.allowed("db.internal", 5432)
    assert found is not None and found.names_port
    other = net.allowed("db.internal", 80)
    assert other is not None and not other.names_port


def test_the_environment_gains_the_proxy_in_both_cases_and_nothing_in_the_other_modes():
    env = _net().environment()
    for name in network.PROXY_VARIABLES:
        assert env[name] == env[name.lower()]
    assert env["HTTPS_PROXY"] == "http://127.0.0.1:3128"
    assert env["ALL_PROXY"] == "socks5h://127.0.0.1:3128"
    assert env["NO_PROXY"] == "localhost,127.0.0.1,::1"
    assert build("off", "x", user=[], profile=[]).environment() == {}
    assert build("on", "x", user=[], profile=[]).environment() == {}
    assert not build("on", "x", user=[], profile=[]).private
    assert build("off", "x", user=[], profile=[]).allowed("pypi.org", 443) is None


def test_the_callers_own_proxy_is_the_upstream():
    assert _net(env={"https_proxy": "http://proxy.corp:8080/"}).upstream == "proxy.corp:8080"
    assert _net(env={"HTTP_PROXY": "proxy.corp:3128"}).upstream == "proxy.corp:3128"
    assert _net(env={"ALL_PROXY": "socks5://proxy.corp:1080"}).upstream == ""
    assert _net().upstream == ""


@pytest.mark.parametrize(
    ("url", "found"),
    [
        ("http://localhost:4000/v1", ("localhost", 4000)),
        ("https://api.example.com", ("api.example.com", 443)),
        ("http://user:pw@host.example:81/x", ("host.example", 81)),
        ("localhost:11434", ("localhost", 11434)),
        ("http://[::1]:8080/", ("::1", 8080)),
        ("", None),
        ("https://*.example.com/", None),
    ],
)
def test_endpoints(url, found):
    assert endpoint(url) == found


@pytest.mark.parametrize(
    "address",
    ["127.0.0.1", "127.8.9.10", "10.0.0.1", "172.16.5.4", "192.168.1.1", "169.254.169.254", "100.64.0.1", "0.0.0.0",
     "::1", "::", "fe80::1", "fe80::1%eth0", "fd00::1", "::ffff:127.0.0.1", "::ffff:10.1.1.1", "224.0.0.1", "junk"],
)  # fmt: skip
def test_the_hosts_own_addresses_are_private(address):
    assert private_address(address)


@pytest.mark.parametrize("address", ["93.184.215.14", "203.0.113.80", "2606:4700::1111", "8.8.8.8", "172.32.0.1"])
def test_public_addresses_are_not(address):
    assert not private_address(address)


def test_the_narrower_mode_wins():
    assert network.narrower("on", "allowlist") == "allowlist"
    assert network.narrower("off", "allowlist") == "off"
    assert network.narrower("on", "on") == "on"


def _user(tmp_path, monkeypatch, text):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    (tmp_path / "ai-sandbox").mkdir(exist_ok=True)
    (tmp_path / "ai-sandbox" / "config.toml").write_text(text)
    return config.load_user()


def test_the_user_config_keys(tmp_path, monkeypatch):
    cfg = _user(tmp_path, monkeypatch, 'network = "off"\n\nallow_domains = ["a.example", "*.b.example:8443"]\n')
    assert cfg.network == "off" and cfg.lines["network"] == 1
    assert [e for e, _ in cfg.allow_domains] == ["a.example", "*.b.example:8443"]
    assert cfg.allow_domains[0][1].endswith("config.toml:3")
    assert _user(tmp_path, monkeypatch, "").network == "allowlist"


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ('network = "open"\n', "unknown network 'open'"),
        ('allow_domains = ["https://x.example/"]\n', "is not a host name"),
        ('allow_domains = ["ok.example",\n  "bad host"]\n', ":2: allow_domains entry 'bad host'"),
        ("allow_default_domains = 1\n", "must be true or false"),
    ],
)
def test_bad_user_values_name_the_file_and_line(tmp_path, monkeypatch, text, said):
    with pytest.raises(ConfigError, match=None) as e:
        _user(tmp_path, monkeypatch, text)
    assert said in str(e.value) and "config.toml" in str(e.value)


@pytest.mark.parametrize("key", ['allow_domains = ["x.example"]', "allow_default_domains = false", 'network = "on"'])
def test_a_project_may_not_open_the_network(tmp_path, key):
    (tmp_path / ".ai-sandbox.toml").write_text(key + "\n")
    with pytest.raises(ConfigError) as e:
        config.load_project(str(tmp_path))
    assert ".ai-sandbox.toml:1" in str(e.value)


@pytest.mark.parametrize("mode", ["off", "allowlist"])
def test_a_project_may_narrow_it(tmp_path, mode):
    (tmp_path / ".ai-sandbox.toml").write_text(f'block = ["x"]\nnetwork = "{mode}"\n')
    cfg = config.load_project(str(tmp_path))
    assert cfg.network == mode and cfg.lines["network"] == 2


# -- sockets.py: which of the host's unix sockets a launch puts out of reach --------------------------------------


def test_tmp_is_the_sandboxs_own_but_for_the_entries_the_launch_needs(tmp_path):
    from ai_sandbox import sockets

    s = sockets.plan({}, 1000, ["/tmp/proj/sub", "/tmp/proj/other", "/tmp/home-x/.cache", "/home/me"], found=[])
    assert s.tmp and s.kept == ("/tmp/proj", "/tmp/home-x")
    whole = sockets.plan({}, 1000, ["/tmp", "/home/me"], found=[])
    assert not whole.tmp and whole.kept == () and "/tmp is needed whole" in whole.why_not_tmp


def test_sockets_found_are_masked_unless_passed_or_gone_with_a_private_directory(tmp_path):
    from ai_sandbox import sockets

    agent = tmp_path / "agent.sock"
    agent.touch()
    found = ["/run/docker.sock", "/run/dbus/system_bus_socket", "/tmp/tmux-1000/default", "/tmp/proj/app.sock",
             str(agent)]  # fmt: skip
    s = sockets.plan({"SSH_AUTH_SOCK": str(agent)}, 1000, ["/tmp/proj"], found=found)
    assert s.masked == ("/run/docker.sock", "/run/dbus/system_bus_socket", "/tmp/proj/app.sock")
    assert s.passed == (str(agent),)
    cut = sockets.plan({"SSH_AUTH_SOCK": str(agent)}, 1000, ["/tmp/proj"], ssh_agent=False, found=found)
    assert cut.passed == () and str(agent) not in cut.masked  # gone with the sandbox's own /tmp
    elsewhere = sockets.plan({"SSH_AUTH_SOCK": "/dev/null"}, 1000, [], ssh_agent=False, found=[])
    assert elsewhere.masked == ("/dev/null",)  # outside /tmp and the runtime directory: masked


def test_the_runtime_directory_is_shown_empty_unless_the_launch_needs_it(tmp_path):
    from ai_sandbox import sockets

    rt = tmp_path / "run"
    rt.mkdir()
    assert sockets.plan({"XDG_RUNTIME_DIR": str(rt)}, 99999, ["/home/me"], found=[]).runtime == (str(rt),)
    assert sockets.plan({"XDG_RUNTIME_DIR": str(rt)}, 99999, [str(rt / "proj")], found=[]).runtime == ()
    assert sockets.plan({"XDG_RUNTIME_DIR": "relative"}, 99999, [], found=[]).runtime == ()


def test_tmpdir_is_made_in_the_sandboxs_own_never_kept(tmp_path):
    from ai_sandbox import sockets

    for tmpdir in ("/tmp", "/tmp/user/1000", "/tmp/proj/t"):
        s = sockets.plan({"TMPDIR": tmpdir}, 99999, ["/tmp/proj/repo"], found=[])
        assert s.tmp and s.kept == ("/tmp/proj",), tmpdir
        assert s.made == {"/tmp": "", "/tmp/user/1000": "/tmp/user/1000", "/tmp/proj/t": ""}[tmpdir], tmpdir


def test_the_scan_finds_sockets_eight_levels_down(tmp_path):
    import socket

    from ai_sandbox import sockets

    deep = tmp_path / "a" / "b" / "c" / "d" / "e" / "f"
    deep.mkdir(parents=True)
    made = []
    for path in (tmp_path / "x.sock", deep / "y.sock"):
        s = socket.socket(socket.AF_UNIX)
        s.bind(str(path))
        made.append(s)
    (tmp_path / "plain").write_text("")
    assert sockets.scan(str(tmp_path)) == sorted([str(deep / "y.sock"), str(tmp_path / "x.sock")])
    for s in made:
        s.close()


def test_a_needed_path_is_kept_as_named_and_as_resolved(tmp_path):
    """A venv's python under /tmp links to an interpreter elsewhere, and the exec goes through the link."""
    from ai_sandbox import sockets

    target = tmp_path / "python3.11"
    target.write_text("")
    d = Path("/tmp") / f"ais-venv-{os.getpid()}"
    (d / "bin").mkdir(parents=True, exist_ok=True)
    try:
        (d / "bin" / "python3").symlink_to("/usr/bin/env")
        s = sockets.plan({}, 99999, [str(d / "bin" / "python3")], found=[])
        assert str(d) in s.kept
    finally:
        import shutil

        shutil.rmtree(d)
