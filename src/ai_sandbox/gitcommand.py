"""The git command line and environment of every git call, and the questions a launch asks git first: a module
of its own, light to import, so that the `ai-sandbox` command starts git's walk of the project before it imports
the rest of itself (prefetch.py). git/run.py runs git with these."""

from __future__ import annotations

import os
from collections.abc import Mapping

from ai_sandbox import tools

# Read-only calls must not run code a cloned repository configured (fsmonitor hooks).
# Every git call runs outside the sandbox, on a repository the agent can write: nothing the repository
# configures may run code here. No fsmonitor daemon, and no hooks: `update-index` (skipworktree.py) runs
# the post-index-change hook, from .git/hooks or core.hooksPath (a red team read every secret that way).
GIT = (
    tools.find("git") or "/usr/bin/git",
    "-c",
    "core.fsmonitor=false",
    "-c",
    "core.hooksPath=/dev/null",
    # No transport at all: in a partial clone a missing object makes git fetch it, running the command a
    # repository names (remote.*.uploadpack) — a red team ran code outside the sandbox that way.
    "-c",
    "protocol.allow=never",
    "--no-optional-locks",
)
# ...and no transport whatever the repository's config says: `-c protocol.allow=never` loses to a repository's
# `protocol.ext.allow = always` (a protocol's own key wins), and a partial clone's lazy fetch of a missing object
# then ran its `ext::<command>` remote, outside the sandbox (twenty-third red team: a hidden .env copied out).
# GIT_ALLOW_PROTOCOL overrides every protocol.* key; GIT_NO_LAZY_FETCH (git 2.39.4 and later) stops the fetch.
FIXED_ENV = {"GIT_ALLOW_PROTOCOL": "none", "GIT_NO_LAZY_FETCH": "1"}


def hardened(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of every git call: the caller's (or this process's), with no transport."""
    return {**(os.environ if env is None else env), **FIXED_ENV}


def argv(args: list[str], cwd: str) -> list[str]:
    """The whole command: hardened git, run in cwd (`-C`: what git does first, as a chdir before it would; a relative
    cwd starts with ./, never with a dash git would read as an option)."""
    return [*GIT, "-C", cwd if cwd.startswith("/") else "./" + cwd, *args]


# Variables that change which repository, work tree or index git uses. ai-sandbox's own git calls and the
# agent's git both inherit them, so the policy must describe the tree they select — or refuse (git/repo.py).
REPO_VARIABLES = (
    "GIT_DIR", "GIT_WORK_TREE", "GIT_COMMON_DIR", "GIT_INDEX_FILE", "GIT_CEILING_DIRECTORIES",
    "GIT_DISCOVERY_ACROSS_FILESYSTEM", "GIT_OBJECT_DIRECTORY", "GIT_NAMESPACE",
)  # fmt: skip

QUICK = 20.0  # seconds: the first question of a launch (which repository is this?), answered in milliseconds

# Which work tree holds a directory, and its git directory shared by linked worktrees (git/repo.py).
WHERE = ["rev-parse", "--show-toplevel", "--git-common-dir"]

# What git lists of a work tree (git/listing.py's scan): ignored entries, untracked ones, the index.
SCAN = {
    "ignored": ["ls-files", "-z", "--others", "--ignored", "--exclude-standard", "--directory"],
    "untracked": ["ls-files", "-z", "--others", "--exclude-standard", "--directory"],
    # -t: S tags a skip-worktree entry; -v: a lowercase tag an assume-unchanged one (s: both), read at the end
    "index": ["ls-files", "-z", "--stage", "-t", "-v"],
}


def scan_env() -> dict[str, str]:
    """git's environment for the scan, with its messages untranslated (they are read) and no trace
    output (GIT_TRACE=1 writes to stderr, which would read as an unexpected message)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_TRACE")}
    env["LC_ALL"] = "C"
    return hardened(env)
