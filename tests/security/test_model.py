"""A model that plays the agent between launches: random sequences of what a session can do, each session a real
launch (firejail or bwrap, as root and as a user), checked against two invariants.

1. No secret is readable inside unless the launch refused: every launch first (and last) greps the whole world —
   the project, the home, a directory outside both — for the planted secrets, reading everything it can.
2. After every session the repository and the home are what the same commands leave without the sandbox:
   a control copy of the world runs each action that succeeded inside, outside any sandbox; HEAD (commits with
   fixed dates, so equal ids), the index with its flags, `git status` and every file must then be equal.

The actions are what an agent steered by what it reads can do from inside: rename, move and swap directories
(across the home too), create and remove them, edit `.gitignore`, `.git/info/exclude`, `.ai-sandbox.toml` and
`.gitattributes`, `git mv`, `git rm --cached`, `git add`, commit, branch, checkout, reset, and symlinks; and,
since the sixth red team, what crosses roots: the world holds a nested clone (`lib`, its own rules and a blocked
tracked file) and a linked worktree (`../wt`), each session is launched from the project, the clone or the
worktree, and may empty the others' `.gitignore`, move the clone, or mark a decoy index entry that holds the
hidden file's object; and, since the forty-fifth, edit a tracked file and mark it so that git does not see the edit
(assume-unchanged, skip-worktree: the end clears such marks and names them, and the control clears the same), beside
a mark of the user's own over a local change, which stays wherever `git mv` carries it. A launch that refuses ends the sequence (the user would have to look and `accept`). Known
gaps stay out of the vocabulary, each said where it is left out.

In `make test` a short, derandomized run (a few minutes in all); `make fuzz` (AI_SANDBOX_FUZZ_SECONDS) runs random
sequences for as long as asked and prints how many sequences and launches it played. Every counterexample it
finds becomes a plain test: a replay of its shrunk sequence (COUNTEREXAMPLES, below), or a test of its own in
tests/security/test_between_sessions.py.
"""

from __future__ import annotations

import json
import os
import pwd
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, precondition, rule, run_state_machine_as_test

from ai_sandbox import indexcache
from tests.conftest import (
    BACKENDS,
    IDENTITIES,
    Workspace,
    chown_tree,
    ensure_test_user,
    new_workspace,
    require,
    sessions_ended,
    token,
)

pytestmark = pytest.mark.sandbox

HIDDEN_EDIT = "have not staged"  # the launch's line naming a hidden tracked file with an edit not staged
FUZZ_SECONDS = float(os.environ.get("AI_SANDBOX_FUZZ_SECONDS", "0"))
STEPS = 6  # sessions per sequence
EXAMPLES = 20  # sequences per identity and backend in `make test`
PLAYED = {"sequences": 0, "launches": 0, "refused": 0, "stopped": 0}
# What git says when it stops at a mask: a hidden path it has to write (a mount point: EBUSY; another checkout's
# read-only mask: EROFS, or EACCES in the directory bwrap puts over it). A documented gap (docs/threat-model.md):
# git inside fails there, with what it did before that point done, and the same command outside completes it; the
# sequence ends (the user would run it outside). Nothing else in the world is not the identity's to write.
AT_A_MASK = ("Device or resource busy", "Read-only file system", "Permission denied")

GIT_ENV = {
    "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@e",
    "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z", "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z",
}  # fmt: skip

# One system call each, so that an action either happens or fails whole (mv falls back to copying across mounts,
# and a half-copied tree is no sandbox's doing; a failed action is not replayed in the control: found by make fuzz,
# a move into itself left the directories made for it, and a swap with them then passed inside only).
FSOP = r"""
import ctypes, os, sys
op, a, b = sys.argv[1:]
if op == "mv":  # the directories made for b are removed if the rename fails (mv into itself, a gone)
    made, d = [], os.path.dirname(os.path.abspath(b))
    while not os.path.lexists(d):
        made.append(d)
        d = os.path.dirname(d)
    for d in reversed(made):
        os.mkdir(d)
    try:
        os.rename(a, b)
    except OSError:
        for d in made:
            os.rmdir(d)
        raise
elif op == "graph":  # HEAD's tree in the commit-graph at a becomes b's (the index's): git then takes it for HEAD's
    import hashlib, subprocess
    old = subprocess.run(["git", "rev-parse", "HEAD^{tree}"], capture_output=True, text=True, check=True).stdout
    data = bytearray(open(a, "rb").read())
    i = data.find(bytes.fromhex(old.strip()))
    data[i : i + 20] = bytes.fromhex(b)
    data[-20:] = hashlib.sha1(bytes(data[:-20])).digest()
    os.chmod(a, 0o644)
    open(a, "wb").write(data)
elif op == "forge":  # the loose object named a gets b's content (objectstore.py): git reads it without checking
    path = lambda oid: f".git/objects/{oid[:2]}/{oid[2:]}"
    os.makedirs(os.path.dirname(path(a)), exist_ok=True)
    open(path(a) + ".tmp", "wb").write(open(path(b), "rb").read())
    os.rename(path(a) + ".tmp", path(a))
elif op == "ctree":  # every id in the index's cached trees becomes HEAD's (indexcache.py): git skips those directories
    import hashlib, struct, subprocess
    rev = lambda r: bytes.fromhex(subprocess.run(["git", "rev-parse", r], capture_output=True, text=True).stdout.strip() or "00" * 20)
    data = bytearray(open(".git/index", "rb").read())
    i = data.find(b"TREE", 12)
    size = struct.unpack(">I", data[i + 4 : i + 8])[0]
    body, out, p = bytes(data[i + 8 : i + 8 + size]), bytearray(), 0
    def walk(prefix):
        global p, out
        z = body.index(b"\0", p); name = body[p:z].decode(); p = z + 1
        nl = body.index(b"\n", p); count, subs = body[p:nl].split(b" "); p = nl + 1
        full = f"{prefix}/{name}".strip("/") if name else prefix
        out += name.encode() + b"\0" + count + b" " + subs + b"\n"
        if int(count) >= 0:
            out += rev(f"HEAD:{full}" if full else "HEAD^{tree}"); p += 20
        for _ in range(int(subs)):
            walk(full)
    walk("")
    data[i + 8 : i + 8 + size] = out
    data[-20:] = hashlib.sha1(bytes(data[:-20])).digest()
    open(".git/index", "wb").write(data)
else:
    libc = ctypes.CDLL(None, use_errno=True)
    sys.exit(0 if libc.renameat2(-100, a.encode(), -100, b.encode(), 2) == 0 else 1)  # RENAME_EXCHANGE
"""

