"""Reading a snapshot's data files directly as Parquet with Spark (no Delta/Iceberg jars).

:func:`spark_frame` is the Spark executor's plain read: the same rows as
:func:`lakehouse_index.read.scan.scan_snapshot`, as a lazy DataFrame.

How the snapshot's logical schema is rebuilt on Spark:

* **Columns.** Every file's footer is read once on the driver (cached, see
  :mod:`lakehouse_index.read.footers`) and each logical column is resolved exactly as
  the pyarrow reader does (field id, then stored name; absent → null). Files with the
  same resolution (stored names and types and, at every depth, which stored field each
  logical struct field comes from) are read together with an explicit read schema in
  *their* types and rebuilt in the snapshot's types afterwards: struct fields picked by
  stored name and renamed, list elements and map keys and values through ``transform``
  and ``transform_values`` / ``map_from_arrays``, primitives cast (a plain struct cast
  would match fields by position). This is used instead of
  ``spark.sql.parquet.fieldId.read.enabled`` because Spark 3.5 does not widen types
  while reading (an INT32 column read as BIGINT fails), the field-id switch is
  session-wide, and one resolution rule for both executors keeps them equal.
* **Partition values and lineage.** A small broadcast table of the files (Spark's
  ``_metadata.file_path`` → file number, FileEntry path, partition values, caller's
  per-file columns) is joined on the raw ``_metadata.file_path``, so no row's path is
  decoded or rewritten. Spark reports that path URI-encoded (``%20``, ``%25``...); the
  table gets it from Spark's own encoder (``SparkPath.fromPathString`` of the Hadoop
  path, through ``reflect``, folded into the table when the plan is optimized). A row
  whose file the table does not name fails the query instead of being dropped.
  ``_file_path`` is the FileEntry path exactly.
* **Row-level deletes.** Deleted positions (deletion vectors, position deletes) are
  anti-joined on (file, ``_metadata.row_index``); equality deletes are anti-joined
  null-safely (``<=>``) on their columns, for the files they apply to.
* **where** is applied last, on logical names; Spark pushes it down into the scans.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

import pyarrow as pa

from lakehouse_index.config import ReadConfig
from lakehouse_index.errors import QueryError, UnsupportedFeatureError
from lakehouse_index.expressions import Predicate, Where, quote_identifier, sql_literal
from lakehouse_index.read.columns import Conversion, resolve_columns
from lakehouse_index.read.datafiles import ROW_COLUMN
from lakehouse_index.read.deletes import deleted_positions_array
from lakehouse_index.read.footers import FileLayout, file_layout
from lakehouse_index.read.scan import prune_files
from lakehouse_index.source import EqualityDeletes, FileEntry, Snapshot, TableSource

if TYPE_CHECKING:
    from pyspark.sql import Column as SparkColumn
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import DataType, StructType

__all__ = ["FILE_PATH_COLUMN", "FileColumns", "arrow_to_spark_type", "spark_frame", "spark_schema"]

#: Lineage column holding the FileEntry path of each row (``with_lineage=True``).
FILE_PATH_COLUMN = "_file_path"

# Internal column names, unlikely to clash with a user's columns.
_FID = "__li_fid"
_HADOOP_PATH = "__li_hadoop_path"
_PATH = "__li_path"
_ROW = "__li_row"
_SPARK_PATH = "__li_spark_path"
_EQ = "__li_eq"

#: Constant columns per data file for :func:`spark_frame`: name → (Arrow type, value per FileEntry path).
FileColumns = Mapping[str, tuple[pa.DataType, Mapping[str, Any]]]


_GLOB_CHARS = re.compile(r"([{}\[\]*?\\])")


# --------------------------------------------------------------------------- types


def arrow_to_spark_type(t: pa.DataType, *, int96: bool = False) -> DataType:
    """The Spark SQL type for an Arrow type (UnsupportedFeatureError when Spark has none)."""
    from pyspark.sql import types as T

    if pa.types.is_boolean(t):
        return T.BooleanType()
    if pa.types.is_int8(t):
        return T.ByteType()
    if pa.types.is_int16(t):
        return T.ShortType()
    if pa.types.is_int32(t):
        return T.IntegerType()
    if pa.types.is_int64(t):
        return T.LongType()
    if pa.types.is_float32(t):
        return T.FloatType()
    if pa.types.is_float64(t):
        return T.DoubleType()
    if pa.types.is_decimal(t):
        assert isinstance(t, (pa.Decimal128Type, pa.Decimal256Type))
        if t.precision > 38:
            raise UnsupportedFeatureError(f"Spark has no decimal with precision {t.precision} > 38")
        return T.DecimalType(t.precision, t.scale)
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return T.StringType()
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_binary_view(t):
        return T.BinaryType()
    if pa.types.is_fixed_size_binary(t):
        return T.BinaryType()
    if pa.types.is_date32(t) or pa.types.is_date64(t):
        return T.DateType()
    if pa.types.is_timestamp(t):
        assert isinstance(t, pa.TimestampType)
        return T.TimestampType() if (t.tz is not None or int96) else T.TimestampNTZType()
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_list_view(t):
        return T.ArrayType(arrow_to_spark_type(t.value_type), True)
    if pa.types.is_struct(t):
        assert isinstance(t, pa.StructType)
        return T.StructType(
            [
                T.StructField(t.field(i).name, arrow_to_spark_type(t.field(i).type), True)
                for i in range(t.num_fields)
            ]
        )
    if pa.types.is_map(t):
        assert isinstance(t, pa.MapType)
        return T.MapType(arrow_to_spark_type(t.key_type), arrow_to_spark_type(t.item_type), True)
    if pa.types.is_null(t):
        return T.NullType()
    raise UnsupportedFeatureError(f"the Arrow type {t} has no Spark equivalent")


def spark_schema(schema: pa.Schema) -> StructType:
    """A Spark StructType for an Arrow schema (all fields nullable)."""
    from pyspark.sql import types as T

    return T.StructType([T.StructField(f.name, arrow_to_spark_type(f.type), True) for f in schema])


def _col(name: str) -> SparkColumn:
    from pyspark.sql import functions as F

    return F.col(quote_identifier(name))


# --------------------------------------------------------------------------- paths


def hadoop_path(path: str) -> str:
    """The Hadoop path string of a FileEntry path, as Spark lists the file: ``file:/abs``,
    ``s3a://bucket/key`` (Hadoop's S3 connector), other URIs unchanged; not URI-encoded."""
    scheme = urlparse(path).scheme
    if scheme == "":
        return "file:/" + path.lstrip("/")
    if scheme == "file":
        return "file:/" + path[len("file:") :].lstrip("/")
    if scheme == "s3":
        return "s3a" + path[len("s3") :]
    return path


