"""The firejail backend: the policy becomes a generated profile file, the agent runs under it.

Facts this relies on are measured in lab-notes.md and proved by tests/integration: a profile file
(firejail refuses more than ~120 arguments, and `--profile` loads no system profile); names firejail
rejects, reads as globs or comments, or changes (runs of blanks); root bypassing file modes (hence
`caps.drop all`). The sandbox's command is not the agent but the launch check (verify.py): it proves every
mask and read-only rule is in force, then execs the agent with the caller's exact environment (firejail's
setuid start strips and adds variables).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import stat
from collections.abc import Callable, Iterator, Mapping

from ai_sandbox import tools
from ai_sandbox.backends import LaunchPlan, Settings
from ai_sandbox.errors import PolicyError, UnavailableError
from ai_sandbox.fs import below
from ai_sandbox.idents import Snapshot
from ai_sandbox.paths import cache_dir, config_home, state_dir
from ai_sandbox.policy import Policy
from ai_sandbox.records import factory, record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ai_sandbox.backends.protocol import Backend

# firejail rejects paths with these; `#` starts a comment in a profile line
_REJECTED = frozenset(',"\\{};&%<>!^#')
MAX_SCRATCH = 32  # hidden directories given a tmpfs of the session; the rest are read-only masks
_MAX_PATH = 4000  # firejail refuses longer arguments; keep profile lines well inside its buffers
_SUSPECT = re.compile(r'[,"\\{};&%<>!^#\[\]\x00-\x1f\x7f]|\.\.|[ \t]$|  ')


def install_hint() -> str:
    return tools.install_hint("firejail", "https://firejail.wordpress.com")


_BY_HAND = "see firejail's own error: `firejail --noprofile true`"


def refused_user(users_file: str, uid: int | None = None) -> UnavailableError | None:
    """firejail's own user check, before firejail refuses with several lines and exit 1 (firejail-users(5)):
    root may always, nobody never, anyone else only where firejail.users is absent or names them (one name a
    line, # starts a comment). A stat when the file is absent, as it is by default."""
    import pwd

    uid = os.getuid() if uid is None else uid  # firejail asks the real uid
    if uid == 0:
        return None
    try:
        name = pwd.getpwuid(uid).pw_name
    except KeyError:
        name = str(uid)
    if name != "nobody":
        try:
            with open(users_file, "rb") as f:
                names = {ln.rstrip(b"\n").decode("utf-8", "replace") for ln in f if not ln.startswith(b"#")}
        except FileNotFoundError:
            return None
        except OSError:
            names = set()
        if name in names:
            return None
    return UnavailableError(
        f"firejail refuses user {name}: {users_file} does not name it",
        f"add it with `sudo firecfg --add-users {name}` (or a line `{name}` in that file), or use --backend bwrap",
    )


class Firejail:
    name = "firejail"
    host_commands = True
    # A mount per mask; the kernel refuses past fs.mount-max (100,000) and firejail's start grows faster
    # than linearly (measured: 10,000 masks 0.4 s, 30,000 1.6 s, 60,000 4.7 s, 110,000 fails).
    max_masks = 30_000

    def __init__(self, settings: Settings | None = None, user: tuple[int, int] | None = None) -> None:
        self.executable = tools.find("firejail")
        self.settings = settings or Settings()
        self.user = user  # (uid, gid) the sandbox runs as, when not this process's (tests plan for another user)
        etc = "/usr/local/etc/firejail" if (self.executable or "").startswith("/usr/local/") else "/etc/firejail"
        self.users_file = os.path.join(etc, "firejail.users")
        self.state_files: tuple[str, ...] = (self.users_file, os.path.join(etc, "firejail.config"), "/etc/login.defs")

    def unavailable(self) -> UnavailableError | None:
        if self.executable is None:
            return UnavailableError(f"firejail is not installed (looked in {tools.where()})", install_hint())
        if not os.access(self.executable, os.X_OK):
            st = os.stat(self.executable)
            return UnavailableError(
                f"this user may not run {self.executable} (mode {stat.filemode(st.st_mode)}, group {st.st_gid})",
                "add the user to that group (then log in again), or use --backend bwrap",
            )
        return refused_user(self.users_file)

    def probe(self, env: Mapping[str, str]) -> UnavailableError | None:
        """Start a real sandbox that hides a temp file and runs the launch check: firejail can be installed
        and still not sandbox (inside a container it runs commands without one). Seconds at worst, so
        for doctor, explain and --dry-run; a launch proves itself with its own check."""
        import subprocess

        from ai_sandbox import nested, verify

        err = self.unavailable() or nested.chroot_error(self.name)
        if err is not None:
            return err
        with probe_plan(Firejail, env) as (base, plan):
            try:
                proc = subprocess.run(
                    plan.argv, env=plan.env, capture_output=True, timeout=60, stdin=subprocess.DEVNULL, cwd=base
                )
            except (OSError, subprocess.TimeoutExpired) as e:
                return UnavailableError(f"firejail does not start here: {e}", _BY_HAND)
        if proc.returncode == 0:
            return None
        text = proc.stderr.decode("utf-8", "replace")
        if verify.NOT_SANDBOXED in text:
            return UnavailableError(
                "firejail does not sandbox here (existing sandbox / container detected)", verify.NOT_SANDBOXED_HINT
            )
        last = (text.strip().splitlines() or [f"exit status {proc.returncode}"])[-1]
        return UnavailableError(f"firejail does not start here: {last}", _BY_HAND)

    def version(self) -> str | None:
        return tools.version(self.executable)

    def unexpressible(self, path: str) -> str | None:
        if len(path) < _MAX_PATH // 4 and not _SUSPECT.search(path):
            return None  # the common case, answered by one regex; the reasons below are for the rest
        if len(os.fsencode(path)) > _MAX_PATH:
            return f"is longer than {_MAX_PATH} bytes"
        bad = sorted({c for c in path if c in _REJECTED})
        if bad:
            return f"contains {' '.join(repr(c) for c in bad)}, which firejail cannot express"
        if any(ord(c) < 32 or ord(c) == 127 for c in path):
            return "contains a control character, which firejail cannot express"
        if ".." in path:
            return "contains '..', which firejail rejects"
        if "[" in path or "]" in path:
            return "contains '[' or ']', which firejail reads as a glob"
        if path[-1] in " \t":
            return "ends with a blank, which a firejail profile drops"
        if "  " in path:
            return "contains a run of blanks, which firejail's profile parser collapses into one"
        return None

    def scratch(self, policy: Policy) -> list[str]:
        """The hidden directories shown inside as an empty, writable tmpfs of the session (writes into them
        never reach the host and are gone at exit) rather than as a read-only mask.

        firejail mounts a tmpfs for root anywhere, and for a user only on a directory the user owns under the
        home directory /etc/passwd names; elsewhere it skips the line without a word (measured; the launch
        check would then refuse). A tmpfs takes the directory's owner and mode, and root inside has no
        CAP_DAC_OVERRIDE: so only directories the agent's identity owns, and at most MAX_SCRATCH of them
        (each tmpfs costs a read of the mount table: 100 cost 30 ms, 1,000 1.2 s)."""
        uid = self.user[0] if self.user else os.geteuid()
        home = ""
        if uid != 0:
            import pwd  # only when a user may get scratch directories

            try:
                home = os.path.realpath(pwd.getpwuid(uid).pw_dir)
            except KeyError:
                return []
            if home == "/":
                return []
        out: list[str] = []
        holds_tracked = holding_tracked(policy)
        for m in policy.masks:
            if not m.is_dir or len(out) >= MAX_SCRATCH or m.path in holds_tracked:
                continue
            if home and not below(m.path, home):
                continue
            try:
                st = os.lstat(m.path)
            except OSError:
                continue
            if stat.S_ISDIR(st.st_mode) and st.st_uid == uid and st.st_mode & 0o700 == 0o700:
                out.append(m.path)  # the tmpfs takes this mode: one its owner cannot list or write is no scratch
        return out

    def profile(self, policy: Policy, own: OwnFiles | None = None, scratch: list[str] | None = None) -> bytes:
        own = own or OwnFiles()
        scratch = scratch or []
        lines = [
            b"# generated by ai-sandbox: the masks of one policy; never edited by hand",
            b"quiet",
            b"caps.drop all",  # root would otherwise read through the masks or unmount them
            b"nonewprivs",
            b"private-dev",  # block devices would let root read the disk under every mask
            # firejail remounts /etc and /var read-only (noexec for users) by default; the agent should
            # find the system as it is outside. Only /var/tmp stays private: no option turns that off.
            b"writable-etc",
            b"writable-var",
            b"writable-var-log",
        ]
        # Before the masks: firejail reads the whole mount table for each read-only line (measured: 5
        # lines after 6,000 masks cost 200 ms, before them nothing). An anchor is made a mount point, so
        # a directory above ai-sandbox's own cannot be renamed (EBUSY): as root by binding it onto itself
        # (firejail applies binds before masks, measured), otherwise read-only then writable again (a
        # user may only do that to its own directories; one it does not own stays read-only, still
        # anchored). firejail ignores read-write on /tmp, so that pair alone would not do for root.
        for path in own.anchors:
            p = os.fsencode(path)
            lines += [b"bind " + p + b"," + p] if own.as_root else [b"read-only " + p, b"read-write " + p]
        for path in own.protect:
            lines.append(b"read-only " + os.fsencode(path))
        # After the anchors and read-only lines (a read-only line after a tmpfs would make it read-only), before
        # the masks: each tmpfs costs a read of the mount table, and a mask folded into it cannot exist.
        for path in scratch:
            lines.append(b"tmpfs " + os.fsencode(path))
        chosen = set(scratch)
        for path in [*(m.path for m in policy.masks if m.path not in chosen), *own.hide]:
            lines.append(b"blacklist " + os.fsencode(path))
        return b"\n".join(lines) + b"\n"

    def plan(self, policy: Policy, argv: list[str], env: Mapping[str, str], seen: Snapshot | None = None) -> LaunchPlan:
        from ai_sandbox import idents, verify

        seen = seen or idents.take(policy)
        own = own_files(env, self.unexpressible, policy.root, self.user)
        scratch = self.scratch(policy)
        content = self.profile(policy, own, scratch)
        digest = hashlib.sha256(content).hexdigest()[:24]
        base = cache_dir(env)
        profile_path = os.path.join(base, f"firejail-{digest}.profile")
        cwd = os.path.realpath(self.settings.cwd or os.getcwd())
        check_argv, check_path, check = checked(policy, own, cwd, scratch, env, seen=seen)
        command = [self.executable or "firejail", "--quiet", f"--profile={profile_path}", "--", *check_argv, *argv]
        return LaunchPlan(
            argv=command,
            env=verify.carried(dict(env), seen.when),
            files={profile_path: content, check_path: check},
            dirs=dict.fromkeys(own.create, 0o700),
            scratch=scratch,
        )


def checked(
    policy: Policy,
    own: OwnFiles,
    cwd: str,
    scratch: list[str],
    env: Mapping[str, str],
    backend: str = "firejail",
    seen: Snapshot | None = None,
) -> tuple[list[str], str, bytes]:
    """The sandbox's command before the agent's argv (the launch check), its spec's path and bytes. Refused
    when the policy hides the interpreter, the script or the spec: the check needs them inside."""
    check = launch_check(policy, own, cwd, scratch, backend, seen)
    check_path = os.path.join(cache_dir(env), f"check-{hashlib.sha256(check).hexdigest()[:24]}")
    python, script = verifier()
    for path in (python, script, check_path):
        if (m := policy.hidden(path)) is not None:
            raise PolicyError(
                f"{path} is hidden by the policy ({m.reason}), and the launch check needs it inside",
                "narrow the rule that hides it",
            )
    # -I: isolated (no PYTHON* variable, no user site, no cwd on sys.path); -S: no site, stdlib only, ~2 ms less
    return [python, "-I", "-S", script, check_path], check_path, check


def holding_tracked(policy: Policy) -> set[str]:
    """The directories that hold a hidden tracked file, at any depth: never a scratch directory. git must find
    the file where it was: in an empty scratch it is missing, which git takes for a sparse entry, and `git
    checkout <branch>` would succeed and leave the old file behind (red team)."""
    out = {os.path.dirname(p) for p in policy.tracked}
    for d in list(out):
        while (d := os.path.dirname(d)) not in out and d != "/":
            out.add(d)
    return out


@contextlib.contextmanager
def probe_plan(make: Callable[[Settings], Backend], env: Mapping[str, str]) -> Iterator[tuple[str, LaunchPlan]]:
    """(temp dir, plan) of a sandbox that hides one temp file and runs `true`, its files written: what a
    backend's probe starts. The temp dir is removed afterwards."""
    import tempfile

    from ai_sandbox.fs import make_dirs, write_files
    from ai_sandbox.policy import GLOBAL, Mask

    base = tempfile.mkdtemp(prefix="ai-sandbox-probe-")
    try:
        secret = os.path.join(base, "secret")
        with open(secret, "w"):
            pass
        policy = Policy(root=base, in_git=False, masks=[Mask(secret, False, GLOBAL, "probe")])
        plan = make(Settings(cwd=base)).plan(policy, [shutil.which("true") or "/bin/true"], env)
        make_dirs(plan.dirs)
        write_files(plan.files)
        yield base, plan
    finally:
        shutil.rmtree(base, ignore_errors=True)


def launch_check(
    policy: Policy,
    own: OwnFiles,
    cwd: str,
    scratch: list[str] | None = None,
    backend: str = "firejail",
    seen: Snapshot | None = None,
) -> bytes:
    """The spec verify.py checks inside the sandbox: which sandbox must be there, every mask, every scratch
    directory, every read-only rule, every anchor, the start directory.

    A mask in the project or the home that existed when the launch looked is an M record: gone when the check
    runs, it was moved or deleted while the sandbox started (a rename of its directory in that window left the
    secret readable under the new name, with no mask and no watcher to notice: red team), and the launch
    refuses. Others are m records: a missing one is nothing to read (a global block of a path that is not
    there, or a path the sandbox itself replaces, like firejail's /var/tmp). Every mask and scratch directory
    whose directory existed also gets an S record: the device and inode the launch saw (seen, the launch's one
    look: idents.py), which the mask inside must be on (a directory swapped for a decoy while the sandbox
    started put the mask on the decoy: red team, F2)."""
    from ai_sandbox import idents, verify

    seen = seen or idents.take(policy)
    chosen = set(scratch or ())
    home = os.path.realpath(os.path.expanduser("~"))
    recs = [b"K" + backend.encode(), b"W" + os.fsencode(cwd)]
    for p in [*(m.path for m in policy.masks if m.path not in chosen), *own.hide]:
        there = seen.files.get(p) if p in seen.files else idents.ident(p)
        near = below(p, policy.root) or (home != "/" and below(p, home))
        recs.append((b"M" if there is not None and near else b"m") + os.fsencode(p))
    recs += [b"T" + os.fsencode(p) for p in scratch or ()]
    for p in [*(m.path for m in policy.masks), *(scratch or ())]:
        d = seen.dirs.get(idents.dirname(p), idents.NONE)
        if d != idents.NONE:
            f = seen.files.get(p)
            recs.append(b"S" + (b"%d:%d" % f if f is not None else b"-:-") + b":" + d + b":" + os.fsencode(p))
    recs += [b"R" + os.fsencode(p) for p in own.protect]
    recs += [b"B" + os.fsencode(p) for p in own.anchors]
    if policy.hidden(cwd) is None:
        try:
            st = os.stat(cwd)
            recs.append(b"C" + f"{st.st_dev}:{st.st_ino}:".encode() + os.fsencode(cwd))
        except OSError:
            pass
    return verify.HEADER + b"\0".join(recs) + b"\0"


def verifier() -> tuple[str, str]:
    """The interpreter and the script of the launch check. The base interpreter, not the venv's link to
    it: with -I -S only the standard library is used, and a project's ignored .venv may be hidden."""
    import sys

    python = os.path.realpath(sys.executable)
    return python, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "verify.py")


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
    parsed-config cache (parses of config files, which may be hidden ones). Anchored: every directory
    above those that the agent could rename, since a read-only mount moves along with a renamed parent
    (`mv ~/.local ~/.l2` then a fresh ~/.local/state would have wiped the record). Refused: a link the
    agent could replace on the way to the config, state or cache directory (`~/.config -> dotfiles/…`),
    and a path firejail cannot name — skipping either would fail open."""
    import site
    import sys

    from ai_sandbox.profiles import shipped_dir

    uid, gid = user or (os.geteuid(), os.getegid())
    groups = {gid, *os.getgroups()} if user is None else {gid}
    given = (config_home(env), state_dir(env), cache_dir(env))
    for d in given:
        _no_replaceable_link(d, uid, groups)
    dirs = [os.path.realpath(d) for d in given]
    python, script = verifier()
    package = os.path.dirname(script)
    code = [sys.prefix, sys.base_prefix, package, python, shipped_dir(), *_startup_hooks_outside()]
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
    return OwnFiles(dirs, protect, [os.path.join(dirs[1], "parsed")], anchors, uid == 0)


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
