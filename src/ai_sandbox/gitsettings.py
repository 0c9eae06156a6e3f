"""The repository's git settings that would run a program in the user's own git later, outside the sandbox: what
a session added is removed once it ends, and named in one line.

The git directory stays writable inside: git writes its config in ordinary work (`git remote add`, `push -u`,
`branch --set-upstream-to`, `git config user.email`), so a read-only one breaks them (EBUSY, measured). But a key
such as `core.fsmonitor` runs a program on the user's next `git status`, `alias.x = !cmd` when they type it,
`include.path` pulls either from any file (issue 27's table: written inside, run outside). git has no list of
"safe" keys, and its list of keys that run something grows with each release (`gc.recentObjectsHook` in 2.42,
`sendemail.headerCmd` in 2.47): so the rule is the other way round. The keys git itself writes in ordinary work
(_SAFE; a remote's URL only to another machine) may change; a value of any other key the session added is removed.
Nothing is added back: a launch's look may hold what another session running meanwhile planted.

Looked at: the config files git reads for this checkout and the repositories in it (the common `config`, each
worktree's `config.worktree`, each submodule's wherever the index points, the files they include at the launch:
an include into the work tree is writable inside), and the files that point git elsewhere (`commondir` in any
git directory, a linked worktree's `.git` file, git's old `remotes/` files), and those of info/ that change what git
shows without a trace in `git status` (grafts, attributes), and `objects/info/alternates` (another object
directory: a forged commit-graph there hid an edit as one in the repository's did, forty-ninth red team F2). A
file the session replaced by something that is not a regular file, made unreadable to git, larger than LIMIT or
given more than MAX_KEYS settings is put back whole, the session's one moved aside beside it. Nothing is read
through a link the session made, nor written through one. The hooks the session put in a git directory it made (a submodule it added, whose
hooks/ was no read-only place at the launch) are renamed aside (_disable_hooks).
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat
import sys
from collections.abc import Callable

from ai_sandbox.fs import printable, shown
from ai_sandbox.records import factory, record

LIMIT = 1 << 20  # a config file larger than this is not parsed: put back whole
# files looked at: a bound against a session that makes thousands of git directories (a cap of 64 let 80 empty
# worktree directories push a new submodule's config out of the look); past it, the line says not all were
MAX_FILES = 4096
_INCLUDE_DEPTH = 10  # git's own limit on nested includes

# The keys git writes in ordinary work, none of which runs a program or names a file git reads as config (the
# section and the key's name lower-cased, as `git config --list` prints them; a subsection as written)
_SAFE = (
    r"core\.(repositoryformatversion|filemode|bare|logallrefupdates|symlinks|ignorecase|precomposeunicode"
    r"|sparsecheckout|sparsecheckoutcone|autocrlf|eol|safecrlf)"
    # not push or mirror: a plain `git push` of the user's then pushed a hidden ref of the session's to a branch of
    # the remote (fifty-fourth red team, F2)
    r"|remote\..+\.(url|pushurl|fetch|tagopt|prune|prunetags|promisor|partialclonefilter"
    r"|skipdefaultupdate|skipfetchall)"
    r"|branch\..+\.(remote|merge|rebase|pushremote|description)"
    r"|(user|author|committer)\.(name|email)"
    # not ignore: `all` hid a submodule commit of the session's from `git status` and `git diff`, and the user's
    # `commit -a` recorded it (fifty-fourth red team, F1)
    r"|submodule\..+\.(url|active|branch|shallow|fetchrecursesubmodules)"
    r"|extensions\.[^.]+"
    r"|lfs\.repositoryformatversion|lfs\..+\.access"
    # what git's own hints tell one to set (`git config pull.rebase false`, `advice.detachedHead false`)
    r"|pull\.(rebase|ff)|push\.(default|autosetupremote)|init\.defaultbranch|advice\.[^.]+"
)

Entries = list[tuple[str, str | None]]  # (key, value) as git lists them; None: a key without `=` (true)

# A remote's URL may change only to another machine's: a push to a repository on this one runs its hooks, as the
# user (a bare repository the session made in .git, with a pre-receive hook: twenty-fourth red team); a remote
# helper (`foo::…`) runs git-remote-foo
_URL_KEY = r"remote\..+\.(url|pushurl)"
_BRANCH_REMOTE = r"branch\..+\.(remote|pushremote)"
_NETWORK = r"(https?|ssh|git|git\+ssh|ssh\+git)://[^/\s]|([\w.+-]+@)?(\[[^]/]+\]|[\w.-]+):(?![/:])"
# info/grafts gives a commit other parents; info/attributes attributes no `git status` shows (`ident` reads whatever
# is between `$Id:` and `$` as nothing: code of the same size there was seen nowhere, forty-eighth red team)
_INFO = ("grafts", "attributes")
MAX_KEYS = 16  # past this many keys to remove, the file is put back whole (a git call each: 8,000 took a minute)
# the variables and sections that name a program or a file git reads: named first in the line
_RUNS = (
    r"(alias|include|includeif|filter|credential|url|protocol|difftool|mergetool|guitool|trailer)\..*"
    r"|.*\.(fsmonitor|hookspath|pager|editor|sshcommand|askpass|gitproxy|helper|program|cmd|command|textconv"
    r"|driver|clean|smudge|process|uploadpack|receivepack|external|worktree|proxy|path|recentobjectshook)"
)


def _full(pattern: str, text: str) -> bool:
    """re's own cache compiles each pattern once, at the session's end: never at import, on the launch path
    (2 ms)."""
    return re.fullmatch(pattern, text, re.DOTALL) is not None


def safe_key(key: str) -> bool:
    """A key git writes in ordinary work (_SAFE)."""
    return _full(_SAFE, key)


def safe(key: str, value: str | None) -> bool:
    """A setting the session may add: a key git writes in ordinary work, and a remote's URL to another machine."""
    if not safe_key(key):
        return False
    return not _full(_URL_KEY, key) or (value is not None and _another_machine(value))