# Where things are and may go. $HOME and $OUT are the world's (the control has its own); the rest is relative
# to the repository.
# Not conf/, which holds the blocked tracked file: moved by plain mv, git inside still takes the index's copy
# (its skip-worktree mark), so `commit -a` does not record its deletion and `reset --hard` does not write it
# back (a documented gap); `git mv conf conf2` is among the git actions.
DIRS = ["svc", "secrets", ".gemini", "src", "node_modules/x", "$HOME/.aws"]
PLACES = ["svc2", "src/deep/moved", "node_modules/y", ".gemini/inner", "$OUT/stash", "$HOME/.aws_old", "$HOME/far/aws"]

# Across roots: from whichever root the session was launched, the project's nested clone and its other worktree.
CROSS_ACTIONS = st.sampled_from(
    [
        "echo '# nothing' > $REPO/lib/.gitignore",
        "echo '# nothing' > $WT/.gitignore",
        "python3 $OUT/../fsop.py mv $REPO/lib $REPO/lib2",
        "cd $REPO/lib && git mv conf conf2 && git commit -qm mv",
        "cd $REPO && O=$(git rev-parse :conf/prod.tfvars) && git update-index --add --cacheinfo 100644,$O,aaa.txt"
        " && git update-index --skip-worktree aaa.txt",
        "cd $WT && git mv conf conf3 && git commit -qm mv",
        # the seventh red team's: the worktree moved (its .gitignore emptied by another action), a moved clone
        # replaced by an empty directory, the decoy's own mark dropped before the hidden file's moves
        "git worktree move $WT ${WT}2",
        "python3 $OUT/../fsop.py mv $REPO/lib $REPO/lib2 && mkdir $REPO/lib",
        "git update-index --no-skip-worktree aaa.txt",
        # the eighth's: the clone carried out of the project (a launch "from the clone" then starts there)
        "python3 $OUT/../fsop.py mv $REPO/lib $OUT/lib3",
        # the forty-fifth's F3: an edit hidden from git by a mark the session sets (the end clears it and says so)
        # the clone's own file, only while it is the clone's (after `mv lib lib2 && mkdir lib`, lib/app.py would be a
        # new file of the project's, which git cannot mark: the echo would have written it all the same, unreplayed)
        "cd $REPO/lib && git ls-files --error-unmatch app.py >/dev/null && echo '# edit' >> app.py && "
        "git update-index --skip-worktree app.py",
    ]
)
FS_ACTIONS = st.one_of(
    st.builds(lambda a, b: f"python3 $OUT/../fsop.py mv {a} {b}", st.sampled_from(DIRS), st.sampled_from(PLACES)),
    st.builds(lambda a, b: f"python3 $OUT/../fsop.py swap {a} {b}", st.sampled_from(DIRS), st.sampled_from(DIRS)),
    st.sampled_from(
        [
            "mkdir -p svc/sub && echo x > svc/sub/new.txt",
            "rm -rf svc/sub",
            "ln -sfn ../svc/.env src/link.env",
            "ln -sfn $HOME/.aws $OUT/awslink",
            "ln -sfn ../secrets node_modules/x/s",
        ]
    ),
)
# Rule edits come last in a session: a rule that stops ignoring a hidden file lets root's `git add -A` in the same
# session stage the mask's empty content (a documented gap: "git inside, where it goes past the skip-worktree bit").
RULE_ACTIONS = st.sampled_from(
    [
        "echo .gemini/ >> .gitignore",
        "echo '!svc/.env' >> .gitignore",
        "echo svc/ >> .gitignore",
        "echo conf/ >> .gitignore",
        "echo src/ >> .gitignore",
        "sed -i '/^\\.env$/d' .gitignore",
        "echo '!.env' >> .git/info/exclude",
        "echo svc/ >> .git/info/exclude",
        "printf 'block = []\\n' > .ai-sandbox.toml",
        'printf \'block = ["*.tfvars"]\\nallow = [".env"]\\n\' > .ai-sandbox.toml',
        'printf \'block = ["*.tfvars"]\\nallow = ["secrets/"]\\n\' > .ai-sandbox.toml',
        'printf \'block = ["*.tfvars", "src/"]\\n\' > .ai-sandbox.toml',
        # conf/, as the file it makes hidden and tracked: a directory holding one is not moved by plain mv (the gap)
        "echo 'conf/a.txt filter=git-crypt' >> .gitattributes",
    ]
)
# HEAD's src/ subtree object rewritten with the staged one's (objectstore.py: git checks no hash reading it); guarded
# so that it fails before writing anything, or not at all
FORGE_SUBTREE = (
    "test -f src/app.py && old=$(git rev-parse -q --verify HEAD:src) && echo '# forged' >> src/app.py && "
    "git add -f src/app.py && python3 $OUT/../fsop.py forge $old $(git write-tree --prefix=src/)"
)
# the index's cached trees given HEAD's ids (indexcache.py): git skips the directories they name
FORGE_CACHED_TREES = (
    "test -f src/app.py && echo '# cached' >> src/app.py && git add -f src/app.py && git write-tree >/dev/null && "
    "python3 $OUT/../fsop.py ctree - -"
)
# `git rm --cached` of the blocked tracked file is left out: its file is then untracked and not ignored, and
# root's `git add -A` stages the mask (the same documented gap).
GIT_ACTIONS = st.sampled_from(
    [
        "git mv svc svc3",
        "git mv conf conf2",
        "git mv src/app.py src/main.py",
        "git rm -r -q --cached .gemini",
        "git rm -q --cached svc/app.py",
        "git add -A",
        "git commit -qam m",
        "git checkout -q feat",
        "git checkout -q main",
        "git checkout -q -b topic",
        "git reset -q --hard",
        "git merge -q --ff-only feat",
        "echo '# edit' >> src/app.py && git update-index --assume-unchanged src/app.py",
        # a copy of HEAD whose tree holds a staged edit, in HEAD's place (replacerefs.py); -f: src/ may be ignored,
        # and git then stages the file and fails, which the control would not replay
        "echo '# staged' >> src/app.py && git add -f src/app.py && tree=$(git write-tree) && "
        'git replace HEAD $(git cat-file commit HEAD | sed "1s/.*/tree $tree/" | git hash-object -t commit -w --stdin)',
        # the same in a commit-graph (commitgraph.py): git takes HEAD's tree from there without reading HEAD
        "echo '# graph' >> src/app.py && git add -f src/app.py && git commit-graph write --reachable && "
        "python3 $OUT/../fsop.py graph .git/objects/info/commit-graph $(git write-tree)",
        FORGE_SUBTREE,
        FORGE_CACHED_TREES,
    ]
)
# What the end undoes in the repositories of the launch's project only (replacerefs.py, commitgraph.py,
# objectstore.py): a session
# launched from the nested clone, with writes unconfined as here, can write the project's repository too, which
# that launch did not look at (a documented gap; with containment on, the project is read-only to it).
PROJECT_ONLY = [
    a for a in GIT_ACTIONS.elements if any(w in a for w in ("git replace", "commit-graph", " forge ", " ctree "))
]
SESSIONS = st.tuples(
    st.lists(FS_ACTIONS, max_size=2),
    st.lists(GIT_ACTIONS, max_size=2),
    st.lists(CROSS_ACTIONS, max_size=1),
    st.lists(RULE_ACTIONS, max_size=1),
).map(lambda t: [*t[0], *t[1], *t[2], *t[3]])
WHERE = st.sampled_from(["", "lib", "wt"])  # where the session is launched from: the project, the clone, the worktree


