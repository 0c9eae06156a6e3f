"""Rendering for people: the --dry-run plan, explain's tables, the profile list and doctor's checks.

Reads the same Policy and LaunchPlan the launch executes; explain draws from the same document as --json.
"""

from __future__ import annotations

import io
import shlex
import sys

from rich.console import Console
from rich.text import Text

from ai_sandbox.backends.plan import descriptor_args
from ai_sandbox.fs import shown
from ai_sandbox.policy import Kept, Mask, Policy

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from ai_sandbox.doctor import Check
    from ai_sandbox.launch import Prepared, Request


def quote(s: str) -> str:
    """Shell-quote for copy and paste; unprintable characters in bash's $'…' form so nothing is hidden."""
    if s.isprintable():
        return shlex.quote(s)
    out = []
    for ch in s:
        if ch == "'" or ch == "\\":
            out.append("\\" + ch)
        elif ch.isprintable():
            out.append(ch)
        elif ord(ch) < 256 or 0xDC80 <= ord(ch) <= 0xDCFF:  # surrogate-escaped raw byte
            out.append(f"\\x{ord(ch) & 0xFF:02x}")
        else:
            out.append(f"\\u{ord(ch):04x}")
    return "$'" + "".join(out) + "'"


def printable(s: str) -> str:
    return s if s.isprintable() else quote(s)


def show_path(path: str, root: str, is_dir: bool = False) -> str:
    prefix = root.rstrip("/") + "/"
    shown = path[len(prefix) :] if path.startswith(prefix) else path
    shown = shown + "/" if is_dir else shown
    return printable(shown)


SCRATCH_NOTE = "writable scratch: empty inside, writes are discarded at exit"
WRITE_NOTE = (
    "a write into a hidden path fails (a read-only mask) and never reaches it; build outputs are readable and "
    "writable; directories marked scratch take writes that vanish when the session ends"
)


def _mask_lines(policy: Policy, masks: list[Mask], scratch: frozenset[str] = frozenset()) -> list[Text]:
    lines = []
    for m in masks:
        t = Text("  ")
        t.append(f"{m.layer:<10}", style="bold red")
        t.append(show_path(m.path, policy.root, m.is_dir))
        t.append(f"  {shown(m.reason)}", style="dim")
        if m.path in scratch:
            t.append(f"  [{SCRATCH_NOTE}]", style="cyan")
        lines.append(t)
        if m.note:
            origin = f" (from {show_path(m.origin, policy.root)})" if m.origin else ""
            lines.append(Text(f"{'':12}↳ {shown(m.note)}{origin}", style="yellow"))
    return lines


def _kept_lines(policy: Policy, kept: list[Kept]) -> list[Text]:
    out = []
    for k in kept:
        t = Text("  ")
        t.append(show_path(k.path, policy.root, k.is_dir), style="green")
        t.append(f"  allowed by {shown(str(k.rule))}", style="dim")
        out.append(t)
    return out


ASSUMED = " (assumed: no backend works here, see the end; these are the rules it would apply)"


