"""Config files: what they mean, and one clear error naming file and line for everything else."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ai_sandbox import config
from ai_sandbox.errors import ConfigError
from ai_sandbox.patterns import PROJECT, USER, Source


def user_cfg(tmp_path, text: str) -> config.UserConfig:
    (tmp_path / "ai-sandbox").mkdir(exist_ok=True)
    (tmp_path / "ai-sandbox" / "config.toml").write_text(text)
    return config.load_user({"XDG_CONFIG_HOME": str(tmp_path)})


def test_missing_user_config_is_the_empty_default(tmp_path):
    cfg = config.load_user({"XDG_CONFIG_HOME": str(tmp_path)})
    assert not cfg.exists and cfg.block_paths == [] and cfg.allow_dependencies
    assert cfg.on_hidden_change == "end"
    assert user_cfg(tmp_path, 'on_hidden_change = "warn"\n').on_hidden_change == "warn"


def test_user_block_paths_and_patterns(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", "/home/u")
    cfg = user_cfg(tmp_path, 'block = ["~/.config/gcloud", "/srv/keys/", "*.pem"]\nallow = [".cursor/"]\n')
    assert [p for p, _ in cfg.block_paths] == ["/home/u/.config/gcloud", "/srv/keys"]
    assert [p.text for p in cfg.block_patterns] == ["*.pem"]
    assert [p.text for p in cfg.allow] == [".cursor/"]
    assert str(cfg.block_paths[0][1]).endswith("config.toml:1") and cfg.block_paths[0][1].origin == USER


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("block = [", "invalid TOML"),
        ('block = "x"', ":1: `block` must be a list"),
        ("allow_dependencies = 1", ":1: `allow_dependencies` must be true or false"),
        ('backend = "docker2"', "unknown backend"),
        ('\n\nblok = ["x"]', ":3: unknown key `blok`"),
        ('allow = ["../up"]', "outside the project"),
        ('block = ["~nosuchuser/x"]', "cannot expand"),
        ('on_hidden_change = "ignore"', ":1: unknown on_hidden_change 'ignore'"),
        ("block = [" + ", ".join(['"x"'] * 10_001) + "]", "more than 10000"),
        ('writable = ["rel/dir"]', ":1: writable 'rel/dir' is not an absolute or ~/ path"),
        ('writable = ["~/.cache/*"]', "is not an absolute or ~/ path"),
        ('writable = ["~"]', "writable whole"),
        ('writable = ["/"]', "writable whole"),
        ("confine_writes = 0", "`confine_writes` must be true or false"),
    ],
)
def test_user_config_errors(tmp_path, text, fragment):
    with pytest.raises(ConfigError) as exc:
        user_cfg(tmp_path, text)
    assert fragment in str(exc.value)
    assert str(tmp_path) in exc.value.message


def test_project_config_and_legacy_are_both_read(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", "/home/u")
    root = str(tmp_path)
    (tmp_path / ".ai-sandbox.toml").write_text('block = ["*.tfvars", "~/.shared-secret"]\nallow = ["build/"]\n')
    (tmp_path / ".ai-sandbox").write_text(f"AI_SANDBOX_BLOCK_PATHS=({root}/config/prod.yml /opt/x)\n")
    cfg = config.load_project(root)
    assert [p.text for p in cfg.block] == ["*.tfvars", "/config/prod.yml"]
    assert [p for p, _ in cfg.block_paths] == ["/home/u/.shared-secret", "/opt/x"]
    assert [str(p.source) for p in cfg.block] == [".ai-sandbox.toml:1", ".ai-sandbox:1"]
    assert cfg.warnings and "both" in cfg.warnings[0]


@pytest.mark.parametrize(
    "text",
    ['block = ["../x"]', 'allow = ["~/x"]', 'allow = ["a/../../b"]', 'block = [""]', 'backend = "firejail"'],
)
def test_project_config_refusals(tmp_path, text):
    (tmp_path / ".ai-sandbox.toml").write_text(text + "\n")
    with pytest.raises(ConfigError) as exc:
        config.load_project(str(tmp_path))
    assert os.path.join(str(tmp_path), ".ai-sandbox.toml") + ":1" in exc.value.message


def test_project_allow_may_not_name_a_global_block(tmp_path):
    user = config.UserConfig(path="/c/config.toml", block_paths=[("/p/creds/token", Source(USER, "/c/config.toml", 1))])
    for allow in ("creds/", "creds/token", "*"):
        proj = config.ProjectConfig(allow=[config.Pattern(allow, Source(PROJECT, ".ai-sandbox.toml", 2))])
        with pytest.raises(ConfigError, match=r"\.ai-sandbox\.toml:2"):
            config.check_project_allow(proj, user, "/p")
    proj = config.ProjectConfig(allow=[config.Pattern("build/", Source(PROJECT, ".ai-sandbox.toml", 2))])
    config.check_project_allow(proj, user, "/p")  # unrelated allow is fine


def test_a_remembered_parse_is_used_only_for_the_same_bytes(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    assert user_cfg(tmp_path, 'block = ["*.pem"]\n').block_patterns[0].text == "*.pem"
    assert list((tmp_path / "state" / "ai-sandbox" / "parsed").iterdir())  # remembered
    cfg = user_cfg(tmp_path, 'block = ["*.key"]\n')  # same size, other bytes: parsed again
    assert [p.text for p in cfg.block_patterns] == ["*.key"]
    with pytest.raises(ConfigError):
        user_cfg(tmp_path, "block = [\n")  # a broken file is never served from the cache


# The exact refusal of each kind of key, and which of several mistakes is reported (the table's order).
@pytest.mark.parametrize(
    "text, message",
    [
        ('mounts = "~/x"', '{path}:1: `mounts` must be a list of strings — write it as mounts = ["path/", "*.pem"]'),
        (
            'allow = ["#c"]',
            "{path}:1: `allow` entry '#c' matches nothing (a comment or a bare `!` in gitignore syntax) — write \\# to match a name that starts with #",
        ),
        ('allow_build_outputs = "no"', "{path}:1: `allow_build_outputs` must be true or false"),
        ("backend = []", "{path}:1: unknown backend [] — use one of: " + ", ".join(config.BACKENDS)),
        ("engine = 3", "{path}:1: unknown engine 3 — use one of: docker, podman"),
        ('image = ["x"]', '{path}:1: `image` must be a string — e.g. image = "ai-sandbox-agent"'),
        (
            'mounts = ["relative/path"]',
            "{path}:1: mount 'relative/path' is not an absolute or ~/ path — e.g. mounts = [\"~/.gitconfig\"]",
        ),
        *[
            (
                f"max_masks = {v}",
                "{path}:1: `max_masks` must be a whole number from 1 to 90,000 — the kernel allows about 100,000 mounts in all; leave it out to use the backend's own limit",
            )
            for v in ("0", "90001", "true", "1.5", '"10"')
        ],
        (
            "[extra]\nblock = []",
            "{path}:1: unknown key `extra` — known keys: " + ", ".join(sorted(k.name for k in config.USER_KEYS)),
        ),
        (
            'allow = 1\nblock = ["~nosuchuser/x"]',
            "{path}:2: cannot expand '~nosuchuser/x' — write ~/… or an absolute path",
        ),
        ('max_masks = 0\nbackend = "x"', "{path}:2: unknown backend 'x' — use one of: " + ", ".join(config.BACKENDS)),
        ('engine = "x"\non_hidden_change = "y"', "{path}:2: unknown on_hidden_change 'y' — use one of: end, warn"),
    ],
)
def test_user_config_refusals_are_exact(tmp_path, text, message):
    with pytest.raises(ConfigError) as exc:
        user_cfg(tmp_path, text + "\n")
    assert str(exc.value) == message.format(path=tmp_path / "ai-sandbox" / "config.toml")


def test_every_user_key_loads(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", "/home/u")
    cfg = user_cfg(
        tmp_path,
        'allow_dependencies = false\nallow_build_outputs = false\nbackend = "docker"\non_hidden_change = "warn"\n'
        'engine = "podman"\nimage = "img"\nmounts = ["~/.gitconfig", "/etc/x"]\nmax_masks = 90000\n',
    )
    assert (cfg.allow_dependencies, cfg.allow_build_outputs, cfg.backend, cfg.on_hidden_change) == (
        False,
        False,
        "docker",
        "warn",
    )
    assert (cfg.engine, cfg.image, cfg.mounts, cfg.max_masks) == ("podman", "img", ["~/.gitconfig", "/etc/x"], 90000)


def test_load_user_takes_any_mapping(tmp_path):
    from types import MappingProxyType

    user_cfg(tmp_path, 'backend = "firejail"\n')
    assert config.load_user(MappingProxyType({"XDG_CONFIG_HOME": str(tmp_path)})).backend == "firejail"


def test_the_tables_agree_with_the_records():
    """A record made without a file (UserConfig(path=...)) has the defaults a file without the key gets."""
    fields = config.UserConfig._fields
    for key in config.USER_KEYS + config.PROJECT_KEYS:
        assert (key.kind == "list") == (key.each is not None), key.name
        assert key.kind in ("list", "bool", "choice", "string", "count"), key.name
        assert key.doc and "\n" not in key.doc and "|" not in key.doc, key.name
        if key.kind == "choice":
            assert key.default in key.choices, key.name
    defaults = config.UserConfig(path="p")
    for key in config.USER_KEYS:
        if key.kind != "list":
            assert key.name in fields and getattr(defaults, key.name) == key.default, key.name
    assert config.load_user({"XDG_CONFIG_HOME": "/nonexistent"}) == config.UserConfig(
        path="/nonexistent/ai-sandbox/config.toml"
    )


CONFIGURATION = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


def test_the_documented_config_reference_is_the_generated_one():
    """docs/configuration.md's key reference is generated from the tables: regenerate it rather than edit it."""
    text = CONFIGURATION.read_text(encoding="utf-8")
    start = text.index("<!-- config-reference:start")
    start = text.index("-->\n", start) + len("-->\n")
    block = text[start : text.index("<!-- config-reference:end -->", start)]
    assert block.strip("\n") == config.reference().strip("\n"), (
        "docs/configuration.md's configuration reference differs from config.py's tables: run `make docs` (it "
        "writes the output of `python -m ai_sandbox.config --reference` between the config-reference markers)"
    )


def test_the_reference_command_prints_the_reference():
    out = subprocess.run(
        [sys.executable, "-m", "ai_sandbox.config", "--reference"], capture_output=True, text=True, check=True
    ).stdout
    assert out == config.reference()


@pytest.mark.parametrize("text", ['writable = ["~/x"]', "confine_writes = false"])
def test_a_project_may_not_widen_where_the_agent_writes(tmp_path, text):
    (tmp_path / ".ai-sandbox.toml").write_text("block = []\n" + text + "\n")
    with pytest.raises(ConfigError) as exc:
        config.load_project(str(tmp_path))
    assert ".ai-sandbox.toml:2:" in exc.value.message and "only in your own config" in exc.value.message
