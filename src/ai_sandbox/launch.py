"""The launch path: compute the policy, build the backend command, exec it.

This runs before every agent start, so it imports only what it needs (no typer, no rich, no GitPython)
and replaces itself with the backend: the terminal, signals and exit status belong to the agent.
"""

from __future__ import annotations

import contextlib
import gc
import os
import signal
import sys
from collections.abc import Callable, Mapping

from ai_sandbox import (
    config,
    fs,
    git,
    gitsettings,
    hiddenedits,
    history,
    idents,
    layers,
    nested,
    network,
    paths,
    prefetch,
    profiles,
    skipworktree,
    sockets,
    state,
    writes,
)
from ai_sandbox.backends.choose import select
from ai_sandbox.backends.plan import LaunchPlan, Settings
from ai_sandbox.errors import NotFoundError, PolicyError, UnavailableError
from ai_sandbox.layers.outputs import OutputListings
from ai_sandbox.layers.tree import Tree
from ai_sandbox.patterns import BUILT_IN, DEPENDENCY, OUTPUT, Pattern, PatternSet, Source
from ai_sandbox.policy import (
    CONFIG,
    CRYPT,
    HIDDEN_EDIT,
    HISTORY,
    LOUD,
    NOT_GIT,
    Notice,
    Policy,
    build,
    check_reachable,
    is_system,
    merge,
    relative,
)
from ai_sandbox.records import factory, record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from rich.status import Status

    from ai_sandbox.backends.protocol import Backend


@record
class Request:
    argv: list[str]  # the agent (a profile name or a command) and its arguments, verbatim
    is_command: bool = False  # given after `--`: never looked up as a profile
    dry_run: bool = False
    backend: str | None = None
    engine: str | None = None
    image: str | None = None
    network: str | None = None  # --network
    cwd: str = ""
    env: Mapping[str, str] = factory(lambda: dict(os.environ))


@record
class Prepared:
    policy: Policy
    backend: Backend
    plan: LaunchPlan
    profile: profiles.Profile
    command: list[str]  # the agent's argv, executable resolved: what the backend wraps
    trees: list[Tree] = factory(list)  # what git listed
    marks: skipworktree.Marks = factory(skipworktree.Marks)  # the hidden tracked files, per work tree
    seen: idents.Snapshot = factory(idents.Snapshot)  # the one look at what each mask is on (idents.py)
    on_hidden_change: str = "end"
    env: Mapping[str, str] = factory(dict)  # the caller's, as the agent gets it
    # what only people read (prepare(detail=True)): history, hard links, what an earlier launch hid
    findings: list[Notice] = factory(list)
    history: list[history.Finding] | None = None  # hidden content git still holds (prepare(detail=True))
    # prepare(assume=True) where no backend works: why; `backend` is then the one assumed, to show the rules
    unusable: UnavailableError | None = None

    @property
    def notices(self) -> list[Notice]:
        """Everything to tell the user: the policy's own notices, then the findings."""
        return self.policy.warnings + self.findings


def resolve_command(name: str, env: Mapping[str, str]) -> str:
    """The real executable for name; wrappers that call ai-sandbox again are skipped, so they never recurse."""
    if "/" in name:
        if os.path.isfile(name) and os.access(name, os.X_OK):
            return os.path.abspath(name)
        raise NotFoundError(f"{name}: no such executable", "check the path")
    wrappers = []
    for directory in env.get("PATH", os.defpath).split(os.pathsep):
        candidate = os.path.join(directory or ".", name)
        if not (os.path.isfile(candidate) and os.access(candidate, os.X_OK)):
            continue
        if _calls_us(candidate):
            wrappers.append(candidate)
            continue
        return os.path.abspath(candidate)
    if wrappers:
        raise NotFoundError(
            f"{name}: only wrappers that run ai-sandbox were found on PATH ({', '.join(wrappers)})",
            "install the agent itself, or point its profile's `executable` at it",
        )
    raise NotFoundError(
        f"{name}: not found on PATH",
        "install it, or name a command after `--` (see `ai-sandbox --help`)",
    )


