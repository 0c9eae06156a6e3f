"""What each kind of notice means, for people: docs/notices.md's table is generated from it (`make docs`).

A notice's `Kind` is what code decides on; this is only rendered. Every kind has one sentence here (a unit
test checks it): when the notice appears, and what to do about it. `LOUD` says which kinds a launch prints.
"""

from __future__ import annotations

from ai_sandbox.policy import LOUD, Kind

DESCRIPTION: dict[Kind, str] = {
    Kind.HISTORY: (
        "a hidden path's content is still readable through git: tracked now (`git show HEAD:path`), or an earlier "
        "version reachable from a branch, tag, stash or reflog entry, only in a dangling commit (a dropped stash), "
        "or stored in `.git/objects` in no commit (`git add`, then `reset`); the message names the commit, date "
        "and refs, and the remedy (`git filter-repo --invert-paths --path …`, or `git stash drop` / "
        "`git reflog expire --expire-unreachable=now --all && git gc --prune=now`): rotate the secret too"
    ),
    Kind.HARDLINK: (
        "a hidden file has other hard links, and its content is readable under those names: remove the other "
        "links, or hide them too"
    ),
    Kind.SYMLINK: (
        "an ignored symlink points outside the project (its target is hidden), or at a project file that is not "
        "ignored (which stays readable): hide that file too if the link was meant to protect it"
    ),
    Kind.WIDENED: (
        "a name the backend cannot express: its parent directory is hidden instead, with whatever else is in it; "
        "rename the file, or use the bwrap backend, which names every path exactly"
    ),
    Kind.NEVER_MASKED: (
        "a path resolves to public system content (`/usr`, `/nix/store`), your home or a directory above it or "
        "the project, which are never masked: it is readable inside; point the link elsewhere if that matters"
    ),
    Kind.CAPPED: (
        "more paths to hide than the backend can mount (`max_masks`): directories holding many of them are "
        "hidden whole, with whatever was readable in them (`--dry-run` marks each `widened: over the mask "
        "limit`); ignore such files by directory, or raise `max_masks`"
    ),
    Kind.ALLOWED_BUT_HIDDEN: (
        "an allowed path lies inside a widened mask, so it stays hidden although allowed: `--dry-run` shows the "
        "mask and why it widened; rename the name that widened it, use the bwrap backend, or raise `max_masks` "
        "when the mask limit did"
    ),
    Kind.UNLISTABLE: (
        "a directory that had to be split (an allowed path inside it) could not be listed, so it is hidden whole: "
        "make it readable to you, or drop the `allow` entry inside it"
    ),
    Kind.CONFIG: (
        "a problem with the project's config files, such as both `.ai-sandbox.toml` and a legacy `.ai-sandbox`: "
        "both apply; delete the legacy file once `ai-sandbox init` has migrated it"
    ),
    Kind.NOT_GIT: (
        "not in a git work tree: the current directory is the project root and only your global blocks apply; "
        "start from inside the repository, or `git init` it"
    ),
    Kind.CWD_HIDDEN: (
        "the current directory is hidden, so the agent starts in a masked, empty directory: start from a "
        "directory the rules leave readable"
    ),
    Kind.UNHIDDEN: (
        "a path an earlier launch hid is readable now (a rule changed, or a directory above it moved), and a "
        "launch refuses until `ai-sandbox accept`: check with `ai-sandbox explain PATH` that the change is yours "
        "first"
    ),
    Kind.HIDDEN_EDIT: (
        "a hidden tracked file has changes you have not staged: git inside takes the index's copy of it, so "
        "`git commit -a` or `git stash` there leaves your changes out (they stay on your disk, and `git status` "
        "shows them after the session), where the same command outside would record them; commit or stash them "
        "before the launch if the agent's work must hold them"
    ),
}


def table() -> str:
    """docs/notices.md's table of kinds, in the order of `Kind`: whether the launch prints it, what it means."""
    rows = ["| kind | printed at launch | meaning |", "| --- | --- | --- |"]
    for kind in Kind:
        rows.append(f"| `{kind}` | {'yes' if kind in LOUD else 'no'} | {DESCRIPTION[kind]} |")
    return "\n".join(rows) + "\n"
