"""Loading and validating the user's global config and the project's own config.

Each file's keys are one table (`USER_KEYS`, `PROJECT_KEYS`): name, kind, default, allowed values and a
line of documentation. The table drives the checks, the defaults and docs/configuration.md's reference
(`python -m ai_sandbox.config --reference`, written there by `make docs`; a unit test keeps the two equal).

Unknown keys and wrong types are errors, not warnings: a typo such as `blok = [...]` must not silently
run the agent with fewer blocks than the user wrote.
"""

from __future__ import annotations

import os
import re

from ai_sandbox import legacy
from ai_sandbox.backends.registry import REGISTRY, auto_help
from ai_sandbox.errors import ConfigError
from ai_sandbox.fs import below, write_atomic
from ai_sandbox.paths import config_home, sha256, state_dir
from ai_sandbox.patterns import PROJECT, USER, Pattern, Source, escapes_next
from ai_sandbox.records import factory, record, value

TYPE_CHECKING = False  # typing is not imported at run time: this module is on the launch path
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any

PROJECT_FILE = ".ai-sandbox.toml"
LEGACY_FILE = ".ai-sandbox"
BACKENDS = ("auto", *REGISTRY)  # a new backend module is known here once it is in the registry
ENGINES = ("docker", "podman")
ON_HIDDEN_CHANGE = ("end", "warn")
MAX_MASKS = 90_000  # fs.mount-max is 100,000 and firejail mounts some of its own
MAX_ENTRIES = 10_000  # per list: beyond that a config is generated, not written, and matching it would crawl


@value
class Key:
    """One key of a config file: how its value is checked, its default, and its row in docs/configuration.md.

    kind: "list" (of strings: `each` checks one entry and adds it to the config), "bool", "choice" (one
    of `choices`), "string", or "count" (a whole number from 1 to `high`)."""

    name: str
    kind: str
    default: object
    doc: str  # one line: the meaning column of the reference (in docs/: links are relative to it)
    items: str = ""  # "list": what an entry is, for the reference ("patterns", "absolute or `~/` paths")
    choices: tuple[str, ...] = ()
    high: int = 0
    hint: str = ""  # how to fix a wrong value, where the message alone does not say
    each: Callable[[Any, str, str, int, str], None] | None = None  # (config, entry, file, line, home)


@record
class UserConfig:
    path: str
    exists: bool = False
    block_paths: list[tuple[str, Source]] = factory(list)  # (absolute path, where it was written)
    block_patterns: list[Pattern] = factory(list)
    allow: list[Pattern] = factory(list)
    allow_dependencies: bool = True
    allow_build_outputs: bool = True
    backend: str = "auto"
    on_hidden_change: str = "end"  # a hidden path replaced during the session: end it, or only warn
    engine: str = "docker"  # the docker backend's container CLI
    image: str = ""
    mounts: list[str] = factory(list)  # more host paths for the docker backend
    max_masks: int = 0  # 0: the backend's own limit
    confine_writes: bool = True  # writes only where the work is (writes.py): nothing planted runs later outside
    writable: list[tuple[str, Source]] = factory(list)  # (absolute path, where it was written): writable inside too
    network: str = "allowlist"  # on, allowlist or off (network.py)
    allow_sockets: list[str] = factory(list)  # host unix sockets the agent may reach (sockets.py), absolute
    allow_ssh_agent: bool = True
    allow_domains: list[tuple[str, str]] = factory(list)  # (entry, where it was written)
    allow_default_domains: bool = True
    lines: dict[str, int] = factory(dict)  # the line of each key given, for explain


@record
class ProjectConfig:
    files: list[str] = factory(list)
    block: list[Pattern] = factory(list)
    block_paths: list[tuple[str, Source]] = factory(list)  # `~/…` entries: (absolute, where it was written)
    allow: list[Pattern] = factory(list)
    warnings: list[str] = factory(list)
    network: str = "on"  # a mode narrower than the user's, or on: the user's as it is (network.py)
    lines: dict[str, int] = factory(dict)


