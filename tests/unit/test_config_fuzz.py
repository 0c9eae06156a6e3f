"""Config fuzzing: whatever a config file holds, it loads, or it is refused with one ConfigError that names
the file (and the line, when there is one). Never another exception, never a silently dropped entry, and
never a launch computed from the part of a config that happened to load.

Pure and fast: no sandbox. hypothesis is derandomized, so CI runs the same examples every time.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
import tomli_w
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ai_sandbox import config, legacy
from ai_sandbox.errors import ConfigError
from ai_sandbox.launch import Request, prepare
from ai_sandbox.patterns import Pattern, PatternSet
from tests.conftest import require

FUZZ = settings(
    max_examples=300,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)


@pytest.fixture(scope="module")
def scratch():
    """One directory for the whole module: hypothesis examples rewrite the files in it."""
    base = Path(tempfile.mkdtemp(prefix="ais-cfg-fuzz-"))
    (base / "xdg" / "ai-sandbox").mkdir(parents=True)
    (base / "proj").mkdir()
    yield base
    shutil.rmtree(base, ignore_errors=True)


def _line_count(data: bytes) -> int:
    return max(1, len(data.decode("utf-8", "replace").splitlines()))


def assert_clean_error(err: ConfigError, path: str, data: bytes) -> None:
    """One line, naming the file first; a line number, when given, is a line of the file."""
    msg = err.message
    assert "\n" not in str(err), f"a refusal is one line on stderr: {str(err)!r}"
    if msg.startswith("cannot read "):  # OSError or decoding while reading: names the file too
        assert path in msg, msg
        return
    assert msg.startswith(path + ":"), msg
    m = re.match(re.escape(path) + r":(\d+):", msg)
    if m:
        assert 1 <= int(m.group(1)) <= _line_count(data) + 1, (msg, data)


def assert_usable(patterns: list[Pattern]) -> None:
    """What loaded must also compile: a launch builds these sets right after loading them."""
    with contextlib.suppress(ConfigError):  # refused with its file and line; anything else fails the test
        PatternSet(patterns).match("some/path", False)


# ---------------------------------------------------------------------------------------------------------
# Random TOML-ish text


TOML_FRAGMENTS = [
    "block",
    "allow",
    "allow_dependencies",
    "backend",
    "blok",
    '"block"',
    "block.x",
    " = ",
    "=",
    "[",
    "]",
    "[[",
    "]]",
    "{",
    "}",
    ",",
    '"',
    "'",
    '"""',
    "'''",
    "\\",
    "\\u00e9",
    "\\U0001F600",
    "\\x41",
    "\\0",
    "#",
    "\n",
    "\r\n",
    "\r",
    " ",
    "\t",
    "true",
    "false",
    "1",
    "-1.5e3",
    "inf",
    "1979-05-27T07:32:00Z",
    "x",
    "*.pem",
    "!keep",
    "~/",
    "~root/x",
    "~nosuchuser-ais/x",
    "..",
    "/",
    "/abs/path",
    "é",
    "☕",
    "\ufeff",
    "\x7f",
    "\x01",
    "\u2028",
    ".",
    "a.b",
    '"auto"',
    '"firejail"',
    "[]",
    '["x"]',
    '["*.pem", "secrets/"]',
    "[1]",
    "[[1]]",
    "{a = 1}",
]

TOML_TEXT = st.lists(
    st.one_of(st.sampled_from(TOML_FRAGMENTS), st.text(max_size=6).filter(lambda s: "\0" not in s)),
    max_size=40,
).map("".join)
# mostly text, sometimes arbitrary bytes (non-UTF-8 included), never NUL
TOML_BYTES = st.one_of(
    TOML_TEXT.map(lambda s: s.encode("utf-8", "surrogatepass")),
    TOML_TEXT.map(str.encode),
    st.binary(max_size=200).map(lambda b: b.replace(b"\0", b"")),
    st.tuples(TOML_TEXT, st.binary(min_size=1, max_size=4)).map(lambda t: t[0].encode() + t[1].replace(b"\0", b"")),
)


def _load_user(scratch: Path, data: bytes):
    path = scratch / "xdg" / "ai-sandbox" / "config.toml"
    path.write_bytes(data)
    return str(path), lambda: config.load_user({"XDG_CONFIG_HOME": str(scratch / "xdg")})


def _load_project(scratch: Path, data: bytes, legacy_data: bytes | None = None):
    root = scratch / "proj"
    (root / ".ai-sandbox.toml").write_bytes(data)
    lp = root / ".ai-sandbox"
    if legacy_data is None:
        lp.unlink(missing_ok=True)
    else:
        lp.write_bytes(legacy_data)
    return str(root / ".ai-sandbox.toml"), lambda: config.load_project(str(root))


