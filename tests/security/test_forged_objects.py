"""What a session forges in git's object store or in the caches git keeps in its index to hide a staged edit from
the user's own git (fiftieth red team, F1 and F2): after the session, the user's `git status` shows the edit, or
git fails loudly; it never comes out clean with `commit -a` carrying the edit. Through the real sandbox, on each
backend, as root and as a user."""

from __future__ import annotations

import os
import subprocess

import pytest

from tests.conftest import BACKENDS  # noqa: F401 (each test runs once per backend)
from tests.security.test_git_settings import _outside_git

pytestmark = pytest.mark.sandbox

# the session's edit staged in d/a.txt; then HEAD's subtree d's loose object rewritten with the staged subtree's
STAGE = "echo evil >> d/a.txt && git add d/a.txt && old=$(git rev-parse HEAD:d) && new=$(git write-tree --prefix=d/)"
PATHS = "o=.git/objects/$(echo $old | cut -c1-2)/$(echo $old | cut -c3-); n=.git/objects/$(echo $new | cut -c1-2)/$(echo $new | cut -c3-)"
SWAP = f"{STAGE} && {PATHS} && chmod u+w $o && cp $n $o.tmp && mv -f $o.tmp $o"


def _repo(ws, packed: bool = False) -> None:
    ws.git("init", "-q")
    ws.write("d/a.txt", "a\n")
    ws.write("t.txt", "t\n")
    ws.git("add", ".")
    ws.git("commit", "-qm", "init")
    if packed:
        ws.git("gc", "-q")


def _not_hidden(ws) -> None:
    """The user's git shows the staged edit, or fails (it cannot read what the forgery hid)."""
    st = _outside_git(ws, "status", "--porcelain", "-uno")
    assert st.returncode != 0 or st.stdout.splitlines() == ["M  d/a.txt"], (st.stdout, st.stderr)
    diff = _outside_git(ws, "diff", "HEAD")
    assert diff.returncode != 0 or "+evil" in diff.stdout, diff.stdout


def test_a_subtree_object_rewritten_with_the_staged_one_is_removed(ws):
    """Fiftieth red team, F1: git checks no hash when it reads a subtree, so HEAD's subtree object rewritten with the
    staged subtree's made the user's `git status` and `git diff HEAD` clean, and `commit -a` carried the edit."""
    _repo(ws)
    res = ws.run("--", "sh", "-c", f"{SWAP} && git status --porcelain -uno && echo done")
    assert res.rc == 0 and res.out == "done\n", (res.out, res.err)  # inside, git shows nothing staged
    _not_hidden(ws)
    assert "missing tree" in _outside_git(ws, "fsck").stdout  # git says what the forgery destroyed
    said = [line for line in res.err.splitlines() if "removed object files" in line]
    assert len(said) == 1 and "whose content is not the object their name says" in said[0], res.err


def test_a_forged_loose_copy_of_a_packed_object_is_removed(ws):
    """The same forgery over a packed repository: the forged loose file is removed, and git reads the pack's."""
    _repo(ws, packed=True)
    script = f"{STAGE} && {PATHS} && mkdir -p $(dirname $o) && cp $n $o && echo done"
    res = ws.run("--", "sh", "-c", script)
    assert res.rc == 0 and res.out == "done\n", (res.out, res.err)
    assert _outside_git(ws, "status", "--porcelain", "-uno").stdout.splitlines() == ["M  d/a.txt"]
    assert _outside_git(ws, "fsck").returncode == 0
    assert "removed object files" in res.err