def _another_machine(url: str) -> bool:
    """A URL to another machine: a network form, whose host is not this one by a name for it (a push to
    ssh://localhost runs the hooks there as you, like a path: twenty-seventh red team)."""
    if re.match(_NETWORK, url) is None:
        return False
    found = re.match(r"[\w+]+://(?:[^@/]*@)?(\[[^]]*\]|[^:/]*)", url) or re.match(
        r"(?:[\w.+-]+@)?(\[[^]/]+\]|[\w.-]+):", url
    )
    host = (found.group(1) if found else "").strip("[]").lower().rstrip(".")
    import socket

    return not (
        host in ("", "localhost", "::1", "::", "0.0.0.0", socket.gethostname().lower())
        or host.endswith(".localhost")
        or re.fullmatch(r"127(\.\d+){3}|::ffff:127(\.\d+){3}", host) is not None
    )


def put_back(old: Entries, new: Entries) -> dict[str, list[str | None]]:
    """The keys that hold a value now the launch did not see, each with what it keeps: its values the
    launch saw too, and the safe ones. Nothing is ever added back: a removed value stays removed (a session may delete, as it may
    delete a file), and a launch's look may hold what another session running meanwhile planted."""
    out: dict[str, list[str | None]] = {}
    # the remotes a branch may name: git takes any other name for a path (`branch.main.remote = .git/x.git`: the
    # user's plain `git push` ran the hooks of a bare repository made there, twenty-fifth red team)
    remotes = {
        name
        for k, v in new
        if k.startswith("remote.") and k.endswith(".url") and ((k, v) in old or safe(k, v))
        # a name git reads as a remote's (valid_remote_nick): with a slash it is a path (twenty-sixth red team)
        if (name := k[len("remote.") : -len(".url")]) not in ("", ".", "..") and not any(c in name for c in "/\\")
    }
    for key in dict.fromkeys(k for k, _ in new):
        before = [v for k, v in old if k == key]
        now = [v for k, v in new if k == key]
        keep = []
        for v in now:
            if v in before:
                before.remove(v)
                keep.append(v)
            elif safe(key, v) and (not _full(_BRANCH_REMOTE, key) or v == "." or v in remotes):
                keep.append(v)
        if len(keep) != len(now):
            out[key] = keep
    return out


