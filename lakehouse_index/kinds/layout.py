"""How index entries sit in files, whoever writes them: sort order, key ranges or hash buckets.

The bucket of a value is ``crc32(utf8(string form)) mod count`` (null → 0), computed
identically by Spark (``crc32(cast(v as string))``, :func:`bucket_column`) and by Python
(:func:`bucket_of`) for strings and integers (:func:`prunable`): so both executors write a
key into the same bucket, and a lookup of a string or integer key reads only its bucket.
"""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

if TYPE_CHECKING:
    from pyspark.sql import Column


@dataclass(frozen=True)
class Buckets:
    """Hash buckets on one column: ``bucket=<n>/`` directories (see ``kinds.covering``)."""

    column: str
    count: int


@dataclass(frozen=True)
class Layout:
    """How entries sit in index files, whoever writes them.

    ``key`` are the lookup key columns: the root index records their bounds per file, and
    without buckets files hold ranges of them that do not overlap (at most
    ``ExecutorConfig.rows_per_index_file`` rows each; a file cut inside a run of one key
    leaves that key the bound of both files); with buckets, each bucket gets its own
    directory. Rows are sorted by ``sort`` within a file. ``group_rows``: rows per row group
    instead of ``ExecutorConfig.index_row_group_rows`` (a kind pruning its own row groups by
    their statistics wants small ones).
    """

    key: tuple[str, ...]
    sort: tuple[str, ...]
    buckets: Buckets | None = None
    group_rows: int | None = None


BUCKET_DIR = re.compile(r"/bucket=(\d+)/")
BUCKET_COLUMN = "bucket"


def prunable(typ: pa.DataType) -> bool:
    """Whether Python computes the same bucket as Spark for values of ``typ``."""
    return pa.types.is_string(typ) or pa.types.is_large_string(typ) or pa.types.is_integer(typ)


def bucket_of(value: Any, num_buckets: int) -> int:
    """The bucket of one leading-key value (strings and integers)."""
    if value is None:
        return 0
    return zlib.crc32(str(value).encode("utf-8")) % num_buckets


def bucket_column(leading: Column, num_buckets: int) -> Column:
    """The Spark expression of :func:`bucket_of`."""
    from pyspark.sql import functions as F

    crc = F.crc32(leading.cast("string").cast("binary"))
    return F.coalesce(F.pmod(crc, F.lit(num_buckets)), F.lit(0)).cast("int")


def bucket_from_path(path: str) -> int | None:
    """The bucket number encoded in an index file's path."""
    m = BUCKET_DIR.search(path)
    return int(m.group(1)) if m else None
