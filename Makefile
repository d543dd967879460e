# Two commands on a fresh clone: `make demo` and `make test`.
# Any Python from 3.11 to 3.13 (make PYTHON=python3.13); the versions come from requirements.lock.
PYTHON ?= python3.11
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
DEMO   ?= data/demo

.PHONY: demo test test-fast lint format bench wheel-check lock clean

$(STAMP): pyproject.toml requirements.lock
	@command -v $(PYTHON) >/dev/null || { echo "Python 3.11-3.13 is required ($(PYTHON) not found)"; exit 1; }
	@$(PYTHON) -c 'import sys; sys.exit(not (3, 11) <= sys.version_info[:2] <= (3, 13))' \
		|| { echo "Python 3.11-3.13 is required ($(PYTHON) is $$($(PYTHON) -V 2>&1))"; exit 1; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c requirements.lock -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/firechunk rebuild --replay data/sample/crawl.json --data-dir $(DEMO) --load
	$(BIN)/firechunk search "what happens to a message that keeps failing" --data-dir $(DEMO) -k 3
	@echo "outputs: $(DEMO)/latest/ (chunks.json, chunks.parquet, pages.parquet, report.json, changes.json, validation/)"
	@echo "database: $(DEMO)/postgres/ (firechunk search \"...\" --data-dir $(DEMO))"
	@echo "firechunk is in $(BIN)/, not on your PATH: run . $(BIN)/activate first (or type $(BIN)/firechunk)"

test: $(STAMP)
	$(BIN)/python -m pytest

# The inner loop, under a minute: every test not marked slow. The marks say where a test's
# cost comes from (a Prefect server, the embedded Postgres, the real embedder, processes of
# the command, whole validated runs, the corpus); tests/conftest.py sets them.
test-fast: $(STAMP)
	PROPERTY_EXAMPLES=15 $(BIN)/python -m pytest -q -m "not slow"

# ruff, then mypy over what [tool.mypy] in pyproject.toml names (the package, tests, bench).
lint: $(STAMP)
	$(BIN)/ruff check . && $(BIN)/ruff format --check . && $(BIN)/mypy

format: $(STAMP)
	$(BIN)/ruff format . && $(BIN)/ruff check --fix .

bench: $(STAMP)
	$(BIN)/python -m pip install --quiet -c requirements.lock -e '.[dev,bench]'
	$(BIN)/python bench/chunk_speed.py

# The wheel in a fresh venv, run from outside the checkout (CI): without extras (its size,
# the chunker, one line for a pipeline command), then with the pipeline extra.
wheel-check: $(STAMP)
	PYTHON=$(PYTHON) BUILDER=$(BIN)/python bash scripts/wheel_check.sh

# requirements.lock afresh: every range resolved to what the registry has now, in a new venv.
lock:
	rm -rf .lock-venv
	$(PYTHON) -m venv .lock-venv
	.lock-venv/bin/python -m pip install --quiet --upgrade pip
	.lock-venv/bin/python -m pip install --quiet -e '.[dev,bench]'
	{ sed -n '/^#/p' requirements.lock; .lock-venv/bin/python -m pip freeze --exclude-editable; } \
		> requirements.lock.new
	mv requirements.lock.new requirements.lock
	rm -rf .lock-venv

clean:
	rm -rf $(VENV) data/demo
