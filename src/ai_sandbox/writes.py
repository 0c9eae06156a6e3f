"""Where the agent may write: write containment's rules, computed once per launch, pure.

An agent steered by what it reads (a README, an issue, a web page) could plant what runs later outside every
sandbox — `~/.bashrc`, `~/.local/bin/git`, `.git/hooks/pre-commit`, `/etc/ld.so.preload` as root — and the
planted code would read every secret ai-sandbox hid. So, where the user's config says `confine_writes = true`,
the sandbox shows everything read-only except the places the work needs: the project and its git
directory, the agent's own state (its profile's `home`), the build tools' caches, the temporary directories,
and what the user's config adds with `writable`. Inside those, what the user's own tools later run without
asking stays read-only: the repository's hooks, and an editor's workspace settings.

The rules are places, each read-only or writable, applied from the outermost in: the most specific one wins
(firejail's read-only/read-write lines and bwrap's binds both work that way, measured with firejail 0.9.72
and bubblewrap 0.8). An anchor is a writable directory made a mount point so that a session cannot rename it
with the read-only place inside it (`mv .git .git-old`, then a fresh `.git/hooks`: measured, EBUSY once
anchored). A place missing at the launch cannot be mounted: a missing writable one stays read-only (its
tool fails with EROFS), a missing protected one is not protected (docs/threat-model.md).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable

from ai_sandbox.errors import PolicyError
from ai_sandbox.fs import below, inside
from ai_sandbox.records import factory, record, value

# What builds write outside the project, in the home: caches whose tools fail without them. Each is writable
# inside only when it exists (or its tool is on PATH: then it is made first, as the tool would make it). Not
# the directories tools install programs into (~/.cargo/bin, ~/go/bin, ~/.local/bin) nor their config files
# (~/.cargo/config.toml, ~/.gradle/init.d, ~/.m2/settings.xml, ~/.npmrc): those run later, outside.
TOOL_CACHES = (
    ("~/.cache", ""),  # XDG cache: pip, uv, go-build, pnpm, yarn 1, corepack, node-gyp, pre-commit
    ("~/.npm", "npm"),  # npm's cache, logs and npx
    ("~/.yarn/berry", "yarn"),  # yarn 2+'s global cache
    ("~/.local/share/pnpm", "pnpm"),  # pnpm's store
    ("~/.cargo/registry", "cargo"),
    ("~/.cargo/git", "cargo"),
    ("~/go/pkg/mod", "go"),
    ("~/.m2/repository", "mvn"),
    ("~/.gradle/caches", "gradle"),
    ("~/.gradle/wrapper", "gradle"),
    ("~/.gradle/native", "gradle"),
)
TEMPORARY = ("/tmp", "/var/tmp", "/dev/shm")
# Inside the project, what an editor runs or loads from the project when it opens the folder: VS Code's
# tasks (`runOn: folderOpen`) and settings (interpreter and tool paths), JetBrains' project (a trusted one
# imports its build on open). The repository's hooks are added per git directory (`hooks/`).
PROJECT_PROTECTED = (".vscode", ".idea")
_GIT_DIR = ("HEAD", "objects", "refs")  # what git itself looks for in a git directory


@value
class Place:
    """One rule: path writable or read-only inside, and where the rule comes from (shown by explain)."""

    path: str
    writable: bool
    origin: str


@record
class Writes:
    """A launch's write rules. `confined` False: no rule, the agent writes wherever file modes let it."""

    confined: bool = False
    places: list[Place] = factory(list)  # outermost first: the order the backends apply them in
    anchors: list[str] = factory(list)  # writable directories made mount points, so no session renames them
    make: list[str] = factory(list)  # writable directories missing at the launch: made first, as their tools would

    def writable(self, path: str) -> bool:
        """Whether path is writable inside by these rules (file modes aside): the most specific place decides."""
        return _writable_by(self.places, path)

    def steps(self, anchors: Iterable[str] = ()) -> list[tuple[str, str]]:
        """(kind, path) in the order a backend applies them: "ro", "rw" or "anchor" (this launch's and the
        given ones: ai-sandbox's own), outermost first, an anchor before the places inside it (a recursive
        bind, or firejail's read-write of an anchor, would re-open them)."""
        out = [(_depth(a), 0, "anchor", a) for a in dict.fromkeys([*self.anchors, *anchors])]
        out += [(_depth(p.path), 1, "rw" if p.writable else "ro", p.path) for p in self.places]
        return [(kind, path) for _, _, kind, path in sorted(out)]

    @property
    def read_only(self) -> list[Place]:
        return [p for p in self.places if not p.writable]

    @property
    def open(self) -> list[Place]:
        return [p for p in self.places if p.writable]


def expand(entry: str, home: str) -> str:
    """A `~/…` or absolute entry as an absolute, normal path."""
    if entry == "~" or entry.startswith("~/"):
        entry = home + entry[1:]
    return os.path.normpath(entry)


