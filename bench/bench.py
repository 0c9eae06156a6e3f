"""Launch benchmark of ai-sandbox against the bare backend: `make bench` (not a timed test).

    make bench                                  # all four fixtures
    make bench BENCH_ARGS=--quick               # all but the monorepo, fewer runs
    make bench BENCH_ARGS="--quick --write-docs docs/performance.md"   # and into that doc
    .venv/bin/python bench/bench.py --runs 20   # the same, by hand

This file is the entry point: the flags, and the order of the work. fixtures.py builds and caches the
fixture repositories (which ones, and why so many files), runs.py times the launches (what is measured and
how), report.py renders the Markdown (what the columns mean).

The output is Markdown, to paste into the README as is; progress goes to stderr. Exit status 1 when a launch
fails (the error is printed verbatim under the table). --write-docs PATH also puts it between the lines
`<!-- bench:begin -->` and `<!-- bench:end -->` of PATH, replacing what was there, once every launch succeeded
(without those lines the bench stops before measuring).

Flags: --quick (all but the monorepo, fewer runs), --runs N (launches per row; default 40 / 20 / 20 / 10),
--only NAME (repeatable), --variant default|nodeps|tracked|unconfined|network-on (repeatable), --build-only (build or check the fixtures and exit), --cache DIR,
--write-docs PATH.
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
    ap.add_argument("--quick", action="store_true", help="all but the monorepo, fewer runs")
    ap.add_argument("--runs", type=int, help="measured launches per row (default: 40 small, 20 100k, 10 monorepo)")
    ap.add_argument("--build-only", action="store_true", help="build (or check) the fixtures, measure nothing")
    ap.add_argument("--only", choices=[f.name for f in FIXTURES], action="append", help="measure only this fixture")
    ap.add_argument("--variant", choices=list(VARIANTS), action="append", help="measure only this config")
    ap.add_argument(
        "--cache",
        default=os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "ai-sandbox-bench"),
    )
    ap.add_argument(
        "--write-docs",
        metavar="PATH",
        help=f"after the run, put its Markdown between the lines {report.BEGIN} and {report.END} of PATH",
    )
    args = ap.parse_args()
    if args.write_docs:
        if args.build_only:
            ap.error("--write-docs: --build-only measures nothing to write")
        args.write_docs = os.path.abspath(args.write_docs)
        report.check_docs(args.write_docs)
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
        log(f"git/ no longer spells out {', '.join(stale)}: the reproduced git calls may be outdated")
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
    markdown = report.launches(rows, gits, imp, report.machine(), runs_note, stale_git_calls())
    print(markdown, end="", flush=True)
    log("findings: history walk and secret scan")
    mono = infos.get("monorepo", {}).get("path")
    findings = report.findings(findings_bench(args.cache, mono, args.quick))
    print(findings, end="")
    markdown += findings
    failed = any(r.error or r.bare_error or r.bw_error for r in rows)
    if args.write_docs:
        if failed:
            log(f"a launch failed: {args.write_docs} left as it was")
        else:
            report.write_docs(args.write_docs, markdown)
            log(f"the Markdown is in {args.write_docs}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
