# One-command entry points. Everything installs into ./.venv from PyPI, pinned by constraints.txt.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# Test-only npm tools (Azurite, the Azure Storage emulator), pinned by tools/node/package-lock.json,
# installed into the project (never globally).
NODE_TOOLS := tools/node

.PHONY: setup demo test test-spark4 lint bench clean

setup: $(VENV)/.installed $(NODE_TOOLS)/node_modules/.installed

$(NODE_TOOLS)/node_modules/.installed: $(NODE_TOOLS)/package.json $(NODE_TOOLS)/package-lock.json
	cd $(NODE_TOOLS) && npm ci --no-audit --no-fund --loglevel=error
	touch $@

$(VENV)/.installed: pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[all,dev,spark-iceberg]'
	touch $@

demo: setup
	$(BIN)/lakehouse-index demo

# Two workers (pytest-xdist): the suite's tests are independent, and CI machines have two cores.
TEST_WORKERS ?= 2

test: setup
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS)

# pyspark 4.x in its own venv (the main one stays on 3.5: the Iceberg Spark jar is 3.5-only).
# Runs the Spark tests that need no Iceberg Spark jar, including the lakehouse_index data source's.
VENV4 ?= .venv-spark4
BIN4 := $(VENV4)/bin
SPARK4_TESTS ?= spark and not iceberg_spark

$(VENV4)/.installed: pyproject.toml constraints-spark4.txt
	rm -rf $(VENV4)
	$(PYTHON) -m venv $(VENV4)
	$(BIN4)/python -m pip install --quiet --upgrade pip
	$(BIN4)/python -m pip install --quiet -c constraints-spark4.txt -e '.[all,dev]'
	touch $@

test-spark4: $(VENV4)/.installed $(NODE_TOOLS)/node_modules/.installed
	$(BIN4)/python -m pytest -q -m '$(SPARK4_TESTS)'

lint: setup
	$(BIN)/ruff check lakehouse_index connectors tests integration
	$(BIN)/mypy

bench: setup
	$(BIN)/python -m integration.bench.run_all

clean:
	rm -rf $(VENV) $(VENV4) $(NODE_TOOLS)/node_modules .pytest_cache .mypy_cache .ruff_cache .hypothesis
