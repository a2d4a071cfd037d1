"""Reading one data file of a snapshot with pyarrow, in the snapshot's logical schema.

Connectors describe data files (:class:`~lakehouse_index.source.FileEntry`); the core
reads them here, for plain scans, the lookup fast path and index builds.

Column resolution (the same rules the Spark reader uses, see :func:`resolve_columns`):

* a column with a field id is found by the Parquet field id (``PARQUET:field_id``)
  when the file carries field ids; a file with field ids but without that id does
  not hold the column (it was added later, or a column of the same name was dropped
  and re-added: matching by name would return the old column's values);
* otherwise by :attr:`Column.stored_name` (Delta column mapping physical name, or
  the logical name);
* a column the file does not hold reads as nulls (schema evolution);
* the same rules hold at every depth (:func:`conversion_of`): fields of structs,
  including structs in list elements and in map keys and values, are found by the
  field ids and stored names of the column's :attr:`~lakehouse_index.source.Column.subfields`,
  never by position; a nested field the file does not hold reads as nulls;
* values are cast to the snapshot's Arrow type (type widening int → long, ...);
* partition columns (``in_data_files=False``) are constants from
  :attr:`FileEntry.partition_values`.

Row-level deletes are applied unless ``apply_deletes=False``: positions from
:meth:`TableSource.deleted_positions` and rows matched (null-safe) by the equality
deletes attached to the entry.

Stable row ids (:func:`row_ids`): the value of the file's materialized row-id column
(Iceberg v3 ``_row_id``, found by its reserved field id; Delta's physical column named by
``delta.rowTracking.materializedRowIdColumnName``, found by name) where it is not null,
else ``first_row_id + position``; null when the file has no ``first_row_id``.

Parquet footers are cached in an LRU keyed by the path, the log's size and mtime, and the
size and version token (ETag on object stores, mtime in ns on local disk) the store
reports when the file is opened (:mod:`lakehouse_index.io.versioned`, no extra request):
repeated point reads of a file do not re-read its footer, and a file rewritten in place
misses even when the table's log does not tell. A footer is read with one request for the
file's last ``ReadConfig.footer_read_bytes``, which usually holds the page index too. Point
reads in large row groups of files with a page index fetch and decode only the pages holding the rows
(:mod:`lakehouse_index.read.page_reads`); those files' page indexes are cached likewise,
and so are their decoded dictionary pages (byte-weighted; a cold read decodes a dictionary
only up to the largest index it wants), so a warm point read fetches only the data pages
holding its rows.
Cache sizes: :class:`~lakehouse_index.config.CacheConfig` (``footer_entries``,
``page_index_entries``, ``dictionary_bytes``); read tuning: :class:`~lakehouse_index.config.ReadConfig`.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from pyroaring import BitMap64

from lakehouse_index.config import ReadConfig, SizedCache
from lakehouse_index.errors import QueryError, TableFormatError
from lakehouse_index.io.versioned import open_versioned, stat_versioned
from lakehouse_index.read.page_decode import plain_type
from lakehouse_index.read.page_index import (
    NO_PAGE_INDEX,
    UNINDEXED,
    PageIndex,
    PageIndexError,
    load_page_index,
    read_tail,
    walk_page_headers,
)
from lakehouse_index.read.page_reads import read_group_rows
from lakehouse_index.source import Column, EqualityDeletes, FileEntry, FileIO, Snapshot, Subfield

__all__ = [
    "ICEBERG_ROW_ID_FIELD_ID",
    "ROW_COLUMN",
    "Conversion",
    "FileLayout",
    "Resolved",
    "clear_footer_cache",
    "conversion_of",
    "deleted_positions_array",
    "equality_delete_mask",
    "file_key",
    "file_layout",
    "read_file",
    "resolve_columns",
    "row_id_column",
    "row_ids",
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


#: Name of the row-position column added by ``with_positions=True``.
ROW_COLUMN = "_row"

_FIELD_ID_KEY = b"PARQUET:field_id"

#: Field id Iceberg reserves for the materialized ``_row_id`` column of v3 data files
#: (spec, "Row Lineage"); no user column can carry it.
ICEBERG_ROW_ID_FIELD_ID = 2147483540


# --------------------------------------------------------------------------- footer cache


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

_FOOTERS: SizedCache[FileKey, FileLayout] = SizedCache("footer_entries")
#: Page indexes of the files point-read page by page (larger than footers: fewer of them); of
#: a file without offset indexes, per (file key, row group), from its page headers.
_PAGES: SizedCache[Hashable, PageIndex] = SizedCache("page_index_entries")
#: Decoded dictionary pages (their first values, or all), per (file key, row group, column),
#: weighted by Arrow size.
_DICTIONARIES: SizedCache[Hashable, pa.Array] = SizedCache("dictionary_bytes", getsizeof=lambda a: a.nbytes)


def clear_footer_cache() -> None:
    """Forget every cached footer, page index and dictionary (tests, benchmarks of cold reads)."""
    _FOOTERS.clear()
    _PAGES.clear()
    _DICTIONARIES.clear()


def _layout(metadata: pq.FileMetaData) -> FileLayout:
    schema = metadata.schema.to_arrow_schema()
    starts = np.zeros(metadata.num_row_groups + 1, dtype=np.int64)
    for i in range(metadata.num_row_groups):
        starts[i + 1] = starts[i] + metadata.row_group(i).num_rows
    by_id: dict[int, str] = {}
    for f in schema:
        raw = (f.metadata or {}).get(_FIELD_ID_KEY)
        if raw is not None:
            by_id[int(raw)] = f.name
    int96 = frozenset(
        metadata.schema.column(i).path
        for i in range(metadata.num_columns)
        if metadata.schema.column(i).physical_type == "INT96"
    )
    return FileLayout(metadata, schema, starts, by_id, frozenset(schema.names), int96)


@dataclass(frozen=True)
class _OpenFile:
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
        self.file.close()
        self.handle.close()  # ParquetFile does not close a handle it was given


def _open(source: FileAccess, entry: FileEntry, config: ReadConfig | None = None) -> _OpenFile:
    """Open a data file; its footer is read (one request for its last bytes) only on a cache miss."""
    fs, path = source.io.arrow(entry.path)
    try:
        opened = open_versioned(fs, path)
    except FileNotFoundError as e:
        raise TableFormatError(f"data file {entry.path} of the table is missing") from e
    handle = opened.handle
    key = _file_key(entry, opened.size, opened.version)
    layout = _FOOTERS.get(key)
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
        _FOOTERS[key] = layout
    return _OpenFile(pf, handle, layout, key, tail, isinstance(fs, pafs.LocalFileSystem))


def _file_key(entry: FileEntry, size: int, version: str) -> FileKey:
    """What names a data file's bytes in caches: the log's facts and the store's."""
    return (entry.path, entry.size, entry.mtime_ms, size, version)