def dry_run(prepared: Prepared, req: Request, unenforced: list[Mask] | None = None, refusal: str | None = None) -> None:
    policy, plan = prepared.policy, prepared.plan
    con = Console(highlight=False, soft_wrap=True, file=sys.stdout)
    con.print(Text("ai-sandbox dry run: nothing is started", style="bold"))
    con.print(Text(f"project  {policy.root}" + ("" if policy.in_git else "  (not a git work tree)")))
    con.print(Text(f"backend  {prepared.backend.name}{ASSUMED if prepared.unusable else ''}"))
    con.print(Text(f"agent    {prepared.profile.name}: {' '.join(quote(a) for a in req.argv)}"))
    if policy.config_files:
        con.print(Text(f"config   {', '.join(policy.config_files)}"))
    con.print()
    con.print(Text(f"hidden ({len(policy.masks)}):", style="bold"))
    _print_lines(con, _mask_lines(policy, policy.masks, frozenset(plan.scratch)) or [Text("  nothing", style="dim")])
    if policy.masks:
        con.print(Text(f"  {WRITE_NOTE}", style="dim"))
    if policy.kept:
        con.print()
        con.print(Text(f"readable although git-ignored ({len(policy.kept)}):", style="bold"))
        _print_lines(con, _kept_lines(policy, policy.kept))
    rules = policy.writes
    _writes(
        con,
        {"confined": rules.confined, "places": [{"path": p.path, "writes": "allowed" if p.writable else "refused",
                                                 "origin": p.origin} for p in rules.places]},
        policy.root,
    )  # fmt: skip
    from ai_sandbox.explain import network_doc

    _network(con, network_doc(policy), prepared.backend.host_commands)
    if prepared.notices:
        con.print()
        con.print(Text(f"warnings ({len(prepared.notices)}):", style="bold yellow"))
        for w in prepared.notices:
            con.print(Text(f"  {printable(w.message)}", style="yellow"))
    unavailable = prepared.unusable or prepared.backend.probe(prepared.env)
    if unenforced is not None:
        con.print()
        if unenforced:
            missing = ", ".join(show_path(m.path, policy.root, m.is_dir) for m in unenforced)
            con.print(
                Text(
                    f"already inside a sandbox that leaves readable: {missing}; a launch would refuse", style="bold red"
                )
            )
        else:
            con.print(Text("already inside a sandbox that hides all of this: a launch would run the command directly"))
    elif refusal is not None:
        con.print()
        con.print(Text(f"a launch would refuse: {printable(refusal)}", style="bold red"))
    elif unavailable is not None:
        con.print()
        con.print(Text(f"a launch would refuse: {unavailable}", style="bold red"))
    con.print()
    con.print(Text("command:", style="bold"))
    con.print(Text("  " + " ".join(quote(a) for a in plan.argv)))
    for path, content in plan.files.items():
        con.print()
        con.print(Text(f"file {quote(path)}:", style="bold"))
        _print_lines(con, [Text(printable(line)) for line in _file_lines(content)])
    for fd, data in plan.fds.items():
        con.print()
        con.print(Text(f"descriptor {fd}:", style="bold"))
        args = descriptor_args(data)
        if args is None:  # bwrap's seccomp program
            _print_lines(
                con, [Text(f"{len(data)} bytes of binary data (a seccomp program: {len(data) // 8} instructions)")]
            )
            continue
        _print_lines(con, [Text(printable(line)) for line in descriptor_lines(data)] or [Text("  (empty)")])


UNCONFINED = (
    "writes are not confined (your config says confine_writes = false): the agent writes wherever file modes let it"
)


def _writes(con: Console, writes: dict[str, Any], root: str) -> None:
    """Where the agent may write (writes.py): each place, writable or read-only, and its origin."""
    con.print()
    if not writes["confined"]:
        con.print(Text(UNCONFINED, style="bold yellow"))
        return
    con.print(Text("Writes (the most specific place decides; everything else as its enclosing place)", style="bold"))
    for p in writes["places"]:
        allowed = p["writes"] == "allowed"
        word = Text("writable " if allowed else "read-only", style="green" if allowed else "red")
        con.print(Text("  ").append(word).append(f"  {printable(p['path'])}").append(f"  ({p['origin']})", style="dim"))


NETWORK_TITLE = {
    "allowlist": "Network: allowlist (only through ai-sandbox's proxy, to these names; the host's loopback and LAN "
    "are out of reach)",
    "off": "Network: off (a network of its own with nothing in it)",
    "on": "Network: on (the host's network, as outside)",
}


