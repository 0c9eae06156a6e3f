"""Config files: what they mean, and one clear error naming file and line for everything else."""

from __future__ import annotations

import os

import pytest

from ai_sandbox import config
from ai_sandbox.errors import ConfigError


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
    assert cfg.block_paths[0][1].endswith("config.toml:1")


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
    assert [p.source for p in cfg.block] == [".ai-sandbox.toml:1", ".ai-sandbox:1"]
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
    user = config.UserConfig(path="/c/config.toml", block_paths=[("/p/creds/token", "/c/config.toml:1")])
    for allow in ("creds/", "creds/token", "*"):
        proj = config.ProjectConfig(allow=[config.Pattern(allow, ".ai-sandbox.toml:2")])
        with pytest.raises(ConfigError, match=r"\.ai-sandbox\.toml:2"):
            config.check_project_allow(proj, user, "/p")
    proj = config.ProjectConfig(allow=[config.Pattern("build/", ".ai-sandbox.toml:2")])
    config.check_project_allow(proj, user, "/p")  # unrelated allow is fine


def test_a_remembered_parse_is_used_only_for_the_same_bytes(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    assert user_cfg(tmp_path, 'block = ["*.pem"]\n').block_patterns[0].text == "*.pem"
    assert list((tmp_path / "state" / "ai-sandbox" / "parsed").iterdir())  # remembered
    cfg = user_cfg(tmp_path, 'block = ["*.key"]\n')  # same size, other bytes: parsed again
    assert [p.text for p in cfg.block_patterns] == ["*.key"]
    with pytest.raises(ConfigError):
        user_cfg(tmp_path, "block = [\n")  # a broken file is never served from the cache