def file_layout(source: FileAccess, entry: FileEntry) -> FileLayout:
    """The footer facts of one data file (cached while the store reports the same bytes)."""
    opened = _open(source, entry)
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
        layout = _FOOTERS.get(key)
        if layout is not None:
            return key, layout
    opened = _open(source, entry)
    opened.close()
    return opened.key, opened.layout


# --------------------------------------------------------------------------- column resolution


@dataclass(frozen=True)
class Conversion:
    """How one file's stored values become values of a logical type, at every depth.

    ``stored`` is the file's Arrow type (None: the file does not hold the field, which
    reads as nulls). A struct lists, per logical child in order, the name of the stored
    child it is read from (``sources``, None: absent) and that child's conversion; a list
    converts its element, a map its key and value (``children``); anything else is cast.
    """

    target: pa.DataType
    stored: pa.DataType | None
    sources: tuple[str | None, ...] = ()
    children: tuple[Conversion, ...] = ()

    @property
    def identity(self) -> bool:
        """Whether the stored values already are the logical ones (no renaming, no cast)."""
        if self.stored is None:
            return False
        if pa.types.is_struct(self.target):
            assert isinstance(self.target, pa.StructType) and isinstance(self.stored, pa.StructType)
            names = tuple(f.name for f in self.target)
            stored = tuple(f.name for f in self.stored)
            if self.sources != names or stored != names:
                return False
        elif self.children and type(self.stored) is not type(self.target):
            return False  # list vs large list
        if self.children:
            return all(c.identity for c in self.children)
        return bool(self.stored.equals(self.target))


