"""Real builds through ai-sandbox: the agent's tools write where they always write, secrets stay hidden.

Each project has a build output an earlier build left behind (git-ignored, so hidden before build outputs were
kept readable) and a secret beside it; the work must succeed inside and the secret never show.
"""

from __future__ import annotations

import time

import pytest

from tests.conftest import (
    BACKENDS,  # noqa: F401  (the module runs once per backend: conftest)
    PY,
    plant_env,
    require,
    token,
)

pytestmark = pytest.mark.sandbox


def _commit(ws, *paths: str) -> None:
    ws.git("add", *paths)
    ws.git("commit", "-qm", "project")


def test_node_build_rewrites_its_dist_and_its_tests_read_it(ws, firejail):
    require("node")
    npm = require("npm")
    secret = plant_env(ws)
    mark = token("BUILD")
    ws.write(".gitignore", ".env\ndist/\n")
    ws.write(
        "package.json",
        '{"name": "app", "private": true, "scripts": {"build": "node build.js", "test": "node test.js"}}\n',
    )
    # the usual clean-then-write of bundlers (rimraf dist, vite's emptyOutDir)
    ws.write(
        "build.js",
        'const fs = require("fs");\nfs.rmSync("dist", {recursive: true, force: true});\n'
        'fs.mkdirSync("dist/assets", {recursive: true});\n'
        f'fs.writeFileSync("dist/app.js", "module.exports = \'{mark}\';\\n");\n'
        'fs.writeFileSync("dist/assets/app.css", "body{}\\n");\n',
    )
    ws.write("test.js", 'const v = require("./dist/app.js");\nconsole.log("test saw " + v);\n')
    _commit(ws, ".gitignore", "package.json", "build.js", "test.js")
    ws.write("dist/app.js", "module.exports = 'stale';\n")
    ws.write("dist/old-chunk.js", "stale\n")
    res = ws.run(
        "--",
        "sh",
        "-c",
        f"{npm} run --silent build && {npm} test --silent; echo rc=$?; cat .env",
        env={"npm_config_cache": str(ws.home / ".npm"), "npm_config_update_notifier": "false"},
        timeout=120,
    )
    assert f"test saw {mark}" in res.out and "rc=0" in res.out, (res.out, res.err)
    assert secret not in res.out + res.err
    # a build output is the project's: what the build wrote is there afterwards, as it would be without ai-sandbox
    assert (ws.repo / "dist" / "app.js").read_text() == f"module.exports = '{mark}';\n"
    assert not (ws.repo / "dist" / "old-chunk.js").exists()
    assert (ws.repo / ".env").read_text() == secret + "\n"


def test_a_secret_copied_into_a_build_output_stays_hidden_while_the_build_writes_beside_it(ws, firejail):
    ws.write(".gitignore", "dist/\n")
    _commit(ws, ".gitignore")
    secret = token("DISTSECRET")
    ws.write("dist/.env.production", secret + "\n")
    ws.write("dist/keys/deploy.pem", secret + "\n")
    ws.write("dist/app.js", "old\n")
    res = ws.run(
        "--",
        "sh",
        "-c",
        "echo new > dist/app.js && mkdir -p dist/assets && echo css > dist/assets/a.css && cat dist/app.js; "
        "cat dist/.env.production dist/keys/deploy.pem; ls -a dist; grep -r DISTSECRET dist; true",
    )
    assert res.rc == 0, res.err
    assert "new" in res.out and secret not in res.out + res.err
    assert (ws.repo / "dist" / "app.js").read_text() == "new\n"
    assert (ws.repo / "dist" / ".env.production").read_text() == secret + "\n"


