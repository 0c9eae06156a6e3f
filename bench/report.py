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


def paired(runs: list[float], bare: list[float]) -> tuple[float, float]:
    """The median over the pairs of (run − bare, run / bare): each launch against the bare one run beside it."""
    pairs = list(zip(runs, bare, strict=False))
    if not pairs:
        return float("nan"), float("nan")
    return med([a - b for a, b in pairs]), med([a / b for a, b in pairs])


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
      "| fastest runs | `--backend bwrap` | bare `bwrap` | overhead | ratio | fastest runs |")  # fmt: skip
    p("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        cfg = CONFIG_SHOWN[r.variant]
        files = f"{r.info['files']:,}"
        hidden = f"{r.hidden:,}" if r.bw_hidden in (0, r.hidden) else f"{r.hidden:,} ({r.bw_hidden:,} bwrap)"
        if r.bw_error or not r.bw_sandbox:
            bw = "**fails** | – | – | – | – |" if r.bw_error else "– | – | – | – | – |"
        else:
            over, ratio = paired(r.bw_sandbox, r.bw_bare)
            bw = (f"{ms(med(r.bw_sandbox))} | {ms(med(r.bw_bare))} | +{over:,.0f} ms | {ratio:.2f}× | "
                  f"+{min(r.bw_sandbox) - min(r.bw_bare):,.0f} ms |")  # fmt: skip
        if r.error or r.bare_error:
            bare = "fails" if r.bare_error else "–"
            p(f"| {r.fixture.title} | {cfg} | {files} | {hidden} | – | **fails** | {bare} | – | – | – | {bw}")
            continue
        over, ratio = paired(r.sandbox, r.bare)
        p(f"| {r.fixture.title} | {cfg} | {files} | {hidden} | {ms(med(r.dry))} | {ms(med(r.sandbox))} | "
          f"{ms(med(r.bare))} | +{over:,.0f} ms | {ratio:.2f}× | +{min(r.sandbox) - min(r.bare):,.0f} ms | {bw}")  # fmt: skip
    p("\n*hidden*: masks after collapsing (`ai-sandbox explain --json` → `hidden`). Each launch is paired with one "
      "of the bare backend on the very rules ai-sandbox generated, run just before or after it (the order "
      "alternates): `firejail --quiet --profile=<the generated profile> -- true`, and `bwrap --args 3 -- true` "
      "with the generated arguments (`explain --json` → `descriptors`), started and waited for as ai-sandbox "
      "does. *overhead* and *ratio*: the median over the pairs of ai-sandbox − bare and ai-sandbox / bare; "
      "*fastest runs*: min − min, less sensitive to a busy machine. bwrap's masks are not among its arguments "
      "(the launch check mounts them), so their cost is in its overhead.")  # fmt: skip
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

    p("\nInside one launch: `launch.run()` of `ai-sandbox -- true`, in-process, each phase timed by wrapping the "
      "functions it calls (median of several launches), up to the start of the supervised session, and its end "
      "once the sandbox has exited; then the launch check inside the sandbox, paired: the sandbox started with the "
      "check against the same sandbox starting `true` directly.\n")  # fmt: skip
    heads = ["startup", "imports", "config", "layers, git", "of it: git", "policy", "writes, sockets, network",
             "backend", "record", "watcher", "proxy", "other", "launch check inside", "session end", "sum",
             "measured"]  # fmt: skip
    p(f"| fixture | config | backend | masks | {' | '.join(heads)} |")
    p("| --- | --- | --- | ---: " + "| ---: " * len(heads) + "|")
    nan = float("nan")
    for r in rows:
        for backend, t, chk, runs, bare in (("firejail", r.inner, r.check, r.sandbox, r.bare),
                                            ("bwrap", r.bw_inner, r.bw_check, r.bw_sandbox, r.bw_bare)):  # fmt: skip
            if not t:
                continue
            named = ("config", "layers, git", "policy", "writes, sockets, network", "backend", "record", "watcher",
                     "proxy")  # fmt: skip
            startup = imp["wall_pass"] if imp else nan
            cells = {
                "startup": startup,
                "imports": t.get("imports", nan),
                **{k: t.get(k, 0.0) for k in named},
                "of it: git": t.get("layers, git git", nan),
                "other": t.get("run", nan) - sum(t.get(k, 0.0) for k in named),
                "launch check inside": chk.get("check", nan),
                "session end": t.get("end", nan),
                "sum": startup + t.get("imports", nan) + t.get("run", nan) + chk.get("check", nan) + t.get("end", nan),
                "measured": paired(runs, bare)[0] if runs else nan,
            }
            p(f"| {r.fixture.title} | {CONFIG_SHORT[r.variant]} | {backend} | {r.hidden:,} | "
              f"{' | '.join(ms(cells[h]) for h in heads)} |")  # fmt: skip
    p("\n*startup*: `python -c pass` in the venv; *imports*: `import ai_sandbox.main, ai_sandbox.launch`; *config*: "
      "reading the user's and the project's config, the launcher's own-files check; *layers, git*: `git.find_repo` "
      "and `layers.collect` (the `ls-files` scans, ignored and git-crypt entries, patterns), *of it: git* the wall "
      "time while its git processes ran; *policy*: `policy.build`; *writes, sockets, network*: their plans; "
      "*backend*: choosing it and its plan (profile, launch check spec); *record*: the hidden-paths record, "
      "checked and written; *watcher*: importing `watch` and its fork; *proxy*: the network proxy's fork; "
      "*other*: the rest of `run()` (the mount table, the history key, writing the generated files, the index "
      "marks); *launch check inside*: the median of the pairs' difference; *session end*: from the sandbox's exit "
      "to the launch's (the marks cleared, git's settings and index and object files looked at, before the prompt "
      "comes back); *sum*: all of these; *measured*: the launch table's overhead.")  # fmt: skip

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
