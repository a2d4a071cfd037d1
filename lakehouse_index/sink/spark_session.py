"""What the formats' Spark writers need to know of a Spark session (pyspark is never imported here).

A format's own Spark writer (:class:`~lakehouse_index.sink.contract.SparkWrites`) runs in the
session of the frames it writes; it can be used when that session is a classic one (this process
drives its JVM: not Spark Connect) whose classpath has the format's classes and whose
``spark.sql.extensions`` has the format's SQL extension (MERGE INTO needs it).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any


def jvm_class(spark: Any, name: str) -> Any | None:
    """The JVM class ``name`` (dotted) of classic session ``spark``, or None when the class is not
    on its classpath or the session has no JVM in this process (Spark Connect)."""
    from py4j.java_gateway import JavaClass

    found: Any = getattr(spark, "_jvm", None)
    if found is None:
        return None
    for part in name.split("."):
        found = getattr(found, part)
    return found if isinstance(found, JavaClass) else None


def has_runtime(spark: Any, class_name: str, extension: str) -> bool:
    """Whether ``spark`` is a classic session with the class ``class_name`` and the SQL extension
    ``extension`` (in ``spark.sql.extensions``)."""
    if jvm_class(spark, class_name) is None:
        return False
    extensions = spark.conf.get("spark.sql.extensions", None) or ""
    return extension in [e.strip() for e in extensions.split(",")]


#: The first line of a JVM error as py4j reports it, which names only the call that failed.
_PY4J_CALL = re.compile(r"An error occurred while calling \S+$")


def error_summary(error: BaseException) -> str:
    """One line of an error's message (Spark's carry a JVM stack trace), or its type's name.

    The first line, unless it only names the JVM call that failed (a py4j error): then the
    message of the root cause (the last ``Caused by:`` of the trace, else the JVM exception
    itself), e.g. delta-spark's ``[DELTA_NOT_NULL_CONSTRAINT_VIOLATED] NOT NULL constraint
    violated for column: k.``
    """
    text = str(error).strip()
    if not text:
        return type(error).__name__
    lines = text.splitlines()
    if _PY4J_CALL.match(lines[0].strip()):
        # "Caused by: <class>: <message>" and, right after the call, ": <class>: <message>"
        causes = [line for line in lines if line.startswith("Caused by: ")] or [
            line for line in lines[1:2] if line.startswith(": ")
        ]
        if causes:
            return causes[-1].split(": ", 2)[-1].strip()
    return lines[0]


def count_of(values: Mapping[str, Any], name: str) -> int | None:
    """A row count a Spark writer reported (its metrics, a snapshot summary), or None if it did not."""
    value = values.get(name)
    return None if value is None else int(value)