def test_python_project_with_its_venv_caches_and_pytest(ws, firejail):
    secret = plant_env(ws)
    ws.write(".gitignore", ".env\n.venv/\n__pycache__/\n.pytest_cache/\n*.egg-info/\nbuild/\n")
    ws.write("app.py", "import os\n\ndef answer():\n    return 42\n")
    ws.write(
        "test_app.py",
        "from app import answer\n\n\ndef test_answer():\n    assert answer() == 42\n",
    )
    ws.write("setup.cfg", "[metadata]\nname = app\n")
    _commit(ws, ".gitignore", "app.py", "test_app.py", "setup.cfg")
    # what an earlier session left: a venv, bytecode, pytest's cache, an egg-info
    ws.write(".venv/pyvenv.cfg", "home = /usr/bin\n")
    ws.write("__pycache__/app.cpython-311.pyc", b"\0stale")
    ws.write(".pytest_cache/v/cache/lastfailed", "{}\n")
    ws.write("app.egg-info/PKG-INFO", "Name: app\n")
    cmd = (
        f"{PY} -m venv --without-pip --clear .venv && .venv/bin/python -c 'import app' && "
        f"{PY} -m pytest -q -p no:randomly 2>&1 | tail -2; "
        "echo 'Name: app 2' > app.egg-info/PKG-INFO; ls __pycache__ .pytest_cache; cat .env; true"
    )
    res = ws.run("--", "sh", "-c", cmd, timeout=120)
    assert res.rc == 0, res.err
    assert "1 passed" in res.out and "failed" not in res.out, res.out + res.err
    assert secret not in res.out + res.err
    assert (ws.repo / ".venv" / "bin" / "python").exists()
    assert (ws.repo / "app.egg-info" / "PKG-INFO").read_text() == "Name: app 2\n"
    assert any(p.name.startswith("app.") for p in (ws.repo / "__pycache__").iterdir())


def test_make_rebuilds_its_build_directory(ws, firejail):
    require("make")
    secret = plant_env(ws)
    ws.write(".gitignore", ".env\nbuild/\n")
    ws.write("src/main.txt", "SOURCE\n")
    ws.write("Makefile", "build/out.txt: src/main.txt\n\tmkdir -p build\n\tcp src/main.txt $@\n\techo made >> $@\n")
    _commit(ws, ".gitignore", "src/main.txt", "Makefile")
    ws.write("build/out.txt", "stale\n")
    ws.write("build/obj/old.o", "stale\n")
    res = ws.run("--", "sh", "-c", "touch src/main.txt && make && cat build/out.txt; cat .env; true")
    assert "SOURCE\nmade" in res.out, res.out + res.err
    assert secret not in res.out + res.err
    assert (ws.repo / "build" / "out.txt").read_text() == "SOURCE\nmade\n"


def test_an_app_appends_to_its_ignored_log(ws, firejail):
    secret = plant_env(ws)
    ws.write(".gitignore", ".env\n*.log\nlogs/\n")
    _commit(ws, ".gitignore")
    ws.write("app.log", "earlier run\n")
    ws.write("logs/server.log", "earlier run\n")
    res = ws.run(
        "--", "sh", "-c", "echo started >> app.log && echo req >> logs/server.log && tail -1 app.log; cat .env"
    )
    assert "started" in res.out, res.out + res.err
    assert secret not in res.out + res.err
    assert (ws.repo / "app.log").read_text() == "earlier run\nstarted\n"
    assert (ws.repo / "logs" / "server.log").read_text() == "earlier run\nreq\n"


def test_a_secret_a_session_writes_into_a_build_output_is_hidden_at_the_next_launch(ws, firejail):
    """Build outputs' listings are remembered between launches (by inode and ctime, in the read-only cache):
    what a session adds must still be found."""
    ws.write(".gitignore", "dist/\n")
    _commit(ws, ".gitignore")
    ws.write("dist/app.js", "app\n")
    secret = token("LATERSECRET")
    first = ws.run("--", "sh", "-c", f"mkdir -p dist/deep && echo {secret} > dist/deep/.env.production; echo ok")
    assert "ok" in first.out, first.err
    time.sleep(1.1)  # past the racy window: the first launch's listings are remembered as they were
    second = ws.run("--", "sh", "-c", "cat dist/deep/.env.production dist/app.js; true")
    assert "app" in second.out and secret not in second.out + second.err
    third = ws.run("--", "sh", "-c", "cat dist/deep/.env.production; true")  # from the remembered answer
    assert secret not in third.out + third.err
