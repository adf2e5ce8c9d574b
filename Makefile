# Two entry points for a newcomer: `make run` and `make test`. Both create .venv and install
# what they need the first time (and again whenever pyproject.toml or a lock file changes),
# from the lock files in requirements/, so a fresh clone gets exactly what CI tested.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
ARGS   ?=
# pytest's workers for `make test`: three a core, since many tests wait on a process, a
# server or a socket rather than compute (on 2 cores, quiet, December 2026: pytest 125-126 s
# with 6 workers, 137 s with 4, 141 s with 8); `make check`'s tests compute, two a core
# (25-27 s with 4 workers, 31 s with 6)
NPROC := $(shell nproc 2>/dev/null || echo 1)
PYTEST_WORKERS ?= $(shell echo $$(( $(NPROC) * 3 )))
CHECK_WORKERS ?= $(shell echo $$(( $(NPROC) * 2 )))
# `make test ARGS=-rs` is for this make's own recipes: kept out of the environment of the
# programs they run (the test suite's own `make run` would pass -rs to the bot)
unexport ARGS

# Run a step quietly: one line says what it does; its output is shown only if it fails (then
# "failed:" and the step, or what the second argument calls it).
quiet = out=$$( { $(1) ; } 2>&1) || { printf '%s\n' "$$out"; echo "failed: $(or $(2),$(1))"; exit 1; }

# Install a lock file's exact versions, then the bot itself (editable, without dependencies).
# With uv, pinned in requirements/tools.lock (what `make lock` resolves with too): a fresh
# .venv from dev.lock took 38 s against pip's 81 s, back to back on a busy 2-core machine;
# where uv cannot be installed or fails, pip does the same from the same lock. The venv is
# made without pip (ensurepip took 2.5 s of a fresh clone's 20 s of set-up): uv goes in with
# $(PYTHON)'s own pip (`pip --python`); where that fails, and for the pip route, the venv
# gets its own first. (Inside the venv: `.venv/bin/uv pip install ...`.)
PIP := $(BIN)/python -m pip install --disable-pip-version-check
UV  := $(BIN)/uv pip install --python $(BIN)/python --compile-bytecode
OWN_PIP := { $(BIN)/python -m pip --version >/dev/null 2>&1 || $(BIN)/python -m ensurepip ; }
TOOLS := -q --disable-pip-version-check -r requirements/tools.lock
uv_in = { $(PYTHON) -m pip --python $(BIN)/python install $(TOOLS) \
	|| { $(OWN_PIP) && $(BIN)/python -m pip install $(TOOLS) ; } ; }
install = { $(uv_in) && $(UV) -r $(1) && $(UV) --no-deps -e . ; } \
	|| { echo "uv could not install: pip instead"; $(OWN_PIP) && $(PIP) -r $(1) \
	&& $(PIP) --no-deps -e . ; }

.PHONY: run site test check browser-deps lint bench lock clean

$(BIN)/python:
	@echo "• creating $(VENV)"
	@$(call quiet,$(PYTHON) -m venv --without-pip $(VENV))

$(VENV)/.run-deps: pyproject.toml requirements/run.lock requirements/tools.lock | $(BIN)/python
	@echo "• installing the bot (requirements/run.lock)"
	@$(call quiet,$(call install,requirements/run.lock),install requirements/run.lock)
	@touch $@
	@echo "• the digest-bot command is $(BIN)/digest-bot (or run: source $(BIN)/activate)"

$(VENV)/.dev-deps: pyproject.toml requirements/dev.lock requirements/tools.lock | $(BIN)/python
	@echo "• installing the bot and its test tools (requirements/dev.lock)"
	@$(call quiet,$(call install,requirements/dev.lock),install requirements/dev.lock)
	@touch $@ $(VENV)/.run-deps

## run: the bot on embedded defaults (console platform when no tokens are set)
run: $(VENV)/.run-deps
	$(BIN)/digest-bot run $(ARGS)

## site: the web archive of the archive folder, served live at http://$(SITE_LISTEN)/
SITE_LISTEN ?= 127.0.0.1:8080
site: $(VENV)/.run-deps
	$(BIN)/digest-bot site serve --listen $(SITE_LISTEN) $(ARGS)

## test: lint, type-check and the whole test suite (mypy runs beside the tests, on the CPU
## they leave idle while they wait on processes and servers; its report follows theirs)
test: browser-deps lint
	@$(BIN)/mypy >$(VENV)/.mypy.out 2>&1 & typing=$$!; \
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) --dist loadgroup $(ARGS); tests=$$?; \
	wait $$typing; typed=$$?; echo "• mypy:"; cat $(VENV)/.mypy.out; \
	[ $$typed = 0 ] || exit $$typed; exit $$tests

## check: the fast inner loop: ruff, then the tests not marked slow (none starts a real bot
## process, a PostgreSQL server or a browser, or takes over 0.25 s), property tests on a tenth
## of their examples (tests/quick.py); `make test` runs them all, in full
check: $(VENV)/.dev-deps
	$(BIN)/ruff check .
	TESTS_QUICK=1 $(BIN)/python -m pytest -n $(CHECK_WORKERS) --dist loadgroup -m "not slow" $(ARGS)

## browser-deps: Chromium and a CJK font for the web archive's browser tests (tests/site), as
## .ci/run installs them: apt-get as root or with sudo; otherwise the command to run, first
BROWSER_PKGS := chromium fonts-wqy-microhei
browser-deps:
	@if command -v chromium >/dev/null 2>&1 \
		&& fc-list 2>/dev/null | grep -qi "wenquanyi\|noto sans cjk"; then :; \
	elif [ "$$(id -u)" = 0 ] || sudo -n true 2>/dev/null; then \
		sudo=""; [ "$$(id -u)" = 0 ] || sudo="sudo"; \
		echo "• installing Chromium and a CJK font for the browser tests" \
			"($$sudo apt-get install $(BROWSER_PKGS))"; \
		{ $$sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$sudo apt-get install \
			-y -qq --no-install-recommends $(BROWSER_PKGS) >/dev/null; } \
		|| echo "failed: apt-get install $(BROWSER_PKGS); the browser tests (tests/site) will fail"; \
	else \
		echo "• the browser tests (tests/site) need Chromium and a CJK font; install them with:"; \
		echo "    sudo apt-get install -y --no-install-recommends $(BROWSER_PKGS)"; \
		echo "  (without them those tests fail; the rest of the suite runs)"; \
	fi

## lint: ruff's checks and its formatting, over everything (tests and benchmarks too)
lint: $(VENV)/.dev-deps
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

## bench: every benchmark script, printing its figures
bench: $(VENV)/.dev-deps
	@for b in benchmarks/*.py; do m=$$(basename $$b .py); echo "== $$m"; \
		$(BIN)/python -m benchmarks.$$m || exit 1; done

## lock: re-resolve requirements/*.lock from pyproject.toml (after changing a dependency)
lock: $(BIN)/python
	@$(call quiet,$(PIP) -r requirements/tools.lock)
	$(BIN)/uv pip compile pyproject.toml --python-version 3.11 -q --no-header \
		--extra telegram --extra discord --extra http --extra site --extra email --extra feishu \
		--extra dingtalk --extra dashboard -o requirements/run.lock
	$(BIN)/uv pip compile pyproject.toml --python-version 3.11 -q --no-header \
		--extra telegram --extra discord --extra postgres --extra http --extra site --extra email \
		--extra feishu --extra dingtalk --extra dashboard --extra dev \
		-o requirements/dev.lock

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis *.egg-info