@dataclass(frozen=True)
class Resolved:
    """Where a logical column comes from in one data file.

    Exactly one of: ``stored`` (name of the top-level Parquet column, whose Arrow type
    is ``stored_type`` and whose values become the column's through ``conversion``),
    ``constant`` (a partition column), or neither (absent: nulls).
    """

    column: Column
    stored: str | None = None
    stored_type: pa.DataType | None = None
    is_constant: bool = False
    constant: object = None
    conversion: Conversion | None = None


def resolve_columns(
    snapshot: Snapshot, entry: FileEntry, layout: FileLayout, columns: Sequence[str]
) -> list[Resolved]:
    """Resolve logical ``columns`` in one file (rules in the module docstring)."""
    partition = entry.partition_dict
    out = []
    for name in columns:
        col = snapshot.column(name)
        if not col.in_data_files:
            if name not in partition:
                raise TableFormatError(f"partition column {name!r} has no value for data file {entry.path}")
            out.append(Resolved(col, is_constant=True, constant=partition[name]))
            continue
        stored: str | None
        if col.field_id is not None and layout.by_field_id:
            stored = layout.by_field_id.get(col.field_id)
        else:
            stored = next((n for n in col.file_names or (col.stored_name,) if n in layout.names), None)
        if stored is None:
            out.append(Resolved(col))
        else:
            field = layout.schema.field(stored)
            conversion = conversion_of(col.type, col.fields, field.type, f"column {name!r} of {entry.path}")
            out.append(Resolved(col, stored=stored, stored_type=field.type, conversion=conversion))
    return out


def conversion_of(
    target: pa.DataType, fields: Sequence[Subfield], stored: pa.DataType, where: str
) -> Conversion:
    """How values stored as ``stored`` are read as ``target``, whose subfields are ``fields``.

    A struct's children are found in the stored struct by field id when the logical child
    has one and the stored children carry field ids (a child whose id is not among them is
    absent, even if a child of the same name is there), else by stored name; absent
    children read as nulls. Lists, maps and their nested fields follow the same rule at
    every depth; a stored value of another shape is a TableFormatError naming ``where``.
    """
    if pa.types.is_struct(target):
        assert isinstance(target, pa.StructType)
        if not pa.types.is_struct(stored):
            raise TableFormatError(f"{where} is stored as {stored}, not as a struct")
        assert isinstance(stored, pa.StructType)
        by_id = {i: f for f in stored if (i := _field_id(f)) is not None}
        by_name = {f.name: f for f in stored}
        sources: list[str | None] = []
        children = []
        for logical, sub in zip(target, fields, strict=True):
            if sub.field_id is not None and by_id:
                found = by_id.get(sub.field_id)
            else:
                found = next((by_name[n] for n in sub.file_names or (sub.stored_name,) if n in by_name), None)
            inner = f"{where}, field {logical.name!r}"
            sources.append(found.name if found is not None else None)
            children.append(
                conversion_of(logical.type, sub.children, found.type, inner)
                if found is not None
                else Conversion(logical.type, None)
            )
        return Conversion(target, stored, tuple(sources), tuple(children))
    if _is_list(target):
        if not _is_list(stored):
            raise TableFormatError(f"{where} is stored as {stored}, not as a list")
        element = conversion_of(target.value_type, fields[0].children, stored.value_type, f"{where} element")
        return Conversion(target, stored, children=(element,))
    if pa.types.is_map(target):
        assert isinstance(target, pa.MapType)
        if not pa.types.is_map(stored):
            raise TableFormatError(f"{where} is stored as {stored}, not as a map")
        assert isinstance(stored, pa.MapType)
        key = conversion_of(target.key_type, fields[0].children, stored.key_type, f"{where} key")
        value = conversion_of(target.item_type, fields[1].children, stored.item_type, f"{where} value")
        return Conversion(target, stored, children=(key, value))
    if pa.types.is_nested(stored):
        raise TableFormatError(f"{where} is stored as {stored}, not as {target}")
    return Conversion(target, stored)


