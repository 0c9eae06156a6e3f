"""The Markdown of a run, rendered as text rather than printed, so that it can go into a doc as well as to stdout.

The tables show medians: the overhead is the median of ai-sandbox minus the median of the bare backend, next
to the ratio. Medians on a busy machine move by tens of ms: the header shows the load average, and the last
column the overhead of the fastest runs (min - min). A launch that fails is a row saying so, its error printed
verbatim under the table.
"""

from __future__ import annotations

import os
import platform
import subprocess

from runs import GIT_CALLS, OLD_STATUS_NAME, REPO, SCAN, VARIANTS, Row, med, venv_python

CONFIG_SHOWN = {
    "default": "defaults",
    "nodeps": "`allow_dependencies = false`",
    "tracked": '`block = ["README.md"]`',
    "unconfined": "`confine_writes = false`",
    "network-on": '`network = "on"`',
}
CONFIG_SHORT = {  # the same, in the narrower table of where the time goes
    "default": "defaults",
    "nodeps": "no deps",
    "tracked": "tracked blocked",
    "unconfined": "unconfined",
    "network-on": "network on",
}


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


def launches(
    rows: list[Row], gits: dict[str, dict], imp: dict | None, mach: list, runs_note: str, stale: list[str]
) -> str:
    """Everything but the findings: the launch table, where the time goes, the import time."""
    out: list[str] = []
    p = out.append
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
        p(f"\n**Outdated**: src/ai_sandbox/git/ no longer spells out {', '.join(stale)} as reproduced here.")

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
        cfg = CONFIG_SHORT[r.variant]
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
    return "\n".join(out) + "\n"


def findings(rows: list[tuple[str, str, float]]) -> str:
    """The table of runs.findings_bench, which comes last: it is measured after the launches."""
    out = [
        "\n### Off the launch path: history findings and the secret scan\n",
        "| what | where | time |\n| --- | --- | ---: |",
    ]
    out += [f"| {what} | {where} | {ms(took)} |" for what, where, took in rows]
    return "\n".join(out) + "\n"


# --write-docs: the doc keeps its own text around these lines, the bench owns what is between them.
BEGIN, END = "<!-- bench:begin -->", "<!-- bench:end -->"


def _markers(path: str) -> tuple[list[str], int, int]:
    """The doc's lines and the indexes of its first begin line and the end line after it, or a one-line exit."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines(keepends=True)
    except OSError as e:
        raise SystemExit(f"bench: --write-docs {path}: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise SystemExit(f"bench: --write-docs {path}: not UTF-8 ({e.reason} at byte {e.start})") from None
    begin = next((i for i, ln in enumerate(lines) if ln.strip() == BEGIN), None)
    end = None if begin is None else next((i for i in range(begin + 1, len(lines)) if lines[i].strip() == END), None)
    if begin is None or end is None:
        raise SystemExit(f"bench: --write-docs {path}: no line {BEGIN} followed by a line {END}")
    return lines, begin, end


def check_docs(path: str) -> None:
    """Before a run: the markers are there (a run takes minutes; a typo should not cost them)."""
    _markers(path)


def write_docs(path: str, markdown: str) -> None:
    """Replace what is between the marker lines with markdown, and a blank line to close its last table."""
    lines, begin, end = _markers(path)
    text = markdown if markdown.endswith("\n\n") else markdown.rstrip("\n") + "\n\n"
    with open(path, "w", encoding="utf-8") as f:
        f.write("".join(lines[: begin + 1]) + text + "".join(lines[end:]))
