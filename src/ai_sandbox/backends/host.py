"""What the backends that run the host's own commands (firejail, bwrap) share: ai-sandbox's own files as the
sandbox must show them (read-only, hidden, anchored), the directories that never get a scratch tmpfs, and the
plan a probe starts."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Mapping

from ai_sandbox.backends.plan import LaunchPlan, Settings
from ai_sandbox.errors import UnavailableError
from ai_sandbox.fs import below, inside
from ai_sandbox.paths import cache_dir, config_home, sha256, state_dir
from ai_sandbox.policy import Policy
from ai_sandbox.records import factory, record
from ai_sandbox.sockets import Sockets
from ai_sandbox.writes import Writes

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ai_sandbox.backends.protocol import Backend


@record
class OwnFiles:
    """ai-sandbox's own files, as the sandbox must show them."""

    create: list[str] = factory(list)  # config, state and cache directories: created before the launch
    protect: list[str] = factory(list)  # read-only inside
    hide: list[str] = factory(list)  # masked inside
    anchors: list[str] = factory(list)  # directories above those that the agent could rename: made mount points
    as_root: bool = False  # the agent is root: anchors are bound onto themselves (only root may `bind`)


def own_files(
    env: Mapping[str, str],
    unexpressible: Callable[[str], str | None],
    root: str = "",
    user: tuple[int, int] | None = None,
) -> OwnFiles:
    """Read-only: the config, the state and the cache (a session must not rewrite the next one's rules, its
    record of what was hidden, or the generated profile and launch check), what links in the config lead
    to (a dotfiles checkout), and the code the next launch runs — ai-sandbox's package, its environment
    (sys.prefix, the user site-packages it may live in), the interpreter's installation and the directory
    its sitecustomize links to, the shipped profiles — unless the project is a checkout of ai-sandbox itself, being worked on. Hidden: the
    parsed-config cache (parses of config files, which may be hidden ones) and the lock files (a session holding
    one would make other launches wait). Anchored: every directory
    above those that the agent could rename, since a read-only mount moves along with a renamed parent
    (`mv ~/.local ~/.l2` then a fresh ~/.local/state would have wiped the record). Refused: a link the
    agent could replace on the way to the config, state or cache directory (`~/.config -> dotfiles/…`),
    and a path firejail cannot name — skipping either would fail open."""
    import site
    import sys

    from ai_sandbox import paths

    uid, gid = user or (os.geteuid(), os.getegid())
    groups = {gid, *os.getgroups()} if user is None else {gid}
    given = (config_home(env), state_dir(env), cache_dir(env))
    for d in given:
        _no_replaceable_link(d, uid, groups)
    dirs = [os.path.realpath(d) for d in given]
    python, script = verifier()
    package = os.path.dirname(script)
    # the directory that holds the package is an entry of sys.path (an editable install's `src/`), where every import
    # the launch tries and fails (`msvcrt` in subprocess) looks too; and where this Python keeps bytecode when
    # PYTHONPYCACHEPREFIX says (often under ~/.cache): a module or .pyc planted in either ran in the next launch,
    # outside (thirtieth red team)
    code = [sys.prefix, sys.base_prefix, package, os.path.dirname(package), python, paths.shipped_dir(),
            *([sys.pycache_prefix] if sys.pycache_prefix else []), *_startup_hooks_outside(),
            *_import_path(env, root, package)]  # fmt: skip
    user_site = site.getusersitepackages() if site.ENABLE_USER_SITE else ""
    if user_site and below(package, user_site):
        code.append(user_site)  # a `pip install --user`: a .pth beside it would run at the next launch
    code = [os.path.realpath(p) for p in code if os.path.exists(p)]
    if root and _is_our_checkout(root, package):
        code = [p for p in code if not below(p, root)]
    protect: list[str] = []
    for d in sorted(set(dirs + code + _link_targets(dirs[0])), key=lambda p: (len(p), p)):  # enclosing first
        if any(below(d, p) for p in protect):
            continue
        _expressible(d, unexpressible)
        protect.append(d)
    renamable = {a for p in protect for a in _renamable_ancestors(p, uid, groups)}
    anchors = sorted(renamable - set(protect), key=lambda p: (len(p), p))
    for a in anchors:
        _expressible(a, unexpressible)
    locks = os.path.join(dirs[1], "locks")  # state.lock_path: a session holding one would stall other launches
    return OwnFiles([*dirs, locks], protect, [os.path.join(dirs[1], "parsed"), locks], anchors, uid == 0)


