"""Which git settings a session may change (gitsettings.py): the keys git writes in ordinary work, and none
that runs a program or pulls config from a file."""

from __future__ import annotations

import pytest

from ai_sandbox.gitsettings import put_back, ranked, safe, safe_key

# git's keys that run a program, or redirect what git reads or runs (Documentation/config/*.txt, 2.39-2.47)
RUN = [
    "core.fsmonitor", "core.hookspath", "core.pager", "pager.log", "core.editor", "sequence.editor",
    "core.sshcommand", "core.gitproxy", "core.askpass", "core.worktree", "core.alternaterefscommand",
    "credential.helper", "credential.https://example.com.helper", "diff.external", "interactive.difffilter",
    "remote.origin.uploadpack", "remote.origin.receivepack", "remote.origin.vcs", "protocol.ext.allow",
    "url.ext::sh -c x #.insteadof", "url.x.pushinsteadof", "include.path", "includeif.gitdir:/x/.path",
    "includeif.onbranch:*.path", "gpg.program", "gpg.ssh.program", "gpg.ssh.defaultkeycommand",
    "gc.recentobjectshook", "alias.st", "filter.x.clean", "filter.lfs.process", "diff.x.textconv",
    "diff.x.command", "merge.x.driver", "difftool.x.cmd", "mergetool.x.cmd", "browser.x.cmd", "web.browser",
    "man.x.cmd", "guitool.x.cmd", "imap.tunnel", "sendemail.smtpserver", "sendemail.cccmd",
    "sendemail.headercmd", "submodule.x.update", "trailer.x.cmd", "trailer.x.command", "commit.gpgsign",
    "http.proxy", "core.hookspath",
]  # fmt: skip

ORDINARY = [
    "core.repositoryformatversion", "core.filemode", "core.bare", "core.logallrefupdates",
    "remote.origin.url", "remote.origin.fetch", "remote.my.fork.pushurl", "branch.main.remote",
    "branch.feat/x.merge", "user.email", "user.name", "submodule.lib.url", "submodule.lib.active",
    "extensions.worktreeconfig", "lfs.repositoryformatversion", "lfs.https://h/r.git/info/lfs.access",
    "pull.rebase", "push.autosetupremote", "init.defaultbranch", "advice.detachedhead",
]  # fmt: skip


@pytest.mark.parametrize("key", RUN)
def test_a_key_that_runs_something_is_not_safe(key):
    assert not safe_key(key)


@pytest.mark.parametrize("key", ORDINARY)
def test_what_git_writes_in_ordinary_work_is_safe(key):
    assert safe_key(key)


def test_put_back_removes_what_the_session_added_and_never_adds_back():
    old = [("core.bare", "false"), ("alias.lg", "log"), ("include.path", "a"), ("include.path", "b")]
    new = [
        ("core.bare", "true"),  # safe: the session may
        ("include.path", "b"),
        ("include.path", "a"),  # reordered: both were the user's
        ("core.fsmonitor", "x"),  # added
        ("core.pager", "y"),  # added
        ("remote.o.url", "https://example.invalid/r.git"),  # safe
    ]  # alias.lg removed: stays removed
    assert put_back(old, new) == {"core.fsmonitor": [], "core.pager": []}
    assert put_back(old, old) == {}
    assert put_back([], [("alias.x", None)]) == {"alias.x": []}
    assert put_back([("include.path", "a")], [("include.path", "a"), ("include.path", "c")]) == {"include.path": ["a"]}


@pytest.mark.parametrize(
    ("url", "network"),
    [
        ("https://github.com/a/b.git", True),
        ("ssh://git@host/x", True),
        ("git@github.com:a/b.git", True),
        ("host.example:repo", True),
        ("git://host/x", True),
        ("/srv/repo.git", False),  # a push there runs its hooks, as you
        ("./.git/x.git", False),
        ("file:///srv/repo.git", False),
        ("ext::sh -c x", False),
        ("foo::bar", False),  # a remote helper: git-remote-foo
        ("C:/x", False),
        ("https:///x", False),
        # this machine by its name (twenty-seventh red team): a push over ssh runs its hooks as you all the same
        ("ssh://localhost/srv/x.git", False),
        ("ssh://me@LOCALHOST:22/x", False),
        ("ssh://[::1]/x", False),
        ("ssh://127.0.0.2/x", False),
        ("git@127.0.0.1:x.git", False),
        ("localhost:x.git", False),
        ("https://web.localhost/x", False),
        ("ssh://0.0.0.0/x", False),
        ("https://127.example.com/x", True),
    ],
)
def test_a_remote_url_is_safe_only_to_another_machine(url, network):
    assert safe("remote.origin.url", url) is network
    assert safe("remote.origin.pushurl", url) is network
    assert safe("submodule.x.url", url)  # cloned, never pushed to: its hooks never run


def test_the_line_names_what_runs_a_program_first():
    assert ranked(["junk.k0", "junk.k1", "core.fsmonitor", "alias.x", "user.x"])[:2] == ["core.fsmonitor", "alias.x"]


def test_a_work_tree_may_lead_only_into_the_project_outside_its_git_directory(tmp_path):
    from ai_sandbox.gitsettings import _in_work

    root = tmp_path / "p"
    (root / ".git" / "modules" / "lib").mkdir(parents=True)
    cfg = str(root / ".git" / "modules" / "lib" / "config")
    common = str(root / ".git")
    assert _in_work(cfg, "../../../lib", str(root), common)
    assert not _in_work(cfg, "../../../..", str(root), common)  # above the project
    assert not _in_work(cfg, "../../hooks", str(root), common)  # the hooks: a checkout plants them
    assert not _in_work(cfg, str(tmp_path / "home" / ".local" / "bin"), str(root), common)
    assert not _in_work(cfg, None, str(root), common)


def test_a_branch_may_name_only_a_remote_to_another_machine():
    """git takes a name that is no remote for a path: a push there runs that repository's hooks."""
    new = [
        ("remote.origin.url", "https://example.invalid/r.git"),
        ("branch.a.remote", "origin"),
        ("branch.b.remote", "."),
        ("branch.c.remote", ".git/x.git"),
        ("branch.d.pushremote", "/tmp/bare.git"),
        ("branch.e.remote", "mine"),
    ]
    old = [("remote.mine.url", "/srv/mine.git"), ("branch.e.remote", "mine")]
    assert put_back(old, new + [("remote.mine.url", "/srv/mine.git")]) == {
        "branch.c.remote": [],
        "branch.d.pushremote": [],
    }


def test_the_rewritten_config_is_read_by_git_as_meant():
    """_fixed writes the config out itself (no copy edited on disk, which a concurrent session swapped for a
    link): git must read back exactly the entries kept, whatever they hold."""
    from ai_sandbox.gitsettings import _entries, _fixed

    new = [
        ("core.bare", "false"),
        ('remote.a b\\"c.url', 'https://h/x "y" \\ z\ttab'),
        ('remote.a b\\"c.fetch', "+refs/heads/*:refs/remotes/o/*"),
        ("user.name", " lead and trail ; # "),
        ("core.fsmonitor", "evil"),
        ("branch.x.y.remote", "origin"),
        ("core.symlinks", None),
        ("user.email", "line\nbreak"),
    ]
    data = _fixed(new, {"core.fsmonitor": []})
    assert data is not None
    assert _entries(data) == [e for e in new if e[0] != "core.fsmonitor"]