@FUZZ
@given(data=TOML_BYTES)
def test_random_user_config_loads_or_is_one_clear_error(scratch, data):
    path, load = _load_user(scratch, data)
    try:
        cfg = load()
    except ConfigError as e:
        assert_clean_error(e, path, data)
        return
    for p, source in cfg.block_paths:
        assert os.path.isabs(p) and os.path.normpath(p) == p, p
        assert source.line > 0 and source.file, source
    for pat in [*cfg.block_patterns, *cfg.allow]:
        assert pat.text.strip() and "\0" not in pat.text, pat
    assert isinstance(cfg.allow_dependencies, bool) and cfg.backend in config.BACKENDS
    assert_usable(cfg.block_patterns)
    assert_usable(cfg.allow)


@FUZZ
@given(data=TOML_BYTES)
def test_random_project_config_loads_or_is_one_clear_error(scratch, data):
    path, load = _load_project(scratch, data)
    try:
        cfg = load()
    except ConfigError as e:
        assert_clean_error(e, path, data)
        return
    for pat in cfg.block:
        assert ".." not in pat.text.lstrip("!").split("/"), pat
    for pat in cfg.allow:
        assert ".." not in pat.text.lstrip("!").split("/") and not pat.text.lstrip("!").startswith("~"), pat
    assert_usable(cfg.block)
    assert_usable(cfg.allow)


# Well-formed TOML with values of random types and contents: the type checks and the line numbers.
SCALARS = st.one_of(
    st.text(max_size=12),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False),
    st.sampled_from(["auto", "firejail", "", "*.pem", "../up", "~/x", "/abs", "!x", "a\\", "#c"]),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(min_size=1, max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)
KEYS = st.sampled_from(["block", "allow", "allow_dependencies", "backend"]) | st.text(min_size=1, max_size=8)
DOCS = st.dictionaries(KEYS, VALUES | st.lists(st.text(max_size=12), max_size=6), max_size=4)


def _toml_literal(value: str) -> str:
    return tomli_w.dumps({"k": value})[len("k = ") : -1]


@FUZZ
@given(doc=DOCS, which=st.sampled_from(["user", "project"]))
def test_typed_documents_load_exactly_or_are_refused(scratch, doc, which):
    data = tomli_w.dumps(doc).encode()
    path, load = (_load_user if which == "user" else _load_project)(scratch, data)
    try:
        cfg = load()
    except ConfigError as e:
        assert_clean_error(e, path, data)
        return
    allowed = {"block", "allow", "allow_dependencies", "backend"} if which == "user" else {"block", "allow"}
    assert set(doc) <= allowed, "an unknown key was accepted"
    lines = data.decode().splitlines()
    if which == "user":
        written = [os.path.normpath(os.path.expanduser(v)) for v in doc.get("block", []) if v.startswith(("/", "~"))]
        assert [p for p, _ in cfg.block_paths] == written
        assert [p.text for p in cfg.block_patterns] == [v for v in doc.get("block", []) if not v.startswith(("/", "~"))]
        assert cfg.allow_dependencies is doc.get("allow_dependencies", True)
        assert cfg.backend == doc.get("backend", "auto")
        patterns = cfg.block_patterns
    else:
        assert [p.text for p in cfg.block] == [v for v in doc.get("block", []) if not v.startswith("~")]
        patterns = cfg.block
    assert [p.text for p in cfg.allow] == doc.get("allow", [])
    for pat in [*patterns, *cfg.allow]:  # every entry cites a line of the file inside its array
        line = pat.source.line
        assert 1 <= line <= len(lines), (pat, data)


# ---------------------------------------------------------------------------------------------------------
# Structured cases: wrong types for every key, paths that leave the project, sizes, encodings


