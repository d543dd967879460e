# Two commands on a fresh clone: `make demo` and `make test`.
PYTHON ?= python3.11
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test lint format bench clean

$(STAMP): pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "Python 3.11 is required ($(PYTHON) not found)"; exit 1; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/firechunk rebuild --replay data/sample/crawl.json --data-dir data/demo --load
	$(BIN)/firechunk search "what happens to a message that keeps failing" --data-dir data/demo -k 3
	@echo "outputs: data/demo/latest/ (chunks.json, chunks.parquet, pages.parquet, report.json, changes.json, validation/)"
	@echo "database: data/demo/postgres/ (firechunk search \"...\" --data-dir data/demo)"

test: $(STAMP)
	$(BIN)/python -m pytest

lint: $(STAMP)
	$(BIN)/ruff format --check . && $(BIN)/ruff check .

format: $(STAMP)
	$(BIN)/ruff format . && $(BIN)/ruff check --fix .

bench: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[dev,bench]'
	$(BIN)/python bench/chunk_speed.py

clean:
	rm -rf $(VENV) data/demo
