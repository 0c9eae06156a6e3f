"""unwritten.py's reading of the stash list without a sandbox: only real object ids are taken from it (the session
can write the reflog: eighteenth red team)."""

from __future__ import annotations

from ai_sandbox import unwritten

SHA1 = "a" * 40
SHA256 = "b" * 64


def _line(new: str) -> bytes:
    return b"%s %s t <t@e> 1700000000 +0000\tWIP on main: x\n" % (b"0" * 40, new.encode())


def test_the_stash_list_gives_object_ids_only():
    forged = [
        "refs/s/$(touch${IFS}/tmp/PWNED)" + "0" * 40,  # a ref name that runs code when pasted
        "refs/s/x" + "0" * 40 + "^{/\x1b[3A\r}",  # a revision with terminal escapes
        "A" * 40,  # not lower-case hex
        "a" * 41,
    ]
    log = b"".join(_line(x) for x in [SHA1, *forged, SHA256])
    assert unwritten._commits(log) == [SHA1, SHA256]


def test_a_line_git_skips_is_skipped():
    """Twentieth red team: `junk <id> junk` named a popped stash as still there; git reads only whole entries."""
    log = b"junk %s junk\n" % SHA1.encode() + b"%s %s t <t@e> notatime +0000\tx\n" % (b"0" * 40, SHA1.encode())
    assert unwritten._commits(log) == []
    assert unwritten._commits(_line(SHA1).rstrip(b"\n").split(b"\t")[0] + b"\n") == [SHA1]  # no message: git takes it
