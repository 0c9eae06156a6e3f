"""`make install` and `make uninstall` as a newcomer on Debian/Ubuntu does them: a normal user, the system
Python with PEP 668 in force (no `pip install --user`), no pipx, then `ai-sandbox` from a new login shell.

Run as the unprivileged test user when we are root, as ourselves otherwise, with a fresh HOME holding only
the distribution's skeleton files (whose ~/.profile puts ~/.local/bin on PATH once it exists). The source
is a copy of this checkout's files, so that the upgrade step can change its version. pip fetches the
dependencies from PyPI, as it does for the user.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

from tests.conftest import IS_ROOT, chown_tree, ensure_test_user, require, token, unavailable
from tests.stage import setpriv_argv

CHECKOUT = Path(__file__).resolve().parents[2]
SYSTEM_PYTHON = "/usr/bin/python3"


def _externally_managed(python: str) -> bool:
    code = "import sysconfig; print(sysconfig.get_path('stdlib'))"
    proc = subprocess.run([python, "-c", code], capture_output=True, text=True, check=False)
    return proc.returncode == 0 and (Path(proc.stdout.strip()) / "EXTERNALLY-MANAGED").is_file()


def _copy_checkout(dest: Path) -> None:
    """The files git would commit from this working tree (changes included), not .venv or caches."""
    listing = subprocess.run(
        ["git", "-c", "safe.directory=*", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=CHECKOUT, capture_output=True, check=True,
    ).stdout  # fmt: skip
    for rel in filter(None, listing.split(b"\0")):
        src = CHECKOUT / os.fsdecode(rel)
        if src.is_file():
            (dest / rel.decode()).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / os.fsdecode(rel))


def _readme_sample() -> str:
    """The README's `$ make install` block, without the command line, and without the lines of what this
    machine has already (the block is a stock Debian's output: .ci/stock-debian compares it whole)."""
    text = (CHECKOUT / "README.md").read_text()
    start = text.index("```\n$ make install\n") + len("```\n$ make install\n")
    block = text[start : text.index("```", start)]
    for tool in ("python3-venv", "firejail"):
        if tool == "firejail" and not shutil.which("firejail"):
            continue
        if tool == "python3-venv" and subprocess.run([SYSTEM_PYTHON, "-c", "import ensurepip, venv"]).returncode:
            continue
        block = "\n".join(
            ln for ln in block.splitlines() if not re.match(rf"(installing {tool} with|{tool} is not)", ln)
        )
    return _version_free(block)


def _version_free(out: str) -> str:
    """The output with the machine's Python version and checkout-change notes taken out."""
    lines = [ln for ln in out.splitlines() if not ln.startswith("note: installing local changes")]
    return re.sub(r"python3\.\d+", "python3.X", "\n".join(lines)).strip()


class Newcomer:
    def __init__(self, base: Path) -> None:
        self.home = base / "home"
        self.src = base / "src"
        self.repo = base / "project"
        self.user = ensure_test_user() if IS_ROOT else None
        for d in (self.home, self.src, self.repo):
            d.mkdir()
        for name in (".profile", ".bashrc"):
            if Path("/etc/skel", name).is_file():
                shutil.copy(Path("/etc/skel", name), self.home / name)
        _copy_checkout(self.src)
        if self.user:
            chown_tree(base, self.user)

    def login(self, script: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        """`script` in a new login shell (bash -l reads /etc/profile and ~/.profile), with nothing of ours in
        its environment."""
        env = ["env", "-i", f"HOME={self.home}", "SHELL=/bin/bash", "LANG=C.UTF-8", "TERM=dumb"]
        env += ["USER=" + (self.user.name if self.user else os.environ.get("USER", "me"))]
        cmd = [*env, "bash", "-lc", script]
        if self.user:
            cmd = setpriv_argv(self.user.uid, self.user.gid, cmd)
        return subprocess.run(cmd, cwd=self.home, capture_output=True, text=True, timeout=timeout, check=False)


def test_make_install_then_uninstall_with_the_system_python_as_a_normal_user(tmp_world):
    require("make")
    require("firejail")
    if not _externally_managed(SYSTEM_PYTHON):
        unavailable(f"{SYSTEM_PYTHON} is not a distribution's Python with PEP 668 in force (Debian 12, Ubuntu 24.04)")
    me = Newcomer(tmp_world)
    secret = token("INSTALLSECRET")
    (me.repo / ".gitignore").write_text(".env\n")
    (me.repo / ".env").write_text(secret + "\n")
    git = ["git", "-c", "safe.directory=*", "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    for args in (["init", "-q"], ["add", ".gitignore"], ["commit", "-qm", "init"]):
        subprocess.run([*git, *args], cwd=me.repo, check=True, capture_output=True)
    if me.user:
        chown_tree(me.repo, me.user)

    pre = me.login("command -v pipx uv ai-sandbox; echo PATH=$PATH")
    assert "ai-sandbox" not in pre.stdout.replace("PATH=", ""), pre.stdout
    how = (
        "INSTALL_WITH=venv " if "pipx" in pre.stdout or "/uv" in pre.stdout else ""
    )  # what a machine without them does

    install = f"cd {me.src} && {how}make install PYTHON={SYSTEM_PYTHON}"
    first = me.login(install)
    assert first.returncode == 0, first.stdout + first.stderr
    venv = me.home / ".local" / "share" / "ai-sandbox" / "venv"
    link = me.home / ".local" / "bin" / "ai-sandbox"
    assert link.is_symlink() and os.readlink(link) == str(venv / "bin" / "ai-sandbox")
    # ~/.local/bin did not exist when this login shell started: the script says how to get it on PATH
    assert 'export PATH="$HOME/.local/bin:$PATH"' in first.stdout
    assert "ai-sandbox doctor && ai-sandbox claude" in first.stdout
    assert _readme_sample() == _version_free(first.stdout), "the README's `make install` sample is not the real output"

    # A PYTHONPATH naming a directory of the project (`src`, as direnv setups do), where a session planted
    # modules of the standard library's names: Python searches PYTHONPATH before the standard library, so
    # pip's entry script (`import re` first) ran them in the next launch, outside the sandbox.
    ran = me.home / "planted-module-ran"
    (me.repo / "src").mkdir()
    for mod in ("re", "msvcrt", "enum", "ai_sandbox"):
        (me.repo / "src" / f"{mod}.py").write_text(f"open({str(ran)!r}, 'a').write('{mod}\\n')\n")
    if me.user:
        chown_tree(me.repo, me.user)
    run = me.login(
        f"cd {me.repo} && export PYTHONPATH=src PYTHONWARNINGS=ignore::enum.Enum && command -v ai-sandbox"
        " && ai-sandbox -- cat .env; echo rc=$?; ai-sandbox -- cat .gitignore"
    )
    assert run.stdout.splitlines()[0] == str(link), run.stdout + run.stderr
    assert secret not in run.stdout + run.stderr
    assert "rc=1" in run.stdout and "Permission denied" in run.stderr
    assert run.stdout.rstrip().endswith(".env"), run.stdout + run.stderr  # the sandbox runs what is not hidden
    assert not ran.exists(), f"the launcher imported {ran.read_text().split()} from PYTHONPATH"

    # re-running upgrades in place: the same venv, the new code
    init = me.src / "src" / "ai_sandbox" / "__init__.py"
    init.write_text(init.read_text().replace('__version__ = "', '__version__ = "9.9.9+was-'))
    venv_inode = venv.stat().st_ino
    again = me.login(install)
    assert again.returncode == 0, again.stdout + again.stderr
    assert venv.stat().st_ino == venv_inode
    version = me.login("ai-sandbox --version")
    assert version.stdout.startswith("ai-sandbox 9.9.9+was-"), version.stdout + version.stderr

    gone = me.login(f"cd {me.src} && make uninstall")
    assert gone.returncode == 0, gone.stdout + gone.stderr
    assert not venv.exists() and not link.exists() and not link.is_symlink()
    after = me.login("command -v ai-sandbox; echo rc=$?")
    assert after.stdout.strip() == "rc=1", after.stdout


def test_make_install_and_uninstall_leave_what_they_did_not_make(tmp_world):
    """Found by the red team: uninstall deleted a directory ~/.local/share/ai-sandbox linked to, install
    deleted a non-venv at the venv's path, and the pipx and uv ways replaced the user's own
    ~/.local/bin/ai-sandbox. Each refuses now, and the files are as they were."""
    require("make")
    me = Newcomer(tmp_world)
    data = me.home / ".local" / "share" / "ai-sandbox"
    work = me.home / "work"
    (work / "venv").mkdir(parents=True)
    (work / "venv" / "notes.txt").write_text("precious\n")
    data.parent.mkdir(parents=True)
    data.symlink_to(work)
    mine = me.home / ".local" / "bin" / "ai-sandbox"
    mine.parent.mkdir(parents=True)
    mine.write_text("#!/bin/sh\necho my own wrapper\n")
    if me.user:
        chown_tree(me.home, me.user)

    for how in ("pipx", "uv", "venv"):
        res = me.login(f"cd {me.src} && INSTALL_WITH={how} make install PYTHON={SYSTEM_PYTHON}")
        assert res.returncode != 0 and "was not made by make install" in res.stderr, res.stdout + res.stderr
        assert mine.read_text() == "#!/bin/sh\necho my own wrapper\n"
    mine.unlink()
    res = me.login(f"cd {me.src} && make install PYTHON={SYSTEM_PYTHON}")
    assert res.returncode != 0 and "behind a symbolic link" in res.stderr, res.stdout + res.stderr
    res = me.login(f"cd {me.src} && make uninstall")
    assert res.returncode == 0 and "left alone" in res.stdout, res.stdout + res.stderr
    assert (work / "venv" / "notes.txt").read_text() == "precious\n"

    data.unlink()
    (data / "venv").mkdir(parents=True)  # a directory at the venv's path that make install did not make
    (data / "venv" / "data.txt").write_text("precious too\n")
    if me.user:
        chown_tree(me.home, me.user)
    res = me.login(f"cd {me.src} && make install PYTHON={SYSTEM_PYTHON}")
    assert res.returncode != 0 and "was not made by make install" in res.stderr, res.stdout + res.stderr
    res = me.login(f"cd {me.src} && make uninstall")
    assert res.returncode == 0 and "left alone" in res.stdout, res.stdout + res.stderr
    assert (data / "venv" / "data.txt").read_text() == "precious too\n"
