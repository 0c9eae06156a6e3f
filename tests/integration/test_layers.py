"""Each layer, proved with the real firejail: the secret's content never appears inside the sandbox,
while tracked sources, allowed paths and tool directories stay readable.

Assertions are on content: as root a masked file reads as empty with exit status 0.
"""

from __future__ import annotations

import subprocess

import pytest

from tests.conftest import (
    BACKENDS,  # noqa: F401  (the module runs once per backend: conftest)
    require,
)

pytestmark = pytest.mark.sandbox


def inside(ws, script: str, **kw):
    return ws.run("--", "sh", "-c", script, **kw)


def test_ignored_files_and_directories_are_hidden(ws, firejail):
    ws.write(".gitignore", ".env\nsecrets/\n*.dump\n")
    ws.write("src/app.py", "print('SOURCE-VISIBLE')\n")
    ws.git("add", ".gitignore", "src/app.py")
    ws.git("commit", "-qm", "src")
    ws.write(".env", "TOKEN=SECRET-ENV\n")
    ws.write("secrets/key.txt", "SECRET-DIR\n")
    ws.write("dumps/db.dump", "SECRET-DUMP\n")  # a directory holding only ignored files
    res = inside(ws, "cat .env secrets/key.txt dumps/db.dump src/app.py; ls -a secrets dumps; true")
    assert res.rc == 0, res.err
    assert "SOURCE-VISIBLE" in res.out
    for secret in ("SECRET-ENV", "SECRET-DIR", "SECRET-DUMP", "key.txt", "db.dump"):
        assert secret not in res.out


def test_launch_from_a_subdirectory_uses_the_git_root(ws, firejail):
    ws.write(".gitignore", ".env\n")
    ws.write("src/deep/mod.py", "MODULE-VISIBLE\n")
    ws.git("add", ".")
    ws.git("commit", "-qm", "src")
    ws.write(".env", "SECRET-ROOT-ENV\n")
    res = ws.run("--", "sh", "-c", "cat ../../.env mod.py; true", cwd=ws.repo / "src" / "deep")
    assert res.rc == 0, res.err
    assert "MODULE-VISIBLE" in res.out
    assert "SECRET-ROOT-ENV" not in res.out


def test_tool_dirs_and_dependencies_stay_readable(ws, firejail):
    ws.write(".gitignore", ".claude/\n.aider.conf.yml\nnode_modules/\n.env\n")
    ws.git("add", ".gitignore")
    ws.git("commit", "-qm", "ignore")
    ws.write(".claude/settings.local.json", "CLAUDE-SETTINGS\n")
    ws.write(".aider.conf.yml", "AIDER-CONF\n")
    ws.write("node_modules/left-pad/index.js", "LEFT-PAD\n")
    ws.write(".env", "SECRET-ENV\n")
    res = inside(ws, "cat .claude/settings.local.json .aider.conf.yml node_modules/left-pad/index.js .env; true")
    assert res.rc == 0, res.err
    for visible in ("CLAUDE-SETTINGS", "AIDER-CONF", "LEFT-PAD"):
        assert visible in res.out
    assert "SECRET-ENV" not in res.out


def test_dependencies_hidden_when_the_user_config_says_so(ws, firejail):
    ws.write(".gitignore", "node_modules/\n")
    ws.git("add", ".gitignore")
    ws.git("commit", "-qm", "ignore")
    ws.write("node_modules/pkg/index.js", "DEP-CONTENT\n")
    ws.config_file.write_text("allow_dependencies = false\n")
    res = inside(ws, "cat node_modules/pkg/index.js; ls node_modules; true")
    assert res.rc == 0, res.err
    assert "DEP-CONTENT" not in res.out and "pkg" not in res.out


def test_explicit_block_and_allow(ws, firejail):
    ws.write(".gitignore", "build/\n")
    ws.write("config/prod.yml", "SECRET-TRACKED-PROD\n")
    ws.write("infra/main.tfvars", "SECRET-TFVARS\n")
    ws.write("infra/main.tf", "TF-VISIBLE\n")
    ws.write(
        ".ai-sandbox.toml",
        'block = ["config/prod.yml", "*.tfvars"]\nallow = ["build/public/"]\n',
    )
    ws.git("add", ".")
    ws.git("commit", "-qm", "config")
    ws.write("build/public/index.html", "PUBLIC-BUILD\n")
    ws.write("build/private.key", "SECRET-BUILD-KEY\n")
    res = inside(
        ws, "cat config/prod.yml infra/main.tfvars infra/main.tf build/public/index.html build/private.key; true"
    )
    assert res.rc == 0, res.err
    assert "TF-VISIBLE" in res.out and "PUBLIC-BUILD" in res.out
    for secret in ("SECRET-TRACKED-PROD", "SECRET-TFVARS", "SECRET-BUILD-KEY"):
        assert secret not in res.out


