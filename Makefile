# Two entry points for a newcomer: `make run` and `make test`. Both create .venv and install
# what they need the first time (and again whenever pyproject.toml changes).
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
ARGS   ?=

.PHONY: run test lint bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(VENV)/.run-deps: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[telegram,discord]'
	touch $@

$(VENV)/.dev-deps: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[telegram,discord,postgres,dev]'
	touch $@ $(VENV)/.run-deps

## run: the bot on embedded defaults (console platform when no tokens are set)
run: $(VENV)/.run-deps
	$(BIN)/digest-bot run $(ARGS)

## test: lint, type-check and the whole test suite
test: $(VENV)/.dev-deps
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/python -m pytest $(ARGS)

lint: $(VENV)/.dev-deps
	$(BIN)/ruff check .
	$(BIN)/ruff format --check digest_core bots

## bench: every benchmark script, printing its figures
bench: $(VENV)/.dev-deps
	@for b in benchmarks/*.py; do m=$$(basename $$b .py); echo "== $$m"; \
		$(BIN)/python -m benchmarks.$$m || exit 1; done

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis *.egg-info
