"""Agent profiles: which executable an agent name means and which files it needs to stay readable.

Profiles are TOML files: the ones shipped in the package, overridden by the user's own in
`$XDG_CONFIG_HOME/ai-sandbox/profiles/NAME.toml`. Any other name is run as a plain executable.
"""

from __future__ import annotations

import functools  # imported by re: free on the launch path
import os
import re

from ai_sandbox.errors import ConfigError
from ai_sandbox.globs import Glob, Names
from ai_sandbox.paths import sha256, shipped_dir
from ai_sandbox.patterns import PROFILE, Pattern, Source
from ai_sandbox.records import factory, record

# Directories agents keep in a project, git-ignored by convention, that they need in order to work.
TOOL_ALLOW = (
    ".claude/",
    "CLAUDE.local.md",
    ".codex/",
    ".aider*",
    ".continue/",
    ".gemini/",
    ".opencode/",
    ".cursor/",
    ".windsurf/",
    ".cline/",
    ".roo/",
    ".goose/",
    ".amazonq/",
)

# Public packages and caches: an agent must be able to build and run the tests without per-project set-up.
DEPENDENCY_DIRS = (
    "node_modules/",
    ".venv/",
    "venv/",
    "__pycache__/",
    ".tox/",
    ".pytest_cache/",
    ".mypy_cache/",
    ".ruff_cache/",
    "target/",
    ".gradle/",
)

# What builds, test runners and apps write where they always write, git-ignored by convention: readable and
# writable inside like the dependency directories, or the agent's first `npm run build` fails on the `dist/` an
# earlier build left (`allow_build_outputs = false` hides them like any ignored path). Logs are here too: an agent
# that starts the app must be able to read what it logged.
BUILD_OUTPUT_DIRS = (
    "dist/",
    "build/",
    "out/",
    "_build/",
    ".next/",
    ".nuxt/",
    ".output/",
    ".svelte-kit/",
    ".angular/",
    ".turbo/",
    ".parcel-cache/",
    ".vite/",
    ".docusaurus/",
    "storybook-static/",
    "coverage/",
    ".nyc_output/",
    "htmlcov/",
    ".coverage",
    "*.egg-info/",
    "cmake-build-*/",
    "bin/",
    "obj/",
    "*.tsbuildinfo",
    "*.log",
    "logs/",
    "log/",
)

# Names that usually hold credentials, matched case-insensitively against the name alone: `init` suggests the
# readable ones, and inside a build output kept readable they stay hidden (a build that copied `.env` into
# `dist/`); a directory that matches is hidden whole. Narrow on purpose: `*token*` or `*password*` would hide the
# `password-reset.js` chunk a web build emits.
SECRET_NAMES = (
    "*.tfvars", "*.tfvars.json", "*.tfstate", "*.tfstate.*", "*.tfplan", "*.pem", "*.key", "*.key.*", "*.p12",
    "*.pfx", "*.jks", "*.keystore", "*.kdbx", "*.ovpn", "id_rsa*", "id_dsa*", "id_ecdsa*", "id_ed25519*",
    "*_rsa", "*_ed25519", "deploy_key*", ".env*", "*.env", "env.production", "env.prod", ".npmrc", ".pypirc",
    ".netrc", ".htpasswd", ".pgpass", ".my.cnf", ".s3cfg", ".vault-token", "secring.*", "kubeconfig*",
    "*.kubeconfig", "service-account*.json", "*adminsdk*.json", "*credentials*", "*secret*", "*.age", "*.asc",
)  # fmt: skip
# Committed on purpose as templates: never a secret.
NOT_SECRET = ("*.example", "*.sample", "*.template", "*.dist", "*.tpl", "*.md", "*.rst")
# `*secret*` and `*credentials*` also match code (secret_manager.py, credentials-form.js): data files only.
_DATA_EXT = {"", ".json", ".yaml", ".yml", ".toml", ".ini", ".conf", ".cfg", ".txt", ".xml", ".properties", ".env",
             ".bak"}  # fmt: skip
_WIDE = ("*secret*", "*credentials*")
_SECRETS = [Glob(p) for p in SECRET_NAMES]  # globs.py: no regex to compile at every launch
_ANY_SECRET = Names(SECRET_NAMES)
_NOT_SECRET = Names(NOT_SECRET)


# What secret_name answers depends on: the lists above, and how it reads them (bump SECRET_LOGIC when that
# changes). Build-output listings remembered between launches hold its answers, kept under this name.
SECRET_LOGIC = 2  # 2: any pattern that holds decides, not the first that matches


def secret_rules() -> str:
    rules = (SECRET_LOGIC, SECRET_NAMES, NOT_SECRET, sorted(_DATA_EXT), _WIDE)
    return sha256(repr(rules).encode()).hexdigest()[:12]


SECRET_RULES = secret_rules()


