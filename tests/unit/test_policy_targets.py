"""Where a mask lands when a hidden path resolves outside the project, and when the launch must refuse
instead (issue 11, part 2): pure policy with a fake realpath, plus find_repo against real git for the
GIT_DIR family of variables and the firejail check of where the project lives."""

from __future__ import annotations

import os
import subprocess

import pytest

from ai_sandbox.errors import PolicyError
from ai_sandbox.patterns import Pattern, PatternSet
from ai_sandbox.policy import CRYPT, EXPLICIT, GLOBAL, IGNORED, Entry, build

ROOT = "/home/u/code/p"
HOME = "/home/u"


def allow(*texts: str) -> PatternSet:
    return PatternSet([Pattern(t, "test") for t in texts])


def linked(links: dict[str, str], *, allowed: PatternSet | None = None, **kw):
    """The policy for ignored entries ROOT/<name>, each a link to links[name]."""
    real = {f"{ROOT}/{k}": v for k, v in links.items()}
    entries = [Entry(f"{ROOT}/{k}", False, IGNORED, "ignored by git") for k in links]
    return build(ROOT, entries, allowed or allow(), home=HOME, realpath=lambda p: real.get(p, p), **kw)


def paths(policy) -> list[str]:
    return sorted(m.path for m in policy.masks)


def never(policy) -> list[str]:
    return [w.message for w in policy.warnings if w.kind == "never-masked"]


def test_links_to_data_locations_are_masked_at_the_target():
    """Docker secrets (/run/secrets), service state (/var/lib), /srv, /opt, /mnt, /media, /dev/shm: until
    now /run and /var targets were left readable with a warning."""
    targets = {
        ".env": "/run/secrets/db",
        "k.key": "/var/lib/app/key",
        "s": "/srv/site/token",
        "o": "/opt/tool/cred",
        "m": "/mnt/usb/key",
        "shm": "/dev/shm/app/s",
        "vt": "/var/tmp/x",
    }
    pol = linked(targets)
    assert paths(pol) == sorted(targets.values())
    assert not never(pol)
    assert all(m.note == "symlink target" and m.origin.startswith(ROOT) for m in pol.masks)


def test_a_shared_directory_itself_is_never_masked_and_said_readable():
    """/tmp, /mnt, /var/lib, /run, /dev/shm whole would break every program: not masked, and explain says
    plainly it stays readable. (Until now /tmp, /mnt, /srv and /opt were masked whole.)"""
    shared = ("/tmp", "/mnt", "/srv", "/opt", "/var/lib", "/run", "/dev/shm")
    pol = linked({f"l{i}": t for i, t in enumerate(shared)})
    assert paths(pol) == []
    assert len(never(pol)) == 7 and all("readable inside" in m for m in never(pol))


def test_links_into_public_system_content_are_said_readable():
    """A nix `result -> /nix/store/…` link is common and not secret; /usr likewise."""
    pol = linked({"result": "/nix/store/abc-pkg", "py": "/usr/bin/python3"})
    assert paths(pol) == []
    assert len(never(pol)) == 2 and all("readable inside" in m and "system content" in m for m in never(pol))


def test_a_link_into_etc_refuses_unless_allowed():
    """/etc can hold secrets and a mask there hides the file for every program: refuse in one line."""
    with pytest.raises(PolicyError, match=r"passwd\.link.*/etc/passwd.*under /etc") as e:
        linked({"passwd.link": "/etc/passwd"})
    assert "allow" in e.value.hint and "\n" not in str(e.value)
    pol = linked({"passwd.link": "/etc/passwd"}, allowed=allow("passwd.link"))
    assert paths(pol) == [] and [k.path for k in pol.kept] == [f"{ROOT}/passwd.link"]


def test_a_project_block_into_etc_refuses_and_a_global_block_is_trusted():
    with pytest.raises(PolicyError, match="under /etc"):
        build(ROOT, [Entry("/etc/app/token", False, EXPLICIT, "block (.ai-sandbox.toml)")], allow(), realpath=str)
    pol = build(ROOT, [Entry("/etc/app/token", False, GLOBAL, "g"), Entry("/etc", True, GLOBAL, "g")], allow())
    assert paths(pol) == ["/etc/app/token"] and len(never(pol)) == 1


def test_home_and_the_directories_above_it_are_never_masked():
    """Masking /home hides home as surely as masking home (until now a link to /home was masked)."""
    pol = build(
        "/srv/p",
        [Entry("/srv/p/h", False, IGNORED, "i"), Entry("/srv/p/hh", False, IGNORED, "i")],
        allow(),
        home="/home/u",
        realpath=lambda p: {"/srv/p/h": "/home", "/srv/p/hh": "/home/u"}.get(p, p),
    )
    assert paths(pol) == [] and len(never(pol)) == 2


def crypt_key(path: str) -> Entry:
    return Entry(path, True, CRYPT, "git-crypt key directory")


