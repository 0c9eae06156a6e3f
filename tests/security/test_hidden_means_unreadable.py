"""What explain lists as hidden is unreadable inside, or the launch refuses in one line (issue 11, part 2).

Through the real `ai-sandbox`, git and firejail, as root and as an unprivileged user: ignored links to
secrets under /run and /var (masked at the target), into /etc (refused), a git-crypt key directory outside
the project (masked under /var, refused under /usr), projects under /var/tmp and /dev/shm (firejail replaces
both with empty directories: refused), and GIT_DIR / GIT_WORK_TREE set by the caller (refused unless git
uses exactly the tree it finds without them). Each secret is a fresh random string; finding it in the
output means it was read. Whatever a test creates under /run, /var, /etc, /usr or /dev/shm it removes.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.conftest import (
    BACKENDS,  # noqa: F401  (the module runs once per backend: conftest)
    Result,
    Workspace,
    root_only,
    token,
    unavailable,
)

pytestmark = pytest.mark.sandbox


def _one_line_refusal(res: Result, *words: str) -> None:
    print(f"--- rc={res.rc}\n--- stdout\n{res.out}\n--- stderr\n{res.err}")
    assert res.rc == 65, (res.rc, res.err)
    assert "Traceback" not in res.err
    assert len(res.err.strip().splitlines()) == 1, res.err
    assert res.err.startswith("ai-sandbox: error:")
    for w in words:
        assert w in res.err, (w, res.err)


def _inside(ws: Workspace, script: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> Result:
    res = ws.run("--", "sh", "-c", script + "; true", cwd=cwd, env=env)
    print(f"--- rc={res.rc}\n--- stdout\n{res.out}\n--- stderr\n{res.err}")
    return res


@pytest.fixture
def system_dir():
    """make(parent): a fresh world-readable directory under a system directory, removed afterwards."""
    made: list[Path] = []

    def make(parent: str) -> Path:
        root_only(f"creates a directory in {parent}")
        if not os.access(parent, os.W_OK):
            pytest.fail(f"cannot create a directory in {parent}, even as root")
        d = Path(tempfile.mkdtemp(prefix="ais-test-", dir=parent))
        d.chmod(0o755)
        made.append(d)
        return d

    yield make
    for d in made:
        shutil.rmtree(d, ignore_errors=True)


def _secret_file(d: Path, name: str) -> str:
    value = token("SYSSECRET")
    (d / name).write_text(value + "\n")
    (d / name).chmod(0o644)  # readable by the test user outside the sandbox: only the mask stops it
    return value


def _ignore(ws: Workspace, patterns: str) -> None:
    ws.write(".gitignore", patterns)
    ws.git("add", ".gitignore")
    ws.git("commit", "-qm", "ignore")


# --- ignored links to data locations: masked at the target ----------------------------------------------


def test_ignored_links_to_secrets_under_run_and_var_are_masked_at_the_target(ws, firejail, system_dir):
    """Docker secrets live in /run/secrets; services keep keys under /var/lib. Until now both were
    readable inside, with only an explain warning ("never masked (a system or home path)")."""
    run_dir, var_dir = system_dir("/run"), system_dir("/var/lib")
    run_secret, var_secret = _secret_file(run_dir, "db_password"), _secret_file(var_dir, "api.key")
    (run_dir / "secrets").mkdir(mode=0o755)
    dir_secret = _secret_file(run_dir / "secrets", "token")  # a root-owned directory, for the user too
    _ignore(ws, ".env\n*.key\nsecrets\n")
    os.symlink(run_dir / "db_password", ws.repo / ".env")
    os.symlink(var_dir / "api.key", ws.repo / "service.key")
    os.symlink(run_dir / "secrets", ws.repo / "secrets")
    script = (
        f"cat .env service.key secrets/token '{run_dir}/db_password' '{var_dir}/api.key' '{run_dir}/secrets/token'"
        "; ls /run /var/lib | grep -c ."
    )
    res = _inside(ws, script)
    assert res.rc == 0, res.err
    for secret in (run_secret, var_secret, dir_secret):
        assert secret not in res.out + res.err
    assert int(res.out.split()[-1]) > 2  # /run and /var/lib themselves stay usable
    doc = json.loads(ws.run("explain", "--json").out)
    hidden = {h["path"] for h in doc["hidden"]}
    assert {str(run_dir / "db_password"), str(var_dir / "api.key"), str(run_dir / "secrets")} <= hidden
    assert not [w for w in doc["warnings"] if w["kind"] == "never-masked"]


def test_a_link_to_a_shared_directory_itself_is_said_readable_and_nothing_else_is_lost(ws, firejail, system_dir):
    """`mnt -> /mnt` (or /tmp, /srv, /opt): a shared directory is never masked whole (other programs need
    it) and explain says plainly that it stays readable. Until now /mnt, /srv, /opt were masked whole."""
    shared = system_dir("/mnt")
    (shared / "data.txt").write_text("SHARED-VISIBLE\n")
    (shared / "data.txt").chmod(0o644)
    _ignore(ws, "mnt\n")
    os.symlink("/mnt", ws.repo / "mnt")
    res = _inside(ws, f"cat '{shared}/data.txt'")
    assert res.rc == 0, res.err
    assert "SHARED-VISIBLE" in res.out
    doc = json.loads(ws.run("explain", "--json").out)
    assert "/mnt" not in {h["path"] for h in doc["hidden"]}
    assert any(w["kind"] == "never-masked" and "readable inside" in w["message"] for w in doc["warnings"])


# --- links into /etc: refused ---------------------------------------------------------------------------


def test_an_ignored_link_into_etc_refuses_and_etc_is_never_masked(ws, firejail, system_dir):
    """/etc can hold secrets, and masking a file there would hide it for every program: one line, nothing
    runs; explain and --dry-run refuse alike. Allowing the link (it may be read) runs, /etc intact."""
    etc_dir = system_dir("/etc")
    secret = _secret_file(etc_dir, "creds")
    _ignore(ws, "*.link\n")
    os.symlink(etc_dir / "creds", ws.repo / "creds.link")
    marker = ws.base / "ran"
    res = ws.run("--", "sh", "-c", f"cat creds.link; touch '{marker}'")
    _one_line_refusal(res, "creds.link", "/etc", "allow")
    assert secret not in res.out + res.err and not marker.exists()
    for args in (("explain",), ("--dry-run", "--", "true")):
        _one_line_refusal(ws.run(*args), "creds.link")
    ws.write(".ai-sandbox.toml", 'allow = ["creds.link"]\n')
    res = _inside(ws, "cat creds.link; head -1 /etc/passwd")
    assert res.rc == 0, res.err
    assert secret in res.out and "root:" in res.out  # allowed: readable, and /etc/passwd untouched


def test_an_ignored_link_into_usr_local_etc_refuses_like_etc(ws, firejail, system_dir):
    """Found by the red team: /usr/local/etc is configuration (it can hold secrets) although under /usr,
    whose content is public; the link was "never masked, readable inside" with no word at launch."""
    if not os.path.isdir("/usr/local/etc"):
        unavailable("no /usr/local/etc on this machine")
    etc_dir = system_dir("/usr/local/etc")
    secret = _secret_file(etc_dir, "db.env")
    _ignore(ws, ".env\n")
    os.symlink(etc_dir / "db.env", ws.repo / ".env")
    res = ws.run("--", "sh", "-c", "cat .env")
    _one_line_refusal(res, ".env", "/usr/local/etc")
    assert secret not in res.out + res.err


# --- the git-crypt key directory outside the project -----------------------------------------------------


def _separate_git_dir(ws: Workspace, parent: Path) -> tuple[Path, str]:
    """Move the repository's git directory to parent/repo.git (`git init --separate-git-dir`), with a
    git-crypt key file in it (written by hand: git-crypt need not run)."""
    gitdir = parent / "repo.git"
    shutil.move(str(ws.repo / ".git"), gitdir)
    (ws.repo / ".git").write_text(f"gitdir: {gitdir}\n")
    ws.git("config", "core.worktree", str(ws.repo))
    key = token("GITCRYPTKEY")
    (gitdir / "git-crypt" / "keys").mkdir(parents=True)
    (gitdir / "git-crypt" / "keys" / "default").write_text(key + "\n")
    if ws.user:
        subprocess.run(["chown", "-R", f"{ws.user.uid}:{ws.user.gid}", str(parent)], check=True)
    return gitdir, key


def test_a_git_crypt_key_directory_under_var_is_hidden(ws, firejail, system_dir):
    """A git directory under /var (project elsewhere): the key directory is masked, not skipped."""
    gitdir, key = _separate_git_dir(ws, system_dir("/var/lib"))
    res = _inside(ws, f"cat '{gitdir}/git-crypt/keys/default'; ls -a '{gitdir}/git-crypt'; git log --oneline")
    assert res.rc == 0, res.err
    assert key not in res.out + res.err
    assert "init" in res.out  # the agent's git still works: only the key directory is hidden


def test_a_git_crypt_key_directory_that_cannot_be_hidden_refuses(ws, firejail, system_dir):
    """A git directory under /usr/local (system content, never masked): the key would be readable, so the
    launch refuses in one line instead of a quiet `never-masked` warning."""
    gitdir, key = _separate_git_dir(ws, system_dir("/usr/local"))
    marker = ws.base / "ran"
    res = ws.run("--", "sh", "-c", f"cat '{gitdir}/git-crypt/keys/default'; touch '{marker}'")
    _one_line_refusal(res, "git-crypt key", str(gitdir / "git-crypt"))
    assert key not in res.out + res.err and not marker.exists()


# --- projects the firejail sandbox would not contain -------------------------------------------------------


@pytest.mark.backends("firejail")  # bwrap: tested below
@pytest.mark.parametrize("parent", ["/var/tmp", "/dev/shm"])
def test_a_project_under_var_tmp_or_dev_shm_refuses(ws, firejail, system_dir, parent):
    """firejail mounts an empty /var/tmp, and `private-dev` an empty /dev/shm: the project is not in the
    sandbox and the agent silently started in $HOME. Now one line naming the directory and the way out;
    explain and --dry-run say the same."""
    base = system_dir(parent)
    root = base / "app"
    root.mkdir()
    ws.git("init", "-q", "-b", "main", cwd=root)
    (root / ".gitignore").write_text(".env\n")
    (root / ".env").write_text(token("ENVSECRET") + "\n")
    if ws.user:
        subprocess.run(["chown", "-R", f"{ws.user.uid}:{ws.user.gid}", str(base)], check=True)
    marker = ws.base / "ran"
    res = ws.run("--", "touch", str(marker), cwd=root)
    _one_line_refusal(res, parent, "move the project")
    assert not marker.exists()
    for args in (("explain",), ("--dry-run", "--", "true")):
        _one_line_refusal(ws.run(*args, cwd=root), parent)


@pytest.mark.backends("bwrap")
def test_bwrap_shows_var_tmp_as_it_is_and_refuses_dev_shm(ws, system_dir):
    """bwrap binds the host whole but mounts a minimal /dev (with an empty /dev/shm): a project under
    /var/tmp runs there with its secret hidden; one under /dev/shm is refused up front like firejail's."""
    for parent in ("/var/tmp", "/dev/shm"):
        base = system_dir(parent)
        root = base / "app"
        root.mkdir()
        ws.git("init", "-q", "-b", "main", cwd=root)
        (root / ".gitignore").write_text(".env\n")
        secret = token("ENVSECRET")
        (root / ".env").write_text(secret + "\n")
        (root / "app.txt").write_text("APP-VISIBLE\n")
        if ws.user:
            subprocess.run(["chown", "-R", f"{ws.user.uid}:{ws.user.gid}", str(base)], check=True)
        res = ws.run("--", "sh", "-c", "pwd; cat app.txt .env; true", cwd=root)
        if parent == "/dev/shm":
            _one_line_refusal(res, parent, "move the project")
        else:
            assert res.rc == 0, res.err
            assert res.out.startswith(f"{root}\nAPP-VISIBLE\n"), res.out
            assert secret not in res.out + res.err