def _calls_us(path: str) -> bool:
    """Is path ai-sandbox itself, or a small script that runs it (a hand-made `claude` wrapper)?"""
    me = os.path.realpath(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    if me and os.path.realpath(path) == me:
        return True
    try:
        with open(path, "rb") as f:
            head = f.read(4096)
    except OSError:
        return False
    return head.startswith(b"#!") and b"\0" not in head and b"ai-sandbox" in head and os.path.getsize(path) <= 4096


def allowlist(user_cfg: config.UserConfig, profile: profiles.Profile, project_cfg: config.ProjectConfig) -> PatternSet:
    """Every pattern that keeps an ignored path readable; a later source names the rule in reports."""
    pats: list[Pattern] = []
    if user_cfg.allow_dependencies:
        pats += [Pattern(p, Source(DEPENDENCY, name="dependency directory")) for p in profiles.DEPENDENCY_DIRS]
    if user_cfg.allow_build_outputs:
        pats += [Pattern(p, Source(OUTPUT, name="build output")) for p in profiles.BUILD_OUTPUT_DIRS]
    pats += [Pattern(p, Source(BUILT_IN, name="built-in tool allowlist")) for p in profiles.TOOL_ALLOW]
    pats += profile.allow + user_cfg.allow + project_cfg.allow
    return PatternSet(pats)


def prepare(
    req: Request,
    *,
    detail: bool = False,
    resolve: bool = True,
    assume: bool = False,
    user_cfg: config.UserConfig | None = None,
) -> Prepared:
    """Everything a launch needs. `detail` adds what only people read: the ignore rule behind each hidden
    path, history and hard-link findings. `resolve=False` lets explain show an agent that is not installed.
    `assume`: where auto finds no backend that works, the rules of the one it would most likely use
    (explain, init, --dry-run, doctor: a user sees the rules before fixing the sandbox), with the reason in
    `unusable`. Starts nothing; it writes only ai-sandbox's caches (parsed configs, build-output listings,
    auto's verdicts)."""
    env = req.env
    cwd = os.path.realpath(req.cwd or os.getcwd())
    if user_cfg is None:  # run() reads it once for the whole launch
        user_cfg = config.load_user(env)
    profile = None if req.is_command else profiles.find(req.argv[0], paths.config_home(env))
    if profile is None:
        profile = profiles.generic(req.argv[0])
    settings = Settings(
        engine=req.engine or user_cfg.engine,
        image=req.image or profile.image or user_cfg.image,
        home=profile.home,
        mounts=[*user_cfg.mounts, *(path for path, _ in user_cfg.writable)],  # the container sees only mounts
        cwd=cwd,
    )
    unusable = None
    try:
        backend = select(req.backend or user_cfg.backend, settings, env)
    except UnavailableError as e:
        if not (assume and (req.backend or user_cfg.backend) == "auto" and sys.platform.startswith("linux")):
            raise
        from ai_sandbox.backends import choose

        backend, unusable = choose.assumed(settings), e
    check_reachable(cwd, backend.name, backend.private_dirs)
    if not backend.host_commands:
        executable = profile.executable  # found on the image's PATH, not the host's
    else:
        try:
            executable = resolve_command(profile.executable, env)
        except NotFoundError:
            if resolve:
                raise
            executable = profile.executable
    command = [executable, *req.argv[1:]]

    repo = git.find_repo(cwd)
    notices: list[Notice] = []
    if repo is None:
        root = cwd
        project_cfg = config.ProjectConfig()
        notices.append(
            Notice(NOT_GIT, f"not inside a git work tree: {root} is the project root and only your global blocks apply")
        )
    else:
        root = repo.root
        project_cfg = config.load_project(root)
        config.check_project_allow(project_cfg, user_cfg, root)
    marks = skipworktree.Marks()
    home = os.path.realpath(os.path.expanduser("~"))
    limit = user_cfg.max_masks or backend.max_masks
    config_files = ([user_cfg.path] if user_cfg.exists else []) + project_cfg.files
    notices += [Notice(CONFIG, w) for w in project_cfg.warnings]
    one = _Checkout(user_cfg, profile, backend, env, marks, home, limit, detail)
    policy, collected = one.policy(root, repo, project_cfg, cwd=cwd, notices=notices, config_files=config_files)
    others = []
    for sibling in git.other_checkouts(repo) if repo is not None else []:
        if is_system(sibling.root) or fs.inside(home, sibling.root):
            continue  # `/`, a system directory, the home or above: a forged worktree (a session can write them)
        sibling_cfg = config.load_project(sibling.root)
        config.check_project_allow(sibling_cfg, user_cfg, sibling.root)
        others.append(one.policy(sibling.root, sibling, sibling_cfg, config_files=sibling_cfg.files))
    if others:
        merge(policy, [p for p, _ in others], home=home, limit=limit)
    policy.writes = _writes(user_cfg, profile, backend, env, root, repo, _nested(root, collected.trees))
    policy.network = _network(req, user_cfg, project_cfg, profile, env)
    policy.sockets = _sockets(policy, user_cfg, backend, env, cwd, command)
    if marks.needs:
        _say_edited(policy, marks, [collected, *(c for _, c in others)])
    # one look at what the masks are on, before anything is written: the record, the launch check and the
    # watcher compare with it (idents.py)
    seen = idents.take(policy)
    one.save()
    prefetch.discard()  # git is asked nothing more here: what it was asked early and nobody took over is ended
    findings: list[Notice] = []
    found: list[history.Finding] | None = None
    if detail:
        from ai_sandbox import audit

        findings = audit.findings(policy, collected.trees)
        cached = history.current(env, root, history.targets(policy, collected.trees)) if repo is not None else None
        if cached is not None:
            findings += history.notices(cached, {n.path for n in findings if n.kind == HISTORY})
            found = cached.findings
        else:
            found = []
        findings += state.unhidden_notices(policy, env, cwd)
    net_env = policy.network.environment() if backend.host_commands else {}  # the proxy's variables (network.py)
    plan = backend.plan(policy, command, {**env, **net_env}, seen)
    return Prepared(
        policy, backend, plan, profile, command, collected.trees, on_hidden_change=user_cfg.on_hidden_change, env=env,
        marks=marks, seen=seen, findings=findings, history=found, unusable=unusable,
    )  # fmt: skip


def _say_edited(policy: Policy, marks: skipworktree.Marks, collected: list[layers.Collected]) -> None:
    """One line naming the hidden tracked files with changes not staged, which git inside leaves out of what it
    records (skipworktree.edited). git-crypt's files are not hashed: git stores them encrypted."""
    crypt = [e.path for c in collected for e in c.entries if e.layer == CRYPT]
    found = skipworktree.edited(marks, skip=crypt)
    if found:
        names = fs.some(fs.printable(relative(p, policy.root) if fs.below(p, policy.root) else p) for p in found)
        policy.warn(
            HIDDEN_EDIT,
            f"{len(found)} hidden tracked file(s) have changes you have not staged ({names}): git inside takes the "
            "index's copy, so `git commit -a` or `git stash` there leaves them out; they stay on your disk (commit "
            "or stash them first if the agent's work must hold them)",
            found[0],
        )


def _network(
    req: Request,
    user_cfg: config.UserConfig,
    project_cfg: config.ProjectConfig,
    profile: profiles.Profile,
    env: Mapping[str, str],
) -> network.Network:
    """This launch's network (network.py): the command line's mode, else the narrower of the user's and the
    project's; in allowlist, the user's domains, the profile's, the endpoints the environment names, the built-in
    list."""
    home = os.path.expanduser("~")
    user_line = user_cfg.lines.get("network")
    if req.network is not None:
        mode, why = req.network, "--network"
    else:
        mode = user_cfg.network
        why = f"{config.tilde(user_cfg.path, home)}:{user_line}" if user_line else "default"
        if network.narrower(project_cfg.network, mode) != mode:
            mode, why = project_cfg.network, f"{config.PROJECT_FILE}:{project_cfg.lines.get('network', 0)}"
    return network.build(
        mode, why, user=user_cfg.allow_domains, profile=[(d, f"profile {profile.name}") for d in profile.domains],
        env=dict(env), defaults=user_cfg.allow_default_domains,
    )  # fmt: skip


def _sockets(
    policy: Policy,
    user_cfg: config.UserConfig,
    backend: Backend,
    env: Mapping[str, str],
    cwd: str,
    command: list[str],
) -> sockets.Sockets:
    """The host's unix sockets this launch puts out of the agent's reach (sockets.py), and what it must still show
    of /tmp: the project, the homes, ai-sandbox's own files and interpreter, the agent, the writable places."""
    if not backend.host_commands:
        return sockets.Sockets()  # a container shows only what it mounts
    from ai_sandbox.backends import host

    uid, account_home = _account(backend)
    python, script = host.verifier()
    needed = [
        policy.root, *policy.checkouts, cwd, env.get("HOME", ""), account_home or "",  # never $TMPDIR: sockets.py
        paths.config_home(env), paths.state_dir(env), paths.cache_dir(env), python, script, sys.prefix,
        sys.base_prefix, command[0] if os.path.isabs(command[0]) else "",
        *(p.path for p in policy.writes.places if p.writable and p.path not in writes.TEMPORARY),
        *(p for p, _ in user_cfg.writable),
    ]  # fmt: skip
    home = os.path.realpath(env.get("HOME") or account_home or "/")
    return sockets.plan(env, uid, needed, user_cfg.allow_sockets, user_cfg.allow_ssh_agent, home)


def _nested(root: str, trees: list[Tree]) -> list[str]:
    """The work trees of the repositories nested in the project root (its own tree has no prefix)."""
    return [os.path.join(root, t.prefix.rstrip("/")) for t in trees if t.prefix]


def _account(backend: Backend) -> tuple[int, str | None]:
    """The uid the agent runs as (a backend may run it as another user) and that account's home, if any."""
    import pwd

    user = getattr(backend, "user", None)
    uid = user[0] if user else os.geteuid()
    try:
        return uid, pwd.getpwuid(uid).pw_dir
    except KeyError:
        return uid, None


def _writes(
    user_cfg: config.UserConfig,
    profile: profiles.Profile,
    backend: Backend,
    env: Mapping[str, str],
    root: str,
    repo: git.Repo | None,
    nested: list[str],
) -> writes.Writes:
    """Where this launch's agent may write (writes.py): the home as the agent gets it and the account's, the
    project's git directories, the state of the agent's profile (for `-- claude` too: the profile named like
    the command), the user's `writable`. nested: the work trees of repositories nested in the project."""
    if not user_cfg.confine_writes:
        return writes.Writes()
    uid, account_home = _account(backend)
    homes = [os.path.realpath(env.get("HOME") or os.path.expanduser("~"))]
    if account_home:
        homes.append(os.path.realpath(account_home))
    # a `.git` link, the project's or a nested repository's: its target is made writable (its hooks read-only), not
    # the link, which the session could repoint at a git directory of its own (twenty-seventh, -eighth red teams)
    for tree in [root, *nested] if repo is not None else []:
        dotgit = os.path.join(tree, ".git")
        if os.path.islink(dotgit):
            raise PolicyError(
                f"cannot confine writes: {dotgit} is a link (to {os.path.realpath(dotgit)}), which a session could "
                "point at a git directory of its own, whose hooks and settings your git would run",
                "make it the directory itself or a `gitdir:` file (git init --separate-git-dir), or set "
                "confine_writes = false (see docs/writes.md)",
            )
    gits: list[str] = []
    if repo is not None:
        gits.append(os.path.realpath(repo.common_dir))
        own = git.git_dir_of(root)
        if own and not fs.inside(own, gits[0]):
            gits.append(own)
    modules = [m for g in gits for m in gitsettings.submodule_dirs(os.path.join(g, "modules"))]
    for tree in nested:  # their git directories (a `.git` there, or one a `gitdir:` file names): hooks included
        own = git.git_dir_of(tree)
        if own and any(fs.inside(own, top) for top in [root, *gits]):  # writable with the project
            modules.append(own)
    owner = profile
    if not profile.path:
        owner = profiles.find(os.path.basename(profile.executable), paths.config_home(env)) or profile
    state = [(entry, f"profile {owner.name}") for entry in owner.home]
    where = env.get("PATH", os.defpath).split(os.pathsep)

    def on_path(tool: str) -> bool:
        return any(os.access(os.path.join(d or ".", tool), os.X_OK) for d in where)

    return writes.plan(
        confine=True,
        whole_system=uid == 0 or backend.name == "bwrap",
        homes=homes,
        root=root,
        git_dirs=gits,
        state=state,
        writable=[(path, f"user config ({src})") for path, src in user_cfg.writable],
        modules=modules,
        on_path=on_path,
    )


class _Checkout:
    """Builds the policy of one checkout of the project with this launch's config, agent and backend: the
    launch's own, and each other worktree of its repository, which `policy.merge` then adds."""

    def __init__(
        self,
        user_cfg: config.UserConfig,
        profile: profiles.Profile,
        backend: Backend,
        env: Mapping[str, str],
        marks: skipworktree.Marks,
        home: str,
        limit: int,
        detail: bool,
    ) -> None:
        self.user_cfg, self.profile, self.backend, self.env = user_cfg, profile, backend, env
        self.marks, self.home, self.limit, self.detail = marks, home, limit, detail
        self.outputs: list[OutputListings] = []

    def policy(
        self,
        root: str,
        repo: git.Repo | None,
        project_cfg: config.ProjectConfig,
        *,
        cwd: str = "",
        notices: list[Notice] | None = None,
        config_files: list[str] | None = None,
    ) -> tuple[Policy, layers.Collected]:
        env = self.env
        memo = paths.project_cache(env, root, "listings")
        # the remembered answers hold secret_name's verdicts: a change of its rules must not reuse them
        outputs = OutputListings(
            paths.project_cache(env, root, f"outputs-{profiles.SECRET_RULES}"), profiles.secret_name
        )
        self.outputs.append(outputs)
        collected = layers.collect(
            root, repo, self.user_cfg, project_cfg, detail=self.detail, memo=memo, meanwhile=outputs.load
        )
        outputs.load()  # not a repository: no git walk to read it during
        policy = build(
            root,
            collected.entries,
            allowlist(self.user_cfg, self.profile, project_cfg),
            in_git=repo is not None,
            home=self.home,
            cwd=cwd,
            notices=notices or [],
            config_files=config_files or [],
            express=self.backend.unexpressible,
            limit=self.limit,
            secret=profiles.secret_name,
            scandir=outputs.scandir,
            tracked=lambda p: self.marks.collect(p, collected.trees),
        )
        return policy, collected

    def save(self) -> None:
        for outputs in self.outputs:
            outputs.save()


def run(req: Request) -> int:
    """Launch: prepare, check the record, write what the sandbox reads, start the watcher, set the marks, exec
    the backend (or run it as a child, supervised). `--dry-run` is dryrun.py's."""
    table = nested.mounts()
    inside = nested.inside_sandbox(table)
    user_cfg = config.load_user(req.env)
    if not inside and user_cfg.confine_writes:
        _check_own_files()
        _move_home_files(req)  # before the plan: it binds what is there
    with SlowNotice():
        prepared = prepare(req, user_cfg=user_cfg)
    rec = state.check(prepared.policy, req.env, seen=prepared.seen, nested=inside)
    if inside:
        return _run_nested(prepared, req, table)
    err = prepared.backend.unavailable()
    if err is not None:
        raise err
    line, refresh = _history_line(prepared)
    _print_loud(prepared.policy, line, _secrets_line(prepared))
    fs.make_dirs(prepared.plan.dirs)
    fs.write_files(prepared.plan.files)
    state.record(rec)
    gc.enable()  # main() turned it off for the launch's work; what follows lives on (watcher, proxy, supervisor)
    root = prepared.policy.root
    needs = bool(prepared.marks.needs)
    end, looks = _session_end(prepared)
    # The watcher first: a closed terminal's SIGHUP between setting the marks and forking it would leave them
    # set with nobody to clear them (the watcher ignores it and clears them once this process is gone).
    told = None
    outlives = prepared.plan.outlives  # nothing to watch, but a backend to end should this process be killed
    if prepared.policy.masks or needs or rec.guarded or end is not None or outlives:
        from ai_sandbox import watch

        told = watch.start(
            prepared.policy, prepared.on_hidden_change, state.moved_log(req.env, root), on_end=end, background=refresh,
            seen=prepared.seen, guarded=rec.guarded, record=rec.path, always=outlives,
        )  # fmt: skip
    skipworktree.protect(req.env, root, prepared.marks)
    if needs and looks:  # the marks just set are the launch's write, not the session's (in this process only: a
        hiddenedits.settle(looks)  # watcher that runs the end instead has the look from before, and checks all)
    proxy, channel = _start_proxy(prepared)  # after the watcher's fork: only the sandbox may hold the channel
    if prepared.plan.supervised:
        from ai_sandbox import supervise

        sys.stdout.flush()
        sys.stderr.flush()
        keep = {network.FD: channel} if proxy else None
        waited = supervise.run(prepared.plan, keep=keep, started=told.started if told is not None else None)
        if end is not None:  # now, not a moment later in the watcher: the user's next git command must see it
            end(os.getpid())
            if told is not None:
                told.ended()  # and not again in the watcher
        if proxy:  # the backend holds the proxy's channel for the session, and this process did too
            os.close(channel)
            os.waitpid(proxy, 0)  # its lines about refused hosts come before the shell's prompt
        # Nothing is left to do, and Python's teardown of the launch's modules and objects would be ~10 ms more
        # before the prompt comes back (measured): what is printed is flushed, no file of ours is open, no
        # exit handler is ours, and the watcher is a process of its own.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(supervise.become(waited))
    if proxy:  # only a host backend has one, and each is supervised
        raise UnavailableError("the network allowlist needs a supervised backend", "use --backend firejail or bwrap")
    _exec(prepared.plan.argv, prepared.plan.env)
    return 127  # not reached


def _start_proxy(prepared: Prepared) -> tuple[int, int]:
    """The session's proxy (proxy.py) when the sandbox's network is an allowlist on a host backend: its pid and the
    sandbox's end of its channel; (0, -1) when there is none."""
    if prepared.policy.network.mode != "allowlist" or not prepared.backend.host_commands:
        return 0, -1
    import _socket  # socket.py and the proxy's threads are the child's: ~4 ms of imports off the launch

    ours, theirs = _socket.socketpair(_socket.AF_UNIX, _socket.SOCK_STREAM)
    sys.stdout.flush()
    sys.stderr.flush()
    terminal = (signal.SIGHUP, signal.SIGINT, signal.SIGQUIT)  # blocked across the fork, until the child ignores them
    signal.pthread_sigmask(signal.SIG_BLOCK, terminal)
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the proxy process
        try:
            theirs.close()
            _proxy_process(prepared.policy.network, ours.detach(), terminal)
        finally:
            os._exit(0)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, terminal)
    ours.close()
    return pid, theirs.detach()