def _field_id(field: pa.Field) -> int | None:
    raw = (field.metadata or {}).get(_FIELD_ID_KEY)
    return int(raw) if raw is not None else None


def _is_list(t: pa.DataType) -> bool:
    return pa.types.is_list(t) or pa.types.is_large_list(t)


def _check_columns(snapshot: Snapshot, columns: Sequence[str] | None) -> list[str]:
    names = snapshot.schema.names
    if columns is None:
        return list(names)
    missing = [c for c in columns if c not in names]
    if missing:
        raise QueryError(f"unknown column(s) {missing}; the table has {', '.join(names)}")
    return list(dict.fromkeys(columns))


# --------------------------------------------------------------------------- deletes


def deleted_positions_array(source: FileAccess, entry: FileEntry) -> np.ndarray:
    """Positions deleted from ``entry`` by its deletion vector / position deletes (sorted int64)."""
    if entry.deletes is None:
        return np.zeros(0, dtype=np.int64)
    bitmap = source.deleted_positions(entry)
    return np.frombuffer(bitmap.to_array(), dtype=np.uint64).astype(np.int64)


def equality_delete_mask(
    source: FileAccess, snapshot: Snapshot, entry: FileEntry, rows: pa.Table
) -> np.ndarray | None:
    """Boolean mask of ``rows`` (holding the delete columns) deleted by the entry's equality deletes.

    None when the entry has no equality deletes. Matching is null-safe: a null in a
    delete row matches a null in the data row.
    """
    if not entry.equality_deletes:
        return None
    deleted = np.zeros(rows.num_rows, dtype=bool)
    for eq in entry.equality_deletes:
        cols = [snapshot.column(c) for c in eq.columns]
        dels = source.equality_delete_rows(eq, cols)
        if dels.num_rows == 0 or rows.num_rows == 0:
            continue
        deleted |= _null_safe_match(rows, dels, list(eq.columns), entry.path)
    return deleted


def _null_safe_match(rows: pa.Table, dels: pa.Table, columns: list[str], path: str) -> np.ndarray:
    # Encode each key column over data and delete values with nulls as their own code,
    # then anti-join on the integer codes: null-safe equality for any Arrow type.
    n = rows.num_rows
    left: dict[str, pa.Array] = {"_i": pa.array(np.arange(n, dtype=np.int64))}
    right: dict[str, pa.Array] = {}
    for i, c in enumerate(columns):
        if c not in dels.column_names:
            raise TableFormatError(f"equality delete rows for {path} lack column {c!r}")
        data = rows.column(c)
        other = dels.column(c).cast(data.type)
        both = pa.chunked_array(data.chunks + other.chunks, type=data.type)
        codes = pc.dictionary_encode(both, null_encoding="encode").combine_chunks().indices
        key = f"k{i}"
        left[key] = codes.slice(0, n)
        right[key] = codes.slice(n)
    keys = [f"k{i}" for i in range(len(columns))]
    matched = pa.table(left).join(pa.table(right).group_by(keys).aggregate([]), keys, join_type="left semi")
    mask = np.zeros(n, dtype=bool)
    mask[matched.column("_i").to_numpy()] = True
    return mask


# --------------------------------------------------------------------------- reading


