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
import shutil
import sys
import time

import report
from fixtures import FIXTURES, build, log
from runs import (
    AI_SANDBOX,
    PY_ENV,
    VARIANTS,
    Row,
    config_dir,
    findings_bench,
    git_breakdown,
    import_report,
    measure,
    measure_bwrap,
    python_env,
    stale_git_calls,
    venv_python,
)


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
    print(report.launches(rows, gits, imp, report.machine(), runs_note, stale_git_calls()), end="", flush=True)
    log("findings: history walk and secret scan")
    mono = infos.get("monorepo", {}).get("path")
    print(report.findings(findings_bench(args.cache, mono, args.quick)), end="")
    return 1 if any(r.error or r.bare_error or r.bw_error for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
