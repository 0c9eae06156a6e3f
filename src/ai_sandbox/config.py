"""Loading and validating the user's global config and the project's own config.

Unknown keys and wrong types are errors, not warnings: a typo such as `blok = [...]` must not silently
run the agent with fewer blocks than the user wrote.
"""

from __future__ import annotations

import os
import re

from ai_sandbox import legacy
from ai_sandbox.errors import ConfigError
from ai_sandbox.fs import below, write_atomic
from ai_sandbox.paths import config_home, state_dir
from ai_sandbox.patterns import PROJECT, USER, Pattern
from ai_sandbox.records import factory, record

PROJECT_FILE = ".ai-sandbox.toml"
LEGACY_FILE = ".ai-sandbox"
BACKENDS = ("auto", "firejail", "docker")
ENGINES = ("docker", "podman")
ON_HIDDEN_CHANGE = ("end", "warn")
MAX_MASKS = 90_000  # fs.mount-max is 100,000 and firejail mounts some of its own
MAX_ENTRIES = 10_000  # per list: beyond that a config is generated, not written, and matching it would crawl


@record
class UserConfig:
    path: str
    exists: bool = False
    block_paths: list[tuple[str, str]] = factory(list)  # (absolute path, source)
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


@record
class ProjectConfig:
    files: list[str] = factory(list)
    block: list[Pattern] = factory(list)
    block_paths: list[tuple[str, str]] = factory(list)  # `~/…` entries: (absolute, source)
    allow: list[Pattern] = factory(list)
    warnings: list[str] = factory(list)


def load_toml(path: str, root: str = "") -> tuple[dict, str]:
    """The file's TOML and its text. `root`: the project a project config belongs to — what it may link
    to, and whether its parse may be remembered (see `_public`)."""
    raw = read_config(path, root)
    import hashlib  # noqa: PLC0415

    digest = hashlib.sha256(raw).hexdigest()
    cached = _parsed(digest)
    if cached is not None:
        return cached, raw.decode("utf-8")  # only UTF-8 that parsed is ever remembered
    import tomllib  # noqa: PLC0415 — 15 ms; only paid when a config file is new or changed

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
    import stat  # noqa: PLC0415

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
    from ai_sandbox import git  # noqa: PLC0415

    return git.ignores(root, os.path.relpath(path, root))


def _public(root: str, path: str, raw: bytes) -> bool:
    """May a project config's parse be remembered? Only when these exact bytes are what git's index holds
    for the file (an object in .git, readable inside the sandbox anyway): the parse of an untracked,
    ignored, git-crypt-encrypted, edited or linked config would put hidden content in the cache. Asked
    only when the parse is not remembered yet, in place of the 15 ms of tomllib it then saves next time."""
    import hashlib  # noqa: PLC0415

    if os.path.islink(path):
        return False
    from ai_sandbox import git  # noqa: PLC0415

    oid = git.indexed_blob(root, os.path.relpath(path, root))
    if oid is None:
        return False
    blob = b"blob %d\0" % len(raw) + raw
    return (hashlib.sha256 if len(oid) == 64 else hashlib.sha1)(blob).hexdigest().encode() == oid


_KEEP = 64  # remembered parses: one per version of each config file, the oldest dropped past this


def _parse_dir() -> str:
    return os.path.join(state_dir(os.environ), "parsed")


def _parsed(digest: str) -> dict | None:
    """A parse remembered in the state directory under the SHA-256 of the file's bytes: it holds the parsed
    data only, never the bytes or the text, and stands for no other bytes."""
    import marshal  # noqa: PLC0415

    try:
        with open(os.path.join(_parse_dir(), digest), "rb") as f:
            data = marshal.loads(f.read())
    except (OSError, EOFError, ValueError, TypeError):
        return None
    return data if isinstance(data, dict) else None


def _remember(digest: str, data: dict) -> None:
    import marshal  # noqa: PLC0415

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


def strings(data: dict, key: str, path: str, text: str) -> list[tuple[str, int]]:
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
    return entry


def check_keys(data: dict, allowed: set[str], path: str, text: str) -> None:
    for key in data:
        if key not in allowed:
            raise ConfigError(
                f"{path}:{_line_of(text, key)}: unknown key `{repr(key)[1:-1]}`",
                f"known keys: {', '.join(sorted(allowed))}",
            )


