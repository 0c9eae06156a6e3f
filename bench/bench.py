"""Launch benchmark of ai-sandbox against the bare backend: `make bench` (not a timed test).

    make bench                                  # all three fixtures
    make bench BENCH_ARGS=--quick               # small + 100k fixtures, fewer runs
    .venv/bin/python bench/bench.py --runs 20   # the same, by hand

Fixtures are git repositories built once under ${XDG_CACHE_HOME:-~/.cache}/ai-sandbox-bench/<name>-v1/ and
reused while `.git/bench-fixture.json` says the build completed (each is built under a temporary name and
renamed when done; delete the directory to rebuild). Files are empty or a few bytes: what ai-sandbox pays
for is names and directories, not content.

    small         100 files: 88 tracked, a few ignored files, dist/ and node_modules/
    100k          2,000 tracked files + 100,000 files in node_modules/
    monorepo      1,000 packages, 50,003 tracked files, 1,000,000 files in total; 5,000 separate ignored
                  directories (per package dist/ node_modules/ coverage/ .turbo/ build/) and 2,000
                  individually ignored files (per package .env.local and src/debug.log)

Every fixture is measured three times: with the default user config (node_modules/ is on the dependency
allowlist, kept readable), with `allow_dependencies = false`, which hides every node_modules/ too (the
stress case for mount counts), and with `block = ["README.md"]`: every README.md is tracked (1 in the small
repo, 1,001 in the monorepo), which costs a mask each and the skip-worktree marks of skipworktree.py (one
`git update-index` at launch; the watcher clears them after). The user config comes from a bench-owned XDG_CONFIG_HOME, never yours.

For each row, `ai-sandbox -- true` (the installed console script .venv/bin/ai-sandbox) and the bare backend
`firejail --quiet --profile=<the profile ai-sandbox generated> -- /usr/bin/true` run interleaved, the
order alternating per iteration, so machine noise hits both alike; the table shows medians, the overhead
(median ai-sandbox - median bare) and the ratio. The profile and the hidden-entry count come from
`ai-sandbox explain --json` (`files`, `hidden`). The bwrap columns do the same for `ai-sandbox --backend bwrap
-- true` against bare `bwrap --args 3 -- true` with the arguments it generated (`descriptors`). Then: where the launch time goes (the git calls
ai-sandbox makes, reproduced: rev-parse and the three ls-files, alone and side by side as git.scan runs
them, next to the `git status --ignored` it ran before; and prepare() plus the rest of run() timed
in-process, piece by piece, by wrapping git.find_repo, git.scan, layers.collect and policy.build),
and the import time of the launch path (`python -X importtime`). The output is Markdown, to paste into the README as is; progress
goes to stderr. Exit status 1 when a launch fails (the error is printed verbatim under the table).

Every Python process the bench starts runs with its bytecode cached, as after an install, in
PYTHONPYCACHEPREFIX=<cache>/pycache (nothing is written next to the sources), even where the environment
sets PYTHONDONTWRITEBYTECODE; the import section also shows the uncached cost. Medians on a busy machine
move by tens of ms: the header shows the load average, and the last column the overhead of the fastest
runs (min - min).

Flags: --quick (small and 100k only, fewer runs), --runs N (launches per row; default 40 / 20 / 10),
--only NAME (repeatable), --variant default|nodeps|tracked (repeatable), --build-only (build or check the fixtures and exit), --cache DIR.
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from fixtures import FIXTURES, HISTORY_COMMITS, Fixture, build, history_fixture, log

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
AI_SANDBOX = os.path.join(REPO, ".venv", "bin", "ai-sandbox")
# The calls ai-sandbox makes on every launch (git.py), reproduced for the breakdown: find_repo's
# rev-parse, then scan's three ls-files, which it starts side by side (SCAN_CALLS, timed that way too).
GIT = [
    "git", "-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null", "-c", "protocol.allow=never", "--no-optional-locks",
]  # fmt: skip
GIT_CALLS = {
    "rev-parse": ["rev-parse", "--show-toplevel", "--git-common-dir"],
    "ls-files ignored": ["ls-files", "-z", "--others", "--ignored", "--exclude-standard", "--directory"],
    "ls-files untracked": ["ls-files", "-z", "--others", "--exclude-standard", "--directory"],
    "ls-files index": ["ls-files", "-z", "--stage", "-t"],
}
SCAN_CALLS = ("ls-files ignored", "ls-files untracked", "ls-files index")
SCAN = "scan (3 × ls-files, concurrent)"
# For comparison only: what scan ran before it switched to ls-files (one status listing ignored paths).
OLD_STATUS_NAME = "old: status --ignored"
OLD_STATUS = [
    "status",
    "--porcelain=v1",
    "-z",
    "--ignored=traditional",
    "--untracked-files=normal",
    "--ignore-submodules=all",
    "--no-renames",
]


# Every Python the bench starts (ai-sandbox included) runs with this environment: bytecode cached as on a
# user's machine, but in the bench's cache rather than next to the sources (main() fills it in).
PY_ENV: dict[str, str] = {}


def python_env(cache: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "AI_SANDBOX_DEBUG")}
    env["PYTHONPYCACHEPREFIX"] = os.path.join(cache, "pycache")
    return env


# ------------------------------------------------------------------------------- findings (off the launch path)


def findings_bench(cache: str, monorepo: str | None, quick: bool) -> list[tuple[str, str, str]]:
    """(what, where, time): the history walk on the 100,000-commit repository, cold and from the cache, the
    launch's key check, and the secret scan of the monorepo's 50,003 tracked files, cold and warm. In-process,
    with a bench-owned cache directory."""
    sys.path.insert(0, os.path.join(REPO, "src"))
    from ai_sandbox import history, secretscan
    from ai_sandbox.launch import Request, prepare

    rows = []
    repo = history_fixture(cache)
    env = {**os.environ, **PY_ENV, "XDG_CACHE_HOME": os.path.join(cache, "findings-cache")}
    env["XDG_CONFIG_HOME"] = config_dir(cache, "default")
    shutil.rmtree(env["XDG_CACHE_HOME"], ignore_errors=True)
    prepared = prepare(Request(["true"], True, cwd=repo, env=env), resolve=False)
    tgts = history.targets(prepared.policy, prepared.trees)
    walks = []
    for _ in range(1 if quick else 3):
        t = time.perf_counter()
        found = history.compute(tgts, "bench").findings
        walks.append(time.perf_counter() - t)
    what = ", ".join(f"{os.path.basename(f.mask)} ({f.via})" for f in found)
    rows.append(
        ("history walk (explain, background refresh)", f"{HISTORY_COMMITS:,} commits: {what}", ms(med(walks) * 1000))
    )
    keys = []
    for _ in range(20):
        t = time.perf_counter()
        history.state_key(tgts)
        keys.append(time.perf_counter() - t)
    rows.append(("history key check (launch path)", f"{HISTORY_COMMITS:,} commits", ms(med(keys) * 1000)))
    if monorepo:
        prepared = prepare(Request(["true"], True, cwd=monorepo, env=env), resolve=False)
        t = time.perf_counter()
        tgts = history.targets(prepared.policy, prepared.trees)
        history.state_key(tgts)
        rows.append(
            (
                "history key check (launch path)",
                f"monorepo, {len(prepared.policy.masks):,} masks",
                ms((time.perf_counter() - t) * 1000),
            )
        )
        for label in ("cold", "warm") if not quick else ("warm",):
            if label == "cold":
                with contextlib.suppress(OSError):
                    os.unlink(secretscan.cache_file(env, prepared.policy.root))
            elif quick:
                secretscan.run(env, prepared.policy, prepared.trees)  # fill the cache first
            t = time.perf_counter()
            result = secretscan.run(env, prepared.policy, prepared.trees)
            rows.append(
                (
                    f"secret scan, {label} (explain --secrets)",
                    f"monorepo: {result.scanned:,} files, {result.reused:,} from the cache, {len(result.findings)} found",
                    ms((time.perf_counter() - t) * 1000),
                )
            )
    return rows


# ------------------------------------------------------------------------------------------- measuring


def timed(argv: list[str], cwd: str, env: dict[str, str]) -> tuple[float, int]:
    """Wall time of one run in ms, and its exit status. Output goes to /dev/null: a launch's watcher
    process may outlive the sandbox briefly and must not hold a pipe we would wait on."""
    t = time.perf_counter()
    rc = subprocess.run(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL).returncode  # fmt: skip
    return (time.perf_counter() - t) * 1000, rc


def med(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def config_dir(cache: str, variant: str) -> str:
    """A user config home owned by the bench: empty (defaults), or one that turns the dependency allowlist off."""
    d = os.path.join(cache, f"config-{variant}")
    os.makedirs(os.path.join(d, "ai-sandbox"), exist_ok=True)
    path = os.path.join(d, "ai-sandbox", "config.toml")
    if variant in CONFIG_TEXT:
        with open(path, "w") as f:
            f.write(CONFIG_TEXT[variant])
    elif os.path.exists(path):
        os.unlink(path)
    return d


VARIANTS = {
    "default": "default config (node_modules/ readable)",
    "nodeps": "allow_dependencies = false",
    "tracked": "tracked files blocked (their skip-worktree marks set at launch, cleared after)",
}
CONFIG_TEXT = {"nodeps": "allow_dependencies = false\n", "tracked": 'block = ["README.md"]\n'}
CONFIG_SHOWN = {"default": "defaults", "nodeps": "`allow_dependencies = false`", "tracked": '`block = ["README.md"]`'}


@dataclass
class Row:
    fixture: Fixture
    info: dict
    variant: str
    hidden: int = 0
    dry: list[float] = field(default_factory=list)
    sandbox: list[float] = field(default_factory=list)
    bare: list[float] = field(default_factory=list)
    error: str = ""
    bare_error: str = ""
    inner: dict = field(default_factory=dict)
    # the same launch with --backend bwrap, against bare `bwrap <the same arguments> true`
    bw_hidden: int = 0
    bw_sandbox: list[float] = field(default_factory=list)
    bw_bare: list[float] = field(default_factory=list)
    bw_error: str = ""


# Run in the venv's Python: prepare() of one `ai-sandbox -- true`, timed piece by piece, then the rest of
# run() up to the exec. Functions are timed by wrapping them where the launch path looks them up; one that
# a refactor moved or renamed is not wrapped, and its column is left out of the table. Every git process
# is timed through subprocess.Popen (start to exit), whatever starts it.
INNER = r"""
import json, os, sys, time
T = {}
t0 = time.perf_counter()
import ai_sandbox.main
from ai_sandbox import launch as L
T["import"] = time.perf_counter() - t0
import importlib, importlib.util, subprocess
from ai_sandbox import layers, policy
def module(*names):  # the first that exists: the bench also times older trees (project.py became git.py)
    return importlib.import_module(next(n for n in names if importlib.util.find_spec(n)))
