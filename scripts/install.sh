#!/bin/sh
# `make install` / `make uninstall`: ai-sandbox in a virtual environment of its own, a link in ~/.local/bin.
#
# Why not `pip install --user`: Debian 12 and Ubuntu 23.04+ refuse it (PEP 668, externally-managed-environment).
# So: pipx when present, else `uv tool`, else a venv under ~/.local/share/ai-sandbox made with the system
# Python (python3-venv is installed when missing). firejail, the backend ai-sandbox prefers, is
# installed when missing, without the X stack its recommends pull in. Re-running upgrades in place.
#
# Usage: install.sh install|uninstall   (from the checkout; PYTHON and INSTALL_WITH=pipx|uv|venv override)
set -eu

SRC=$(cd "$(dirname "$0")/.." && pwd)
PYTHON=${PYTHON:-python3}
DATA=${XDG_DATA_HOME:-$HOME/.local/share}/ai-sandbox
VENV=$DATA/venv
BIN=$HOME/.local/bin
LINK=$BIN/ai-sandbox

say() { printf '%s\n' "$*"; }
short() { case $1 in "$HOME"/*) printf '~%s' "${1#"$HOME"}" ;; *) printf '%s' "$1" ;; esac; }
die() { printf 'make install: %s\n' "$*" >&2; exit 1; }

# Root runs apt-get itself; anyone else through sudo, which may ask for a password.
as_root() {
    if [ "$(id -u)" = 0 ]; then
        "$@"
    elif command -v sudo >/dev/null 2>&1; then
        sudo "$@"
    else
        die "needs root to run '$*', and sudo is not installed: run it as root, then rerun make install"
    fi
}

apt_install() {
    command -v apt-get >/dev/null 2>&1 || return 1
    sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo "
    say "installing $* with: ${sudo}apt-get install -y --no-install-recommends $*"
    # apt's and debconf's chatter ("delaying package configuration, since apt-utils is not installed" on a
    # minimal Debian) is shown only when apt fails; sudo asks for a password on the terminal, not on stderr
    log=$(mktemp)
    if ! { as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
           as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@"; } >"$log" 2>&1; then
        cat "$log" >&2
        rm -f "$log"
        return 1
    fi
    rm -f "$log"
}

method() {
    case ${INSTALL_WITH:-} in
        pipx | uv | venv) say "$INSTALL_WITH" ;;
        "") if command -v pipx >/dev/null 2>&1; then say pipx
            elif command -v uv >/dev/null 2>&1; then say uv
            else say venv; fi ;;
        *) die "INSTALL_WITH=$INSTALL_WITH: use pipx, uv or venv" ;;
    esac
}

check_python() {
    command -v "$PYTHON" >/dev/null 2>&1 || die "no $PYTHON: install Python 3.11 or newer (sudo apt-get install python3)"
    "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
        || die "$PYTHON is Python $("$PYTHON" -c 'import platform; print(platform.python_version())'); ai-sandbox needs 3.11 or newer (PYTHON=python3.12 make install)"
}

MARK=$VENV/.made-by-ai-sandbox-make-install

# A link we made points into our venv; anything else at that path is the user's and stays.
our_link() { [ -L "$LINK" ] && [ "$(readlink "$LINK")" = "$VENV/bin/ai-sandbox" ]; }

# What may stand at the link's path before an install: nothing, or a link into an ai-sandbox venv (ours,
# pipx's .../venvs/ai-sandbox, uv's .../tools/ai-sandbox). pipx and uv would replace anything with --force.
check_link() {
    [ -e "$LINK" ] || [ -L "$LINK" ] || return 0
    if [ -L "$LINK" ]; then
        case $(readlink "$LINK") in */ai-sandbox/bin/ai-sandbox | "$VENV/bin/ai-sandbox") return 0 ;; esac
    fi
    die "$LINK exists and was not made by make install (an earlier pip install --user, or your own script?): move it away, then rerun"
}