def test_a_git_crypt_key_directory_under_var_is_masked_and_one_under_usr_refuses():
    """The key decrypts the history: masked where it can be, else the launch refuses (not a warning)."""
    pol = build(ROOT, [crypt_key("/var/lib/repos/p.git/git-crypt")], allow(), home=HOME, realpath=str)
    assert paths(pol) == ["/var/lib/repos/p.git/git-crypt"]
    for where in ("/usr/local/src/p.git/git-crypt", "/nix/store/x.git/git-crypt"):
        with pytest.raises(PolicyError, match="git-crypt key directory"):
            build(ROOT, [crypt_key(where)], allow(), home=HOME, realpath=str)


def test_widening_never_reaches_a_shared_directory():
    """A target under /var/lib that the backend cannot name widens to its parent, never to /var/lib."""
    with pytest.raises(PolicyError, match="/var/lib must stay visible"):
        linked({"k": "/var/lib/a,b"}, express=lambda p: "has a comma" if "," in p else None)
    pol = linked({"k": "/var/lib/app/a,b"}, express=lambda p: "has a comma" if "," in p else None)
    assert paths(pol) == ["/var/lib/app"]


# --- the firejail backend's private directories ------------------------------------------------------------


@pytest.mark.parametrize("cwd", ["/var/tmp/p", "/var/tmp", "/dev/shm/p/sub", "/dev/p"])
def test_firejail_refuses_a_project_in_a_directory_it_replaces(cwd):
    from ai_sandbox.backends.docker import Docker
    from ai_sandbox.backends.firejail import Firejail
    from ai_sandbox.backends.plan import Settings
    from ai_sandbox.policy import check_reachable

    with pytest.raises(PolicyError, match="move the project") as e:
        check_reachable(cwd, "firejail", Firejail.private_dirs)
    assert cwd in str(e.value)
    check_reachable(cwd, "docker", Docker(Settings()).private_dirs)  # the container mounts the project at its path
    check_reachable("/var/tmpx/p", "firejail", Firejail.private_dirs)


# --- GIT_DIR and friends (real git) --------------------------------------------------------------------------


def git(*args: str, cwd) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_CONFIG_NOSYSTEM="1", GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@e", GIT_COMMITTER_NAME="t")
    env.update(GIT_COMMITTER_EMAIL="t@e", HOME=str(cwd))
    subprocess.run(["git", "-c", "safe.directory=*", *args], cwd=cwd, env=env, check=True, capture_output=True)


@pytest.fixture
def repos(tmp_path, monkeypatch):
    for name in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_CEILING_DIRECTORIES", "GIT_COMMON_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for name in ("proj", "other"):
        (tmp_path / name / "src").mkdir(parents=True)
        git("init", "-q", cwd=tmp_path / name)
    (tmp_path / "plain").mkdir()
    return tmp_path


def test_find_repo_refuses_a_git_dir_of_another_repository(repos, monkeypatch):
    from ai_sandbox.git import find_repo

    monkeypatch.setenv("GIT_DIR", str(repos / "other" / ".git"))
    for cwd in (repos / "proj", repos / "proj" / "src"):
        with pytest.raises(PolicyError, match="GIT_DIR="):
            find_repo(str(cwd))


def test_find_repo_refuses_a_git_dir_that_fails(repos, monkeypatch):
    """Until now "not a git repository" from a broken GIT_DIR read as "not in git": global blocks only."""
    from ai_sandbox.git import find_repo

    monkeypatch.setenv("GIT_DIR", str(repos / "nothing"))
    for cwd in (repos / "proj", repos / "plain"):
        with pytest.raises(PolicyError, match="GIT_DIR="):
            find_repo(str(cwd))


def test_find_repo_refuses_a_relative_work_tree_from_a_subdirectory(repos, monkeypatch):
    """GIT_WORK_TREE=.. from proj/src names proj, but from proj (where the layers ask git) the parent."""
    from ai_sandbox.git import find_repo

    monkeypatch.setenv("GIT_WORK_TREE", "..")
    with pytest.raises(PolicyError, match="relative"):
        find_repo(str(repos / "proj" / "src"))


def test_find_repo_accepts_variables_naming_the_repository_itself(repos, monkeypatch):
    """And a ceiling that changes nothing outside any repository is still "not in git"."""
    from ai_sandbox.git import find_repo

    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(repos / "proj"))
    assert find_repo(str(repos / "plain")) is None
    with pytest.raises(PolicyError, match="GIT_CEILING_DIRECTORIES="):  # it hides proj from proj/src
        find_repo(str(repos / "proj" / "src"))
    monkeypatch.delenv("GIT_CEILING_DIRECTORIES")
    monkeypatch.setenv("GIT_DIR", str(repos / "proj" / ".git"))
    monkeypatch.setenv("GIT_WORK_TREE", str(repos / "proj"))
    repo = find_repo(str(repos / "proj" / "src"))
    assert repo is not None and repo.root == str(repos / "proj")