def _network(con: Console, net: dict[str, Any], host: bool = True) -> None:
    """Where the agent's connections may go and the host's sockets it reaches, each rule with its origin."""
    con.print()
    con.print(Text(NETWORK_TITLE[net["mode"]], style="bold"), Text(f"({net['why']})", style="dim"))
    if not host and net["mode"] != "on":
        con.print(Text("  the docker backend has no proxy yet: the container has no network (--network none)"))
    elif net["mode"] == "allowlist":
        con.print(Text(f"  proxy 127.0.0.1:{net['proxy'].split(':')[1]} inside; the agent's environment gains:"))
        con.print(Text("    " + " ".join(f"{k}={v}" for k, v in net["environment"].items() if k.isupper())))
        by_origin: dict[str, list[str]] = {}
        for d in net["domains"]:
            by_origin.setdefault(d["origin"], []).append(d["entry"])
        for origin, entries in by_origin.items():
            con.print(Text(f"  {', '.join(entries)}").append(f"  ({origin})", style="dim"))
        if net["forwarded"]:
            con.print(Text(f"  answered at the same address inside: {', '.join(net['forwarded'])}"))
        if net["upstream"]:
            con.print(Text(f"  out through your proxy {net['upstream']}"))
    s = net["sockets"]
    if not host:
        return
    con.print(Text("The host's unix sockets (your servers: tmux, D-Bus, docker, …) are out of reach:", style="bold"))
    if s["tmp"] == "own":
        kept = f"; kept from the host's: {', '.join(printable(k) for k in s['kept'])}" if s["kept"] else ""
        con.print(Text(f"  /tmp is the sandbox's own, empty at the start{kept}"))
    else:
        con.print(Text(f"  /tmp is the host's, sockets there in reach: {s['why_not_tmp']}", style="yellow"))
    if s["tmpdir_made"]:
        con.print(Text(f"  $TMPDIR {printable(s['tmpdir_made'])} is made, empty, in the sandbox's own"))
    for runtime in s["runtime"]:
        con.print(Text(f"  {printable(runtime)} (your runtime directory) is shown empty"))
    for m in s["masked"]:
        con.print(Text(f"  masked  {printable(m)}"))
    for p in s["passed"]:
        con.print(Text(f"  reachable  {printable(p)}").append("  (ssh agent or allow_sockets)", style="dim"))


def descriptor_lines(data: bytes) -> list[str]:
    """NUL-separated arguments read from a descriptor (bwrap's --args), one option and its values a line."""
    lines: list[list[str]] = []
    for arg in descriptor_args(data) or []:
        modifier = bool(lines) and len(lines[-1]) == 2 and lines[-1][0] == "--perms"  # applies to the next option
        if not lines or (arg.startswith("--") and not modifier):
            lines.append([])
        lines[-1].append(quote(arg))
    return [" ".join(words) for words in lines]


_CHECK_KINDS = {
    "K": "sandbox",
    "M": "masked",
    "m": "masked if there",
    "T": "scratch",
    "R": "read-only",
    "B": "a mount point",
    "X": "read-only, and every mount below it",
    "O": "writable",
    "C": "starts in",
    "W": "enters",
    "S": "the very file seen at",
}


def _file_lines(content: bytes) -> list[str]:
    """A generated file as lines; the launch check's NUL-separated records one per line, by kind."""
    from ai_sandbox import verify

    records = verify.parse_spec(content)
    if records is None:
        return content.decode("utf-8", "surrogateescape").splitlines()
    out = [verify.HEADER.decode().strip()]
    for kind, rest in records:
        if kind == "C":
            rest = rest.split(":", 2)[2]
        elif kind == "S":  # device and inode of the file, then of its directory, then the path
            *numbers, rest = rest.split(":", 4)
            rest = f"{rest} ({':'.join(numbers)})"
        out.append(f"{_CHECK_KINDS.get(kind, kind)} {rest}")
    return out


def _print_lines(con: Console, lines: list[Text]) -> None:
    """One print for many lines: rich renders each print call anew (7,000 masks took seconds line by line)."""
    if lines:
        con.print(Text("\n").join(lines))


def _console() -> Console:
    """On a terminal, its width; into a pipe or file, one line per row (and no padding, see _done) so grep
    and diff see whole rows."""
    if sys.stdout.isatty():
        return Console(highlight=False, soft_wrap=False, file=sys.stdout)
    return Console(highlight=False, soft_wrap=False, file=io.StringIO(), width=100_000, color_system=None)


def _done(con: Console) -> None:
    if isinstance(con.file, io.StringIO):
        sys.stdout.write("".join(line.rstrip() + "\n" for line in con.file.getvalue().splitlines()))


