"""Opening a data file, and the caches of what its footer says.

Parquet footers are cached in an LRU keyed by the path, the log's size and mtime, and the
size and version token (ETag on object stores, mtime in ns on local disk) the store
reports when the file is opened (:mod:`lakehouse_index.io.versioned`, no extra request):
repeated point reads of a file do not re-read its footer, and a file rewritten in place
misses even when the table's log does not tell. A footer is read with one request for the
file's last ``ReadConfig.footer_read_bytes``, which usually holds the page index too. The
page indexes of the files point-read page by page (:mod:`lakehouse_index.read.page_index`)
are cached likewise, and so are their decoded dictionary pages (byte-weighted,
:mod:`lakehouse_index.read.dictionaries`), so a warm point read fetches only the data pages
holding its rows. Cache sizes: :class:`~lakehouse_index.config.CacheConfig`
(``footer_entries``, ``page_index_entries``, ``dictionary_bytes``).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from pyroaring import BitMap64

from lakehouse_index.config import ReadConfig, SizedCache
from lakehouse_index.errors import TableFormatError
from lakehouse_index.io.versioned import open_versioned, stat_versioned
from lakehouse_index.read.page_index import PageIndex, read_tail
from lakehouse_index.source import Column, EqualityDeletes, FileEntry, FileIO

__all__ = [
    "DICTIONARIES",
    "FIELD_ID_KEY",
    "FOOTERS",
    "PAGE_INDEXES",
    "FileAccess",
    "FileKey",
    "FileLayout",
    "OpenFile",
    "clear_footer_cache",
    "file_key",
    "file_layout",
    "open_file",
]


class FileAccess(Protocol):
    """What reading a data file asks of its table: storage, and the file's row-level deletes.

    Every :class:`~lakehouse_index.source.TableSource` provides it; so does a Spark data source
    partition, which carries a file's deletes from planning to the task (no table open there).
    """

    @property
    def io(self) -> FileIO:
        """Storage access for the data files."""
        ...

    def deleted_positions(self, entry: FileEntry) -> BitMap64:
        """Row positions deleted by ``entry.deletes`` (empty when None)."""
        ...

    def equality_delete_rows(self, deletes: EqualityDeletes, columns: Sequence[Column]) -> pa.Table:
        """Rows of an equality-delete file, with logical column names."""
        ...


#: The Arrow field metadata key of a Parquet field id.
FIELD_ID_KEY = b"PARQUET:field_id"


@dataclass(frozen=True)
class FileLayout:
    """What the core needs from one Parquet footer, computed once per file."""

    metadata: pq.FileMetaData
    schema: pa.Schema
    #: First row position of each row group, plus the total row count at the end.
    row_group_starts: np.ndarray
    #: Top-level field id → field name, for files written with field ids.
    by_field_id: dict[int, str]
    names: frozenset[str]
    #: Top-level columns stored as legacy INT96 timestamps (Spark reads them only as TIMESTAMP).
    int96: frozenset[str] = frozenset()

    @property
    def num_rows(self) -> int:
        """Rows in the file."""
        return int(self.metadata.num_rows)


#: A data file's bytes: (path, the log's size and mtime, the size and version token the
#: store reports when the file is opened). A file rewritten in place gets a new key even
#: when the table's log does not tell (Iceberg records no modification time).
FileKey = tuple[str, int, int, int, str]

#: Footer facts of the data files read, by file key.
FOOTERS: SizedCache[FileKey, FileLayout] = SizedCache("footer_entries")
#: Page indexes of the files point-read page by page (larger than footers: fewer of them); of
#: a file without offset indexes, per (file key, row group), from its page headers.
PAGE_INDEXES: SizedCache[Hashable, PageIndex] = SizedCache("page_index_entries")
#: Decoded dictionary pages (their first values, or all), per (file key, row group, column),
#: weighted by Arrow size.
DICTIONARIES: SizedCache[Hashable, pa.Array] = SizedCache("dictionary_bytes", getsizeof=lambda a: a.nbytes)


def clear_footer_cache() -> None:
    """Forget every cached footer, page index and dictionary (tests, benchmarks of cold reads)."""
    FOOTERS.clear()
    PAGE_INDEXES.clear()
    DICTIONARIES.clear()


def _layout(metadata: pq.FileMetaData) -> FileLayout:
    schema = metadata.schema.to_arrow_schema()
    starts = np.zeros(metadata.num_row_groups + 1, dtype=np.int64)
    for i in range(metadata.num_row_groups):
        starts[i + 1] = starts[i] + metadata.row_group(i).num_rows
    by_id: dict[int, str] = {}
    for f in schema:
        raw = (f.metadata or {}).get(FIELD_ID_KEY)
        if raw is not None:
            by_id[int(raw)] = f.name
    int96 = frozenset(
        metadata.schema.column(i).path
        for i in range(metadata.num_columns)
        if metadata.schema.column(i).physical_type == "INT96"
    )
    return FileLayout(metadata, schema, starts, by_id, frozenset(schema.names), int96)


_DEFAULT_READ = ReadConfig()


@dataclass(frozen=True)
class OpenFile:
    """One data file opened for reading, with its (cached) footer facts."""

    file: pq.ParquetFile
    handle: pa.NativeFile
    layout: FileLayout
    key: FileKey
    #: The end of the file when its footer was read just now (else None): the page index
    #: is taken from it without another request.
    tail: bytes | None
    #: On a local disk: page reads go one after the other (a read from the page cache costs
    #: less than handing it to a thread); on an object store they are concurrent.
    local: bool

    def close(self) -> None:
        """Close the file and the handle it reads."""
        self.file.close()
        self.handle.close()  # ParquetFile does not close a handle it was given


def open_file(source: FileAccess, entry: FileEntry, config: ReadConfig | None = None) -> OpenFile:
    """Open a data file; its footer is read (one request for its last bytes) only on a cache miss."""
    fs, path = source.io.arrow(entry.path)
    try:
        opened = open_versioned(fs, path)
    except FileNotFoundError as e:
        raise TableFormatError(f"data file {entry.path} of the table is missing") from e
    handle = opened.handle
    key = _file_key(entry, opened.size, opened.version)
    layout = FOOTERS.get(key)
    tail = None
    try:
        metadata = layout.metadata if layout is not None else None
        if metadata is None:
            metadata, tail = read_tail(handle, (config or _DEFAULT_READ).footer_read_bytes)
        # INT96 (legacy Spark/Hive timestamps) as microseconds: the lakehouse formats are
        # microsecond-based, and nanoseconds overflow for dates outside 1677..2262.
        pf = pq.ParquetFile(handle, metadata=metadata, coerce_int96_timestamp_unit="us")
    except (pa.ArrowException, OSError) as e:
        handle.close()
        raise TableFormatError(f"data file {entry.path} is not a readable Parquet file: {e}") from e
    if layout is None:
        layout = _layout(pf.metadata)
        FOOTERS[key] = layout
    return OpenFile(pf, handle, layout, key, tail, isinstance(fs, pafs.LocalFileSystem))


def _file_key(entry: FileEntry, size: int, version: str) -> FileKey:
    """What names a data file's bytes in caches: the log's facts and the store's."""
    return (entry.path, entry.size, entry.mtime_ms, size, version)


def file_layout(source: FileAccess, entry: FileEntry) -> FileLayout:
    """The footer facts of one data file (cached while the store reports the same bytes)."""
    opened = open_file(source, entry)
    opened.close()
    return opened.layout


def file_key(source: FileAccess, entry: FileEntry) -> tuple[FileKey, FileLayout]:
    """The key naming the current bytes of a data file in caches, and its footer facts.

    A local file whose footer is cached costs one ``stat`` (no open).
    """
    fs, path = source.io.arrow(entry.path)
    try:
        stat = stat_versioned(fs, path)
    except FileNotFoundError as e:
        raise TableFormatError(f"data file {entry.path} of the table is missing") from e
    if stat is not None:
        key = _file_key(entry, *stat)
        layout = FOOTERS.get(key)
        if layout is not None:
            return key, layout
    opened = open_file(source, entry)
    opened.close()
    return opened.key, opened.layout