def load_user(env: dict[str, str] | os._Environ[str] = os.environ) -> UserConfig:
    path = os.path.join(config_home(env), "config.toml")
    cfg = UserConfig(path=path)
    if not os.path.exists(path):
        return cfg
    cfg.exists = True
    data, text = load_toml(path)
    check_keys(
        data,
        {
            "block",
            "allow",
            "allow_dependencies",
            "allow_build_outputs",
            "backend",
            "on_hidden_change",
            "engine",
            "image",
            "mounts",
            "max_masks",
        },
        path,
        text,
    )
    home = os.path.expanduser("~")
    for entry, line in strings(data, "block", path, text):
        _pattern_entry(entry, path, line, "block")
        source = f"{_tilde(path, home)}:{line}"
        if entry.startswith(("/", "~")):
            expanded = os.path.expanduser(entry)
            if expanded.startswith("~"):
                raise ConfigError(f"{path}:{line}: cannot expand {entry!r}", "write ~/… or an absolute path")
            cfg.block_paths.append((os.path.normpath(expanded), source))
        else:
            cfg.block_patterns.append(Pattern(entry, source, USER))
    for entry, line in strings(data, "allow", path, text):
        _pattern_entry(entry, path, line, "allow")
        _check_inside(entry, path, line, "allow")
        cfg.allow.append(Pattern(entry, f"{_tilde(path, home)}:{line}", USER))
    for key in ("allow_dependencies", "allow_build_outputs"):
        flag = data.get(key, True)
        if not isinstance(flag, bool):
            raise ConfigError(f"{path}:{_line_of(text, key)}: `{key}` must be true or false")
        setattr(cfg, key, flag)
    backend = data.get("backend", "auto")
    if backend not in BACKENDS:
        raise ConfigError(
            f"{path}:{_line_of(text, 'backend')}: unknown backend {backend!r}",
            f"use one of: {', '.join(BACKENDS)}",
        )
    cfg.backend = backend
    change = data.get("on_hidden_change", "end")
    if change not in ON_HIDDEN_CHANGE:
        raise ConfigError(
            f"{path}:{_line_of(text, 'on_hidden_change')}: unknown on_hidden_change {change!r}",
            f"use one of: {', '.join(ON_HIDDEN_CHANGE)}",
        )
    cfg.on_hidden_change = change
    engine = data.get("engine", "docker")
    if engine not in ENGINES:
        raise ConfigError(
            f"{path}:{_line_of(text, 'engine')}: unknown engine {engine!r}", f"use one of: {', '.join(ENGINES)}"
        )
    cfg.engine = engine
    image = data.get("image", "")
    if not isinstance(image, str):
        raise ConfigError(
            f"{path}:{_line_of(text, 'image')}: `image` must be a string", 'e.g. image = "ai-sandbox-agent"'
        )
    cfg.image = image
    for entry, line in strings(data, "mounts", path, text):
        expanded = os.path.expanduser(entry)
        if not os.path.isabs(expanded):
            raise ConfigError(
                f"{path}:{line}: mount {entry!r} is not an absolute or ~/ path", 'e.g. mounts = ["~/.gitconfig"]'
            )
        cfg.mounts.append(entry)
    if "max_masks" in data:
        limit = data["max_masks"]
        if type(limit) is not int or not 0 < limit <= MAX_MASKS:
            raise ConfigError(
                f"{path}:{_line_of(text, 'max_masks')}: `max_masks` must be a whole number from 1 to {MAX_MASKS:,}",
                "the kernel allows about 100,000 mounts in all; leave it out to use the backend's own limit",
            )
        cfg.max_masks = limit
    return cfg


def _tilde(path: str, home: str) -> str:
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
    home = os.path.expanduser("~")
    if _present(toml_path):
        cfg.files.append(toml_path)
        data, text = load_toml(toml_path, root)
        check_keys(data, {"block", "allow"}, toml_path, text)
        for entry, line in strings(data, "block", toml_path, text):
            _pattern_entry(entry, toml_path, line, "block")
            _add_block(cfg, entry, f"{PROJECT_FILE}:{line}", toml_path, line, home)
        for entry, line in strings(data, "allow", toml_path, text):
            _pattern_entry(entry, toml_path, line, "allow")
            _check_inside(entry, toml_path, line, "allow")
            cfg.allow.append(Pattern(entry, f"{PROJECT_FILE}:{line}", PROJECT))
    if _present(legacy_path):
        cfg.files.append(legacy_path)
        try:
            text = read_config(legacy_path, root).decode("utf-8")
        except UnicodeDecodeError as e:
            raise ConfigError(f"cannot read {legacy_path}: {e}", "save it as UTF-8 text") from None
        parsed = legacy.parse(text, legacy_path)
        for entry, line in parsed.block:
            if os.path.isabs(entry) and not below(entry, root):
                cfg.block_paths.append((os.path.normpath(entry), f"{LEGACY_FILE}:{line}"))
                continue
            _add_block(cfg, _legacy_rel(entry, root), f"{LEGACY_FILE}:{line}", legacy_path, line, home)
        for entry, line in parsed.allow:
            rel = _legacy_rel(entry, root)
            if os.path.isabs(entry) and not below(entry, root):
                raise ConfigError(
                    f"{legacy_path}:{line}: allow entry {entry!r} points outside the project",
                    "a project may only allow paths inside itself",
                )
            _check_inside(rel, legacy_path, line, "AI_SANDBOX_ALLOW_PATHS")
            cfg.allow.append(Pattern(rel, f"{LEGACY_FILE}:{line}", PROJECT))
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


def _add_block(cfg: ProjectConfig, entry: str, source: str, path: str, line: int, home: str) -> None:
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
    cfg.block.append(Pattern(entry, source, PROJECT))


def check_project_allow(project_cfg: ProjectConfig, user_cfg: UserConfig, root: str) -> None:
    """A cloned repository must not weaken the user's rules: refuse an allow that names a global block."""
    from ai_sandbox.patterns import PatternSet  # noqa: PLC0415

    global_texts = {p.text.strip("/") for p in user_cfg.block_patterns}
    prefix = root.rstrip("/") + "/"
    for pat in project_cfg.allow:
        if pat.text.lstrip("!").strip("/") in global_texts:
            raise ConfigError(
                f"{pat.source}: allow {pat.text!r} would un-hide your global block of the same pattern",
                f"remove it from {pat.source.split(':')[0]}; a project cannot weaken {user_cfg.path}",
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
                        f"remove it from {pat.source.split(':')[0]}; a project cannot weaken your global blocks",
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