WRONG_TYPES = [
    ("block", ['"x"', "[1]", "[[1]]", '[["x"]]', "true", "{a = 1}", '["x", 2]', "1.5", "1979-05-27"]),
    ("allow", ['"x"', "[1]", "[true]", '[{a = "x"}]', "{}", '["ok", ["nested"]]']),
    ("allow_dependencies", ['"yes"', "1", "0", "[true]", "{}", '"true"']),
    ("backend", ["3", "[]", '["auto"]', "true", '"docker2"', '""', '"Firejail"', "{a = 1}"]),
    # keys added later (the docker backend, the watcher): checked only where this version has them
    ("on_hidden_change", ["true", '"kill"', '["end"]', "1"]),
    ("engine", ["3", '"dockerz"', '["docker"]', '""']),
    ("image", ["3", '["x"]', "true", "{a = 1}"]),
    ("mounts", ['"~/.gitconfig"', "[1]", '["relative/path"]', "[[1]]"]),
]
_USER_KEYS = set(config.UserConfig._fields)
WRONG_TYPES = [(k, vs) for k, vs in WRONG_TYPES if k in _USER_KEYS]
TABLES = [
    "[block]\nx = 1\n",
    "[[block]]\nx = 1\n",
    "[[allow]]\n[[allow]]\n",
    "[allow_dependencies]\n",
    "[backend]\nname = 'auto'\n",
    "block.x = 1\n",
    "[extra]\nblock = []\n",
    '"block" = "x"\n',
]
USER_CASES = [f"{k} = {v}\n" for k, vs in WRONG_TYPES for v in vs] + TABLES
PROJECT_CASES = (
    [f"{k} = {v}\n" for k, vs in WRONG_TYPES[:2] for v in vs]
    + TABLES
    + [f"{k} = {v}\n" for k, v in (("allow_dependencies", "false"), ("backend", '"firejail"'), ("image", '"x"'))]
)  # the last ones are user-only keys: unknown in a project file


@pytest.mark.parametrize("text", USER_CASES)
def test_user_config_wrong_types_are_refused(scratch, text):
    path, load = _load_user(scratch, ("# leading comment\n" + text).encode())
    with pytest.raises(ConfigError) as exc:
        load()
    assert_clean_error(exc.value, path, text.encode())
    assert exc.value.message.startswith(path + ":")


@pytest.mark.parametrize("text", PROJECT_CASES)
def test_project_config_wrong_types_are_refused(scratch, text):
    path, load = _load_project(scratch, text.encode())
    with pytest.raises(ConfigError) as exc:
        load()
    assert exc.value.message.startswith(path + ":"), exc.value.message


@pytest.mark.parametrize(
    "entry",
    ["../x", "a/../../b", "!../x", "x/..", "**/../x", "~/x", "~root/x", "~nosuchuser-ais/x", "!~/x", "~"],
)
def test_project_allow_never_leaves_the_project(scratch, entry):
    path, load = _load_project(scratch, tomli_w.dumps({"allow": ["ok/", entry]}).encode())
    with pytest.raises(ConfigError) as exc:
        load()
    assert exc.value.message.startswith(f"{path}:"), exc.value.message
    assert "outside the project" in exc.value.message


@pytest.mark.parametrize("entry", ["../x", "a/../../b", "!../x", "x/..", "/../etc/passwd"])
def test_project_block_with_dotdot_is_refused(scratch, entry):
    path, load = _load_project(scratch, tomli_w.dumps({"block": [entry]}).encode())
    with pytest.raises(ConfigError, match=r"uses `\.\.`") as exc:
        load()
    assert exc.value.message.startswith(f"{path}:"), exc.value.message


def test_project_block_absolute_and_home_entries(scratch, monkeypatch):
    monkeypatch.setenv("HOME", "/home/u")
    path, load = _load_project(scratch, b'block = ["/etc/passwd", "~/.aws/credentials", "~root/.ssh"]\n')
    cfg = load()
    # a leading `/` anchors a pattern at the git root; only `~` leaves the project
    assert [p.text for p in cfg.block] == ["/etc/passwd"]
    assert [p for p, _ in cfg.block_paths] == ["/home/u/.aws/credentials", os.path.expanduser("~root/.ssh")]


@pytest.mark.parametrize("which", ["user", "project"])
def test_unknown_user_in_tilde_is_refused(scratch, which):
    data = b'block = ["~nosuchuser-ais/x"]\n'
    path, load = (_load_user if which == "user" else _load_project)(scratch, data)
    with pytest.raises(ConfigError, match="cannot expand") as exc:
        load()
    assert exc.value.message.startswith(f"{path}:1:")


def test_user_tilde_user_expands(scratch):
    _, load = _load_user(scratch, b'block = ["~root/secret"]\n')
    assert [p for p, _ in load().block_paths] == [os.path.expanduser("~root/secret")]


@pytest.mark.parametrize("which", ["user", "project"])
def test_more_than_the_limit_is_refused(scratch, which):
    entries = [f"dir{i}/file.txt" for i in range(20_000)]
    path, load = (_load_user if which == "user" else _load_project)(scratch, tomli_w.dumps({"block": entries}).encode())
    with pytest.raises(ConfigError, match="more than 10000") as exc:
        load()
    assert exc.value.message.startswith(f"{path}:1:")