def _spark_location(path: str) -> str:
    """The location to hand to ``spark.read`` for a FileEntry path."""
    # spark.read expands glob characters; a backslash makes Hadoop's glob take them literally.
    return _GLOB_CHARS.sub(r"\\\1", hadoop_path(path))


# --------------------------------------------------------------------------- the read


def spark_frame(
    spark: SparkSession,
    source: TableSource,
    snapshot: Snapshot,
    *,
    files: Iterable[FileEntry] | None = None,
    columns: Sequence[str] | None = None,
    where: Where | None = None,
    with_lineage: bool = False,
    file_columns: FileColumns | None = None,
    config: ReadConfig | None = None,
) -> DataFrame:
    """A DataFrame of the live rows of ``snapshot`` (or of ``files``, distinct paths), deletes applied.

    ``columns`` selects logical columns (default all, schema order); ``where`` is a SQL
    string or Predicate (a pyarrow Expression raises QueryError: Spark cannot run it).
    ``with_lineage`` appends ``_file_path`` (the FileEntry path, string) and ``_row``
    (int64 row position in the file). ``file_columns`` appends constant columns per file
    (name → Arrow type and a value for every file's path), e.g. an index's file ids.
    ``config`` (default ``ReadConfig()``): ``spark_broadcast_deletes`` (below this many
    deleted positions the delete table is broadcast to every task) and
    ``spark_local_values_limit`` (driver-side tables up to this many values become SQL
    VALUES, a LocalRelation broadcast without a job; larger ones go through
    createDataFrame, whose Python-RDD scan costs seconds per query even for a few rows).
    """
    from pyspark.sql import functions as F

    cfg = config or ReadConfig()
    schema = snapshot.schema
    out_cols = list(dict.fromkeys(columns)) if columns is not None else list(schema.names)
    unknown = [c for c in out_cols if c not in schema.names]
    if unknown:
        raise QueryError(f"unknown column(s) {unknown}; the table has {', '.join(schema.names)}")
    if with_lineage and {FILE_PATH_COLUMN, ROW_COLUMN} & set(schema.names):
        raise QueryError(
            f"the table has a column named {FILE_PATH_COLUMN} or {ROW_COLUMN}; lineage columns would clash"
        )
    file_columns = file_columns or {}
    clash = set(file_columns) & {*schema.names, FILE_PATH_COLUMN, ROW_COLUMN}
    if clash:
        raise QueryError(f"per-file column(s) {sorted(clash)} clash with the table's or lineage columns")
    predicate = Predicate.of(where, schema)
    where_sql = predicate.to_spark_sql() if predicate is not None else None

    entries = prune_files(files if files is not None else snapshot.files.values(), predicate)
    if len({e.path for e in entries}) < len(entries):
        raise QueryError("files name the same path more than once")
    out_fields = [schema.field(c) for c in out_cols]
    if with_lineage:
        out_fields += [pa.field(FILE_PATH_COLUMN, pa.string()), pa.field(ROW_COLUMN, pa.int64())]
    out_fields += [pa.field(name, t) for name, (t, _) in file_columns.items()]
    if not entries:
        return local_frame(spark, [], [(f.name, f.type) for f in out_fields], cfg)

    read_cols = list(out_cols)
    if predicate is not None:
        read_cols += [c for c in schema.names if c in predicate.columns and c not in read_cols]
    eq_cols = {c for e in entries for eq in e.equality_deletes for c in eq.columns}
    read_cols += [c for c in schema.names if c in eq_cols and c not in read_cols]

    data_cols = [c for c in read_cols if snapshot.column(c).in_data_files]
    part_cols = [c for c in read_cols if not snapshot.column(c).in_data_files]

    df = _read_groups(spark, source, snapshot, entries, data_cols)
    files_df = _files_frame(spark, snapshot, entries, part_cols, file_columns, cfg)
    df = df.join(F.broadcast(files_df), on=_SPARK_PATH, how="left")
    unknown_file = F.raise_error(
        F.concat(F.lit("Spark read a file missing from the snapshot: "), _col(_SPARK_PATH))
    )
    df = df.filter(F.when(_col(_FID).isNull(), unknown_file).otherwise(F.lit(True))).drop(_SPARK_PATH)

    df = _apply_position_deletes(spark, source, entries, df, cfg)
    df = _apply_equality_deletes(spark, source, snapshot, entries, df, cfg)

    if where_sql is not None:
        df = df.filter(F.expr(where_sql))
    selected = [_col(c) for c in out_cols]
    if with_lineage:
        selected += [_col(_PATH).alias(FILE_PATH_COLUMN), _col(_ROW).alias(ROW_COLUMN)]
    selected += [_col(name) for name in file_columns]
    return df.select(*selected)


