"""The index log entry: typed metadata of one index snapshot, and its JSON form.

One entry per log position (``_log/00000000000000000007.json``). The format is
documented in docs/FORMAT.md; ``formatVersion`` is checked on read.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any

from lakehouse_index.errors import IndexLogError, InvalidIndexSpecError
from lakehouse_index.kind_registry import spec_from_json
from lakehouse_index.spec import IndexSpec, spec_to_json

#: Version written. Version 2 added ``SourceFile.moves`` (lineage remap), version 3
#: ``SourceFile.equality_applied``, version 4 the covering spec's ``layoutVersion`` (2: Spark's
#: bucketing); older logs are still read (no moves; equality deletes applied unknown; covering
#: layout 1). A reader of an older version refuses newer entries, as it must: it would miss
#: the rows that moved, answer rows an applied equality delete removed, or look for a key in
#: the wrong bucket.
FORMAT_VERSION = 4
#: The version of entries whose spec indexes expressions (``IndexSpec.expressions``): a reader
#: of version 4 would take an expression's text for a column name.
EXPRESSIONS_FORMAT_VERSION = 5
READABLE_VERSIONS = (1, 2, 3, 4, 5)

JsonScalar = str | int | float | bool | None

#: The folder of an index directory that holds its data files (every ``IndexFile.path``).
DATA_DIR = "data"


class IndexState(str, Enum):
    """Lifecycle states (Hyperspace §4.2)."""

    CREATING = "CREATING"
    ACTIVE = "ACTIVE"
    REFRESHING = "REFRESHING"
    OPTIMIZING = "OPTIMIZING"
    DELETING = "DELETING"
    DELETED = "DELETED"
    RESTORING = "RESTORING"
    VACUUMING = "VACUUMING"
    CANCELLING = "CANCELLING"
    DOES_NOT_EXIST = "DOES_NOT_EXIST"

    @property
    def is_stable(self) -> bool:
        """Stable states are those a finished (or never started) operation leaves."""
        return self in (IndexState.ACTIVE, IndexState.DELETED, IndexState.DOES_NOT_EXIST)


class Operation(str, Enum):
    """Index operations, each recorded on the entries it writes."""

    CREATE = "create"
    REFRESH_FULL = "refresh-full"
    REFRESH_INCREMENTAL = "refresh-incremental"
    REFRESH_QUICK = "refresh-quick"
    OPTIMIZE_QUICK = "optimize-quick"
    OPTIMIZE_FULL = "optimize-full"
    #: The purge of an erase: the index without some removed rows' entries.
    OPTIMIZE_PURGE = "optimize-purge"
    DELETE = "delete"
    RESTORE = "restore"
    VACUUM = "vacuum"
    CANCEL = "cancel"


class Level(str, Enum):
    """Where an index data file sits in the LSM."""

    BASE = "base"
    DELTA = "delta"


@dataclass(frozen=True)
class Move:
    """A run of rows of a removed file that lives on, unchanged, in a file added by the same commit.

    Rows ``start .. start+count-1`` of the removed file are rows ``to .. to+count-1`` of
    the file with id ``file_id``.
    """

    start: int
    count: int
    file_id: int
    to: int


@dataclass(frozen=True)
class SourceFile:
    """One source data file covered by the index (an entry of the file-id map).

    ``deletes_id`` / ``deleted_count`` describe the row-level deletes the file has in the
    indexed version. ``added_ordinal`` is the table ordinal from which the file is live;
    ``removed_ordinal`` (set by incremental refreshes, cleared by a full optimize) the
    ordinal at which it stopped being live: a file-level tombstone applied by lineage.
    ``moves`` (lineage remap, only on a removed file) say where its rows went when a
    copy-on-write commit rewrote it: index entries of those rows answer for their new
    address from ``removed_ordinal`` on; rows in no move were deleted by that commit.
    ``equality_applied`` names the equality-delete files (Iceberg) whose rows the index
    entries already leave out: those that applied when the file was indexed, and later
    ones on the record key, written as DEL entries. Other equality deletes are verified
    at read. ``None``: unknown (a log older than format 3).
    """

    id: int
    path: str
    size: int
    mtime_ms: int = 0
    num_records: int | None = None
    deletes_id: str | None = None
    deleted_count: int = 0
    added_ordinal: int = 0
    removed_ordinal: int | None = None
    moves: tuple[Move, ...] = ()
    equality_applied: tuple[str, ...] | None = ()


@dataclass(frozen=True)
class ColumnIdentity:
    """What a column an index reads was, beyond its name, when its entries were computed: a
    column renamed over, or dropped and added again under the same name, is another column."""

    name: str
    #: The name inside data files (Delta column mapping's physical name).
    stored_name: str
    #: The Parquet field id (Iceberg; Delta column mapping mode ``id``).
    field_id: int | None = None
    #: The kind of values it held (``kinds.columns.value_class``: numbers, temporal, string…);
    #: a column retyped to another kind (an overwrite replacing the schema) is another column.
    #: None in entries written before it was recorded (then not checked).
    value_class: str | None = None


@dataclass(frozen=True)
class SourceState:
    """The table state an index snapshot was built for."""

    format: str
    table_uri: str
    version: int
    ordinal: int
    timestamp_ms: int
    files: tuple[SourceFile, ...] = ()
    next_file_id: int = 0
    #: The identity of every column the index reads (``spec.columns``) when its entries were
    #: computed; empty in entries written before it was recorded (then not checked).
    columns: tuple[ColumnIdentity, ...] = ()

    def by_path(self) -> dict[str, SourceFile]:
        """The file-id map keyed by path."""
        return {f.path: f for f in self.files}

    def by_id(self) -> dict[int, SourceFile]:
        """The file-id map keyed by id."""
        return {f.id: f for f in self.files}

    def without_removed(self) -> SourceState:
        """The same state without the files that left the table (what a full optimize keeps)."""
        return replace(self, files=tuple(f for f in self.files if f.removed_ordinal is None))

    def rebased(self, table_uri: str) -> SourceState:
        """This state for the same table at ``table_uri`` (moved or copied with its indexes).

        Paths under the recorded table URI move with it; others (absolute paths outside
        the table, as Iceberg may have) stay as they are.
        """
        return replace(self, table_uri=table_uri, files=_rebase(self.files, self.table_uri, table_uri))


def _rebase(files: tuple[SourceFile, ...], old: str, new: str) -> tuple[SourceFile, ...]:
    prefix, target = old.rstrip("/") + "/", new.rstrip("/") + "/"
    return tuple(
        replace(f, path=target + f.path[len(prefix) :]) if f.path.startswith(prefix) else f for f in files
    )


@dataclass(frozen=True)
class IndexFile:
    """One index data file (a row of the root index).

    ``path`` is relative to the index directory. ``min_key``/``max_key`` bound the key
    tuples in the file (JSON-encoded, see ``kinds.keys``); ``min_ordinal``/``max_ordinal``
    bound the ``_version`` stamps of its entries. ``bucket`` is set for covering indexes.
    """

    path: str
    rows: int
    size: int
    level: Level = Level.BASE
    min_key: tuple[JsonScalar, ...] | None = None
    max_key: tuple[JsonScalar, ...] | None = None
    min_ordinal: int | None = None
    max_ordinal: int | None = None
    bucket: int | None = None

    def newer_than(self, cap: int) -> bool:
        """Whether every entry of this delta file is stamped after ordinal ``cap`` (a read at
        ``cap`` skips the file)."""
        return self.level is Level.DELTA and self.min_ordinal is not None and self.min_ordinal > cap


@dataclass(frozen=True)
class Content:
    """The index data of a snapshot: its files and the oldest ordinal it answers exactly."""

    files: tuple[IndexFile, ...] = ()
    base_ordinal: int | None = None

    @property
    def size(self) -> int:
        """Total bytes of index data."""
        return sum(f.size for f in self.files)

    @property
    def rows(self) -> int:
        """Total index rows."""
        return sum(f.rows for f in self.files)


@dataclass(frozen=True)
class Pending:
    """Table changes recorded by quick refreshes and not yet applied to the index data.

    ``appended`` files are not covered (scanned at query time); ``removed`` file ids
    must be excluded; ``delete_changed`` holds the new row-level deletes of covered files.
    """

    version: int
    ordinal: int
    appended: tuple[SourceFile, ...] = ()
    removed: tuple[int, ...] = ()
    delete_changed: tuple[SourceFile, ...] = ()


@dataclass(frozen=True)
class LogEntry:
    """One index snapshot (stable state) or an operation in progress (transient state)."""

    id: int
    spec: IndexSpec
    state: IndexState
    operation: Operation
    source: SourceState
    content: Content = field(default_factory=Content)
    pending: Pending | None = None
    timestamp_ms: int = 0
    writer: str = ""
    #: For a transient entry: the stable entry the operation started from.
    base_id: int | None = None

    @property
    def name(self) -> str:
        """The index name."""
        return self.spec.name

    def next(self, **changes: Any) -> LogEntry:
        """A copy with the next id and the given fields changed."""
        return replace(self, id=self.id + 1, **changes)

    def rebased(self, table_uri: str) -> LogEntry:
        """This entry read for the table at ``table_uri`` (see :meth:`SourceState.rebased`)."""
        old = self.source.table_uri
        if old == table_uri:
            return self
        pending = self.pending
        if pending is not None:
            pending = replace(
                pending,
                appended=_rebase(pending.appended, old, table_uri),
                delete_changed=_rebase(pending.delete_changed, old, table_uri),
            )
        return replace(self, source=self.source.rebased(table_uri), pending=pending)

    # -------------------------------------------------------------- JSON

    def to_json(self) -> bytes:
        """Serialize (UTF-8 JSON, keys sorted)."""
        return json.dumps(_entry_to_dict(self), sort_keys=True, separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, data: bytes, where: str = "<entry>") -> LogEntry:
        """Deserialize; IndexLogError on malformed data or an unknown format version."""
        try:
            d = json.loads(data)
        except (ValueError, UnicodeDecodeError) as e:
            raise IndexLogError(f"index log entry {where} is not valid JSON: {e}") from e
        if not isinstance(d, dict):
            raise IndexLogError(f"index log entry {where} is not a JSON object")
        version = d.get("formatVersion")
        if version not in READABLE_VERSIONS:
            raise IndexLogError(
                f"index log entry {where} has format version {version!r}; "
                f"this lakehouse-index reads versions {list(READABLE_VERSIONS)}"
            )
        try:
            return _entry_from_dict(d)
        except (KeyError, TypeError, ValueError, AttributeError, InvalidIndexSpecError) as e:
            raise IndexLogError(f"index log entry {where} is malformed: {e!r}") from e


# Readers of JSON values that accept exactly the type written (a forged or corrupt entry
# fails here, as IndexLogError, instead of deep inside a query).


def _int(v: Any) -> int:
    if type(v) is not int:
        raise TypeError(f"expected an integer, got {v!r}")
    return v


def _opt_int(v: Any) -> int | None:
    return None if v is None else _int(v)


def _str(v: Any) -> str:
    if not isinstance(v, str):
        raise TypeError(f"expected a string, got {v!r}")
    return v


def _list(v: Any) -> list[Any]:
    if not isinstance(v, list):
        raise TypeError(f"expected a list, got {v!r}")
    return v


def _dict(v: Any) -> dict[str, Any]:
    if not isinstance(v, dict):
        raise TypeError(f"expected an object, got {v!r}")
    return v


def _key(v: Any) -> tuple[JsonScalar, ...] | None:
    if v is None:
        return None
    if not all(x is None or isinstance(x, str | int | float) for x in _list(v)):
        raise TypeError(f"a key bound holds a value that is not a JSON scalar: {v!r}")
    return tuple(v)


def data_file_path(path: Any) -> str:
    """An ``IndexFile.path`` as read from a log entry: relative, under ``data/``, no ``..``.

    Anything else would let a forged entry make readers open, or vacuum delete, files the
    index does not own (ValueError).
    """
    parts = _str(path).split("/")
    if parts[0] != DATA_DIR or len(parts) < 2 or "" in parts or ".." in parts or "." in parts or ":" in path:
        raise ValueError(f"index file {path!r} is not a relative path under {DATA_DIR}/")
    return path


def _source_file_to_dict(f: SourceFile) -> dict[str, Any]:
    return {
        "id": f.id,
        "path": f.path,
        "size": f.size,
        "mtimeMs": f.mtime_ms,
        "numRecords": f.num_records,
        "deletesId": f.deletes_id,
        "deletedCount": f.deleted_count,
        "addedOrdinal": f.added_ordinal,
        "removedOrdinal": f.removed_ordinal,
        "moves": [[m.start, m.count, m.file_id, m.to] for m in f.moves],
        "equalityApplied": None if f.equality_applied is None else list(f.equality_applied),
    }


def _source_file_from_dict(raw: Any) -> SourceFile:
    d = _dict(raw)
    applied = d.get("equalityApplied")
    return SourceFile(
        id=_int(d["id"]),
        path=_str(d["path"]),
        size=_int(d["size"]),
        mtime_ms=_int(d["mtimeMs"]),
        num_records=_opt_int(d["numRecords"]),
        deletes_id=None if d["deletesId"] is None else _str(d["deletesId"]),
        deleted_count=_int(d["deletedCount"]),
        added_ordinal=_int(d["addedOrdinal"]),
        removed_ordinal=_opt_int(d["removedOrdinal"]),
        moves=tuple(_move(m) for m in _list(d.get("moves", []))),
        equality_applied=None if applied is None else tuple(_str(p) for p in _list(applied)),
    )


def _move(raw: Any) -> Move:
    m = _list(raw)
    if len(m) != 4:
        raise ValueError(f"a move has 4 numbers, not {m!r}")
    return Move(*(_int(x) for x in m))


def _index_file_to_dict(f: IndexFile) -> dict[str, Any]:
    return {
        "path": f.path,
        "rows": f.rows,
        "size": f.size,
        "level": f.level.value,
        "minKey": None if f.min_key is None else list(f.min_key),
        "maxKey": None if f.max_key is None else list(f.max_key),
        "minOrdinal": f.min_ordinal,
        "maxOrdinal": f.max_ordinal,
        "bucket": f.bucket,
    }


def _index_file_from_dict(raw: Any) -> IndexFile:
    d = _dict(raw)
    return IndexFile(
        path=data_file_path(d["path"]),
        rows=_int(d["rows"]),
        size=_int(d["size"]),
        level=Level(d["level"]),
        min_key=_key(d["minKey"]),
        max_key=_key(d["maxKey"]),
        min_ordinal=_opt_int(d["minOrdinal"]),
        max_ordinal=_opt_int(d["maxOrdinal"]),
        bucket=_opt_int(d["bucket"]),
    )


def _entry_to_dict(e: LogEntry) -> dict[str, Any]:
    s = e.source
    p = e.pending
    return {
        "formatVersion": EXPRESSIONS_FORMAT_VERSION if e.spec.expressions else FORMAT_VERSION,
        "id": e.id,
        "spec": spec_to_json(e.spec),
        "state": e.state.value,
        "operation": e.operation.value,
        "source": {
            "format": s.format,
            "tableUri": s.table_uri,
            "version": s.version,
            "ordinal": s.ordinal,
            "timestampMs": s.timestamp_ms,
            "files": [_source_file_to_dict(f) for f in s.files],
            "nextFileId": s.next_file_id,
            "columns": [
                {
                    "name": c.name,
                    "storedName": c.stored_name,
                    "fieldId": c.field_id,
                    "valueClass": c.value_class,
                }
                for c in s.columns
            ],
        },
        "content": {
            "files": [_index_file_to_dict(f) for f in e.content.files],
            "baseOrdinal": e.content.base_ordinal,
        },
        "pending": None
        if p is None
        else {
            "version": p.version,
            "ordinal": p.ordinal,
            "appended": [_source_file_to_dict(f) for f in p.appended],
            "removed": list(p.removed),
            "deleteChanged": [_source_file_to_dict(f) for f in p.delete_changed],
        },
        "timestampMs": e.timestamp_ms,
        "writer": e.writer,
        "baseId": e.base_id,
    }


def _entry_from_dict(d: dict[str, Any]) -> LogEntry:
    s = _dict(d["source"])
    c = _dict(d["content"])
    p = None if d["pending"] is None else _dict(d["pending"])
    return LogEntry(
        id=_int(d["id"]),
        spec=spec_from_json(_dict(d["spec"])),
        state=IndexState(d["state"]),
        operation=Operation(d["operation"]),
        source=SourceState(
            format=_str(s["format"]),
            table_uri=_str(s["tableUri"]),
            version=_int(s["version"]),
            ordinal=_int(s["ordinal"]),
            timestamp_ms=_int(s["timestampMs"]),
            files=tuple(_source_file_from_dict(f) for f in _list(s["files"])),
            next_file_id=_int(s["nextFileId"]),
            columns=tuple(
                ColumnIdentity(
                    _str(c["name"]),
                    _str(c["storedName"]),
                    _opt_int(c["fieldId"]),
                    None if c.get("valueClass") is None else _str(c["valueClass"]),
                )
                for c in map(_dict, _list(s.get("columns", [])))
            ),
        ),
        content=Content(
            files=tuple(_index_file_from_dict(f) for f in _list(c["files"])),
            base_ordinal=_opt_int(c["baseOrdinal"]),
        ),
        pending=None
        if p is None
        else Pending(
            version=_int(p["version"]),
            ordinal=_int(p["ordinal"]),
            appended=tuple(_source_file_from_dict(f) for f in _list(p["appended"])),
            removed=tuple(_int(i) for i in _list(p["removed"])),
            delete_changed=tuple(_source_file_from_dict(f) for f in _list(p["deleteChanged"])),
        ),
        timestamp_ms=_int(d["timestampMs"]),
        writer=_str(d["writer"]),
        base_id=_opt_int(d["baseId"]),
    )
