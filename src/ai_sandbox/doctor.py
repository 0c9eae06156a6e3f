"""`ai-sandbox doctor`: can the main job run here? Each check says what it found and how to fix it.

The backend check runs a real sandbox that hides a temp file, built by the same backend code a launch
uses: a backend that starts but does not hide is a failure, not a pass.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass

from ai_sandbox import config, nested, paths, profiles
from ai_sandbox.errors import SandboxError
from ai_sandbox.fs import printable

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ai_sandbox.backends.plan import Settings
    from ai_sandbox.backends.protocol import Backend
    from ai_sandbox.launch import Prepared


@dataclass
class Check:
    name: str
    status: str  # ok, warn (works, but something is missing), fail (the main job cannot run)
    detail: str
    hint: str = ""


def run_all(env: Mapping[str, str], opts: Mapping[str, str | None], cwd: str) -> list[Check]:
    """opts: the launch options given before the command (backend, engine, image)."""
    from ai_sandbox.backends.plan import Settings

    checks: list[Check] = []
    user_cfg = _config_checks(env, checks)
    name = opts.get("backend") or (user_cfg.backend if user_cfg else "auto")
    settings = Settings(
        engine=opts.get("engine") or (user_cfg.engine if user_cfg else "docker"),
        image=opts.get("image") or (user_cfg.image if user_cfg else ""),
        cwd=cwd,
    )
    checks += _backend_checks(name, env, settings)
    checks.append(_tool("git", ["git", "--version"], required=True, hint="sudo apt-get install git"))
    checks.append(
        _tool(
            "git-crypt",
            ["git-crypt", "--version"],
            required=False,
            hint="only needed to unlock encrypted files; ai-sandbox finds them without it",
        )
    )
    checks.append(_userns())
    checks.append(_launcher(env))
    if nested.inside_sandbox(nested.mounts()):
        checks.append(
            Check("nesting", "ok", "running inside a sandbox: a launch here runs directly if its masks are in force")
        )
    if user_cfg is not None and not any(c.status == "fail" and c.name == "git" for c in checks):
        check, prepared = _policy_check(env, opts, cwd)
        checks.append(check)
        if prepared is not None:
            checks.append(_writes_check(prepared))
            checks.append(_network_check(prepared))
            checks.append(_secrets_check(env, prepared))
    return checks


def _config_checks(env: Mapping[str, str], checks: list[Check]) -> config.UserConfig | None:
    user_cfg = None
    try:
        user_cfg = config.load_user(env)
        detail = f"{user_cfg.path} parses" if user_cfg.exists else f"no {user_cfg.path} (defaults apply)"
        checks.append(Check("user config", "ok", detail))
    except SandboxError as e:
        checks.append(Check("user config", "fail", e.message, e.hint or "fix the file"))
    try:
        found = profiles.available(paths.config_home(env))
        checks.append(Check("profiles", "ok", f"{len(found)} profiles: {', '.join(p.name for p in found)}"))
    except SandboxError as e:
        checks.append(Check("profiles", "fail", e.message, e.hint or "fix the profile file"))
    return user_cfg


def _backend_checks(name: str, env: Mapping[str, str], settings: Settings) -> list[Check]:
    """On Linux every backend auto chooses from, asked afresh with a real start (the answers are saved for
    auto's next launches), then the one in use: its self-test."""
    from ai_sandbox.backends import choose
    from ai_sandbox.backends.choose import select

    checks: list[Check] = []
    found: dict[str, tuple[Backend, SandboxError | None]] = {}
    if sys.platform.startswith("linux"):
        found.update(choose.survey(settings, env))
    chosen: Backend | None
    if name == "auto" and found:
        chosen = next((b for b, why in found.values() if why is None), None)
    else:
        try:
            chosen = select(name, settings, env)
        except SandboxError as e:
            return [Check("backend", "fail", e.message, e.hint)]
        if chosen.name not in found:
            found[chosen.name] = (chosen, chosen.probe(env))
    for n, (b, why) in found.items():
        used = chosen is not None and chosen.name == n
        if why is None:
            detail = b.version() or "installed (version unknown)"
            checks.append(Check(f"backend {n}", "ok", detail + (" — in use" if used else "")))
        else:
            checks.append(Check(f"backend {n}", "fail" if used or chosen is None else "warn", why.message, why.hint))
    if chosen is None:
        return [*checks, Check("backend", "fail", "no sandbox backend works here", "see the backend lines above")]
    if found[chosen.name][1] is not None:
        return checks
    checks.append(_selftest(chosen, env))
    return checks


def _selftest(backend: Backend, env: Mapping[str, str]) -> Check:
    """Hide a temp file, read it and its visible sibling from inside: only the sibling may come back."""
    from ai_sandbox.fs import make_dirs, write_files
    from ai_sandbox.policy import GLOBAL, Mask, Policy

    name = f"sandbox hides files ({backend.name})"
    base = tempfile.mkdtemp(prefix="ai-sandbox-doctor-")
    try:
        secret, visible = os.path.join(base, "secret"), os.path.join(base, "visible")
        token = os.urandom(8).hex()
        with open(secret, "w") as f:
            f.write(f"SECRET-{token}\n")
        with open(visible, "w") as f:
            f.write(f"VISIBLE-{token}\n")
        policy = Policy(root=base, in_git=False, masks=[Mask(secret, False, GLOBAL, "doctor")])
        sh = (shutil.which("sh") or "/bin/sh") if backend.host_commands else "sh"
        plan = backend.plan(policy, [sh, "-c", f"cat {shlex.quote(visible)}; cat {shlex.quote(secret)}"], env)
        make_dirs(plan.dirs)
        write_files(plan.files)
        try:
            if plan.supervised:
                from ai_sandbox import supervise

                rc, out, raw = supervise.captured(plan, os.getcwd())
                text = (out.decode(errors="replace"), raw.decode(errors="replace"))
                proc = subprocess.CompletedProcess(plan.argv, rc, *text)
            else:
                proc = subprocess.run(
                    plan.argv, env=plan.env, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL
                )
        except (OSError, subprocess.TimeoutExpired, TimeoutError) as e:
            return Check(
                name,
                "fail",
                f"the sandbox did not run: {e}",
                "run the command of `ai-sandbox --dry-run -- true` by hand",
            )
        if f"SECRET-{token}" in proc.stdout + proc.stderr:
            return Check(
                name,
                "fail",
                "a hidden file was readable inside the sandbox",
                "report this: the backend does not mask here",
            )
        if f"VISIBLE-{token}" not in proc.stdout:
            err = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            return Check(
                name,
                "fail",
                f"the sandbox did not start: {err}",
                "run `ai-sandbox --dry-run -- true` and try its command by hand",
            )
        return Check(name, "ok", "a hidden temp file was unreadable, its sibling readable")
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _tool(name: str, argv: list[str], *, required: bool, hint: str) -> Check:
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=10)
        line = (proc.stdout.strip() or proc.stderr.strip()).splitlines()[:1]
        if proc.returncode == 0:
            return Check(name, "ok", line[0] if line else "installed")
    except (OSError, subprocess.TimeoutExpired):
        pass
    return Check(name, "fail" if required else "warn", "not installed", hint)


