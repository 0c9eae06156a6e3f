"""`make docs`: the generated parts of README.md and docs/*.md, written between their markers.

A generated part sits between `<!-- NAME:start … -->` and `<!-- NAME:end -->`. Each NAME is produced here:

- `config-reference`: `python -m ai_sandbox.config --reference` (config.py's tables of keys);
- `notices`: the table of notice kinds, `ai_sandbox.notices.table()`;
- `default-domains`, `profile-domains`: the network's built-in list (network.py) and each shipped profile's
  `domains`;
- `sample-…`: what ai-sandbox prints, from real runs on a demo project built in a temp dir (a git repository
  with a history, a `.gitignore`, secrets, a build output and dependencies; agents that are stubs). The temp
  dir is removed from every path, so the project reads `/home/me/code/shop` and the home `/home/me`.

The runs need no root and no sandbox: they are the commands that start no agent (explain, init, --dry-run,
alias, profiles). So that a sample reads the same on every machine, each run pins firejail as the backend
that works here (`/usr/bin/firejail`, its real start not tried), the agent's account as a normal user's
whose home is the demo's, npm as its only build tool, and no server's socket: the policy, the verdicts and the generated
command are ai-sandbox's own, whatever is installed. Samples only a real sandbox produces (doctor, a launch's
own lines) are checked by tests/integration/test_docs_samples.py instead.

`python scripts/docs.py` rewrites what differs; `--check` only names it (exit 1); tests/unit/test_docs.py
runs the check.
"""

from __future__ import annotations

import functools
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))  # the checkout's ai_sandbox, also when run without the venv's install

MARKED = re.compile(
    r"(?P<start><!-- (?P<name>[a-z0-9-]+):start\b[^\n]*-->\n)(?P<body>.*?)(?P<end><!-- (?P=name):end -->)", re.S
)


def files() -> list[Path]:
    """The Markdown files that may hold generated parts."""
    return [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]


# --- the demo project ---------------------------------------------------------------------------------------

DEMO_TOOLS = ("npm",)  # the build tools the demo machine has (the write rules open their caches)
AGENTS = ("claude", "codex", "gemini")  # installed on the demo machine (stubs); aider and opencode are not
COMMIT_DATE = "2026-11-23T10:00:00+00:00"
GITIGNORE = ".env\nbuild/\nnode_modules/\n*.log\n.claude/\n"
LEGACY = 'AI_SANDBOX_BLOCK_PATHS=(infra/prod.tfvars "$HOME/.aws/credentials")\n'
PROJECT_TOML = 'block = ["*.tfvars"]\n'
SETTINGS_PY = 'DEBUG = False\nREGION = "eu-west-1"\nAWS_ACCESS_KEY_ID = "AKIAIOSFODNN7EXAMPLE"\n'
EXPLAINED = (".env", "src/app.py", "node_modules/left-pad", "infra/prod.tfvars", "build/app.js", "build/deploy.pem")


def _pinned(argv: list[str]) -> int:
    """ai-sandbox's main, with firejail taken as installed at /usr/bin/firejail and working (see above).
    argv: the launcher's own path (what a console script's sys.argv[0] is), then the arguments."""
    sys.argv = argv
    from ai_sandbox import tools

    tools._found["firejail"] = "/usr/bin/firejail"
    from ai_sandbox import launch, writes
    from ai_sandbox.backends import firejail
    from ai_sandbox.main import main

    # a normal user whose account's home is the demo's: the write rules read the same as root and as any user
    setattr(launch, "_account", lambda backend: (1000, os.environ["HOME"]))  # noqa: B010
    # and the build tools on its PATH are the demo's own, not this machine's (a cache is writable when its tool is)
    plan = writes.plan
    setattr(writes, "plan", lambda **kw: plan(**{**kw, "on_path": lambda tool: tool in DEMO_TOOLS}))  # noqa: B010

    # and the demo machine runs no server: no socket under /run, no runtime directory, no X server (this machine's,
    # or the sockets a test run makes meanwhile, would change the samples)
    from ai_sandbox import sockets

    setattr(sockets, "scan", lambda top=sockets.RUN: [])  # noqa: B010
    setattr(sockets, "_runtime", lambda env, uid: [])  # noqa: B010
    # and nothing of its own under /tmp: the demo lives in /home/me (this checkout or the temp dir may be in /tmp)
    setattr(launch.sockets, "plan", lambda *a, **k: sockets.Sockets(tmp=True))  # noqa: B010
    setattr(firejail, "_x11", lambda s: [])  # noqa: B010

    # setattr: mypy refuses an assignment to a method
    setattr(firejail.Firejail, "unavailable", lambda self: None)  # noqa: B010
    setattr(firejail.Firejail, "probe", lambda self, env: None)  # noqa: B010
    return main(argv[1:])


