"""A copy of this checkout's ai-sandbox that the unprivileged test user can run.

As root, the tests also run ai-sandbox as `aisbx-test`. When the checkout, its venv or its Python lie where
that user cannot go (a clone in /root, which is 0700 on Debian; a pyenv Python under /root), the suite
runs a staged copy instead of changing the modes of directories it did not create: a venv made in a
world-readable temp dir with a Python the user can run, holding copies of src/ai_sandbox, the shipped
profiles and the installed distributions ai-sandbox and pytest need (pure Python, so another interpreter
of 3.11 or newer reads them). Root runs the same copy, so both identities test the same files.
"""

from __future__ import annotations

import importlib.metadata as md
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[1]
# What ai-sandbox needs at run time, and pytest for the workflow test that runs it inside the sandbox.
ROOTS = ("ai-sandbox", "pytest")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def setpriv_argv(uid: int, gid: int, argv: list[str]) -> list[str]:
    return ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "--", *argv]


def runs_as(uid: int, gid: int, argv: list[str]) -> bool:
    """argv succeeds as uid:gid. Started by a shell of that user: setpriv's own exec still walks the path
    with root's capabilities (it keeps them until the exec), so it starts a program in /root/.pyenv that
    the user could not reach (measured: a 0700 /root)."""
    cmd = setpriv_argv(uid, gid, ["sh", "-c", 'exec "$@"', "sh", *argv])
    proc = subprocess.run(cmd, capture_output=True, cwd="/", check=False, stdin=subprocess.DEVNULL)
    return proc.returncode == 0


def _closure(roots: tuple[str, ...]) -> list[md.Distribution]:
    """The installed distributions of roots and of what they require (no extras, none missing here)."""
    seen: dict[str, md.Distribution] = {}
    todo = list(roots)
    while todo:
        name = todo.pop().lower().replace("_", "-")
        if name in seen:
            continue
        try:
            dist = md.distribution(name)
        except md.PackageNotFoundError:
            continue  # a requirement for another platform (colorama on Windows)
        seen[name] = dist
        for req in dist.requires or []:
            if "extra ==" not in req and (m := _NAME.match(req)):
                todo.append(m.group(0))
    return list(seen.values())


def _python_for(uid: int, gid: int) -> str:
    """This interpreter if the user can run it, else the system's, if it is 3.11 or newer."""
    check = "import sys, tomllib; sys.exit(sys.version_info < (3, 11))"
    for python in (os.path.realpath(sys.executable), "/usr/bin/python3", "/usr/local/bin/python3"):
        if os.path.exists(python) and runs_as(uid, gid, [python, "-I", "-c", check]):
            return python
    raise RuntimeError(f"no Python 3.11+ that uid {uid} can run: install python3 (3.11 or newer) in /usr/bin")


def _entry_point() -> str:
    """The `ai-sandbox` command's entry point, as pyproject.toml declares it (module:function)."""
    import tomllib

    with open(CHECKOUT / "pyproject.toml", "rb") as f:
        return str(tomllib.load(f)["project"]["scripts"]["ai-sandbox"])


def stage(uid: int, gid: int) -> Path:
    """A staged `ai-sandbox` the user uid:gid can run; its directory is the caller's to remove."""
    base = Path(tempfile.mkdtemp(prefix="ais-stage-", dir="/tmp"))
    base.chmod(0o755)
    python = _python_for(uid, gid)
    venv = base / "venv"
    subprocess.run([python, "-m", "venv", "--without-pip", str(venv)], check=True, capture_output=True)
    purelib = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    site = Path(purelib)
    for dist in _closure(ROOTS):
        if dist.metadata["Name"].lower() == "ai-sandbox":
            continue  # an editable install: the checkout's source is copied below
        top = Path(str(dist.locate_file(""))).resolve()
        for rel in dist.files or []:
            src = Path(str(dist.locate_file(rel))).resolve()
            if src.is_file() and src.is_relative_to(top) and "__pycache__" not in src.parts:
                dest = site / src.relative_to(top)
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, dest)
    ignore = shutil.ignore_patterns("__pycache__")
    shutil.copytree(CHECKOUT / "src" / "ai_sandbox", site / "ai_sandbox", ignore=ignore)
    shutil.copytree(CHECKOUT / "profiles", site / "ai_sandbox" / "profiles", ignore=ignore)
    launcher = venv / "bin" / "ai-sandbox"
    module, _, func = _entry_point().partition(":")  # the console script pip would write
    launcher.write_text(f"#!{venv}/bin/python\nimport sys\nfrom {module} import {func}\nsys.exit({func}())\n")
    launcher.chmod(0o755)
    subprocess.run(["chmod", "-R", "a+rX", str(base)], check=True)
    if not runs_as(uid, gid, [str(launcher), "--version"]):
        raise RuntimeError(f"the staged {launcher} does not run as uid {uid}")
    return launcher
