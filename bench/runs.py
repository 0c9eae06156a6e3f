"""The timed runs: what is measured, and how, so that ai-sandbox's own cost stands out from the backend's and
from the noise of a busy machine.

Every fixture is measured three times: with the default user config (node_modules/ is on the dependency
allowlist, kept readable), with `allow_dependencies = false`, which hides every node_modules/ too (the
stress case for mount counts), and with `block = ["README.md"]`: every README.md is tracked (1 in the small
repo, 1,001 in the monorepo), which costs a mask each and the skip-worktree marks of skipworktree.py (one
`git update-index` at launch; the watcher clears them after). The user config comes from a bench-owned XDG_CONFIG_HOME, never yours.

For each row, `ai-sandbox -- true` (the installed console script .venv/bin/ai-sandbox) and the bare backend
`firejail --quiet --profile=<the profile ai-sandbox generated> -- /usr/bin/true` run interleaved, the
order alternating per iteration, so machine noise hits both alike. The profile and the hidden-entry count come from
`ai-sandbox explain --json` (`files`, `hidden`). The bwrap columns do the same for `ai-sandbox --backend bwrap
-- true` against bare `bwrap --args 3 -- true` with the arguments it generated (`descriptors`). Then: where the launch time goes (the git calls
ai-sandbox makes, reproduced: rev-parse and the three ls-files, alone and side by side as git.scan runs
them, next to the `git status --ignored` it ran before; and prepare() plus the rest of run() timed
in-process, piece by piece, by wrapping git.find_repo, git.scan, layers.collect and policy.build),
the import time of the launch path (`python -X importtime`), and, off the launch path, the history walk
and the secret scan (findings_bench).

Every Python process the bench starts runs with its bytecode cached, as after an install, in
PYTHONPYCACHEPREFIX=<cache>/pycache (nothing is written next to the sources), even where the environment
sets PYTHONDONTWRITEBYTECODE; the import section also shows the uncached cost.
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from fixtures import HISTORY_COMMITS, Fixture, history_fixture, log

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
AI_SANDBOX = os.path.join(REPO, ".venv", "bin", "ai-sandbox")
# The calls ai-sandbox makes on every launch (git/), reproduced for the breakdown: find_repo's
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
    """A user config home owned by the bench: empty (defaults), or the variant's one setting (CONFIG_TEXT)."""
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
    "default": "default config (node_modules/ readable, writes confined, network by allowlist)",
    "nodeps": "allow_dependencies = false",
    "tracked": "tracked files blocked (their skip-worktree marks set at launch, cleared after)",
    "unconfined": "confine_writes = false (what write containment costs: the difference with default)",
    "network-on": 'network = "on" (what the allowlist\'s namespace and proxy cost: the difference with default)',
}
CONFIG_TEXT = {
    "nodeps": "allow_dependencies = false\n",
    "tracked": 'block = ["README.md"]\n',
    "unconfined": "confine_writes = false\n",
    "network-on": 'network = "on"\n',
}


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
    inner: dict = field(default_factory=dict)  # the phases of one instrumented launch (INNER), median of several
    check: dict = field(default_factory=dict)  # the launch check inside, paired (CHECK)
    bw_inner: dict = field(default_factory=dict)
    bw_check: dict = field(default_factory=dict)
    # the same launch with --backend bwrap, against bare `bwrap <the same arguments> true`
    bw_hidden: int = 0
    bw_sandbox: list[float] = field(default_factory=list)
    bw_bare: list[float] = field(default_factory=list)
    bw_error: str = ""