# explain's section per layer, in the order of policy.Layer (tests/unit/test_pure_commands.py: one for each)
LAYER_TITLES = {
    "global": "global: your config.toml",
    "ignored": "ignored: git-ignored paths",
    "git-crypt": "git-crypt: encrypted files and the key",
    "explicit": "explicit: the project's .ai-sandbox.toml",
}


def explain(doc: dict[str, Any]) -> None:
    from rich.table import Table

    con = _console()
    root = doc["project"]
    con.print(Text(f"project  {root}" + ("" if doc["git"] else "  (not a git work tree)"), style="bold"))
    agent = doc["agent"] or "any command (no --agent: the built-in allowlists only)"
    con.print(Text(f"backend  {doc['backend']}{ASSUMED if doc['backend_assumed'] else ''}    agent  {agent}"))
    if doc["config_files"]:
        con.print(Text(f"config   {', '.join(doc['config_files'])}"))
    if "paths" in doc:
        table = Table(box=None, pad_edge=False, show_edge=False)
        for col in ("path", "verdict", "layer", "why"):
            table.add_column(col)
        for v in doc["paths"]:
            verdict = Text("hidden", style="bold red") if v["hidden"] else Text("readable", style="green")
            why = (
                v["reason"]
                + (f" — {v['rule']}" if v.get("rule") else "")
                + (f" ({v['note']})" if v.get("note") else "")
            )
            if not v["exists"]:
                why += " [does not exist]"
            table.add_row(Text(printable(v["path"])), verdict, Text(v["layer"] or "-"), Text(printable(why)))
        con.print()
        con.print(table)
        resolved = {v["resolved"] for v in doc["paths"]}
        _warnings(con, [w for w in doc["warnings"] if w["path"] in resolved])
        _done(con)
        return
    con.print()
    hidden = doc["hidden"]
    con.print(Text(f"Hidden ({len(hidden)})", style="bold"))
    if not hidden:
        con.print(Text("  nothing", style="dim"))
    for layer, title in LAYER_TITLES.items():
        rows = [h for h in hidden if h["layer"] == layer]
        if not rows:
            continue
        table = Table(title=f"{title} ({len(rows)})", title_justify="left", box=None, pad_edge=True, show_header=False)
        table.add_column("path", style="red", overflow="fold")
        table.add_column("why", style="dim", overflow="fold")
        for h in rows:
            why = h["reason"]
            if h.get("writes") == "scratch":
                why += f"; {SCRATCH_NOTE}"
            if h["note"]:
                why += f"; {h['note']}" + (f" (from {show_path(h['origin'], root)})" if h["origin"] else "")
            table.add_row(Text(show_path(h["path"], root, h["type"] == "dir")), Text(printable(why)))
        con.print(table)
    if doc["covered"]:
        con.print(Text(f"  and {len(doc['covered'])} more entries inside those directories", style="dim"))
    if doc["kept"]:
        con.print()
        table = Table(
            title=f"Readable although git-ignored ({len(doc['kept'])})",
            title_justify="left",
            title_style="bold",
            box=None,
            pad_edge=False,
        )
        table.add_column("path", style="green", overflow="fold")
        table.add_column("kept by", overflow="fold")
        for k in doc["kept"]:
            table.add_row(Text(show_path(k["path"], root, k["type"] == "dir")), Text(printable(k["rule"])))
        con.print(table)
    _writes(con, doc["writes"], root)
    _warnings(con, doc["warnings"])
    if doc["unavailable"]:
        con.print()
        con.print(Text(f"a launch would refuse: {doc['unavailable']}", style="bold red"))
    con.print()
    con.print(Text("Command", style="bold"))
    con.print(Text("  " + " ".join(quote(a) for a in doc["command"])), soft_wrap=True)
    _done(con)


