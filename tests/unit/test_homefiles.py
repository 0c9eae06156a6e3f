"""A profile's `[moved]` files (profiles.py) and their move (homefiles.py), on a temp home: no sandbox involved."""

from __future__ import annotations

import os

import pytest

from ai_sandbox import homefiles, profiles
from ai_sandbox.errors import ConfigError


def _profile(tmp_path, body: str) -> profiles.Profile:
    path = tmp_path / "agent.toml"
    path.write_text('home = ["~/.agent/"]\n' + body)
    return profiles.load(str(path))


def test_the_shipped_claude_profile_moves_its_config_into_its_state():
    claude = profiles.load(os.path.join(profiles.shipped_dir(), "claude.toml"))
    assert claude.moved == {"~/.claude.json": "~/.claude/.claude.json"}


@pytest.mark.parametrize(
    "entry",
    [
        '"~/.a.json" = "~/.other/.a.json"',  # not in a home directory of the profile
        '"~/d/.a.json" = "~/.agent/.a.json"',  # not straight in the home
        '"~/.a.json" = "~/.agent/"',  # no file name
        '"~/.a.json" = "~/.agent/.."',
        '"~/.a.json" = "~/.agent/x/y"',
        '".a.json" = "~/.agent/.a.json"',
        '"~/.a.json" = 1',
    ],
)
def test_a_moved_entry_outside_the_profiles_state_is_refused(tmp_path, entry):
    with pytest.raises(ConfigError):
        _profile(tmp_path, f"[moved]\n{entry}\n")


def test_the_move_keeps_the_same_file_and_leaves_a_relative_link(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    (home / ".a.json").write_text("mine")
    ino = (home / ".a.json").stat().st_ino
    pairs = homefiles.moves({"~/.a.json": "~/.agent/.a.json"}, str(home))
    lines = homefiles.relocate(pairs, str(home), "Agent")
    assert len(lines) == 1 and lines[0].startswith("moved ~/.a.json to ~/.agent/.a.json")
    assert os.readlink(home / ".a.json") == ".agent/.a.json"
    assert (home / ".agent" / ".a.json").stat().st_ino == ino  # the same file: nothing copied
    assert homefiles.relocate(pairs, str(home), "Agent") == []  # once


def test_a_link_of_yours_elsewhere_is_left_and_named(tmp_path):
    home = tmp_path / "home"
    (tmp_path / "dotfiles").mkdir()
    home.mkdir()
    (tmp_path / "dotfiles" / "a.json").write_text("mine")
    os.symlink(tmp_path / "dotfiles" / "a.json", home / ".a.json")
    lines = homefiles.relocate(homefiles.moves({"~/.a.json": "~/.agent/.a.json"}, str(home)), str(home), "Agent")
    assert len(lines) == 1 and "add that directory to `writable`" in lines[0]
    assert os.readlink(home / ".a.json") == str(tmp_path / "dotfiles" / "a.json")


def test_nothing_moves_into_a_state_directory_that_is_a_link(tmp_path):
    """~/.claude linked into a dotfiles checkout: the file would land there, untracked (an API key in a git
    checkout), and the link stays read-only inside anyway."""
    home = tmp_path / "home"
    dotfiles = tmp_path / "dotfiles" / "agent"
    dotfiles.mkdir(parents=True)
    home.mkdir()
    os.symlink(dotfiles, home / ".agent")
    (home / ".a.json").write_text("mine")
    lines = homefiles.relocate(homefiles.moves({"~/.a.json": "~/.agent/.a.json"}, str(home)), str(home), "Agent")
    assert len(lines) == 1 and "nothing was moved" in lines[0]
    assert (home / ".a.json").is_file() and not (home / ".a.json").is_symlink()
    assert not (dotfiles / ".a.json").exists()