def _launcher(env: Mapping[str, str]) -> Check:
    """Python searches PYTHONPATH before its standard library: a module a session put in a directory it names
    (`src` of a project) runs in the next launch, outside the sandbox, unless this Python ignores it (-I, as
    the entry script `make install` writes)."""
    if sys.flags.isolated or sys.flags.ignore_environment:
        return Check("launcher", "ok", "Python started isolated (-I): PYTHONPATH and PYTHONWARNINGS are not read")
    read = [k for k in ("PYTHONPATH", "PYTHONWARNINGS") if env.get(k)]
    if not read:
        return Check("launcher", "ok", "no PYTHONPATH: Python loads ai-sandbox from its installation only")
    return Check(
        "launcher",
        "warn",
        f"this Python reads {' and '.join(read)}: a module planted where {read[0]} points runs in your next"
        " launch, outside the sandbox",
        "install with make install (its entry script starts Python with -I), or run env -u "
        + " -u ".join(read)
        + " ai-sandbox",
    )


def _userns() -> Check:
    """firejail is setuid and needs none; bwrap run by a user and a rootless container engine do."""
    try:
        with open("/proc/sys/user/max_user_namespaces") as f:
            count = int(f.read().strip())
    except (OSError, ValueError):
        return Check(
            "user namespaces",
            "warn",
            "cannot tell (no /proc/sys/user/max_user_namespaces)",
            "only bwrap (run by a user) and rootless containers need them",
        )
    try:
        with open("/proc/sys/kernel/unprivileged_userns_clone") as f:
            if f.read().strip() == "0":
                return Check(
                    "user namespaces",
                    "warn",
                    "disabled for unprivileged users",
                    "only bwrap (run by a user) and rootless containers need them",
                )
    except OSError:
        pass
    if count == 0:
        return Check(
            "user namespaces",
            "warn",
            "disabled (max_user_namespaces = 0)",
            "only bwrap (run by a user) and rootless containers need them",
        )
    why = _userns_refused()
    if why:
        return Check(
            "user namespaces",
            "warn",
            f"the kernel allows {count}, but this process cannot create one: {why}",
            "a chroot, or a container's seccomp or AppArmor rule; only bwrap (run by a user) and rootless "
            "containers need them",
        )
    return Check("user namespaces", "ok", f"available (max {count}; one was created)")