def findings(doc: dict[str, Any], *, history: bool, secrets: bool) -> None:
    """explain --history / --secrets: the findings alone, each with where and what to do."""
    con = _console()
    root = doc["project"]
    if history:
        found = doc["history"] or []
        con.print(Text(f"Hidden content git still holds ({len(found)})", style="bold"))
        if not doc["git"]:
            con.print(Text("  not a git work tree: no history", style="dim"))
        elif not found:
            con.print(
                Text(
                    "  none: no hidden path has content in any commit, stash, reflog entry or stored object",
                    style="dim",
                )
            )
        for f in found:
            shown = show_path(f["path"], root, f["type"] == "dir")
            con.print(Text(f"  {shown}", style="bold red"), soft_wrap=True)
            if f["via"] == "store":
                con.print(Text("    the current content is stored in .git/objects, in no commit (added, then reset)"))
            else:
                import time

                date = time.strftime("%Y-%m-%d", time.gmtime(f["first_date"] or 0))
                refs = ", ".join(f["refs"]) or {
                    "reflog": "a reflog entry only",
                    "unreachable": "a dangling commit only",
                }.get(f["via"], "-")
                con.print(
                    Text(f"    {f['versions']} version(s) since {f['first_commit'][:12]} ({date}); held by {refs}"),
                    soft_wrap=True,
                )
            if f["type"] == "dir":
                more = (
                    f" and {f['path_count'] - len(f['history_paths'])} more"
                    if f["path_count"] > len(f["history_paths"])
                    else ""
                )
                con.print(
                    Text("    paths: " + ", ".join(printable(p) for p in f["history_paths"]) + more), soft_wrap=True
                )
            con.print(Text(f"    → {f['remedy']}", style="dim"), soft_wrap=True)
    if secrets:
        s = doc["secrets"]
        if history:
            con.print()
        con.print(Text(f"Secrets in files the agent can read ({len(s['findings'])})", style="bold"))
        for f in s["findings"]:
            where = show_path(f["path"], root) + f":{f['line']}"
            scope = "  (agent home state)" if f["scope"] != "project" else ""
            con.print(Text(f"  {where}  {', '.join(f['kinds'])}{scope}"), soft_wrap=True)
        tail = f"{s['scanned']} file(s) scanned, {s['reused']} unchanged since the last scan"
        if s["skipped_large"]:
            tail += f", {s['skipped_large']} larger than 2 MiB skipped"
        con.print(Text(f"  {tail}", style="dim"))
        if s["findings"]:
            con.print(
                Text(
                    "  → move each secret out of the file (an ignored .env, a secret manager) and rotate it, or hide "
                    "the file: `block` in .ai-sandbox.toml (`ai-sandbox init` suggests them)",
                    style="dim",
                ),
                soft_wrap=True,
            )
    _done(con)


def _warnings(con: Console, warnings: list[dict[str, Any]]) -> None:
    if not warnings:
        return
    con.print()
    con.print(Text(f"Warnings ({len(warnings)})", style="bold yellow"))
    for w in warnings:
        t = Text("  ")
        t.append(f"{w['kind']:<19}", style="yellow")
        t.append(printable(w["message"]))
        con.print(t, soft_wrap=True)


def profiles(rows: list[tuple[str, str, str | None, str]]) -> None:
    """rows: (name, description, installed path or None, source file)."""
    from rich.table import Table

    con = _console()
    table = Table(box=None, pad_edge=False)
    for col in ("", "agent", "description", "executable", "profile"):
        table.add_column(col, overflow="fold")
    for name, description, found, source in rows:
        mark = Text("✓", style="green") if found else Text("·", style="dim")
        table.add_row(
            mark,
            Text(name),
            Text(description),
            Text(found) if found else Text("not installed", style="dim"),
            Text(source),
        )
    con.print(table)
    con.print(Text("Any other executable runs with the generic profile: the built-in allowlists only.", style="dim"))
    _done(con)


def checks(results: list[Check]) -> None:
    """results: doctor.Check values."""
    con = _console()
    for c in results:
        mark = {"ok": Text("✓", style="green"), "warn": Text("!", style="yellow"), "fail": Text("✗", style="bold red")}
        t = Text()
        t.append_text(mark[c.status])
        t.append(f" {c.name}: ")
        t.append(shown(c.detail))
        con.print(t, soft_wrap=True)
        if c.hint and c.status != "ok":
            con.print(Text(f"    → {shown(c.hint)}", style="dim"), soft_wrap=True)
    _done(con)