def _constant(value: object, t: pa.DataType, n: int, path: str, name: str) -> pa.Array:
    if value is None:
        return pa.nulls(n, t)
    try:
        one = pa.array([value], type=t)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as e:
        raise TableFormatError(f"partition value {value!r} of {name!r} in {path} is not a {t}: {e}") from e
    return one.take(pa.array(np.zeros(n, dtype=np.int32)))


def _cast(arr: pa.ChunkedArray, t: pa.DataType, path: str, name: str) -> pa.ChunkedArray | pa.Array:
    """A stored primitive column as type ``t``."""
    return _convert(arr, conversion_of(t, (), arr.type, f"column {name!r} of {path}"), path, name)


def _convert(
    arr: pa.ChunkedArray, conversion: Conversion, path: str, name: str
) -> pa.ChunkedArray | pa.Array:
    if conversion.identity and arr.type.equals(conversion.target):
        return arr
    try:
        return _conform(arr.combine_chunks(), conversion)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, ValueError) as e:
        raise TableFormatError(
            f"column {name!r} of {path} is stored as {arr.type}, which does not convert to "
            f"{conversion.target}: {e}"
        ) from e


def _conform(arr: pa.Array, conversion: Conversion) -> pa.Array:
    """``arr`` (of the stored type) as the logical type, by ``conversion`` at every depth.

    Structs, lists and maps are rebuilt around their converted children (zero-copy where
    nothing changes below), keeping the parent's validity; absent struct children are
    nulls; primitives are cast safely.
    """
    t = conversion.target
    if conversion.stored is None:
        return pa.nulls(len(arr), t)
    if conversion.identity and arr.type.equals(t):
        return arr
    if pa.types.is_struct(t):
        assert isinstance(arr, pa.StructArray)
        children = [
            _conform(arr.field(source), c) if source is not None else pa.nulls(len(arr), c.target)
            for source, c in zip(conversion.sources, conversion.children, strict=True)
        ]
        return pa.StructArray.from_arrays(children, fields=list(t), mask=arr.is_null())
    if _is_list(t) or pa.types.is_map(t):
        if arr.offset:  # from_arrays refuses sliced offsets with a null mask: copy
            arr = pa.concat_arrays([arr])
        mask = arr.is_null()
        if pa.types.is_map(t):
            assert isinstance(arr, pa.MapArray)
            key, value = conversion.children
            keys, items = _conform(arr.keys, key), _conform(arr.items, value)
            return pa.MapArray.from_arrays(arr.offsets, keys, items, type=t, mask=mask)
        assert isinstance(arr, (pa.ListArray, pa.LargeListArray))
        values = _conform(arr.values, conversion.children[0])
        if pa.types.is_large_list(t):
            return pa.LargeListArray.from_arrays(arr.offsets.cast(pa.int64()), values, type=t, mask=mask)
        return pa.ListArray.from_arrays(arr.offsets.cast(pa.int32()), values, type=t, mask=mask)
    return arr.cast(t, safe=True)


