"""The launch check a host backend's sandbox runs before the agent (verify.py): its command, and the spec it
proves, written from the policy and the launch's one look at the masks (idents.py). verify.spec and
verify.parse_spec, beside each other in verify.py, write and read its bytes."""

from __future__ import annotations

import os
from collections.abc import Mapping

from ai_sandbox import network
from ai_sandbox.backends import host
from ai_sandbox.backends.host import OwnFiles
from ai_sandbox.backends.plan import Checked
from ai_sandbox.errors import PolicyError
from ai_sandbox.fs import below
from ai_sandbox.idents import Snapshot
from ai_sandbox.paths import cache_dir, sha256
from ai_sandbox.policy import Policy


def checked(
    policy: Policy,
    own: OwnFiles,
    cwd: str,
    scratch: list[str],
    env: Mapping[str, str],
    backend: str,
    seen: Snapshot | None = None,
) -> Checked:
    """The launch check the sandbox runs before the agent: its command, its spec's path and bytes. Refused when
    the policy hides the interpreter, the script or the spec: the check needs them inside."""
    check = launch_check(policy, own, cwd, scratch, backend, seen)
    check_path = os.path.join(cache_dir(env), f"check-{sha256(check).hexdigest()[:24]}")
    python, script = host.verifier()
    for path in (python, script, check_path):
        if (m := policy.hidden(path)) is not None:
            raise PolicyError(
                f"{path} is hidden by the policy ({m.reason}), and the launch check needs it inside",
                "narrow the rule that hides it",
            )
    compiled = host.compiled_verifier(cache_dir(env))
    run = compiled[0] if compiled is not None else script
    # -I: isolated (no PYTHON* variable, no user site, no cwd on sys.path); -S: no site, stdlib only, ~2 ms less
    return Checked((python, "-I", "-S", run, check_path), check_path, check, compiled)


def launch_check(
    policy: Policy,
    own: OwnFiles,
    cwd: str,
    scratch: list[str] | None = None,
    backend: str = "firejail",
    seen: Snapshot | None = None,
) -> bytes:
    """The spec verify.py checks inside the sandbox (verify.spec writes it, verify.parse_spec reads it back): which
    sandbox must be there (backend: its registry entry's `inside`), every mask, every scratch directory, every
    read-only rule, every anchor, the start directory.

    A mask in the project or the home that existed when the launch looked is an M record: gone when the check
    runs, it was moved or deleted while the sandbox started (a rename of its directory in that window left the
    secret readable under the new name, with no mask and no watcher to notice: red team), and the launch
    refuses. Others are m records: a missing one is nothing to read (a global block of a path that is not
    there, or a path the sandbox itself replaces, like firejail's /var/tmp). Every mask and scratch directory
    whose directory existed also gets an S record: the device and inode the launch saw (seen, the launch's one
    look: idents.py), which the mask inside must be on (a directory swapped for a decoy while the sandbox
    started put the mask on the decoy: red team, F2)."""
    from ai_sandbox import idents, verify

    seen = seen or idents.take(policy)
    chosen = set(scratch or ())
    home = os.path.realpath(os.path.expanduser("~"))
    recs = [b"K" + backend.encode(), b"W" + os.fsencode(cwd)]
    for p in [*(m.path for m in policy.masks if m.path not in chosen), *own.hide]:
        there = seen.files.get(p) if p in seen.files else idents.ident(p)
        near = below(p, policy.root) or (home != "/" and below(p, home))
        recs.append((b"M" if there is not None and near else b"m") + os.fsencode(p))
    recs += [b"T" + os.fsencode(p) for p in scratch or ()]
    for p in [*(m.path for m in policy.masks), *(scratch or ())]:
        d = seen.dirs.get(idents.dirname(p), idents.NONE)
        if d != idents.NONE:
            f = seen.files.get(p)
            recs.append(b"S" + (b"%d:%d" % f if f is not None else b"-:-") + b":" + d + b":" + os.fsencode(p))
    recs += [b"R" + os.fsencode(p) for p in own.protect]
    for place in policy.writes.places:  # write containment (writes.py): each place, and no writable mount left
        recs.append((b"O" if place.writable else b"X") + os.fsencode(place.path))
    recs += [b"B" + os.fsencode(a) for a in policy.writes.anchors]
    recs += [b"B" + os.fsencode(p) for p in own.anchors]
    for own_dir in policy.sockets.private:  # the sandbox's own /tmp and runtime directory, not the host's (sockets.py)
        try:
            st = os.stat(own_dir)
        except OSError:
            continue
        recs.append(b"P%d:%d:" % (st.st_dev, st.st_ino) + os.fsencode(own_dir))
    if policy.sockets.made:  # $TMPDIR, made empty inside the sandbox's own /tmp (sockets.py)
        recs.append(b"D" + os.fsencode(policy.sockets.made))
    net = policy.network
    if not net.private:
        recs.append(b"A")  # the host's abstract sockets out of reach by Landlock where the kernel has it
    if net.private:
        host_ns = os.stat("/proc/self/ns/net").st_ino
        fd = b"%d" % network.FD if net.mode == "allowlist" else b"-"
        recs.append(b"N" + fd + b":%d" % host_ns)
        if net.mode == "allowlist":
            recs += [b"L%d:" % port + address.encode() for address, port in [("127.0.0.1", net.port), *net.forwards]]
    if policy.hidden(cwd) is None:
        try:
            st = os.stat(cwd)
            recs.append(b"C" + f"{st.st_dev}:{st.st_ino}:".encode() + os.fsencode(cwd))
        except OSError:
            pass
    return verify.spec(recs)