# Our venv is a real directory (no link anywhere on the way from $DATA) holding our mark: anything else at
# that path is not ours to recreate or delete.
our_venv() { [ -d "$VENV" ] && [ ! -L "$DATA" ] && [ ! -L "$VENV" ] && [ -f "$MARK" ]; }

# A session inside the sandbox can write your home: what it wrote there would be installed by this run.
# Name what would make the install differ from this checkout's commits.
warn_unreviewed() {
    if command -v git >/dev/null 2>&1 && git -C "$SRC" rev-parse --git-dir >/dev/null 2>&1; then
        changed=$(git -C "$SRC" status --porcelain 2>/dev/null | head -5)
        flagged=$(git -C "$SRC" ls-files -v 2>/dev/null | grep -E '^([a-z]|S) ' | head -5)
        [ -z "$changed" ] || say "note: installing local changes of $(short "$SRC") (git status): $(echo $changed)"
        [ -z "$flagged" ] || say "note: files git is told not to look at (assume-unchanged or skip-worktree): $(echo $flagged)"
    fi
    for conf in "${XDG_CONFIG_HOME:-$HOME/.config}/pip/pip.conf" "$HOME/.pip/pip.conf" "$HOME/.pydistutils.cfg" \
        "${XDG_CONFIG_HOME:-$HOME/.config}/uv/uv.toml"; do
        [ ! -e "$conf" ] || say "note: $(short "$conf") applies to this install; an agent can write it: check it if in doubt"
    done
}

install_venv() {
    if ! "$PYTHON" -c 'import ensurepip, venv' >/dev/null 2>&1; then
        apt_install python3-venv || die "$PYTHON has no venv module: install your distribution's python3-venv package"
        "$PYTHON" -c 'import ensurepip, venv' >/dev/null 2>&1 \
            || die "$PYTHON still has no venv module: install python$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')-venv"
    fi
    [ ! -L "$DATA" ] && [ ! -L "$VENV" ] || die "$(short "$VENV") lies behind a symbolic link: not ours to use; move it away, then rerun"
    if [ -d "$VENV" ] && [ ! -f "$MARK" ]; then
        die "$(short "$VENV") exists and was not made by make install: move it away, then rerun"
    fi
    # A venv whose interpreter is gone (the system Python was upgraded) is made again.
    if [ -d "$VENV" ] && ! "$VENV/bin/python" -c '' >/dev/null 2>&1; then
        say "recreating $(short "$VENV"): its Python no longer runs"
        rm -rf "$VENV"
    fi
    if [ -d "$VENV" ]; then
        say "upgrading ai-sandbox in $(short "$VENV")"
    else
        say "installing ai-sandbox into a new venv, $(short "$VENV")"
        mkdir -p "$DATA" && "$PYTHON" -m venv "$VENV"
        : >"$MARK"
    fi
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade "$SRC"
    mkdir -p "$BIN"
    ln -sfn "$VENV/bin/ai-sandbox" "$LINK"
}

# The entry script the link leads to starts its Python isolated (-I). Without it Python searches PYTHONPATH
# before the standard library, and pip's entry script starts with `import re`: with PYTHONPATH naming a
# directory of a project (`src`), a `re.py` an agent put there ran in the next launch, outside the sandbox.
# -I also ignores PYTHONWARNINGS (which imports the modules it names), PYTHONHOME and the user site. The agent
# still gets the environment unchanged. pipx and uv write the script again at each install, so this runs each time.
isolate_entry() {
    entry=$(readlink -f "$LINK") || die "$LINK leads nowhere"
    first=$(head -n 1 "$entry")
    case $first in
        "#!/"*" -I") return 0 ;;
        "#!/"*" "* | "#!/bin/sh") die "$(short "$entry") does not start with a plain '#!python' line: ai-sandbox would read PYTHONPATH; install into a venv whose path has no spaces" ;;
        "#!/"*) ;;
        *) die "$(short "$entry") is not a Python entry script: ai-sandbox would read PYTHONPATH" ;;
    esac
    tmp=$entry.isolating
    { printf '%s -I\n' "$first" && tail -n +2 "$entry"; } >"$tmp" && chmod 755 "$tmp" && mv -f "$tmp" "$entry" \
        || die "could not rewrite $(short "$entry")"
}

