"""The launch check inside the sandbox: prove that every rule of the policy is in force, then exec the agent.

firejail can silently do less than its profile asks: inside a container it detects "an existing sandbox"
and runs the command with no sandbox at all (its warning is hidden by --quiet), and its profile parser
changes some lines (runs of blanks) so that a mask or a read-only rule never happens. So the launch does
not assume: this program runs as the sandbox's command, looks at what the kernel actually gives it, and
only then becomes the agent, with the caller's exact environment. Anything missing: the agent never
starts, one line names the first unenforced path and why, exit 69.

It runs as `python -I -S verify.py SPEC ARGV…` (isolated, no site: ~9 ms) before every agent, so it imports nothing
of the standard library's Python beyond `os`: where needed, the C modules `_socket` (the proxy's sockets) and
`_ctypes` (bwrap's mounts, Landlock), and `make test` holds it to that (tests/integration/test_launch_imports.py).
It is importable too (nested.py asks the same question of a running sandbox).

SPEC is a file ai-sandbox wrote (in its cache directory, read-only inside every sandbox): a header line,
then NUL-separated records, each a one-letter kind and a path:
  K<backend>            the sandbox that must be there: firejail (its own tmpfs) or bwrap (own pid namespace)
  M<path>               a mask: a file or directory that must show an empty mask here (firejail's, or an
                        empty read-only mount of mode 0000: bwrap's); it existed at the launch, so it must
                        exist here too (moved or deleted while the sandbox started: refused)
  m<path>               the same, for a path that may be missing (nothing there to read)
  W<path>               the directory the agent starts in, entered by name once the masks exist (bwrap)
  T<path>               a scratch directory: a fresh, empty tmpfs of this sandbox mounted exactly there
  R<path>               must be on a read-only mount
  B<path>               must be a mount point (so that it cannot be renamed: EBUSY)
  X<path>               write containment: read-only here, and so is every mount below it, except below an O
                        place, a mask, a scratch directory or the sandbox's own (/proc, /dev, firejail's /run)
  O<path>               write containment: a place the agent may write
  C<dev>:<ino>:<path>   the directory the agent starts in: the same directory as outside
  N<fd>:<ino>           the network (network.py): the sandbox's namespace must not be the host's (inode <ino>);
                        <fd>, when not "-", is the proxy's channel, over which the L sockets are sent, then closed
  D<path>               $TMPDIR, to make (mode 0700) in the sandbox's own /tmp or runtime directory, where the
                        host's is not shown
  A                     the host's network (`on`): abstract unix sockets outside the sandbox out of reach with
                        Landlock's scope where the kernel has it (6.12+); elsewhere the network namespace does it
  L<port>:<address>     a listening socket to bind in the sandbox's namespace and send to the proxy: its own port,
                        or a host loopback endpoint forwarded to the same address outside
  P<dev>:<ino>:<path>   a directory that must be the sandbox's own, not the host's (device and inode outside):
                        /tmp and the runtime directory, where the user's servers keep their sockets
  S<dev>:<ino>:<ddev>:<dino>:<path>
                        a mask (or scratch directory) must be on the very file the launch saw at path
                        (its device and inode, "-:-" when it was missing) in the directory it saw there:
                        a directory swapped for a decoy while the sandbox started moves the secret away
                        from the path the mask is mounted on (when the launch looked: LOOK_ENV)
The caller's environment travels in AI_SANDBOX_ENV_0, _1, … (see `pack_env`), never on disk, and
none of it on the command line (firejail limits arguments to 4,128 bytes and 128 of them).
"""

import os
import sys

TYPE_CHECKING = False  # typing is not imported at run time: the check runs with -I -S, every ms counts
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

HEADER = b"ai-sandbox-verify 1\n"
ENV_PREFIX = "AI_SANDBOX_ENV_"
ENV_CHUNK = 100_000  # the kernel refuses a single variable over 128 KiB
EXIT_UNENFORCED = 69
MARK = "/run/firejail/mnt"  # firejail's own tmpfs: mounted in every sandbox it really builds
MASK_FILE = "/run/firejail/firejail.ro.file"  # what a file mask is a bind of
MASK_DIR = "/run/firejail/firejail.ro.dir"
_CAPS = (b"CapInh:", b"CapPrm:", b"CapEff:", b"CapBnd:", b"CapAmb:")

NOT_SANDBOXED = (
    "firejail did not sandbox the command: inside a container or another sandbox it detects "
    '"an existing sandbox" and runs commands without one'
)
NOT_SANDBOXED_HINT = "run ai-sandbox on the host, outside the container (or use --backend docker there)"
BWRAP_NOT_SANDBOXED = "the command is not in the pid namespace of a bwrap sandbox"
IGNORED_ENV = "AI_SANDBOX_SIGIGN"  # the caller's ignored signals, when a supervisor ignored them above the agent
# when the launch looked at the masks (time.time_ns()), for the S records: in the environment, not in the spec,
# whose name is its content's hash (a time in it made every launch's spec a file of its own)
LOOK_ENV = "AI_SANDBOX_LOOK"
# Every signal that ends a process by default (supervise.TERMINATING: the supervised sandbox ignores them all above
# the agent, where the session's `kill -SIG 0` would have ended it); a number list, since signal.py costs an import
_RESTORED = (1, 2, 3, 4, 5, 6, 7, 8, 10, 11, 12, 14, 15, 16, 24, 26, 27, 29, 30, 31, *range(34, 65))
_DEFAULTED = (13, 25)  # SIGPIPE, SIGXFSZ: Python ignores them, and an exec keeps a signal ignored


