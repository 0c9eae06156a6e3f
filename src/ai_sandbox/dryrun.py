"""`ai-sandbox --dry-run AGENT`: everything a launch would do, shown (report.py) and not done. A backend that does
not work here is assumed (the rules are shown before the sandbox is fixed), and a refusal of the record is
shown, not raised."""

from __future__ import annotations

from ai_sandbox import nested, report, state
from ai_sandbox.errors import PolicyError
from ai_sandbox.launch import Request, SlowNotice, prepare


def run(req: Request) -> int:
    with SlowNotice():
        prepared = prepare(req, detail=True, assume=True)
    table = nested.mounts()
    try:
        state.check(prepared.policy, req.env, seen=prepared.seen)
        refusal = None
    except PolicyError as e:
        refusal = str(e)
    report.dry_run(
        prepared, req, nested.unenforced(prepared.policy, table) if nested.inside_sandbox(table) else None, refusal
    )
    return 0
