"""Write containment's rules (writes.py), pure: which places, in which order, the most specific deciding."""

from __future__ import annotations

from ai_sandbox import writes


def _plan(**kw: object) -> writes.Writes:
    args: dict[str, object] = dict(
        confine=True,
        whole_system=False,
        homes=["/home/u"],
        root="/home/u/src/p",
        git_dirs=["/home/u/src/p/.git"],
        state=[("~/.claude/", "profile claude"), ("~/.claude.json", "profile claude"), ("~/.claude.json.*", "x")],
        writable=[],
        exists=lambda p: not p.endswith((".npm", ".idea")),
        on_path=lambda tool: False,
        resolve=lambda p: p,
    )
    args.update(kw)
    return writes.plan(**args)  # type: ignore[arg-type]


def test_off_means_no_rule():
    w = _plan(confine=False)
    assert not w.confined and w.places == [] and w.writable("/home/u/.bashrc")


def test_a_user_the_home_read_only_the_work_writable_the_hooks_not():
    w = _plan()
    assert not w.writable("/home/u/.bashrc") and not w.writable("/home/u/.local/bin/git")
    assert w.writable("/home/u/src/p/a.py") and w.writable("/home/u/src/p/.git/config")
    assert not w.writable("/home/u/src/p/.git/hooks/pre-commit")
    assert w.writable("/home/u/.claude/settings.json") and w.writable("/home/u/.claude.json")
    assert not w.writable("/home/u/.claude.json.tmp.1")  # a glob entry names no one path
    assert w.writable("/home/u/.cache/pip/x") and not w.writable("/home/u/.npm/x")  # missing, its tool absent
    assert w.writable("/tmp/x") and w.writable("/etc/x")  # a user under firejail: file modes protect the system
    assert "/tmp" not in [p.path for p in w.places]  # nothing read-only above it: no rule
    assert w.anchors == ["/home/u/src/p", "/home/u/src/p/.git"]  # .vscode's and the hooks' directories


def test_the_whole_system_for_root_or_bwrap():
    w = _plan(whole_system=True, homes=["/root"], root="/srv/p", git_dirs=["/srv/p/.git"])
    assert w.places[0] == writes.Place("/", False, "built-in: the system")
    assert not w.writable("/etc/ld.so.preload") and not w.writable("/usr/local/bin/x")
    assert w.writable("/tmp/x") and w.writable("/dev/shm/x") and w.writable("/srv/p/x")


def test_a_home_under_tmp_stays_read_only_the_more_specific_place_wins():
    w = _plan(whole_system=True, homes=["/tmp/t/home"], root="/tmp/t/repo", git_dirs=["/tmp/t/repo/.git"])
    assert w.writable("/tmp/t/x") and not w.writable("/tmp/t/home/.bashrc") and w.writable("/tmp/t/repo/x")
    assert w.writable("/tmp/t/home/.cache/x")


def test_missing_places_are_made_only_when_their_tool_is_there():
    w = _plan(exists=lambda p: False, on_path=lambda tool: tool == "npm")
    assert "/home/u/.npm" in w.make and "/home/u/.claude" in w.make and "/home/u/.cache" in w.make
    assert "/home/u/.cargo/registry" not in w.make and "/home/u/.claude.json" not in w.make  # a file: not made
    assert "/home/u/src/p/.vscode" not in [p.path for p in w.places]  # missing: not protected (a documented gap)


def test_the_users_writable_and_the_steps_order():
    w = _plan(writable=[("/home/u/tools/cache", "user config (config.toml:1)")])
    assert w.writable("/home/u/tools/cache/x") and not w.writable("/home/u/tools/x")
    steps = w.steps(["/home/u/.local"])
    paths = [p for _, p in steps]
    # outermost first, each anchor before the places inside it
    assert paths.index("/home/u") < paths.index("/home/u/src/p") < paths.index("/home/u/src/p/.git/hooks")
    assert steps.index(("anchor", "/home/u/src/p/.git")) < steps.index(("ro", "/home/u/src/p/.git/hooks"))
    assert ("anchor", "/home/u/.local") in steps


def test_the_protected_wins_over_a_writable_entry_naming_the_same_path():
    w = _plan(writable=[("/home/u/src/p/.git/hooks", "user config (config.toml:1)")])
    assert not w.writable("/home/u/src/p/.git/hooks/x")


def test_a_project_that_is_the_home_leaves_the_home_read_only():
    """A launch from ~ outside git (or a dotfiles repository at ~): the rc files stay read-only; its git directory
    is writable."""
    w = _plan(root="/home/u", git_dirs=["/home/u/.git"])
    assert not w.writable("/home/u/.bashrc") and w.writable("/home/u/.git/index")
    assert not w.writable("/home/u/.git/hooks/x")


def test_a_submodules_hooks_are_read_only_too():
    w = _plan(modules=["/home/u/src/p/.git/modules/lib"])
    assert not w.writable("/home/u/src/p/.git/modules/lib/hooks/pre-commit")
    assert w.writable("/home/u/src/p/.git/modules/lib/index")


def test_a_git_directory_that_is_a_home_or_no_git_directory_is_never_writable():
    for git in ("/home/u", "/", "/home"):
        w = _plan(git_dirs=[git], whole_system=True)
        assert not w.writable("/home/u/.bashrc") and not w.writable("/etc/x")
    w = _plan(git_dirs=["/etc"], whole_system=True, exists=lambda p: not p.startswith("/etc/"))
    assert not w.writable("/etc/ld.so.preload")


def test_a_cache_or_state_linked_out_of_the_home_is_not_opened():
    """An unconfined session could plant `~/.npm -> /etc`: the next confined launch must not open /etc."""
    links = {"/home/u/.npm": "/etc", "/home/u/.claude": "/home/u/dotfiles/claude", "/home/u/w": "/srv/w",
             "/home/u/.cache/claude": "/home/u/.local/bin"}  # fmt: skip
    w = _plan(
        whole_system=True,
        exists=lambda p: True,
        resolve=lambda p: links.get(p, p),
        writable=[("/home/u/w", "user config"), ("/home/u/all", "user config")],
    )
    assert not w.writable("/etc/ld.so.preload") and not w.writable("/home/u/.npm/x")
    assert not w.writable("/home/u/dotfiles/claude/settings.json")  # never through a link: `writable` names it
    assert w.writable("/srv/w/x")  # the user's own `writable`, wherever it leads
    # a link inside a writable place (the agent could have made it) is never followed
    w = _plan(whole_system=True, exists=lambda p: True, resolve=lambda p: links.get(p, p),
              state=[("~/.cache/claude/", "profile claude")])  # fmt: skip
    assert not w.writable("/home/u/.local/bin/git")