def load_toml(path: str, root: str = "") -> tuple[dict[str, Any], str]:
    """The file's TOML and its text. `root`: the project a project config belongs to — what it may link
    to, and whether its parse may be remembered (see `_public`)."""
    raw = read_config(path, root)
    digest = sha256(raw).hexdigest()
    cached = _parsed(digest)
    if cached is not None:
        return cached, raw.decode("utf-8")  # only UTF-8 that parsed is ever remembered
    import tomllib  # 15 ms; only paid when a config file is new or changed

    try:
        text = raw.decode("utf-8")
        data = tomllib.loads(text)
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text", "save the file as UTF-8") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: invalid TOML: {e}", "fix the syntax, or delete the file") from None
    if not root or _public(root, path, raw):
        _remember(digest, data)
    return data, text


def read_config(path: str, root: str = "") -> bytes:
    """A config file's bytes, never blocking on a FIFO nor reading a device. A project's file (`root`) may
    be a link only to a file in the project that git does not ignore: a session can replace it by a link to
    a secret (a `.env` of `KEY="v"` lines is valid TOML) or to a FIFO that would hang every launch."""
    import stat

    target, flags = path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC
    if root:
        flags |= os.O_NOFOLLOW
        if os.path.islink(path):
            target = os.path.realpath(path)
            if not below(target, root):
                raise ConfigError(
                    f"{path} is a link to {target}, outside the project",
                    "a project config must be a file in the project: replace the link by the file",
                )
            if _ignored(root, target):
                raise ConfigError(
                    f"{path} is a link to {target}, which git ignores (it may be hidden)",
                    "a project config must be a file in the project: replace the link by the file",
                )
    try:
        fd = os.open(target, flags)
    except OSError as e:
        raise ConfigError(f"cannot read {path}: {e.strerror}", "check the file's permissions") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ConfigError(f"{path} is not a regular file", "a config file must be a plain file: remove it")
        chunks = []
        while chunk := os.read(fd, 1 << 16):
            chunks.append(chunk)
        return b"".join(chunks)
    except OSError as e:
        raise ConfigError(f"cannot read {path}: {e.strerror}", "check the file's permissions") from None
    finally:
        os.close(fd)


def _ignored(root: str, path: str) -> bool:
    from ai_sandbox import git

    return git.ignores(root, os.path.relpath(path, root))


def _public(root: str, path: str, raw: bytes) -> bool:
    """May a project config's parse be remembered? Only when these exact bytes are what git's index holds
    for the file (an object in .git, readable inside the sandbox anyway): the parse of an untracked,
    ignored, git-crypt-encrypted, edited or linked config would put hidden content in the cache. Asked
    only when the parse is not remembered yet, in place of the 15 ms of tomllib it then saves next time."""
    import hashlib

    if os.path.islink(path):
        return False
    from ai_sandbox import git

    oid = git.indexed_blob(root, os.path.relpath(path, root))
    if oid is None:
        return False
    blob = b"blob %d\0" % len(raw) + raw
    return (hashlib.sha256 if len(oid) == 64 else hashlib.sha1)(blob).hexdigest().encode() == oid


_KEEP = 64  # remembered parses: one per version of each config file, the oldest dropped past this


def _parse_dir() -> str:
    return os.path.join(state_dir(os.environ), "parsed")


def _parsed(digest: str) -> dict[str, Any] | None:
    """A parse remembered in the state directory under the SHA-256 of the file's bytes: it holds the parsed
    data only, never the bytes or the text, and stands for no other bytes."""
    import marshal

    try:
        with open(os.path.join(_parse_dir(), digest), "rb") as f:
            data = marshal.loads(f.read())
    except (OSError, EOFError, ValueError, TypeError):
        return None
    return data if isinstance(data, dict) else None


def _remember(digest: str, data: dict[str, Any]) -> None:
    import marshal

    try:
        blob = marshal.dumps(data)
    except ValueError:
        return  # TOML dates and times do not marshal; such a file is parsed each time
    directory = _parse_dir()
    try:
        write_atomic(os.path.join(directory, digest), blob)
        _prune(directory)
    except OSError:
        pass  # read-only inside a sandbox, or no home: parse next time too