def _import_path(env: Mapping[str, str], root: str, package: str) -> list[str]:
    """The launcher's sys.path, where every import it tries and fails looks (`msvcrt` in subprocess), and where
    Python finds sitecustomize at its start: the directories .pth files add (pipx's shared site-packages took a
    planted `msvcrt.py` the next launch ran: thirty-first red team) as well as the installation's. Not PYTHONPATH's
    (a project's `src`, which the agent edits: doctor warns, and make install's -I ignores it), nor the directory of
    a script or the current one that Python puts first. One that holds the project refuses: read-only, it would
    leave the agent nothing to write, and writable, a `sitecustomize.py` there ran in the next launch, outside
    (thirty-second red team: a .pth of the project's own editable install, in the venv ai-sandbox runs from)."""
    import sys

    from ai_sandbox.fs import printable

    given = set()
    if not sys.flags.ignore_environment:
        given = {os.path.abspath(p) for p in env.get("PYTHONPATH", "").split(os.pathsep) if p}
    entries = [p for p in _launcher_path() if p and os.path.isabs(p) and os.path.abspath(p) not in given]
    project = os.path.realpath(root) if root else ""
    holders = [p for p in entries if project and inside(project, os.path.realpath(p))]
    if holders and not _is_our_checkout(root, package):
        raise UnavailableError(
            f"{printable(holders[0])} is on ai-sandbox's own import path (sys.path) and holds this project: a module"
            " the agent wrote there (sitecustomize.py) would run in your next launch, outside the sandbox",
            "install ai-sandbox in a venv of its own (make install), not in one that installs this project",
        )
    return [p for p in entries if p not in holders]


def _launcher_path() -> list[str]:
    """This Python's sys.path, but the script's directory or the current one that Python puts first unless
    isolated."""
    import sys

    return sys.path if sys.flags.safe_path else sys.path[1:]


def within_writes(own: OwnFiles, writes: Writes) -> OwnFiles:
    """ai-sandbox's own files under write containment: an anchor whose parent is read-only inside anyway needs
    no mount (nothing can rename it), and a writable bind or firejail's anchor for a user (read-only, then
    read-write) would re-open everything below it (`~/.local` above the state directory). The backends apply
    the anchors left in containment's order (Writes.steps)."""
    if writes.confined:
        # one that is read-only by containment is a read-only place of its own, already a mount point
        own.anchors = [a for a in own.anchors if writes.writable(os.path.dirname(a)) and writes.writable(a)]
    return own


def within_sockets(own: OwnFiles, sockets: Sockets) -> OwnFiles:
    """ai-sandbox's own files when /tmp and the runtime directory are the sandbox's own (sockets.py): nothing of the
    host's is there but the entries kept whole, so an anchor or a read-only rule elsewhere there is moot, and its
    bind would show the host's directory again (an anchor on /tmp itself, for root, put the host's /tmp back over
    the sandbox's: the launch check refused)."""

    def gone(p: str) -> bool:
        return any(p == d or below(p, d) for d in sockets.private) and not any(
            p == k or below(p, k) for k in sockets.kept
        )

    own.anchors = [a for a in own.anchors if not gone(a)]
    own.protect = [p for p in own.protect if not gone(p)]
    return own