git = module("ai_sandbox.git", "ai_sandbox.project")

GITS = []  # [subcommand, start, exit] of every git process
def subcommand(argv):
    i = 1
    while i < len(argv) and argv[i].startswith("-"):  # "-c name=value" and global options come first
        i += 2 if argv[i] == "-c" else 1
    return os.fsdecode(argv[i]) if i < len(argv) else "?"
class Popen(subprocess.Popen):
    def __init__(self, args, *a, **k):
        argv = [args] if isinstance(args, (str, bytes)) else list(args)
        self._bench = None
        if argv and os.path.basename(os.fsdecode(argv[0])) == "git":
            self._bench = [subcommand(argv), time.perf_counter(), None]
            GITS.append(self._bench)
        super().__init__(args, *a, **k)
    def wait(self, *a, **k):  # communicate() ends with it, as does subprocess.run()
        rc = super().wait(*a, **k)
        if self._bench is not None and self._bench[2] is None:
            self._bench[2] = time.perf_counter()
        return rc
subprocess.Popen = Popen

STACK = []  # time spent in wrapped calls nested in each wrapped call in progress
def timed(key, f):
    def w(*a, **k):
        n, s = len(GITS), time.perf_counter()
        STACK.append(0.0)
        try:
            return f(*a, **k)
        finally:
            d, inner = time.perf_counter() - s, STACK.pop()
            if STACK:
                STACK[-1] += d
            else:
                T["top"] = T.get("top", 0.0) + d
            T[key] = T.get(key, 0.0) + d
            T[key + " self"] = T.get(key + " self", 0.0) + d - inner
            procs = GITS[n:]
            if procs and all(p[2] is not None for p in procs):  # wall time while git ran, side by side or not
                T[key + " git"] = T.get(key + " git", 0.0) + max(p[2] for p in procs) - min(p[1] for p in procs)
    return w
