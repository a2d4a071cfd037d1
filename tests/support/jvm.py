"""The JVM jars of the test runs: the formats' Spark runtimes and S3A, fetched by the Makefile.

``tools/jvm/pom.xml`` pins them, one Maven profile per Spark line (``spark-3.5``,
``spark-4.1``); ``make setup`` (and ``make test-spark4``) copy a line's jars into
``tools/jvm/jars/spark-<line>/``. The test run hands that folder to every Spark session it
starts through ``$LAKEHOUSE_INDEX_SPARK_JARS`` (``lakehouse_index.spark.JARS_ENV``), read by
the session factory, also in subprocesses: nothing is downloaded while tests run.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from tests.support.paths import REPO_ROOT

__all__ = ["TOOLS_JVM", "JarsMissing", "fetch_command", "jars_dir", "spark_line", "fetched_jars"]

TOOLS_JVM = REPO_ROOT / "tools" / "jvm"


class JarsMissing(RuntimeError):
    """The installed pyspark's line has no fetched jars."""


def spark_line() -> str | None:
    """The installed pyspark's ``major.minor`` (from its metadata: pyspark is not imported)."""
    try:
        return ".".join(version("pyspark").split(".")[:2])
    except PackageNotFoundError:
        return None


def jars_dir(line: str) -> Path:
    """Where the jars of Spark line ``line`` are fetched to."""
    return TOOLS_JVM / "jars" / f"spark-{line}"


def fetch_command(line: str) -> str:
    """The command that fetches them (what the Makefile runs)."""
    return f"mvn -B -q -f tools/jvm/pom.xml -P spark-{line} dependency:copy-dependencies"


def fetched_jars() -> Path:
    """The fetched jars of the installed pyspark's line; JarsMissing says how to fetch them."""
    line = spark_line()
    if line is None:
        raise JarsMissing("pyspark is not installed")
    folder = jars_dir(line)
    if not any(folder.glob("*.jar")):
        raise JarsMissing(f"no jars for Spark {line} in {folder}: run `make setup` ({fetch_command(line)})")
    return folder