@functools.lru_cache(maxsize=4096)  # a monorepo's build outputs ask of `dist`, `types`, `coverage` thousands of times
def secret_name(name: str) -> str | None:
    """The SECRET_NAMES pattern that a file or directory name matches, if it looks like a secret."""
    low = name.lower()
    if not _ANY_SECRET.any(low) or _NOT_SECRET.any(low):
        return None
    # the first pattern that holds: `*secret*` passes over code (secret_manager.py), and `secret.asc` is then still
    # an armored key by `*.asc` (thirtieth red team: the first match alone decided, and left it readable in dist/)
    data = os.path.splitext(low)[1] in _DATA_EXT
    return next((g.text for g in _SECRETS if g.match(low) and (data or g.text not in _WIDE)), None)


_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


@record
class Profile:
    name: str
    executable: str
    description: str = ""
    allow: list[Pattern] = factory(list)
    home: list[str] = factory(list)
    moved: dict[str, str] = factory(dict)  # a file saved by rename in the home -> where it is kept (homefiles.py)
    image: str = ""  # the docker backend's image for this agent, if not the configured one
    domains: list[str] = factory(list)  # what the agent needs to reach to work (network.py's allowlist)
    path: str = ""  # the file it came from; empty for the generic fallback


def user_dir(config_home: str) -> str:
    return os.path.join(config_home, "profiles")


def find(name: str, config_home: str) -> Profile | None:
    """The profile called name, the user's own first; None when there is none."""
    if not _NAME.match(name):
        return None
    for directory in (user_dir(config_home), shipped_dir()):
        path = os.path.join(directory, name + ".toml")
        if os.path.isfile(path):
            return load(path)
    return None


def generic(executable: str) -> Profile:
    return Profile(name=os.path.basename(executable), executable=executable, description="any command")


def load(path: str) -> Profile:
    from ai_sandbox.config import check_keys, load_toml, strings

    data, text = load_toml(path)
    check_keys(data, {"description", "executable", "allow", "home", "moved", "image", "domains"}, path, text)
    name = os.path.basename(path).removesuffix(".toml")
    exe = data.get("executable", name)
    if not isinstance(exe, str) or not exe:
        raise ConfigError(f"{path}: `executable` must be a non-empty string", 'e.g. executable = "claude"')
    desc = data.get("description", "")
    if not isinstance(desc, str):
        raise ConfigError(f"{path}: `description` must be a string")
    allow = [Pattern(p, Source(PROFILE, name=f"profile {name}")) for p, _ in strings(data, "allow", path, text)]
    home = [p for p, _ in strings(data, "home", path, text)]
    image = data.get("image", "")
    if not isinstance(image, str):
        raise ConfigError(f"{path}: `image` must be a string")
    moved = _moved(data.get("moved", {}), home, path)
    from ai_sandbox import network

    domains = []
    for entry, line in strings(data, "domains", path, text):
        if network.parse_entry(entry, "") is None:
            raise ConfigError(
                f"{path}:{line}: domains entry {entry!r} is not a host name, `*.name`, or either with `:port`"
            )
        domains.append(entry)
    return Profile(
        name=name, executable=exe, description=desc, allow=allow, home=home, moved=moved, image=image, path=path,
        domains=domains,
    )  # fmt: skip


def _moved(value: object, home: list[str], path: str) -> dict[str, str]:
    """`[moved]`: "~/file" = "~/dir/file", the file straight in the home, kept in a directory of `home`."""
    dirs = [h for h in home if h.startswith("~/") and h.endswith("/")]
    if not isinstance(value, dict):
        raise ConfigError(
            f"{path}: `moved` must be a table", '[moved] then "~/.claude.json" = "~/.claude/.claude.json"'
        )
    for src, dst in value.items():
        ok = isinstance(dst, str) and src.startswith("~/") and "/" not in src[2:] and src[2:] not in ("", ".", "..")
        name = dst.rsplit("/", 1)[-1] if isinstance(dst, str) else ""
        if not ok or name in ("", ".", "..") or not any(dst.startswith(d) and "/" not in dst[len(d) :] for d in dirs):
            raise ConfigError(
                f"{path}: `moved` entry {src!r} must name a file in the home, kept in one of the `home` directories",
                '[moved] then "~/.claude.json" = "~/.claude/.claude.json", with "~/.claude/" in home',
            )
    return dict(value)


def available(config_home: str) -> list[Profile]:
    """Every profile by name, the user's own replacing a shipped one of the same name."""
    found: dict[str, Profile] = {}
    for directory in (shipped_dir(), user_dir(config_home)):
        try:
            names = sorted(os.listdir(directory))
        except OSError:
            continue
        for fname in names:
            name = fname.removesuffix(".toml")
            if fname.endswith(".toml") and _NAME.match(name):
                found[name] = load(os.path.join(directory, fname))
    return [found[n] for n in sorted(found)]