def _where(identity: str, backend: str) -> str:
    """/tmp; for firejail as a user, under the user's passwd home, the only place firejail gives it scratch
    directories: elsewhere a hidden directory is a read-only mask, where a git command writing into it stops
    midway (a documented gap with its own strict xfail in test_between_sessions.py, kept out of the model)."""
    if backend != "firejail" or identity == "root":
        return "/tmp"
    user = ensure_test_user() if identity == "user" else None
    home = Path(pwd.getpwnam(user.name).pw_dir if user else pwd.getpwuid(os.getuid()).pw_dir)
    if not home.exists():  # the test user has none (useradd --no-create-home): made once, left for the run
        home.mkdir(parents=True)
        if user:
            os.chown(home, user.uid, user.gid)
    home.chmod(home.stat().st_mode | 0o011)  # traversable by the other identity
    return str(home)


class World:
    """The project, the home and a directory outside both, with their secrets; and a control copy of it."""

    def __init__(self, identity: str, backend: str) -> None:
        self.base = Path(tempfile.mkdtemp(prefix="ais-model-", dir=_where(identity, backend)))
        self.base.chmod(0o755)
        self.ws: Workspace = new_workspace(self.base, identity, backend)
        self.secrets: list[str] = []
        self.named: dict[str, str] = {}
        # Secrets some passing launch hid (the record holds them from then on), and those no launch had hidden when
        # a session ran: a session of another root (the clone's) can edit their project's rules before its first
        # launch, which then takes the rules as they are (a documented gap; containing writes closes it)
        self.covered: set[str] = set()
        self.untrusted: set[str] = set()
        self.said = ""  # the last session's stderr
        self.at_mask: list[str] = []  # the last session's actions that stopped at a mask (AT_A_MASK)
        self.scratch: list[str] = []  # the last session's scratch directories, relative to base
        home = self.ws.home
        self.out = self.base / "out"
        self.out.mkdir()
        (self.base / "fsop.py").write_text(FSOP)
        files = {
            ".gitignore": ".env\nsecrets/\nnode_modules/\n",
            ".ai-sandbox.toml": 'block = ["*.tfvars"]\n',
            "src/app.py": "print(1)\n",
            "svc/app.py": "print(2)\n",
            "conf/a.txt": "a\n",
            "conf/prod.tfvars": self._secret("TFVARS"),
            ".gemini/settings.json": "{}\n",
        }
        for rel, content in files.items():
            self.ws.write(rel, content)
        self.ws.git("add", "-A")
        self._git("commit", "-qm", "init")
        self._git("checkout", "-qb", "feat")
        self.ws.write("secrets/README.md", "tracked readme\n")
        self.ws.git("add", "-f", "secrets/README.md")
        self._git("commit", "-qm", "feat")
        self._git("checkout", "-q", "main")
        # the user's own mark over a local change: it stays, wherever `git mv` carries it (hiddenedits.py)
        self.ws.git("update-index", "--assume-unchanged", "svc/app.py")
        self.ws.write("svc/app.py", "print(2)  # local\n")
        for rel, name in (("svc/.env", "SVCENV"), ("secrets/key.txt", "KEY"), (".gemini/.env", "GEMINI")):
            self.ws.write(rel, self._secret(name))
        self.ws.write("node_modules/x/index.js", "module.exports = 1\n")
        # a nested clone with rules of its own (untracked by the project), and a linked worktree of the project
        lib = self.ws.repo / "lib"
        lib.mkdir()
        self._git("init", "-q", "-b", "main", cwd=lib)
        for rel, content in {
            "lib/.gitignore": ".env\n",
            "lib/.ai-sandbox.toml": 'block = ["*.tfvars"]\n',
            "lib/conf/x.tfvars": self._secret("LIBTF"),
            "lib/app.py": "print(3)\n",
        }.items():
            self.ws.write(rel, content)
        self._git("add", "-A", cwd=lib)
        self._git("commit", "-qm", "lib", cwd=lib)
        self.ws.write("lib/.env", self._secret("LIBENV"))
        self.wt = self.base / "wt"
        self._git("worktree", "add", "-q", "-b", "wtb", str(self.wt))
        (self.wt / ".env").write_text(self._secret("WTENV"))
        (home / ".aws").mkdir()
        (home / ".aws" / "credentials").write_text(self._secret("AWS"))
        # warn: a swap changes what a hidden path names, and ending the session midway would leave an action half
        # counted; inside one session the masks move with what they hide (the probe checks it). Writes unconfined:
        # the record must hold for a user who turned containment off, and the sessions may then move the home's
        # ~/.aws (with containment on, the home is read-only: a subset of these sequences)
        self.ws.config_file.write_text(
            'block = ["~/.aws/credentials"]\non_hidden_change = "warn"\nconfine_writes = false\n'
        )
        self.control = self.base / "control"
        self.control.mkdir()
        for name in ("repo", "out", "wt"):
            shutil.copytree(self.base / name, self.control / name, symlinks=True)
        # the control's worktree is linked to the control's repository
        (self.control / "wt" / ".git").write_text(f"gitdir: {self.control}/repo/.git/worktrees/wt\n")
        (self.control / "repo" / ".git" / "worktrees" / "wt" / "gitdir").write_text(f"{self.control}/wt/.git\n")
        (self.control / "home").mkdir()
        (self.control / "fsop.py").write_text(FSOP)
        shutil.copytree(home / ".aws", self.control / "home" / ".aws", symlinks=True)
        if self.ws.user:
            chown_tree(self.base, self.ws.user)

    def _secret(self, name: str) -> str:
        self.secrets.append(token(f"MODEL{name}"))
        self.named[name] = self.secrets[-1]
        return self.secrets[-1] + "\n"

    def scope(self, where: str) -> list[str]:
        """The secrets a launch from where must hide (or refuse): those of its project — a launch from the project
        or its worktree hides every checkout's and the nested clone's, a launch from the clone the clone's only
        (what lies outside a project is not its to hide, unless an earlier launch hid it: the record then refuses,
        which ends the sequence) — and the global block."""
        if where != "lib" or not (self.clone(self.base) / ".git").exists():
            return self.secrets
        return [self.named[n] for n in ("LIBTF", "LIBENV", "AWS")]

    def _git(self, *args: str, cwd: Path | None = None) -> None:
        subprocess.run(["git", "-C", str(cwd or self.ws.repo), *args], env={**os.environ, **GIT_ENV}, check=True)

    @staticmethod
    def clone(world: Path) -> Path:
        """The nested clone of a world: `repo/lib`, or where a session moved it (`repo/lib2`, `out/lib3`)."""
        places = [world / "repo" / "lib", world / "repo" / "lib2", world / "out" / "lib3"]
        return next((p for p in places if (p / ".git").exists()), places[0])

    @staticmethod
    def worktree(world: Path) -> Path:
        """The linked worktree of a world: `wt`, or `wt2` once a session moved it."""
        return world / "wt2" if (world / "wt2").is_dir() else world / "wt"

    def _env(self, world: Path, out: Path) -> dict[str, str]:
        return {**GIT_ENV, "OUT": str(out), "REPO": str(world / "repo"), "WT": str(world / "wt")}

    def session(self, actions: list[str], where: str = "") -> tuple[bool, list[bool]]:
        """One launch from where (the project, "lib" or "wt", the project when that one is gone): look for every
        secret, play the actions (each from the project's root), look again. (refused, each action's success)."""
        places = f"{self.ws.repo} {self.wt} {self.wt}2 {self.ws.home} {self.out}"
        probe = "grep -rsaoh " + " ".join(f"-e {s}" for s in self.secrets) + f" {places}"
        script = [f"{probe}; echo @@start"]
        script += [
            f'e=$( ( cd "$REPO" && {a} ) 2>&1 >/dev/null ); echo @@$?; [ -z "$e" ] || printf "%s\\n" "$e" >&2; case $e in '
            + "|".join(f'*"{m}"*' for m in AT_A_MASK)
            + ") echo @@mask;; esac"
            for a in actions
        ]
        script.append(f"{probe}; echo @@end")
        script.append("echo @@mounts; cat /proc/self/mountinfo")  # the session's scratch directories (scratch())
        env = self._env(self.base, self.out)
        scope = self.scope(where)  # before the session: one of its actions may move the clone it was launched from
        cwd = {"lib": self.clone(self.base), "wt": self.worktree(self.base)}.get(where, self.ws.repo)
        res = self.ws.run("--", "sh", "-c", "\n".join(script), env=env, timeout=120, cwd=cwd if cwd.is_dir() else None)
        self.said = res.err
        PLAYED["launches"] += 1
        exempt = self.untrusted - self.covered  # at the first launch that hides them, after another root's session
        leaked = [s for s in scope if s in res.out + res.err and s not in exempt]
        assert not leaked, f"secret read inside (rc={res.rc}):\n{res.out}\n{res.err}"
        if "@@start" not in res.out:
            assert res.rc != 0, res.err
            assert res.err.startswith("ai-sandbox: error:"), res.err
            PLAYED["refused"] += 1
            return True, []
        # covered: what this launch hid (not readable when the session started); a secret the rules left readable
        # at its first launch after another root's session stays exempt: nothing ever hid it (found by make fuzz:
        # the clone's session un-ignored the project's svc/.env, or moved svc/ into node_modules/, before the
        # project's first launch; the old model exempted it at that launch only)
        start = res.out.split("@@start", 1)[0]
        self.covered |= {s for s in scope if s not in start}
        self.untrusted |= set(self.secrets) - self.covered
        assert "@@end" in res.out, (res.rc, res.out, res.err)  # never ended midway (warn mode)
        lines = [ln[2:] for ln in res.out.splitlines() if ln.startswith("@@") and (ln[2:].isdigit() or ln == "@@mask")]
        codes = [c for c in lines if c.isdigit()]
        at = {i for i, c in enumerate(lines) if c == "mask"}
        # which action stopped at a mask: the code line before each "mask" line
        self.at_mask = [actions[sum(1 for c in lines[:i] if c.isdigit()) - 1] for i in sorted(at)]
        self.scratch = self.scratched(res.out.split("@@mounts", 1)[1] if "@@mounts" in res.out else "")
        return False, [c == "0" for c in codes]

    def scratched(self, mountinfo: str) -> list[str]:
        """The world's directories the session had as scratch: a writable tmpfs mounted on each (a mask is
        read-only), whose writes never reached the disk; relative to the world's base. Not a bind of the world's own
        filesystem, which is a tmpfs where /tmp is one (Debian 13): the home was taken for a scratch, and a rename
        in it undone in the control (stock Debian 13 CI of 6026b24)."""
        st = os.stat(self.base)
        own = f"{os.major(st.st_dev)}:{os.minor(st.st_dev)}"
        out = []
        for line in mountinfo.splitlines():
            fields, _, after = line.partition(" - ")
            f = fields.split()
            if len(f) < 6 or not after.startswith("tmpfs ") or f[5].split(",")[0] != "rw" or f[2] == own:
                continue
            point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), f[4])
            if point.startswith(f"{self.base}/"):
                out.append(os.path.relpath(point, self.base))
        return out

    def keep_scratch(self) -> dict[str, Path]:
        """A copy of each of the control's directories the last session had as scratch, before the replay."""
        kept = {}
        for i, rel in enumerate(self.scratch):
            there = self.control / rel
            if there.is_dir() and not there.is_symlink():
                kept[rel] = self.base / f"scratch-{i}"
                subprocess.run(["cp", "-a", str(there), str(kept[rel])], check=True)
        return kept

    def put_back_scratch(self, kept: dict[str, Path]) -> None:
        """What the replay wrote into them goes, as the session's writes went with its tmpfs."""
        for rel, copy in kept.items():
            there = self.control / rel
            if there.is_dir() and not there.is_symlink():
                shutil.rmtree(there)
                subprocess.run(["mv", str(copy), str(there)], check=True)

    def users_word(self) -> None:
        """What the user does after the line naming files git checked out into hidden directories (the sandbox
        keeps them from the disk, unwritten.py): the command it gives, for each file it names."""
        tracked = subprocess.run(
            ["git", "-c", "safe.directory=*", "-C", str(self.ws.repo), "ls-files", "-z"], capture_output=True, text=True
        ).stdout.split("\0")
        missing = [p for p in tracked if p and not os.path.lexists(self.ws.repo / p)]
        named = [p for p in missing if os.path.lexists(self.control / "repo" / p)]
        if named:
            line = next(
                (ln for ln in self.said.splitlines() if "git checked out" in ln and "kept from your disk" in ln), ""
            )
            assert all(p in line for p in named), f"not named after the session: {named}\n{self.said}"
            self.ws.git("checkout", "--", *named)

    def users_mark(self) -> None:
        """What ai-sandbox does to the skip-worktree marks after a session that marked a decoy holding a hidden
        file's object and moved the file (skipworktree._follow): every candidate is cleared, and a line names
        them; in the control, the same entries are cleared by hand."""
        for line in self.said.splitlines():
            if "cleared git index marks the session set in " in line:
                self.users_clear(line)
            if "removed the git replace refs the session made in " in line:
                self.users_unreplace(line)
            if "removed the commit-graph files that changed during the session in " in line:
                self.users_ungraph(line)
            if "removed object files the session left in " in line:
                self.users_unforge(line)
            if "cleared git's skip-worktree mark of" not in line:
                continue
            names, _, tree = line.split(" mark of ", 1)[1].partition(" in ")
            tree = tree.split(":", 1)[0]
            there = self.control / os.path.relpath(tree, self.base)
            for name in names.split(", "):
                subprocess.run(
                    ["git", "-c", "safe.directory=*", "-C", str(there), "update-index", "--no-skip-worktree", name],
                    check=False,
                    capture_output=True,
                )

    def users_clear(self, line: str) -> None:
        """The control's side of the line naming the marks a session set itself (hiddenedits.py): the same marks
        cleared by hand (`cleared git index marks the session set in TREE, which …: MARK on A, B; MARK on C`)."""
        tree, _, rest = line.split(" the session set in ", 1)[1].partition(", which ")
        there = self.control / os.path.relpath(tree, self.base)
        for part in rest.split("`git commit -a`: ", 1)[1].split("; "):
            mark, _, names = part.partition(" on ")
            for name in names.split(", "):
                subprocess.run(
                    ["git", "-c", "safe.directory=*", "-C", str(there), "update-index", f"--no-{mark}", name],
                    check=True,
                    capture_output=True,
                )

    def users_unreplace(self, line: str) -> None:
        """The control's side of the line naming the replace refs a session made (replacerefs.py): the same refs
        deleted by hand (`removed the git replace refs the session made in TREE, which …: REF (OID), REF (OID); …`)."""
        tree = line.split(" the session made in ", 1)[1].partition(", which ")[0]
        there = self.control / os.path.relpath(tree, self.base)
        for ref in re.findall(r"refs/replace/[0-9a-f]{40}", line.split("`git commit -a`): ", 1)[1]):
            subprocess.run(
                ["git", "-c", "safe.directory=*", "-C", str(there), "update-ref", "--no-deref", "-d", ref],
                check=True,
                capture_output=True,
            )

    def users_ungraph(self, line: str) -> None:
        """The control's side of the line naming the commit-graph files removed (commitgraph.py): the same files
        removed by hand (`removed the commit-graph files … in OBJECTS/info (NAME, NAME): …`)."""
        info, _, rest = line.split(" during the session in ", 1)[1].partition(" (")
        there = self.control / os.path.relpath(info, os.path.realpath(self.base))
        for name in rest.split("): ", 1)[0].split(", "):
            (there / name).unlink()

    saved_objects: Path | None = None

    def save_objects(self) -> Path:
        """A copy of the repository's object directory before a session that forges one (what a remote still has)."""
        saved = self.base / "saved-objects"
        shutil.rmtree(saved, ignore_errors=True)
        shutil.copytree(self.ws.repo / ".git" / "objects", saved)
        return saved

    def users_unforge(self, line: str) -> None:
        """The control's side of the line naming the forged object files removed (objectstore.py): the same files
        removed by hand (`removed object files the session left in OBJECTS whose … (AB/CDEF…, …): …`)."""
        objects, _, rest = line.split(" the session left in ", 1)[1].partition(" whose ")
        there = self.control / os.path.relpath(objects, os.path.realpath(self.base))
        names = rest.split("says (", 1)[1].split("): ", 1)[0].split(", ")
        assert not any(" more" in n for n in names), line  # the model forges one at a time
        for name in names:
            (there / name).unlink()
            # what the user does next (`git fsck` names it missing): the object fetched again, in both worlds
            original = self.saved_objects / name if self.saved_objects else None
            if original is not None and original.is_file():
                for objects in (there, Path(line.split(" the session left in ", 1)[1].split(" whose ")[0])):
                    shutil.copy2(original, objects / name)
                    if self.ws.user:
                        os.chown(objects / name, self.ws.user.uid, self.ws.user.gid)

    def hidden(self, where: str) -> list[str]:
        """The paths in the project a launch from where hides (`explain --json`): what git inside cannot see."""
        cwd = {"lib": self.clone(self.base), "wt": self.worktree(self.base)}.get(where, self.ws.repo)
        res = self.ws.run("explain", "--json", cwd=cwd if cwd.is_dir() else None)
        assert res.rc == 0, res.err
        masks = [m["path"] for m in json.loads(res.out)["hidden"]]
        rels = [os.path.relpath(p, self.ws.repo) for p in masks if p.startswith(f"{self.ws.repo}/")]
        # not inside a nested repository: the project's `git add` does not enter it (a pathspec there is fatal)
        return [
            r for r in rels if not any((self.ws.repo / d / ".git").exists() for d in Path(r).parents if str(d) != ".")
        ]

    @staticmethod
    def unseen(actions: list[str], hidden: list[str]) -> list[str]:
        """The actions as the control replays them: `git add -A` inside stages nothing under a hidden path (git
        cannot see what is there: an untracked file in a directory blocked since is not added), so the control's
        leaves those paths out too."""
        excluded = "".join(f" ':(exclude,literal){p}'" for p in hidden)
        return [a.replace("git add -A", f"git add -A -- .{excluded}") if a == "git add -A" else a for a in actions]

    def replay(self, actions: list[str]) -> None:
        """The same actions in the control world, without a sandbox, as the same identity."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "XDG_"))}
        env.update(self._env(self.control, self.control / "out"), HOME=str(self.control / "home"))
        env.update(GIT_CONFIG_COUNT="1", GIT_CONFIG_KEY_0="safe.directory", GIT_CONFIG_VALUE_0="*")
        script = "\n".join(f'( cd "$REPO" && {a} ) >/dev/null 2>&1' for a in actions)
        argv = ["sh", "-c", script]
        if self.ws.user:
            chown_tree(self.control, self.ws.user)
            from tests.stage import setpriv_argv

            argv = setpriv_argv(self.ws.user.uid, self.ws.user.gid, argv)
        subprocess.run(argv, cwd=self.control / "repo", env=env, check=False, timeout=120)

    def state(self, repo: Path, home: Path, out: Path, wt: Path) -> dict[str, object]:
        places = ((str(repo), "<repo>"), (str(home), "<home>"), (str(out), "<out>"), (str(wt), "<wt>"))

        def link(path: str) -> str:
            target = os.readlink(path)
            for where, name in places:  # the same link in either world
                target = target.replace(where, name)
            return "-> " + target

        def git(*args: str, where: Path = repo) -> str:
            proc = subprocess.run(
                ["git", "-c", "safe.directory=*", "-C", str(where), *args], capture_output=True, text=True, check=False
            )
            text = proc.stdout + (f"[exit {proc.returncode}]" if proc.returncode else "")
            for path, name in places:
                text = text.replace(path, name)
            return text

        def files(top: Path, skip: tuple[str, ...] = ()) -> dict[str, str]:
            out: dict[str, str] = {}
            for dirpath, dirnames, names in os.walk(top):
                rel = os.path.relpath(dirpath, top)
                dirnames[:] = sorted(
                    d for d in dirnames if os.path.normpath(os.path.join(rel, d)) not in skip and d != ".git"
                )
                names = [n for n in names if n != ".git"]  # a worktree's .git file names its own world
                for name in sorted(names + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]):
                    path = os.path.join(dirpath, name)
                    key = os.path.normpath(os.path.join(rel, name))
                    out[key] = link(path) if os.path.islink(path) else Path(path).read_text(errors="replace")
            return out

        clone = self.clone(repo.parent)
        return {
            "HEAD": git("rev-parse", "--abbrev-ref", "HEAD") + git("rev-parse", "HEAD"),
            "index": git("ls-files", "-s", "-t", "-v"),
            "replace refs": git("for-each-ref", "refs/replace/"),
            "commit-graph": git("commit-graph", "verify"),
            "fsck": subprocess.run(
                ["git", "-c", "safe.directory=*", "-C", str(repo), "fsck", "--no-dangling", "--no-progress"],
                capture_output=True,
                text=True,
                check=False,
            ).stderr.replace(str(repo), "<repo>"),  # fmt: skip
            "status": git("status", "--porcelain"),
            "clone": git("rev-parse", "HEAD", where=clone) + git("ls-files", "-s", "-t", "-v", where=clone),
            "worktree": git("rev-parse", "HEAD", where=wt)
            + git("ls-files", "-s", "-t", "-v", where=wt)
            + git("status", "--porcelain", where=wt),
            "worktree files": files(wt),
            "work tree": files(repo, (".git",)),
            "home": files(home, (".local", ".cache", ".config")),
            "outside": files(out),
        }


class Sessions(RuleBasedStateMachine):
    identity = "root"
    backend = "firejail"

    @initialize()
    def make_world(self) -> None:
        self.world = World(self.identity, self.backend)
        self.refused = False
        self.stopped = False  # git stopped at a mask (AT_A_MASK): nothing more is compared
        PLAYED["sequences"] += 1

    @precondition(lambda self: self.refused or self.stopped)
    @rule()
    def after_a_refusal(self) -> None:
        """Nothing more: the user would look, and `accept` or undo (or run outside what git inside could not)."""

    @precondition(lambda self: not (self.refused or self.stopped))
    @rule(actions=SESSIONS, where=WHERE)
    def session(self, actions: list[str], where: str) -> None:
        if where == "lib":  # the project's repository is not the clone's launch's: its end looks at the clone's only
            actions = [a for a in actions if a not in PROJECT_ONLY]
        self.play(actions, where)

    def play(self, actions: list[str], where: str) -> None:
        """One session, and the control's replay of what succeeded in it."""
        hidden = self.world.hidden(where) if "git add -A" in actions else []
        self.world.saved_objects = self.world.save_objects() if FORGE_SUBTREE in actions else None
        self.refused, ok = self.world.session(actions, where)
        if self.refused:
            return
        done = [a for a, good in zip(actions, ok, strict=True) if good]
        if any(a.startswith("git ") and a not in done for a in self.world.at_mask):
            self.stopped = True  # a documented gap (AT_A_MASK); what it read was checked all the same
            PLAYED["stopped"] += 1
            return
        if HIDDEN_EDIT in self.world.said and any(a.startswith("git ") for a in done):
            # a documented gap the launch names: git inside takes the index's copy of a hidden tracked file with an
            # edit not staged, which the control's `commit -a` records
            self.stopped = True
            PLAYED["stopped"] += 1
            return
        kept = self.world.keep_scratch()
        self.world.replay(self.world.unseen(done, hidden))
        self.world.put_back_scratch(kept)
        if any(" ctree " in a for a in done):  # what the end does, silently: git's caches are no state of the user's
            assert indexcache.drop(str(self.world.control / "repo" / ".git"), time.monotonic() + 5) is None
        sessions_ended(self.world.ws)  # ended by the launch: a watcher still holding marks would be a defect
        w = self.world
        w.users_word()
        w.users_mark()
        mine = w.state(w.ws.repo, w.ws.home, w.out, w.worktree(w.base))
        c = w.control
        theirs = w.state(c / "repo", c / "home", c / "out", w.worktree(c))
        assert mine["replace refs"] == "", f"a replace ref outlived the session:\n{mine['replace refs']}\n{w.said}"
        assert "[exit" not in str(mine["commit-graph"]), f"a forged commit-graph outlived the session:\n{w.said}"
        assert "hash mismatch" not in str(mine["fsck"]), f"a forged object outlived the session:\n{w.said}"
        for key in mine:
            assert mine[key] == theirs[key], f"{w.said}\n{key} differs from the control after {actions} (done: {done})"

    def teardown(self) -> None:
        if getattr(self, "world", None) is not None:
            try:
                if not self.refused:
                    self.world.session([])  # the last launch looks too
            finally:  # also when it fails: a world in the real home (firejail as a user) must not stay there
                shutil.rmtree(self.world.base, ignore_errors=True)