def ranked(keys: list[str]) -> list[str]:
    """keys, those that name a program or a file first (a line of junk keys must not hide core.fsmonitor)."""
    return sorted(keys, key=lambda k: not _full(_RUNS, k))


@record
class Guarded:
    """One file git reads for this checkout, as the launch found it."""

    path: str  # the path git opens
    link: str | None  # a link of the user's there at the launch: its target; None: a file or nothing
    data: bytes | None  # what git read through it at the launch; None: nothing there (or not a regular file)
    config: bool  # a config file (its keys compared); else a pointer file (its bytes)
    where: str = ""  # its directory as the launch reached it (realpath); "": the path's own directory


@record
class Settings:
    """What the session's end compares with."""

    files: list[Guarded]
    common: str  # the git common directory: its submodules and worktrees are looked for again at the end
    roots: list[str]  # the work trees whose index is asked for submodules at the end: the root's first
    indexes: list[tuple[int, int, int] | None]  # each root's index file at the launch: one unchanged is not asked
    hidden: Callable[[str], bool]  # what the launch hid: never read, never written
    stopped: list[tuple[str, bytes | None]] = factory(list)  # a stopped rebase's state (_stopped), as at the launch
    existing: frozenset[str] = frozenset()  # the git directories there at the launch (their hooks/ was read-only)


def take(root: str, nested: list[str] | None = None, hidden: Callable[[str], bool] | None = None) -> Settings | None:
    """The launch's look at the checkout's git settings files, and those of the repositories inside it (nested:
    their roots; `git status` recurses into a submodule). None outside git. hidden: what the launch hides, never
    looked at (the session cannot change it; an include a session planted named .env: twenty-fifth red team)."""
    from ai_sandbox.git import git_dir_of

    own = git_dir_of(root)
    if not own:
        return None
    common = common_dir(own)
    files: list[Guarded] = []
    roots = [root, *(nested or [])]
    for r in roots[:MAX_FILES]:
        if r != root and not _ours(r, root, common):
            continue
        for path, config in _files_of(r):
            if not any(f.path == path for f in files):
                files.append(_look(path, config))
    for g in list(files):
        if g.config and g.data and b"include" in g.data.lower():
            _add_includes(files, g, 0, hidden or _nothing)
    shown = [f for f in files if not (hidden and hidden(f.path))]
    existing = {
        common,
        own,
        *submodule_dirs(os.path.join(common, "modules"), 0),
        *_subdirs(os.path.join(common, "worktrees")),
    }
    existing.update(d for r in roots[:MAX_FILES] if (d := git_dir_of(r)))
    return Settings(
        shown[:MAX_FILES], common, roots[:64], [index_look(r) for r in roots[:64]], hidden or _nothing,
        [(p, _read(p)[1]) for p in _stopped(own)], frozenset(os.path.realpath(d) for d in existing),
    )  # fmt: skip


def _stopped(own: str) -> list[str]:
    """The files of a stopped rebase or cherry-pick that name what `--continue` runs: the todo list's `exec`
    lines, a merge strategy (`git merge-<strategy>`, found anywhere git looks, a relative path included:
    twenty-sixth red team)."""
    merge = os.path.join(own, "rebase-merge")
    return [
        os.path.join(merge, "git-rebase-todo"),
        os.path.join(merge, "strategy"),
        os.path.join(own, "sequencer", "opts"),
    ]


def _nothing(path: str) -> bool:
    return False


def index_file(root: str) -> str:
    """The path of the work tree's index: in the git directory its `.git` names, else in its `.git`."""
    from ai_sandbox.git import git_dir_of

    return os.path.join(git_dir_of(root) or os.path.join(root, ".git"), "index")


def index_look(root: str) -> tuple[int, int, int] | None:
    """(inode, size, ctime) of the work tree's index: a session that wrote none added no submodule to it."""
    try:
        st = os.stat(index_file(root))
    except OSError:
        return None
    return st.st_ino, st.st_size, st.st_ctime_ns  # ctime: no session can set it back


def _ours(work: str, root: str, common: str) -> bool:
    """The git directory of the repository at work lies in the project or in its git directory: what ai-sandbox
    may rewrite. A `.git` file of a session's may name any directory (`gitdir: ~/.ssh`: the end rewrote the user's
    ~/.ssh/config and global git config, outside the project: twenty-sixth red team)."""
    from ai_sandbox.fs import inside
    from ai_sandbox.git import git_dir_of

    own = git_dir_of(work)
    return bool(own) and (inside(own, os.path.realpath(root)) or inside(own, common))


