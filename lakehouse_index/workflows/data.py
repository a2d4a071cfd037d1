"""Write input: any accepted ``data`` to one Arrow table in the table's schema, checked first.

Accepted: a pyarrow Table or RecordBatchReader, a pandas DataFrame, or a Spark DataFrame.
A Spark DataFrame is written by the format's own Spark writer when its session has it
(delta-spark: ``workflows.writes``); otherwise it is collected to Arrow in this process,
unless it is larger than ``ExecutorConfig.local_max_rows`` (:func:`spark_rows_estimate`):
appends of such frames are written by Spark itself (``workflows.spark_append``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from lakehouse_index.config import ExecutorConfig
from lakehouse_index.errors import DuplicateKeyError, SchemaMismatchError, WriteRefusedError
from lakehouse_index.expressions.matching import matchable
from lakehouse_index.expressions.types import Family, family


def to_arrow(data: Any) -> pa.Table:
    """``data`` as one pyarrow Table (Spark DataFrames are collected to this process)."""
    if isinstance(data, pa.Table):
        return data
    if isinstance(data, pa.RecordBatchReader):
        return data.read_all()
    if isinstance(data, pa.RecordBatch):
        return pa.Table.from_batches([data])
    module = type(data).__module__
    if module.startswith("pandas"):
        return pa.Table.from_pandas(data, preserve_index=False)
    if module.startswith("pyspark"):
        collect = getattr(data, "toArrow", None) or data._collect_as_arrow
        batches = collect()
        if isinstance(batches, pa.Table):
            return batches
        schema = spark_arrow_schema(data)
        return pa.Table.from_batches(batches, schema=schema)
    raise WriteRefusedError(
        "data must be a pyarrow Table or RecordBatchReader, a pandas DataFrame or a Spark DataFrame, "
        f"not {type(data).__name__}"
    )


def spark_arrow_schema(frame: Any) -> pa.Schema:
    """The Arrow schema of a Spark DataFrame's rows."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(frame.schema)


def is_spark_frame(data: Any) -> bool:
    """Whether ``data`` is a classic (JVM-backed) Spark DataFrame, which the distributed append
    runs on; Spark Connect frames are collected to this process."""
    module = type(data).__module__
    return module.startswith("pyspark.sql") and ".connect." not in module and hasattr(data, "mapInArrow")


def spark_rows_estimate(frame: Any, config: ExecutorConfig) -> int:
    """Rows of a Spark DataFrame as its optimized plan's statistics estimate them (no job runs):
    the row count where Spark knows it, else the size over ``bytes_per_row_estimate`` (the
    sizing policy's rule for files without a row count)."""
    stats = frame._jdf.queryExecution().optimizedPlan().stats()
    count = stats.rowCount()
    # Scala BigInts arrive as Python ints or as Java objects whose str() is the number.
    if count.isDefined():
        return int(str(count.get()))
    return int(str(stats.sizeInBytes())) // config.bytes_per_row_estimate


def _compatible(have: pa.DataType, want: pa.DataType) -> bool:
    """Whether a column of type ``have`` may be written into a column of type ``want``.

    Same family (integer widths, float widths, string/large string, timestamp units),
    timestamps agreeing on having a time zone; other types must be equal. The cast
    itself is checked for overflow and precision loss afterwards.
    """
    if have.equals(want):
        return True
    f_have, f_want = family(have), family(want)
    if f_have is None or f_want is None:
        return pa.types.is_null(have)
    if f_have is not f_want:
        return pa.types.is_null(have)
    if f_want is Family.TIMESTAMP:
        assert isinstance(have, pa.TimestampType) and isinstance(want, pa.TimestampType)
        return (have.tz is None) == (want.tz is None)
    return True


def conform(data: pa.Table, schema: pa.Schema, table: str) -> pa.Table:
    """``data`` with the table's column order and types; SchemaMismatchError naming every problem.

    The data must hold exactly the table's columns (any order). Types must be of the
    same kind and convert without loss; a non-nullable table column must get no nulls.
    """
    problems: list[str] = []
    have = set(data.column_names)
    if len(have) != len(data.column_names):
        problems.append(f"duplicate column names {sorted(c for c in have if data.column_names.count(c) > 1)}")
    missing = [n for n in schema.names if n not in have]
    extra = [n for n in data.column_names if n not in schema.names]
    if missing:
        problems.append(f"missing columns {missing}")
    if extra:
        problems.append(f"columns not in the table {extra}")
    columns: list[pa.ChunkedArray] = []
    if not problems:
        for field in schema:
            col = data.column(field.name)
            if not _compatible(col.type, field.type):
                problems.append(f"column {field.name!r} is {col.type}, the table has {field.type}")
                continue
            try:
                cast = col.cast(field.type, safe=True)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
                problems.append(f"column {field.name!r} ({col.type}) does not convert to {field.type}: {e}")
                continue
            if not field.nullable and cast.null_count:
                problems.append(
                    f"column {field.name!r} is NOT NULL but the data has {cast.null_count} null(s)"
                )
            columns.append(cast)
    if problems:
        raise SchemaMismatchError(
            f"data does not match the schema of {table}: "
            + "; ".join(problems)
            + f" (table schema: {schema})"
        )
    return pa.Table.from_arrays(columns, schema=schema)


def check_unique_keys(data: pa.Table, on: Sequence[str]) -> None:
    """DuplicateKeyError when a key of ``on`` repeats in ``data`` (as ``upsert`` matches keys:
    NaN equals NaN, -0.0 equals 0.0) or has a null part."""
    for c in on:
        nulls = data.column(c).null_count
        if nulls:
            raise DuplicateKeyError(f"upsert key column {c!r} has {nulls} null value(s) in the data")
    if data.num_rows == 0:
        return
    keys = pa.table([matchable(data.column(c)) for c in on], names=list(on))
    counts = keys.group_by(list(on)).aggregate([([], "count_all")])
    dup = counts.filter(pc.greater(counts["count_all"], 1))
    if dup.num_rows:
        sample = dup.slice(0, 3).drop_columns(["count_all"]).to_pylist()
        raise DuplicateKeyError(
            f"upsert keys {list(on)} are not unique in the data: {dup.num_rows} key(s) repeat, e.g. {sample}"
        )


def check_unique_spark_keys(frame: Any, on: Sequence[str]) -> None:
    """:func:`check_unique_keys` for a Spark DataFrame, by two Spark jobs (a null in a key
    column; a key that repeats, as Spark's ``=`` compares them)."""
    from pyspark.sql import functions as F

    from lakehouse_index.expressions.spark import quote_identifier

    cols = [F.col(quote_identifier(c)) for c in on]
    for c, col in zip(on, cols, strict=True):
        if frame.where(col.isNull()).limit(1).count():
            raise DuplicateKeyError(f"upsert key column {c!r} has null value(s) in the data")
    dup = frame.groupBy(*cols).count().where(F.col("count") > 1).limit(3).collect()
    if dup:
        sample = [{c: r[i] for i, c in enumerate(on)} for r in dup]
        raise DuplicateKeyError(f"upsert keys {list(on)} are not unique in the data, e.g. {sample}")
