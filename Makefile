# The two commands of the README: `make install` (ai-sandbox on your PATH) and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# Run apt-get directly as root, through sudo otherwise.
SUDO   := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: install uninstall test lint unit integration system-deps bench fuzz docs clean

# ai-sandbox in a venv of its own (pipx, uv tool, or ~/.local/share/ai-sandbox/venv) linked from ~/.local/bin,
# and firejail when missing; scripts/install.sh says why. INSTALL_WITH=pipx|uv|venv picks the way.
install:
	@PYTHON=$(PYTHON) sh scripts/install.sh install

uninstall:
	@PYTHON=$(PYTHON) sh scripts/install.sh uninstall

$(BIN)/pytest: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	@touch $@

# The real sandbox tools the tests need (firejail, bubblewrap; podman and what it runs with, rootless too,
# and a static busybox for the container backend, whose test containers have no network), the shells they
# start agents from, npm for the real agent CLIs (tests/agents) and tmux (a server of the user's that the agent
# must not drive: tests/security/test_network.py); installed when missing (Debian/Ubuntu), without recommends:
# each command here is one the suite runs. Recommends would add gcc, an X11 stack and ~700 packages (1.3 GB) on
# Debian 13.
# command:package, for each command the suite runs
TOOLS := firejail:firejail bwrap:bubblewrap git:git git-crypt:git-crypt setpriv:util-linux zsh:zsh fish:fish \
	podman:podman runc:runc newuidmap:uidmap catatonit:catatonit mkfs.ext4:e2fsprogs node:nodejs npm:npm tmux:tmux
system-deps:
	@PATH="$$PATH:/usr/sbin:/sbin:/usr/libexec/podman"; missing=""; \
	for pair in $(TOOLS); do command -v $${pair%%:*} >/dev/null 2>&1 || missing="$$missing $${pair#*:}"; done; \
	dpkg -s busybox-static >/dev/null 2>&1 || missing="$$missing busybox-static"; \
	$(PYTHON) -c 'import ensurepip, venv' 2>/dev/null || missing="$$missing python3-venv"; \
	if [ -n "$$missing" ]; then \
	  if [ -n "$(SUDO)" ] && ! command -v sudo >/dev/null; then \
	    echo "make test needs:$$missing; install them as root (apt-get install --no-install-recommends$$missing), or install sudo" >&2; exit 1; \
	  fi; \
	  echo "installing:$$missing (apt-get install --no-install-recommends$(if $(SUDO), through sudo,))"; \
	  log=$$(mktemp); \
	  if ! { $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
	         $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; } >"$$log" 2>&1; then \
	    cat "$$log" >&2; rm -f "$$log"; exit 1; \
	  fi; rm -f "$$log"; \
	fi

lint: $(BIN)/pytest
	$(BIN)/ruff check src tests bench scripts
	$(BIN)/ruff format --check src tests bench scripts
	$(BIN)/mypy

test: system-deps $(BIN)/pytest lint
	$(BIN)/pytest -q -rfEs

unit: $(BIN)/pytest
	$(BIN)/pytest -q tests/unit

# The generated parts of README.md and docs/*.md, between their markers: the config reference, the notices
# table, and sample outputs from real runs on a demo project (scripts/docs.py says how). No root, no sandbox;
# tests/unit/test_docs.py fails while one is stale.
docs: $(BIN)/pytest
	$(BIN)/python scripts/docs.py

# Launch time against the bare backend on four cached fixture repositories (bench/bench.py says how);
# `make bench BENCH_ARGS=--quick` for all but the monorepo, BENCH_ARGS="--quick --write-docs docs/performance.md"
# to put the Markdown between that doc's <!-- bench:begin --> and <!-- bench:end --> lines as well.
BENCH_ARGS ?=
bench: $(BIN)/pytest system-deps
	$(BIN)/python bench/bench.py $(BENCH_ARGS)

# The model of sessions (tests/security/test_model.py) run longer than in `make test`: random sequences for
# FUZZ_SECONDS in all (split among the backends and identities), then how many sequences and launches it played.
FUZZ_SECONDS ?= 1800
fuzz: system-deps $(BIN)/pytest
	AI_SANDBOX_FUZZ_SECONDS=$(FUZZ_SECONDS) $(BIN)/pytest -q -s tests/security/test_model.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache /tmp/ai-sandbox-tests-$$(id -u)