def test_a_block_written_with_doubled_or_dot_slashes_hides_the_path_it_names(ws, firejail):
    """Thirty-sixth red team: `block = ["sub//a.txt"]` named the mask `<root>/sub//a.txt`, as written. bwrap's
    launch check finds its masks in the mount table, which lists `sub/a.txt`, so every launch was refused (69). The
    path is normalized as the config's absolute paths are (`..` it refuses), and hidden under that name."""
    ws.write("sub/a.txt", "SECRET-DOUBLED\n")
    ws.write("sub/b.txt", "SECRET-DOTTED\n")
    ws.write("sub/x/c.txt", "VISIBLE-C\n")
    ws.write(".ai-sandbox.toml", 'block = ["sub//a.txt", "sub/./b.txt"]\n')
    ws.git("add", ".")
    ws.git("commit", "-qm", "config")
    res = inside(ws, "cat sub/a.txt sub/b.txt sub/x/c.txt; true")
    assert res.rc == 0, res.err
    assert "VISIBLE-C" in res.out
    for secret in ("SECRET-DOUBLED", "SECRET-DOTTED"):
        assert secret not in res.out


def test_global_layer_paths_and_patterns(ws, firejail):
    outside = ws.base / "elsewhere"
    outside.mkdir()
    (outside / "token").write_text("SECRET-OUTSIDE\n")
    (ws.home / ".cloudcreds").mkdir()
    (ws.home / ".cloudcreds" / "key").write_text("SECRET-HOME\n")
    ws.write("certs/server.pem", "SECRET-PEM\n")
    ws.git("add", ".")
    ws.git("commit", "-qm", "pem")
    ws.config_file.write_text(f'block = ["{outside}/token", "~/.cloudcreds", "*.pem"]\n')
    res = inside(ws, f"cat {outside}/token ~/.cloudcreds/key certs/server.pem README.md; true")
    assert res.rc == 0, res.err
    assert "readme" in res.out
    for secret in ("SECRET-OUTSIDE", "SECRET-HOME", "SECRET-PEM"):
        assert secret not in res.out


def test_git_crypt_files_and_key_are_hidden(ws, firejail):
    require("git-crypt")
    subprocess.run(["git-crypt", "init"], cwd=ws.repo, check=True, capture_output=True)
    ws.write(".gitattributes", "vault/** filter=git-crypt diff=git-crypt\n")
    ws.write("vault/db.txt", "SECRET-CRYPT\n")
    ws.write("plain.txt", "PLAIN-VISIBLE\n")
    ws.git("add", ".")
    ws.git("commit", "-qm", "crypt")
    key = (ws.repo / ".git" / "git-crypt" / "keys" / "default").read_bytes()
    res = inside(ws, "cat vault/db.txt plain.txt; cat .git/git-crypt/keys/default | od -An -tx1; true")
    assert res.rc == 0, res.err
    assert "PLAIN-VISIBLE" in res.out
    assert "SECRET-CRYPT" not in res.out
    key_hex = " ".join(f"{b:02x}" for b in key[:16])
    assert key_hex not in " ".join(res.out.split())


def test_submodule_ignored_secret_is_hidden(ws, firejail):
    sub = ws.base / "subsrc"
    sub.mkdir()
    ws.git("init", "-q", "-b", "main", cwd=sub)
    (sub / ".gitignore").write_text(".env\n")
    (sub / "lib.txt").write_text("SUB-VISIBLE\n")
    ws.git("add", ".", cwd=sub)
    ws.git("commit", "-qm", "sub", cwd=sub)
    ws.git("-c", "protocol.file.allow=always", "submodule", "add", "-q", str(sub), "sub")
    ws.git("commit", "-qm", "add sub")
    ws.write("sub/.env", "SECRET-IN-SUBMODULE\n")
    res = inside(ws, "cat sub/.env sub/lib.txt; true")
    assert res.rc == 0, res.err
    assert "SUB-VISIBLE" in res.out
    assert "SECRET-IN-SUBMODULE" not in res.out


def test_outside_git_only_global_layer_with_a_warning(tmp_world, firejail):
    from tests.conftest import IS_ROOT, Workspace

    ws = Workspace(tmp_world, "root" if IS_ROOT else "self")
    (ws.repo / "notes.txt").write_text("NOTES-VISIBLE\n")
    (ws.repo / "token").write_text("SECRET-GLOBAL\n")
    ws.config_file.write_text(f'block = ["{ws.repo}/token"]\n')
    res = ws.run("--", "sh", "-c", "cat notes.txt token; true")
    assert res.rc == 0, res.err
    assert "NOTES-VISIBLE" in res.out and "SECRET-GLOBAL" not in res.out
    warnings = [ln for ln in res.err.splitlines() if "not inside a git work tree" in ln]
    assert len(warnings) == 1