def _read_groups(
    spark: SparkSession,
    source: TableSource,
    snapshot: Snapshot,
    entries: list[FileEntry],
    data_cols: list[str],
) -> DataFrame:
    """Union of one Parquet read per column resolution: logical data columns + path + row index."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    with ThreadPoolExecutor(8) as pool:
        layouts: list[FileLayout] = list(pool.map(lambda e: file_layout(source, e), entries))

    groups: dict[tuple[Any, ...], list[FileEntry]] = {}
    for entry, layout in zip(entries, layouts, strict=True):
        resolved = resolve_columns(snapshot, entry, layout, data_cols)
        signature = tuple(
            (r.stored, r.conversion, r.stored in layout.int96) if r.stored else None for r in resolved
        )
        groups.setdefault(signature, []).append(entry)

    frames = []
    for signature, group in groups.items():
        fields: dict[str, T.StructField] = {}
        selected = []
        for name, sig in zip(data_cols, signature, strict=True):
            target = arrow_to_spark_type(snapshot.column(name).type)
            if sig is None:
                selected.append(F.lit(None).cast(target).alias(name))
                continue
            stored, conversion, is_int96 = sig
            assert conversion is not None
            layout = file_layout(source, group[0])
            stored_type = arrow_to_spark_type(layout.schema.field(stored).type, int96=is_int96)
            fields[stored] = T.StructField(stored, stored_type, True)
            selected.append(_logical(_col(stored), conversion).cast(target).alias(name))
        selected += [
            F.col("_metadata.file_path").alias(_SPARK_PATH),
            F.col("_metadata.row_index").alias(_ROW),
        ]
        reader = spark.read.schema(T.StructType(list(fields.values())))
        frames.append(reader.parquet(*[_spark_location(e.path) for e in group]).select(*selected))
    out = frames[0]
    for f in frames[1:]:
        out = out.unionByName(f)
    return out


def _logical(value: SparkColumn, conversion: Conversion) -> SparkColumn:
    """A stored Spark value rebuilt in its logical type, by the pyarrow reader's ``conversion``.

    Struct fields are picked by their stored names and renamed (never cast by position,
    which would mix fields up after a rename or an added field); list elements and map
    keys and values are converted with ``transform`` / ``transform_values`` /
    ``map_from_arrays``; absent fields are typed nulls; primitives are cast.
    """
    from pyspark.sql import functions as F

    target = conversion.target
    if conversion.stored is None:
        return F.lit(None).cast(arrow_to_spark_type(target))
    if conversion.identity:
        return value
    if pa.types.is_struct(target):
        assert isinstance(target, pa.StructType)
        parts = [
            _logical(value.getField(source) if source is not None else F.lit(None), child).alias(f.name)
            for f, source, child in zip(target, conversion.sources, conversion.children, strict=True)
        ]
        return F.when(value.isNotNull(), F.struct(*parts))
    if pa.types.is_map(target):
        key, item = conversion.children
        if key.identity:
            return F.transform_values(value, _lifted_value(item))
        return F.map_from_arrays(
            F.transform(F.map_keys(value), _lifted(key)), F.transform(F.map_values(value), _lifted(item))
        )
    if pa.types.is_list(target) or pa.types.is_large_list(target):
        return F.transform(value, _lifted(conversion.children[0]))
    return value.cast(arrow_to_spark_type(target))


def _lifted(conversion: Conversion) -> Callable[[SparkColumn], SparkColumn]:
    """:func:`_logical` as a one-argument lambda for Spark's higher-order functions."""
    return lambda x: _logical(x, conversion)


