"""The fixture repositories the launches are timed in, built once and cached: the monorepo takes minutes to write.

Fixtures are git repositories built once under ${XDG_CACHE_HOME:-~/.cache}/ai-sandbox-bench/<name>-v1/ and
reused while `.git/bench-fixture.json` says the build completed (each is built under a temporary name and
renamed when done; delete the directory to rebuild). Files are empty or a few bytes: what ai-sandbox pays
for is names and directories, not content.

    small         100 files: 88 tracked, a few ignored files, dist/ and node_modules/
    100k          2,000 tracked files + 100,000 files in node_modules/
    hidden400     100,000 files, 400 of them ignored secrets (a `.env.local` in each of 400 services, beside
                  tracked files): 400 masks that are neither dependencies nor build outputs, the launch's
                  heaviest usual case; the rest tracked sources and node_modules/
    monorepo      1,000 packages, 50,003 tracked files, 1,000,000 files in total; 5,000 separate ignored
                  directories (per package dist/ node_modules/ coverage/ .turbo/ build/) and 2,000
                  individually ignored files (per package .env.local and src/debug.log)

The history findings are timed in a fixture of their own, a repository of 100,000 commits (history_fixture).
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

VERSION = 1  # bump when a fixture's layout changes: old caches are then ignored
MARKER = os.path.join(".git", "bench-fixture.json")
GIT_ENV = {
    "GIT_AUTHOR_NAME": "bench",
    "GIT_AUTHOR_EMAIL": "bench@example.invalid",
    "GIT_COMMITTER_NAME": "bench",
    "GIT_COMMITTER_EMAIL": "bench@example.invalid",
    "GIT_CONFIG_NOSYSTEM": "1",
}


# Progress goes to stderr (stdout is the Markdown); every module of the bench logs through this.
def log(msg: str) -> None:
    print(f"bench: {msg}", file=sys.stderr, flush=True)


# A fixture is a generator of (relative path, content, tracked); every file is written, and tracked
# ones are committed. Ignore rules are written first (as tracked .gitignore files).
Files = Iterator[tuple[str, bytes, bool]]


def _src(rel: str) -> bytes:
    return f"// {rel}\n".encode()


def _node_modules(prefix: str, count: int, per_dep: int, tag: str) -> Files:
    """count files under prefix/node_modules/, packages of about per_dep files, every tenth one scoped."""
    made, dep = 0, 0
    while made < count:
        name = f"@scope{dep % 7}/{tag}dep{dep:04d}" if dep % 10 == 9 else f"{tag}dep{dep:04d}"
        base = f"{prefix}node_modules/{name}"
        names = ["package.json", "README.md", "LICENSE", "index.js"]
        names += [f"lib/m{k:03d}.js" for k in range(per_dep // 2)]
        names += [f"dist/esm/m{k:03d}.mjs" for k in range(per_dep - len(names))]
        for n in names:
            if made == count:
                return
            yield f"{base}/{n}", b"", False
            made += 1
        dep += 1


def small() -> Files:
    yield ".gitignore", b"node_modules/\ndist/\n.env\n.env.local\n*.log\n", True
    yield "package.json", b'{"name": "small"}\n', True
    yield "README.md", b"# small\n", True
    for d in range(8):
        for f in range(10):
            rel = f"src/mod{d}/file{f}.ts"
            yield rel, _src(rel), True
    for f in range(5):
        rel = f"test/t{f}.test.ts"
        yield rel, _src(rel), True
    yield ".env", b"SECRET=bench\n", False
    yield ".env.local", b"SECRET=bench\n", False
    yield "npm-debug.log", b"", False
    for f in ("index.js", "index.d.ts", "index.js.map"):
        yield f"dist/{f}", b"", False
    yield from _node_modules("", 6, 3, "")


def medium() -> Files:
    yield ".gitignore", b"node_modules/\ndist/\ncoverage/\n.env\n*.log\n", True
    tracked = 1
    for d in range(40):
        for f in range(50):
            if tracked == 2000:
                break
            rel = f"src/area{d:02d}/file{f:02d}.ts"
            yield rel, _src(rel), True
            tracked += 1
    yield ".env", b"SECRET=bench\n", False
    yield "npm-debug.log", b"", False
    for f in range(10):
        yield f"dist/chunk{f}.js", b"", False
    yield from _node_modules("", 100_000, 100, "")


HIDDEN_SERVICES = 400


def hidden400() -> Files:
    yield ".gitignore", b"node_modules/\n.env.local\n", True
    yield "package.json", b'{"name": "services", "private": true}\n', True
    for s in range(HIDDEN_SERVICES):
        base = f"services/svc{s:03d}/"
        for n in ("package.json", "src/index.ts", "src/handler.ts", "src/config.ts", "test/handler.test.ts"):
            yield base + n, _src(base + n), True
        yield base + ".env.local", b"API_KEY=bench\n", False
    yield from _node_modules("", 100_000 - 2 - HIDDEN_SERVICES * 6, 100, "")


MONO_PACKAGES = 1000
MONO_TOTAL = 1_000_000


def monorepo() -> Files:
    yield ".gitignore", b"node_modules/\ndist/\nbuild/\ncoverage/\n.turbo/\n*.log\n.env.local\n", True
    yield "package.json", b'{"name": "mono", "private": true, "workspaces": ["packages/*"]}\n', True
    yield "README.md", b"# mono\n", True
    tracked_per = 50
    ignored_per = 2 + 20 + 10 + 2 + 8  # .env.local, debug.log, dist, coverage, .turbo, build
    rest = MONO_TOTAL - 3 - MONO_PACKAGES * (tracked_per + ignored_per)
    for p in range(MONO_PACKAGES):
        pkg = f"packages/pkg{p:04d}/"
        names = ["package.json", "README.md", "tsconfig.json", ".eslintrc.json", "src/index.ts"]
        names += [f"src/components/Component{k:02d}.tsx" for k in range(20)]
        names += [f"src/utils/util{k:02d}.ts" for k in range(15)]
        names += [f"test/case{k:02d}.test.ts" for k in range(10)]
        assert len(names) == tracked_per
        for n in names:
            yield pkg + n, _src(pkg + n), True
        yield pkg + ".env.local", b"TOKEN=bench\n", False
        yield pkg + "src/debug.log", b"", False
        for k in range(10):
            yield f"{pkg}dist/index{k}.js", b"", False
            yield f"{pkg}dist/types/index{k}.d.ts", b"", False
        for k in range(9):
            yield f"{pkg}coverage/lcov-report/file{k}.html", b"", False
        yield f"{pkg}coverage/lcov.info", b"", False
        yield f"{pkg}.turbo/turbo-build.log", b"", False
        yield f"{pkg}.turbo/turbo-test.log", b"", False
        for k in range(8):
            yield f"{pkg}build/out{k}.js", b"", False
        share = rest // MONO_PACKAGES + (1 if p < rest % MONO_PACKAGES else 0)
        yield from _node_modules(pkg, share, 40, f"p{p % 50}")


@dataclass
class Fixture:
    name: str
    title: str
    files: Callable[[], Files]
    runs: int  # default number of measured launches per variant
    quick_runs: int


FIXTURES = [
    Fixture("small", "small repo", small, 40, 15),
    Fixture("100k", "2k tracked + 100k in node_modules/", medium, 20, 10),
    Fixture("hidden400", "100k files, 400 secrets hidden", hidden400, 20, 10),
    Fixture("monorepo", "monorepo, 1M files", monorepo, 10, 10),
]


def git(args: list[str], cwd: str, **kw) -> subprocess.CompletedProcess:
    env = {**os.environ, **GIT_ENV}
    kw.setdefault("check", True)
    return subprocess.run(["git", *args], cwd=cwd, env=env, **kw)


def build(fx: Fixture, cache: str) -> dict:
    """The fixture's directory and facts, built now unless a completed build is cached."""
    final = os.path.join(cache, f"{fx.name}-v{VERSION}")
    marker = os.path.join(final, MARKER)
    if os.path.exists(marker):
        with open(marker) as f:
            info = json.load(f)
        info.update(path=final, built_now=False)
        return info
    for stale in [final, *glob.glob(f"{glob.escape(final)}.tmp-*")]:
        if os.path.lexists(stale):
            log(f"removing an incomplete build: {stale}")
            shutil.rmtree(stale)
    tmp = f"{final}.tmp-{os.getpid()}"
    os.makedirs(tmp)
    t0 = time.perf_counter()
    log(f"building {fx.name} in {tmp}")
    git(["init", "-q", "-b", "main", "."], tmp)
    for key, value in (("commit.gpgsign", "false"), ("gc.auto", "0"), ("core.fsmonitor", "false")):
        git(["config", key, value], tmp)
    made: set[str] = set()
    total = tracked = 0
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC
    for rel, content, is_tracked in fx.files():
        path = os.path.join(tmp, rel)
        parent = os.path.dirname(path)
        if parent not in made:
            os.makedirs(parent, exist_ok=True)
            made.add(parent)
        fd = os.open(path, flags, 0o644)
        if content:
            os.write(fd, content)
        os.close(fd)
        total += 1
        tracked += is_tracked
        if total % 100_000 == 0:
            log(f"  {fx.name}: {total:,} files written ({time.perf_counter() - t0:.1f} s)")
    t_files = time.perf_counter() - t0
    log(f"  {fx.name}: {total:,} files in {len(made):,} directories written in {t_files:.1f} s; git add + commit")
    git(["add", "-A", "."], tmp)
    git(["commit", "-q", "-m", "bench fixture"], tmp)
    t_git = time.perf_counter() - t0 - t_files
    log(f"  {fx.name}: committed in {t_git:.1f} s; repacking")
    git(["repack", "-a", "-d", "-q"], tmp)
    git(["prune-packed"], tmp)
    # Files written in the same second as the index are "racily clean": git re-hashes them on every
    # status until the index is rewritten later. Wait that second out, then refresh the stat cache.
    time.sleep(1.1)
    git(["update-index", "-q", "--really-refresh"], tmp, check=False)
    git(["status", "--porcelain"], tmp, capture_output=True)
    listed = len(git(["ls-files", "-z"], tmp, capture_output=True).stdout.split(b"\0")) - 1
    dirty = git(["status", "--porcelain", "-z"], tmp, capture_output=True).stdout
    if listed != tracked or dirty:
        raise SystemExit(
            f"bench: fixture {fx.name} is wrong: {listed} files in the index, {tracked} expected; {dirty[:200]!r}"
        )
    ignored = git(["status", "--porcelain=v1", "-z", "--ignored=traditional"], tmp, capture_output=True).stdout
    info = {
        "name": fx.name,
        "files": total,
        "tracked": tracked,
        "directories": len(made),
        "git_ignored_entries": ignored.count(b"!! "),
        "build_seconds": round(time.perf_counter() - t0, 1),
        "version": VERSION,
    }
    with open(os.path.join(tmp, MARKER), "w") as f:
        json.dump(info, f, indent=1)
    os.rename(tmp, final)
    log(f"  {fx.name}: built in {info['build_seconds']} s -> {final}")
    info.update(path=final, built_now=True)
    return info


