"""Escape attempts from inside the sandbox, through the real `ai-sandbox` and firejail, as root and as an
unprivileged user: every vector tries to read an ignored file (`.env`, `cfg/.env`) and an ignored
directory (`secrets/`), and none may reveal their content, nor the names inside the directory.

Each secret is a fresh random string that no script mentions, so finding it in stdout or stderr can only
mean the content (or a name) was read. The scripts never stop at the first failing command (`; true`),
print `@@step` markers that the test requires (the attempt was really made), and the host is checked
afterwards: the secrets are unchanged, at their place, with no new name or hard link.

Outcomes measured on firejail 0.9.72, Linux 6.x (root | user); root has no capability left:
  read (cat, ls)                  empty read, dir EACCES    | EACCES
  symlink to file / dir           as the target             | as the target
  hard link                       EXDEV (file), EACCES (in dir), no link on the host
  `..`, `//`, `$PWD/` forms       as the plain path
  /proc/{self,1}/root/...         as the plain path; a host pid is not in the sandbox's PID namespace
  inherited fds 3, 7, 8, 9        closed by firejail (EBADF); a host holder is invisible
  cp / mv / os.rename / tar       cp copies the empty mask; rename EBUSY (mount point)
  umount [-l]                     EPERM ("must be superuser")
  unshare -Urm                    root: uid_map EPERM (mapping uid 0 needs CAP_SETFCAP) | user: the
                                  namespace works, but the inherited mounts are locked: umount EINVAL,
                                  a non-recursive bind of the project EINVAL, files still EACCES
  writes, chmod, chown            EACCES / EROFS, nothing reaches the host
  mount --bind / -t tmpfs         EPERM
  open_by_handle_at               EPERM (needs CAP_DAC_READ_SEARCH)
  firejail / ai-sandbox inside    run in the same sandbox, masks stay
  cwd inside the hidden dir       root: the masked dir (EACCES) | user: firejail starts in /
Known gaps are strict xfail markers (a test that fails while the gap is open and fails the run the day it
closes): TIOCSTI under firejail.
"""

from __future__ import annotations

import os
import re
import secrets as _random
import shlex
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import (
    AIS,
    BACKENDS,  # noqa: F401  (the module runs once per backend: conftest)
    PY,
    Result,
    Workspace,
    chown_tree,
    new_workspace,
    require,
    root_only,
    token,
    unavailable,
)

pytestmark = pytest.mark.sandbox


@dataclass
class Secrets:
    env: str  # content of .env
    nested_env: str  # content of cfg/.env
    key: str  # content of secrets/key.txt
    name: str  # the name of a second file in secrets/, never written in a script
    unlisted: str  # its content

    def all(self) -> tuple[str, ...]:
        return (self.env, self.nested_env, self.key, self.name, self.unlisted)


def _token(prefix: str) -> str:
    return f"{prefix}-{_random.token_hex(8)}"


def plant(ws: Workspace) -> Secrets:
    s = Secrets(_token("ENVSECRET"), _token("CFGSECRET"), _token("KEYSECRET"), _token("hiddenname"), _token("UNLISTED"))
    ws.write(".gitignore", ".env\nsecrets/\n")
    ws.write("sub/keep.txt", "SUB-VISIBLE\n")
    ws.write("cfg/app.yml", "CFG-VISIBLE\n")
    ws.git("add", ".")
    ws.git("commit", "-qm", "tree")
    ws.write(".env", f"TOKEN={s.env}\n")
    ws.write("cfg/.env", f"TOKEN={s.nested_env}\n")
    ws.write("secrets/key.txt", f"{s.key}\n")
    ws.write(f"secrets/{s.name}.pem", f"{s.unlisted}\n")
    return s


def snapshot(repo: Path) -> dict:
    """What must not change on the host: content, mode, inode and link count of every secret; the
    directory's names."""
    state: dict = {}
    for rel in (".env", "cfg/.env", "secrets", *(f"secrets/{n}" for n in os.listdir(repo / "secrets"))):
        p = repo / rel
        st = p.lstat()
        content = p.read_bytes() if p.is_file() else sorted(os.listdir(p))
        state[rel] = (content, st.st_mode, st.st_ino, st.st_nlink)
    return state