# Run in the venv's Python: one `ai-sandbox -- true` through launch.run() itself, up to the exec (or, for a
# supervised backend, the start of the session), each phase timed by wrapping the functions run() calls where it
# looks them up; then, supervised, the session runs and its end is timed (from the sandbox's exit to the launch's).
# A function a refactor moved or renamed is not wrapped, and its column is left out. Every git process is timed
# through subprocess.Popen (start to exit), whatever starts it. The JSON goes to the file named by argv[1]: the
# watcher and the proxy outlive this process, holding whatever pipe it had.
INNER = r"""
import os, sys, time  # json after the imports are timed: it brings re, which the launch's own imports pay for
OUT = sys.argv[1]
T = {}
t0 = time.perf_counter()
import ai_sandbox.main
from ai_sandbox import launch as L
T["imports"] = time.perf_counter() - t0
import importlib, subprocess
def module(name):
    try:
        return importlib.import_module(name)
    except ImportError:
        return None
config, git, layers, state = (module("ai_sandbox." + n) for n in ("config", "git", "layers", "state"))
t = time.perf_counter()
watch = module("ai_sandbox.watch")  # imported by run() only when it starts the watcher: counted there
T["import watch"] = time.perf_counter() - t
supervise = module("ai_sandbox.supervise")
backends = [c for m, c in (("firejail", "Firejail"), ("bwrap", "Bwrap")) if (mod := module("ai_sandbox.backends." + m))
            for c in [getattr(mod, c, None)] if c is not None]

GITS = []  # [start, exit] of every git process
spawn = module("ai_sandbox.spawn")
if spawn is not None:  # git runs through spawn.py: started by start(), reaped by collect()
    start, collect = spawn.start, spawn.collect
    def started(argv, *a, **k):
        child = start(argv, *a, **k)
        if os.path.basename(os.fsdecode(argv[0])) == "git":
            child_times[child.pid] = [time.perf_counter(), None]
            GITS.append(child_times[child.pid])
        return child
    def collected(children, *a, **k):
        try:
            return collect(children, *a, **k)
        finally:
            for c in children.values():
                if c.pid in child_times and child_times[c.pid][1] is None:
                    child_times[c.pid][1] = time.perf_counter()
    child_times = {}
    spawn.start, spawn.collect = started, collected
class Popen(subprocess.Popen):  # git through subprocess (the code before spawn.py)
    def __init__(self, args, *a, **k):
        argv = [args] if isinstance(args, (str, bytes)) else list(args)
        self._bench = None
        if argv and os.path.basename(os.fsdecode(argv[0])) == "git":
            self._bench = [time.perf_counter(), None]
            GITS.append(self._bench)
        super().__init__(args, *a, **k)
    def wait(self, *a, **k):
        rc = super().wait(*a, **k)
        if self._bench is not None and self._bench[1] is None:
            self._bench[1] = time.perf_counter()
        return rc
subprocess.Popen = Popen

DEPTH = [0]
def timed(key, f):
    def w(*a, **k):
        if DEPTH[0]:  # inside another phase: that phase's time
            return f(*a, **k)
        n, s = len(GITS), time.perf_counter()
        DEPTH[0] += 1
        try:
            return f(*a, **k)
        finally:
            DEPTH[0] -= 1
            T[key] = T.get(key, 0.0) + time.perf_counter() - s
            procs = [p for p in GITS[n:] if p[1] is not None]
            if procs:  # wall time while git ran, side by side or not
                T[key + " git"] = T.get(key + " git", 0.0) + max(p[1] for p in procs) - min(p[0] for p in procs)
    return w
def wrap(key, *targets):
    for obj, name in targets:
        f = getattr(obj, name, None) if obj is not None else None
        if callable(f):
            setattr(obj, name, timed(key, f))
wrap("config", (config, "load_user"), (config, "load_project"), (L, "_move_home_files"), (L, "_check_own_files"))
wrap("layers, git", (git, "find_repo"), (layers, "collect"), (git, "other_checkouts"))
wrap("policy", (L, "build"), (L, "merge"))
wrap("writes, sockets, network", (L, "_writes"), (L, "_sockets"), (L, "_network"))
wrap("backend", (L, "select"), *((c, "plan") for c in backends))
wrap("record", (state, "check"), (state, "record"))
wrap("watcher", (watch, "start"))
wrap("proxy", (L, "_start_proxy"))

CALLS = [0]  # the git processes up to the session's start
def write():
    import json
    out = {k: v * 1000 for k, v in T.items()}
    out["import"] = out["imports"]
    out["git calls"] = CALLS[0]
    with open(OUT, "w") as f:
        json.dump(out, f)
def done(*a, **k):
    T["run"] = time.perf_counter() - t_run
    CALLS[0] = len(GITS)
    write()
    os._exit(0)
L._exec = done
if supervise is not None:  # the session runs (`true`); then the end, timed from the sandbox's exit to the launch's
    session, leave = supervise.run, os._exit
    def supervised(*a, **k):
        T["run"] = time.perf_counter() - t_run
        CALLS[0] = len(GITS)
        status = session(*a, **k)
        t_end = time.perf_counter()
        def left(code):
            T["end"] = time.perf_counter() - t_end
            write()
            leave(code)
        os._exit = left  # after the watcher's and the proxy's forks, whose exits stay theirs
        return status
    supervise.run = supervised
req = L.Request(argv=["true"], is_command=True, cwd=os.getcwd(), env=dict(os.environ),
                backend=os.environ.get("BENCH_BACKEND") or None)
t_run = time.perf_counter()
L.run(req)
"""

