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
import os
import platform
import shutil
import subprocess
import sys
import time

from fixtures import FIXTURES, build, log
from runs import (
    AI_SANDBOX,
    GIT_CALLS,
    OLD_STATUS_NAME,
    PY_ENV,
    REPO,
    SCAN,
    VARIANTS,
    Row,
    config_dir,
    findings_bench,
    git_breakdown,
    import_report,
    measure,
    measure_bwrap,
    med,
    python_env,
    stale_git_calls,
    venv_python,
)

# -------------------------------------------------------------------------------------------- report

CONFIG_SHOWN = {"default": "defaults", "nodeps": "`allow_dependencies = false`", "tracked": '`block = ["README.md"]`'}


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
        print(f"| {what} | {where} | {ms(took)} |")
    return 1 if any(r.error or r.bare_error or r.bw_error for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