def _proxy_process(
    net: network.Network, channel: int, terminal: tuple[signal.Signals, ...]
) -> None:  # pragma: no cover
    """The proxy, just forked with the terminal's signals blocked: it ignores them (Ctrl-C is the agent's; the proxy
    ends with the sandbox), keeps no descriptor of the launch's but stderr (its lines after the session) and its end
    of the channel, and waits for the launch check to send the sandbox's listening sockets (or for the sandbox to be
    gone) before it imports what serving needs: ~8 ms of imports that competed with the sandbox's own start."""
    for sig in terminal:
        signal.signal(sig, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, terminal)
    for name in os.listdir("/proc/self/fd"):
        if int(name) not in (0, 1, 2, channel):
            with contextlib.suppress(OSError):
                os.close(int(name))
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)  # a pipe reading the agent's output must not wait for the proxy
    os.close(null)
    import select as readable  # the watcher's already: no import

    readable.select([channel], [], [])
    from ai_sandbox import proxy

    proxy.serve(net, channel)


def _check_own_files() -> None:
    """Under write containment, refuse when a module of the launcher has another hard link: every file of the
    ai_sandbox package (the watcher imports more of it later, outside) and the libraries loaded so far, not the
    standard library's. `uv tool install` links what it installs to its cache, ~/.cache/uv, writable inside, and a
    session changed ai-sandbox's own code through it, which the next launch ran outside (twenty-seventh red team).
    ~320 stats, under 1 ms."""
    # the standard library's directory (sysconfig's platstdlib is a venv's own lib/, site-packages and all)
    std = os.path.join(os.path.dirname(os.__file__), "")
    # the bytecode too, which Python runs in place of the source (twenty-eighth red team)
    loaded = [getattr(m, k, None) for m in list(sys.modules.values()) for k in ("__file__", "__cached__")]
    paths = [f for f in loaded if isinstance(f, str)]
    for top, _, files in os.walk(os.path.dirname(os.path.abspath(__file__))):
        paths += [os.path.join(top, f) for f in files if f.endswith((".py", ".pyc"))]
    for path in dict.fromkeys(paths):
        if path.startswith(std) and "-packages" not in path[len(std) :]:  # site-packages below it are not its
            continue
        try:
            st = os.stat(path)
        except OSError:
            continue
        # another user's file this one cannot write is safe through any name (a Nix store links identical files)
        if st.st_nlink > 1 and (st.st_uid == os.geteuid() or os.access(path, os.W_OK)):
            raise PolicyError(
                f"{path} has another hard link, through which a session could change what the next launch runs "
                "outside the sandbox (uv links what it installs to its cache, writable inside)",
                "reinstall ai-sandbox with copies (`make install`, or `uv tool install --link-mode copy`), or set "
                "confine_writes = false (see docs/writes.md)",
            )


