"""The Spark session factory: local by default, any cluster by configuration.

pyspark is imported only inside :func:`get_spark`, so nothing that does not need
Spark (opening tables, lookups, listing indexes) pays for it or starts a JVM.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from lakehouse_index.errors import SparkUnavailableError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["MASTER_ENV", "LOCAL_DEFAULTS", "get_spark", "java_major_version"]

#: Environment variable naming the Spark master when none is passed.
MASTER_ENV = "LAKEHOUSE_INDEX_SPARK_MASTER"

#: Settings for sessions this module builds (a conf mapping overrides them).
LOCAL_DEFAULTS: Mapping[str, str] = {
    # Small local jobs: the default 200 shuffle partitions mostly schedule empty tasks.
    "spark.sql.shuffle.partitions": "8",
    "spark.default.parallelism": "8",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    # Naive timestamps in where clauses mean UTC, as in the pyarrow executor.
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.adaptive.enabled": "true",
}

#: Added for ``local`` masters only: keep a local driver on the loopback interface.
_LOCAL_DRIVER: Mapping[str, str] = {
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
}


def java_major_version(java: str | None = None) -> int:
    """Major version of ``java`` on PATH (or JAVA_HOME); SparkUnavailableError if there is none."""
    exe = java
    if exe is None:
        home = os.environ.get("JAVA_HOME")
        candidate = os.path.join(home, "bin", "java") if home else None
        exe = candidate if candidate and os.path.exists(candidate) else shutil.which("java")
    if exe is None:
        raise SparkUnavailableError(
            "Spark needs Java, but no `java` was found (JAVA_HOME / PATH): install a JDK 17, "
            "e.g. `apt-get install openjdk-17-jre-headless`"
        )
    try:
        proc = subprocess.run([exe, "-version"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise SparkUnavailableError(f"cannot run {exe} -version: {e}; install a JDK 17") from e
    text = proc.stderr + proc.stdout
    m = re.search(r'version "(\d+)(?:\.(\d+))?', text)
    if m is None:
        raise SparkUnavailableError(f"cannot tell the Java version from {exe} -version: {text.strip()!r}")
    major = int(m.group(1))
    if major == 1 and m.group(2):  # "1.8.0_392" is Java 8
        major = int(m.group(2))
    return major


def _required_java(pyspark_version: str) -> int:
    major = int(pyspark_version.split(".")[0])
    return 17 if major >= 4 else 8


def get_spark(
    spark: SparkSession | None = None,
    master: str | None = None,
    conf: Mapping[str, Any] | None = None,
) -> SparkSession:
    """A Spark session: ``spark`` if given, else the active one, else a new one.

    A new session runs on ``master`` (argument, else ``$LAKEHOUSE_INDEX_SPARK_MASTER``,
    else ``local[*]``) with :data:`LOCAL_DEFAULTS` overridden by ``conf``. Raises
    SparkUnavailableError when pyspark is missing or Java is missing or too old.
    """
    if spark is not None:
        return spark
    try:
        import pyspark
        from pyspark.sql import SparkSession
    except ImportError as e:
        raise SparkUnavailableError("pyspark is not installed: `pip install 'pyspark>=3.5,<5'`") from e
    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    need = _required_java(pyspark.__version__)
    have = java_major_version()
    if have < need:
        raise SparkUnavailableError(
            f"pyspark {pyspark.__version__} needs Java {need} or newer, but Java {have} was found: "
            "install a JDK 17 and point JAVA_HOME at it"
        )
    url = master or os.environ.get(MASTER_ENV) or "local[*]"
    builder = SparkSession.builder.master(url).appName("lakehouse-index")
    settings: dict[str, Any] = dict(LOCAL_DEFAULTS)
    if url.startswith("local"):
        settings.update(_LOCAL_DRIVER)
        # Read by the JVM at launch: without it Spark binds the machine's public address.
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        # Local Python workers must run this interpreter (its venv has pyarrow for the
        # Arrow UDFs that write index files), not whatever `python3` is first on PATH.
        # (SparkContext reads PYSPARK_PYTHON from the environment, not from the conf.)
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    settings.update(conf or {})
    for key, value in settings.items():
        builder = builder.config(key, str(value))
    try:
        return builder.getOrCreate()
    except Exception as e:  # the JVM gateway raises plain Exceptions / RuntimeErrors
        raise SparkUnavailableError(f"Spark failed to start: {e}") from e
