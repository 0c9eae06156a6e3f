# The two commands of the README: `make install` (ai-sandbox on your PATH) and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# Run apt-get directly as root, through sudo otherwise.
SUDO   := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: install test lint unit integration system-deps bench clean

install:
	@command -v pipx >/dev/null 2>&1 && pipx install --force . || \
	  { $(PYTHON) -m pip install --user . && echo "installed with pip --user; make sure ~/.local/bin is on PATH"; }
	@command -v firejail >/dev/null 2>&1 || echo "note: firejail is not installed; ai-sandbox refuses to run without it (sudo apt-get install firejail)"

$(BIN)/pytest: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	@touch $@

# The real sandbox tools the tests need (podman, runc and a static busybox for the container backend),
# the shells they start agents from, and npm for the real agent CLIs (tests/agents); installed when
# missing (Debian/Ubuntu).
system-deps:
	@missing=""; \
	for tool in firejail git git-crypt setpriv zsh fish podman runc; do command -v $$tool >/dev/null 2>&1 || missing="$$missing $$tool"; done; \
	dpkg -s busybox-static >/dev/null 2>&1 || missing="$$missing busybox-static"; \
	command -v mkfs.ext4 >/dev/null 2>&1 || missing="$$missing e2fsprogs"; \
	missing=$$(echo "$$missing" | sed 's/setpriv/util-linux/'); \
	$(PYTHON) -c 'import ensurepip, venv' 2>/dev/null || missing="$$missing python3-venv"; \
	command -v npm >/dev/null 2>&1 || missing="$$missing nodejs npm"; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing >/dev/null; \
	fi

lint: $(BIN)/pytest
	$(BIN)/ruff check src tests
	$(BIN)/ruff format --check src tests

test: system-deps $(BIN)/pytest lint
	$(BIN)/pytest -q

unit: $(BIN)/pytest
	$(BIN)/pytest -q tests/unit

# Launch time against the bare backend on three cached fixture repositories (bench/bench.py says how);
# `make bench BENCH_ARGS=--quick` for the two small ones.
bench: $(BIN)/pytest system-deps
	$(BIN)/python bench/bench.py $(BENCH_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