def _prune(directory: str) -> None:
    """Drop what is not a digest-named parse (the old cache kept a config's raw bytes under a digest of its
    path: 24 hex digits), then, past _KEEP entries (old versions of config files), the oldest."""
    names = []
    for name in os.listdir(directory):
        if len(name) == 64 and "." not in name:
            names.append(name)
        elif len(name) == 24:
            os.unlink(os.path.join(directory, name))
    if len(names) <= _KEEP:
        return
    aged = []
    for name in names:
        try:
            aged.append((os.lstat(os.path.join(directory, name)).st_mtime, name))
        except OSError:
            continue
    for _, name in sorted(aged)[: len(aged) - _KEEP]:
        os.unlink(os.path.join(directory, name))  # an error ends the pruning: _remember ignores it


def _line_of(text: str, key: str, value: str | None = None) -> int:
    """Best-effort line number of a key (or of a value inside its array), for error messages."""
    lines = text.splitlines()
    start = 0
    for i, line in enumerate(lines):
        if re.match(rf"\s*(?:\[+\s*)?{re.escape(key)}\s*[=\].]", line):  # `key =`, `[key]`, `key.x =`
            start = i
            break
    if value is not None:
        for i in range(start, len(lines)):
            if repr(value)[1:-1] in lines[i] or value in lines[i]:
                return i + 1
    return start + 1


def _basic_string(v: str) -> str:
    """v as a TOML basic string is usually written, to find its line (json would cost an import)."""
    esc = v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t").replace("\r", "\\r")
    return f'"{esc}"'


def strings(data: Mapping[str, object], key: str, path: str, text: str) -> list[tuple[str, int]]:
    value = data.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(
            f"{path}:{_line_of(text, key)}: `{key}` must be a list of strings",
            f'write it as {key} = ["path/", "*.pem"]',
        )
    if len(value) > MAX_ENTRIES:
        raise ConfigError(
            f"{path}:{_line_of(text, key)}: `{key}` has {len(value)} entries, more than {MAX_ENTRIES}",
            "use directories or patterns (`secrets/`, `*.pem`) instead of listing files one by one",
        )
    out = []
    lines = text.splitlines()
    cursor = _line_of(text, key) - 1  # values appear in order: search forward, once over the file
    for v in value:
        # the quoted value, so "b" is not found inside "ab"; an entry written another way (escapes, a
        # multi-line string) is looked for over the next lines only, never the whole file again
        quoted = _basic_string(v)
        ascii_quoted = "".join(
            c if ord(c) < 128 else f"\\u{ord(c):04x}" if ord(c) < 0x10000 else f"\\U{ord(c):08x}" for c in quoted
        )
        needles = (quoted, ascii_quoted, f'"{v}"', f"'{v}'")
        for i in range(cursor, min(len(lines), cursor + 200)):
            if any(n in lines[i] for n in needles):
                cursor = i
                break
        line = cursor + 1
        if not v.strip() or "\0" in v:
            raise ConfigError(f"{path}:{line}: empty entry in `{key}`", "remove it")
        out.append((v, line))
    return out


def _pattern_entry(entry: str, path: str, line: int, key: str) -> str:
    """A pattern git's syntax reads as nothing must not be silently dropped from a block list."""
    if entry.startswith("#") or entry.lstrip("!").strip() == "":
        raise ConfigError(
            f"{path}:{line}: `{key}` entry {entry!r} matches nothing (a comment or a bare `!` in gitignore syntax)",
            "write \\# to match a name that starts with #",
        )
    if _glued_stars(_unpadded(entry.removeprefix("!"))):
        raise ConfigError(
            f"{path}:{line}: `{key}` entry {entry!r}: `**` works only as a whole path component (`**/x`, `a/**/b`, "
            "`a/**`), and git reads it glued to a name differently from ai-sandbox",
            "write `*` for part of a name (`deploy*/**/keys`)",
        )
    return entry


def _unpadded(entry: str) -> str:
    """The entry without the trailing blanks git strips (not an escaped one)."""
    body = entry.rstrip(" ")
    if len(body) < len(entry) and escapes_next(body):
        body += " "  # `\ `: the blank is the pattern's
    return body