def test_a_forged_object_moved_in_with_its_directory_is_removed(ws):
    """A directory moved into the object store keeps its files' change times: a forged object planted before the
    launch (an earlier session's file in the work tree) and moved in with its directory is read too."""
    _repo(ws)
    old = ws.git("rev-parse", "HEAD:d").strip()
    ws.write("d/a.txt", "a\nevil\n")
    ws.git("add", "d/a.txt")
    new = ws.git("write-tree", "--prefix=d/").strip()
    forged = (ws.repo / ".git" / "objects" / new[:2] / new[2:]).read_bytes()
    ws.git("reset", "-q")
    ws.write("d/a.txt", "a\n")
    (ws.repo / "stash" / old[:2]).mkdir(parents=True)
    (ws.repo / "stash" / old[:2] / old[2:]).write_bytes(forged)
    os.chmod(ws.repo / "stash", 0o777)  # the session's user moves it
    os.chmod(ws.repo / "stash" / old[:2], 0o777)
    script = (
        f"echo evil >> d/a.txt && git add d/a.txt && rm -rf .git/objects/{old[:2]} && "
        f"mv stash/{old[:2]} .git/objects/ && git status --porcelain -uno && echo done"
    )
    res = ws.run("--", "sh", "-c", script)
    assert res.rc == 0 and res.out == "done\n", (res.out, res.err)
    _not_hidden(ws)
    assert "removed object files" in res.err, res.err


def test_a_link_in_the_object_store_is_removed_not_followed(ws):
    """A fan-out directory the session made a link to a directory of its own (git follows it): the link goes, and
    nothing where it leads is touched."""
    _repo(ws)
    old = ws.git("rev-parse", "HEAD:d").strip()
    script = (
        f"{STAGE} && {PATHS} && mkdir -p lead && cp $n lead/{old[2:]} && mv .git/objects/{old[:2]} moved && "
        f"ln -s $PWD/lead .git/objects/{old[:2]} && git status --porcelain -uno && echo done"
    )
    res = ws.run("--", "sh", "-c", script)
    assert res.rc == 0 and res.out == "done\n", (res.out, res.err)
    _not_hidden(ws)
    assert (ws.repo / "lead" / old[2:]).is_file()  # not through the link
    assert not os.path.lexists(ws.repo / ".git" / "objects" / old[:2])
    assert "removed object files" in res.err, res.err


# The index's cached-tree extension (TREE) rewritten so that every tree it names is HEAD's, its checksum made anew
FORGE_TREE = r"""
import hashlib, os, struct, subprocess
git = lambda *a: subprocess.run(["git", *a], capture_output=True, text=True, check=True).stdout.strip()
index = os.environ.get("INDEX", ".git/index")
data = bytearray(open(index, "rb").read())
i = data.find(b"TREE", 12)
size = struct.unpack(">I", data[i + 4 : i + 8])[0]
body, out, p = bytes(data[i + 8 : i + 8 + size]), bytearray(), 0
def walk(prefix):
    global p, out
    z = body.index(b"\0", p); name = body[p:z].decode(); p = z + 1
    nl = body.index(b"\n", p); count, subs = body[p:nl].split(b" "); p = nl + 1
    full = f"{prefix}/{name}".strip("/") if name else prefix
    out += name.encode() + b"\0" + count + b" " + subs + b"\n"
    if int(count) >= 0:
        out += bytes.fromhex(git("rev-parse", f"HEAD:{full}" if full else "HEAD^{tree}")); p += 20
    for _ in range(int(subs)):
        walk(full)
walk("")
data[i + 8 : i + 8 + size] = out
data[-20:] = hashlib.sha1(bytes(data[:-20])).digest()
open(index, "wb").write(data)
"""