def wrap(key, *targets):
    for obj, name in targets:
        f = getattr(obj, name, None)
        if callable(f):
            setattr(obj, name, timed(key, f))
wrap("find_repo", (git, "find_repo"), (L, "find_repo"), (layers, "find_repo"))
wrap("scan", (git, "scan"), (layers, "scan"))
wrap("collect", (layers, "collect"), (L, "collect"))
wrap("policy build", (policy, "build"), (L, "build"))

t = time.perf_counter()
req = L.Request(argv=["true"], is_command=True, cwd=os.getcwd(), env=dict(os.environ))
prepared = L.prepare(req)
T["prepare"] = time.perf_counter() - t
T["top"] = T.get("top", 0.0)
t = time.perf_counter()
from ai_sandbox import nested
nested.inside_sandbox(nested.mounts())
T["mount table"] = time.perf_counter() - t
from ai_sandbox import state
if hasattr(state, "check") and hasattr(state, "record"):
    t = time.perf_counter()
    state.record(state.check(prepared.policy, req.env))
    T["state"] = time.perf_counter() - t
t = time.perf_counter()
_fs = module("ai_sandbox.fs", "ai_sandbox.launch")
if hasattr(_fs, "make_dirs"):
    _fs.make_dirs(prepared.plan.dirs)
_fs.write_files(prepared.plan.files)
T["write profile"] = time.perf_counter() - t
t = time.perf_counter()
from ai_sandbox import watch
T["import watch"] = time.perf_counter() - t
t = time.perf_counter()
pid = os.fork()
if pid == 0:
    os._exit(0)
T["fork"] = time.perf_counter() - t
os.waitpid(pid, 0)
out = {k: v * 1000 for k, v in T.items()}
out["masks"] = len(prepared.policy.masks)
calls = {}
for name, start, end in GITS:
    calls[name] = calls.get(name, 0) + 1