@pytest.mark.parametrize("layout", ["one-per-line", "one-line"])
@pytest.mark.parametrize("which", ["user", "project"])
def test_nine_thousand_entries_load_quickly(scratch, which, layout):
    entries = [f"dir{i}/file.txt" for i in range(9_000)]
    sep = "\n  " if layout == "one-per-line" else " "
    text = "block = [" + sep + ("," + sep).join(json.dumps(e) for e in entries) + "]\n"
    _, load = (_load_user if which == "user" else _load_project)(scratch, text.encode())
    start = time.perf_counter()
    cfg = load()
    elapsed = time.perf_counter() - start
    got = cfg.block_patterns if which == "user" else cfg.block
    assert [p.text for p in got] == entries
    assert elapsed < 5, f"{elapsed:.2f} s to load 9,000 entries ({layout})"


@pytest.mark.parametrize("which", ["user", "project"])
def test_non_utf8_is_a_clear_error(scratch, which):
    data = b'block = ["caf\xe9"]\n'
    path, load = (_load_user if which == "user" else _load_project)(scratch, data)
    with pytest.raises(ConfigError) as exc:
        load()
    assert exc.value.message == f"{path}: not UTF-8 text"


def test_non_utf8_legacy_file_is_a_clear_error(scratch):
    path, load = _load_project(scratch, b"", b"AI_SANDBOX_BLOCK_PATHS=(caf\xe9)\n")
    with pytest.raises(ConfigError) as exc:
        load()
    assert str(scratch / "proj" / ".ai-sandbox") in exc.value.message


@pytest.mark.parametrize("which", ["user", "project"])
def test_a_bom_is_loaded_or_refused_cleanly(scratch, which):
    data = '\ufeffblock = ["*.pem"]\n'.encode()
    path, load = (_load_user if which == "user" else _load_project)(scratch, data)
    try:
        cfg = load()
    except ConfigError as e:  # today: tomllib rejects the BOM as an invalid statement at 1:1
        assert_clean_error(e, path, data)
        return
    assert [p.text for p in (cfg.block_patterns if which == "user" else cfg.block)] == ["*.pem"]


@pytest.mark.parametrize("which", ["user", "project"])
def test_crlf_line_endings_load_like_lf(scratch, which, monkeypatch):
    monkeypatch.setenv("HOME", "/home/u")
    text = '# c\nblock = [\n  "*.pem",\n  "~/.aws",\n]\nallow = ["build/"]\n'
    load_fn = _load_user if which == "user" else _load_project
    results = []
    for data in (text.encode(), text.replace("\n", "\r\n").encode()):
        _, load = load_fn(scratch, data)
        cfg = load()
        pats = cfg.block_patterns if which == "user" else cfg.block
        results.append(([(p.text, str(p.source.line)) for p in pats], cfg.block_paths, [p.text for p in cfg.allow]))
    assert results[0] == results[1]
    assert results[0][0] == [("*.pem", "3")]


def test_crlf_legacy_file_parses_like_lf():
    text = "# c\nAI_SANDBOX_BLOCK_PATHS=(\n  a.pem\n  'b c'\n)\nAI_SANDBOX_ALLOW_PATHS=(build/)\n"
    lf, crlf = legacy.parse(text, "/p/.ai-sandbox"), legacy.parse(text.replace("\n", "\r\n"), "/p/.ai-sandbox")
    assert (lf.block, lf.allow) == (crlf.block, crlf.allow) == ([("a.pem", 3), ("b c", 4)], [("build/", 6)])


def test_a_nul_escape_in_an_entry_is_refused(scratch):
    path, load = _load_project(scratch, b'block = ["a\\u0000b"]\n')
    with pytest.raises(ConfigError) as exc:
        load()
    assert exc.value.message.startswith(f"{path}:1:")


# ---------------------------------------------------------------------------------------------------------
# Legacy bash files