@pytest.mark.parametrize("identity", IDENTITIES)
@pytest.mark.parametrize("backend", BACKENDS)
def test_no_session_can_unhide_a_secret_or_change_the_repository_unlike_the_control(identity, backend):
    require("git")
    if backend == "bwrap":
        require("bwrap")
    machine = type("S", (Sessions,), {"identity": identity, "backend": backend})
    fast = settings(
        max_examples=EXAMPLES,
        stateful_step_count=STEPS,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
        phases=[Phase.explicit, Phase.generate, Phase.shrink],
        print_blob=True,
    )
    before = dict(PLAYED)
    start = time.monotonic()
    if not FUZZ_SECONDS:
        run_state_machine_as_test(machine, settings=fast)
    else:
        until = start + FUZZ_SECONDS / (len(BACKENDS) * len(IDENTITIES))
        while time.monotonic() < until:
            run_state_machine_as_test(machine, settings=settings(fast, derandomize=False, max_examples=20))
    played = {k: v - before[k] for k, v in PLAYED.items()}
    print(f"\nmodel ({identity}, {backend}): {played} in {time.monotonic() - start:.0f} s")


# What `make fuzz` (and the red teams) found, shrunk: (where, actions) per session, replayed as they are on every
# backend and identity.
COUNTEREXAMPLES = {
    # the fiftieth red team's F1 and F2, each followed by sessions that commit on what the end left
    "a subtree object forged, then sessions commit": [
        ("", [FORGE_SUBTREE]),
        ("", ["git commit -qam m"]),
        ("wt", ["git add -A"]),
    ],
    "the index's cached trees forged, then sessions commit": [
        ("", [FORGE_CACHED_TREES]),
        ("wt", [FORGE_CACHED_TREES]),
        ("", ["git commit -qam m", FORGE_CACHED_TREES]),
    ],
    # the clone's session moved the project's svc/ (which it does not hide) out of the project: the project's next
    # launch found the recorded directory nowhere, and no log of its own named it
    "a clone's session carries the project's hidden directory out": [
        ("lib", []),
        ("", []),
        ("lib", ["python3 $OUT/../fsop.py mv svc $OUT/stash"]),
        ("", []),
    ],
    "a clone's session carries it out, then the clone launches again": [
        ("lib", []),
        ("", []),
        ("lib", ["python3 $OUT/../fsop.py mv svc $OUT/stash"]),
        ("lib", []),
        ("", []),
    ],
    # the clone's session unstaged svc/app.py and excluded svc/ (.git/info/exclude: every checkout's), the
    # project's edited .gitignore; a session launched from the worktree ran `git reset --hard` in the main checkout:
    # another checkout's hidden directory is a read-only mask, and git stopped there, .gitignore reset but not the
    # index (a documented gap: AT_A_MASK)
    "a reset from the worktree after the clone's session excluded a directory": [
        ("lib", ["mkdir -p svc/sub && echo x > svc/sub/new.txt", "git rm -q --cached svc/app.py",
                 "echo svc/ >> .git/info/exclude"]),
        ("", ["echo .gemini/ >> .gitignore"]),
        ("wt", ["git reset -q --hard"]),
    ],
    # the twelfth red team's: the clone's session renames the project's hidden file, or its hidden directory, in
    # place (their directories stay where they were)
    "a clone's session renames the project's hidden file": [
        ("lib", []),
        ("", []),
        ("lib", ["python3 $OUT/../fsop.py mv svc/.env svc/env.txt"]),
        ("", []),
    ],
    "a clone's session renames the project's hidden directory": [
        ("lib", []),
        ("", []),
        ("lib", ["python3 $OUT/../fsop.py mv secrets public"]),
        ("", []),
    ],
    # the worktree's launch recorded the main checkout's secrets/, the clone's session renamed it in place (found by
    # make fuzz before the twelfth red team's fix)
    "a clone's session renames the hidden directory a worktree's launch recorded": [
        ("wt", []),
        ("lib", ["python3 $OUT/../fsop.py mv secrets svc2"]),
        ("", []),
    ],
    # the clone's session blocked the project's src/ before its first launch and moved src/ aside: that launch
    # marked src/app.py, missing from the work tree, and git inside took the index's copy (`commit -a` left out
    # its deletion)
    "a hidden tracked file missing at the launch": [
        ("lib", ["git mv svc svc3", "printf 'block = [\"*.tfvars\", \"src/\"]\\n' > .ai-sandbox.toml"]),
        ("lib", ["python3 $OUT/../fsop.py mv src svc2"]),
        ("", []),
        ("", ["git commit -qam m"]),
    ],
    # svc/ ignored whole, then swapped with .gemini/ twice: the masks of what svc/ held at the launch moved along,
    # onto .gemini/settings.json, tracked; `git reset --hard` inside stopped there (EBUSY), .gitignore already reset
    # (found by make fuzz; a documented gap: AT_A_MASK)
    "a reset after a hidden directory was swapped with a tool directory": [
        ("", ["echo svc/ >> .gitignore"]),
        ("", ["python3 $OUT/../fsop.py swap svc .gemini"]),
        ("", ["python3 $OUT/../fsop.py swap svc .gemini", "git reset -q --hard"]),
    ],
    # the clone's session swapped the project's hidden secrets/ with its visible src/: the recorded path is there,
    # and hidden, but what it held is now src/ (found by make fuzz; the record now keeps each path's own inode)
    "a clone's session swaps the project's hidden directory with a visible one": [
        ("lib", []),
        ("", []),
        ("lib", ["python3 $OUT/../fsop.py swap secrets src"]),
        ("", []),
    ],
    # src/main.py (the index's) moved out by the swap, then src/ blocked: a hidden directory the index tracks a file in
    # became a scratch, since that file was missing (it gets no mark), and a link the session made there vanished at
    # exit (found by make fuzz)
    "a hidden directory whose tracked file is missing at the launch": [
        ("", ["git mv src/app.py src/main.py"]),
        ("", ["python3 $OUT/../fsop.py swap svc src", "printf 'block = [\"*.tfvars\", \"src/\"]\\n' > .ai-sandbox.toml"]),
        ("", ["ln -sfn ../svc/.env src/link.env"]),
    ],
    # src/ swapped with svc/, then src/ blocked: src/app.py (svc's now) differed from the index at the launch that
    # hid it, and `commit -a` inside left that out where the control's recorded it (found by make fuzz; a documented
    # gap, named at the launch)
    "a blocked directory swapped with another before the block": [
        ("", ["python3 $OUT/../fsop.py swap src svc"]),
        ("", []),
        ("", ["printf 'block = [\"*.tfvars\", \"src/\"]\\n' > .ai-sandbox.toml"]),
        ("", ["git commit -qam m"]),
    ],
    # svc/ untracked and ignored whole: a scratch directory, whose writes vanish at the session's end; the control
    # kept them (the model's own defect, found by make fuzz: the control now puts each scratch directory back)
    "a write into a scratch directory": [
        ("", ["git rm -q --cached svc/app.py", "git commit -qam m", "echo svc/ >> .gitignore"]),
        ("", ["mkdir -p svc/sub && echo x > svc/sub/new.txt", "git reset -q --hard"]),
    ],
    # ~/.aws, whose credentials are blocked, renamed: on Debian 13 (bubblewrap 0.12, firejail 0.9.74) the rename
    # went through and the control put the scratch back under its new name (stock Debian 13 CI of 6026b24)
    "the home's scratch directory renamed": [("", ["python3 $OUT/../fsop.py mv $HOME/.aws $HOME/.aws_old"])],
    # src/ swapped with svc/ after src/ was moved into itself: svc/app.py missing after the session, not named
    "a directory swapped with one a failed move left in place": [
        ("", ["python3 $OUT/../fsop.py mv src svc2"]),
        ("", ["python3 $OUT/../fsop.py mv src src/deep/moved", "python3 $OUT/../fsop.py swap svc src"]),
    ],
}  # fmt: skip


# Counterexamples where git stops at a mask, a documented gap (AT_A_MASK): the replay must end there, and fails once
# git no longer stops (then the sequence is compared with the control as any other).
STOPS = {
    "a blocked directory swapped with another before the block",
    "a reset after a hidden directory was swapped with a tool directory",
    "a reset from the worktree after the clone's session excluded a directory",
}


@pytest.mark.parametrize("case", list(COUNTEREXAMPLES))
@pytest.mark.parametrize("identity", IDENTITIES)
@pytest.mark.parametrize("backend", BACKENDS)
def test_what_make_fuzz_found_holds(identity, backend, case):
    require("git")
    if backend == "bwrap":
        require("bwrap")
    machine = type("S", (Sessions,), {"identity": identity, "backend": backend})()
    try:
        machine.make_world()
        for where, actions in COUNTEREXAMPLES[case]:
            if machine.refused or machine.stopped:
                break
            machine.play(actions, where)
        assert machine.stopped == (case in STOPS), machine.world.said
    finally:
        machine.teardown()