@pytest.mark.parametrize("hiding", ["", "t.txt"], ids=["no-tracked-hidden", "a-tracked-file-hidden"])
def test_the_index_cached_trees_forged_to_heads_are_dropped(ws, hiding):
    """Fiftieth red team, F2: the index's cached trees (which git trusts to skip a directory) set to HEAD's hid the
    staged edit below the top level from the user's `git status` and `git diff --cached`, and `commit -a` carried
    it. The end drops them; git writes them again at the next commit. With a tracked file hidden, the launch writes
    the index itself (its mark), and so does the end (the mark cleared): the session's write is still told apart."""
    _repo(ws)
    if hiding:
        ws.write(".ai-sandbox.toml", f'block = ["{hiding}"]\n')
    script = (
        'echo evil >> d/a.txt && git add d/a.txt && git write-tree >/dev/null && python3 -c "$FORGE_TREE" && '
        "git status --porcelain -uno && echo done"
    )
    res = ws.run("--", "sh", "-c", script, env={"FORGE_TREE": FORGE_TREE})
    assert res.rc == 0 and res.out == "done\n", (res.out, res.err)  # inside, git shows nothing staged
    assert _outside_git(ws, "status", "--porcelain", "-uno").stdout.splitlines() == ["M  d/a.txt"]
    assert "+evil" in _outside_git(ws, "diff", "--cached").stdout
    assert b"TREE" not in (ws.repo / ".git" / "index").read_bytes()
    assert "cached trees" not in res.err, res.err  # dropped silently: git's status now shows the edit
    assert _outside_git(ws, "commit", "-qm", "x").returncode == 0
    assert _outside_git(ws, "fsck").returncode == 0


@pytest.mark.parametrize("session", ["true", "cat d/a.txt && git log --oneline"])
def test_a_launch_that_hides_a_tracked_file_leaves_the_index_caches_alone(ws, session):
    """The launch's own writes of the index (a hidden tracked file's mark, set before the session and cleared after)
    are not the session's: the cached trees and the untracked cache git keeps there stay, as a control run of the
    same marks without the sandbox leaves them. The end took every such launch for a session that wrote the index:
    it dropped both caches (the user's next `git status` walked the whole tree again) and listed the index twice
    (0.43 s of a launch on the bench's 50,000-entry monorepo)."""
    _repo(ws)
    ws.write(".ai-sandbox.toml", 'block = ["t.txt"]\n')
    ws.git("config", "core.untrackedCache", "true")
    control = ws.base / "control"
    subprocess.run(["cp", "-a", str(ws.repo), str(control)], check=True)
    for args in (["status", "--porcelain"], ["update-index", "--skip-worktree", "t.txt"],
                 ["update-index", "--no-skip-worktree", "t.txt"]):  # fmt: skip
        ws.git(*args)
        ws.git(*args, cwd=control)
    index = ws.repo / ".git" / "index"
    assert b"TREE" in index.read_bytes() and b"UNTR" in index.read_bytes()  # git wrote both
    res = ws.run("--", "sh", "-c", session)
    assert res.rc == 0, res.err
    ws.git("update-index", "--skip-worktree", "t.txt", cwd=control)  # the launch's mark, then the end's clearing
    ws.git("update-index", "--no-skip-worktree", "t.txt", cwd=control)
    after, kept = index.read_bytes(), (control / ".git" / "index").read_bytes()
    assert (b"TREE" in after, b"UNTR" in after) == (b"TREE" in kept, b"UNTR" in kept) == (True, True), res.err
    assert "H t.txt" in _outside_git(ws, "ls-files", "-v").stdout.splitlines()  # the mark cleared
    assert "cached trees" not in res.err and "index" not in res.err, res.err


def test_an_index_a_session_made_a_link_is_refused_at_the_next_launch(ws):
    """Fifty-seventh red team: a session made .git/index a link to a copy, which git follows and writes through. The
    end cannot copy or rewrite a link, so the next session's forged cached trees outlived its end (two lines said,
    the user's git clean, the edit staged). The next launch now refuses, naming the index and how to put it back."""
    _repo(ws)
    res = ws.run("--", "sh", "-c", "cp .git/index .git/idx2 && ln -sf idx2 .git/index && echo done")
    assert res.rc == 0 and res.out == "done\n", (res.out, res.err)
    res = ws.run("--", "sh", "-c", "echo ran")
    assert res.rc == 65 and res.out == "", (res.out, res.err)
    [line] = [ln for ln in res.err.splitlines() if ln.startswith("ai-sandbox: error:")]
    assert f"{ws.repo}/.git/index is a link (to idx2)" in line and "cp --remove-destination" in line, res.err
    index = ws.repo / ".git" / "index"
    subprocess.run(["cp", "--remove-destination", "--", str(index.resolve()), str(index)], check=True)
    res = ws.run("--", "sh", "-c", "echo ran")
    assert res.rc == 0 and res.out == "ran\n", (res.out, res.err)