HISTORY_COMMITS = 100_000


def history_fixture(cache: str) -> str:
    """A repository with 100,000 commits (fast-import: ~12 s): 2,000 files, two changed per commit; a `.env`
    committed at commit 5,000 and removed 10 commits later, ignored and present now; a stash holding an
    untracked `stash.key`."""
    final = os.path.join(cache, f"history100k-v{VERSION}")
    if os.path.exists(os.path.join(final, MARKER)):
        return final
    if os.path.lexists(final):
        shutil.rmtree(final)
    tmp = f"{final}.tmp-{os.getpid()}"
    log(f"building a {HISTORY_COMMITS:,}-commit repository in {tmp}")
    git(["init", "-q", "-b", "main", tmp], cache)
    proc = subprocess.Popen(
        ["git", "fast-import", "--quiet"], cwd=tmp, stdin=subprocess.PIPE, env={**os.environ, **GIT_ENV}
    )
    w = proc.stdin.write  # type: ignore[union-attr]

    def blob(path: str, data: bytes) -> None:
        w(f"M 100644 inline {path}\ndata {len(data)}\n".encode() + data + b"\n")

    for i in range(1, HISTORY_COMMITS + 1):
        w(f"commit refs/heads/main\ncommitter bench <bench@example.invalid> {1_600_000_000 + i * 60} +0000\n".encode())
        w(b"data %d\nc%d\n" % (len(str(i)) + 2, i))
        for k in range(2000) if i == 1 else (i % 2000, (i * 7) % 2000):
            blob(f"src/d{k % 50}/f{k}.py", f"x{k} {i}\n".encode())
        if i == 5_000:
            blob(".env", b"AWS_SECRET_ACCESS_KEY=bench-old-secret\n")
        if i == 5_010:
            w(b"D .env\n")
    proc.stdin.close()  # type: ignore[union-attr]
    if proc.wait() != 0:
        raise SystemExit("bench: git fast-import failed")
    git(["checkout", "-q", "-f", "main"], tmp)
    with open(os.path.join(tmp, ".gitignore"), "w") as f:
        f.write(".env\n")
    git(["add", ".gitignore"], tmp)
    git(["commit", "-q", "-m", "ignore .env"], tmp)
    with open(os.path.join(tmp, "stash.key"), "w") as f:
        f.write("stashed\n")
    git(["stash", "push", "-q", "-u"], tmp)
    with open(os.path.join(tmp, ".env"), "w") as f:
        f.write("AWS_SECRET_ACCESS_KEY=bench-new-secret\n")
    git(["commit-graph", "write", "--reachable"], tmp)
    with open(os.path.join(tmp, MARKER), "w") as f:
        json.dump({"name": "history100k", "commits": HISTORY_COMMITS, "version": VERSION}, f)
    os.rename(tmp, final)
    return final