class Demo:
    """A home with the project `code/shop` in a temp dir, and runs of ai-sandbox in it: `command` is the
    ai-sandbox to run (tests/integration gives the real one); by default this script's pinned main."""

    def __init__(self, base: str, command: list[str] | None = None) -> None:
        self.base = base
        self.home = f"{base}/home/me"
        self.project = f"{self.home}/code/shop"
        self.bin = f"{base}/usr/local/bin"
        self.env = {
            "HOME": self.home,
            "PATH": f"{self.bin}:/usr/sbin:/usr/bin:/sbin:/bin",
            "LANG": "C.UTF-8",
            "TZ": "UTC",
            "SHELL": "/bin/bash",
            "PYTHONDONTWRITEBYTECODE": "1",
            "GIT_CONFIG_NOSYSTEM": "1",  # this machine's /etc/gitconfig is not the demo's
        }
        for agent in AGENTS:
            self.write(f"{self.bin}/{agent}", "#!/bin/sh\nexit 0\n", mode=0o755)
        # `ai-sandbox` on the demo's PATH
        run = (
            shlex.join(command)
            if command
            else f'{shlex.join([sys.executable, str(Path(__file__).resolve())])} --pinned "$0"'
        )
        self.write(f"{self.bin}/ai-sandbox", f'#!/bin/sh\nexec {run} "$@"\n', mode=0o755)
        os.makedirs(f"{self.home}/.aws")
        self.write(f"{self.home}/.aws/credentials", "[default]\n")
        self.build()

    def write(self, path: str, text: str, mode: int = 0o644) -> None:
        path = os.path.join(self.project, path)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(path, mode)

    def git(self, *args: str) -> None:
        env = {**self.env, "GIT_AUTHOR_DATE": COMMIT_DATE, "GIT_COMMITTER_DATE": COMMIT_DATE}
        ident = ["-c", "user.name=Me", "-c", "user.email=me@example.com", "-c", "commit.gpgsign=false"]
        subprocess.run(["git", *ident, *args], cwd=self.project, env=env, check=True, capture_output=True)

    def build(self) -> None:
        """A shop: sources, a settings file with a key, an .env committed once by mistake, a tfvars file."""
        os.makedirs(self.project)
        self.git("init", "-q", "-b", "main")
        self.write(".gitignore", GITIGNORE)
        self.write(".env", "STRIPE_KEY=sk_live_51HxDemoDemoDemo\n")
        self.git("add", "-f", ".gitignore", ".env")
        self.git("commit", "-q", "-m", "start the shop")
        self.git("rm", "-q", "--cached", ".env")
        self.write("src/app.py", 'print("shop")\n')
        self.write("config/settings.py", SETTINGS_PY)
        self.write("infra/prod.tfvars", 'db_password = "hunter2"\n')
        self.git("add", ".")
        self.git("commit", "-q", "-m", "the app, its settings, the infrastructure")
        self.write("node_modules/left-pad/index.js", "module.exports = 1\n")
        self.write("build/app.js", "console.log(1)\n")
        self.write("build/deploy.pem", "-----BEGIN PRIVATE KEY-----\n")
        self.write("debug.log", "started\n")
        self.write(".claude/settings.json", "{}\n")
        self.write(".ai-sandbox", LEGACY)

    def run(self, *args: str, status: int = 0) -> str:
        """`ai-sandbox ARGS` in the project, which must exit with status: what it printed (stdout, then
        stderr), the temp dir taken out."""
        proc = subprocess.run(
            [f"{self.bin}/ai-sandbox", *args],
            cwd=self.project,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        if proc.returncode != status:
            raise SystemExit(f"ai-sandbox {' '.join(args)}: exit {proc.returncode}\n{proc.stdout}{proc.stderr}")
        return self.normal(proc.stdout + proc.stderr)

    def normal(self, text: str) -> str:
        """Paths of this machine as on the demo's: the temp dir away, the interpreter and package abridged."""
        import ai_sandbox

        base = getattr(sys, "_base_executable", sys.executable)  # a venv's: the interpreter it was made from
        pythons = {sys.executable, os.path.realpath(sys.executable), base, os.path.realpath(base)}
        for python in sorted(pythons, key=len, reverse=True):
            text = text.replace(python + " ", "/usr/bin/python3 ")
        text = text.replace(os.path.dirname(os.path.realpath(ai_sandbox.__file__)), "…/ai_sandbox")
        text = text.replace(self.base, "")
        # the launch check runs from verify's bytecode, copied into the cache; where this Python keeps none
        # (PYTHONDONTWRITEBYTECODE), from the source: the samples show an install's, which has it
        text = text.replace(
            "…/ai_sandbox/verify.py ", "/home/me/.cache/ai-sandbox/verify-0123456789abcdef01234567.pyc "
        )
        # content-addressed names of generated files: their hash covers this machine's paths
        return re.sub(r"(/\.cache/ai-sandbox/[a-z]+-)[0-9a-f]{16,}", r"\1…", text)

    def samples(self) -> dict[str, str]:
        out: dict[str, str] = {}

        def sample(name: str, *shown: tuple[str, str]) -> None:
            lines = []
            for command, text in shown:
                lines += [f"$ {command}", text.rstrip("\n")]
            out[name] = "```\n" + "\n".join(lines) + "\n```\n"

        sample("sample-init", ("ai-sandbox init", self.run("init")), ("tail -8 .ai-sandbox.toml", self.tail(8)))
        self.reviewed()
        sample("sample-explain", ("ai-sandbox explain", self.run("explain")))
        paths = ("explain", *EXPLAINED)
        sample("sample-explain-paths", (f"ai-sandbox {' '.join(paths)}", self.run(*paths)))
        sample("sample-history", ("ai-sandbox explain --history", self.run("explain", "--history")))
        sample("sample-secrets", ("ai-sandbox explain --secrets", self.run("explain", "--secrets")))
        dry = self.run("--dry-run", "claude", "--resume")
        sample("sample-dry-run", ("ai-sandbox --dry-run claude --resume", dry.split("\nfile ")[0] + "\n…"))
        sample("sample-alias", ("ai-sandbox alias --shell bash", self.run("alias", "--shell", "bash")))
        sample("sample-profiles", ("ai-sandbox profiles", realign(self.run("profiles"))))
        return out

    def reviewed(self) -> None:
        """After `init`: the legacy file deleted, the project's own .ai-sandbox.toml."""
        os.remove(f"{self.project}/.ai-sandbox")
        self.write(".ai-sandbox.toml", PROJECT_TOML)

    def tail(self, n: int) -> str:
        with open(f"{self.project}/.ai-sandbox.toml", encoding="utf-8") as f:
            return "".join(f.readlines()[-n:])


def realign(text: str) -> str:
    """A table whose columns (two or more blanks apart) lost their alignment when paths were shortened,
    padded again as it was rendered: each column as wide as its widest cell. Lines without a gap pass."""
    lines = text.splitlines()
    rows = [re.split(r" {2,}", ln) if "  " in ln else None for ln in lines]
    widths: dict[int, int] = {}
    for row in rows:
        for i, cell in enumerate(row or []):
            widths[i] = max(widths.get(i, 0), len(cell))
    out = [
        "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() if row else line
        for line, row in zip(lines, rows, strict=True)
    ]
    return "\n".join(out) + "\n"


@functools.cache
def samples() -> dict[str, str]:
    base = tempfile.mkdtemp(prefix="ai-sandbox-docs-")
    try:
        return Demo(base).samples()
    finally:
        shutil.rmtree(base, ignore_errors=True)


# --- the generated parts --------------------------------------------------------------------------------------


def _config_reference() -> str:
    from ai_sandbox import config

    return config.reference()


def _notices() -> str:
    from ai_sandbox import notices

    return notices.table()


def _default_domains() -> str:
    from ai_sandbox import network

    return ", ".join(f"`{d}`" for d in network.DEFAULT_DOMAINS)


def _profile_domains() -> str:
    from ai_sandbox import profiles
    from ai_sandbox.paths import shipped_dir

    rows = ["| agent | its profile's `domains` |", "| --- | --- |"]
    for name in sorted(p.removesuffix(".toml") for p in os.listdir(shipped_dir()) if p.endswith(".toml")):
        p = profiles.load(os.path.join(shipped_dir(), name + ".toml"))
        rows.append(f"| {name} | {', '.join(f'`{d}`' for d in p.domains) or 'none'} |")
    return "\n".join(rows)


def generators() -> dict[str, Callable[[], str]]:
    found: dict[str, Callable[[], str]] = {
        "config-reference": _config_reference, "notices": _notices, "default-domains": _default_domains,
        "profile-domains": _profile_domains,
    }  # fmt: skip
    for name in ("init", "explain", "explain-paths", "history", "secrets", "dry-run", "alias", "profiles"):
        found[f"sample-{name}"] = functools.partial(lambda n: samples()[n], f"sample-{name}")
    return found


def made() -> Callable[[str], str]:
    """name -> the generated part, each made once."""
    gens = generators()

    @functools.cache
    def one(name: str) -> str:
        if name not in gens:
            raise SystemExit(f"unknown generated part {name!r} (scripts/docs.py makes: {', '.join(gens)})")
        return gens[name]().strip("\n")

    return one


def parts(text: str) -> list[tuple[str, str]]:
    """(name, body) of each generated part of text, the body without the blank lines around it."""
    return [(m["name"], m["body"].strip("\n")) for m in MARKED.finditer(text)]


def render(text: str, make: Callable[[str], str]) -> str:
    """text with every generated part made anew."""
    return MARKED.sub(lambda m: f"{m['start']}\n{make(m['name'])}\n\n{m['end']}", text)


def stale() -> list[str]:
    """`FILE: NAME` for each generated part that differs from what `make docs` writes."""
    make, found, out = made(), set(), []
    for path in files():
        text = path.read_text(encoding="utf-8")
        for name, body in parts(text):
            found.add(name)
            if body != make(name):
                out.append(f"{path.relative_to(ROOT)}: {name}")
    out += [f"no markers for {name} in README.md or docs/*.md" for name in sorted(set(generators()) - found)]
    return out


def update() -> list[str]:
    """Rewrite the files whose generated parts differ; their names."""
    make, changed = made(), []
    for path in files():
        text = path.read_text(encoding="utf-8")
        new = render(text, make)
        if new != text:
            path.write_text(new, encoding="utf-8")
            changed.append(str(path.relative_to(ROOT)))
    return changed


def main(argv: list[str]) -> int:
    if argv[:1] == ["--pinned"]:
        return _pinned(argv[1:])
    if argv not in ([], ["--check"]):
        print("usage: scripts/docs.py [--check]", file=sys.stderr)
        return 64
    # the generators read the shipped profiles here, and ai-sandbox caches each parse in its state directory:
    # a scratch one, not the caller's (~/.local/state/ai-sandbox/parsed)
    scratch = tempfile.mkdtemp(prefix="ai-sandbox-docs-state-")
    os.environ.update({f"XDG_{k}_HOME": os.path.join(scratch, k.lower()) for k in ("STATE", "CACHE", "CONFIG")})
    try:
        return _main(argv)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _main(argv: list[str]) -> int:
    if argv == ["--check"]:
        lines = stale()
        for line in lines:
            print(f"{line}: stale; run `make docs`")
        return 1 if lines else 0
    for name in update():
        print(f"{name}: regenerated")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