out["git calls"] = ", ".join(f"{n} ×{c}" for n, c in calls.items())
print(json.dumps(out))
"""


def venv_python() -> str:
    with open(AI_SANDBOX, "rb") as f:
        first = f.readline().decode().strip()
    return first[2:].strip() if first.startswith("#!") else sys.executable


def measure(row: Row, runs: int, dry_runs: int, env: dict[str, str]) -> None:
    cwd = row.info["path"]
    proc = subprocess.run([AI_SANDBOX, "explain", "--json"], cwd=cwd, env=env, capture_output=True)
    if proc.returncode != 0:
        row.error = (
            f"`ai-sandbox explain --json` exited {proc.returncode}: {proc.stderr.decode(errors='replace').strip()}"
        )
        return
    doc = json.loads(proc.stdout)
    row.hidden = len(doc["hidden"])
    # the generated profile; the launch check beside it is ai-sandbox's own cost, which the bare run skips
    [(profile, content)] = [(p, c) for p, c in doc["files"].items() if p.endswith(".profile")]
    if not os.path.exists(profile):  # ai-sandbox writes it on its first launch; the bare run needs it now
        os.makedirs(os.path.dirname(profile), exist_ok=True)
        with open(profile, "w", encoding="utf-8", errors="surrogateescape") as f:
            f.write(content)
    sandbox = [AI_SANDBOX, "--", "true"]
    bare = [doc["command"][0], "--quiet", f"--profile={profile}", "--", shutil.which("true") or "/usr/bin/true"]

    # One checked run each, with output, so a failure is reported verbatim rather than timed.
    for argv, attr in ((sandbox, "error"), (bare, "bare_error")):
        p = subprocess.run(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, capture_output=True, timeout=600)
        if p.returncode != 0:
            text = (p.stderr or p.stdout).decode(errors="replace").strip()
            setattr(row, attr, f"`{' '.join(argv[:3])} …` exited {p.returncode}: {text}")
    with open(profile, encoding="utf-8", errors="surrogateescape") as f:
        if f.read() != content:
            row.error = row.error or f"the profile a launch uses differs from explain's: {profile}"
    if row.error or row.bare_error:
        return

    log(f"  {row.fixture.name} / {row.variant}: {row.hidden} hidden; {runs} interleaved launches")
    for i in range(runs):
        pair = ((sandbox, row.sandbox), (bare, row.bare))
        for argv, out in pair if i % 2 == 0 else pair[::-1]:
            ms, rc = timed(argv, cwd, env)
            if rc != 0:
                row.error = f"a timed run of {argv[0]} exited {rc}"
                return
            out.append(ms)
    for _ in range(dry_runs):
        ms, rc = timed([AI_SANDBOX, "--dry-run", "--", "true"], cwd, env)
        if rc != 0:
            row.error = f"`ai-sandbox --dry-run -- true` exited {rc}"
            return
        row.dry.append(ms)
    samples: list[dict] = []
    for _ in range(max(5, min(runs, 10))):
        p = subprocess.run([venv_python(), "-c", INNER], cwd=cwd, env=env, capture_output=True)
        if p.returncode == 0:
            samples.append(json.loads(p.stdout))
        else:
            log(f"  breakdown failed: {p.stderr.decode(errors='replace').strip().splitlines()[-1:]}")
            break
    for k in {k for s in samples for k in s}:
        values = [s[k] for s in samples if k in s]
        row.inner[k] = values[0] if isinstance(values[0], str) else med(values)  # text: the git calls made


def bwrap_timed(args: list[str], cwd: str, env: dict[str, str]) -> tuple[float, int]:
    """Wall time of bare `bwrap --args 3 -- true` with args at fd 3, started the way ai-sandbox starts it."""
    from ai_sandbox.backends import LaunchPlan
    from ai_sandbox.backends.bwrap import SECCOMP_FD, tiocsti_filter
    from ai_sandbox.supervise import captured

    blob = b"".join(os.fsencode(a) + b"\0" for a in args)
    plan = LaunchPlan(argv=[shutil.which("bwrap") or "bwrap", "--args", "3", "--", shutil.which("true") or "/usr/bin/true"],
                      env=env, fds={3: blob, SECCOMP_FD: tiocsti_filter()})  # fmt: skip
    t = time.perf_counter()
    rc, _, _ = captured(plan, cwd)
    return (time.perf_counter() - t) * 1000, rc


def measure_bwrap(row: Row, runs: int, env: dict[str, str]) -> None:
    """`ai-sandbox --backend bwrap -- true` against bare bwrap with the arguments it generated (`explain --json`
    → `descriptors`). The masks are not bwrap's arguments (the launch check mounts them): their cost is part
    of the overhead."""
    cwd = row.info["path"]
    try:
        import ai_sandbox.supervise  # noqa: F401  (a tree older than the bwrap backend has none)
    except ImportError:
        row.bw_error = "this tree has no bwrap backend"
        return
    proc = subprocess.run(
        [AI_SANDBOX, "--backend", "bwrap", "explain", "--json"], cwd=cwd, env=env, capture_output=True
    )
    if proc.returncode != 0:
        row.bw_error = f"`ai-sandbox --backend bwrap explain --json` exited {proc.returncode}: {proc.stderr.decode(errors='replace').strip()}"
        return
    doc = json.loads(proc.stdout)
    row.bw_hidden = len(doc["hidden"])
    args = doc["descriptors"]["3"]
    sandbox = [AI_SANDBOX, "--backend", "bwrap", "--", "true"]
    p = subprocess.run(sandbox, cwd=cwd, env=env, stdin=subprocess.DEVNULL, capture_output=True, timeout=600)
    if p.returncode != 0:
        row.bw_error = (
            f"`ai-sandbox --backend bwrap -- true` exited {p.returncode}: {p.stderr.decode(errors='replace').strip()}"
        )
        return
    log(f"  {row.fixture.name} / {row.variant}: bwrap, {row.bw_hidden} hidden; {runs} interleaved launches")
    for i in range(runs):
        pair = ((lambda: timed(sandbox, cwd, env), row.bw_sandbox), (lambda: bwrap_timed(args, cwd, env), row.bw_bare))
        for run, out in pair if i % 2 == 0 else pair[::-1]:
            took, rc = run()
            if rc != 0:
                row.bw_error = f"a timed bwrap run exited {rc}"
                return
            out.append(took)


def stale_git_calls() -> list[str]:
    """The reproduced git calls that src/ai_sandbox/git.py no longer spells out (layout ignored)."""
    try:
        with open(os.path.join(REPO, "src", "ai_sandbox", "git.py")) as f:
            src = re.sub(r"\s", "", f.read())
    except OSError:
        return ["git.py"]
    calls = {"git prefix": GIT[1:], **GIT_CALLS}  # git.py names git by its resolved path
    return [name for name, argv in calls.items() if ",".join(f'"{a}"' for a in argv) not in src]


def _git_call(args: list[str], path: str) -> float:
    """One git call as git.py makes it (output read through a pipe), in ms."""
    t = time.perf_counter()
    subprocess.run([*GIT, *args], cwd=path, capture_output=True, check=True)
    return (time.perf_counter() - t) * 1000


def _scan(path: str) -> float:
    """git.scan's git part: its three ls-files started side by side, their pipes read as they fill."""
    from ai_sandbox.git import _drain  # the very reader the launch uses

    t = time.perf_counter()
    procs = {
        n: subprocess.Popen([*GIT, *GIT_CALLS[n]], cwd=path, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for n in SCAN_CALLS
    }
    _, errors = _drain(procs, path)
    for n, proc in procs.items():
        if proc.returncode != 0:
            raise SystemExit(f"bench: git ls-files failed in {path}: {errors[n].decode(errors='replace').strip()}")
    return (time.perf_counter() - t) * 1000


def git_breakdown(path: str, runs: int) -> dict[str, float]:
    """Median ms of each call, the concurrent scan and the old status, interleaved (order reversed every
    other round); and how many entries the ignored listing hands to ai-sandbox."""
    calls: dict[str, Callable[[], float]] = {
        name: (lambda args=args: _git_call(args, path)) for name, args in GIT_CALLS.items()
    }
    calls[SCAN] = lambda: _scan(path)
    calls[OLD_STATUS_NAME] = lambda: _git_call(OLD_STATUS, path)
    times: dict[str, list[float]] = {name: [] for name in calls}
    for i in range(runs):
        order = list(calls.items())
        for name, call in order if i % 2 == 0 else order[::-1]:
            times[name].append(call())
    out = {name: med(xs) for name, xs in times.items()}
    ignored = subprocess.run([*GIT, *GIT_CALLS["ls-files ignored"]], cwd=path, capture_output=True, check=True)
    out["ignored entries"] = ignored.stdout.count(b"\0")
    return out


# ------------------------------------------------------------------------------------------ import time


IMPORT_STMT = "import ai_sandbox.main, ai_sandbox.launch"


def importtime(py: str, runs: int, env: dict[str, str]) -> tuple[int, dict[str, list[int]], dict[str, list[int]]]:
    """Median cumulative µs of the statement's top-level imports, and every module's self and cumulative µs."""
    totals: list[int] = []
    selfs: dict[str, list[int]] = {}
    cums: dict[str, list[int]] = {}
    for _ in range(runs):
        argv = [py, "-X", "importtime", "-c", IMPORT_STMT]
        err = subprocess.run(argv, capture_output=True, check=True, env=env).stderr.decode()
        after_site, total = False, 0
        for line in err.splitlines():
            m = re.match(r"import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)", line)
            if not m:
                continue
            self_us, cum_us, depth, name = int(m[1]), int(m[2]), len(m[3]) - 1, m[4]
            if not after_site:
                after_site = depth == 0 and name == "site"
                continue
            if depth == 0:
                total += cum_us
            selfs.setdefault(name, []).append(self_us)
            cums.setdefault(name, []).append(cum_us)
        totals.append(total)
    return med(totals), selfs, cums


def import_report(py: str, runs: int) -> dict:
    importtime(py, 1, PY_ENV)  # fills the bytecode cache
    total, selfs, cums = importtime(py, runs, PY_ENV)
    top = sorted(selfs, key=lambda n: -med(selfs[n]))[:5]

    def wall(args: list[str]) -> float:
        return med([timed(args, REPO, PY_ENV)[0] for _ in range(max(runs, 10))])

    out = {
        "total_us": total,
        "top": [(n, med(selfs[n]), med(cums[n])) for n in top],
        "modules": len(selfs),
        "wall_pass": wall([py, "-c", "pass"]),
        "wall_import": wall([py, "-c", IMPORT_STMT]),
        "wall_version": wall([AI_SANDBOX, "--version"]),
        "uncached_us": None,
    }
    if not glob.glob(os.path.join(REPO, "src", "ai_sandbox", "__pycache__", "launch.*.pyc")):
        # How this environment runs it when PYTHONDONTWRITEBYTECODE=1: ai_sandbox compiled at every start.
        env = {k: v for k, v in PY_ENV.items() if k != "PYTHONPYCACHEPREFIX"} | {"PYTHONDONTWRITEBYTECODE": "1"}
        out["uncached_us"] = importtime(py, max(5, runs // 2), env)[0]
    return out


# -------------------------------------------------------------------------------------------- report


def machine() -> list[tuple[str, str]]:
    cpu = platform.processor() or "?"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), cpu)
    except OSError:
        pass

    def first_line(argv: list[str]) -> str:
        try:
            return subprocess.run(argv, capture_output=True, text=True).stdout.strip().splitlines()[0]
        except (OSError, IndexError):
            return "not found"

    head = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run(["git", "-C", REPO, "status", "--porcelain", "--", "src"], capture_output=True, text=True)
    version = head.stdout.strip() + (" + uncommitted changes in src/" if dirty.stdout.strip() else "")
    return [
        ("ai-sandbox", version or "?"),
        ("CPU", f"{cpu}, {os.cpu_count()} cores"),
        ("kernel", f"{platform.system()} {platform.release()}"),
        ("firejail", first_line(["firejail", "--version"])),
        ("git", first_line(["git", "--version"])),
        ("python", first_line([venv_python(), "--version"])),
        ("user", "root" if os.geteuid() == 0 else f"uid {os.geteuid()}"),
    ]


def ms(x: float) -> str:
    if x != x:  # nan
        return "–"
    return f"{x:,.0f} ms" if x >= 10 else f"{x:.1f} ms"


def report(
    rows: list[Row], gits: dict[str, dict], imp: dict | None, mach: list, runs_note: str, stale: list[str]
) -> None:
    p = print
    p("## Launch benchmark\n")
    p(" · ".join(f"{k}: {v}" for k, v in mach) + "\n")
    p(runs_note + "\n")
    p("| fixture | config | files | hidden | `--dry-run` | `ai-sandbox -- true` | bare `firejail` | overhead | ratio "
      "| overhead of the fastest runs | hidden (bwrap) | `--backend bwrap` | bare `bwrap` | bwrap overhead "
      "| bwrap, fastest runs |")  # fmt: skip
    p("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        cfg = CONFIG_SHOWN[r.variant]
        files = f"{r.info['files']:,}"
        if r.bw_error or not r.bw_sandbox:
            bw = f"{r.bw_hidden:,} | **fails** | – | – | – |" if r.bw_error else "– | – | – | – | – |"
        else:
            x, y = med(r.bw_sandbox), med(r.bw_bare)
            bw = (f"{r.bw_hidden:,} | {ms(x)} | {ms(y)} | +{x - y:,.0f} ms | "
                  f"+{min(r.bw_sandbox) - min(r.bw_bare):,.0f} ms |")  # fmt: skip
        if r.error or r.bare_error:
            bare = "fails" if r.bare_error else "–"
            p(f"| {r.fixture.title} | {cfg} | {files} | {r.hidden:,} | – | **fails** | {bare} | – | – | – | {bw}")
            continue
        a, b = med(r.sandbox), med(r.bare)
        p(f"| {r.fixture.title} | {cfg} | {files} | {r.hidden:,} | {ms(med(r.dry))} | {ms(a)} | {ms(b)} | "
          f"+{a - b:,.0f} ms | {a / b:.2f}× | +{min(r.sandbox) - min(r.bare):,.0f} ms | {bw}")  # fmt: skip
    p("\n*hidden*: masks after collapsing (`ai-sandbox explain --json` → `hidden`); *overhead*: median of "
      "`ai-sandbox -- true` − median of bare `firejail --quiet --profile=<the same generated profile> -- true`, "
      "run interleaved; *overhead of the fastest runs*: min − min, less sensitive to a busy machine. "
      "*bwrap* columns: `ai-sandbox --backend bwrap -- true` against bare `bwrap --args 3 -- true` with the "
      "arguments ai-sandbox generated (`explain --json` → `descriptors`), interleaved; the masks are not among "
      "them (the launch check mounts them), so their cost is in the overhead.")  # fmt: skip
    for r in rows:
        if r.error or r.bare_error or r.bw_error:
            p(f"\n**{r.fixture.title}, {VARIANTS[r.variant]}: the launch fails.**\n")
            p("```")
            p(r.error or "")
            p(r.bare_error or "")
            p(r.bw_error or "")
            p("```")

    p("\n### Where the launch time goes\n")
    p("The git calls ai-sandbox makes (`git.find_repo`, `git.scan`), run by hand in the fixture the way "
      "it runs them (median); the last column is the `git status --ignored=traditional` scan ran before, for "
      "comparison:\n")  # fmt: skip
    heads = ["`rev-parse`", "`ls-files` ignored", "`ls-files` untracked", "`ls-files --stage`", f"**{SCAN}**",
             OLD_STATUS_NAME]  # fmt: skip
    p(f"| fixture | files | tracked | ignored entries | {' | '.join(heads)} |")
    p("| --- " + "| ---: " * (3 + len(heads)) + "|")
    for name, g in gits.items():
        r0 = next(r for r in rows if r.fixture.name == name)
        cells = [ms(g[k]) for k in (*GIT_CALLS, SCAN, OLD_STATUS_NAME)]
        cells[4] = f"**{cells[4]}**"
        p(f"| {r0.fixture.title} | {r0.info['files']:,} | {r0.info['tracked']:,} | {g['ignored entries']:,} | "
          f"{' | '.join(cells)} |")  # fmt: skip
    p("\n*ignored entries*: what `ls-files` ignored lists (a directory that holds only ignored files is named, "
      "then its contents too); *scan*: the three `ls-files` started side by side, their pipes read as they fill, "
      "as `git.scan` does.")  # fmt: skip
    if stale:
        p(f"\n**Outdated**: src/ai_sandbox/git.py no longer spells out {', '.join(stale)} as reproduced here.")

    p("\nInside one launch (`launch.prepare()` of `ai-sandbox -- true` timed in-process, then the rest of `run()` "
      "up to the exec; median; *startup* is `python -c pass`, *imports* `import ai_sandbox.main, "
      "ai_sandbox.launch`):\n")  # fmt: skip

    def inner_columns(r: Row) -> dict[str, float]:
        t, nan = r.inner, float("nan")
        tail = [t[k] for k in ("mount table", "state", "write profile", "import watch", "fork") if k in t]
        return {
            "startup": imp["wall_pass"] if imp else nan,
            "imports": t.get("import", nan),
            "`find_repo`": t.get("find_repo", nan),
            "`scan`": t.get("scan", nan),
            "of it: git": t.get("scan git", nan),
            "of it: parse": t.get("scan self", nan) - t.get("scan git", nan),
            "`collect`, rest": t.get("collect self", nan),
            "policy build": t.get("policy build", nan),
            "rest of prepare": t["prepare"] - t["top"] if "prepare" in t and "top" in t else nan,
            "state, profile, watcher": sum(tail) if tail else nan,
            "sum": sum(t.get(k, 0) for k in ("import", "prepare")) + sum(tail) + (imp["wall_pass"] if imp else 0),
            "measured overhead": med(r.sandbox) - med(r.bare) if r.sandbox else nan,
        }

    measured = [r for r in rows if r.inner]
    cols = {r.fixture.name + r.variant: inner_columns(r) for r in measured}
    # A column no row could fill (a hooked function moved away) is left out.
    heads = [h for h in (next(iter(cols.values()), {})) if any(c[h] == c[h] for c in cols.values())]
    p(f"| fixture | config | masks | {' | '.join(heads)} |")
    p("| --- | --- " + "| ---: " * (1 + len(heads)) + "|")
    for r in measured:
        c = cols[r.fixture.name + r.variant]
        cfg = {"default": "defaults", "nodeps": "no deps", "tracked": "tracked blocked"}[r.variant]
        p(f"| {r.fixture.title} | {cfg} | {r.inner.get('masks', 0):,.0f} | {' | '.join(ms(c[h]) for h in heads)} |")
    seen = sorted({r.inner["git calls"] for r in measured if r.inner.get("git calls")})
    p(f"\n*find_repo*: `git rev-parse`; *scan*: `git.scan`, *of it: git* the wall time while its git "
      "processes ran (they run side by side), *parse* the rest (splitting their output, collapsing ignored "
      "directories); *collect, rest*: `layers.collect` without the scans (ignored and git-crypt entries, "
      "patterns); *rest of prepare*: config, profile lookup, backend plan; *state, profile, watcher*: the "
      "hidden-paths record (check and write), rereading the content-addressed profile, the mount-table check, "
      "importing `watch` and the watcher's fork. Git processes seen per launch: "
      f"{'; '.join(seen) or 'none recorded'}.")  # fmt: skip

    if imp:
        p("\n### Import time of the launch path\n")
        p(f"`python -X importtime -c 'import ai_sandbox.main, ai_sandbox.launch'`: **{imp['total_us'] / 1000:.1f} ms** "
          f"cumulative ({imp['modules']} modules). Wall time: `python -c pass` {ms(imp['wall_pass'])}, "
          f"`python -c 'import ai_sandbox.main, ai_sandbox.launch'` {ms(imp['wall_import'])}, "
          f"`ai-sandbox --version` {ms(imp['wall_version'])}.")  # fmt: skip
        if imp["uncached_us"] is not None:
            p(f"Without ai_sandbox's bytecode cache (`PYTHONDONTWRITEBYTECODE=1` and no `__pycache__` next to the "
              f"sources, so every launch compiles them): **{imp['uncached_us'] / 1000:.1f} ms**. The table above and "
              f"all launches were measured with the cache (`PYTHONPYCACHEPREFIX` in the bench's cache), as after "
              f"an install.")  # fmt: skip
        p("")
        p("| module | self | cumulative |")
        p("| --- | ---: | ---: |")
        for name, s, c in imp["top"]:
            p(f"| `{name}` | {s / 1000:.2f} ms | {c / 1000:.2f} ms |")


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--quick", action="store_true", help="the small and 100k fixtures only, fewer runs")
    ap.add_argument("--runs", type=int, help="measured launches per row (default: 40 small, 20 100k, 10 monorepo)")
    ap.add_argument("--build-only", action="store_true", help="build (or check) the fixtures, measure nothing")
    ap.add_argument("--only", choices=[f.name for f in FIXTURES], action="append", help="measure only this fixture")
    ap.add_argument("--variant", choices=list(VARIANTS), action="append", help="measure only this config")
    ap.add_argument(
        "--cache",
        default=os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "ai-sandbox-bench"),
    )
    args = ap.parse_args()
    if not os.access(AI_SANDBOX, os.X_OK):
        raise SystemExit(f"bench: {AI_SANDBOX} not found: run `make bench` (it creates the venv)")
    for tool, package in (("firejail", "firejail"), ("bwrap", "bubblewrap")):
        if shutil.which(tool) is None:
            raise SystemExit(f"bench: {package} is not installed (`make system-deps`)")
    if args.runs is not None and args.runs < 10:
        log(f"--runs {args.runs}: fewer than 10 runs, the medians are rough")
    fixtures = [f for f in FIXTURES if not (args.quick and f.name == "monorepo")]
    if args.only:
        fixtures = [f for f in fixtures if f.name in args.only]
    os.makedirs(args.cache, exist_ok=True)
    PY_ENV.update(python_env(args.cache))
    t0 = time.perf_counter()
    infos = {f.name: build(f, args.cache) for f in fixtures}
    t_build = time.perf_counter() - t0
    built = ", ".join(n for n, i in infos.items() if i["built_now"])
    log(f"fixtures ready in {t_build:.1f} s ({f'{built} built now' if built else 'all cached'})")

    if stale := stale_git_calls():
        log(f"git.py no longer spells out {', '.join(stale)}: the reproduced git calls may be outdated")
    if args.build_only:
        for name, info in infos.items():
            print(
                f"{name}: {info['path']}: {info['files']:,} files, {info['tracked']:,} tracked, built in {info['build_seconds']} s"
            )
        return 0
    load_before = os.getloadavg()[0]
    rows: list[Row] = []
    gits: dict[str, dict] = {}
    for f in fixtures:
        runs = args.runs or (f.quick_runs if args.quick else f.runs)
        dry_runs = max(10, runs // 2) if f.name == "monorepo" else runs
        log(f"{f.name}: git breakdown")
        gits[f.name] = git_breakdown(infos[f.name]["path"], 5 if f.name == "monorepo" else 10)
        for variant in args.variant or VARIANTS:
            # a state of its own too: the record of a variant that blocks README.md refused the next one
            state_home = os.path.join(args.cache, f"state-{variant}")
            env = {**PY_ENV, "XDG_CONFIG_HOME": config_dir(args.cache, variant), "XDG_STATE_HOME": state_home}
            row = Row(f, infos[f.name], variant)
            measure(row, runs, dry_runs, env)
            if shutil.which("bwrap"):
                measure_bwrap(row, runs, env)
            if row.error or row.bare_error:
                log(f"  {f.name} / {variant}: FAILED: {row.error or row.bare_error}")
            rows.append(row)
    log("import time")
    imp = import_report(venv_python(), 10 if args.quick else 20)
    t_all = time.perf_counter() - t0
    runs_note = (
        "Medians; `ai-sandbox -- true` and bare firejail interleaved, "
        + ", ".join(f"{f.name}: {args.runs or (f.quick_runs if args.quick else f.runs)} runs each" for f in fixtures)
        + f"; whole bench {t_all:.0f} s (fixture build {t_build:.0f} s)."
    )
    runs_note += f" Load average (1 min) {load_before:.2f} before, {os.getloadavg()[0]:.2f} after."
    report(rows, gits, imp, machine(), runs_note, stale_git_calls())
    log("findings: history walk and secret scan")
    mono = infos.get("monorepo", {}).get("path")
    print("\n### Off the launch path: history findings and the secret scan\n")
    print("| what | where | time |\n| --- | --- | ---: |")
    for what, where, took in findings_bench(args.cache, mono, args.quick):
        print(f"| {what} | {where} | {took} |")
    return 1 if any(r.error or r.bare_error or r.bw_error for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