def _glued_stars(entry: str) -> bool:
    """A run of two or more unescaped stars with anything but a slash (or an end) on either side: git's wildmatch
    lets `deploy**` cross slashes and pathspec does not (forty-third red team: `/deploy**/keys` and `***/*.cfg`
    hid nothing that git ignores)."""
    i, n = 0, len(entry)
    while i < n:
        c = entry[i]
        if c == "\\":
            i += 2
            continue
        if c == "[":  # a class: its stars are literal
            close = entry.find("]", i + 2)
            i = close + 1 if close != -1 else i + 1
            continue
        if c == "*":
            j = i
            while j < n and entry[j] == "*":
                j += 1
            if j - i >= 2 and (j - i > 2 or (i > 0 and entry[i - 1] != "/") or (j < n and entry[j] != "/")):
                return True
            i = j
            continue
        i += 1
    return False


def check_keys(data: Mapping[str, object], allowed: set[str], path: str, text: str) -> None:
    for key in data:
        if key not in allowed:
            raise ConfigError(
                f"{path}:{_line_of(text, key)}: unknown key `{repr(key)[1:-1]}`",
                f"known keys: {', '.join(sorted(allowed))}",
            )


def _read(keys: tuple[Key, ...], cfg: object, data: Mapping[str, object], path: str, text: str) -> None:
    """Check a file's data against its table and set what it holds on `cfg`: a list entry by entry through
    its key's `each`, any other value as written, or the table's default. Keys are checked in the table's
    order, so of several mistakes the same one is reported first every time."""
    check_keys(data, {key.name for key in keys}, path, text)
    home = os.path.expanduser("~")
    for key in keys:
        if key.each is not None:
            for entry, line in strings(data, key.name, path, text):
                key.each(cfg, entry, path, line, home)
            continue
        given = data.get(key.name, key.default)
        if key.name in data:
            wrong = _refusal(key, given)
            if wrong is not None:
                raise ConfigError(f"{path}:{_line_of(text, key.name)}: {wrong[0]}", wrong[1])
        setattr(cfg, key.name, given)
        if key.name in data and hasattr(cfg, "lines"):
            cfg.lines[key.name] = _line_of(text, key.name)


def _refusal(key: Key, given: object) -> tuple[str, str] | None:
    """What is wrong with a value that is not a list, and the hint; None when it is valid."""
    name = key.name
    if key.kind == "bool":
        return None if isinstance(given, bool) else (f"`{name}` must be true or false", key.hint)
    if key.kind == "choice":
        return None if given in key.choices else (f"unknown {name} {given!r}", f"use one of: {', '.join(key.choices)}")
    if key.kind == "string":
        return None if isinstance(given, str) else (f"`{name}` must be a string", key.hint)
    if key.kind == "count":
        if type(given) is int and 0 < given <= key.high:
            return None
        return f"`{name}` must be a whole number from 1 to {key.high:,}", key.hint
    raise AssertionError(f"config key {name}: unknown kind {key.kind!r}")


def _user_block(cfg: UserConfig, entry: str, path: str, line: int, home: str) -> None:
    """A path on this machine (`/…`, `~/…`), hidden in every sandbox, or a pattern hidden in every project."""
    _pattern_entry(entry, path, line, "block")
    source = Source(USER, tilde(path, home), line)
    if entry.startswith(("/", "~")):
        expanded = os.path.expanduser(entry)
        if expanded.startswith("~"):
            raise ConfigError(f"{path}:{line}: cannot expand {entry!r}", "write ~/… or an absolute path")
        cfg.block_paths.append((os.path.normpath(expanded), source))
    else:
        cfg.block_patterns.append(Pattern(entry, source))


def _user_allow(cfg: UserConfig, entry: str, path: str, line: int, home: str) -> None:
    _pattern_entry(entry, path, line, "allow")
    _check_inside(entry, path, line, "allow")
    cfg.allow.append(Pattern(entry, Source(USER, tilde(path, home), line)))


def _mount(cfg: UserConfig, entry: str, path: str, line: int, home: str) -> None:
    if not os.path.isabs(os.path.expanduser(entry)):
        raise ConfigError(
            f"{path}:{line}: mount {entry!r} is not an absolute or ~/ path", 'e.g. mounts = ["~/.gitconfig"]'
        )
    cfg.mounts.append(entry)