def _move_home_files(req: Request) -> None:
    """Under write containment, the files the agent's profile saves by rename straight in the home get their
    kept place, with a link (homefiles.py)."""
    env = req.env
    profile = profiles.find(os.path.basename(req.argv[0]), paths.config_home(env))
    if profile is None or not profile.moved:
        return
    from ai_sandbox import homefiles

    home = os.path.realpath(env.get("HOME") or os.path.expanduser("~"))
    for line in homefiles.relocate(homefiles.moves(profile.moved, home), home, profile.description or profile.name):
        print(f"ai-sandbox: {fs.shown(line)}", file=sys.stderr)


def _session_end(prepared: Prepared) -> tuple[Callable[[int], None] | None, list[hiddenedits.Look]]:
    """What runs once the sandbox of pid is gone (in the watcher; and at once under a supervised backend): the
    index marks of hidden tracked files cleared (skipworktree.py), those the session set itself too (hiddenedits.py),
    and what git checked out into hidden directories named (unwritten.py). None when there is nothing to do. With
    it, the launch's look at each work tree's index (hiddenedits.settle takes the launch's own marks in)."""
    policy, env, marks, trees, seen = prepared.policy, prepared.env, prepared.marks, prepared.trees, prepared.seen
    dirs = policy.in_git and any(m.is_dir for m in policy.masks)
    files = policy.in_git and not all(m.is_dir for m in policy.masks)  # a branch may track one (unwritten.py)
    nested = _nested(policy.root, prepared.trees)
    masked = [m.path for m in policy.masks]
    settings = (
        gitsettings.take(policy.root, nested, lambda p: any(fs.inside(p, m) for m in masked)) if policy.in_git else None
    )
    if not (marks.needs or dirs or files or settings):
        return None, []

    looks = hiddenedits.look(policy.root, trees) if policy.in_git else []
    held = skipworktree.Held([*marks.needs, *(lk.tree for lk in looks)]) if marks.needs or looks else None
    stashed: list[str] = []
    log = ""
    indexes: dict[str, tuple[int, ...]] = {}
    if dirs or files:
        from ai_sandbox import unwritten

        indexes = unwritten.index_keys(policy.root, trees)
    if dirs:
        log = unwritten.stash_log(policy.root)
        stashed = unwritten.stashes(log, policy.root)  # for the session's end

    def end(pid: int) -> None:
        if settings is not None:  # first: ai-sandbox's own git calls below read these files
            gitsettings.say(settings, pid)
        if marks.needs:
            mine = hiddenedits.untouched(looks)  # now, before the release writes: indexes the session did not write
            skipworktree.release(env, policy.root, pid, held)
            hiddenedits.settle(looks, mine)  # the release's own write
        if looks:  # after release: what is left of ai-sandbox's own marks is the live sessions'
            hiddenedits.clear(env, policy.root, looks, held)
        if dirs or files:
            from ai_sandbox import unwritten

            unwritten.after(policy.root, seen, unwritten.pending(policy, trees, marks, indexes), stashed, log)

    return end, looks


