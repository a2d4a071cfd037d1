"""How index entries sit in files, whoever writes them: sort order, key ranges or hash buckets.

Hash buckets come in two layouts (``Buckets.spark``, recorded per index as
``CoveringIndex.layout_version``):

* **Spark's bucketing** (layout 2, every new covering index): the bucket of a value is
  Spark's own ``pmod(hash(v), count)`` (Murmur3, seed 42; null hashes to the seed), computed
  in process by :mod:`lakehouse_index.kinds.murmur3` for every scalar type and on Spark by
  ``F.hash``; files sit flat in the operation's data directory and are named as Spark names
  bucket files (``part-<uuid>_<bucket, 5 digits>.c000.parquet``, the id Spark's
  ``BucketingUtils`` parses), so Spark can read them as a bucketed table.
* **crc32 of the string form** (layout 1, indexes created before): ``crc32(utf8(cast(v as
  string))) mod count`` (null → 0), in ``bucket=<n>/`` directories; identical in Spark and
  Python only for strings and integers, so lookups of other key types read every bucket.
"""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from lakehouse_index.kinds.murmur3 import spark_buckets

if TYPE_CHECKING:
    from collections.abc import Sequence

    from pyspark.sql import Column


@dataclass(frozen=True)
class Buckets:
    """Hash buckets on one column (see the module docstring for the two layouts)."""

    column: str
    count: int
    #: Spark's bucketing (layout 2); False: crc32 of the string form in directories (layout 1).
    spark: bool = True


@dataclass(frozen=True)
class Layout:
    """How entries sit in index files, whoever writes them.

    ``key`` are the lookup key columns: the root index records their bounds per file, and
    without buckets files hold ranges of them that do not overlap (at most
    ``ExecutorConfig.rows_per_index_file`` rows each; a file cut inside a run of one key
    leaves that key the bound of both files); with buckets, each bucket gets its own files.
    Rows are sorted by ``sort`` within a file. ``group_rows``: rows per row group instead of
    ``ExecutorConfig.index_row_group_rows`` (a kind pruning its own row groups by their
    statistics wants small ones). ``ranges``: the columns unbucketed files hold ranges of
    when they are not ``key`` (the leading sort column of a kind sorting by something else
    first: Spark range-partitions by them). ``aligned``: an int64 sort column whose bit
    prefixes are boxes of a space-filling curve; row groups of at most ``group_rows`` rows are
    then cut at its most significant changes (``executors.writer.aligned_groups``).
    """

    key: tuple[str, ...]
    sort: tuple[str, ...]
    buckets: Buckets | None = None
    group_rows: int | None = None
    ranges: tuple[str, ...] | None = None
    aligned: str | None = None

    @property
    def range_columns(self) -> tuple[str, ...]:
        """The columns unbucketed files hold ranges of: ``ranges``, else ``key``."""
        return self.ranges or self.key


BUCKET_DIR = re.compile(r"/bucket=(\d+)/")
#: Spark's bucket file names (``BucketingUtils.bucketIdRegex``, on the file name).
BUCKET_FILE = re.compile(r"^.*_(\d+)(?:\..*)?$")
BUCKET_COLUMN = "bucket"


def _legacy_prunable(typ: pa.DataType) -> bool:
    return pa.types.is_string(typ) or pa.types.is_large_string(typ) or pa.types.is_integer(typ)


def _legacy_bucket(value: Any, count: int) -> int:
    if value is None:
        return 0
    return zlib.crc32(str(value).encode("utf-8")) % count


def bucket_ids(values: pa.Array | pa.ChunkedArray, buckets: Buckets) -> np.ndarray:
    """The bucket of every value (int32), as both executors compute it."""
    if buckets.spark:
        return spark_buckets(values, buckets.count)
    listed = values.to_pylist()
    return np.fromiter((_legacy_bucket(v, buckets.count) for v in listed), dtype=np.int32, count=len(listed))


def key_buckets(keys: Sequence[Any], key_type: pa.DataType, buckets: Buckets) -> frozenset[int] | None:
    """The buckets that may hold the leading-key values ``keys`` (None: any bucket)."""
    if not buckets.spark:
        if not _legacy_prunable(key_type):
            return None
        return frozenset(_legacy_bucket(k, buckets.count) for k in keys)
    try:
        values = pa.array(list(keys), key_type)
    except (pa.ArrowException, TypeError, ValueError, OverflowError):
        return None  # a key not of the column's type: let the reader compare it
    return frozenset(int(b) for b in bucket_ids(values, buckets))


def bucket_column(leading: Column, buckets: Buckets) -> Column:
    """The Spark expression of :func:`bucket_ids`."""
    from pyspark.sql import functions as F

    if buckets.spark:
        return F.pmod(F.hash(leading), F.lit(buckets.count)).cast("int")
    crc = F.crc32(leading.cast("string").cast("binary"))
    return F.coalesce(F.pmod(crc, F.lit(buckets.count)), F.lit(0)).cast("int")


def bucket_file_name(token: str, bucket: int) -> str:
    """The name of a bucket file in Spark's layout (``token``: unique per file)."""
    return f"part-{token}_{bucket:05d}.c000.parquet"


def bucket_from_path(path: str) -> int | None:
    """The bucket number encoded in an index file's path (either layout)."""
    m = BUCKET_DIR.search(path)
    if m:
        return int(m.group(1))
    m = BUCKET_FILE.match(path.rsplit("/", 1)[-1])
    return int(m.group(1)) if m else None