def _writable(cfg: UserConfig, entry: str, path: str, line: int, home: str) -> None:
    """A directory or file the agent may write besides the built-in places (writes.py)."""
    expanded = os.path.expanduser(entry) if entry.startswith("~") else entry
    if not os.path.isabs(expanded) or any(c in entry for c in "*?["):
        raise ConfigError(
            f"{path}:{line}: writable {entry!r} is not an absolute or ~/ path",
            'name one directory or file, e.g. writable = ["~/.local/share/pnpm"]',
        )
    norm = os.path.normpath(expanded)
    if norm == "/" or os.path.normpath(home).startswith(norm.rstrip("/") + "/") or norm == os.path.normpath(home):
        raise ConfigError(
            f"{path}:{line}: writable {entry!r} would make {norm} writable whole",
            "name the directories the tool writes, or set confine_writes = false (see docs/writes.md)",
        )
    cfg.writable.append((norm, Source(USER, tilde(path, home), line)))


def _domain(cfg: UserConfig, entry: str, path: str, line: int, home: str) -> None:
    """A name the agent's network may reach (network.py): `example.com`, `*.example.com`, either with `:port`."""
    from ai_sandbox import network

    if network.parse_entry(entry, "") is None:
        raise ConfigError(
            f"{path}:{line}: allow_domains entry {entry!r} is not a host name, `*.name`, or either with `:port`",
            'e.g. allow_domains = ["api.example.com", "*.example.org", "localhost:8080"]',
        )
    cfg.allow_domains.append((entry, f"{tilde(path, home)}:{line}"))


def _socket(cfg: UserConfig, entry: str, path: str, line: int, home: str) -> None:
    """A unix socket of a program outside the sandbox that the agent may reach (sockets.py)."""
    expanded = os.path.expanduser(entry) if entry.startswith("~") else entry
    if not os.path.isabs(expanded) or any(c in entry for c in "*?["):
        raise ConfigError(
            f"{path}:{line}: allow_sockets entry {entry!r} is not an absolute or ~/ path",
            'name the socket, e.g. allow_sockets = ["/run/user/1000/podman/podman.sock"]',
        )
    cfg.allow_sockets.append(os.path.normpath(expanded))


def _project_block(cfg: ProjectConfig, entry: str, path: str, line: int, home: str) -> None:
    _pattern_entry(entry, path, line, "block")
    _add_block(cfg, entry, Source(PROJECT, PROJECT_FILE, line), path, line, home)


def _project_allow(cfg: ProjectConfig, entry: str, path: str, line: int, home: str) -> None:
    _pattern_entry(entry, path, line, "allow")
    _check_inside(entry, path, line, "allow")
    cfg.allow.append(Pattern(entry, Source(PROJECT, PROJECT_FILE, line)))