def pack_env(env: dict[str, str]) -> dict[str, str]:
    """The variables that carry env through firejail, which strips or adds some (TMPDIR, LD_*,
    container=…): `\\` and newline are escaped, entries joined by newlines, split into chunks."""
    blob = b"\n".join(
        (os.fsencode(k) + b"=" + os.fsencode(v)).replace(b"\\", b"\\\\").replace(b"\n", b"\\n") for k, v in env.items()
    )
    chunks = [blob[i : i + ENV_CHUNK] for i in range(0, len(blob), ENV_CHUNK)] or [b""]
    return {f"{ENV_PREFIX}{i}": os.fsdecode(c) for i, c in enumerate(chunks)}


def carried(env: dict[str, str], look: int = 0) -> dict[str, str]:
    """The sandbox's environment: the caller's with it all packed in, and when the launch looked. The caller's
    own variables named like ours are left out of the outside copy (still inside the packed one): an
    AI_SANDBOX_ENV_1 of the caller's next to a packed _0 would be read as its continuation and add variables
    (red team)."""
    ours = {k: v for k, v in env.items() if not k.startswith(ENV_PREFIX) and k not in (IGNORED_ENV, LOOK_ENV)}
    return {**ours, **pack_env(env), LOOK_ENV: str(look)}


def unpack_env(environ: dict[bytes, bytes]) -> dict[bytes, bytes] | None:
    """The caller's environment, exactly; None when it did not arrive."""
    chunks: list[bytes] = []
    while (c := environ.get(os.fsencode(f"{ENV_PREFIX}{len(chunks)}"))) is not None:
        chunks.append(c)
    if not chunks:
        return None
    out = {}
    for entry in b"".join(chunks).split(b"\n"):
        if entry:
            raw = b"\\".join(part.replace(b"\\n", b"\n") for part in entry.split(b"\\\\"))
            name, _, val = raw.partition(b"=")
            out[name] = val
    return out