def read_file(
    source: FileAccess,
    snapshot: Snapshot,
    entry: FileEntry,
    columns: Sequence[str] | None = None,
    *,
    positions: Sequence[int] | np.ndarray | None = None,
    with_positions: bool = False,
    apply_deletes: bool = True,
    config: ReadConfig | None = None,
) -> pa.Table:
    """Rows of one data file in the snapshot's logical schema.

    ``columns`` are logical names (default: every column, in schema order).
    ``positions`` restricts the read to those row positions (sorted, duplicates
    dropped; out of range → QueryError); only the row groups holding them are decoded.
    ``with_positions`` appends ``_row`` (int64 position in the file). With
    ``apply_deletes`` (default) rows deleted by the entry's deletion vector / position
    deletes / equality deletes are left out. ``config`` tunes point reads (default
    ``ReadConfig()``).
    """
    wanted = _check_columns(snapshot, columns)
    eq_cols: list[str] = []
    if apply_deletes and entry.equality_deletes:
        for eq in entry.equality_deletes:
            for c in eq.columns:
                if c not in snapshot.schema.names:
                    raise TableFormatError(f"equality delete {eq.path} names unknown column {c!r}")
                if c not in wanted and c not in eq_cols:
                    eq_cols.append(c)
    read_cols = wanted + eq_cols

    opened = _open(source, entry, config)
    try:
        resolved = resolve_columns(snapshot, entry, opened.layout, read_cols)
        stored = list(dict.fromkeys(r.stored for r in resolved if r.stored is not None))
        rows, data = _read_rows(opened, entry, stored, positions, source if apply_deletes else None, config)
    except (pa.ArrowException, OSError) as e:  # pages that do not decode (a corrupt file)
        raise TableFormatError(f"data file {entry.path} does not decode: {e}") from e
    finally:
        opened.close()

    n = len(rows)
    out: dict[str, pa.ChunkedArray | pa.Array] = {}
    for r in resolved:
        name = r.column.name
        if r.is_constant:
            out[name] = _constant(r.constant, r.column.type, n, entry.path, name)
        elif r.stored is None:
            out[name] = pa.nulls(n, r.column.type)
        else:
            assert r.conversion is not None
            out[name] = _convert(data.column(r.stored), r.conversion, entry.path, name)
    table = pa.table(out, schema=pa.schema([snapshot.schema.field(c) for c in read_cols]))
    if with_positions:
        table = table.append_column(ROW_COLUMN, pa.array(rows, type=pa.int64()))
    if apply_deletes and entry.equality_deletes:
        mask = equality_delete_mask(source, snapshot, entry, table)
        if mask is not None and mask.any():
            table = table.filter(pa.array(~mask))
    if eq_cols:
        table = table.drop_columns(eq_cols)
    return table


def _read_rows(
    opened: _OpenFile,
    entry: FileEntry,
    stored: list[str],
    positions: Sequence[int] | np.ndarray | None,
    deletes_from: FileAccess | None,
    config: ReadConfig | None = None,
) -> tuple[np.ndarray, pa.Table]:
    """(row positions, table of the ``stored`` columns for those rows)."""
    pf, layout = opened.file, opened.layout
    total = layout.num_rows
    deleted = deleted_positions_array(deletes_from, entry) if deletes_from is not None else None

    if positions is None:
        if deleted is not None and len(deleted) and int(deleted[-1]) >= total:
            raise TableFormatError(
                f"deletes of {entry.path} name row {int(deleted[-1])} but the file has {total} rows"
            )
        data = pf.read(columns=stored) if stored else pa.table({})
        rows = np.arange(total, dtype=np.int64)
        if deleted is not None and len(deleted):
            keep = np.ones(total, dtype=bool)
            keep[deleted] = False
            rows = rows[keep]
            data = data.filter(pa.array(keep)) if stored else data
        return rows, data

    pos = np.asarray(positions, dtype=np.int64)
    if not bool(np.all(pos[1:] > pos[:-1])):  # sorted and distinct already: the common case
        pos = np.unique(pos)
    if len(pos) and (pos[0] < 0 or pos[-1] >= total):
        bad = int(pos[0]) if pos[0] < 0 else int(pos[-1])
        raise QueryError(f"row position {bad} is outside {entry.path}, which has {total} rows")
    if deleted is not None and len(deleted):
        pos = pos[~np.isin(pos, deleted, assume_unique=True)]
    if len(pos) == 0 or not stored:
        return pos, pa.table({c: pa.array([], type=layout.schema.field(c).type) for c in stored})
    # Decode only the row groups that hold the wanted rows.
    starts = layout.row_group_starts
    groups = np.searchsorted(starts, pos, side="right") - 1
    bounds = np.searchsorted(groups, np.arange(layout.metadata.num_row_groups + 1))
    parts = []
    cfg = config or _DEFAULT_READ
    for g in np.nonzero(np.diff(bounds))[0]:
        local = pos[bounds[g] : bounds[g + 1]] - starts[g]
        parts.append(_read_group_rows(opened, int(g), local, stored, cfg))
    return pos, pa.concat_tables(parts) if len(parts) > 1 else parts[0]