def test_a_nested_repository_replaced_by_a_copy_with_hooks_is_named(ws):
    """Fiftieth red team, F4: the session moved a nested repository away and put a copy of it, with a pre-commit hook
    of its own, at its path (the directory above a nested `.git` is no mount point); the user's next `git commit`
    there ran the hook, outside, and nothing was said. The end names the copy and where the original went."""
    _repo(ws)
    sub = ws.repo / "sub"
    sub.mkdir()
    ws.git("init", "-q", cwd=sub)
    ws.write("sub/s.txt", "s\n")
    ws.git("add", "s.txt", cwd=sub)
    ws.git("commit", "-qm", "s", cwd=sub)
    script = (
        "mv sub .sub-old && mkdir sub && cp -a .sub-old/.git sub/.git && cp .sub-old/s.txt sub/ && "
        "printf '#!/bin/sh\\necho planted\\n' > sub/.git/hooks/pre-commit && chmod +x sub/.git/hooks/pre-commit && "
        "echo done"
    )
    res = ws.run("--", "sh", "-c", script)
    assert res.rc == 0 and res.out == "done\n", (res.out, res.err)
    said = [line for line in res.err.splitlines() if "left another git repository" in line]
    assert len(said) == 1 and f"{ws.repo}/sub" in said[0] and ".sub-old" in said[0], res.err


def test_a_mark_and_cached_trees_forged_in_another_checkouts_index_are_undone(ws):
    """A session launched in a linked worktree can write the main checkout's index (it lies in the git directory the
    worktree's git needs): content of its own staged there, marked assume-unchanged, its cached trees set to HEAD's,
    came out of the user's next `commit -a` in the main checkout with `git status` clean. The end looks at every
    checkout of the repository, as at its own."""
    _repo(ws)
    wt = ws.base / "wt"
    ws.git("worktree", "add", "-q", str(wt))
    if ws.user:
        subprocess.run(["chown", "-R", f"{ws.user.uid}:{ws.user.gid}", str(wt)], check=True)
    script = (
        f"cd {ws.repo} && blob=$(echo planted | git hash-object -w --stdin) && "
        "git update-index --cacheinfo 100644,$blob,d/a.txt && git update-index --assume-unchanged d/a.txt && "
        'git write-tree >/dev/null && python3 -c "$FORGE_TREE" && git status --porcelain -uno && echo done'
    )
    res = ws.run("--", "sh", "-c", script, env={"FORGE_TREE": FORGE_TREE}, cwd=wt)
    assert res.rc == 0 and res.out == "done\n", (res.out, res.err)  # inside, the main checkout's git shows nothing
    assert _outside_git(ws, "status", "--porcelain", "-uno").stdout.splitlines() == ["MM d/a.txt"], res.err
    said = [line for line in res.err.splitlines() if "cleared git index marks" in line]
    assert len(said) == 1 and f"{ws.repo}," in said[0] and "assume-unchanged on d/a.txt" in said[0], res.err


SWAP_ADMIN = "cp -a {gd} {gd}.new && mv {gd} {gd}.old && mv {gd}.new {gd} && rm -rf {gd}.old"


def _worktree(ws):
    wt = ws.base / "wt"
    ws.git("worktree", "add", "-q", str(wt))
    if ws.user:
        subprocess.run(["chown", "-R", f"{ws.user.uid}:{ws.user.gid}", str(wt)], check=True)
    return wt