def plan(
    *,
    confine: bool,
    whole_system: bool,
    homes: Iterable[str],
    root: str,
    git_dirs: Iterable[str],
    state: Iterable[tuple[str, str]],
    writable: Iterable[tuple[str, str]],
    modules: Iterable[str] = (),
    exists: Callable[[str], bool] = os.path.lexists,
    on_path: Callable[[str], bool] = lambda tool: False,
    resolve: Callable[[str], str] = os.path.realpath,
) -> Writes:
    """The rules of one launch.

    whole_system: everything outside the writable places is read-only (root, or a backend that can re-open
    any directory: bwrap); otherwise only the homes are made read-only and file modes protect the rest
    (firejail lets a user re-open only directories the user owns, so not /tmp under a read-only /).
    homes: `$HOME` as the agent gets it and the account's home, real paths. state: (entry, origin) of the
    agent profile's own state, `~/…` entries. writable: (absolute path, origin) the user's config adds. modules:
    the git directories of submodules (`<git dir>/modules/…`) and of repositories nested in the project (their
    `.git` there), whose hooks the user's git in one runs. A protected place that is a link refuses: its target
    can be made read-only, not the link, which the session could replace (twenty-seventh red team).
    Entries with glob characters are skipped: a mount names one path."""
    if not confine:
        return Writes()
    homes = list(dict.fromkeys(h for h in homes if h and h != "/"))
    home = homes[0] if homes else ""
    tops = [Place("/", False, "built-in: the system")] if whole_system else []
    tops += [Place(h, False, "built-in: your home") for h in homes]
    opened: list[Place] = [Place(t, True, "built-in: temporary files") for t in TEMPORARY]
    if not any(inside(h, root) for h in homes):  # launched from the home (or above): it stays read-only
        opened.append(Place(root, True, "built-in: the project"))
    # a git directory is writable only where it is one, never a home, /, or a directory holding either: a session
    # can point the next launch's `.git` file (or a link in it) anywhere (twenty-first red team)
    gits = [
        g
        for g in dict.fromkeys(git_dirs)
        if g != "/" and not any(inside(h, g) for h in homes) and all(exists(os.path.join(g, n)) for n in _GIT_DIR)
    ]
    opened += [Place(g, True, "built-in: the project's git directory") for g in gits]
    make: list[str] = []
    mine: list[tuple[str, str, bool]] = []  # (path, origin, made when missing) of the home's state and caches
    if home:
        for entry, origin in state:
            if not any(c in entry for c in "*?["):
                mine.append((expand(entry.rstrip("/"), home), origin, entry.endswith("/")))
        for entry, tool in TOOL_CACHES:
            path = expand(entry, home)
            if exists(path) or not tool or on_path(tool):
                mine.append((path, "built-in: build tools' cache", True))
    for path, origin, made in mine:
        # never through a link: inside a writable place the agent could have put it (`~/.cache/claude ->
        # ~/.local/bin`), and a session with containment off anywhere (`~/.npm -> ~/.local/bin`, `-> /etc`). A
        # place that is a link stays read-only; `writable` names its target where you mean it.
        if resolve(path) != path:
            continue
        opened.append(Place(path, True, origin))
        if made and below(path, home) and not exists(path):
            make.append(path)
    for given, origin in writable:  # the user's own choice, wherever it leads; never a home or / whole
        real = resolve(os.path.normpath(given))
        if real != "/" and not any(inside(h, real) for h in homes):
            opened.append(Place(real, True, origin))
    hooks = [os.path.join(g, "hooks") for g in gits] + [os.path.join(m, "hooks") for m in modules]
    protected = [Place(h, False, "built-in: runs later outside (git hooks)") for h in dict.fromkeys(hooks)]
    protected += [
        Place(os.path.join(root, name), False, "built-in: runs later outside (editor settings)")
        for name in PROJECT_PROTECTED
    ]
    protected = [p for p in protected if exists(p.path)]
    for p in protected:
        if resolve(p.path) != p.path:
            raise PolicyError(
                f"cannot confine writes: {p.path} is a link (to {resolve(p.path)}), which a session could replace "
                "with a directory of its own",
                "make it a directory (move its target there), or set confine_writes = false (see docs/writes.md)",
            )
    places: dict[str, Place] = {}
    for p in [*tops, *opened, *protected]:
        places[p.path] = p  # a later list wins for one path: the protected over the writable
    ordered = sorted(places.values(), key=lambda p: _depth(p.path))
    kept: list[Place] = []
    for p in ordered:
        if p.writable and not whole_system and _writable_by(kept, p.path):
            continue  # nothing read-only above it: the rule would change nothing (and firejail may refuse it)
        kept.append(p)
    live = {k.path for k in kept}
    anchors = sorted({os.path.dirname(p.path) for p in protected if p.path in live} - {"/"}, key=_depth)
    return Writes(True, kept, anchors, [m for m in make if any(k.path == m for k in kept)])


def _depth(path: str) -> tuple[int, str]:
    return (0 if path == "/" else path.count("/"), path)


def _writable_by(places: list[Place], path: str) -> bool:
    best: Place | None = None
    for p in places:
        if inside(path, p.path) and (best is None or len(p.path) > len(best.path)):
            best = p
    return best is None or best.writable