def _startup_hooks_outside() -> list[str]:
    """Where the interpreter's startup hooks really live when its standard library only links to them:
    Debian's /usr/lib/python3.X/sitecustomize.py is a link into /etc/python3.X, which root inside could
    write, and every later launch imports it before any sandbox (found by a red team)."""
    stdlib = os.path.dirname(os.__file__)
    out = []
    for name in ("sitecustomize.py", "usercustomize.py"):
        hook = os.path.join(stdlib, name)
        if os.path.islink(hook):
            out.append(os.path.dirname(os.path.realpath(hook)))
    return out


def _is_our_checkout(root: str, package: str) -> bool:
    """The running ai-sandbox is this project's own source, `<root>/src/ai_sandbox` (a developer works on
    it, in its sandbox): then its code stays writable. Decided by where the running code is, not by a file
    in the project, which a session could write (a `name = "ai-sandbox"` line in any pyproject.toml)."""
    return os.path.realpath(package) == os.path.join(os.path.realpath(root), "src", "ai_sandbox")


def _link_targets(config: str) -> list[str]:
    """Where links in the config directory lead (config.toml, profiles/ and the profiles in it): the
    directory is read-only inside, but a link's target is not, and its rules would be the next launch's."""
    out = []
    for d in (config, os.path.join(config, "profiles")):
        try:
            names = os.listdir(d)
        except OSError:
            continue
        for name in names:
            path = os.path.join(d, name)
            if os.path.islink(path) and os.path.exists(path):
                out.append(os.path.realpath(path))
    return out


def _no_replaceable_link(path: str, uid: int, groups: set[int]) -> None:
    """Refuse when a link the agent could replace lies on the way to one of ai-sandbox's directories: the
    read-only mount covers the link's target, and a session could point the link (or put a directory)
    elsewhere for the next launch."""
    p = os.path.abspath(path)
    while p not in ("/", ""):
        if os.path.islink(p) and _renamable(p, uid, groups):
            raise UnavailableError(
                f"{p} is a symlink (to {os.path.realpath(p)}) that a session could replace, giving the next "
                "launch other rules or no record of what was hidden",
                "replace the link by the directory it points to, or point the XDG_* variable at the target",
            )
        p = os.path.dirname(p)


def _expressible(path: str, unexpressible: Callable[[str], str | None]) -> None:
    why = unexpressible(path)
    if why is not None:
        raise UnavailableError(
            f"cannot protect {path} inside the sandbox: its path {why}",
            "point XDG_CONFIG_HOME / XDG_STATE_HOME / XDG_CACHE_HOME (or HOME), or ai-sandbox's install, at a simpler path",
        )


def _renamable_ancestors(path: str, uid: int, groups: set[int]) -> list[str]:
    """The directories above path (not /) that this user — the agent's user, capabilities dropped — could
    rename; those not made yet are made by the launch, as this user."""
    out = []
    p = os.path.dirname(path)
    while p not in ("/", ""):
        if not os.path.lexists(p) or _renamable(p, uid, groups):
            out.append(p)
        p = os.path.dirname(p)
    return out


def _renamable(p: str, uid: int, groups: set[int]) -> bool:
    """Whether uid (without capabilities) may rename or replace p: its parent is writable to it by the mode
    bits, and no sticky bit shields p."""
    try:
        st, parent = os.lstat(p), os.stat(os.path.dirname(p))
    except OSError:
        return False
    mode = parent.st_mode
    writable = (parent.st_uid == uid and mode & 0o200) or (parent.st_gid in groups and mode & 0o020) or mode & 0o002
    sticky_shield = mode & 0o1000 and uid not in (st.st_uid, parent.st_uid)
    return bool(writable and not sticky_shield)


