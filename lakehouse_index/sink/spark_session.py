"""What the formats' Spark writers need to know of a Spark session (pyspark is never imported here).

A format's own Spark writer (:class:`~lakehouse_index.sink.contract.SparkWrites`) runs in the
session of the frames it writes; it can be used when that session is a classic one (this process
drives its JVM: not Spark Connect) whose classpath has the format's classes and whose
``spark.sql.extensions`` has the format's SQL extension (MERGE INTO needs it).
"""

from __future__ import annotations

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


def first_line(error: BaseException) -> str:
    """The first line of an error's message (Spark's carry a JVM stack trace), or its type's name."""
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def count_of(values: Mapping[str, Any], name: str) -> int | None:
    """A row count a Spark writer reported (its metrics, a snapshot summary), or None if it did not."""
    value = values.get(name)
    return None if value is None else int(value)
