# One-command entry points. Everything installs into ./.venv from PyPI, pinned by constraints.txt.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: setup demo test lint bench clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[all,dev,spark-iceberg]'
	touch $@

demo: setup
	$(BIN)/lakehouse-index demo

test: setup
	$(BIN)/python -m pytest -q

lint: setup
	$(BIN)/ruff check lakehouse_index connectors tests integration
	$(BIN)/mypy

bench: setup
	$(BIN)/python -m integration.bench.run_all

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
