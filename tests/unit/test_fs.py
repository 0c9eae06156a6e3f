"""fs.write_files: generated files are named by their content's hash, so the cache must not only grow."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time

from hypothesis import given, settings
from hypothesis import strategies as st

from ai_sandbox import fs


def test_a_new_generated_file_removes_those_of_its_kind_no_launch_used_for_a_day(tmp_path):
    old, used, other_kind = tmp_path / "check-old", tmp_path / "check-used", tmp_path / "firejail-old.profile"
    for p in (old, used, other_kind):
        p.write_bytes(b"x")
        os.utime(p, (time.time() - 2 * fs.GENERATED_AGE,) * 2)
    fs.write_files({str(used): b"x"})  # reused by a launch: touched
    fs.write_files({str(tmp_path / "check-new"): b"new"})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["check-new", "check-used", "firejail-old.profile"]


# fs.realpaths: the launch and the watcher resolve thousands of directories that share their ancestors; each
# directory is looked at once. Its answers must be os.path.realpath's, whatever links a session left in the tree.
_NAMES = ["a", "b", "c", ".", ".."]


@settings(max_examples=200, deadline=None)
@given(
    dirs=st.lists(st.lists(st.sampled_from(["a", "b", "c"]), min_size=1, max_size=3), max_size=6),
    links=st.lists(
        st.tuples(
            st.lists(st.sampled_from(["a", "b", "c"]), min_size=1, max_size=3),
            st.lists(st.sampled_from(_NAMES), min_size=0, max_size=4),
            st.booleans(),
        ),
        max_size=6,
    ),
    asked=st.lists(st.lists(st.sampled_from(_NAMES), min_size=0, max_size=5), min_size=1, max_size=12),
)
def test_realpaths_answers_as_os_realpath_does(dirs, links, asked):
    """Directories, links (relative or absolute, chained, dangling, looping, through `..`) and the paths asked,
    in any order and with `.` and `..` in them: the remembered answers are os.path.realpath's."""
    # five levels down a directory of its own, removed after each example: a link's `..` cannot reach pytest's
    # own temporary tree (a loop there broke its cleanup)
    scratch = tempfile.mkdtemp()
    try:
        top = os.path.join(scratch, "x", "x", "x", "x", "x")
        os.makedirs(top)
        for d in dirs:
            os.makedirs(os.path.join(top, *d), exist_ok=True)
        for where, target, absolute in links:
            path = os.path.join(top, *where)
            to = "/".join(target) or "."
            with contextlib.suppress(OSError):  # its directory may be a link that leads nowhere, or a file
                os.makedirs(os.path.dirname(path), exist_ok=True)
                os.symlink(os.path.join(top, to) if absolute else to, path)
        real = fs.realpaths()
        for parts in asked:
            p = os.path.join(top, *parts)
            assert real(p) == os.path.realpath(p), p
    finally:
        shutil.rmtree(scratch)


def test_realpaths_answers_as_os_realpath_does_below_a_link_that_loops(tmp_path):
    """A link met again while it is being resolved (`b -> b/..`) has no answer of its own: the kernel says
    ELOOP, and os.path.realpath gives back what it had not resolved, so its answer for `b/a` is not the answer
    for `b` followed by `a`. Below such a link each path is os.path.realpath's, asked whole (hypothesis found
    `a -> .`, `b -> b/..`: `b/a` was answered `<top>`, os.path.realpath says `<top>/a`)."""
    top = tmp_path / "x"
    top.mkdir()
    (top / "a").symlink_to(".")
    (top / "b").symlink_to("b/..")
    real = fs.realpaths()
    for asked in ("b", "b/a", "b/b", "b/a/a", "a/b", "a/b/a", "b/c/d", "a"):
        p = str(top / asked)
        assert real(p) == os.path.realpath(p), asked


def test_realpaths_answers_as_os_realpath_does_below_a_link_the_kernel_finds_no_end_of(tmp_path):
    """Below a link the kernel fails on with ENOENT, where os.path.realpath meets a loop (`b -> nope/../a`,
    `a -> b/..`: the kernel stops at the missing `nope`), each path is asked whole too (a red team's helper
    found `b/a` answered `<top>`, os.path.realpath says `<top>/a`)."""
    top = tmp_path / "x"
    top.mkdir()
    (top / "b").symlink_to("nope/../a")
    (top / "a").symlink_to("b/..")
    (top / "x").mkdir()
    (top / "x" / "f").write_text("")
    real = fs.realpaths()
    for asked in ("b", "b/x/f", "b/a", "a", "a/x", "a/b/x/f", "x/f"):
        p = str(top / asked)
        assert real(p) == os.path.realpath(p), asked