# The keys of ~/.config/ai-sandbox/config.toml, in the order they are checked.
USER_KEYS = (
    Key(
        "block",
        "list",
        (),
        "an entry starting with `/` or `~` is a path on this machine, hidden in every sandbox; any other entry "
        "is a gitignore-style pattern hidden in every project",
        items="strings",
        each=_user_block,
    ),
    Key(
        "allow",
        "list",
        (),
        "git-ignored patterns kept readable in every project (extends the tool allowlist)",
        items="patterns",
        each=_user_allow,
    ),
    Key("allow_dependencies", "bool", True, "keep dependency directories (`node_modules/`, `.venv/`, …) readable"),
    Key(
        "allow_build_outputs",
        "bool",
        True,
        "keep build outputs and logs (`dist/`, `build/`, `*.log`, …) readable and writable; secret-looking "
        "names inside stay hidden",
    ),
    Key(
        "backend",
        "choice",
        "auto",
        f"the sandbox backend; {auto_help()} (see [How `auto` chooses](backends.md#how-auto-chooses))",
        choices=BACKENDS,
    ),
    Key(
        "on_hidden_change",
        "choice",
        "end",
        "what to do when a hidden path is replaced from outside during a session: end it, or only warn "
        "(see [the threat model](threat-model.md))",
        choices=ON_HIDDEN_CHANGE,
    ),
    Key("engine", "choice", "docker", "the docker backend's container CLI", choices=ENGINES),
    Key(
        "image",
        "string",
        "",
        "the docker backend's image when neither `--image` nor the agent's profile names one; empty: "
        "`ai-sandbox-agent`",
        hint='e.g. image = "ai-sandbox-agent"',
    ),
    Key(
        "mounts",
        "list",
        (),
        "more host paths the docker backend mounts read-write (e.g. `~/.gitconfig`); your `block` entries "
        "inside them are masked",
        items="absolute or `~/` paths",
        each=_mount,
    ),
    Key(
        "confine_writes",
        "bool",
        True,
        "the agent writes only the project, its git directory, its own state, build caches, temporary "
        "directories and `writable`, so nothing it plants runs later outside; false lets it write wherever file "
        "modes allow (see [what the agent can write](writes.md))",
    ),
    Key(
        "writable",
        "list",
        (),
        "more directories or files the agent may write (e.g. `~/.local/share/pnpm`; the docker backend mounts "
        "them read-write); only in this file, never in a project's",
        items="absolute or `~/` paths",
        each=_writable,
    ),
    Key(
        "network",
        "choice",
        "allowlist",
        "where the agent's connections may go: `allowlist`, only through ai-sandbox's proxy to the allowed "
        "domains; `off`, nowhere; `on`, the host's network as it is (see [the network](network.md))",
        choices=("allowlist", "off", "on"),
    ),
    Key(
        "allow_domains",
        "list",
        (),
        "more names the proxy lets through: `example.com`, `*.example.com` (its subdomains), either with "
        "`:port`; a private or loopback address only through an entry naming its `host:port`",
        items="host names",
        each=_domain,
    ),
    Key(
        "allow_default_domains",
        "bool",
        True,
        "allow the built-in package registries and code hosts (see [the network](network.md#the-built-in-list))",
    ),
    Key(
        "allow_sockets",
        "list",
        (),
        "unix sockets of programs outside the sandbox the agent may reach (e.g. a podman socket); every other one "
        "is out of its reach (see [the user's servers](network.md#the-users-servers))",
        items="absolute or `~/` paths",
        each=_socket,
    ),
    Key(
        "allow_ssh_agent",
        "bool",
        True,
        "let the agent use your ssh agent (`$SSH_AUTH_SOCK`), so that `git push` over ssh signs as outside",
    ),
    Key(
        "max_masks",
        "count",
        0,
        "the most masks a launch may mount; default the backend's own (firejail 30,000, bwrap 10,000, docker 2,000, rootless "
        "podman fewer: see [the docker backend](backends.md#the-docker-backend-macos-linux-on-request)). Past it, "
        "directories are hidden whole (see [Performance](performance.md#past-the-mount-limit))",
        high=MAX_MASKS,
        hint="the kernel allows about 100,000 mounts in all; leave it out to use the backend's own limit",
    ),
)

USER_ONLY = (
    "confine_writes",
    "writable",
    "allow_domains",
    "allow_default_domains",
    "allow_sockets",
    "allow_ssh_agent",
)  # what a project's file may not set: it would widen what the agent writes or reaches

# The keys of a project's .ai-sandbox.toml, in the order they are checked.
PROJECT_KEYS = (
    Key(
        "block",
        "list",
        (),
        "gitignore-style patterns (relative to the git root, `!` negates, a leading `/` anchors, `**` only as a "
        "whole path component) hidden even "
        "when tracked; `~/…` names a path in your home",
        items="strings",
        each=_project_block,
    ),
    Key(
        "allow",
        "list",
        (),
        "git-ignored paths the agent may read; inside the project only",
        items="patterns",
        each=_project_allow,
    ),
    Key(
        "network",
        "choice",
        "on",
        "a narrower network for this project's agent than your config gives: `allowlist` or `off`; the default "
        "leaves yours, and writing `on` here is refused (see [the network](network.md))",
        choices=("allowlist", "off", "on"),
    ),
)


def load_user(env: Mapping[str, str] = os.environ) -> UserConfig:
    path = os.path.join(config_home(env), "config.toml")
    cfg = UserConfig(path=path, exists=os.path.exists(path))
    data, text = load_toml(path) if cfg.exists else ({}, "")
    _read(USER_KEYS, cfg, data, path, text)  # an absent file: the table's defaults
    return cfg


