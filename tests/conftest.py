"""Shared fixtures: one local Spark session for the whole run.

Every Spark session this test process (and any subprocess) starts carries the jars
``make setup`` fetched for the installed pyspark's line (``tests.support.jvm``): delta-spark,
Iceberg's Spark runtime and S3A. They are handed to the session factory through
``$LAKEHOUSE_INDEX_SPARK_JARS``, which also turns on the formats' SQL extensions: jars can
only be added when the JVM starts, and several test modules share one JVM.

The ``spark`` marker is true: a run that selects no ``spark`` test (``-m "not spark"``)
starts no JVM. ``SPARK_HOME`` then points at a trap whose ``bin/spark-submit`` records the
launch (with the running test, also from subprocesses) and fails; the test that launched
it errors, whatever the code under test made of the failed launch.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def pytest_configure(config: pytest.Config) -> None:
    from lakehouse_index.spark import JARS_ENV
    from tests.support.jvm import JarsMissing, fetched_jars

    # Without them, the tests that need a runtime fail saying how to fetch it (fetched_jars).
    with contextlib.suppress(JarsMissing):
        os.environ.setdefault(JARS_ENV, str(fetched_jars()))


#: Set while the JVM trap is armed: the file each trapped launch appends a line to.
JVM_TRAP_LOG = "LAKEHOUSE_INDEX_JVM_TRAP_LOG"

_SPARK_SUBMIT_TRAP = """#!/bin/sh
echo "pid $$ test ${PYTEST_CURRENT_TEST:-<none>}: spark-submit $*" >> "$LAKEHOUSE_INDEX_JVM_TRAP_LOG"
echo "lakehouse-index tests: a JVM was launched in a run that selects no 'spark' test" \
     "(${PYTEST_CURRENT_TEST:-outside a test}): mark the test @pytest.mark.spark" >&2
exit 97
"""

#: The trap's folder and the SPARK_HOME it replaced, when this process armed it.
_armed: list[tuple[Path, str | None]] = []


def pytest_collection_finish(session: pytest.Session) -> None:
    """Arm the JVM trap when no selected test is marked ``spark``."""
    if session.config.option.collectonly or not session.items:
        return
    inherited = os.environ.pop(JVM_TRAP_LOG, None)  # a parent run's trap (a test running pytest)
    if inherited and os.environ.get("SPARK_HOME") == str(Path(inherited).parent):
        del os.environ["SPARK_HOME"]
    if any(item.get_closest_marker("spark") for item in session.items):
        return
    home = Path(tempfile.mkdtemp(prefix="lakehouse-index-no-jvm-"))
    submit = home / "bin" / "spark-submit"
    submit.parent.mkdir()
    submit.write_text(_SPARK_SUBMIT_TRAP)
    submit.chmod(submit.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    log = home / "launches.log"
    log.touch()
    _armed.append((home, os.environ.get("SPARK_HOME")))
    os.environ["SPARK_HOME"] = str(home)  # read by pyspark's launch_gateway, here and in children
    os.environ[JVM_TRAP_LOG] = str(log)


def _trapped_launches() -> list[str]:
    log = os.environ.get(JVM_TRAP_LOG)
    return Path(log).read_text().splitlines() if log else []


@pytest.fixture(autouse=True)
def _no_jvm_unless_marked() -> Iterator[None]:
    """Error the test that launched a JVM in a run that selected no ``spark`` test."""
    if JVM_TRAP_LOG not in os.environ:
        yield
        return
    before = len(_trapped_launches())
    yield
    launches = _trapped_launches()[before:]
    if launches:
        pytest.fail(
            "a JVM was launched by a test not marked @pytest.mark.spark:\n" + "\n".join(launches),
            pytrace=False,
        )


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """A JVM launched outside any test (collection, session fixtures) fails the run too."""
    if not _armed:
        return
    launches = _trapped_launches()
    if launches and exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line("JVM launched in a run that selects no 'spark' test:", red=True)
            for line in launches:
                reporter.write_line(f"  {line}", red=True)
    home, spark_home = _armed.pop()
    os.environ.pop(JVM_TRAP_LOG, None)
    if spark_home is None:
        os.environ.pop("SPARK_HOME", None)
    else:
        os.environ["SPARK_HOME"] = spark_home
    shutil.rmtree(home, ignore_errors=True)


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """A real local Spark session (2 threads), shared by every test that needs Spark."""
    from lakehouse_index.spark import get_spark

    session = get_spark(master="local[2]")
    yield session