BASH_FRAGMENTS = [
    "AI_SANDBOX_BLOCK_PATHS=(",
    "AI_SANDBOX_ALLOW_PATHS=(",
    "AI_SANDBOX_BLOCK_PATHS+=(",
    "AI_SANDBOX_BLOCK_PATHS=",
    "OTHER=(",
    "(",
    ")",
    '"',
    "'",
    "$(",
    "`",
    "$HOME",
    "${HOME}",
    "$HOMEX",
    "${HOME:-x}",
    "$X",
    "$",
    "$'",
    "<<EOF",
    "<<'EOF'",
    "EOF",
    ";",
    "&",
    "|",
    "<",
    ">",
    "\n",
    "\r\n",
    "\\",
    "\\\n",
    "# comment",
    "#",
    " ",
    "\t",
    "secrets/",
    "*.pem",
    "my file",
    "é☕",
    "{a,b}",
    "~",
    "=",
    "+=",
    "declare -a",
    "export",
]
BASH_TEXT = st.lists(
    st.one_of(st.sampled_from(BASH_FRAGMENTS), st.text(max_size=4).filter(lambda s: "\0" not in s)), max_size=30
).map("".join)


def assert_legacy_outcome(text: str, path: str = "/p/.ai-sandbox") -> legacy.LegacyConfig | None:
    try:
        cfg = legacy.parse(text, path)
    except ConfigError as e:
        m = re.match(re.escape(path) + r":(\d+): ", e.message)
        assert m, e.message
        assert 1 <= int(m.group(1)) <= text.count("\n") + 1, (e.message, text)
        return None
    lines = text.count("\n") + 1
    for entry, line in [*cfg.block, *cfg.allow]:
        assert entry, "an empty entry was kept"
        assert 1 <= line <= lines, (entry, line, text)
    return cfg


@FUZZ
@given(text=BASH_TEXT)
def test_random_legacy_text_parses_or_is_refused_with_its_line(text):
    assert_legacy_outcome(text)


# Without single quotes and backslashes nothing can make `$(` or a backtick literal: if the parse
# succeeds, no entry may hold one (it would be a command substitution silently read as a path).
UNQUOTED_FRAGMENTS = [f for f in BASH_FRAGMENTS if "'" not in f and "\\" not in f]
UNQUOTED_TEXT = st.lists(
    st.one_of(
        st.sampled_from(UNQUOTED_FRAGMENTS),
        st.text(st.characters(exclude_characters="\0'\\"), max_size=4),
    ),
    max_size=30,
).map("".join)


@FUZZ
@given(text=UNQUOTED_TEXT)
def test_substitutions_are_never_silently_kept_or_dropped(text):
    cfg = assert_legacy_outcome(text)
    if cfg is None:
        return
    for entry, _ in [*cfg.block, *cfg.allow]:
        assert "$(" not in entry and "`" not in entry, (entry, text)
        assert "$" not in entry, (entry, text)  # $HOME and ${HOME} are expanded; every other `$` refused


@FUZZ
@given(
    before=st.lists(st.sampled_from(["a", "'b c'", '"d"', "e\\ f", "$HOME/g"]), max_size=3),
    bad=st.sampled_from(
        ["$(id)", "`id`", '"$(id)"', '"`id`"', "$(", "`", "<<EOF", "'unbalanced", '"unbalanced', "$X", "${X}"]
    ),
    after=st.lists(st.sampled_from(["h", "'i'"]), max_size=3),
    key=st.sampled_from(["AI_SANDBOX_BLOCK_PATHS", "AI_SANDBOX_ALLOW_PATHS"]),
    lead=st.integers(0, 3),
)
def test_an_expansion_inside_an_array_always_raises(before, bad, after, key, lead):
    text = "\n" * lead + f"{key}=(" + " ".join([*before, bad, *after]) + ")\n"
    with pytest.raises(ConfigError) as exc:
        legacy.parse(text, "/p/.ai-sandbox")
    assert re.match(r"/p/\.ai-sandbox:\d+: ", exc.value.message), exc.value.message
    assert int(exc.value.message.split(":")[1]) == lead + 1


# ---------------------------------------------------------------------------------------------------------
# A config error aborts the whole launch: never a policy built from the part that loaded


def _git(root: Path, *args: str) -> None:
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(root.parent / "home")}
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@x.invalid", "-c", "safe.directory=*", *args],
        cwd=root,
        env=env,
        check=True,
        capture_output=True,
    )


@pytest.fixture
def project(tmp_path):
    require("git")
    root = tmp_path / "proj"
    root.mkdir()
    (tmp_path / "home" / ".config").mkdir(parents=True)
    _git(root, "init", "-q", "-b", "main")
    (root / "README.md").write_text("readme\n")
    (root / "secret.txt").write_text("s\n")
    _git(root, "add", ".")
    _git(root, "commit", "-qm", "init")
    return root


def _request(root: Path) -> Request:
    home = root.parent / "home"
    env = {
        "PATH": os.environ.get("PATH", os.defpath),
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_CACHE_HOME": str(home / ".cache"),
    }
    return Request(argv=["true"], is_command=True, cwd=str(root), env=env)