def _userns_refused() -> str:
    """Create one, in a child that exits at once: the sysctls say what the kernel allows, not what this process
    may do (a chroot may not; nor a container whose seccomp refuses unshare). Empty when it worked."""
    import ctypes
    import errno

    clone_newuser = 0x10000000
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            code = 0 if libc.unshare(clone_newuser) == 0 else ctypes.get_errno() or 1
        except Exception:
            code = errno.ENOSYS
        os.write(write, str(code).encode())
        os._exit(0)
    os.close(write)
    try:
        answer = os.read(read, 16)
    finally:
        os.close(read)
        os.waitpid(pid, 0)
    if not answer:
        return "the child that tried did not answer"
    code = int(answer)
    return os.strerror(code) if code else ""


def _policy_check(env: Mapping[str, str], opts: Mapping[str, str | None], cwd: str) -> tuple[Check, Prepared | None]:
    """The project's policy computes; the Prepared it computed (for the secret scan), or None."""
    from ai_sandbox.launch import Request, prepare

    try:
        req = Request(
            ["true"],
            True,
            cwd=cwd,
            env=env,
            backend=opts.get("backend"),
            engine=opts.get("engine"),
            image=opts.get("image"),
        )
        prepared = prepare(req, resolve=False, assume=True)
    except SandboxError as e:
        return Check("project policy", "fail", e.message, e.hint), None
    p = prepared.policy
    where = p.root if p.in_git else f"{p.root} (not a git work tree)"
    files = f"; config: {', '.join(p.config_files)}" if p.config_files else ""
    return Check(
        "project policy", "ok", f"{where}: {len(p.masks)} hidden, {len(p.kept)} kept readable{files}"
    ), prepared


def _writes_check(prepared: Prepared) -> Check:
    """Whether the agent's writes are confined (writes.py), and to how many places."""
    w = prepared.policy.writes
    if not w.confined:
        return Check(
            "writes",
            "warn",
            "not confined (confine_writes = false): the agent can plant what runs later outside (rc files, git hooks)",
            "remove confine_writes = false from your config (see docs/writes.md)",
        )
    # the places themselves vary with the tools installed (a cache is writable when its tool is): explain lists them
    return Check(
        "writes",
        "ok",
        "confined: the agent writes the project, its git directory, its own state, build caches and temporary "
        "files (`ai-sandbox explain` lists them); the rest is read-only",
    )


def _network_check(prepared: Prepared) -> Check:
    """Where the agent's connections may go (network.py) and whether the host's sockets are out of its reach."""
    net = prepared.policy.network
    if not prepared.backend.host_commands and net.mode == "allowlist":
        return Check(
            "network",
            "warn",
            "the docker backend has no proxy yet: allowlist gives the container no network at all",
            "use --network on for the container's own network, or a Linux backend (firejail, bwrap)",
        )
    if net.mode == "on":
        return Check(
            "network",
            "warn",
            f"on ({net.why}): the agent reaches the host's loopback, its LAN and any address; your servers' unix "
            "sockets stay out of reach",
            'remove network = "on" to go back to the allowlist (see docs/network.md)',
        )
    what = f"{len(net.domains)} allowed names through ai-sandbox's proxy" if net.mode == "allowlist" else "nothing"
    return Check(
        "network",
        "ok",
        f"{net.mode} ({net.why}): the agent reaches {what}; the host's loopback, LAN and your servers' unix sockets "
        "are out of reach (`ai-sandbox explain` lists the names)",
    )


def _secrets_check(env: Mapping[str, str], prepared: Prepared) -> Check:
    """Secrets in files the agent can read (secretscan.py); a warning, since hiding them is the user's call."""
    from ai_sandbox import secretscan

    try:
        result = secretscan.run(env, prepared.policy, prepared.trees)
    except SandboxError as e:
        return Check("secret scan", "fail", e.message, e.hint)
    files = list(dict.fromkeys(printable(os.path.relpath(f.path, prepared.policy.root)) for f in result.findings))
    if not files:
        return Check("secret scan", "ok", f"no secret found in the {result.scanned} file(s) the agent can read")
    return Check(
        "secret scan",
        "warn",
        f"{len(result.findings)} secret(s) in {len(files)} readable file(s): {', '.join(files[:5])}"
        + (" …" if len(files) > 5 else ""),
        "`ai-sandbox explain --secrets` names the lines; hide a file with `block` in .ai-sandbox.toml, or move the "
        "secret out and rotate it",
    )