# The launch check inside, paired: the sandbox as ai-sandbox starts it (the check, then `true`) against the
# same sandbox starting `true` directly, interleaved, each through supervise.spawn and a blocking wait (with the
# proxy's channel at its descriptor when the plan has one). For bwrap the masks are mounted by the check: their
# mounts are in its time. Prints the two medians and the median of the pairs' differences.
CHECK = r"""
import json, os, socket, statistics, sys, time
from ai_sandbox import fs, launch as L, network, supervise
from ai_sandbox.backends.plan import LaunchPlan, Unchecked
runs = int(sys.argv[1])
req = L.Request(argv=["true"], is_command=True, cwd=os.getcwd(), env=dict(os.environ),
                backend=os.environ.get("BENCH_BACKEND") or None)
p = L.prepare(req)
fs.make_dirs(p.plan.dirs)
fs.write_files(p.plan.files)
plan = p.plan
bare = LaunchPlan(sandbox=plan.sandbox, agent=plan.agent, check=Unchecked("bench"), env=plan.env, fds=plan.fds)
def once(pl):
    keep = None
    if p.policy.network.mode == "allowlist":
        ours, theirs = socket.socketpair()
        keep = {network.FD: theirs.fileno()}
    t = time.perf_counter()
    with open(os.devnull, "r+b") as null:
        pid = supervise.spawn(pl, (null.fileno(), null.fileno(), null.fileno()), cwd=os.getcwd(), keep=keep)
        if keep:
            theirs.close()
        _, status = os.waitpid(pid, 0)
    took = (time.perf_counter() - t) * 1000
    if keep:
        ours.close()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"exit {os.waitstatus_to_exitcode(status)}")
    return took
with_check, without = [], []
for i in range(runs):
    pair = ((plan, with_check), (bare, without))
    for pl, out in pair if i % 2 == 0 else pair[::-1]:
        out.append(once(pl))
print(json.dumps({"with": statistics.median(with_check), "without": statistics.median(without),
                  "check": statistics.median(a - b for a, b in zip(with_check, without))}))
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
    row.inner, row.check = phases(cwd, env, max(5, min(runs, 10)))


def phases(cwd: str, env: dict[str, str], runs: int, backend: str = "") -> tuple[dict, dict]:
    """The median of each phase over runs instrumented launches (INNER), and the launch check inside, paired
    (CHECK); {} where one failed (said on stderr)."""
    import tempfile

    env = {**env, "BENCH_BACKEND": backend}
    samples: list[dict] = []
    with tempfile.TemporaryDirectory() as d:
        for i in range(runs):
            out = os.path.join(d, f"inner-{i}.json")
            p = subprocess.run([venv_python(), "-c", INNER, out], cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # fmt: skip
            if p.returncode != 0 or not os.path.exists(out):
                log(f"  breakdown failed: {p.stderr.decode(errors='replace').strip().splitlines()[-1:]}")
                break
            with open(out) as f:
                samples.append(json.load(f))
    inner = {k: med([s[k] for s in samples if k in s]) for k in {k for s in samples for k in s}}
    p = subprocess.run([venv_python(), "-c", CHECK, str(max(runs, 10))], cwd=cwd, env=env, capture_output=True)
    if p.returncode != 0:
        log(f"  launch check timing failed: {p.stderr.decode(errors='replace').strip().splitlines()[-1:]}")
        return inner, {}
    return inner, json.loads(p.stdout)


def bwrap_timed(args: list[str], cwd: str, env: dict[str, str]) -> tuple[float, int]:
    """Wall time of bare `bwrap --args 3 -- true` with args at fd 3, started the way ai-sandbox starts it
    (supervise.spawn), and waited for without polling (supervise.captured polls every 10 ms)."""
    from ai_sandbox.backends.bwrap import SECCOMP_FD, tiocsti_filter
    from ai_sandbox.backends.plan import LaunchPlan, Unchecked
    from ai_sandbox.supervise import spawn

    blob = b"".join(os.fsencode(a) + b"\0" for a in args)
    plan = LaunchPlan(sandbox=[shutil.which("bwrap") or "bwrap", "--args", "3", "--"], agent=[shutil.which("true") or "/usr/bin/true"],
                      check=Unchecked("bare bwrap"), env=env, fds={3: blob, SECCOMP_FD: tiocsti_filter()})  # fmt: skip
    t = time.perf_counter()
    with open(os.devnull, "r+b") as null:
        pid = spawn(plan, (null.fileno(), null.fileno(), null.fileno()), cwd=cwd)
        _, status = os.waitpid(pid, 0)
    return (time.perf_counter() - t) * 1000, os.waitstatus_to_exitcode(status)


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
    row.bw_inner, row.bw_check = phases(cwd, env, max(5, min(runs, 10)), "bwrap")


def stale_git_calls() -> list[str]:
    """The reproduced git calls that gitcommand.py and src/ai_sandbox/git/ no longer spell out (layout and comments
    ignored)."""
    text = ""
    for name in ("gitcommand.py", "git/run.py", "git/repo.py", "git/listing.py"):
        try:
            with open(os.path.join(REPO, "src", "ai_sandbox", name)) as f:
                text += f.read()
        except OSError:
            return [name]
    src = re.sub(r"\s", "", re.sub(r"#[^\n]*", "", text))
    calls = {"git prefix": GIT[1:], **GIT_CALLS}  # gitcommand.py names git by its resolved path
    return [name for name, argv in calls.items() if ",".join(f'"{a}"' for a in argv) not in src]


def _git_call(args: list[str], path: str) -> float:
    """One git call as git/run.py makes it (output read through a pipe), in ms."""
    t = time.perf_counter()
    subprocess.run([*GIT, *args], cwd=path, capture_output=True, check=True)
    return (time.perf_counter() - t) * 1000


def _scan(path: str) -> float:
    """git.scan's git part: its three ls-files started side by side, their pipes read as they fill."""
    from ai_sandbox import spawn  # the very starter and reader the launch uses

    t = time.perf_counter()
    git = shutil.which("git") or "/usr/bin/git"
    started = {n: spawn.start([git, *GIT[1:], "-C", path, *GIT_CALLS[n]], os.environ) for n in SCAN_CALLS}
    done = spawn.collect(started, 120)
    for proc in done.values():
        if proc.returncode != 0:
            raise SystemExit(f"bench: git ls-files failed in {path}: {proc.stderr.decode(errors='replace').strip()}")
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


# ------------------------------------------------------------------------------- findings (off the launch path)


def findings_bench(cache: str, monorepo: str | None, quick: bool) -> list[tuple[str, str, float]]:
    """(what, where, ms): the history walk on the 100,000-commit repository, cold and from the cache, the
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
        ("history walk (explain, background refresh)", f"{HISTORY_COMMITS:,} commits: {what}", med(walks) * 1000)
    )
    keys = []
    for _ in range(20):
        t = time.perf_counter()
        history.state_key(tgts)
        keys.append(time.perf_counter() - t)
    rows.append(("history key check (launch path)", f"{HISTORY_COMMITS:,} commits", med(keys) * 1000))
    if monorepo:
        prepared = prepare(Request(["true"], True, cwd=monorepo, env=env), resolve=False)
        t = time.perf_counter()
        tgts = history.targets(prepared.policy, prepared.trees)
        history.state_key(tgts)
        rows.append(
            (
                "history key check (launch path)",
                f"monorepo, {len(prepared.policy.masks):,} masks",
                (time.perf_counter() - t) * 1000,
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
                    (time.perf_counter() - t) * 1000,
                )
            )
    return rows
