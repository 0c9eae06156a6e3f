"""Every git call ai-sandbox makes, and the parsing of git's NUL-separated output: run.py runs git (hardened, timed),
repo.py finds the repository and its other checkouts, listing.py lists a work tree, log.py walks the history. This
package gives what the rest of ai-sandbox imports; its modules import each other, never it.
"""

from __future__ import annotations

from ai_sandbox.git.listing import (
    Scan,
    attribute_files,
    filter_attributes,
    ignore_rules,
    ignored_among,
    ignores,
    index_entries,
    indexed_blob,
    scan,
    stash_ids,
    stashed_untracked,
)
from ai_sandbox.git.log import (
    HISTORY_TIMEOUT,
    HistoryError,
    blob_changes,
    refs_containing,
    stored_blobs,
    unreachable_commits,
)
from ai_sandbox.git.repo import (
    Repo,
    find_repo,
    nested_repo,
    other_checkouts,
    repos_below,
    untracked_below,
)
from ai_sandbox.git.run import TIMEOUT, GitTimeout, git_dir_of, git_output, index_write
from ai_sandbox.gitcommand import QUICK, REPO_VARIABLES

__all__ = [
    "attribute_files",
    "blob_changes",
    "filter_attributes",
    "find_repo",
    "git_dir_of",
    "git_output",
    "GitTimeout",
    "HISTORY_TIMEOUT",
    "HistoryError",
    "ignore_rules",
    "ignored_among",
    "ignores",
    "index_entries",
    "index_write",
    "indexed_blob",
    "nested_repo",
    "other_checkouts",
    "QUICK",
    "refs_containing",
    "Repo",
    "REPO_VARIABLES",
    "repos_below",
    "Scan",
    "scan",
    "stash_ids",
    "stashed_untracked",
    "stored_blobs",
    "TIMEOUT",
    "unreachable_commits",
    "untracked_below",
]