@pytest.mark.parametrize(
    "toml, legacy_text, user",
    [
        ('block = ["secret.txt"]\nallow = 3\n', None, None),
        ('block = ["secret.txt"]\nallow = ["../x"]\n', None, None),
        ('block = ["secret.txt"]\nblok = []\n', None, None),
        ('block = ["secret.txt", "../x"]\n', None, None),
        ('block = ["secret.txt"]\n', "AI_SANDBOX_BLOCK_PATHS=(ok $(id))\n", None),
        ('block = ["secret.txt"]\n', "AI_SANDBOX_BLOCK_PATHS=(ok)\nAI_SANDBOX_ALLOW_PATHS=(/etc)\n", None),
        ('block = ["secret.txt"]\n', None, 'block = ["*.pem"]\nallow_dependencies = "no"\n'),
        ('block = ["secret.txt"]\n', None, 'block = ["~nosuchuser-ais/x"]\n'),
        ('block = ["secret.txt"]\n', None, b'block = ["caf\xe9"]\n'),
    ],
)
def test_a_config_error_aborts_prepare_entirely(project, toml, legacy_text, user):
    (project / ".ai-sandbox.toml").write_text(toml)
    if legacy_text is not None:
        (project / ".ai-sandbox").write_text(legacy_text)
    if user is not None:
        cfg = project.parent / "home" / ".config" / "ai-sandbox" / "config.toml"
        cfg.parent.mkdir(parents=True, exist_ok=True)
        cfg.write_bytes(user.encode() if isinstance(user, str) else user)
    outcome = None
    with pytest.raises(ConfigError):
        outcome = prepare(_request(project))
    assert outcome is None  # no Prepared, hence no plan, was ever produced


def test_a_valid_config_hides_what_it_names(project):
    """The control for the test above: the same valid part alone does produce a policy."""
    (project / ".ai-sandbox.toml").write_text('block = ["secret.txt"]\n')
    policy = prepare(_request(project)).policy
    assert policy.hidden(str(project / "secret.txt")) is not None


def test_a_block_through_a_symlink_hides_its_target(project):
    (project / "data").mkdir()
    (project / "data" / "token.txt").write_text("t\n")
    (project / "private").mkdir()
    (project / "private" / "key").write_text("k\n")
    os.symlink("data/token.txt", project / "link")
    os.symlink("private", project / "dlink")
    _git(project, "add", ".")
    _git(project, "commit", "-qm", "links")
    (project / ".ai-sandbox.toml").write_text('block = ["/link", "/dlink"]\n')
    policy = prepare(_request(project)).policy
    root = os.path.realpath(project)
    target = policy.hidden(os.path.join(root, "data", "token.txt"))
    assert target is not None and target.origin == os.path.join(root, "link"), policy.masks
    d = policy.hidden(os.path.join(root, "private", "key"))
    assert d is not None and d.path == os.path.join(root, "private") and d.is_dir, policy.masks
    assert policy.hidden(os.path.join(root, "data", "other.txt")) is None  # only the file, not its directory


def test_a_global_block_through_a_symlink_hides_its_target(project):
    home = project.parent / "home"
    (home / "vault").mkdir()
    (home / "vault" / "token").write_text("t\n")
    os.symlink(home / "vault" / "token", home / "token-link")
    cfg = home / ".config" / "ai-sandbox" / "config.toml"
    cfg.parent.mkdir(parents=True)
    cfg.write_text(tomli_w.dumps({"block": [str(home / "token-link")]}))
    policy = prepare(_request(project)).policy
    mask = policy.hidden(os.path.realpath(home / "vault" / "token"))
    assert mask is not None and mask.layer == "global", policy.masks


# ---------------------------------------------------------------------------------------------------------
# Block patterns mean what git means: git itself is the oracle (`git check-ignore --no-index`).
# Only the leak direction is asserted: a name git's rules match must be hidden. ASCII only: git matches
# bytes (`?` is one byte of "é"), Python characters; that difference only ever hides more.

PATTERN_FRAGMENTS = ["a", "b", "*", "?", "**", "[a]", "[!a]", "[^a]", "[a-c]", "[]", "[", "]", "\\", "\\*",
                     "\\ ", "!", "#", " ", "\t", ".", "-", "{a,b}", "^", ".pem", "x", "[[:alpha:]]", "[[:digit:]]"]  # fmt: skip
