"""Rendering for people: the --dry-run plan. Reads the same Policy and LaunchPlan the launch executes."""

from __future__ import annotations

import shlex
import sys

from rich.console import Console
from rich.text import Text

from ai_sandbox.policy import Kept, Mask, Policy


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


def show_path(path: str, root: str, is_dir: bool = False) -> str:
    prefix = root.rstrip("/") + "/"
    shown = path[len(prefix) :] if path.startswith(prefix) else path
    shown = shown + "/" if is_dir else shown
    return shown if shown.isprintable() else quote(shown)


def _mask_lines(policy: Policy, masks: list[Mask]) -> list[Text]:
    lines = []
    for m in masks:
        t = Text("  ")
        t.append(f"{m.layer:<10}", style="bold red")
        t.append(show_path(m.path, policy.root, m.is_dir))
        t.append(f"  {m.reason}", style="dim")
        lines.append(t)
        if m.note:
            origin = f" (from {show_path(m.origin, policy.root)})" if m.origin else ""
            lines.append(Text(f"{'':12}↳ {m.note}{origin}", style="yellow"))
    return lines


def _kept_lines(policy: Policy, kept: list[Kept]) -> list[Text]:
    out = []
    for k in kept:
        t = Text("  ")
        t.append(show_path(k.path, policy.root, k.is_dir), style="green")
        t.append(f"  allowed by {k.rule}", style="dim")
        out.append(t)
    return out


def dry_run(prepared, req) -> None:  # noqa: ANN001 — launch.Prepared/Request; avoids an import cycle
    policy, plan = prepared.policy, prepared.plan
    con = Console(highlight=False, soft_wrap=True, file=sys.stdout)
    con.print(Text("ai-sandbox dry run: nothing is started", style="bold"))
    con.print(Text(f"project  {policy.root}" + ("" if policy.in_git else "  (not a git work tree)")))
    con.print(Text(f"backend  {prepared.backend.name}"))
    con.print(Text(f"agent    {prepared.profile.name}: {' '.join(quote(a) for a in req.argv)}"))
    if policy.config_files:
        con.print(Text(f"config   {', '.join(policy.config_files)}"))
    con.print()
    con.print(Text(f"hidden ({len(policy.masks)}):", style="bold"))
    for line in _mask_lines(policy, policy.masks) or [Text("  nothing", style="dim")]:
        con.print(line)
    if policy.kept:
        con.print()
        con.print(Text(f"readable although git-ignored ({len(policy.kept)}):", style="bold"))
        for line in _kept_lines(policy, policy.kept):
            con.print(line)
    if policy.warnings:
        con.print()
        con.print(Text(f"warnings ({len(policy.warnings)}):", style="bold yellow"))
        for w in policy.warnings:
            con.print(Text(f"  {w if w.isprintable() else quote(w)}", style="yellow"))
    unavailable = prepared.backend.unavailable()
    if unavailable is not None:
        con.print()
        con.print(Text(f"a launch would refuse: {unavailable}", style="bold red"))
    con.print()
    con.print(Text("command:", style="bold"))
    con.print(Text("  " + " ".join(quote(a) for a in plan.argv)))
    for path, content in plan.files.items():
        con.print()
        con.print(Text(f"file {quote(path)}:", style="bold"))
        for line in content.decode("utf-8", "surrogateescape").splitlines():
            con.print(Text(line if line.isprintable() else quote(line)))