# --- GIT_DIR and friends set by the caller ----------------------------------------------------------------


def _other_repo(ws: Workspace, tracked: dict[str, str]) -> Path:
    other = ws.base / "other"
    other.mkdir()
    ws.git("init", "-q", "-b", "main", cwd=other)
    for rel, content in tracked.items():
        (other / rel).write_text(content)
    ws.git("add", ".", cwd=other)
    ws.git("commit", "-qm", "other", cwd=other)
    return other


@pytest.mark.parametrize("where", ["root", "subdir"])
def test_git_dir_pointing_at_another_repository_refuses(ws, firejail, where):
    """With GIT_DIR of another repository, git reads the rules of the wrong tree: from a subdirectory the
    project's .env lay outside the "project", from the root a `.env` tracked in the other index was not
    ignored — both readable. Now the launch refuses, naming the variable."""
    _ignore(ws, ".env\n")
    ws.write("src/app.py", "APP\n")
    secret = token("ENVSECRET")
    ws.write(".env", secret + "\n")
    other = _other_repo(ws, {".env": "tracked there\n"})
    cwd = ws.repo if where == "root" else ws.repo / "src"
    env = {"GIT_DIR": str(other / ".git")}
    marker = ws.base / "ran"
    res = ws.run("--", "sh", "-c", f"cat '{ws.repo}/.env'; touch '{marker}'", cwd=cwd, env=env)
    _one_line_refusal(res, "GIT_DIR=")
    assert secret not in res.out + res.err and not marker.exists()
    _one_line_refusal(ws.run("explain", cwd=cwd, env=env), "GIT_DIR=")


