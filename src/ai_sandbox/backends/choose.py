"""Which backend a launch uses: the one named, or for `backend = "auto"` on Linux the first of the registry's
Linux backends (firejail, then bwrap) that is installed and really sandboxes here, otherwise a refusal naming
what to install or enable; on macOS, docker.

"Really sandboxes" takes a sandbox start (firejail inside a container runs commands with no sandbox; bwrap
without user namespaces does not start), ~0.1 s: too much for every launch. So the answer is kept in the
cache directory (read-only inside every sandbox, so a session cannot choose the next launch's backend),
keyed by what would change it: the user and their groups, the boot, the namespaces this runs in, the tools'
files (mode and owner too), each backend's own configuration (`state_files`: firejail.users and
firejail.config, AppArmor's profiles), the kernel's user-namespace switches and ai-sandbox's launch check.
A backend's cheap checks (`unavailable()`: installed, runnable, firejail.users naming the user) are asked at
every launch whatever the cache says, and a "does not work" is asked again after a day, for what no key
sees. A stale "works" is not a hole: every launch proves its sandbox from inside (verify.py) and refuses
otherwise; `doctor` asks again and rewrites it.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from collections.abc import Mapping

from ai_sandbox.backends.plan import Settings
from ai_sandbox.backends.registry import REGISTRY, make, on
from ai_sandbox.errors import UnavailableError, UsageError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ai_sandbox.backends.protocol import Backend

ORDER = on("linux")
_KNOBS = (
    "/proc/sys/kernel/random/boot_id",
    "/proc/sys/kernel/apparmor_restrict_unprivileged_userns",
    "/proc/sys/kernel/unprivileged_userns_clone",
    "/proc/sys/user/max_user_namespaces",
)


def state_key(backends: list[Backend]) -> str:
    """What the verdicts depend on, as one string (a few stats and reads: ~0.1 ms)."""
    from ai_sandbox import verify

    parts = [f"{os.getuid()}:{os.geteuid()}:{sorted(os.getgroups())}"]
    for knob in _KNOBS:
        try:
            with open(knob, "rb") as f:
                parts.append(f.read(64).strip().decode("ascii", "replace"))
        except OSError:
            parts.append("-")
    for ns in ("pid", "user", "mnt"):
        try:
            parts.append(os.readlink(f"/proc/self/ns/{ns}"))
        except OSError:
            parts.append("-")
    files = [getattr(b, "executable", None) or "-" for b in backends] + [verify.__file__]
    for path in files + [f for b in backends for f in b.state_files]:
        try:
            st = os.stat(path)
            parts.append(f"{path}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}:{st.st_mode}:{st.st_uid}")
        except OSError:
            parts.append(f"{path}:-")
    return "|".join(parts)


RECHECK = 24 * 3600  # seconds after which a "does not work" is asked again


def cache_file(env: Mapping[str, str]) -> str:
    from ai_sandbox.paths import cache_dir

    return os.path.join(cache_dir(env), "backends.json")


def verdicts(env: Mapping[str, str], key: str) -> dict[str, list[str] | None]:
    """The cached answers for this key: backend name -> None (it sandboxes here) or [message, hint]."""
    from ai_sandbox.fs import read_json

    data = read_json(cache_file(env), 1 << 16)
    if not isinstance(data, dict) or data.get("key") != key or not isinstance(data.get("verdicts"), dict):
        return {}
    fresh = isinstance(data.get("when"), (int, float)) and 0 <= time.time() - data["when"] < RECHECK
    return {k: v for k, v in data["verdicts"].items() if v is None or (fresh and isinstance(v, list) and len(v) == 2)}


def save(env: Mapping[str, str], key: str, found: Mapping[str, list[str] | None]) -> None:
    from ai_sandbox.fs import write_atomic

    doc = {"key": key, "when": int(time.time()), "verdicts": dict(found)}
    with contextlib.suppress(OSError):  # read-only here (inside a sandbox): asked again next time
        write_atomic(cache_file(env), json.dumps(doc).encode())


def verdict(backend: Backend, env: Mapping[str, str]) -> UnavailableError | None:
    """A fresh answer: not installed, or a real start that does not sandbox; None when it does."""
    return backend.unavailable() or backend.probe(env)


def _saved(err: UnavailableError | None) -> list[str] | None:
    return None if err is None else [err.message, err.hint]


def survey(settings: Settings, env: Mapping[str, str]) -> dict[str, tuple[Backend, UnavailableError | None]]:
    """Every backend of ORDER asked afresh, with its answer, saved for auto's next launches (doctor)."""
    found = {name: (b, verdict(b, env)) for name in ORDER for b in [make(name, settings)]}
    save(env, state_key([b for b, _ in found.values()]), {name: _saved(err) for name, (_, err) in found.items()})
    return found


def linux(settings: Settings, env: Mapping[str, str], *, fresh: bool = False) -> Backend:
    """The first backend of ORDER that sandboxes here. fresh: ask each again (doctor)."""
    inside = _inside()
    if inside is not None:
        # already sandboxed (an agent ran `claude` through the alias): the launch runs directly if this
        # sandbox's masks are in force, so the policy is computed as this sandbox names paths; no start
        return make(inside, settings)
    backends = [make(name, settings) for name in ORDER]
    key = state_key(backends)
    known = {} if fresh else verdicts(env, key)
    found: dict[str, list[str] | None] = {}
    reasons = []
    for backend in backends:
        err: UnavailableError | None
        cheap = backend.unavailable()  # at every launch: the cache cannot know firejail.users changed its mind
        if cheap is not None:
            err = cheap
        elif backend.name in known:
            v = known[backend.name]
            err = None if v is None else UnavailableError(v[0], v[1])
        else:
            err = verdict(backend, env)
            found[backend.name] = _saved(err)
        if err is None:
            if found:
                save(env, key, {**known, **found})
            return backend
        reasons.append((backend.name, err))
    if found:
        save(env, key, {**known, **found})
    raise UnavailableError(
        "no sandbox backend works here: " + "; ".join(f"{name}: {e.message}" for name, e in reasons),
        " — or ".join(dict.fromkeys(e.hint for _, e in reasons if e.hint)),
    )


def assumed(settings: Settings) -> Backend:
    """The backend explain, init and --dry-run show the rules of when none works here: the first of ORDER
    that is installed (the one a fix would most likely make work), else the first."""
    backends = [make(name, settings) for name in ORDER]
    return next((b for b in backends if getattr(b, "executable", None)), backends[0])


def _inside() -> str | None:
    """The backend whose sandbox this process is in (nested.py asks the kernel which), if any."""
    from ai_sandbox import nested

    kind = nested.which(nested.mounts())
    return next((name for name, e in REGISTRY.items() if kind and e.inside == kind), None)


def select(name: str, settings: Settings | None = None, env: Mapping[str, str] | None = None) -> Backend:
    """The backend called name; `auto`: docker on macOS, on Linux the first of ORDER that sandboxes here."""
    if name == "auto":
        if sys.platform.startswith("linux"):
            return linux(settings or Settings(), os.environ if env is None else env)
        if sys.platform != "darwin":
            raise UnavailableError(
                f"no sandbox backend for {sys.platform}",
                "ai-sandbox runs on Linux (firejail, bwrap) and macOS (docker)",
            )
        name = on("darwin")[0]
    if name not in REGISTRY:
        raise UsageError(f"unknown backend {name!r}", f"use one of: auto, {', '.join(REGISTRY)}")
    return make(name, settings or Settings())