def _lifted_value(conversion: Conversion) -> Callable[[SparkColumn, SparkColumn], SparkColumn]:
    """:func:`_logical` of a map's value, as ``transform_values`` takes it."""
    return lambda _, v: _logical(v, conversion)


def _files_frame(
    spark: SparkSession,
    snapshot: Snapshot,
    entries: list[FileEntry],
    part_cols: list[str],
    file_columns: FileColumns,
    config: ReadConfig,
) -> DataFrame:
    """(Spark's file path, file number, FileEntry path, partition values..., file columns...) per file."""
    from pyspark.sql import functions as F

    fields = [(_HADOOP_PATH, pa.string()), (_FID, pa.int32()), (_PATH, pa.string())]
    fields += [(c, snapshot.column(c).type) for c in part_cols]
    fields += [(name, t) for name, (t, _) in file_columns.items()]
    rows = []
    for fid, e in enumerate(entries):
        values = e.partition_dict
        missing = [c for c in part_cols if c not in values]
        if missing:
            raise QueryError(f"data file {e.path} has no partition value for {missing}")
        rows.append(
            (
                hadoop_path(e.path),
                fid,
                e.path,
                *[_python_value(values[c], snapshot.column(c).type) for c in part_cols],
                *[_python_value(by_path[e.path], t) for t, by_path in file_columns.values()],
            )
        )
    # _metadata.file_path is Spark's URI encoding of the listed Hadoop path (SparkPath);
    # computing it with that same function keeps the per-row join a plain string match.
    spark_path = F.expr(f"reflect('org.apache.spark.paths.SparkPath', 'fromPathString', {_HADOOP_PATH})")
    return local_frame(spark, rows, fields, config).withColumn(_SPARK_PATH, spark_path).drop(_HADOOP_PATH)


def local_frame(
    spark: SparkSession,
    rows: list[tuple[Any, ...]],
    fields: list[tuple[str, pa.DataType]],
    config: ReadConfig,
) -> DataFrame:
    """A small DataFrame from driver-side rows of Python values typed by ``fields``.

    SQL VALUES up to ``config.spark_local_values_limit`` values, else createDataFrame.
    """
    from pyspark.sql import types as T

    size = sum(len(v) if isinstance(v, list) else 1 for r in rows for v in r)
    # Our string literals use backslash escapes, which that legacy parser mode turns off.
    legacy = spark.conf.get("spark.sql.parser.escapedStringLiterals", "false") == "true"
    if size > config.spark_local_values_limit or legacy:
        schema = T.StructType([T.StructField(n, arrow_to_spark_type(t), True) for n, t in fields])
        return spark.createDataFrame(rows, schema)
    names = ", ".join(quote_identifier(n) for n, _ in fields)
    if not rows:
        nulls = ", ".join(f"{_sql_value(None, t)} AS {quote_identifier(n)}" for n, t in fields)
        return spark.sql(f"SELECT {nulls} LIMIT 0")
    values = ",\n".join(
        "(" + ", ".join(_sql_value(v, t) for v, (_, t) in zip(r, fields, strict=True)) + ")" for r in rows
    )
    return spark.sql(f"SELECT * FROM VALUES {values} AS __li_values({names})")