do_install() {
    check_python
    check_link
    how=$(method)
    warn_unreviewed
    case $how in
        pipx) pipx install --force --python "$PYTHON" "$SRC" ;;
        # copies, not hard links to uv's cache: ~/.cache stays writable inside the sandbox, and a session could
        # change ai-sandbox's own code through the link (the launch refuses such a file)
        uv) uv tool install --force --reinstall --link-mode copy --python "$PYTHON" "$SRC" ;;
        venv) install_venv ;;
    esac
    [ -x "$LINK" ] || die "$how did not put ai-sandbox in $BIN"
    isolate_entry
    version=$("$LINK" --version) || die "$LINK does not run"

    if [ "$(uname -s)" = Linux ] && ! command -v firejail >/dev/null 2>&1; then
        say "firejail is not installed: ai-sandbox sandboxes with it (bubblewrap only where firejail does not work)"
        apt_install firejail || die "install firejail with your package manager (dnf install firejail, pacman -S firejail), then run ai-sandbox doctor"
        command -v firejail >/dev/null 2>&1 || die "firejail is still not on PATH after apt-get: install it, then run ai-sandbox doctor"
    fi

    say ""
    case $how in
        venv) say "$version installed: $(short "$LINK") -> $(short "$VENV") (a venv of $("$VENV/bin/python" -c 'import sys; print(sys._base_executable)'))" ;;
        *) say "$version installed with $how: $(short "$LINK")" ;;
    esac
    case ":$PATH:" in
        *":$BIN:"*) ;;
        *)
            say "$(short "$BIN") is not on your PATH. Add it for this shell:"
            say "    export PATH=\"\$HOME/.local/bin:\$PATH\""
            if grep -qs '\.local/bin' "$HOME/.profile"; then
                say "(your ~/.profile adds it at your next login)"
            else
                case ${SHELL:-} in
                    */zsh) rc="~/.zshrc" ;;
                    */fish) rc="" ; say "and for good: fish_add_path ~/.local/bin" ;;
                    *) rc="~/.bashrc" ;;
                esac
                [ -z "$rc" ] || say "and for good: echo 'export PATH=\"\$HOME/.local/bin:\$PATH\"' >> $rc"
            fi
            ;;
    esac
    say "Next, in a project of yours:"
    say "    ai-sandbox doctor && ai-sandbox claude"
}

do_uninstall() {
    removed=""
    if command -v pipx >/dev/null 2>&1 && pipx list --short 2>/dev/null | grep -q '^ai-sandbox '; then
        pipx uninstall ai-sandbox && removed="$removed pipx"
    fi
    if command -v uv >/dev/null 2>&1 && uv tool list 2>/dev/null | grep -q '^ai-sandbox '; then
        uv tool uninstall ai-sandbox && removed="$removed uv"
    fi
    if our_link; then rm -f "$LINK"; fi
    if our_venv; then
        rm -rf "$VENV" && removed="$removed $(short "$VENV")"
        rmdir "$DATA" 2>/dev/null || true
    elif [ -e "$VENV" ] || [ -L "$VENV" ]; then
        say "left alone: $(short "$VENV"), which make install did not make (or which lies behind a link)"
    fi
    if [ -z "$removed" ]; then
        say "ai-sandbox was not installed by make install (nothing in pipx, uv or $VENV)"
    else
        say "removed ai-sandbox:$removed"
    fi
    say "kept: your config (${XDG_CONFIG_HOME:-~/.config}/ai-sandbox), state (${XDG_STATE_HOME:-~/.local/state}/ai-sandbox) and cache (${XDG_CACHE_HOME:-~/.cache}/ai-sandbox); delete them by hand if you want them gone"
}

case ${1:-} in
    install) do_install ;;
    uninstall) do_uninstall ;;
    *) die "usage: $0 install|uninstall" ;;
esac