def _run_nested(prepared: Prepared, req: Request, table: list[tuple[str, str]]) -> int:
    """Already sandboxed (an agent ran `claude` through the alias): run directly if every mask is in force."""
    missing = nested.unenforced(prepared.policy, table)
    if missing:
        shown = fs.some(m.path for m in missing)
        raise UnavailableError(
            f"already inside a sandbox that leaves {shown} readable; a sandbox cannot be stacked here",
            "run ai-sandbox from a shell outside the sandbox",
        )
    _print_loud(prepared.policy, _history_line(prepared)[0], _secrets_line(prepared))
    _exec(prepared.command, req.env)
    return 127  # not reached


def _history_line(prepared: Prepared) -> tuple[str | None, Callable[[], None] | None]:
    """The launch's line about hidden content git still holds, from the last answer (a walk never runs
    here), and the refresh the watcher runs in the background when the repository moved since."""
    policy = prepared.policy
    if not policy.in_git or not policy.masks:
        return None, None
    tgts = history.targets(policy, prepared.trees)
    if not tgts:
        return None, None
    cached = history.load(prepared.env, policy.root)
    key = history.state_key(tgts)
    stale = cached is None or cached.key != key
    line = cached.loud(policy.root) if cached is not None else None
    return line, history.refresher(prepared.env, policy.root, tgts, key) if stale else None


