"""The dynamic layer's git-crypt part: files git-crypt encrypts, and the key that decrypts them.

Encrypted files are found by their `filter=git-crypt*` attribute, which is what `git crypt status` reads
too; asking git for it works without git-crypt installed and without parsing its human-oriented output.
With the key directory readable, `git show HEAD:f | git-crypt smudge` would decrypt the history.
"""

from __future__ import annotations

import os

from ai_sandbox import project
from ai_sandbox.policy import CRYPT, Entry


def entries(root: str, prefix: str, scan: project.Scan) -> list[Entry]:
    out = []
    key_dir = os.path.join(scan.repo.common_dir, "git-crypt")
    if os.path.isdir(key_dir):
        out.append(Entry(key_dir, True, CRYPT, "git-crypt key directory"))
    if not _mentions_git_crypt(project.attribute_files(scan)):
        return out
    for rel, value in project.filter_attributes(scan.repo).items():
        if value.startswith("git-crypt"):
            out.append(
                Entry(os.path.join(root, prefix + rel), False, CRYPT, f"encrypted by git-crypt (filter={value})")
            )
    return out


def _mentions_git_crypt(files: list[str]) -> bool:
    for path in files:
        try:
            with open(path, "rb") as f:
                if b"git-crypt" in f.read():
                    return True
        except FileNotFoundError:
            continue
        except OSError:
            return True  # unreadable attributes: ask git rather than assume none
    return False