def _type_column(key: Key) -> str:
    if key.kind == "list":
        return f"list of {key.items}"
    if key.kind == "bool":
        return f"bool, default `{str(key.default).lower()}`"
    if key.kind == "choice":
        quoted = [f'`"{c}"`' + (" (default)" if c == key.default else "") for c in key.choices]
        return ", ".join(quoted[:-1]) + " or " + quoted[-1]
    if key.kind == "count":
        return f"whole number, 1 to {key.high:,}"
    return f'string, default `"{key.default}"`' if key.default else "string"


def reference() -> str:
    """docs/configuration.md's reference (between its `config-reference` markers), from the tables."""
    out = []
    for title, keys in (
        ("`~/.config/ai-sandbox/config.toml` (see `examples/config.toml`):", USER_KEYS),
        ("`.ai-sandbox.toml` at the git root (see `examples/ai-sandbox.toml`):", PROJECT_KEYS),
    ):
        out += ["", title, "", "| key | type | meaning |", "| --- | --- | --- |"]
        out += [f"| `{key.name}` | {_type_column(key)} | {key.doc} |" for key in keys]
    return "\n".join(out[1:]) + "\n"


def tilde(path: str, home: str) -> str:
    """path as people write it: `~/…` inside the home (a config file's name in messages and origins)."""
    return "~" + path[len(home) :] if home and path.startswith(home + "/") else path


def _check_inside(entry: str, path: str, line: int, key: str) -> None:
    """An allow entry is a pattern inside the project: it can never name the outside world."""
    body = entry[1:] if entry.startswith("!") else entry
    if body.startswith("~") or ".." in body.split("/"):
        raise ConfigError(
            f"{path}:{line}: `{key}` entry {entry!r} points outside the project",
            "allow entries are gitignore-style patterns relative to the git root",
        )


def load_project(root: str) -> ProjectConfig:
    """`.ai-sandbox.toml` and the legacy bash `.ai-sandbox`, both at the git root; both are read if both exist."""
    cfg = ProjectConfig()
    toml_path = os.path.join(root, PROJECT_FILE)
    legacy_path = os.path.join(root, LEGACY_FILE)
    if _present(toml_path):
        cfg.files.append(toml_path)
        data, text = load_toml(toml_path, root)
        widening = next((k for k in USER_ONLY if k in data), None)
        if widening is not None:
            raise ConfigError(
                f"{toml_path}:{_line_of(text, widening)}: `{widening}` may be set only in your own config, "
                "never in a project's (a cloned repository must not open your home to its agent)",
                "remove it here; set it in ~/.config/ai-sandbox/config.toml if you mean it",
            )
        if data.get("network") == "on":
            raise ConfigError(
                f'{toml_path}:{_line_of(text, "network")}: `network = "on"` may be set only in your own config '
                "(a cloned repository must not open the network for its agent)",
                "remove it here; set it in ~/.config/ai-sandbox/config.toml, or run with --network on",
            )
        _read(PROJECT_KEYS, cfg, data, toml_path, text)
    if _present(legacy_path):
        cfg.files.append(legacy_path)
        home = os.path.expanduser("~")
        try:
            text = read_config(legacy_path, root).decode("utf-8")
        except UnicodeDecodeError as e:
            raise ConfigError(f"cannot read {legacy_path}: {e}", "save it as UTF-8 text") from None
        parsed = legacy.parse(text, legacy_path)
        for entry, line in parsed.block:
            if os.path.isabs(entry) and not below(entry, root):
                cfg.block_paths.append((os.path.normpath(entry), Source(PROJECT, LEGACY_FILE, line)))
                continue
            _add_block(cfg, _legacy_rel(entry, root), Source(PROJECT, LEGACY_FILE, line), legacy_path, line, home)
        for entry, line in parsed.allow:
            rel = _legacy_rel(entry, root)
            if os.path.isabs(entry) and not below(entry, root):
                raise ConfigError(
                    f"{legacy_path}:{line}: allow entry {entry!r} points outside the project",
                    "a project may only allow paths inside itself",
                )
            _check_inside(rel, legacy_path, line, "AI_SANDBOX_ALLOW_PATHS")
            cfg.allow.append(Pattern(rel, Source(PROJECT, LEGACY_FILE, line)))
        if toml_path in cfg.files:
            cfg.warnings.append(f"both {PROJECT_FILE} and the legacy {LEGACY_FILE} exist; both are applied")
    return cfg