def test_a_linked_worktrees_git_directory_swapped_by_the_session_is_still_looked_at(ws):
    """Fifty-third red team, F2: from the main checkout, the session replaced `.git/worktrees/wt` (no mount point)
    with a copy, then staged content of its own in that copy's index, marked it and forged its cached trees: the end
    took the copy for another repository and skipped it, silently, and the user's `commit -a` in the worktree took
    the planted content. A git directory the session could make is looked at as the launch's, and named."""
    _repo(ws)
    wt = _worktree(ws)
    gd = ws.repo / ".git" / "worktrees" / "wt"
    script = (
        f"{SWAP_ADMIN.format(gd=gd)} && cd {wt} && blob=$(echo planted | git hash-object -w --stdin) && "
        "git update-index --cacheinfo 100644,$blob,d/a.txt && git update-index --assume-unchanged d/a.txt && "
        'git write-tree >/dev/null && INDEX=$(git rev-parse --git-dir)/index python3 -c "$FORGE_TREE" && echo done'
    )
    res = ws.run(
        "--",
        "sh",
        "-c",
        script,
        env={"FORGE_TREE": FORGE_TREE},
    )
    assert res.rc == 0 and res.out == "done\n", (res.out, res.err)
    st = subprocess.run(
        ["git", "-c", "safe.directory=*", "status", "--porcelain", "-uno"], cwd=wt, capture_output=True, text=True
    )
    assert st.stdout.splitlines() == ["MM d/a.txt"], (st.stdout, res.err)
    assert any(
        "is not the one the launch found" in ln and "looked at as the launch's" in ln for ln in res.err.splitlines()
    ), res.err
    assert any(
        "cleared git index marks" in ln and "assume-unchanged on d/a.txt" in ln for ln in res.err.splitlines()
    ), res.err


def test_a_session_that_swaps_its_own_worktrees_git_directory_is_still_checked(ws):
    """Fifty-third red team, F3: launched in a linked worktree, the session replaced its own `.git/worktrees/wt`
    with a copy, and every end check of that checkout was skipped: the forged subtree object (fiftieth red team, F1)
    hid its staged edit again. The repository's checks run whatever the checkout's git directory."""
    _repo(ws)
    wt = _worktree(ws)
    gd = ws.repo / ".git" / "worktrees" / "wt"
    swap = SWAP.replace(".git/objects", "$(git rev-parse --git-common-dir)/objects")
    res = ws.run("--", "sh", "-c", f"{SWAP_ADMIN.format(gd=gd)} && {swap} && echo done", cwd=wt)
    assert res.rc == 0 and res.out == "done\n", (res.out, res.err)
    st = subprocess.run(
        ["git", "-c", "safe.directory=*", "status", "--porcelain", "-uno"], cwd=wt, capture_output=True, text=True
    )
    assert st.returncode != 0 or st.stdout.splitlines() == ["M  d/a.txt"], (st.stdout, res.err)
    assert "removed object files" in res.err, res.err


def test_a_fifo_left_as_a_pack_index_is_removed_at_once(ws):
    """Fifty-third red team, F4: a FIFO as a pack's .idx held the end's `git verify-pack` for its whole budget
    (120 s), and stayed: the user's `git commit -a`, `fsck` and `gc` then hung on it. It is removed, and named."""
    _repo(ws, packed=True)
    script = "cd .git/objects/pack && cp $(ls pack-*.pack | head -1) pack-zz.pack && mkfifo pack-zz.idx && echo done"
    res = ws.run("--", "sh", "-c", script)
    assert res.rc == 0 and res.out == "done\n", (res.out, res.err)
    assert not os.path.lexists(ws.repo / ".git" / "objects" / "pack" / "pack-zz.idx")
    assert "pack/pack-zz.idx" in res.err and "did not finish" not in res.err, res.err
    proc = subprocess.run(["timeout", "20", "git", "-c", "safe.directory=*", "fsck"], cwd=ws.repo, capture_output=True)
    assert proc.returncode == 0, proc.stderr
