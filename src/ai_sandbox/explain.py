"""`ai-sandbox explain`: the policy as one JSON-ready document. The tables of `report` and `--json` are both
drawn from it, and it is built from the same Policy and LaunchPlan a launch executes.

The document's shape is stable (documented in docs/usage.md); new keys may be added, none renamed.
"""

from __future__ import annotations

import os
from typing import Any

from ai_sandbox.backends.plan import descriptor_args
from ai_sandbox.fs import below, inside
from ai_sandbox.history import Finding
from ai_sandbox.policy import Kept, Mask, Policy
from ai_sandbox.secretscan import Scan

SCHEMA = 1


def _mask(m: Mask, scratch: frozenset[str] = frozenset()) -> dict[str, Any]:
    return {
        "path": m.path,
        "type": "dir" if m.is_dir else "file",
        "layer": m.layer,
        "reason": m.reason,
        "origin": m.origin or None,
        "note": m.note or None,
        # what a write from inside does: "refused" (a read-only mask), or "scratch" (an empty tmpfs of the
        # session: it succeeds and is discarded at exit); never the hidden content's place on the host
        "writes": "scratch" if m.path in scratch else "refused",
    }


def _kept(k: Kept) -> dict[str, Any]:
    return {"path": k.path, "type": "dir" if k.is_dir else "file", "reason": k.reason, "rule": str(k.rule)}


def _finding(f: Finding) -> dict[str, Any]:
    return {
        "path": f.mask, "type": "dir" if f.is_dir else "file", "history_paths": f.paths, "path_count": f.path_count,
        "versions": f.versions, "first_commit": f.first_commit or None, "first_date": f.first_date or None,
        "via": f.via, "refs": f.refs, "repository": f.root, "tracked": f.tracked, "remedy": f.remedy(),
    }  # fmt: skip


def secrets(scan: Scan) -> dict[str, Any]:
    """explain --secrets: what the scan found (never the secret), and how much it had to read."""
    return {
        "findings": [{"path": f.path, "line": f.line, "kinds": f.kinds, "scope": f.scope} for f in scan.findings],
        "scanned": scan.scanned, "reused": scan.reused, "skipped_large": scan.skipped,
    }  # fmt: skip


def verdict(policy: Policy, given: str, cwd: str) -> dict[str, Any]:
    """Hidden or readable, and by which layer and rule, for one path as the agent would open it."""
    absolute = os.path.normpath(os.path.join(cwd, given))
    real = os.path.realpath(absolute)
    out: dict[str, Any] = {"path": given, "resolved": real, "exists": os.path.lexists(absolute)}
    m = policy.hidden(real)
    if m is not None:
        out.update(hidden=True, layer=m.layer, reason=m.reason, mask=m.path, note=m.note or None, rule=None)
        if m.path != real:
            out["reason"] = f"inside hidden {m.path}/: {m.reason}"
        return out
    out.update(hidden=False, layer=None, mask=None, note=None, rule=None)
    kept = next((k for k in policy.kept if real == k.path or (k.is_dir and below(real, k.path))), None)
    if kept is not None:
        out.update(reason=f"{kept.reason}, kept readable", rule=str(kept.rule))
    elif not inside(real, policy.root):
        out["reason"] = "outside the project: only your global blocks apply, and none matches"
    elif not policy.in_git:
        out["reason"] = "no global block matches (not a git work tree: no ignore rules apply)"
    else:
        out["reason"] = "not ignored by git and not blocked"
    return out


def network_doc(policy: Policy) -> dict[str, Any]:
    """Where the agent's connections may go (network.py) and which of the host's sockets it reaches (sockets.py)."""
    net, s = policy.network, policy.sockets
    allowlist = net.mode == "allowlist"
    return {
        "mode": net.mode,
        "why": net.why,
        "proxy": f"127.0.0.1:{net.port}" if allowlist else None,
        "environment": net.environment(),
        "domains": [{"entry": str(d), "origin": d.origin} for d in net.domains],
        "forwarded": [f"[{a}]:{p}" if ":" in a else f"{a}:{p}" for a, p in net.forwards],
        "upstream": net.upstream or None,
        "sockets": {
            "tmp": "own" if s.tmp else "host", "kept": list(s.kept), "runtime": list(s.runtime), "tmpdir_made": s.made or None,
            "why_not_tmp": s.why_not_tmp or None,
            "masked": list(s.masked), "passed": list(s.passed),
        },
    }  # fmt: skip


def document(prepared: Any, paths: list[str] | None, cwd: str, nested: list[Mask] | None = None) -> dict[str, Any]:
    """prepared: a launch.Prepared; nested: masks not yet enforced when already inside a sandbox."""
    policy: Policy = prepared.policy
    doc: dict[str, Any] = {
        "schema": SCHEMA,
        "project": policy.root,
        "git": policy.in_git,
        "backend": prepared.backend.name,
        "backend_assumed": prepared.unusable is not None,  # no backend works here: the rules this one would apply
        "agent": prepared.profile.name,
        "config_files": policy.config_files,
        "hidden": [_mask(m, frozenset(prepared.plan.scratch)) for m in policy.masks],
        "covered": [_mask(m) for m in policy.covered],
        "kept": [_kept(k) for k in policy.kept],
        # write containment (writes.py): confined, and each place with what a write there does and its origin
        "writes": {
            "confined": policy.writes.confined,
            "places": [
                {"path": p.path, "writes": "allowed" if p.writable else "refused", "origin": p.origin}
                for p in policy.writes.places
            ],
        },
        "network": network_doc(policy),
        "warnings": [{"kind": w.kind, "message": w.message, "path": w.path or None} for w in prepared.notices],
        "command": prepared.plan.argv,
        # the launch check's bytecode (host.compiled_verifier) as its size, like binary descriptors below: lone
        # surrogates in JSON text are what strict readers refuse
        "files": {
            path: f"{len(content)} bytes" if path.endswith(".pyc") else content.decode("utf-8", "surrogateescape")
            for path, content in prepared.plan.files.items()
        },
        # what the command reads from its descriptors: bwrap's arguments (--args) as a list; binary data
        # (bwrap's seccomp program) as its size
        "descriptors": {
            str(fd): f"{len(data)} bytes" if (args := descriptor_args(data)) is None else args
            for fd, data in prepared.plan.fds.items()
        },
        "unavailable": str(err) if (err := prepared.unusable or prepared.backend.probe(prepared.env)) else None,
        "nested": None if nested is None else {"unenforced": [m.path for m in nested]},
    }
    doc["history"] = None if prepared.history is None else [_finding(f) for f in prepared.history]
    doc["secrets"] = None  # filled by `explain --secrets`
    if paths is not None:
        doc["paths"] = [verdict(policy, p, cwd) for p in paths]
    return doc