def _files_of(root: str, dotgit: bool = True) -> list[tuple[str, bool]]:
    """(path, is a config file) of what git reads to pick the settings of the work tree at root (dotgit: its
    `.git` file too; a submodule's the session made is git's own, and where it points is looked at)."""
    from ai_sandbox.git import git_dir_of

    own = git_dir_of(root)
    if not own:
        return []
    common = common_dir(own)
    out = [(p, False) for p in _pointer_paths(common, own)]
    if dotgit and not os.path.isdir(os.path.join(root, ".git")):
        out.append((os.path.join(root, ".git"), False))
    return out + [(p, True) for p in _config_paths(common, own)]


def restore(settings: Settings, pid: int) -> str | None:
    """Put back what the session changed that it may not (the module's docstring); the one line that says so,
    or None. Never raises: it runs as the session ends (the watcher, or the launch under a supervised backend)."""
    try:
        done: list[str] = []
        failed: list[str] = []
        disabled: list[str] = []
        known = {g.path for g in settings.files}
        elsewhere: list[str] = []
        # made by the session: a submodule's or a worktree's git directory, with a config of its own, a pointer
        # to another common directory, a legacy remote; a submodule anywhere (`git status` recurses into it)
        late = [
            Guarded(p, None, None, config)
            for p, config in [
                *((p, False) for p in _pointer_paths(settings.common, "")),
                *((p, True) for p in _config_paths(settings.common, "")),
                *_submodules_now(
                    [
                        r
                        for r, look in zip(settings.roots, settings.indexes, strict=True)
                        if index_look(r) != look or not look
                    ],
                    settings.roots[0],
                    settings.common,
                    elsewhere,
                ),
            ]
            if p not in known and not settings.hidden(p) and _within(p, settings.roots[0], settings.common)
        ]
        every = [*settings.files, *late]
        # a git directory the session made (a submodule's: its config is new) had no read-only hooks/ at the launch
        made = [os.path.dirname(g.path) for g in late if os.path.basename(g.path) in ("config", "commondir")]
        made = [d for d in dict.fromkeys(made) if os.path.realpath(d) not in settings.existing]
        for gitdir in made[:MAX_FILES]:
            try:
                disabled += _disable_hooks(gitdir, settings.roots[0], settings.common)
            except OSError as e:
                failed.append(f"{printable(os.path.join(gitdir, 'hooks'))} ({e.strerror or e})")
        if len(every) >= MAX_FILES:
            failed.append(f"more than {MAX_FILES} git settings files (not all were checked)")
        for g in every[: MAX_FILES * 2]:
            try:
                done += _restore_one(g, pid, settings.common, settings.roots[0])
            except OSError as e:
                failed.append(f"{printable(g.path)} ({e.strerror or e})")
    except Exception as e:  # never a traceback: this is the user's one chance to hear of it
        return f"the repository's git settings could not be checked after the session ({type(e).__name__})"
    parts = []
    if elsewhere:
        parts.append(
            f"a submodule in the index names a git directory outside the project ({printable(elsewhere[0])}"
            f"{f' and {len(elsewhere) - 1} more' if len(elsewhere) > 1 else ''}): its settings were not looked at, and "
            "`git status` runs what they say; if the session added it, `git rm --cached PATH` removes it"
        )
    for path, before in settings.stopped:
        now = _read(path)[1]
        if now is None or now == before:
            continue
        # `--continue` runs the todo's `exec` lines (twenty-fifth red team: the fifth of the list, where `git
        # status` shows two) and the merge strategy a file names (twenty-sixth)
        runs = (
            re.search(rb"(?m)^\s*(x|exec)\s", now)
            if path.endswith("todo")
            else (b"strategy" in now or path.endswith("strategy"))
        )
        if runs:
            parts.append(
                "the session left a rebase or cherry-pick stopped whose state runs commands when you continue it "
                f"({printable(path)}): read it before `--continue`, or run `git rebase --abort` (`git cherry-pick --abort`)"
            )
            break
    if disabled:
        parts.append(
            "the session put hooks in git directories it made (a submodule's), which your own git there would run: "
            f"renamed to NAME{DISABLED}: {', '.join(disabled[:8])}{' …' if len(disabled) > 8 else ''}; rename one back "
            "if you meant it"
        )
    if not done and not failed and not parts:
        return None
    if done:
        parts.append(
            "the session changed git settings that could run a program in your own git later or hide what it "
            "changed from it, undone: "
            f"{', '.join(done[:8])}{' …' if len(done) > 8 else ''}; set them outside the sandbox if you meant them"
        )
    if failed:
        parts.append(f"could not put back {', '.join(failed[:3])}: check these git settings files before you use git")
    return "; ".join(parts)


