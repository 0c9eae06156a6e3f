r"""The firejail backend: the policy becomes a generated profile file, the agent runs under it.

Facts this relies on, measured with firejail 0.9.72 and proved by tests/integration: a profile file (firejail
refuses more than ~120 arguments, and `--profile` loads no system profile); names firejail rejects (`,"\{};&%<>!^`,
control characters, `..`), reads as globs (`*?[]`) or comments (`#`), or changes (runs of blanks collapsed,
trailing blanks dropped), all widened by the policy; root bypassing file modes (hence `caps.drop all`). The sandbox's command is not the agent but the launch check (verify.py): it proves every
mask and read-only rule is in force, then execs the agent with the caller's exact environment (firejail's
setuid start strips and adds variables).
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Mapping

from ai_sandbox import network, tools
from ai_sandbox.backends.check import checked
from ai_sandbox.backends.host import (
    OwnFiles,
    never_scratch,
    own_files,
    probe_plan,
    within_sockets,
    within_writes,
)
from ai_sandbox.backends.plan import LaunchPlan, Settings
from ai_sandbox.errors import PolicyError, UnavailableError
from ai_sandbox.fs import below
from ai_sandbox.idents import Snapshot
from ai_sandbox.paths import cache_dir, sha256
from ai_sandbox.policy import Policy
from ai_sandbox.sockets import Sockets

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


RUN_MNT = "/run/firejail/mnt"  # firejail's own state in the sandbox
_GLOB = re.compile(r"[*?\[\]]")
_X11 = "/tmp/.X11-unix"  # X servers' sockets: firejail's private-tmp binds them back


def _x11(sockets: Sockets) -> list[str]:
    """The X servers' sockets, which firejail's private /tmp shows again: masked (the launch check proves it)."""
    if sockets.tmp and os.path.lexists(_X11) and not any(k == _X11 or below(_X11, k) for k in sockets.kept):
        return [_X11]
    return []


_PRIVATE = ("/proc", "/dev", "/sys", "/run/firejail")  # firejail's own, or read-only by its own rules


def _other_writable_mounts(policy: Policy) -> list[str]:
    """The host's writable mounts a `read-only /` leaves writable: firejail's recursive remount skips some
    (measured: a shared bind at /run/netns stayed writable), so each gets a line of its own. Only where
    write containment makes the whole system read-only (root)."""
    from ai_sandbox.verify import writable_mounts

    try:
        points = writable_mounts()
    except OSError:
        return []
    out = []
    for point in points:
        if point == "/" or any(point == d or below(point, d) for d in _PRIVATE):
            continue
        if policy.writes.writable(point) or _SUSPECT.search(point):
            continue  # a place the agent writes anyway; a name firejail cannot take is refused by the check
        out.append(point)
    return sorted(set(out), key=lambda p: (p.count("/"), p))


class Firejail:
    name = "firejail"
    host_commands = True
    # A mount per mask; the kernel refuses past fs.mount-max (100,000) and firejail's start grows faster
    # than linearly (measured: 10,000 masks 0.4 s, 30,000 1.6 s, 60,000 4.7 s, 110,000 fails).
    max_masks = 30_000
    # What firejail replaces with empty directories of its own (`private-dev`; /var/tmp is always private): a
    # project there is not in the sandbox at all, and the agent would start in $HOME instead.
    private_dirs: tuple[str, ...] = ("/dev/shm", "/var/tmp", "/dev")

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
        kept = never_scratch(policy)
        for m in policy.masks:
            if not m.is_dir or len(out) >= MAX_SCRATCH or kept(m.path):
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
            # the agent's status, as under bwrap: by default firejail exits with the last process's (0 when the agent
            # died of a SIGHUP a background job outlived: forty-fourth red team). Not deterministic-shutdown, which
            # would end the sandbox with the agent as bwrap does: it costs every launch 100 ms (measured, `true`)
            b"deterministic-exit-code",
        ]
        lines += self.private_sockets(policy.sockets)
        # the sandbox's own runtime directory, writable whatever order firejail mounts its whitelist tmpfs and the
        # read-only rules in (the agent's own sockets go there)
        uid = self.user[0] if self.user else os.geteuid()
        late = [b"read-write " + os.fsencode(r) for r in policy.sockets.runtime if r == f"/run/user/{uid}"]
        if policy.network.private:  # a network namespace of its own, with only its loopback (network.py)
            lines.append(b"net none")
            if policy.network.mode == "allowlist":
                lines.append(b"keep-fd %d" % network.FD)  # the proxy's channel: the launch check sends it the sockets
        # firejail runs `bind` lines in profile order and then sets the target's owner and mode, which fails
        # (and ends the start) on a read-only target: root's anchors are bound before anything is read-only
        binds = [b"bind " + os.fsencode(a) + b"," + os.fsencode(a) for a in own.anchors] if own.as_root else []
        confined = policy.writes.confined
        lines += binds + self.containment(policy, [] if own.as_root else own.anchors)
        # Before the masks: firejail reads the whole mount table for each read-only line (measured: 5
        # lines after 6,000 masks cost 200 ms, before them nothing). An anchor is made a mount point, so
        # a directory above ai-sandbox's own cannot be renamed (EBUSY): as root by binding it onto itself
        # (firejail applies binds before masks, measured), otherwise read-only then writable again (a
        # user may only do that to its own directories; one it does not own stays read-only, still
        # anchored). firejail ignores read-write on /tmp, so that pair alone would not do for root.
        for path in [] if own.as_root or confined else own.anchors:
            p = os.fsencode(path)
            lines += [b"read-only " + p, b"read-write " + p]
        for path in own.protect:
            lines.append(b"read-only " + os.fsencode(path))
        if confined:
            lines += late
        # After the anchors and read-only lines (a read-only line after a tmpfs would make it read-only), before
        # the masks: each tmpfs costs a read of the mount table, and a mask folded into it cannot exist.
        for path in scratch:
            lines.append(b"tmpfs " + os.fsencode(path))
        chosen = set(scratch)
        for path in [*(m.path for m in policy.masks if m.path not in chosen), *own.hide]:
            lines.append(b"blacklist " + os.fsencode(path))
        return b"\n".join(lines) + b"\n"

    def private_sockets(self, sockets: Sockets) -> list[bytes]:
        """The host's unix sockets out of reach (sockets.py). private-tmp: a tmpfs on /tmp, where firejail binds
        back, read-only, the X11 sockets' directory (masked: `plan` hides it) and each `whitelist` (what the launch
        needs of /tmp, whole; the sockets the user passes, alone). A whitelist under /run/user/UID makes it a tmpfs of
        its own with only that (one that does not exist: empty); another runtime directory is masked. The other
        sockets are masks (`blacklist`, which masks a socket as it does a file)."""
        out: list[bytes] = []
        uid = self.user[0] if self.user else os.geteuid()
        named = []
        if sockets.tmp:
            out.append(b"private-tmp")
            named += list(sockets.kept)
        own_runtime = f"/run/user/{uid}"
        for runtime in sockets.runtime:
            if runtime == own_runtime:
                named.append(os.path.join(runtime, ".ai-sandbox-empty"))
            elif not (sockets.tmp and below(runtime, "/tmp") and not any(below(runtime, k) for k in sockets.kept)):
                out.append(b"blacklist " + os.fsencode(runtime))  # not one gone with the host's /tmp
        for p in sockets.passed:
            inside = (sockets.tmp and below(p, "/tmp")) or (own_runtime in sockets.runtime and below(p, own_runtime))
            if inside and not any(p == k or below(p, k) for k in sockets.kept):
                named.append(p)
        for p in named:
            why = self.unexpressible(p) or ("contains a glob character" if _GLOB.search(p) else None)
            if why is not None:
                raise PolicyError(
                    f"cannot keep {p} in the sandbox's own /tmp under firejail: it {why}",
                    "rename it, or use --backend bwrap",
                )
            out.append(b"whitelist " + os.fsencode(p))
        return out

    def containment(self, policy: Policy, anchors: list[str]) -> list[bytes]:
        """Write containment's lines (writes.py), outermost first: firejail applies read-only and read-write in
        profile order, each over everything below it, so the most specific wins (measured). An anchor is made a
        mount point by read-only then read-write (a user may do that to its own directories only: firejail skips
        others with a warning, and the launch check then refuses; `bind` would fail on a target firejail made
        read-only, /usr). Refused where firejail cannot name a place exactly: it reads `*?[]` as globs (a rule
        would reach the siblings they match) and rejects other characters."""
        out: list[bytes] = []
        if not policy.writes.confined:
            return []
        for kind, path in policy.writes.steps(anchors):
            why = self.unexpressible(path) or ("contains a glob character" if _GLOB.search(path) else None)
            if why is not None:
                raise PolicyError(
                    f"cannot confine writes under firejail: {path} {why}, which a firejail rule cannot name exactly",
                    "rename it, use --backend bwrap, or set confine_writes = false (see docs/writes.md)",
                )
            p = os.fsencode(path)
            if kind == "ro":
                out.append(b"read-only " + p)
                if path == "/":
                    out += [b"read-only " + os.fsencode(m) for m in _other_writable_mounts(policy)]
                    # firejail writes its own state there after these lines (0.9.74: "cannot save umask", exit 1,
                    # on Debian 13), and 0.9.72 mounts it later: writable, as firejail leaves it
                    out.append(b"read-write " + RUN_MNT.encode())
            elif kind == "rw":
                out.append(b"read-write " + p)
            else:
                out += [b"read-only " + p, b"read-write " + p]
        return out

    def plan(self, policy: Policy, argv: list[str], env: Mapping[str, str], seen: Snapshot | None = None) -> LaunchPlan:
        from ai_sandbox import idents, supervise, verify

        seen = seen or idents.take(policy)
        own = within_writes(own_files(env, self.unexpressible, policy.root, self.user), policy.writes)
        own = within_sockets(own, policy.sockets)
        own.hide = [*own.hide, *policy.sockets.masked, *_x11(policy.sockets)]
        scratch = self.scratch(policy)
        content = self.profile(policy, own, scratch)
        digest = sha256(content).hexdigest()[:24]
        base = cache_dir(env)
        profile_path = os.path.join(base, f"firejail-{digest}.profile")
        cwd = os.path.realpath(self.settings.cwd or os.getcwd())
        return LaunchPlan(
            sandbox=[self.executable or "firejail", "--quiet", f"--profile={profile_path}", "--"],
            agent=argv,
            check=checked(policy, own, cwd, scratch, env, self.name, seen),
            env={**verify.carried(dict(env), seen.when), verify.IGNORED_ENV: supervise.caller_ignored()},
            extra_files={profile_path: content},
            dirs=dict.fromkeys([*own.create, *policy.writes.make], 0o700),
            scratch=scratch,
            supervised=True,
            to_backend=(2, 15),  # SIGINT, SIGTERM: firejail gives the agent a SIGTERM, then ends the sandbox
            outlives=True,
        )
