"""The pure parts behind the commands: nesting from a mount table, verdicts, templates, wrappers, audit."""

from __future__ import annotations

import tomllib

import pytest

from ai_sandbox import aliases, audit, nested, template
from ai_sandbox.errors import UsageError
from ai_sandbox.explain import verdict
from ai_sandbox.patterns import DEPENDENCY, Pattern, Source
from ai_sandbox.policy import Kept, Mask, Policy

MOUNTINFO = rb"""22 1 0:21 / / rw - ext4 /dev/vda rw
70 46 0:40 / /run/firejail/mnt rw,nosuid - tmpfs tmpfs rw,mode=755
83 46 254:0 /run/firejail/firejail.ro.file /p/.env ro - ext4 /dev/vda rw
84 46 254:0 /run/firejail/firejail.ro.dir /p/build ro - ext4 /dev/vda rw
85 46 254:0 /run/firejail/firejail.ro.file /p/my\040secret\134x ro - ext4 /dev/vda rw
86 46 254:0 /home/u/other /p/data ro - ext4 /dev/vda rw
"""


def _policy(*masks: Mask) -> Policy:
    return Policy(root="/p", in_git=True, masks=list(masks))


def test_mountinfo_is_parsed_with_its_escapes(tmp_path):
    f = tmp_path / "mountinfo"
    f.write_bytes(MOUNTINFO)
    table = nested.mounts(str(f))
    assert ("/run/firejail/firejail.ro.file", "/p/my secret\\x") in table
    assert nested.inside_sandbox(table)
    assert not nested.inside_sandbox([(r, p) for r, p in table if p != "/run/firejail/mnt"])


def test_a_readable_mask_path_is_unenforced_and_a_missing_one_is_not(tmp_path):
    """Outside firejail no path is a mask: what exists is unenforced, what is absent cannot be read.
    (That a real mask counts as enforced is proved with firejail in tests/security.)"""
    (tmp_path / ".env").write_text("x")
    there = Mask(str(tmp_path / ".env"), False, "ignored", "r")
    gone = Mask(str(tmp_path / "build" / "sub"), True, "ignored", "r")
    assert nested.unenforced(_policy(there, gone), []) == [there]


def test_verdicts_name_the_mask_the_rule_or_why_readable(tmp_path):
    root = str(tmp_path)
    pol = Policy(
        root=root,
        in_git=True,
        masks=[Mask(f"{root}/build", True, "ignored", "ignored by git (.gitignore:1: build/)")],
        kept=[
            Kept(
                f"{root}/node_modules",
                True,
                "ignored by git",
                Pattern("node_modules/", Source(DEPENDENCY, name="dependency directory")),
            )
        ],
    )
    v = verdict(pol, "build/x/y.o", root)
    assert v["hidden"] and v["layer"] == "ignored" and v["mask"] == f"{root}/build" and not v["exists"]
    assert v["reason"].startswith(f"inside hidden {root}/build/")
    v = verdict(pol, "node_modules/pkg", root)
    assert not v["hidden"] and v["rule"] == "node_modules/ (dependency directory)"
    assert verdict(pol, "src/a.py", root)["reason"] == "not ignored by git and not blocked"
    assert "outside the project" in verdict(pol, "/etc/hostname", root)["reason"]
    (tmp_path / "link").symlink_to(f"{root}/build")
    assert verdict(pol, "link", root)["hidden"]  # judged where it leads, as the agent would open it


@pytest.mark.parametrize(
    "name, secret",
    [
        ("infra/prod.tfvars", True),
        ("deploy.PEM", True),
        (".envrc", True),
        (".env.production", True),
        ("config/credentials.json", True),
        ("id_ed25519", True),
        (".env.example", False),
        ("secrets.md", False),
        ("src/secret_manager.py", False),
        ("README", False),
    ],
)
def test_secret_looking_names(name, secret):
    assert template.looks_secret(name) is secret


def test_template_values_survive_any_name():
    names = ['a "quoted" name', "back\\slash", "tab\there", "日本/鍵.pem", "#not-a-comment"]
    d = template.Draft(root="/p", block=names[:2], allow=["/build/keep/"], suggest=names[2:])
    data = tomllib.loads(template.render(d))
    assert data == {"block": names[:2], "allow": ["/build/keep/"]}
    d = template.Draft(root="/p", suggest=["bad-\udcff-byte"])  # not UTF-8: left out, not mangled
    assert "bad-" not in template.render(d)


def test_wrappers_quote_the_launcher_and_refuse_odd_names():
    out = aliases.render(["claude"], "bash", "/opt/my tools/ai-sandbox")
    assert "function claude { command '/opt/my tools/ai-sandbox' claude \"$@\"; }" in out
    out = aliases.render(["claude"], "fish", "/opt/it's/ai-sandbox")
    assert "command '/opt/it\\'s/ai-sandbox' claude $argv; end" in out
    with pytest.raises(UsageError):
        aliases.render(["bad;name"], "bash", "ai-sandbox")
    with pytest.raises(UsageError):
        aliases.render(["claude"], "csh", "ai-sandbox")


def test_tracked_files_under_a_mask():
    tracked = sorted(["/p/a", "/p/conf/x", "/p/conf/y", "/p/conf-other", "/p/z"])
    assert audit._tracked_under(tracked, "/p/conf", True) == ["/p/conf/x", "/p/conf/y"]
    assert audit._tracked_under(tracked, "/p/conf", False) == []
    assert audit._tracked_under(tracked, "/p/a", False) == ["/p/a"]


def test_explain_has_a_section_for_every_layer():
    """A new policy.Layer must get explain's section title, or its masks would not be listed at all."""
    from ai_sandbox import report
    from ai_sandbox.policy import LAYERS

    assert list(report.LAYER_TITLES) == [str(layer) for layer in LAYERS]