def launch(
    ws: Workspace,
    script: str,
    *,
    env: dict[str, str] | None = None,
    fds: dict[int, Path] | None = None,
    cwd: Path | None = None,
    sandbox: bool = True,
) -> Result:
    """`ai-sandbox -- sh -c SCRIPT` like ws.run (only `sh -c SCRIPT` without sandbox, for a control); `fds`
    are files the caller opens (as root, before setpriv) and leaves open for the launcher to inherit."""
    cmd = host_user_cmd(ws, [AIS, *ws.backend_args, "--", "sh", "-c", script] if sandbox else ["sh", "-c", script])
    if ws.user:
        chown_tree(ws.base, ws.user)
    if fds:
        opens = " ".join(f'{n}<"${i + 1}"' for i, n in enumerate(fds))
        cmd = ["sh", "-c", f'exec {opens}; shift {len(fds)}; exec "$@"', "-", *map(str, fds.values()), *cmd]
    base_env = {"REPO": str(ws.repo), "PY": PY, "AIS": AIS}
    proc = subprocess.run(
        cmd,
        cwd=cwd or ws.repo,
        env=ws.env({**base_env, **(env or {})}),
        capture_output=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    dec = lambda b: b.decode("utf-8", "surrogateescape")  # noqa: E731
    res = Result(proc.returncode, dec(proc.stdout), dec(proc.stderr))
    print(f"--- rc={res.rc}\n--- stdout\n{res.out}\n--- stderr\n{res.err}")  # shown when a test fails
    return res


def assert_nothing_revealed(res: Result, s: Secrets) -> None:
    both = res.out + res.err
    for secret in s.all():
        assert secret not in both, f"{secret} revealed"


def assert_markers(res: Result, script: str) -> None:
    """Every `echo @@step` of the script was reached: the attempts before it were really made."""
    for marker in re.findall(r"echo @@([\w-]+)", script):
        assert f"@@{marker}" in res.out, f"the script did not reach @@{marker}"


def host_user_cmd(ws: Workspace, argv: list[str]) -> list[str]:
    if ws.user:
        return ["setpriv", f"--reuid={ws.user.uid}", f"--regid={ws.user.gid}", "--clear-groups", "--", *argv]
    return argv


# --- one sandbox per vector ------------------------------------------------------------------------------

# A handle for a visible file, then open_by_handle_at: with it, a forged handle (inode + generation) would
# open the file under a mask. It needs CAP_DAC_READ_SEARCH, so even the visible file must be refused.
HANDLE_PY = r"""
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
class FH(ctypes.Structure):
    _fields_ = [("n", ctypes.c_uint), ("type", ctypes.c_int), ("h", ctypes.c_ubyte * 128)]
fh, mount_id = FH(), ctypes.c_int()
fh.n = 128
r = libc.name_to_handle_at(-100, b"README.md", ctypes.byref(fh), ctypes.byref(mount_id), 0)
print("name_to_handle_at", r, os.strerror(ctypes.get_errno()))
fd = libc.open_by_handle_at(os.open(".", os.O_RDONLY), ctypes.byref(fh), os.O_RDONLY)
print("open_by_handle_at", fd, os.strerror(ctypes.get_errno()))
if fd >= 0:
    print("HANDLE-OPENED", os.read(fd, 100))
"""

RENAME_PY = r"""
import os
for a, b in ((".env", "py-env"), ("secrets", "py-dir"), ("cfg/.env", "py-cfg-env")):
    try:
        os.rename(a, b)
        print("renamed", a)
    except OSError as e:
        print("rename", a, e.strerror)
for p in ("py-env", "py-dir/key.txt", "py-cfg-env"):
    try:
        print(open(p).read())
    except OSError as e:
        print("open", p, e.strerror)
"""

# A user namespace attempt: umount the masks (the kernel locks mounts inherited from a more privileged
# namespace), or bind the project without its submounts (refused when that would reveal locked mounts).
USERNS_SH = r"""
echo "~~in-userns $(id -u)"
umount "$REPO/.env"; umount -l "$REPO/.env"; umount -l "$REPO/secrets"; umount -l "$REPO/cfg/.env"
mkdir -p "$REPO/sub/bind" && mount --bind "$REPO" "$REPO/sub/bind" && echo "~~bound"
mount --make-rprivate / ; umount -l "$REPO/secrets"
cat "$REPO/.env" "$REPO/cfg/.env" "$REPO/secrets/key.txt" "$REPO/sub/bind/.env" "$REPO/sub/bind/secrets/key.txt"
ls -a "$REPO/secrets" "$REPO/sub/bind/secrets"
true
"""

VECTORS = {
    "plain-read": (
        (),
        "echo @@cat; cat .env cfg/.env secrets/key.txt; ls -la secrets/ .env; find secrets -type f -exec cat {} +;"
        " grep -r . secrets; echo @@py; $PY -c 'import os; print(os.listdir(\"secrets\"))'",
    ),
    "symlink": (
        ("ln",),
        'echo @@make; ln -s .env l-env; ln -s secrets l-dir; ln -s secrets/key.txt l-key; ln -s "$REPO/.env" l-abs;'
        ' ln -s "$REPO/secrets" l-absdir; ln -s ../.env cfg/l-up; mkdir -p deep/a && ln -s ../../secrets deep/a/up;'
        " echo @@read; cat l-env l-key l-abs cfg/l-up l-dir/key.txt l-absdir/key.txt deep/a/up/key.txt;"
        " ls -laL l-dir/ l-absdir/ deep/a/up/; readlink -f l-dir; find -L l-dir deep -type f -exec cat {} +;"
        " echo @@done",
    ),
    "hardlink": (
        ("ln",),
        'echo @@ln; ln .env h-env; ln secrets/key.txt h-key; ln "$REPO/cfg/.env" sub/h-cfg; ln -P .env h-env2;'
        ' echo @@py; $PY -c \'import os; os.link(".env", "h-py")\'; cat h-env h-key sub/h-cfg h-env2 h-py;'
        " echo @@done",
    ),
    "dotdot": (
        (),
        'echo @@paths; cat sub/../.env ./secrets/../secrets/key.txt "$PWD/.env" "$PWD//.env" .//secrets//key.txt'
        ' "$PWD/sub/../secrets/key.txt" sub/../cfg/../cfg/.env ./cfg//.env "$REPO/./secrets/./key.txt"'
        ' ///"$REPO"/.env; ls -a sub/../secrets/ .//secrets// "$PWD//secrets/" secrets/.;'
        ' echo @@cd; cd secrets && cat key.txt; cd "$REPO/sub" && cat ../.env ../secrets/key.txt; cd "$REPO";'
        ' echo @@py; $PY -c \'print(open("sub/../.env").read(), open("secrets/../secrets/key.txt").read())\'',
    ),
    "proc-root": (
        (),
        'echo @@procs; for p in self 1 $$ "$HOSTPID"; do'
        "  cat /proc/$p/root$REPO/.env /proc/$p/root$REPO/secrets/key.txt /proc/$p/root$REPO/cfg/.env;"
        "  ls -a /proc/$p/root$REPO/secrets/ /proc/$p/cwd/secrets/ /proc/$p/cwd/; cat /proc/$p/cwd/key.txt;"
        "  cat /proc/$p/fd/0; done;"
        ' echo @@hostpid; if [ -e "/proc/$HOSTPID" ]; then echo "~~hostpid-visible"; else echo "~~hostpid-absent"; fi;'
        ' echo @@all-fds; for f in /proc/[0-9]*/fd/* /proc/[0-9]*/cwd/key.txt; do [ -f "$f" ] && cat "$f"; done;'
        " echo @@done",
    ),
    "copy-rename": (
        ("cp", "mv", "tar"),
        "echo @@cp; cp .env c-env; cp cfg/.env c-cfg; cp -r secrets c-dir; cp -a secrets c-dir2;"
        " cat c-env c-cfg c-dir/key.txt c-dir2/key.txt; ls -la c-dir c-dir2;"
        " echo @@mv; mv .env m-env; mv secrets m-dir; mv cfg/.env m-cfg; cat m-env m-cfg m-dir/key.txt; ls m-dir;"
        f" echo @@py; $PY -c '{RENAME_PY}';"
        " echo @@tar; tar cf - .env cfg secrets 2>/dev/null | tar xOf -; echo @@done",
    ),
    "user-namespace": (
        ("unshare", "umount", "mount"),
        f"echo @@Urm; unshare -Urm sh -c '{USERNS_SH}';"
        f" echo @@private; unshare -Urm --propagation private sh -c '{USERNS_SH}';"
        f" echo @@rm; unshare -rm sh -c '{USERNS_SH}';"
        f" echo @@pid; unshare -Urmpf --mount-proc sh -c '{USERNS_SH}';"
        " echo @@read; cat .env secrets/key.txt; echo @@done",
    ),
    "write": (
        ("touch", "mkdir", "truncate", "rm"),
        "echo @@write; echo x > secrets/new; mkdir secrets/d; touch secrets/t; touch .env; echo x >> .env;"
        " echo x > .env; echo x > cfg/.env; truncate -s 0 .env; printf x > secrets/key.txt;"
        ' echo @@py; $PY -c \'open(".env", "w").write("x")\';'
        " echo @@rm; rm -f .env cfg/.env; rm -rf secrets; rmdir secrets;"
        " echo @@read; cat .env secrets/key.txt secrets/new; ls -a secrets; echo @@done",
    ),
    "chmod-chown": (
        ("chmod", "chown", "chgrp"),
        "echo @@chmod; chmod 644 .env cfg/.env; chmod 755 secrets; chmod -R a+rwx secrets; chmod u+r secrets/key.txt;"
        ' chown "$(id -u)" .env secrets; chgrp "$(id -g)" .env secrets;'
        ' echo @@py; $PY -c \'import os; os.chmod(".env", 0o644); os.chmod("secrets", 0o755)\';'
        " echo @@read; cat .env cfg/.env secrets/key.txt; ls -a secrets; echo @@done",
    ),
    "mount-umount": (
        ("mount", "umount"),
        'echo @@umount; umount .env; umount -l .env; umount secrets; umount -l secrets; umount -l "$REPO/cfg/.env";'
        ' umount -R "$REPO"; cat .env cfg/.env secrets/key.txt; ls -a secrets;'
        ' echo @@mount; mkdir -p sub/m; mount --bind .. sub/m; mount --rbind "$REPO" sub/m; mount -t tmpfs none secrets;'
        " mount -o remount,rw .env; mount --move secrets sub/m; echo @@read; cat sub/m/.env sub/m/secrets/key.txt;"
        " ls -a sub/m/secrets secrets; echo @@done",
    ),
    "file-handle": ((), f"echo @@handle; $PY -c '{HANDLE_PY}'; echo @@done"),
    "nested-launchers": (
        ("firejail",),
        "echo @@firejail; firejail --quiet --noprofile cat .env secrets/key.txt; firejail --join=1 cat .env;"
        ' echo @@ai-sandbox; "$AIS" -- cat .env secrets/key.txt; "$AIS" -- ls -a secrets; echo @@done',
    ),
}


@pytest.mark.parametrize("vector", list(VECTORS))
def test_escape_vector_reveals_nothing(ws, firejail, vector):
    tools, script = VECTORS[vector]
    for tool in ("sh", "cat", "ls", *tools):
        require(tool)
    s = plant(ws)
    holder = None
    env = {}
    if vector == "proc-root":
        # a host process, as the sandboxed identity, sitting in the hidden directory with .env open
        if ws.user:
            chown_tree(ws.base, ws.user)
        with open(ws.repo / ".env", "rb") as f:
            holder = subprocess.Popen(host_user_cmd(ws, ["sleep", "60"]), stdin=f, cwd=ws.repo / "secrets")
        env["HOSTPID"] = str(holder.pid)
    try:
        if ws.user:
            chown_tree(ws.base, ws.user)
        before = snapshot(ws.repo)
        res = launch(ws, script + "; true", env=env)
    finally:
        if holder:
            holder.kill()
            holder.wait()
    assert res.rc == 0, res.err
    assert_markers(res, script)
    assert_nothing_revealed(res, s)
    assert snapshot(ws.repo) == before, "the host's secrets changed"
    if vector == "hardlink":
        assert not any((ws.repo / n).exists() for n in ("h-env", "h-key", "sub/h-cfg", "h-env2", "h-py"))
    if vector == "symlink":
        assert (ws.repo / "l-env").is_symlink()  # the links were made: the reads went through them
    if vector == "proc-root":
        assert "~~hostpid-absent" in res.out  # the sandbox has its own PID namespace


def test_inherited_file_descriptors_are_closed(ws, firejail):
    """The secret opened on the host and handed down as fds 3 and 7, the hidden directory as fd 8 (an
    openat through it would bypass the mount), the key as fd 9: firejail closes every fd >= 3."""
    s = plant(ws)
    fds = {3: ws.repo / ".env", 7: ws.repo / ".env", 8: ws.repo / "secrets", 9: ws.repo / "secrets" / "key.txt"}
    # control: without the sandbox, the same fds reach the command (through setpriv for the user)
    control = launch(ws, "cat <&7; ls /proc/self/fd/8/", fds=fds, sandbox=False)
    assert s.env in control.out and s.name in control.out
    script = (
        "echo @@fds; ls -l /proc/self/fd/; cat /proc/self/fd/3 /proc/self/fd/7 /proc/self/fd/9 /dev/fd/7;"
        " cat <&7; cat <&3; cat 0<&9; ls -a /proc/self/fd/8/ /dev/fd/8/; cat /proc/self/fd/8/key.txt;"
        " echo @@py; $PY -c 'import os\nfor fd in (3, 7, 8, 9):\n"
        "    try: print(os.read(fd, 200))\n    except OSError as e: print(fd, e.strerror)\n"
        'try: print(os.listdir(8), open("key.txt", opener=lambda p, f: os.open(p, f, dir_fd=8)).read())\n'
        "except OSError as e: print(8, e.strerror)';"
        " echo @@done; true"
    )
    res = launch(ws, script, fds=fds)
    assert res.rc == 0, res.err
    assert_markers(res, script)
    assert_nothing_revealed(res, s)
    assert "Bad file descriptor" in res.err + res.out


def test_launched_from_inside_the_hidden_directory(ws, firejail):
    """The caller's cwd is the hidden directory itself: the agent must start in the mask (or elsewhere),
    never keep a reference to the real directory."""
    s = plant(ws)
    script = "echo @@cwd; pwd; ls -a; ls -a .; cat key.txt ./key.txt ./*.pem; echo @@py;"
    script += " $PY -c 'import os; print(os.listdir(\".\"), os.listdir(os.getcwd()))'; echo @@done; true"
    res = launch(ws, script, cwd=ws.repo / "secrets")
    assert res.rc == 0, res.err
    assert_markers(res, script)
    assert_nothing_revealed(res, s)
    assert "current directory is hidden" in res.err


def test_renaming_a_visible_parent_keeps_the_mask(ws, firejail):
    """`mv cfg cfg2` is allowed (cfg is visible) and really happens on the host; the mask on cfg/.env
    moves with the directory. (The watcher may end the session: the mask's path changed.)"""
    s = plant(ws)
    script = "echo @@mv; mv cfg cfg2 && echo '~~moved'; cat cfg2/.env; ls -la cfg2; mv cfg2 cfg; echo @@done; true"
    before = snapshot(ws.repo)
    res = launch(ws, script)
    assert_nothing_revealed(res, s)
    assert "~~moved" in res.out
    if (ws.repo / "cfg2").exists():  # the session was ended before it moved the directory back
        os.rename(ws.repo / "cfg2", ws.repo / "cfg")
    assert snapshot(ws.repo) == before


# --- found by this suite and fixed: block devices (private-dev), rules rewritten for the next launch -------


def test_raw_block_device_of_the_project_file_system(ws, firejail):
    """Root in the sandbox keeps DAC ownership of device nodes (caps.drop does not change that): without
    `private-dev` the file system under the project could be read raw, past every mask. Reproduced on a loop-mounted ext4
    (a real disk, /dev/sda or /dev/nvme0n1, is root:disk 0660: the same for root and the disk group)."""
    root_only("builds a loop-mounted file system")
    require("mkfs.ext4")
    require("mount")
    require("grep")
    fs = ws.base / "fs"
    fs.mkdir()
    image = ws.base / "fs.img"
    with open(image, "wb") as f:
        f.truncate(16 << 20)
    subprocess.run(["mkfs.ext4", "-q", "-F", str(image)], check=True, capture_output=True)
    proc = subprocess.run(["mount", "-o", "loop", str(image), str(fs)], capture_output=True, text=True)
    if proc.returncode != 0:
        unavailable(f"cannot mount a loop file system here: {proc.stderr.strip()}")
    try:
        device = subprocess.run(
            ["findmnt", "-n", "-o", "SOURCE", str(fs)], capture_output=True, text=True, check=True
        ).stdout.strip()
        (fs / "w").mkdir()
        (fs / "w").chmod(0o755)
        inner = new_workspace(fs / "w", ws.identity)
        secret = _token("RAWSECRET")
        inner.write(".gitignore", ".env\n")
        inner.write(".env", f"{secret}\n")
        if inner.user:
            chown_tree(inner.base, inner.user)
        os.sync()  # the secret reaches the device
        script = f"echo @@raw; ls -l {device}; grep -a -o -m1 'RAWSECRET-[0-9a-f]*' {device}; echo @@done; true"
        res = launch(inner, script)
    finally:
        subprocess.run(["umount", "-l", str(fs)], check=False)
    assert res.rc == 0, res.err
    assert_markers(res, script)
    assert secret not in res.out  # `private-dev`: no block device inside, not even for root
    assert "Permission denied" in res.err or "No such file" in res.err


# Each changes what the NEXT launch hides, from inside the current one; the second launch then reads.
POISON = {
    "edit-gitignore": "sed -i -e '/^.env$/d' -e '/^secrets.$/d' .gitignore",
    "project-config-allow": 'printf \'allow = [".env", "secrets/", "cfg/.env"]\\n\' > .ai-sandbox.toml',
    "user-config-allow": (
        'printf \'allow = [".env", "secrets/", "cfg/.env"]\\n\' > "$XDG_CONFIG_HOME/ai-sandbox/config.toml"'
    ),
    # the next launch's `git status` (on the host, outside the sandbox) runs the clean filter
    "git-clean-filter": (
        "git config filter.x.clean \"sh -c 'cat $REPO/.env $REPO/cfg/.env $REPO/secrets/* > $REPO/leak.txt; cat'\";"
        " echo 'README.md filter=x' > .gitattributes; touch -d 2001-01-01 README.md"
    ),
    "git-core-worktree": 'mkdir -p ../decoy && git init -q ../decoy && git config core.worktree "$REPO/../decoy"',
}


@pytest.mark.parametrize("attack", list(POISON))
def test_the_next_launch_cannot_be_weakened_from_inside(ws, firejail, attack):
    s = plant(ws)
    first = launch(ws, f"echo @@attack; {POISON[attack]}; echo @@done; true")
    assert first.rc == 0, first.err
    assert_markers(first, "echo @@attack; echo @@done")
    assert_nothing_revealed(first, s)
    _next_launch_reveals_nothing(ws, s, attack)


@pytest.mark.parametrize("attack", ["git-clean-filter", "git-core-worktree"])
def test_the_next_launch_holds_against_settings_a_session_left(ws, firejail, attack):
    """The same git settings left in the repository with no session's end to remove them (gitsettings.py; its
    watcher killed): the launch's own defences hold alone."""
    s = plant(ws)
    first = launch(ws, f"{POISON[attack]}; true", sandbox=False)
    assert first.rc == 0, first.err
    _next_launch_reveals_nothing(ws, s, attack)


def _next_launch_reveals_nothing(ws: Workspace, s: Secrets, attack: str) -> None:
    script = "echo @@read; cat .env cfg/.env secrets/* leak.txt; ls -a secrets; echo @@done; true"
    second = launch(ws, script)
    if second.rc != 0:  # the next launch refused: fine, if it says why in one line and ran nothing
        assert second.err.startswith("ai-sandbox: error:") and len(second.err.strip().splitlines()) == 1
        assert "@@read" not in second.out
    else:
        assert_markers(second, script)
    leaked = [x for x in s.all() if x in second.out + second.err]
    assert not leaked, f"{attack}: the session rewrote the next launch's rules and the next launch revealed it"
    if attack in ("edit-gitignore", "project-config-allow"):
        assert second.rc == 65 and "was hidden at the last launch" in second.err  # the record (state.py)


# --- found by the red team of the bwrap backend, fixed ----------------------------------------------------


def test_kernel_settings_and_sysfs_are_read_only_inside(ws):
    """Root (no capability, but the owner) wrote kernel.core_pattern = |/tmp/evil.sh inside bwrap, and the
    kernel ran it as root outside every namespace: it read every secret. /proc/sys and /sys are read-only;
    the write below puts back the value already there, so a failure of this test changes nothing."""
    before = Path("/proc/sys/kernel/core_pattern").read_text()
    script = (
        "echo @@write; cat /proc/sys/kernel/core_pattern > /tmp/.ais-cp-$$ && "
        "cat /tmp/.ais-cp-$$ > /proc/sys/kernel/core_pattern && echo '~~wrote'; rm -f /tmp/.ais-cp-$$;"
        " echo @@mounts; grep -E ' /(sys|proc/sys) ' /proc/self/mountinfo; echo @@done; true"
    )
    res = launch(ws, script)
    assert res.rc == 0, res.err
    assert_markers(res, script)
    assert "~~wrote" not in res.out and ("Read-only file system" in res.err or "Permission denied" in res.err)
    points = {line.split()[4]: line.split()[5] for line in res.out.splitlines() if line.count(" ") > 5}
    assert {"/sys", "/proc/sys"} <= set(points), res.out
    assert all("ro" in opts.split(",") for opts in points.values()), points
    assert Path("/proc/sys/kernel/core_pattern").read_text() == before


def test_started_inside_a_masked_directory_the_agent_is_in_the_mask(ws):
    """bwrap entered the caller's directory before the masks existed: started in a hidden directory that gets
    a read-only mask (here not writable by its owner, so no scratch), the agent listed, read and wrote the real
    one beneath. As under firejail, it now meets the mask (or starts in /)."""
    s = plant(ws)
    (ws.repo / "secrets").chmod(0o555)
    if ws.user:
        chown_tree(ws.base, ws.user)
    before = snapshot(ws.repo)
    # the write only where the agent started in the masked directory: firejail as a user starts one that
    # cannot enter it in the passwd home, whose key.txt would be a file the suite left there (Debian 13 run)
    where = shlex.quote(str(ws.repo / "secrets"))
    script = f'echo @@cwd; pwd; ls -a; cat key.txt ./*.pem; [ "$(pwd)" != {where} ] || echo OVERWRITTEN > key.txt;'
    # the sandbox's pid 1 (bwrap's init) entered it before the masks existed too (second red team)
    script += " echo @@init; ls -a /proc/1/cwd/; cat /proc/1/cwd/key.txt; echo OVERWRITTEN >> /proc/1/cwd/key.txt;"
    script += " echo @@done; true"
    try:
        res = launch(ws, script, cwd=ws.repo / "secrets")
    finally:
        (ws.repo / "secrets").chmod(0o755)
    assert res.rc == 0, res.err
    assert_markers(res, script)
    assert_nothing_revealed(res, s)
    (ws.repo / "secrets").chmod(0o555)
    assert snapshot(ws.repo) == before, "the host's secrets changed"
    (ws.repo / "secrets").chmod(0o755)


def test_no_terminal_of_the_host_but_the_controlling_one(ws):
    """The host's /dev/pts let the agent open another terminal of the user's and read what was typed there.
    Inside, /dev/pts is the sandbox's own (new terminals still work: tmux, expect, node-pty)."""
    import pty

    master, slave = pty.openpty()
    try:
        name = os.ttyname(slave)
        if ws.user:
            os.chown(name, ws.user.uid, ws.user.gid)
        script = f"echo @@pts; ls /dev/pts; test -e {name} && echo '~~host-pty'; echo @@new; "
        script += "$PY -c 'import os, pty; m, s = pty.openpty(); print(\"~~opened\", os.ttyname(s))'; echo @@done"
        res = launch(ws, script)
    finally:
        os.close(master)
        os.close(slave)
    assert res.rc == 0, res.err
    assert_markers(res, script)
    assert "~~host-pty" not in res.out
    assert "~~opened /dev/pts/" in res.out


@pytest.mark.backends(
    pytest.param("firejail", marks=pytest.mark.xfail(strict=True, reason="no seccomp filter under firejail")),
    "bwrap",
)
def test_the_agent_cannot_type_into_the_callers_terminal(ws):
    """TIOCSTI pushes input into the terminal the agent shares with the caller (where the kernel allows it,
    dev.tty.legacy_tiocsti = 1): a command run by the caller's shell once the sandbox ends read every secret
    (red team). bwrap's seccomp filter refuses it with EPERM; the control run shows the call itself is
    otherwise well formed (ENOTTY: stdin is no terminal here)."""
    probe = (
        "import fcntl, termios\nfor cmd in (termios.TIOCSTI, 0x541C):\n    try:\n"
        "        fcntl.ioctl(0, cmd, b'x')\n    except OSError as e:\n        print('~~', hex(cmd), e.strerror)\n"
    )
    script = f'echo @@ioctl; $PY -c "{probe}"; echo @@done'
    control = launch(ws, script, sandbox=False)
    assert "~~ 0x5412 Inappropriate ioctl for device" in control.out, control.out
    res = launch(ws, script)
    assert res.rc == 0, res.err
    assert_markers(res, script)
    assert "~~ 0x5412 Operation not permitted" in res.out and "~~ 0x541c Operation not permitted" in res.out


def test_killing_the_whole_process_group_from_inside_spares_the_watcher(ws):
    """kill(0, SIGKILL) reaches the agent's whole process group across pid namespaces: it killed the watcher
    on the host, and the index marks of a hidden tracked file stayed set (git then ignored the user's edits
    to it). The watcher has a session of its own: the marks are cleared when the sandbox is gone."""
    ws.write(".ai-sandbox.toml", 'block = ["config/prod.yml"]\n')
    ws.write("config/prod.yml", "password: tracked-secret\n")
    ws.git("add", ".")
    ws.git("commit", "-qm", "prod")
    if ws.user:
        chown_tree(ws.base, ws.user)
    cmd = host_user_cmd(ws, [AIS, *ws.backend_args, "--", PY, "-c", "import os, signal; os.kill(0, signal.SIGKILL)"])
    proc = subprocess.run(cmd, cwd=ws.repo, env=ws.env(), capture_output=True, timeout=60, start_new_session=True)
    assert proc.returncode == -9, proc.stderr  # the launch itself was in the group
    deadline = time.monotonic() + 20
    while "S config/prod.yml" in ws.git("ls-files", "-v") and time.monotonic() < deadline:
        time.sleep(0.2)
    assert "S config/prod.yml" not in ws.git("ls-files", "-v")


def test_a_caller_variable_named_like_the_environment_transport_adds_nothing(ws):
    """The caller's own AI_SANDBOX_ENV_1 was read as the continuation of the packed environment: a newline in
    it added a variable of its choosing. The agent now gets it as one variable, exactly."""
    value = "tail\nINJECTED=yes"
    res = launch(ws, "echo @@env; env; echo @@done", env={"AI_SANDBOX_ENV_1": value, "AI_SANDBOX_SIGIGN": "2"})
    assert res.rc == 0, res.err
    assert "\nINJECTED=yes\n" in res.out  # as the second line of AI_SANDBOX_ENV_1's value, printed by env
    assert f"AI_SANDBOX_ENV_1={value}\n" in res.out and "AI_SANDBOX_SIGIGN=2\n" in res.out
    assert res.out.count("INJECTED=yes") == 1


def test_a_hidden_path_moved_while_the_sandbox_starts_refuses(ws_self):
    """A directory holding a hidden file renamed between the policy and the masks: the mask was skipped as
    missing and the secret read under the new name, with no watcher to notice (second red team). The check
    now knows the path existed at the launch: gone inside means moved, and the agent never starts. Driven
    through the launch's own functions, to rename in that window."""
    from ai_sandbox import launch as launching
    from ai_sandbox import supervise
    from ai_sandbox.fs import make_dirs, write_files

    ws = ws_self
    ws.write(".gitignore", ".env\n")
    ws.write("svc/app.py", "APP\n")
    ws.git("add", ".")
    ws.git("commit", "-qm", "svc")
    secret = token("RACESECRET")
    ws.write("svc/.env", secret + "\n")
    env = ws.env()
    req = launching.Request(
        argv=["sh", "-c", "cat svc.old/.env; echo AGENT-RAN"],
        is_command=True,
        backend=ws.backend,
        cwd=str(ws.repo),
        env=env,
    )
    prepared = launching.prepare(req)
    plan = prepared.plan
    make_dirs(plan.dirs)
    write_files(plan.files)
    os.rename(ws.repo / "svc", ws.repo / "svc.old")
    if plan.supervised:
        rc, out, err = supervise.captured(plan, str(ws.repo))
    else:
        proc = subprocess.run(plan.argv, env=plan.env, cwd=ws.repo, capture_output=True, timeout=60)
        rc, out, err = proc.returncode, proc.stdout, proc.stderr
    assert secret.encode() not in out + err
    assert rc == 69 and b"AGENT-RAN" not in out, (rc, out, err)
    assert b"was moved or deleted while the sandbox started" in err