def _present(path: str) -> bool:
    """Is there a project config to read? Anything but a directory is (a FIFO, a dangling link): read_config
    then refuses what it cannot read as a plain file, rather than the launch silently dropping the rules."""
    return os.path.lexists(path) and not (os.path.isdir(path) and not os.path.islink(path))


def _legacy_rel(entry: str, root: str) -> str:
    """Legacy files often held absolute paths into the project: anchor them at the root instead."""
    if below(entry, root):
        return "/" + entry[len(root.rstrip("/")) + 1 :]
    if entry.startswith("./"):
        return "/" + entry[2:]
    return entry


def _add_block(cfg: ProjectConfig, entry: str, source: Source, path: str, line: int, home: str) -> None:
    if entry.startswith("~"):
        expanded = os.path.expanduser(entry)
        if expanded.startswith("~"):
            raise ConfigError(f"{path}:{line}: cannot expand {entry!r}", "write ~/… for a path in your home")
        cfg.block_paths.append((os.path.normpath(expanded), source))
        return
    if ".." in entry.lstrip("!").split("/"):
        raise ConfigError(
            f"{path}:{line}: block entry {entry!r} uses `..`",
            "write a pattern relative to the git root, or ~/… for a path in your home",
        )
    cfg.block.append(Pattern(entry, source))


def check_project_allow(project_cfg: ProjectConfig, user_cfg: UserConfig, root: str) -> None:
    """A cloned repository must not weaken the user's rules: refuse an allow that names a global block."""
    from ai_sandbox.patterns import PatternSet

    global_texts = {p.text.strip("/") for p in user_cfg.block_patterns}
    prefix = root.rstrip("/") + "/"
    for pat in project_cfg.allow:
        if pat.text.lstrip("!").strip("/") in global_texts:
            raise ConfigError(
                f"{pat.source}: allow {pat.text!r} would un-hide your global block of the same pattern",
                f"remove it from {pat.source.file}; a project cannot weaken {user_cfg.path}",
            )
        single = PatternSet([pat])
        for path, source in user_cfg.block_paths:
            if not path.startswith(prefix):
                continue
            parts = path[len(prefix) :].split("/")
            for i in range(1, len(parts) + 1):
                rel = "/".join(parts[:i])
                if single.match(rel, i < len(parts) or os.path.isdir(path)):
                    raise ConfigError(
                        f"{pat.source}: allow {pat.text!r} would un-hide {path}, blocked by your global config ({source})",
                        f"remove it from {pat.source.file}; a project cannot weaken your global blocks",
                    )


def legacy_for_toml(root: str) -> tuple[list[str], list[str], list[str]]:
    """The legacy file's entries as `.ai-sandbox.toml` writes them: (block, allow, not expressible there).

    Paths inside the root become anchored patterns and home paths `~/…`; other absolute paths have no
    project-file form and stay behind (for the user's global config).
    """
    path = os.path.join(root, LEGACY_FILE)
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"cannot read {path}: {e}", "save it as UTF-8 text") from None
    parsed = legacy.parse(text, path)
    home = os.path.expanduser("~").rstrip("/") + "/"
    block, allow, left = [], [], []
    for entry, _ in parsed.block:
        if os.path.isabs(entry) and not below(entry, root):
            norm = os.path.normpath(entry)
            if norm.startswith(home):
                block.append("~/" + norm[len(home) :])
            else:
                left.append(norm)
        else:
            block.append(_legacy_rel(entry, root))
    for entry, _ in parsed.allow:
        if os.path.isabs(entry) and not below(entry, root):
            left.append(f"allow {entry} (outside the project: never allowed)")
        else:
            allow.append(_legacy_rel(entry, root))
    return block, allow, left


if __name__ == "__main__":
    import sys

    if sys.argv[1:] != ["--reference"]:
        sys.exit("usage: python -m ai_sandbox.config --reference  (prints docs/configuration.md's reference)")
    print(reference(), end="")