def read_regular(path: str, limit: int | None = None, follow: bool = False) -> bytes:
    """A file's bytes, opened without following a link (unless follow) or blocking on a FIFO; OSError unless it
    is a regular file (what a session may have planted at a path ai-sandbox writes is never trusted: a FIFO nobody
    writes, a link to /dev/zero), or when it is larger than limit bytes (never more than that read: a file can
    grow while it is read)."""
    fd = os.open(path, os.O_RDONLY | (0 if follow else os.O_NOFOLLOW) | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if (st.st_mode & 0o170000) != 0o100000:
            raise OSError(f"{path} is not a regular file")
        if limit is not None and st.st_size > limit:
            raise OSError(f"{path} is larger than {limit} bytes")
        cap = 1 << 62 if limit is None else limit + 1
        chunks, got = [], 0
        while got < cap and (chunk := os.read(fd, min(cap - got, 1 << 20))):
            chunks.append(chunk)
            got += len(chunk)
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if limit is not None and len(data) > limit:
        raise OSError(f"{path} is larger than {limit} bytes")
    return data


def spec(records: list[bytes]) -> bytes:
    """A launch check's bytes (backends/check.py writes its records: a kind letter, then the path or fields)."""
    return HEADER + b"\0".join(records) + b"\0"


def parse_spec(data: bytes) -> list[tuple[str, str]] | None:
    """(kind, rest) records of a launch check (`spec` writes them); None when data is not one."""
    if not data.startswith(HEADER):
        return None
    return [(chr(r[0]), os.fsdecode(r[1:])) for r in data[len(HEADER) :].split(b"\0") if r]


def read_spec(path: str) -> list[tuple[str, str]]:
    records = parse_spec(read_regular(path))
    if records is None:
        raise OSError(f"{path} is not a launch check written by this version of ai-sandbox")
    return records


def _ident(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


def unmasked(paths: list[str], looked: "Looked | None" = None) -> "Iterator[tuple[str, str]]":
    """(path, reason) of each path that exists here and is neither one of firejail's mask mounts nor an empty
    read-only mount of mode 0000 (bwrap's masks; one is as unreadable as the other, whoever mounted it).
    looked: each path as seen through its directory already (`Looked`)."""
    masks = {i for i in (_ident(MASK_FILE), _ident(MASK_DIR)) if i is not None}
    tops = None
    for path in paths:
        st = looked.files[path] if looked is not None and path in looked.files else _lstat(path)
        if isinstance(st, FileNotFoundError):
            continue  # nothing there to read (gone since the launch computed it, or private here)
        if isinstance(st, OSError):
            yield path, f"cannot be checked ({st.strerror})"
            continue
        if (st.st_dev, st.st_ino) not in masks:
            if (st.st_mode & 0o170000) == 0o120000 and _ident(path) is None:
                continue  # a link that leads nowhere (a loop, or dangling): nothing to read through it
            if tops is None:
                tops = mount_tops()
            if not empty_mount(path, st, tops):
                yield path, "is not masked"


def _lstat(path: str) -> os.stat_result | OSError:
    try:
        return os.lstat(path)
    except OSError as e:
        return e


class Looked:
    """Each masked path as seen through its directory, opened once: the path's lstat (or its error) and the
    directory itself. Every test of a mask reads these, so they all judge one directory: a look at the path while a
    process outside had swapped its directory for a decoy, and a look at the directory after the swap back, passed
    a mask that was on the decoy's file while the agent read the real one (thirty-third red team)."""

    def __init__(self, paths: list[str], seen: list[str]) -> None:
        """paths, and seen: those whose directory the launch saw (S records), where a link is not followed."""
        self.dirs: dict[str, int | OSError] = {}  # a directory -> its descriptor (O_PATH), or why it cannot be opened
        self.files: dict[str, os.stat_result | OSError] = {}
        self.strict = {_split(p)[0] for p in seen}
        for path in dict.fromkeys([*paths, *seen]):  # a mask with an S record is in both: looked at once
            parent, name = _split(path)
            fd = self.dir(parent)
            if isinstance(fd, OSError):
                self.files[path] = fd
                continue
            try:
                self.files[path] = os.stat(name, dir_fd=fd, follow_symlinks=False) if name else os.fstat(fd)
            except OSError as e:
                self.files[path] = e

    def dir(self, path: str) -> int | OSError:
        """The directory at path, opened once. A link at a directory the launch saw is not followed (another
        directory put there through a link is not the one it saw); elsewhere it is, as lstat of a path in it does."""
        if path not in self.dirs:
            flags = O_PATH | os.O_DIRECTORY | os.O_CLOEXEC | (os.O_NOFOLLOW if path in self.strict else 0)
            try:
                self.dirs[path] = os.open(path, flags)
            except OSError as e:
                self.dirs[path] = e
        return self.dirs[path]

    def close(self) -> None:
        for fd in self.dirs.values():
            if isinstance(fd, int):
                os.close(fd)
        self.dirs = {}


O_PATH = getattr(os, "O_PATH", 0o10000000)  # Linux's, which every backend runs on


def _split(path: str) -> tuple[str, str]:
    """An absolute, normal path's directory and name."""
    parent, _, name = path.rpartition("/")
    return parent or "/", name


def empty_mount(path: str, st: os.stat_result, tops: dict[bytes, list[bytes]]) -> bool:
    """Whether path is the top mount at exactly this path, read-only, of mode 0000 and empty: an empty
    regular file, or a tmpfs holding nothing. With no capabilities (checked), not even root reads it."""
    top = tops.get(_escaped(path))
    if top is None or st.st_mode & 0o7777:
        return False
    dev, fstype = _device(top)
    if st.st_dev != dev or b"ro" not in top[5].split(b","):
        return False
    kind = st.st_mode & 0o170000
    if kind == 0o100000:
        return st.st_size == 0
    # an empty tmpfs directory: links for . and .. only, and tmpfs's size of two entries
    return kind == 0o040000 and fstype == b"tmpfs" and st.st_nlink == 2 and st.st_size <= 40


def swapped(records: list[str], look: int = 0, looked: Looked | None = None) -> str | None:
    """The first S record's path whose mask is not on the file the launch saw: its directory is not the one seen
    there (a session swapped it, or one above it), or the directory's entry is another file (its inode, read from
    the listing: stat would see the mask). A directory the agent's identity cannot list keeps the first test
    only; nothing a session can do moves a masked entry itself (a mount point: EBUSY). A directory whose change
    time is older than the look (look, in ns; less SLACK for the kernel's coarse clock) has had no entry added,
    removed or renamed since: its listing is not read (a monorepo's 1,000 listings cost 20 ms). looked: the paths
    as seen through their directories (`Looked`), which this judges: the same directory as the mask tests."""
    own = looked is None
    if looked is None:
        looked = Looked([], [rec.split(":", 4)[4] for rec in records])
    try:
        return _swapped(records, look, looked)
    finally:
        if own:
            looked.close()


def _swapped(records: list[str], look: int, looked: Looked) -> str | None:
    listings: dict[str, dict[str, int] | None] = {}
    parents: dict[str, os.stat_result | OSError] = {}
    for rec in records:
        fdev, fino, ddev, dino, path = rec.split(":", 4)
        if isinstance(looked.files[path], OSError):
            continue  # the M and m records judge what is missing
        parent, name = _split(path)
        fd = looked.dir(parent)
        if parent not in parents:
            parents[parent] = fd if isinstance(fd, OSError) else os.fstat(fd)
        st = parents[parent]
        if isinstance(st, OSError):
            return path
        if (st.st_dev, st.st_ino) != (int(ddev), int(dino)):
            return path
        if fdev == "-" or int(fdev) != st.st_dev or (look and st.st_ctime_ns < look - SLACK):
            continue  # missing then, a mount point of its own there, or its directory unchanged since the look
        if parent not in listings:
            listings[parent] = _inodes(fd) if isinstance(fd, int) else None
        names = listings[parent]
        if names is not None and names.get(name) != int(fino):
            return path
    return None


SLACK = 1_000_000_000  # ns: file times come from a clock that lags the one the look read by a tick or two


def _inodes(directory: int) -> dict[str, int] | None:
    """name -> inode of each entry, as the directory (an O_PATH descriptor) lists it, beneath any mount; None when
    it cannot be listed."""
    try:
        fd = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=directory)
    except OSError:
        return None
    try:
        with os.scandir(fd) as it:
            return {e.name: e.inode() for e in it}
    except OSError:
        return None
    finally:
        os.close(fd)


def scratch_problem(path: str, fresh: bool = True, tops: dict[bytes, list[bytes]] | None = None) -> str | None:
    """Why path is not a tmpfs of its own mounted exactly there (and, when fresh, empty); None when it is. A
    tmpfs line firejail skipped (it does so silently for a directory a user may not mount on) leaves the
    real directory, with what it holds, on the parent's device: found by the device, not the table alone,
    since a tmpfs can also sit hidden under another mount at the same path."""
    try:
        st = os.stat(path)
        parent = os.stat(os.path.dirname(path.rstrip("/")) or "/")
    except FileNotFoundError:
        return None  # nothing there to read
    except OSError as e:
        return f"cannot be checked ({e.strerror})"
    top = (tops if tops is not None else mount_tops()).get(_escaped(path))
    if top is None:
        return "is not a mount point"
    dev, fstype = _device(top)
    if fstype != b"tmpfs" or st.st_dev != dev:
        return f"is not a tmpfs of its own (the top mount there is {os.fsdecode(fstype) or 'unknown'})"
    if st.st_dev == parent.st_dev:
        return "is on its parent's filesystem"
    try:
        if fresh and os.listdir(path):
            return "is not empty"
    except OSError as e:
        return f"cannot be listed ({e.strerror})"
    return None


def _device(top: list[bytes]) -> tuple[int, bytes]:
    """(device number, filesystem type) of a mountinfo line's fields."""
    major, minor = (int(x) for x in top[2].split(b":"))
    return os.makedev(major, minor), top[top.index(b"-") + 1] if b"-" in top else b""


def mount_tops(path: str = "/proc/self/mountinfo") -> dict[bytes, list[bytes]]:
    """The fields of the last (topmost) mount at each mount point, as mountinfo escapes it. Read once per
    check: 2,000 masks make the table 300 KB."""
    with open(path, "rb") as f:
        # lines end in \n only: mountinfo escapes \n in a path, but not \r, which splitlines() would split on
        return {fields[4]: fields for ln in f.read().split(b"\n") if len(fields := ln.split(b" ")) > 5}


def mountinfo(path: str = "/proc/self/mountinfo") -> list[bytes]:
    """The mount table's lines (they end in \n only: mountinfo escapes \n in a path, but not \r)."""
    with open(path, "rb") as f:
        return f.read().split(b"\n")


def mount_points(path: str = "/proc/self/mountinfo", lines: list[bytes] | None = None) -> set[bytes]:
    """Every mount point here, as mountinfo writes it (octal escapes). os.path.ismount cannot tell a
    directory bound onto itself: same device, and its parent is a different inode either way."""
    return {line.split(b" ", 5)[4] for line in lines or mountinfo(path) if line.count(b" ") >= 5}


def _escaped(path: str) -> bytes:
    raw = os.fsencode(path)
    for ch in b"\\ \t\n":
        raw = raw.replace(bytes([ch]), b"\\%03o" % ch)
    return raw


SANDBOXES = ("firejail", "bwrap")  # the sandboxes this check can prove (K records; backends/registry.py's `inside`)


def which_sandbox(points: set[str]) -> str | None:
    """The sandbox this process is in, from the mount points it sees: firejail (its tmpfs is mounted) or bwrap (its
    init is pid 1 here); None outside both."""
    if MARK in points:
        return "firejail"
    return "bwrap" if bwrap_pid1() else None


def bwrap_pid1() -> bool:
    """bwrap's init is pid 1 here: this process is in a bwrap sandbox's pid namespace."""
    try:
        with open("/proc/1/comm", "rb") as f:
            return f.read() == b"bwrap\n"
    except OSError:
        return False


def _bwrap_init() -> bool:
    """This process is the first child of bwrap's init in a pid namespace of its own."""
    return os.getpid() == 2 and bwrap_pid1()


class Libc:
    """libc's functions through _ctypes, ctypes's C half. `import ctypes` is ~4 ms of Python (every C type it
    defines, its loaders) in a check that runs before every agent; these calls need an int, an unsigned long, a
    string and fixed arrays of integers, declared here as ctypes declares its own. A function returns a C int, and
    errno() is the errno the last call of this thread left."""

    def __init__(self) -> None:
        import _ctypes

        simple = _ctypes._SimpleCData
        self.int = type("c_int", (simple,), {"_type_": "i"})
        self.ulong = type("c_ulong", (simple,), {"_type_": "L"})
        self.string = type("c_char_p", (simple,), {"_type_": "z"})
        self._uint = {
            32: type("c_uint32", (simple,), {"_type_": "I"}),
            64: type("c_uint64", (simple,), {"_type_": "Q"}),
        }
        flags = _ctypes.FUNCFLAG_CDECL | _ctypes.FUNCFLAG_USE_ERRNO
        self._function = type("function", (_ctypes.CFuncPtr,), {"_flags_": flags, "_restype_": self.int})
        self._library = type("libc", (), {"_handle": _ctypes.dlopen(None, _ctypes.RTLD_LOCAL)})  # type: ignore[arg-type]
        self._array = _ctypes.Array
        self.errno: Callable[[], int] = _ctypes.get_errno

    def function(self, name: str, *argtypes: type) -> "Callable[..., int]":
        """libc's function name; without argtypes, Python ints go as C ints and bytes or None as pointers."""
        f = self._function((name, self._library))
        if argtypes:
            f.argtypes = argtypes
        return f  # type: ignore[no-any-return]

    def uints(self, bits: int, *values: int) -> object:
        """A C array of unsigned integers of that many bits, holding values (passed as a pointer)."""
        array = type("array", (self._array,), {"_type_": self._uint[bits], "_length_": len(values)})
        return array(*values)


_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC, _MS_REMOUNT, _MS_BIND = 1, 2, 4, 8, 32, 4096
_LOCKED = _MS_RDONLY | _MS_NOSUID | _MS_NODEV | _MS_NOEXEC
STAGING = "/dev/shm"  # bwrap's own empty tmpfs: the empty file every file mask binds is made on a tmpfs above it


def mount_masks(paths: list[str]) -> None:
    """Mount bwrap's masks here, then drop every capability (the check below proves they are gone).

    bwrap rereads the whole mount table after each bind or remount it makes: 1,000 masks took 2.3 s and
    grow with the square. These are plain mount(2) calls (1,000 ≈ 0.15 s): a directory gets an empty
    read-only tmpfs of mode 0000, anything else but a link a read-only bind of one empty file of mode 0000,
    made on a tmpfs stacked on STAGING and detached again, so that no path reaches the file but the masks.
    bwrap leaves CAP_SYS_ADMIN (in its user namespace, for a user) and CAP_SETPCAP to this program alone.
    A missing path is left (mount(2) would not create it; nothing there to read); enclosing paths first."""
    libc = Libc()  # only here: the firejail check never pays for it
    mount_ = libc.function("mount", libc.string, libc.string, libc.string, libc.ulong, libc.string)
    umount2 = libc.function("umount2", libc.string, libc.int)

    def mount(source: bytes | None, target: bytes, fstype: bytes | None, flags: int, data: bytes | None) -> None:
        if mount_(source, target, fstype, flags, data) != 0:
            errno = libc.errno()
            raise OSError(errno, os.strerror(errno), os.fsdecode(target))

    empty = None
    try:
        # the sandbox's own terminals: the host's /dev/pts would show every terminal of the user's
        mount(b"devpts", b"/dev/pts", b"devpts", _MS_NOSUID | _MS_NOEXEC, b"newinstance,ptmxmode=0666,mode=0620")
        for path in sorted(paths):
            try:
                st = os.lstat(path)
            except FileNotFoundError:
                continue
            target = os.fsencode(path)
            kind = st.st_mode & 0o170000
            if kind == 0o040000:
                mount(b"tmpfs", target, b"tmpfs", _LOCKED, b"mode=000,size=4k,nr_inodes=2")
            elif kind != 0o120000:  # a link appeared since the policy resolved it: the check refuses it
                if empty is None:
                    mount(
                        b"tmpfs", STAGING.encode(), b"tmpfs", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC, b"mode=700,size=4k"
                    )
                    empty = STAGING + "/empty"
                    os.close(os.open(empty, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0))
                mount(os.fsencode(empty), target, None, _MS_BIND, None)
                mount(None, target, None, _MS_BIND | _MS_REMOUNT | _LOCKED, None)
    finally:
        if empty is not None:
            umount2(STAGING.encode(), 2)  # MNT_DETACH: the masks keep the file; nothing else reaches it
        _drop_capabilities(libc)


def private_network(records: list[tuple[str, str]]) -> tuple[str, str] | None:
    """The sandbox's own network namespace (network.py), and its listening sockets handed to the proxy outside:
    (message, hint) when the namespace is the host's or the proxy cannot get them; None when done (or no N)."""
    spec = next((rest for kind, rest in records if kind == "N"), None)
    if spec is None:
        return None
    fd, _, host_ns = spec.partition(":")
    try:
        here = os.stat("/proc/self/ns/net").st_ino
    except OSError as e:
        return f"cannot read /proc/self/ns/net ({e.strerror})", "the sandbox needs /proc"
    if str(here) == host_ns:
        return (
            "the sandbox shares the host's network, although the policy gives it a network of its own",
            "report this; run with --network on to use the host's network knowingly",
        )
    if fd == "-":
        return None
    import _socket  # socket.py imports enum and selectors: ~4 ms of a launch

    listeners = []
    try:
        for kind, rest in records:
            if kind != "L":
                continue
            port, _, address = rest.partition(":")
            family = _socket.AF_INET6 if ":" in address else _socket.AF_INET
            s = _socket.socket(family, _socket.SOCK_STREAM)
            listeners.append(s)
            s.setsockopt(_socket.SOL_SOCKET, _socket.SO_REUSEADDR, 1)
            try:
                s.bind((address, int(port)))
            except OSError as e:
                if family == _socket.AF_INET6 and e.errno == 99:  # EADDRNOTAVAIL: no IPv6 loopback here
                    s.close()
                    listeners.pop()
                    continue
                raise
            s.listen(128)
        ctl = _socket.socket(fileno=int(fd))
        try:
            fds = b"".join(s.fileno().to_bytes(4, sys.byteorder) for s in listeners)  # C ints (array: ~2.5 ms)
            ctl.sendmsg([b"L"], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, fds)])
        finally:
            ctl.close()  # the agent never holds the channel
    except OSError as e:
        return (
            f"cannot hand the network to ai-sandbox's proxy ({e.strerror or e})",
            "launch again, or run with --network off",
        )
    finally:
        for s in listeners:
            s.close()
    return None


