# One-command entry points. Everything installs into ./.venv from PyPI, pinned by constraints.txt.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# Test-only npm tools (Azurite, the Azure Storage emulator), pinned by tools/node/package-lock.json,
# installed into the project (never globally).
NODE_TOOLS := tools/node
# Test-only JVM jars (delta-spark, Iceberg's Spark runtime, S3A), pinned by tools/jvm/pom.xml with one
# Maven profile per Spark line, copied by mvn into tools/jvm/jars/spark-<line>/ (Spark takes them from
# there: nothing is downloaded while tests run). SPARK_LINE / SPARK4_LINE: the pyspark lines of
# constraints.txt / constraints-spark4.txt.
JVM_TOOLS := tools/jvm
SPARK_LINE := 3.5
SPARK4_LINE := 4.1
MVN ?= mvn
# Bench-only TPC-H data generator: duckdb 1.5.5 with its dbgen extension (duckdb-extension-tpch,
# which has no wheel for the project's duckdb), pinned by tools/tpch/requirements.txt in a venv of
# its own (integration/bench/tpch_dbgen.py runs it in a subprocess to write the tables as Parquet).
TPCH_TOOLS := tools/tpch

.PHONY: setup demo test test-spark4 lint bench clean

setup: $(VENV)/.installed $(NODE_TOOLS)/node_modules/.installed $(JVM_TOOLS)/jars/spark-$(SPARK_LINE)/.fetched

$(NODE_TOOLS)/node_modules/.installed: $(NODE_TOOLS)/package.json $(NODE_TOOLS)/package-lock.json
	cd $(NODE_TOOLS) && npm ci --no-audit --no-fund --loglevel=error
	touch $@

$(JVM_TOOLS)/jars/spark-%/.fetched: $(JVM_TOOLS)/pom.xml
	rm -rf $(@D)
	$(MVN) -B -q -Dstyle.color=never -f $(JVM_TOOLS)/pom.xml -P spark-$* dependency:copy-dependencies
	touch $@

$(TPCH_TOOLS)/.venv/.installed: $(TPCH_TOOLS)/requirements.txt
	rm -rf $(@D)
	$(PYTHON) -m venv $(@D)
	$(@D)/bin/python -m pip install --quiet --upgrade pip
	$(@D)/bin/python -m pip install --quiet -r $(TPCH_TOOLS)/requirements.txt
	touch $@

$(VENV)/.installed: pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[all,dev]'
	touch $@

demo: setup
	$(BIN)/lakehouse-index demo

# Two workers (pytest-xdist): the suite's tests are independent, and CI machines have two cores.
TEST_WORKERS ?= 2

test: setup
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS)

# pyspark 4.x in its own venv, with the jars of its line: the Spark tests of the code that differs
# between Spark lines (the lakehouse_index data source, pyspark >= 4.1; Spark reads and jobs; the
# session with delta-spark and the Iceberg runtime; S3A). `make test-spark4 SPARK4_TESTS=tests`
# runs every Spark test on 4.x.
VENV4 ?= .venv-spark4
BIN4 := $(VENV4)/bin
SPARK4_TESTS ?= tests/spark_source tests/core/test_spark_read.py tests/workflows/test_spark_append.py \
	tests/connectors/iceberg/test_iceberg_spark_tables.py tests/io/test_spark_s3a.py \
	tests/workflows/test_merge_on_read_writes.py tests/kinds/test_covering_buckets.py tests/docs/test_docs.py \
	tests/connectors/delta/test_delta_spark_oracle.py tests/workflows/test_writes_delta_spark_oracle.py \
	tests/workflows/test_format_spark_writes.py \
	tests/expressions/test_spark_differential.py tests/api/test_bucketed_joins.py \
	tests/workflows/test_iceberg_spark_writes.py tests/kinds/test_multicolumn_spark.py

$(VENV4)/.installed: pyproject.toml constraints-spark4.txt
	rm -rf $(VENV4)
	$(PYTHON) -m venv $(VENV4)
	$(BIN4)/python -m pip install --quiet --upgrade pip
	$(BIN4)/python -m pip install --quiet -c constraints-spark4.txt -e '.[all,dev]'
	touch $@

test-spark4: $(VENV4)/.installed $(NODE_TOOLS)/node_modules/.installed $(JVM_TOOLS)/jars/spark-$(SPARK4_LINE)/.fetched
	$(BIN4)/python -m pytest -q -n $(TEST_WORKERS) -m spark $(SPARK4_TESTS)

lint: setup
	$(BIN)/ruff check lakehouse_index connectors tests integration
	$(BIN)/mypy

bench: setup $(TPCH_TOOLS)/.venv/.installed
	$(BIN)/python -m integration.bench.run_all

clean:
	rm -rf $(VENV) $(VENV4) $(NODE_TOOLS)/node_modules $(JVM_TOOLS)/jars $(TPCH_TOOLS)/.venv .pytest_cache .mypy_cache .ruff_cache .hypothesis