def say(settings: Settings, pid: int) -> None:
    line = restore(settings, pid)
    if line:
        try:
            sys.stderr.write(f"ai-sandbox: warning: {shown(line)}\n")
            sys.stderr.flush()
        except (OSError, ValueError):
            pass


DISABLED = ".ai-sandbox-disabled"


def _within(path: str, root: str, common: str) -> bool:
    """In the project or its git directory: a `commondir` a session wrote may name any repository of the user's,
    whose config the end rewrote (forty-third red team's re-attack: another repository's core.editor and aliases
    gone); the pointer itself is put back, which is what points git elsewhere."""
    from ai_sandbox.fs import inside

    real = os.path.realpath(path)
    return inside(real, os.path.realpath(root)) or inside(real, common)


def _disable_hooks(gitdir: str, root: str, common: str) -> list[str]:
    """Rename aside every hook in the hooks/ of a git directory the session made (a submodule's, or one a pointer it
    wrote led git away from): git runs a hook by its name only, so NAME.ai-sandbox-disabled never runs; the
    template's *.sample files stay. The hooks/ of a git directory that existed at the launch is a read-only place
    (writes.py); one the session made was not (forty-third red team: `git submodule add`, a post-checkout hook in
    .git/modules/lib/hooks, run by the user's next checkout there, outside; a hook moved in keeps its old change
    time, so all are renamed, not only new ones). hooks/ itself a link is renamed aside whole. Never through a
    link: a git directory reached through one, or outside the project and its git directory, is left."""
    from ai_sandbox.fs import inside

    if os.path.realpath(gitdir) != gitdir or not (inside(gitdir, root) or inside(gitdir, common)):
        return []
    where = os.path.relpath(gitdir, common) if inside(gitdir, common) else os.path.relpath(gitdir, root)
    out: list[str] = []
    top = os.open(gitdir, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        try:
            st = os.lstat("hooks", dir_fd=top)
        except FileNotFoundError:
            return []
        if not stat.S_ISDIR(st.st_mode):
            _aside(top, "hooks")
            return [printable(os.path.join(where, "hooks"))]
        hooks = os.open("hooks", os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=top)
        try:
            for name in sorted(os.listdir(hooks)):
                if name.endswith(".sample") or DISABLED in name:
                    continue
                _aside(hooks, name)
                out.append(printable(os.path.join(where, "hooks", name)))
        finally:
            os.close(hooks)
    finally:
        os.close(top)
    return out


def _aside(directory: int, name: str) -> None:
    """name renamed to name + DISABLED in directory, or with a random part after it where the session took that
    name first (nothing is overwritten; a hundred names taken kept the hook in place: the re-attack)."""
    import secrets

    for aside in (name + DISABLED, *(f"{name}{DISABLED}.{secrets.token_hex(8)}" for _ in range(8))):
        try:
            os.lstat(aside, dir_fd=directory)
        except FileNotFoundError:
            os.rename(name, aside, src_dir_fd=directory, dst_dir_fd=directory)
            return
    raise OSError(errno.EEXIST, f"no free name beside {name}")


def common_dir(own: str) -> str:
    """git's common directory for the git directory own: `commondir` names it in a linked worktree's."""
    from ai_sandbox.verify import read_regular

    try:
        rel = read_regular(os.path.join(own, "commondir"), 4096).rstrip(b"\r\n")
    except OSError:
        return own
    return os.path.realpath(os.path.join(own, os.fsdecode(rel))) if rel else own


def _config_paths(common: str, own: str) -> list[str]:
    """The config files git may read for a checkout of the repository (present or not)."""
    out = [os.path.join(common, "config"), os.path.join(common, "config.worktree")]
    if own and own != common:
        out.append(os.path.join(own, "config.worktree"))
    for d in _subdirs(os.path.join(common, "worktrees")):
        out.append(os.path.join(d, "config.worktree"))
    for m in submodule_dirs(os.path.join(common, "modules"), 0):
        out += [os.path.join(m, "config"), os.path.join(m, "config.worktree")]
    return list(dict.fromkeys(out))[:MAX_FILES]


def _pointer_paths(common: str, own: str) -> list[str]:
    """The files that point git elsewhere for its common directory or a remote: `commondir` in any git directory
    (git reads it in every one, not only a linked worktree's: twenty-fourth red team), and git's old
    `remotes/<name>` and `branches/<name>` files, which name a URL without the config. And the files of info/ that
    change what git shows of the repository without a trace in `git status` (_INFO), and `objects/info/alternates`."""
    modules = submodule_dirs(os.path.join(common, "modules"), 0)
    out = [os.path.join(own or common, "commondir")]
    out += [os.path.join(d, "commondir") for d in _subdirs(os.path.join(common, "worktrees"))]
    out += [os.path.join(m, "commondir") for m in modules]
    out += [os.path.join(g, "info", name) for g in (common, *modules) for name in _INFO]
    # another object directory, whose commit-graph git reads first when the repository's has none (commitgraph.py)
    out += [os.path.join(g, "objects", "info", "alternates") for g in (common, *modules)]
    for legacy in ("remotes", "branches"):
        with contextlib.suppress(OSError):
            out += sorted(e.path for e in os.scandir(os.path.join(common, legacy)) if not e.is_dir())
    return list(dict.fromkeys(out))[:MAX_FILES]


def _a_worktrees_own(path: str, data: bytes | None) -> bool:
    """A linked worktree's commondir as `git worktree add` writes it: `../..`, in <common>/worktrees/<id>/."""
    parts = path.rsplit(os.sep, 3)
    return len(parts) == 4 and parts[1] == "worktrees" and parts[3] == "commondir" and data in (b"../..\n", b"../..")


def _submodules_now(roots: list[str], project: str, common: str, elsewhere: list[str]) -> list[tuple[str, bool]]:
    """The files of each submodule the work trees' indexes hold now (the session may have added one whose git
    directory lies anywhere: one outside the project is named in elsewhere, never touched)."""
    from ai_sandbox.git import QUICK
    from ai_sandbox.git.run import _run

    out: list[tuple[str, bool]] = []
    for root in roots:
        proc = _run(["ls-files", "-z", "--stage"], root, timeout=QUICK)
        for entry in proc.stdout.split(b"\0")[:-1] if proc.returncode == 0 else []:
            if entry.startswith(b"160000 "):
                sub = os.path.join(root, os.fsdecode(entry.split(b"\t", 1)[1]))
                if not _ours(sub, project, common):
                    if os.path.isfile(os.path.join(sub, ".git")):
                        elsewhere.append(sub)
                    continue
                out += _files_of(sub, dotgit=False)
                if len(out) >= MAX_FILES:
                    return out
    return out


def _subdirs(base: str) -> list[str]:
    try:
        return sorted(e.path for e in os.scandir(base) if e.is_dir(follow_symlinks=False))
    except OSError:
        return []


def submodule_dirs(base: str, depth: int = 0) -> list[str]:
    """Submodules' git directories under modules/, those holding a HEAD (a name may hold slashes; nested ones have
    modules/ of their own). The launch's writes plan protects their hooks too."""
    out = []
    for d in _subdirs(base):
        if os.path.lexists(os.path.join(d, "HEAD")):
            out.append(d)
            if depth < 4:
                out += submodule_dirs(os.path.join(d, "modules"), depth + 1)
        elif depth < 4:
            out += submodule_dirs(d, depth + 1)
    return out


def _read(path: str) -> tuple[str | None, bytes | None]:
    """(link target, bytes git reads there): never blocking on a FIFO, None for what is not a regular file."""
    from ai_sandbox.verify import read_regular

    try:
        link = os.readlink(path)
    except OSError:
        link = None
    try:
        return link, read_regular(os.path.realpath(path) if link is not None else path, LIMIT)
    except OSError:
        return link, None


def _look(path: str, config: bool) -> Guarded:
    link, data = _read(path)
    return Guarded(path, link, data, config, os.path.realpath(os.path.dirname(path)))


def _add_includes(files: list[Guarded], g: Guarded, depth: int, hidden: Callable[[str], bool]) -> None:
    """The files g includes (`include.path`, `includeIf.*.path`), as git resolves them: `~/` from the home, a
    relative path from g's directory. One the launch hides is never read."""
    if depth >= _INCLUDE_DEPTH or len(files) >= MAX_FILES or g.data is None:
        return
    entries = _entries(g.data)
    for key, value in entries or []:
        if value is None or not (key == "include.path" or (key.startswith("includeif.") and key.endswith(".path"))):
            continue
        target = os.path.expanduser(value) if value.startswith("~/") else value
        base = os.path.dirname(os.path.realpath(g.path) if g.link is not None else g.path)
        target = os.path.join(base, target)
        if any(f.path == target for f in files) or hidden(target) or hidden(os.path.realpath(target)):
            continue
        inc = _look(target, config=True)
        files.append(inc)
        _add_includes(files, inc, depth + 1, hidden)


def _entries(data: bytes) -> Entries | None:
    """The (key, value) list git reads in data; None when git cannot read it. From its stdin: a copy in /tmp,
    which every sandbox shares, was read by a session running meanwhile (twenty-fifth red team: an include a
    session planted named the hidden .env)."""
    from ai_sandbox.git import QUICK
    from ai_sandbox.git.run import _run

    proc = _run(["config", "--file", "-", "--no-includes", "--null", "--list"], "/", stdin=data, timeout=QUICK)
    if proc.returncode != 0:
        return None
    out: Entries = []
    for item in proc.stdout.split(b"\0")[:-1]:
        key, nl, value = item.partition(b"\n")
        out.append((os.fsdecode(key), os.fsdecode(value) if nl else None))
    return out


def _fixed(new: Entries, keys: dict[str, list[str | None]]) -> bytes | None:
    """The config holding new's entries, each of keys with only the values it keeps, written out by ai-sandbox
    (no copy edited on disk: a concurrent session swapped git's scratch copy for a link to the hidden .env,
    and its bytes were written back as .git/config: twenty-sixth red team). Comments and layout are not kept.
    None when git reads it otherwise than meant."""
    left = {k: list(v) for k, v in keys.items()}
    kept: Entries = []
    for k, v in new:
        if k in left:
            if v not in left[k]:
                continue
            left[k].remove(v)
        kept.append((k, v))
    lines: list[str] = []
    head = None
    for k, v in kept:
        section, _, rest = k.partition(".")
        sub, _, var = rest.rpartition(".")
        if (section, sub) != head:
            head = (section, sub)
            sub_q = sub.replace("\\", "\\\\").replace('"', '\\"')  # in a section name, only these two escape
            lines.append(f"[{section}]" if not sub else f'[{section} "{sub_q}"]')
        lines.append(f"\t{var}" if v is None else f"\t{var} = {_quoted(v)}")
    data = ("\n".join(lines) + "\n").encode() if lines else b""
    return data if _entries(data) == kept else None


def _quoted(s: str) -> str:
    """s as a quoted config string (git's escapes; a raw newline is not allowed there)."""
    esc = s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t").replace("\b", "\\b")
    return f'"{esc}"'


def _restore_one(g: Guarded, pid: int, common: str, root: str) -> list[str]:
    """Put g back where the session changed it; the names of what was put back ([] when nothing was)."""
    if os.path.realpath(os.path.dirname(g.path)) != (g.where or os.path.dirname(g.path)):
        # a directory on the way was swapped for a link (`mv .git x; ln -s ~/.ssh .git`): not followed
        raise OSError(0, "a directory on its path was replaced during the session")
    link, data = _read(g.path)
    if link == g.link and data == g.data and not (link is None and _blocks(g.path)):
        return []
    if link is None and data is None and not os.path.lexists(os.path.dirname(g.path)):
        return []  # its directory is gone (`git worktree prune` or `remove`): git reads nothing there now
    if not g.config and link is None and g.link is None and _a_worktrees_own(g.path, data):
        return []  # `git worktree add` by the session: its commondir names the common directory, as git writes it
    if link != g.link or not g.config or data is None:
        return [_whole(g, pid)]  # a link made, changed or removed; a pointer file; not a regular file
    old = _entries(g.data) if g.data is not None else []
    new = _entries(data)
    if old is None:
        return []  # git could not read it at the launch either: nothing of it ran then, nothing was added to it
    if new is None:
        return [_whole(g, pid)]  # git cannot read the session's
    keys = put_back(old, new)
    if "core.worktree" in keys:  # `git submodule add` writes one: kept where it leads into the work itself
        now = [v for k, v in new if k == "core.worktree"]
        inner = [v for v in now if v not in keys["core.worktree"] and _in_work(g.path, v, root, common)]
        keys["core.worktree"] += inner
        if len(keys["core.worktree"]) == len(now):
            del keys["core.worktree"]
    if not keys:
        return []
    if len(keys) > MAX_KEYS:
        shown = ", ".join(printable(k) for k in ranked(list(keys))[:5])
        return [_whole(g, pid, f"{len(keys)} settings, among them {shown}")]
    fixed = _fixed(new, keys)
    if fixed is None:
        return [_whole(g, pid)]
    _write(os.path.realpath(g.path) if g.link is not None else g.path, fixed)
    where = os.path.relpath(g.path, common) if g.path.startswith(common + os.sep) else g.path
    out = []
    for k in ranked(list(keys)):
        was = [v for key, v in old if key == k]
        said = printable(k) + ("" if where == "config" else f" in {printable(where)}")
        out.append(f"{said} (it was {printable(str(was[-1]))!r})" if was else said)
    return out


def _blocks(path: str) -> bool:
    """A FIFO, socket or device at path, which git opens as the file it reads there (a FIFO the session left at
    `objects/info/alternates` hung the user's git, and read as no file it was left: fiftieth red team, F5)."""
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or stat.S_ISCHR(mode) or stat.S_ISBLK(mode)


def _in_work(config: str, value: str | None, root: str, common: str) -> bool:
    """A core.worktree (relative to the git directory holding config) inside the project, outside its git
    directory: the session can write there anyway; elsewhere, the user's next checkout there would write the
    session's files (`~/.local/bin`, `.git/hooks`)."""
    if not value:
        return False
    from ai_sandbox.fs import inside

    where = os.path.realpath(os.path.join(os.path.dirname(config), value))
    git_dirs = (common, os.path.join(os.path.realpath(root), ".git"))
    return inside(where, os.path.realpath(root)) and not any(inside(where, d) for d in git_dirs)


def _whole(g: Guarded, pid: int, what: str = "") -> str:
    """Put g back as the launch found it; what the session left there is moved aside (never read nor deleted):
    the line's words for it (what: the settings the session added, when known)."""
    aside = ""
    if os.path.lexists(g.path):
        aside = f"{g.path}.ai-sandbox-{pid}-{os.urandom(4).hex()}"  # a name no session can foresee
        os.rename(g.path, aside)
    if g.link is not None:
        os.symlink(g.link, g.path)
    elif g.data is not None:
        _write(g.path, g.data)
    put = "as the launch found it" if g.link is not None or g.data is not None else "removed: the launch found none"
    added = f"; the session added {what}" if what else ""
    theirs = f"; the session’s is {printable(os.path.basename(aside))}" if aside else ""
    return f"{printable(g.path)} ({put}{added}{theirs})"


def _write(path: str, data: bytes) -> None:
    """Replace path with data (a new file renamed over it: never through a link the session put there)."""
    tmp = f"{path}.ai-sandbox-{os.urandom(6).hex()}"
    try:
        mode = os.lstat(path).st_mode & 0o777 if os.path.isfile(path) and not os.path.islink(path) else 0o644
    except OSError:
        mode = 0o644
    with contextlib.suppress(OSError):
        os.unlink(tmp)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)
    os.rename(tmp, path)