LANDLOCK_ABSTRACT_UNIX_SOCKET = 1  # landlock_ruleset_attr.scoped, ABI 6 (Linux 6.12)


def landlock_abi() -> int:
    """The kernel's Landlock ABI version; 0 without Landlock."""
    abi = Libc().function("syscall")(444, None, 0, 1)  # landlock_create_ruleset(NULL, 0, ..._VERSION)
    return max(0, abi)


def abstract_scope(records: list[tuple[str, str]]) -> tuple[str, str] | None:
    """In `on` (no network namespace of its own), the abstract unix sockets of programs outside the sandbox (X11's
    `@/tmp/.X11-unix/X0`, some D-Bus buses) out of the agent's reach: a Landlock domain scoped to them, which the
    agent and its children inherit (they still reach the abstract sockets they make). A kernel before 6.12 has no
    such scope: nothing is done, as docs/network.md says."""
    if not any(kind == "A" for kind, _ in records):
        return None
    if landlock_abi() < 6:
        return None
    libc = Libc()
    syscall = libc.function("syscall")
    attr = libc.uints(64, 0, 0, LANDLOCK_ABSTRACT_UNIX_SOCKET)  # handled fs, handled net, scoped
    fd = syscall(444, attr, 3 * 8, 0)
    if fd < 0 or syscall(446, fd, 0) != 0:  # landlock_restrict_self (no_new_privs is set: checked above)
        return (
            f"cannot scope abstract unix sockets (errno {libc.errno()})",
            "report this, or run with --network allowlist",
        )
    os.close(fd)
    return None