def _secrets_line(prepared: Prepared) -> str | None:
    """What the last `explain --secrets` (or doctor, or init) found readable; the launch never scans."""
    from ai_sandbox import secretscan

    return secretscan.loud(secretscan.summary(prepared.env, prepared.policy.root), prepared.policy.root)


def _print_loud(policy: Policy, *lines: str | None) -> None:
    """What the user must see before the agent takes the terminal: the loud notices, then the findings' lines."""
    for w in policy.warnings:
        if w.kind in LOUD:
            print(f"ai-sandbox: warning: {fs.shown(w.message)}", file=sys.stderr)
    for line in lines:
        if line:
            print(f"ai-sandbox: warning: {fs.shown(line)}", file=sys.stderr)


def _exec(argv: list[str], env: Mapping[str, str]) -> None:
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execve(argv[0], argv, dict(env))
    except OSError as e:  # nothing ran: say why in one line
        import errno

        size = sum(len(os.fsencode(a)) + 1 for a in argv)
        hint = (
            f"the command line is {size:,} bytes: lower max_masks in your config.toml (each mask is an argument)"
            if e.errno == errno.E2BIG
            else "check that it is installed and executable"
        )
        raise UnavailableError(f"cannot start {argv[0]}: {e.strerror}", hint) from None


class SlowNotice:
    """A status line on the terminal only when reading the repository takes noticeably long; none otherwise."""

    delay = 0.4

    def __init__(self) -> None:
        self.status: Status | None = None
        self.armed = False

    def __enter__(self) -> SlowNotice:
        if sys.stderr.isatty() and hasattr(signal, "setitimer"):
            self.previous = signal.signal(signal.SIGALRM, self._show)
            signal.setitimer(signal.ITIMER_REAL, self.delay)
            self.armed = True
        return self

    def _show(self, signum: int, frame: object) -> None:
        from rich.console import Console

        self.status = Console(stderr=True).status("ai-sandbox: reading the repository…")
        self.status.start()

    def __exit__(self, *exc: object) -> None:
        if self.armed:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, self.previous)
        if self.status is not None:
            self.status.stop()