def _sql_value(value: Any, t: pa.DataType) -> str:
    ddl = arrow_to_spark_type(t).simpleString()
    if value is None:
        return f"CAST(NULL AS {ddl})"
    if pa.types.is_list(t):
        assert isinstance(t, pa.ListType)
        return f"CAST(array({', '.join(_sql_value(v, t.value_type) for v in value)}) AS {ddl})"
    return f"CAST({sql_literal(value, t)} AS {ddl})"


def _python_value(value: Any, t: pa.DataType) -> Any:
    """A partition value as pyspark converts it faithfully."""
    if value is None:
        return None
    # Check and normalize through Arrow (e.g. an int for a date column is refused here).
    value = pa.array([value], type=t)[0].as_py()
    if isinstance(value, dt.datetime) and isinstance(t, pa.TimestampType) and t.tz is not None:
        # pyspark converts naive datetimes in the Python process's local zone: pass UTC instants.
        return value if value.tzinfo is not None else value.replace(tzinfo=dt.timezone.utc)
    return value


def _apply_position_deletes(
    spark: SparkSession, source: TableSource, entries: list[FileEntry], df: DataFrame, config: ReadConfig
) -> DataFrame:
    from pyspark.sql import functions as F

    rows = []
    total = 0
    for fid, e in enumerate(entries):
        if e.deletes is None:
            continue
        positions = deleted_positions_array(source, e)
        if len(positions):
            rows.append((fid, positions.tolist()))
            total += len(positions)
    if not rows:
        return df
    fields = [(_FID, pa.int32()), ("__li_positions", pa.list_(pa.int64()))]
    deletes = local_frame(spark, rows, fields, config).select(
        _col(_FID), F.explode(_col("__li_positions")).alias(_ROW)
    )
    if total <= config.spark_broadcast_deletes:
        deletes = F.broadcast(deletes)
    return df.join(deletes, on=[_FID, _ROW], how="left_anti")


def _apply_equality_deletes(
    spark: SparkSession,
    source: TableSource,
    snapshot: Snapshot,
    entries: list[FileEntry],
    df: DataFrame,
    config: ReadConfig,
) -> DataFrame:
    from pyspark.sql import functions as F

    # Delete files grouped by their column tuple; each applies to some of the files.
    by_cols: dict[tuple[str, ...], dict[str, tuple[EqualityDeletes, list[int]]]] = {}
    for fid, e in enumerate(entries):
        for eq in e.equality_deletes:
            slot = by_cols.setdefault(eq.columns, {}).setdefault(eq.path, (eq, []))
            slot[1].append(fid)
    for cols, deletes in by_cols.items():
        columns = [snapshot.column(c) for c in cols]
        del_rows: list[tuple[Any, ...]] = []
        applies: list[tuple[int, int]] = []
        for eq_id, (eq, fids) in enumerate(deletes.values()):
            table = source.equality_delete_rows(eq, columns)
            for rec in table.select(list(cols)).to_pylist():
                del_rows.append((eq_id, *[_python_value(rec[c.name], c.type) for c in columns]))
            applies.extend((eq_id, fid) for fid in fids)
        if not del_rows:
            continue
        names = [f"__li_d{i}" for i in range(len(cols))]
        del_fields = [(_EQ, pa.int32()), *[(n, c.type) for n, c in zip(names, columns, strict=True)]]
        app_fields = [(_EQ, pa.int32()), ("__li_dfid", pa.int32())]
        # Both sides are small driver-side tables: broadcast, no shuffle.
        matches = (
            local_frame(spark, applies, app_fields, config)
            .join(F.broadcast(local_frame(spark, del_rows, del_fields, config)), on=_EQ)
            .drop(_EQ)
        )
        cond = _col(_FID) == _col("__li_dfid")
        for n, c in zip(names, cols, strict=True):
            cond = cond & _col(c).eqNullSafe(_col(n))
        df = df.join(F.broadcast(matches), on=cond, how="left_anti")
    return df