NAME_CHARS = st.sampled_from(list("ab*?[]\\!# \t.-^{},x") + ["ab", ".pem", "c"])
ASCII_NAMES = st.lists(st.lists(NAME_CHARS, min_size=1, max_size=5).map("".join), min_size=1, max_size=20)


@pytest.fixture(scope="module")
def oracle_repo(scratch):
    require("git")
    repo = scratch / "oracle"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    return repo


def _git_matches(repo: Path, pattern: str, names: list[str]) -> set[str]:
    excludes = repo.parent / "oracle-excludes"
    excludes.write_text(pattern + "\n")
    proc = subprocess.run(
        ["git", "-c", f"core.excludesFile={excludes}", "check-ignore", "--no-index", "-z", "--stdin"],
        cwd=repo,
        input="".join(n + "\0" for n in names).encode(),
        capture_output=True,
        check=False,
        env={**os.environ, "GIT_CONFIG_NOSYSTEM": "1"},
    )
    assert proc.returncode in (0, 1), proc.stderr
    return {os.fsdecode(x) for x in proc.stdout.split(b"\0") if x}


@pytest.mark.filterwarnings("ignore::FutureWarning")  # pathspec's regex for `[[…`: "possible nested set"
@FUZZ
@given(pattern=st.lists(st.sampled_from(PATTERN_FRAGMENTS), min_size=1, max_size=5).map("".join), names=ASCII_NAMES)
def test_block_patterns_hide_whatever_git_would_match(oracle_repo, pattern, names):
    names = [n for n in dict.fromkeys(names) if n not in (".", "..")]
    if pattern.startswith("!") or not pattern.strip():
        return  # a negation alone hides nothing, in git too
    git = _git_matches(oracle_repo, pattern, names)
    for mode, extra in (("fnmatch", []), ("pathspec", [Pattern("/zz-anchor/")])):
        try:
            patterns = PatternSet([Pattern(pattern), *extra])
        except ConfigError:
            continue  # uncompilable: the launch refuses with its line, never leaks
        missed = [n for n in git if (m := patterns.match(n, False)) is None or m.text != pattern]
        assert not missed, f"{mode}: git's {pattern!r} matches {missed!r}, ai-sandbox's does not"


def test_a_trailing_space_is_ignored_as_git_does():
    assert PatternSet([Pattern("*.pem ")]).match("id.pem", False) is not None


def test_posix_character_classes_match_as_in_git():
    assert PatternSet([Pattern("[[:digit:]]*.key")]).match("1.key", False) is not None


# ---------------------------------------------------------------------------------------------------------
# Bugs found by this file, all fixed: their regression tests (also test_an_unknown_key_with_a_newline_is_one_line,
# test_a_trailing_space_is_ignored_as_git_does and test_posix_character_classes_match_as_in_git).


@pytest.mark.parametrize(
    "toml",
    [
        'block = ["foo\\\\"]\n',  # a trailing backslash escapes nothing
        'allow = ["x\\\\"]\n',
        'block = ["/a/", "b\\\\  "]\n',  # `b\` once the blanks are stripped
        'block = ["!"]\n',  # a negation of nothing
        'block = ["[]-[^a]"]\n',  # re.error: bad character range
        'block = ["[]- [a]", "/a/"]\n',  # fine alone (fnmatch), re.error through pathspec
    ],
)
def test_a_pattern_that_cannot_compile_is_a_config_error(project, toml):
    (project / ".ai-sandbox.toml").write_text(toml)
    with pytest.raises(ConfigError) as exc:
        prepare(_request(project))
    assert re.search(r"\.ai-sandbox\.toml:1\b", exc.value.message), exc.value.message  # file and line


def test_a_block_entry_starting_with_hash_is_never_silently_dropped(project):
    (project / "#notes").write_text("n\n")
    _git(project, "add", ".")
    _git(project, "commit", "-qm", "notes")
    # alone (fnmatch) `#notes` hides the file; next to an anchored pattern (pathspec) it is a comment.
    # Either outcome is fine but the same for both: hidden, or refused with its line.
    for toml in ('block = ["#notes"]\n', 'block = ["#notes", "/other/"]\n'):
        (project / ".ai-sandbox.toml").write_text(toml)
        try:
            hidden = prepare(_request(project)).policy.hidden(str(project / "#notes"))
        except ConfigError as e:
            assert re.search(r"\.ai-sandbox\.toml:1\b", e.message), e.message
            continue
        assert hidden is not None, toml