_DEFAULT_READ = ReadConfig()


def _read_group_rows(
    opened: _OpenFile,
    group: int,
    local: np.ndarray,
    stored: list[str],
    config: ReadConfig,
) -> pa.Table:
    """Rows ``local`` (sorted positions within the row group) of one row group.

    For a few rows of a large row group: only the pages holding them when the file has a
    page index (:mod:`lakehouse_index.read.page_reads`), column by column; the columns the
    page path cannot serve are read batch by batch up to the last wanted row (pyarrow 26
    has no page-level read), and so is every column when the page index or a page does not
    decode (:class:`~lakehouse_index.read.page_index.PageIndexError`). Thresholds:
    ``config.page_read_min_rows`` (below it, and above ``config.point_read_max_rows``
    wanted rows, the row group is decoded whole: that costs less than loading the page
    index), ``config.point_read_batch_rows``. Dictionaries are kept in the process's
    dictionary cache (:class:`~lakehouse_index.config.CacheConfig` ``dictionary_bytes``).
    """
    pf, handle, layout, key = opened.file, opened.handle, opened.layout, opened.key
    group_rows = int(layout.row_group_starts[group + 1] - layout.row_group_starts[group])
    if len(local) == group_rows:  # every row (local is sorted and distinct)
        return without_views(pf.read_row_group(group, columns=stored))
    if group_rows <= config.page_read_min_rows or len(local) > config.point_read_max_rows:
        return without_views(pf.read_row_group(group, columns=stored)).take(pa.array(local))
    try:
        concurrent = not opened.local
        pages = _PAGES.get(key)
        if pages is None:
            pages = load_page_index(handle, layout.metadata, layout.schema, opened.tail)
            _PAGES[key] = pages
        if pages is UNINDEXED:  # pyarrow's and pyiceberg's default: find the pages by their headers
            pages = _PAGES.get((key, group))
            if pages is None:
                pages = walk_page_headers(
                    handle, layout.metadata, layout.schema, group, opened.tail, concurrent
                )
                _PAGES[(key, group)] = pages
        read = read_group_rows(
            handle, pages, layout.schema, group, local, stored, _DICTIONARIES, key, concurrent=concurrent
        )
        served = read.table
    except PageIndexError:
        _PAGES[key] = NO_PAGE_INDEX  # the file will not decode better next time
        return _read_batches(pf, group, local, stored, config.point_read_batch_rows)
    rest = [c for c in stored if c not in served.column_names]
    if not rest:
        return served
    other = _read_batches(pf, group, local, rest, config.point_read_batch_rows)
    parts = {c: served for c in served.column_names} | {c: other for c in rest}
    fields = [parts[c].schema.field(c) for c in stored]
    return pa.Table.from_arrays([parts[c].column(c) for c in stored], schema=pa.schema(fields))


def _read_batches(
    pf: pq.ParquetFile, group: int, local: np.ndarray, columns: list[str], batch_rows: int
) -> pa.Table:
    """Rows ``local`` of ``columns``, decoding the row group only up to the batch holding the last.

    On average half the decode work of the whole row group for a point read.
    """
    last = int(local[-1])
    batches = []
    seen = 0
    for batch in pf.iter_batches(batch_size=batch_rows, row_groups=[group], columns=columns):
        batches.append(batch)
        seen += batch.num_rows
        if seen > last:
            break
    return without_views(pa.Table.from_batches(batches)).take(pa.array(local))


def without_views(data: pa.Table) -> pa.Table:
    """``data`` with its string_view/binary_view columns, nested ones included, cast to the
    plain types (:func:`~lakehouse_index.read.page_decode.plain_type`)."""
    schema = pa.schema([f.with_type(plain_type(f.type)) for f in data.schema], metadata=data.schema.metadata)
    return data if schema.equals(data.schema) else data.cast(schema)


# --------------------------------------------------------------------------- stable row ids