def never_scratch(policy: Policy) -> Callable[[str], bool]:
    """Which hidden directories never get a scratch tmpfs, whoever could mount one:
    - one that holds a hidden tracked file, at any depth: git must find the file where it was; in an empty
      scratch it is missing, which git takes for a sparse entry, and `git checkout <branch>` would succeed and
      leave the old file behind (red team);
    - one of another checkout of the repository (policy.checkouts): what git writes there from a session of this
      one (a checkout, a merge) would vanish at exit, and only this checkout's are named afterwards (unwritten.py;
      found by the model); a read-only mask makes git refuse instead."""
    holding = {os.path.dirname(p) for p in policy.tracked}
    for d in list(holding):
        while (d := os.path.dirname(d)) not in holding and d != "/":
            holding.add(d)
    others = tuple(policy.checkouts)
    return lambda path: path in holding or any(below(path, c) or path == c for c in others)


@contextlib.contextmanager
def probe_plan(make: Callable[[Settings], Backend], env: Mapping[str, str]) -> Iterator[tuple[str, LaunchPlan]]:
    """(temp dir, plan) of a sandbox that hides one temp file and runs `true`, its files written: what a
    backend's probe starts. The temp dir is removed afterwards."""
    import shutil  # the probe's only: shutil brings bz2 and lzma, ~3 ms of a launch that has a verdict already
    import tempfile

    from ai_sandbox.fs import make_dirs, write_files
    from ai_sandbox.policy import GLOBAL, Mask

    base = tempfile.mkdtemp(prefix="ai-sandbox-probe-")
    try:
        secret = os.path.join(base, "secret")
        with open(secret, "w"):
            pass
        policy = Policy(root=base, in_git=False, masks=[Mask(secret, False, GLOBAL, "probe")])
        # a network of its own and the sandbox's own /tmp, as every launch by default: a backend that cannot give
        # them here must not be the one `auto` picks (network.py, sockets.py)
        import sys

        from ai_sandbox import network, sockets

        python, script = verifier()
        needed = [base, python, script, sys.prefix, sys.base_prefix, config_home(env), state_dir(env), cache_dir(env)]
        policy.network = network.Network(mode="off", why="probe")
        policy.sockets = sockets.plan(env, os.geteuid(), [*needed, env.get("HOME", "")], found=[])
        plan = make(Settings(cwd=base)).plan(policy, [shutil.which("true") or "/bin/true"], env)
        make_dirs(plan.dirs)
        write_files(plan.files)
        yield base, plan
    finally:
        shutil.rmtree(base, ignore_errors=True)


def compiled_verifier(cache: str) -> tuple[str, bytes] | None:
    """verify.py as the bytecode this process imported it from, and where its copy goes in the cache (read-only
    inside): the launch check then runs from it and skips compiling ~750 lines in every sandbox (~5 ms). Only a
    timestamp .pyc that matches the source by Python's own import test (its mtime and size); None otherwise
    (a stale .pyc an install could not rewrite, hash-based or optimized bytecode), and the source runs."""
    import sys

    from ai_sandbox import verify

    cached = getattr(verify, "__cached__", None)
    bootstrap = sys.modules.get("_frozen_importlib_external")
    if not cached or sys.flags.optimize or bootstrap is None:
        return None
    try:
        with open(cached, "rb") as f:
            data = f.read()
        st = os.stat(verify.__file__)
    except OSError:
        return None
    header = (bootstrap.MAGIC_NUMBER, b"\0\0\0\0", (int(st.st_mtime) & 0xFFFFFFFF).to_bytes(4, "little"),
              (st.st_size & 0xFFFFFFFF).to_bytes(4, "little"))  # fmt: skip
    if data[:16] != b"".join(header):
        return None
    return os.path.join(cache, f"verify-{sha256(data).hexdigest()[:24]}.pyc"), data


def verifier() -> tuple[str, str]:
    """The interpreter and the script of the launch check. The base interpreter, not the venv's link to
    it: with -I -S only the standard library is used, and a project's ignored .venv may be hidden."""
    import sys

    python = os.path.realpath(sys.executable)
    return python, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "verify.py")