@pytest.mark.parametrize(
    "toml, expected",
    [
        ('block = [\n  "ab",\n  "b",\n]\n', [2, 3]),
        ('block = [\n  "x",\n  "",\n]\n', None),  # the empty entry is on line 3
        ('block = [\n  "secrets/",\n  "s",\n]\n', [2, 3]),
    ],
)
def test_entry_lines_point_at_the_entry(scratch, toml, expected):
    path, load = _load_project(scratch, toml.encode())
    if expected is None:
        with pytest.raises(ConfigError) as exc:
            load()
        assert exc.value.message.startswith(f"{path}:3:"), exc.value.message
        return
    assert [int(str(p.source.line)) for p in load().block] == expected


def test_legacy_brace_expansion_is_not_silently_a_literal():
    # bash reads secret.{pem,key} as two paths; a literal "secret.{pem,key}" blocks neither
    try:
        cfg = legacy.parse("AI_SANDBOX_BLOCK_PATHS=(secret.{pem,key})\n", "/p/.ai-sandbox")
    except ConfigError as e:
        assert e.message.startswith("/p/.ai-sandbox:1:")
        return
    assert sorted(p for p, _ in cfg.block) == ["secret.key", "secret.pem"]


class _Lines(list):
    """The lines of a config file, counting how many times one is looked at."""

    looked = 0

    def __getitem__(self, i):
        _Lines.looked += 1
        return super().__getitem__(i)


class _Text(str):
    def splitlines(self, keepends=False):
        return _Lines(super().splitlines(keepends))


def test_escaped_entries_load_in_linear_time(scratch):
    """`\\u00e9` in the file is "é" in the value: neither needle of config.strings() finds it, and each entry
    once scanned every following line (9,000 such entries: ~15 s). The work is counted, not timed: each entry
    looks at a bounded number of lines (config.strings searches 200 ahead), so 4,000 entries look at fewer than
    a million, where a scan of every following line would be eight million."""
    n = 4_000
    text = "block = [\n" + "".join(f'  "\\u00e9{i}/x",\n' for i in range(n)) + "]\n"
    _, load = _load_project(scratch, text.encode())
    cfg = load()
    assert [p.text for p in cfg.block] == [f"é{i}/x" for i in range(n)]
    import tomllib

    _Lines.looked = 0
    found = config.strings(tomllib.loads(text), "block", ".ai-sandbox.toml", _Text(text))
    assert [v for v, _ in found] == [f"é{i}/x" for i in range(n)]
    assert 0 < _Lines.looked <= 200 * n + n + 2, f"{_Lines.looked:,} lines looked at for {n:,} entries"


def test_an_unknown_key_with_a_newline_is_one_line(scratch):
    path, load = _load_user(scratch, b'"a\\nb" = 1\n')
    with pytest.raises(ConfigError) as exc:
        load()
    assert exc.value.message.startswith(f"{path}:")
    assert "\n" not in str(exc.value)


def test_an_unknown_table_is_reported_on_its_line(scratch):
    path, load = _load_user(scratch, b"# my config\n\n[blok]\nx = 1\n")
    with pytest.raises(ConfigError) as exc:
        load()
    assert exc.value.message.startswith(f"{path}:3: unknown key"), exc.value.message


def test_typed_document_property_example_of_line_numbers(scratch):
    """A regression anchor for the typed-document property: a realistic multi-line file cites exact lines."""
    doc = {"block": ["*.pem", "secrets/", "~/.aws"], "allow": ["build/", ".cache/"]}
    data = tomli_w.dumps(doc).encode()
    _, load = _load_project(scratch, data)
    cfg = load()
    lines = data.decode().splitlines()
    for pat in [*cfg.block, *cfg.allow]:
        line = pat.source.line
        assert _toml_literal(pat.text) in lines[line - 1], (pat, lines)


@pytest.mark.parametrize("entry", ["/deploy**/keys", "***/*.cfg", "!**.pem"])
def test_stars_glued_to_a_name_are_refused(scratch, entry):
    """git's wildmatch lets `deploy**` cross slashes, pathspec does not: `/deploy**/keys` hid nothing git ignores
    (forty-third red team). A whole-component `**` is taken, and so are escaped stars and stars in a class."""
    path, load = _load_project(scratch, f'block = ["{entry}"]\n'.encode())
    with pytest.raises(ConfigError) as exc:
        load()
    assert exc.value.message.startswith(f"{path}:1:") and "whole path component" in exc.value.message
    ok = _load_project(scratch, b'block = ["**/keys", "a/**/b", "c/**", "\\\\**x", "[**]y", "d/** "]\n')[1]()
    assert [p.text for p in ok.block] == ["**/keys", "a/**/b", "c/**", "\\**x", "[**]y", "d/** "]
