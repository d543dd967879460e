# Two commands on a fresh clone: `make demo` and `make test`.
PYTHON ?= python3.11
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test test-fast lint format bench clean

# The inner loop, under a minute: the chunker, the schemas of its rows, the command line.
FAST_TESTS := $(addprefix tests/test_,$(addsuffix .py,blocks boundaries cleanup sections \
	section_packing packing overlap syntax sizer heading_properties properties chunk_rows \
	words cli_help cli_startup search_output))

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
	@echo "firechunk is in $(BIN)/, not on your PATH: run . $(BIN)/activate first (or type $(BIN)/firechunk)"

test: $(STAMP)
	$(BIN)/python -m pytest

test-fast: $(STAMP)
	PROPERTY_EXAMPLES=15 $(BIN)/python -m pytest -q $(FAST_TESTS)

lint: $(STAMP)
	$(BIN)/ruff check . && $(BIN)/ruff format --check .

format: $(STAMP)
	$(BIN)/ruff format . && $(BIN)/ruff check --fix .

bench: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[dev,bench]'
	$(BIN)/python bench/chunk_speed.py

clean:
	rm -rf $(VENV) data/demo