def row_id_column(snapshot: Snapshot, layout: FileLayout) -> str | None:
    """The top-level Parquet column of one file holding materialized row ids, if any.

    Iceberg v3 writes it with the reserved field id :data:`ICEBERG_ROW_ID_FIELD_ID`; Delta
    row tracking stores it under the physical name :attr:`Snapshot.row_id_column` (never
    the stored name of a logical column). None when the snapshot has no row ids or the
    file has no such column (its row ids are all ``first_row_id + position``).
    """
    name = snapshot.row_id_column
    if name is None:
        return None
    by_id = layout.by_field_id.get(ICEBERG_ROW_ID_FIELD_ID)
    if by_id is not None:
        return by_id
    if name not in layout.names:
        return None
    if any(c.in_data_files and c.stored_name == name for c in snapshot.columns):
        return None  # a table column of that name, not a row-id column
    return name


def row_ids(
    source: FileAccess, snapshot: Snapshot, entry: FileEntry, positions: Sequence[int] | np.ndarray
) -> pa.Array:
    """Stable row ids (int64) of the rows at ``positions`` of one data file, in the given order.

    As the formats define them (Delta protocol "Row Tracking", Iceberg v3 "Row Lineage"):
    the file's materialized row-id column (:func:`row_id_column`) at that position when it
    is not null, else ``entry.first_row_id + position``; null when neither exists (and
    for every row when the snapshot has no row ids). Positions are physical row positions
    (deleted rows count); deletes are not applied. The materialized column is read only
    at the wanted positions, and not at all in row groups whose statistics say it is all
    null; a file without it costs its (cached) footer only.
    """
    pos = np.asarray(positions, dtype=np.int64)
    n = len(pos)
    if snapshot.row_id_column is None:
        return pa.nulls(n, pa.int64())
    base = entry.first_row_id
    inherited = pa.array(pos + base, pa.int64()) if base is not None else pa.nulls(n, pa.int64())
    if n == 0:
        return inherited
    layout = file_layout(source, entry)
    stored = row_id_column(snapshot, layout)
    if stored is None:
        return inherited
    uniq, inverse = np.unique(pos, return_inverse=True)
    if uniq[0] < 0 or uniq[-1] >= layout.num_rows:
        bad = int(uniq[0]) if uniq[0] < 0 else int(uniq[-1])
        raise QueryError(f"row position {bad} is outside {entry.path}, which has {layout.num_rows} rows")
    starts = layout.row_group_starts
    groups = np.searchsorted(starts, uniq, side="right") - 1
    wanted = ~np.isin(groups, _all_null_groups(layout, stored, np.unique(groups)))
    values = pa.nulls(len(uniq), pa.int64())
    if wanted.any():
        opened = _open(source, entry)
        try:
            _, data = _read_rows(opened, entry, [stored], uniq[wanted], None)
        finally:
            opened.close()
        read = _cast(data.column(stored), pa.int64(), entry.path, stored)
        read = read.combine_chunks() if isinstance(read, pa.ChunkedArray) else read
        if bool(wanted.all()):
            values = read
        else:
            at = np.full(len(uniq), -1, dtype=np.int64)
            at[np.nonzero(wanted)[0]] = np.arange(len(read), dtype=np.int64)
            values = read.take(pa.array(at, mask=at < 0))
    return pc.coalesce(values.take(pa.array(inverse, pa.int64())), inherited)


def _all_null_groups(layout: FileLayout, stored: str, groups: np.ndarray) -> np.ndarray:
    """The row groups among ``groups`` whose footer statistics say ``stored`` is null in every row."""
    md = layout.metadata
    index = next((i for i in range(md.num_columns) if md.schema.column(i).path == stored), None)
    if index is None:
        return np.zeros(0, dtype=np.int64)
    out = []
    for g in groups.tolist():
        rg = md.row_group(g)
        stats = rg.column(index).statistics
        if stats is not None and stats.has_null_count and stats.null_count == rg.num_rows:
            out.append(g)
    return np.array(out, dtype=np.int64)
