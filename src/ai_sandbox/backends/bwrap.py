"""The bubblewrap backend: the policy becomes bwrap's arguments and the launch check's masks.

No setuid (bwrap runs as the caller; a user gets a user namespace), and every path is named exactly: no
name is widened. Facts this relies on (measured with bubblewrap 0.8, proved by the tests run against this
backend): the
host is bound whole (`--dev-bind / /`) with a private /proc (own pid namespace: no host process, and so no
/proc/PID/root, is visible) and a minimal /dev of our own; the system directories and ai-sandbox's own files
read-only, as under firejail. bwrap rereads the mount table after each bind it makes (1,000 masks: 2.3 s),
so the masks are mounted by the launch check inside (verify.mount_masks: an empty read-only file or tmpfs
of mode 0000 each, never a path created on the host), which then drops every capability and proves the
masks in force before it execs the agent. Arguments travel through `--args 3`. bwrap forwards no signals:
the launch supervises it (supervise.py).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping

from ai_sandbox import tools
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
from ai_sandbox.errors import UnavailableError
from ai_sandbox.fs import below
from ai_sandbox.idents import Snapshot
from ai_sandbox.policy import Policy
from ai_sandbox.sockets import Sockets
from ai_sandbox.writes import Writes

# Read-only inside, as firejail makes them: a root agent (no capabilities, but the owner) could otherwise
# replace /usr/bin/bwrap or git, and the next launch would run whatever it left there.
# /proc/sys and /sys too: root (no capability, but the owner) could set kernel.core_pattern to a program the
# kernel then runs as root outside every namespace (red team), or write devices' sysfs files.
SYSTEM_READ_ONLY = (
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/boot",
    "/sys", "/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus", "/proc/fs",
)  # fmt: skip
DEV_NODES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty")
DEV_LINKS = (
    ("/dev/ptmx", "pts/ptmx"),  # the launch check mounts a devpts of the sandbox's own on /dev/pts
    ("/dev/fd", "/proc/self/fd"),
    ("/dev/stdin", "/proc/self/fd/0"),
    ("/dev/stdout", "/proc/self/fd/1"),
    ("/dev/stderr", "/proc/self/fd/2"),
    ("/dev/core", "/proc/kcore"),
)
ARGS_FD = 3  # bwrap reads its NUL-separated arguments here
# bwrap counts its arguments, --args included, and refuses past 9,000: four per scratch directory, the rest
# masks (a tmpfs each: 1,000 cost 0.14 s)
MAX_SCRATCH = 1_000
_MAX_PATH = 4095  # PATH_MAX less the NUL: the kernel refuses longer paths


def install_hint() -> str:
    return tools.install_hint("bubblewrap", "https://github.com/containers/bubblewrap")


BY_HAND = "see bwrap's own error: `bwrap --dev-bind / / --unshare-pid true`"


def _or_firejail() -> str:
    """The other way out, when it is one: firejail is setuid and needs no user namespace."""
    return "" if tools.find("firejail") else "; or install firejail"


def userns_hint() -> str:
    """What to enable when unprivileged user namespaces do not work here."""
    try:
        with open("/proc/sys/kernel/apparmor_restrict_unprivileged_userns", "rb") as f:
            if f.read().strip() == b"1":
                return (
                    "AppArmor restricts unprivileged user namespaces here (Ubuntu 24.04+): "
                    "`sudo sysctl kernel.apparmor_restrict_unprivileged_userns=0`, or an AppArmor profile for bwrap "
                    "allowing `userns`" + _or_firejail()
                )
    except OSError:
        pass
    for knob, off in (
        ("/proc/sys/kernel/unprivileged_userns_clone", b"0"),
        ("/proc/sys/user/max_user_namespaces", b"0"),
    ):
        try:
            with open(knob, "rb") as f:
                if f.read().strip() == off:
                    name = knob.removeprefix("/proc/sys/").replace("/", ".")
                    return f"user namespaces are disabled: `sudo sysctl {name}=1` (or more)" + _or_firejail()
        except OSError:
            pass
    return (
        "user namespaces are not available here (inside a container, run it with --security-opt seccomp=unconfined "
        "or use firejail/the docker backend on the host)" + _or_firejail()
    )


SECCOMP_FD = 4  # bwrap loads the classic BPF program read here
TIOCSTI, TIOCLINUX = 0x5412, 0x541C
# (AUDIT_ARCH_*, ioctl's syscall numbers on it): x86-64 (and its x32 ABI), i386, aarch64, arm
_IOCTL = ((0xC000003E, (16, 0x40000000 | 514)), (0x40000003, (54,)), (0xC00000B7, (29,)), (0x40000028, (54,)))


def tiocsti_filter() -> bytes:
    """A seccomp program refusing (EPERM) ioctl TIOCSTI and TIOCLINUX: the agent shares the caller's
    terminal (a new session would lose Ctrl-C), and where the kernel allows TIOCSTI
    (`dev.tty.legacy_tiocsti = 1`) it could push a command into the caller's shell, run after the
    sandbox ends (red team). Everything else is allowed: this is not a syscall sandbox."""
    import struct

    ld, jeq, ret = 0x20, 0x15, 0x06  # BPF_LD|BPF_W|BPF_ABS, BPF_JMP|BPF_JEQ|BPF_K, BPF_RET|BPF_K
    allow, deny = 0x7FFF0000, 0x00050000 | 1  # SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO | EPERM
    prog: list[tuple[int, object, object, int]] = [(ld, 0, 0, 4)]  # seccomp_data.arch
    for i, (arch, _) in enumerate(_IOCTL):
        prog.append((jeq, f"arch{i}", 0, arch))
    prog.append((ret, 0, 0, allow))
    labels: dict[str, int] = {}
    for i, (_, numbers) in enumerate(_IOCTL):
        labels[f"arch{i}"] = len(prog)
        prog.append((ld, 0, 0, 0))  # seccomp_data.nr
        for j, nr in enumerate(numbers):
            prog.append((jeq, "cmd", 0 if j < len(numbers) - 1 else "allow", nr))
    labels["cmd"] = len(prog)
    prog += [(ld, 0, 0, 24), (jeq, "deny", 0, TIOCSTI), (jeq, "deny", "allow", TIOCLINUX)]  # args[1], low half
    labels["deny"] = len(prog)
    prog.append((ret, 0, 0, deny))
    labels["allow"] = len(prog)
    prog.append((ret, 0, 0, allow))

    def off(at: int, to: object) -> int:
        return to if isinstance(to, int) else labels[str(to)] - at - 1

    return b"".join(struct.pack("<HBBI", c, off(n, t), off(n, f), k) for n, (c, t, f, k) in enumerate(prog))


class Bwrap:
    name = "bwrap"
    host_commands = True
    # The launch check mounts the masks (verify.mount_masks): measured 1,000 file masks 0.08-0.15 s, 5,000
    # 0.36 s, 10,000 1.3 s (the kernel's binds grow faster than linearly; directories cost a tmpfs each, 0.17 s
    # per 10,000). Past this, the policy hides whole directories (the same widening as firejail's limit).
    max_masks = 10_000
    private_dirs: tuple[str, ...] = ("/dev", "/proc")  # a minimal /dev of its own, and its own /proc

    def __init__(self, settings: Settings | None = None, user: tuple[int, int] | None = None) -> None:
        self.executable = tools.find("bwrap")
        self.settings = settings or Settings()
        self.user = user
        # an AppArmor profile allowing bwrap user namespaces (Ubuntu 24.04+) lands here
        self.state_files: tuple[str, ...] = ("/etc/apparmor.d",)

    def unavailable(self) -> UnavailableError | None:
        if self.executable is None:
            return UnavailableError(f"bubblewrap is not installed (looked in {tools.where()})", install_hint())
        return None

    def probe(self, env: Mapping[str, str]) -> UnavailableError | None:
        """A real start that hides a temp file and runs the launch check: bwrap is installed on hosts where
        user namespaces are off (Ubuntu 24.04's AppArmor rule, containers), and then fails to start."""
        from ai_sandbox import nested, supervise

        err = self.unavailable() or nested.chroot_error(self.name)
        if err is not None:
            return err
        try:
            with probe_plan(Bwrap, env) as (base, plan):
                status, _, stderr = supervise.captured(plan, base)
            text = stderr.decode("utf-8", "replace")
        except (OSError, TimeoutError) as e:
            return UnavailableError(f"bwrap does not start here: {e}", BY_HAND)
        if status == 0:
            return None
        last = (text.strip().splitlines() or [f"exit status {status}"])[-1]
        if "namespace" in last or "Operation not permitted" in last or "setting up uid map" in last:
            return UnavailableError(f"bwrap cannot create its namespaces here: {last}", userns_hint())
        return UnavailableError(f"bwrap does not sandbox here: {last}", BY_HAND)

    def version(self) -> str | None:
        return tools.version(self.executable)

    def unexpressible(self, path: str) -> str | None:
        """bwrap names any path exactly; only the kernel's length limit remains."""
        if len(path) > _MAX_PATH // 4 and len(os.fsencode(path)) > _MAX_PATH:
            return f"is longer than {_MAX_PATH} bytes"
        return None

    def agent_uid(self) -> int:
        return self.user[0] if self.user else os.geteuid()

    def scratch(self, policy: Policy) -> list[str]:
        """The hidden directories shown inside as an empty, writable tmpfs of the session rather than a
        read-only mask (a build writing an ignored dist/ keeps working; what it writes is gone at exit):
        those the agent's identity owns and may write, that hold no hidden tracked file (git must find it
        where it was). bwrap mounts a tmpfs anywhere; at most MAX_SCRATCH of them (its argument limit)."""
        uid = self.agent_uid()
        kept = never_scratch(policy)
        out: list[str] = []
        for m in policy.masks:
            if not m.is_dir or kept(m.path):
                continue
            try:
                st = os.lstat(m.path)
            except OSError:
                continue
            if stat.S_ISDIR(st.st_mode) and st.st_uid == uid and st.st_mode & 0o700 == 0o700:
                out.append(m.path)
                if len(out) == MAX_SCRATCH:
                    break
        return out

    def arguments(
        self,
        own: OwnFiles,
        scratch: list[str],
        writes: Writes | None = None,
        private_net: bool = False,
        sockets: Sockets | None = None,
    ) -> list[bytes]:
        """bwrap's options, in the order it applies them: the host, /proc and /dev, the anchors and read-only
        rules, then the scratch directories. The masks are not among them: the launch check mounts them
        (verify.mount_masks; bwrap's own mounts cost the square of their number), with the two capabilities
        it keeps for that and drops before anything else runs."""
        # --chdir /: bwrap's init keeps the directory it starts in, and a mask mounted later would not cover
        # it (/proc/1/cwd); the launch check enters the caller's once the masks exist
        steps = writes.steps(own.anchors) if writes is not None and writes.confined else []
        whole = ("ro", "/") in steps  # the host read-only under the sandbox's own /proc and /dev
        args = [
            b"--ro-bind" if whole else b"--dev-bind",
            b"/",
            b"/",
            b"--unshare-pid",
            *([b"--unshare-net"] if private_net else []),
            b"--die-with-parent",
            b"--chdir",
            b"/",
            b"--proc",
            b"/proc",
        ]
        args += self.dev()
        args += [b"--cap-drop", b"ALL", b"--cap-add", b"CAP_SYS_ADMIN", b"--cap-add", b"CAP_SETPCAP"]
        args += [b"--seccomp", b"%d" % SECCOMP_FD]
        sockets = sockets or Sockets()
        args += self.private_tmp(sockets)
        own_dirs = sockets.private
        # write containment (writes.py), outermost first: each bind covers what an earlier one put below it
        for kind, path in steps:
            if path == "/" or any(path == d or below(path, d) for d in self.private_dirs):
                continue  # the base above; /dev/shm and /proc are the sandbox's own
            if any(path == d or below(path, d) for d in own_dirs) and not any(
                path == k or below(path, k) for k in sockets.kept
            ):
                continue  # /tmp and the runtime directory are the sandbox's own (sockets.py)
            if kind == "rw" and not os.path.exists(path) and writes is not None and path not in writes.make:
                continue  # bwrap would fail; nothing there to write (it stays read-only)
            if kind == "ro" and not os.path.lexists(path):
                continue
            p = os.fsencode(path)
            args += [b"--ro-bind" if kind == "ro" else b"--bind", p, p]
        for path in [] if steps else own.anchors:  # a mount point cannot be renamed (EBUSY)
            p = os.fsencode(path)
            args += [b"--bind", p, p]
        for path in own.protect:
            p = os.fsencode(path)
            args += [b"--ro-bind", p, p]
        args += self.private_runtime(sockets)  # after every bind that could cover one (an anchor above it)
        for path in sorted(scratch):
            try:
                st = os.lstat(path)
            except OSError:
                continue  # missing: bwrap would create it on the host; nothing to read (the check agrees)
            if stat.S_ISDIR(st.st_mode):
                p = os.fsencode(path)
                args += [b"--perms", b"%o" % stat.S_IMODE(st.st_mode), b"--tmpfs", p]
        return args

    @staticmethod
    def private_tmp(sockets: Sockets) -> list[bytes]:
        """The host's unix sockets out of reach (sockets.py), first part: /tmp a tmpfs of the sandbox's own, with what
        the launch needs of it bound back whole; before write containment's binds, which then apply inside them."""
        args: list[bytes] = []
        if sockets.tmp:
            args += [b"--perms", b"1777", b"--tmpfs", b"/tmp"]
            for k in sockets.kept:
                if os.path.lexists(k):
                    args += [b"--bind", os.fsencode(k), os.fsencode(k)]
        return args

    @staticmethod
    def private_runtime(sockets: Sockets) -> list[bytes]:
        """The second part, after every other bind: the runtime directories tmpfs of the sandbox's own, and the
        sockets the user passes (the ssh agent) bound alone. The other sockets are masks the launch check mounts."""
        args: list[bytes] = []
        for runtime in sockets.runtime:
            args += [b"--perms", b"0700", b"--tmpfs", os.fsencode(runtime)]
        for p in sockets.passed:
            if any(below(p, d) for d in sockets.private) and not any(p == k or below(p, k) for k in sockets.kept):
                args += [b"--bind", os.fsencode(p), os.fsencode(p)]
        return args

    @staticmethod
    def dev() -> list[bytes]:
        """A minimal /dev, as firejail's private-dev: no block device (root, owner of the disk's node, would
        read it raw, past every mask), no terminal of the host's but the controlling one (/dev/tty; the
        launch check mounts a devpts of its own on /dev/pts: the host's would let the agent read another
        terminal of the user's), an empty /dev/shm. Not bwrap's --dev: for a user its new devpts makes bwrap
        nest a second user namespace, which does not own the mount namespace, and the launch check could then
        mount nothing."""
        args = [b"--tmpfs", b"/dev"]
        for node in DEV_NODES:
            if os.path.exists(node):
                args += [b"--dev-bind", node.encode(), node.encode()]
        for link, target in DEV_LINKS:
            args += [b"--symlink", target.encode(), link.encode()]
        return [*args, b"--dir", b"/dev/pts", b"--tmpfs", b"/dev/shm"]

    def plan(self, policy: Policy, argv: list[str], env: Mapping[str, str], seen: Snapshot | None = None) -> LaunchPlan:
        from ai_sandbox import idents, supervise, verify

        seen = seen or idents.take(policy)
        own = within_writes(own_files(env, self.unexpressible, policy.root, self.user), policy.writes)
        own = within_sockets(own, policy.sockets)
        system = [d for d in SYSTEM_READ_ONLY if os.path.exists(d) and not os.path.islink(d)]
        own.protect = list(dict.fromkeys(system + own.protect))  # enclosing first: bwrap binds in this order
        scratch = self.scratch(policy)
        own.hide = [*own.hide, *policy.sockets.masked]
        args = self.arguments(own, scratch, policy.writes, policy.network.private, policy.sockets)
        cwd = os.path.realpath(self.settings.cwd or os.getcwd())
        return LaunchPlan(
            sandbox=[self.executable or "bwrap", "--args", str(ARGS_FD), "--"],
            agent=argv,
            check=checked(policy, own, cwd, scratch, env, self.name, seen),
            env={**verify.carried(dict(env), seen.when), verify.IGNORED_ENV: supervise.caller_ignored()},
            dirs=dict.fromkeys([*own.create, *policy.writes.make], 0o700),
            scratch=scratch,
            fds={ARGS_FD: b"\0".join(args) + b"\0", SECCOMP_FD: tiocsti_filter()},
            supervised=True,
        )
