"""Skipping files on storage: writing them, and loading the rows live in one version."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from lakehouse_index.config import ExecutorConfig
from lakehouse_index.errors import QueryError, TableFormatError
from lakehouse_index.expressions.indexed import bind_expression
from lakehouse_index.io import Storage, join_uri
from lakehouse_index.kinds.skipping.schema import (
    FILE_ID,
    RESERVED,
    ROWS,
    identity_metadata,
    recorded_identity,
    validate_spec,
    widens,
)
from lakehouse_index.kinds.skipping.stats import build_rows
from lakehouse_index.log.entry import IndexFile, Level
from lakehouse_index.source import FileEntry, Snapshot, TableSource
from lakehouse_index.spec import SkippingIndex

if TYPE_CHECKING:
    from lakehouse_index.kinds.skipping.prune import _ColumnView


def write_skipping_file(
    rows: pa.Table,
    storage: Storage,
    index_dir: str,
    rel_path: str,
    level: Level = Level.BASE,
    row_group_rows: int = ExecutorConfig.skipping_row_group_rows,
) -> IndexFile:
    """Write ``rows`` as one Parquet file at ``index_dir/rel_path``; its root-index record.

    ``rel_path`` is relative to the index directory (``ctx.data_path("skipping.parquet")``
    in an operation body) and is what the returned :class:`IndexFile` names.
    """
    uri = join_uri(index_dir, rel_path)
    fs, inner = storage.arrow(uri)
    fs.create_dir(inner.rsplit("/", 1)[0], recursive=True)
    pq.write_table(rows, inner, filesystem=fs, row_group_size=row_group_rows, compression="zstd")
    size = storage.stat(uri).size
    return IndexFile(path=rel_path, rows=rows.num_rows, size=size, level=level)


def build_files(
    source: TableSource,
    snapshot: Snapshot,
    spec: SkippingIndex,
    jobs: Sequence[tuple[FileEntry, int]],
    storage: Storage,
    index_dir: str,
    rel_path: str,
    level: Level,
    row_group_rows: int = ExecutorConfig.skipping_row_group_rows,
) -> tuple[IndexFile, ...]:
    """:func:`build_rows` then :func:`write_skipping_file`; ``()`` when there is nothing to index."""
    validate_spec(spec, snapshot)
    if not jobs:
        return ()
    rows = build_rows(source, snapshot, spec, jobs)
    return (write_skipping_file(rows, storage, index_dir, rel_path, level, row_group_rows),)


@dataclass(frozen=True)
class SkippingData:
    """The skipping rows of the files live in one version: one row per file id, sorted by it.

    ``rows`` has the layout of the module docstring (compaction writes it back as is).
    """

    rows: pa.Table
    file_ids: np.ndarray
    #: Column statistics prepared for pruning, per (column, type the predicate reads it as).
    _views: dict[tuple[str, str], _ColumnView | None] = field(
        default_factory=dict, compare=False, repr=False, hash=False
    )

    @classmethod
    def of(cls, rows: pa.Table) -> SkippingData:
        """Wrap skipping rows that hold at most one row per file id (e.g. from :func:`build_rows`)."""
        rows = rows.sort_by(FILE_ID).combine_chunks()
        ids = np.asarray(rows.column(FILE_ID).to_numpy(), dtype=np.int64)
        if len(ids) > 1 and (np.diff(ids) == 0).any():
            raise ValueError("skipping rows hold two rows for one file id; use load() to merge them")
        return cls(rows, ids)

    @property
    def columns(self) -> tuple[str, ...]:
        """The indexed columns."""
        return tuple(n for n in self.rows.column_names if n not in RESERVED)

    @property
    def nbytes(self) -> int:
        """Memory held."""
        return int(self.rows.nbytes)


def load(
    storage: Storage,
    index_dir: str,
    files: Sequence[IndexFile],
    live_ids: Iterable[int],
    snapshot: Snapshot | None = None,
) -> SkippingData:
    """Read the skipping files ``files`` (in log order); keep the rows of ``live_ids``.

    When two files hold a row for the same file id, the later file's row wins. With
    ``snapshot`` (the table version being queried), the statistics of a column are left
    out (so it prunes nothing) when the snapshot no longer has the column, or has
    another column under its name (dropped and re-added, renamed over: different
    physical name or field id), or a type the recorded one does not widen to.
    """
    live = np.fromiter(live_ids, dtype=np.int64)
    # Files holding no live file's row are left out before their schemas meet: statistics of
    # files an overwrite that retyped a column removed need not merge with the new ones.
    tables = [
        t
        for t in (_read(storage, join_uri(index_dir, f.path)) for f in files)
        if np.isin(np.asarray(t.column(FILE_ID).to_numpy(), dtype=np.int64), live).any()
    ]
    if not tables:
        empty = pa.schema([pa.field(FILE_ID, pa.int64()), pa.field(ROWS, pa.int64())]).empty_table()
        return SkippingData(empty, np.zeros(0, dtype=np.int64))
    if snapshot is not None:
        stale = set().union(*(_stale_columns(t, snapshot) for t in tables))
        tables = [t.drop_columns([c for c in t.column_names if c in stale]) for t in tables]
    try:
        rows = pa.concat_tables(tables, promote_options="permissive").combine_chunks()
    except (pa.ArrowInvalid, pa.ArrowTypeError) as e:
        raise TableFormatError(f"skipping index files under {index_dir} do not share a schema: {e}") from e
    keep = _latest(np.asarray(rows.column(FILE_ID).to_numpy(), dtype=np.int64), live)
    # Keep the column identities (later files win) so that compaction can write ``rows`` back.
    identity: dict[str, Any] = {}
    for t in tables:
        identity.update(recorded_identity(t.schema))
    identity = {c: v for c, v in identity.items() if c in rows.column_names}
    rows = rows.take(pa.array(keep, pa.int64())).replace_schema_metadata(
        identity_metadata(identity) if identity else None
    )
    return SkippingData.of(rows)


def _read(storage: Storage, uri: str) -> pa.Table:
    fs, inner = storage.arrow(uri)
    try:
        return pq.read_table(inner, filesystem=fs)
    except FileNotFoundError as e:
        raise TableFormatError(f"skipping index file {uri} is missing") from e
    except (pa.ArrowInvalid, OSError) as e:
        raise TableFormatError(f"skipping index file {uri} is not readable: {e}") from e


def _latest(ids: np.ndarray, live: np.ndarray) -> np.ndarray:
    """Positions (ascending) of the last occurrence in ``ids`` of every id in ``live``."""
    # Last occurrence of every id: first occurrence in the reversed order.
    rev_unique, rev_first = np.unique(ids[::-1], return_index=True)
    last = len(ids) - 1 - rev_first
    keep = last[np.isin(rev_unique, live)]
    keep.sort()
    return keep


def _stale_columns(table: pa.Table, snapshot: Snapshot) -> set[str]:
    """Indexed columns of one skipping file whose statistics do not describe ``snapshot``'s column."""
    identity = recorded_identity(table.schema)
    stale = set()
    for name in table.column_names:
        if name in RESERVED:
            continue
        recorded = identity.get(name)
        current = _current_type(name, recorded, snapshot)
        stored_type = table.schema.field(name).type.field("min").type
        if current is None or not widens(stored_type, current):
            stale.add(name)
    return stale


def _same_column(recorded: dict[str, Any] | None, snapshot: Snapshot, name: str) -> pa.DataType | None:
    """The type of ``snapshot``'s column ``name`` when it is the column ``recorded`` identifies."""
    try:
        col = snapshot.column(name)
    except KeyError:
        return None
    if recorded is not None and (
        recorded.get("storedName") != col.stored_name or recorded.get("fieldId") != col.field_id
    ):
        return None
    return col.type


def _current_type(name: str, recorded: dict[str, Any] | None, snapshot: Snapshot) -> pa.DataType | None:
    """The type statistics of indexed column ``name`` are read as at ``snapshot`` (None: they
    describe no column of it). An indexed expression's: its value's type, when every column
    it reads is the one it read when they were computed."""
    sources = (recorded or {}).get("sources")
    if sources is None:
        return _same_column(recorded, snapshot, name)
    if any(_same_column(r, snapshot, c) is None for c, r in sources.items()):
        return None
    try:
        return bind_expression(name, snapshot.schema)[1].type
    except QueryError:
        return None