def test_a_git_dir_that_fails_refuses_instead_of_not_in_git(ws, firejail):
    """GIT_DIR naming no repository made git answer "not a git repository", read as "not in git: only
    global blocks apply" — every ignored secret readable."""
    _ignore(ws, ".env\n")
    secret = token("ENVSECRET")
    ws.write(".env", secret + "\n")
    env = {"GIT_DIR": str(ws.base / "no-such-repo")}
    marker = ws.base / "ran"
    res = ws.run("--", "sh", "-c", f"cat .env; touch '{marker}'", env=env)
    _one_line_refusal(res, "GIT_DIR=", "no-such-repo")
    assert secret not in res.out + res.err and not marker.exists()


def test_git_variables_launch_only_when_they_select_the_tree_git_finds_without_them(ws, firejail):
    """An index of its own (GIT_INDEX_FILE) in which `.env` is tracked made it "not ignored", readable: now
    refused. GIT_DIR and GIT_WORK_TREE naming the project itself: the launch runs and hides as usual."""
    _ignore(ws, ".env\n")
    secret = token("ENVSECRET")
    ws.write(".env", secret + "\n")
    index = ws.base / "other-index"
    shutil.copy(ws.repo / ".git" / "index", index)
    env = {**os.environ, "GIT_INDEX_FILE": str(index), "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(ws.home)}
    subprocess.run(["git", "-c", "safe.directory=*", "add", "-f", ".env"], cwd=ws.repo, env=env, check=True)
    res = ws.run("--", "cat", ".env", env={"GIT_INDEX_FILE": str(index)})
    _one_line_refusal(res, "GIT_INDEX_FILE=")
    assert secret not in res.out + res.err
    same = {"GIT_DIR": str(ws.repo / ".git"), "GIT_WORK_TREE": str(ws.repo)}
    res = _inside(ws, "cat README.md .env", env=same)
    assert res.rc == 0, res.err
    assert "readme" in res.out and secret not in res.out + res.err