def _drop_capabilities(libc: "Libc") -> None:
    """No capability left in any set, the bounding set included: an exec as root cannot regain one."""
    prctl = libc.function("prctl")
    prctl(47, 4, 0, 0, 0)  # PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL
    for cap in range(64):
        prctl(24, cap, 0, 0, 0)  # PR_CAPBSET_DROP (needs CAP_SETPCAP); EINVAL past the last capability
    header = libc.uints(32, 0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this thread
    libc.function("capset")(header, libc.uints(32, *[0] * 6))


def mask_problems(records: list[tuple[str, str]], backend: str = "firejail") -> tuple[str, str] | None:
    """(message, hint) for the first mask (M, m and S records) not in force: a path gone, one not masked, or one
    masked in a directory that is not the one the launch saw. Each directory is opened once, each path looked at once
    through it (`Looked`)."""
    masked = [rest for kind, rest in records if kind in "Mm"]
    looked = Looked(masked, [rest.split(":", 4)[4] for kind, rest in records if kind == "S"])
    try:
        return _mask_problems(records, backend, masked, looked)
    finally:
        looked.close()


def _mask_problems(
    records: list[tuple[str, str]], backend: str, masked: list[str], looked: Looked
) -> tuple[str, str] | None:
    gone = next((rest for kind, rest in records if kind == "M" and isinstance(looked.files[rest], OSError)), None)
    if gone is not None:
        return (
            f"{gone} was moved or deleted while the sandbox started, so it could not be masked",
            "launch again (if something renames it in a loop, stop that first)",
        )
    bad = next(unmasked(masked, looked), None)
    if bad is not None:
        return (
            f"{bad[0]} {bad[1]}, although the policy hides it",
            f"{backend} did not apply its mask; rename the path (or hide its directory) and report this",
        )
    when = os.environ.get(LOOK_ENV, "")
    moved = swapped([rest for kind, rest in records if kind == "S"], int(when) if when.isdigit() else 0, looked)
    if moved is not None:
        return (
            f"{moved} is not the file the launch decided to hide: a directory above it was moved or swapped while "
            "the sandbox started",
            "launch again (if a session of yours keeps moving it, end that session first)",
        )
    return None


def problems(records: list[tuple[str, str]]) -> tuple[str, str] | None:
    """(message, hint) for the first rule not in force, None when all are."""
    backend = next((rest for kind, rest in records if kind == "K"), "")
    masked = [rest for kind, rest in records if kind in "Mm"]
    if backend not in SANDBOXES:
        return (
            f"this launch check cannot prove a sandbox named {backend!r}",
            "report this: the backend names no sandbox it knows",
        )
    if backend == "bwrap":
        if not _bwrap_init():
            return BWRAP_NOT_SANDBOXED, "run `ai-sandbox doctor`"
        # bwrap starts in / (--chdir /): its init's cwd, which the agent reaches as /proc/1/cwd, must not be a
        # directory a mask is about to cover (red team)
        here = next((rest for kind, rest in records if kind == "W"), os.getcwd())
        try:
            mount_masks(masked)
        except OSError as e:
            return f"cannot mask {e.filename or 'a path'}: {e.strerror}", "report this"
        # bwrap entered the start directory before the masks existed: a hidden one would still be the real
        # directory beneath its mask (red team). Entered again by name, it is the mask, or / when that refuses.
        try:
            os.chdir(here)
        except OSError:
            os.chdir("/")
    elif not os.path.ismount(MARK):
        return NOT_SANDBOXED, NOT_SANDBOXED_HINT
    try:
        with open("/proc/self/status", "rb") as f:
            status = f.read().splitlines()
    except OSError as e:
        return f"cannot read /proc/self/status ({e.strerror})", "the sandbox needs /proc"
    for line in status:
        if line.startswith(_CAPS) and int(line.split()[1], 16) != 0:
            return f"capabilities are not dropped ({line.decode()})", "report this: root could lift the masks"
        if line.startswith(b"NoNewPrivs:") and line.split()[1] != b"1":
            return "no_new_privs is not set", "report this: a setuid program could lift the masks"
    wrong = mask_problems(records, backend)
    if wrong is not None:
        return wrong
    points = None
    tops = None
    checked_x: set[str] = set()
    rw_mounts: list[str] | None = None
    table: list[bytes] = []  # the mount table, read once for X and B records (~1 ms a read with 400 masks)
    for kind, rest in records:
        if kind == "T":
            if tops is None:
                tops = mount_tops()
            why = scratch_problem(rest, tops=tops)
            if why is not None:
                return (
                    f"{rest} {why}, although the policy hides it behind an empty scratch directory",
                    f"{backend} did not mount its tmpfs; report this",
                )
        elif kind == "P":
            dev, ino, path = rest.split(":", 2)
            try:
                st = os.stat(path)
            except OSError:
                st = None  # not there at all: nothing of the host's to reach (a runtime directory in the host's /tmp)
            if st is not None and (str(st.st_dev), str(st.st_ino)) == (dev, ino):
                return (
                    f"{path} is the host's, although the policy gives the sandbox its own (the sockets of your "
                    "servers there would be in reach)",
                    f"{backend} did not mount it; report this",
                )
        elif kind == "R":
            try:
                readonly = os.statvfs(rest).f_flag & os.ST_RDONLY
            except OSError as e:
                return f"{rest} cannot be checked ({e.strerror})", "it must exist and be read-only inside"
            if not readonly:
                blanks = "  " in rest or "\t" in rest or rest != rest.strip()
                return (
                    f"{rest} is writable, although the policy makes it read-only",
                    f"{backend} did not apply its read-only rule; move the directory (a path without runs of blanks)"
                    if blanks
                    else f"{backend} does not sandbox here (a chroot or a container?): run `ai-sandbox doctor`",
                )
        elif kind == "X":
            if rw_mounts is None:
                table = table or mountinfo()
                rw_mounts = writable_mounts(table)
                if backend == "firejail":
                    rw_mounts = _shared(rw_mounts)
            why = _not_read_only(rest, records, rw_mounts) if rest not in checked_x else None
            checked_x.add(rest)
            if why is not None:
                return (
                    f"{why}, although writes are confined to the project and the places `ai-sandbox explain` lists",
                    f"{backend} did not apply its read-only rule; report this (or set confine_writes = false)",
                )
        elif kind == "B":
            if points is None:
                table = table or mountinfo()
                points = mount_points(lines=table)
            if _escaped(rest) not in points:
                return (
                    f"{rest} is not a mount point, so a session could rename it with what it holds",
                    f"{backend} did not make it a mount point; report this",
                )
        elif kind == "C":
            dev, ino, path = rest.split(":", 2)
            if _ident(".") != (int(dev), int(ino)):
                return (
                    f"the project directory {path} is not visible inside the sandbox",
                    "firejail keeps /var/tmp (and /dev) private: move the project elsewhere"
                    if backend == "firejail"
                    else "move the project under a directory the sandbox shows (not /dev or /proc)",
                )
    return None


# What each sandbox mounts writable of its own, under a read-only host: its /proc, its /dev (and /dev/shm),
# firejail's own state and its private tmpfs on /var/tmp (and, 0.9.74 as root, on /var/lib/sudo); bwrap's none
# beyond those
_OWN_WRITABLE = ("/proc", "/dev", "/run/firejail", "/run/lock", "/var/tmp", "/var/lib/sudo")
_FIREJAIL_MNT = "/run/firejail/mnt"


def _shared(points: list[str]) -> list[str]:
    """The writable mounts that reach a file system outside: firejail 0.9.74 binds files of its own private
    tmpfs (its /run/firejail/mnt, made after its unshare, so no host file can be on it) over /etc/hostname and
    /etc/hosts, as root, writable and after the profile's read-only rules; writes there end with the session."""
    try:
        own = os.stat(_FIREJAIL_MNT).st_dev
        if own == os.stat(os.path.dirname(_FIREJAIL_MNT)).st_dev:
            return points  # not firejail's tmpfs (not a mount point): nothing is its own
    except OSError:
        return points
    kept = []
    for point in points:
        try:
            if os.stat(point).st_dev == own:
                continue
        except OSError:
            pass
        kept.append(point)
    return kept


def _unescape(field: bytes) -> str:
    """A mountinfo path (octal escapes: 040 for a blank, 134 for a backslash) as the path."""
    if b"\\" in field:
        out, i = bytearray(), 0
        while i < len(field):
            if field[i] == 0x5C and i + 4 <= len(field) and field[i + 1 : i + 4].isdigit():
                out.append(int(field[i + 1 : i + 4], 8))
                i += 4
            else:
                out.append(field[i])
                i += 1
        field = bytes(out)
    return os.fsdecode(field)


def writable_mounts(lines: list[bytes] | None = None) -> list[str]:
    """The mount points of every writable mount here (the launch check; firejail's plan reads the host's)."""
    return [
        _unescape(fields[4])
        for line in lines or mountinfo()
        if len(fields := line.split(b" ", 6)) > 5 and fields[5][:2] == b"rw"
    ]


def _visibly_writable(point: str) -> bool:
    """mountinfo lists mounts that others cover (firejail's setup leaves some below its /): what counts is the
    mount a path reaches."""
    try:
        return not os.statvfs(point).f_flag & os.ST_RDONLY
    except OSError:
        return False


def _not_read_only(place: str, records: list[tuple[str, str]], writable: list[str]) -> str | None:
    """Why the read-only place is not: itself writable, or a writable mount below it that no writable place,
    mask or scratch directory accounts for (an anchor re-opened, a bind the backend left)."""
    try:
        if not os.statvfs(place).f_flag & os.ST_RDONLY:
            return f"{place} is writable"
    except OSError as e:
        if e.errno == 2:
            return None  # nothing there to write into; its parent's rule holds
        return f"{place} cannot be checked ({e.strerror})"
    allowed = {rest for kind, rest in records if kind in "OTMm"}.union(_OWN_WRITABLE)
    allowed |= {rest.split(":", 2)[-1] for kind, rest in records if kind == "P"}  # the sandbox's own /tmp, runtime dir
    closed = {rest for kind, rest in records if kind == "X"}
    prefix = place.rstrip("/") + "/"
    for point in writable:
        if not point.startswith(prefix) and point != place:
            continue
        p = point
        while p not in allowed and p not in closed:  # the most specific place above the mount decides
            p = os.path.dirname(p)
        if p not in allowed and _visibly_writable(point):
            return f"{point} is a writable mount inside the read-only {p}"
    return None


def _hand_over(ignored: str | None) -> None:
    """What the agent inherits besides its environment: the caller's signal dispositions (a supervised
    sandbox ignores Ctrl-C and hang-ups above the agent; Python ignores SIGPIPE, which an exec keeps, so
    `agent | head` would see EPIPE instead of ending), and no descriptor but 0, 1 and 2: one inherited from
    outside the sandbox (a shell's `3<dir`) reads beneath every mask through /proc/self/fd/3/."""
    import _signal  # type: ignore[import-not-found]  # loaded at start; signal.py would import enum (~3 ms)

    if ignored is not None:
        keep = {int(s) for s in ignored.split(",") if s.isdigit()}
        for sig in _RESTORED:
            _signal.signal(sig, _signal.SIG_IGN if sig in keep else _signal.SIG_DFL)
    for sig in _DEFAULTED:
        _signal.signal(sig, _signal.SIG_DFL)
    for name in os.listdir("/proc/self/fd"):
        if int(name) > 2:
            try:  # noqa: SIM105 - contextlib costs the check an import
                os.set_inheritable(int(name), False)
            except OSError:
                pass  # the listing's own descriptor, closed already


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print("ai-sandbox: error: the launch check needs a spec and a command", file=sys.stderr)
        return EXIT_UNENFORCED
    try:
        records = read_spec(argv[0])
        found = problems(records) or private_network(records) or abstract_scope(records)
    except OSError as e:
        found = (f"cannot read the launch check {argv[0]}: {e.strerror or e}", "run the launch again")
    if found is not None:
        said = "".join(c if c.isprintable() else repr(c)[1:-1] for c in found[0])  # a name's \r or escape codes
        print(f"ai-sandbox: error: the sandbox does not enforce the policy: {said} — {found[1]}", file=sys.stderr)
        return EXIT_UNENFORCED
    env = unpack_env(dict(os.environb))
    if env is None:
        print("ai-sandbox: error: the caller's environment did not reach the sandbox", file=sys.stderr)
        return EXIT_UNENFORCED
    for kind, rest in records:
        if kind == "D":  # $TMPDIR in the sandbox's own /tmp: made for the agent's temporary files (sockets.py)
            try:  # noqa: SIM105  (contextlib is one import more for the launch check)
                os.makedirs(rest, 0o700, exist_ok=True)
            except OSError:
                pass  # a read-only mask over a runtime directory: the agent's tools say where they cannot write
    _hand_over(os.environ.get(IGNORED_ENV))
    try:
        os.execve(argv[1], argv[1:], env)
    except OSError as e:
        print(f"ai-sandbox: error: cannot start {argv[1]}: {e.strerror}", file=sys.stderr)
        return 127 if isinstance(e, FileNotFoundError) else 126
    return 127  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
