"""The connector contract: what a table format tells the index engine.

A connector (Delta, Iceberg, ...) implements :class:`TableSource` and registers the
class under the entry-point group ``lakehouse_index.connectors``. Connectors import
only this module (which re-exports the errors they raise); the core never imports a
connector by name.

Vocabulary
----------
* A **version** is what users pass as ``version_as_of``: the Delta table version, or
  the Iceberg snapshot id. Versions are opaque integers.
* An **ordinal** orders versions by commit: Delta version, Iceberg sequence number
  (or history position for v1 tables). Index entries are stamped with ordinals, so
  "newer than version v" means "ordinal greater than v's ordinal".
* A **file entry** describes one live data file of a snapshot, with the row-level
  deletes attached to it (Delta deletion vector, Iceberg position deletes / deletion
  vector, Iceberg equality deletes that apply to it).
* Data files are read by the core, not by connectors: :class:`Column` carries the
  physical name and field id under which a logical column is stored, at every depth of
  its type (:class:`Subfield`), and :class:`FileEntry` the partition values that are not
  stored in the file.
"""

from __future__ import annotations

import abc
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache, cached_property
from typing import TYPE_CHECKING, Any, ClassVar
from urllib.parse import quote

import pyarrow as pa
from pyroaring import BitMap64

from lakehouse_index.config import SizedCache
from lakehouse_index.errors import (
    HistoryTruncatedError,
    NotATableError,
    TableFormatError,
    UnsupportedFeatureError,
    VersionNotFoundError,
)
from lakehouse_index.io.base import FileIO, FileStatus
from lakehouse_index.io.uri import canonical_uri

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

__all__ = [
    "Change",
    "Column",
    "ELEMENT",
    "KEY",
    "VALUE",
    "DeleteChange",
    "Diff",
    "EqualityDeletes",
    "FileEntry",
    "FileIO",
    "FileMap",
    "FileStatus",
    "HistoryTruncatedError",
    "NotATableError",
    "RowDeletes",
    "SizedCache",
    "Snapshot",
    "Subfield",
    "TableFormatError",
    "TableSource",
    "UnsupportedFeatureError",
    "VersionInfo",
    "VersionNotFoundError",
    "canonical_uri",
    "relative_log_path",
    "diff_snapshots",
]

ENTRY_POINT_GROUP = "lakehouse_index.connectors"


# --------------------------------------------------------------------------- storage

# FileIO, FileStatus and canonical_uri are defined by the IO layer (lakehouse_index.io),
# SizedCache (caches sized by lakehouse_index.config.CacheConfig) by the configuration;
# they are re-exported here: connectors import only this module.

# --------------------------------------------------------------------------- metadata


@dataclass(frozen=True)
class VersionInfo:
    """One committed table version."""

    version: int
    ordinal: int
    timestamp_ms: int
    parent: int | None = None


@dataclass(frozen=True)
class Subfield:
    """Where one field below a top-level column is stored: a struct field, a list's
    element, a map's key or value.

    ``name`` is the logical name (a struct field's name; ``element``, ``key`` and
    ``value`` for the slots of lists and maps); ``physical_name`` its name inside data
    files (Delta column mapping; None: the logical name; unused for slots, which are
    found by position); ``field_id`` its Parquet field id where the format assigns one
    (Iceberg, Delta column mapping mode ``id``, ``delta.columnMapping.nested.ids``).
    ``children`` describe the field's own type in the same way (see :attr:`Column.subfields`).
    ``file_names``: the names a data file *without field ids* may store the field under
    (Iceberg's name mapping, ``schema.name-mapping.default``); empty: :attr:`stored_name`.
    """

    name: str
    physical_name: str | None = None
    field_id: int | None = None
    children: tuple[Subfield, ...] = ()
    file_names: tuple[str, ...] = ()

    @property
    def stored_name(self) -> str:
        """Name of the field inside data files."""
        return self.physical_name or self.name


#: Logical names of the slots of lists and maps.
ELEMENT, KEY, VALUE = "element", "key", "value"


def default_subfields(t: pa.DataType) -> tuple[Subfield, ...]:
    """The subfields of type ``t`` stored under their logical names, without field ids."""
    if pa.types.is_struct(t):
        assert isinstance(t, pa.StructType)
        return tuple(Subfield(f.name, children=default_subfields(f.type)) for f in t)
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return (Subfield(ELEMENT, children=default_subfields(t.value_type)),)
    if pa.types.is_map(t):
        assert isinstance(t, pa.MapType)
        return (
            Subfield(KEY, children=default_subfields(t.key_type)),
            Subfield(VALUE, children=default_subfields(t.item_type)),
        )
    return ()


def check_subfields(t: pa.DataType, subfields: tuple[Subfield, ...], where: str) -> None:
    """Raise TableFormatError unless ``subfields`` follow the shape of type ``t`` at every depth."""
    if pa.types.is_struct(t):
        assert isinstance(t, pa.StructType)
        names = [f.name for f in t]
        if [s.name for s in subfields] != names:
            raise TableFormatError(f"{where}: subfields {[s.name for s in subfields]} are not {names}")
        children = [f.type for f in t]
    elif pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        if [s.name for s in subfields] != [ELEMENT]:
            raise TableFormatError(f"{where}: a list has one subfield {ELEMENT!r}")
        children = [t.value_type]
    elif pa.types.is_map(t):
        assert isinstance(t, pa.MapType)
        if [s.name for s in subfields] != [KEY, VALUE]:
            raise TableFormatError(f"{where}: a map has the subfields {KEY!r} and {VALUE!r}")
        children = [t.key_type, t.item_type]
    else:
        if subfields:
            raise TableFormatError(f"{where}: type {t} has no subfields")
        return
    for s, child in zip(subfields, children, strict=True):
        check_subfields(child, s.children, f"{where}.{s.name}")


@dataclass(frozen=True)
class Column:
    """A top-level column of a snapshot's logical schema.

    ``physical_name`` is the column's name inside data files (Delta column mapping);
    ``field_id`` its Parquet field id where the format assigns one (Iceberg, Delta
    column mapping mode ``id``): readers resolve by field id first, then by name.
    ``subfields`` say the same of every field nested in ``type``, in the order of the
    type (struct fields; a list's element; a map's key, then value), each with its own
    children: readers resolve nested fields by the same rules at every depth. Empty (the
    default) means every nested field is stored under its logical name without a field
    id; otherwise they must follow the shape of ``type`` exactly.
    ``in_data_files`` is False for Delta partition columns, whose values live in
    :attr:`FileEntry.partition_values` only. ``file_names``: the names a data file
    *without field ids* may store the column under (Iceberg's name mapping,
    ``schema.name-mapping.default``: a file added by ``add_files`` keeps the name the
    column had then); empty: :attr:`stored_name`.
    """

    name: str
    type: pa.DataType
    nullable: bool = True
    physical_name: str | None = None
    field_id: int | None = None
    in_data_files: bool = True
    subfields: tuple[Subfield, ...] = ()
    file_names: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.subfields:
            check_subfields(self.type, self.subfields, f"column {self.name!r}")

    @property
    def stored_name(self) -> str:
        """Name of the column inside data files."""
        return self.physical_name or self.name

    @property
    def fields(self) -> tuple[Subfield, ...]:
        """:attr:`subfields`, or the defaults for :attr:`type` when none were given."""
        return self.subfields or default_subfields(self.type)


@dataclass(frozen=True)
class RowDeletes:
    """Row positions deleted from one data file (a Delta DV, Iceberg position deletes/DV).

    ``id`` identifies the set of positions: two descriptors with the same id delete the
    same rows. Connectors subclass this to carry what they need to read the positions
    (:meth:`TableSource.deleted_positions`).
    """

    id: str
    cardinality: int

    def files(self) -> tuple[str, ...]:
        """URIs of the files that hold these deletes (none for deletes stored inline)."""
        return ()


@dataclass(frozen=True)
class EqualityDeletes:
    """An Iceberg equality-delete file that applies to a data file.

    A row of the data file is deleted when its values of ``columns`` (logical names)
    equal one row of the delete file (nulls match nulls).
    """

    path: str
    columns: tuple[str, ...]
    record_count: int


@dataclass(frozen=True)
class FileEntry:
    """A live data file of a snapshot, with the row-level deletes attached to it.

    ``path`` is an absolute, canonical URI (percent-decoded once). ``partition_values``
    maps logical column names to typed Python values for columns not stored in the file.
    ``first_row_id`` is the stable row id of position 0 (Delta ``baseRowId``, Iceberg
    ``first_row_id``) when the format assigns row ids.
    """

    path: str
    size: int
    mtime_ms: int = 0
    num_records: int | None = None
    partition_values: tuple[tuple[str, Any], ...] = ()
    deletes: RowDeletes | None = None
    equality_deletes: tuple[EqualityDeletes, ...] = ()
    first_row_id: int | None = None

    @property
    def partition_dict(self) -> dict[str, Any]:
        """Partition values as a dict."""
        return dict(self.partition_values)

    @property
    def deleted_count(self) -> int:
        """Number of positions deleted by :attr:`deletes` (equality deletes not counted)."""
        return self.deletes.cardinality if self.deletes else 0


class FileMap(Mapping[str, FileEntry]):
    """A :attr:`Snapshot.files` mapping that may build its entries lazily.

    Connectors with 10^5+ files per snapshot subclass it to keep their files in columns
    and build a :class:`FileEntry` only when one is read; :meth:`total_bytes` must then
    not build entries.
    """

    def total_bytes(self) -> int:
        """Sum of the files' sizes."""
        return sum(f.size for f in self.values())


@dataclass(frozen=True)
class Snapshot:
    """The state of a table at one version: schema and every live data file."""

    version: int
    ordinal: int
    timestamp_ms: int
    columns: tuple[Column, ...]
    files: Mapping[str, FileEntry] = field(default_factory=dict)
    partition_columns: tuple[str, ...] = ()
    #: Name of the column through which the format exposes stable row ids
    #: (e.g. ``_row_id``), or None when the table has none.
    row_id_column: str | None = None

    @cached_property
    def schema(self) -> pa.Schema:
        """The logical Arrow schema (partition columns included; built once per snapshot)."""
        return pa.schema([pa.field(c.name, c.type, c.nullable) for c in self.columns])

    def column(self, name: str) -> Column:
        """The column called ``name``; ``KeyError`` if absent."""
        for c in self.columns:
            if c.name == name:
                return c
        raise KeyError(name)

    @cached_property
    def total_bytes(self) -> int:
        """Sum of live data file sizes (computed once per snapshot)."""
        if isinstance(self.files, FileMap):
            return self.files.total_bytes()
        return sum(f.size for f in self.files.values())


@dataclass(frozen=True)
class DeleteChange:
    """Row-level deletes of a file that stays live changed between two versions.

    Rows in ``after`` but not ``before`` were deleted; rows in ``before`` but not
    ``after`` came back (Delta RESTORE, Iceberg rollback).
    """

    before: FileEntry
    after: FileEntry

    @property
    def path(self) -> str:
        """The data file whose deletes changed."""
        return self.after.path


@dataclass(frozen=True)
class Diff:
    """What differs between the live state of two versions (either direction)."""

    from_version: int
    to_version: int
    added: tuple[FileEntry, ...] = ()
    removed: tuple[FileEntry, ...] = ()
    delete_changes: tuple[DeleteChange, ...] = ()

    @property
    def is_empty(self) -> bool:
        """True when both versions have exactly the same live rows."""
        return not (self.added or self.removed or self.delete_changes)


@dataclass(frozen=True)
class Change:
    """What one commit changed, in commit order.

    ``removed`` entries are as they were live just before the commit (with their
    deletes). ``data_change`` is False when the commit only rearranged rows
    (OPTIMIZE, compaction): the same rows live on in ``added``. ``blind_append`` is True
    when the commit declares it only added rows without reading the table (Delta
    ``commitInfo.isBlindAppend``; False where the format does not say).
    """

    version: int
    ordinal: int
    timestamp_ms: int
    added: tuple[FileEntry, ...] = ()
    removed: tuple[FileEntry, ...] = ()
    delete_changes: tuple[DeleteChange, ...] = ()
    data_change: bool = True
    operation: str | None = None
    blind_append: bool = False


def diff_snapshots(a: Snapshot, b: Snapshot) -> Diff:
    """Compare the live files of two snapshots (generic, reads nothing)."""
    added = tuple(f for p, f in b.files.items() if p not in a.files)
    removed = tuple(f for p, f in a.files.items() if p not in b.files)
    changed = []
    for p, fb in b.files.items():
        fa = a.files.get(p)
        if fa is not None and _deletes_key(fa) != _deletes_key(fb):
            changed.append(DeleteChange(before=fa, after=fb))
    return Diff(a.version, b.version, added, removed, tuple(changed))


def _deletes_key(f: FileEntry) -> tuple[str | None, tuple[str, ...]]:
    return (f.deletes.id if f.deletes else None, tuple(e.path for e in f.equality_deletes))


# --------------------------------------------------------------------------- connector


class TableSource(abc.ABC):
    """One table, read through its format's own metadata. Implemented by connectors.

    Instances cache what they have read: tailing (``changes``) after a warm start costs
    O(new commits). Instances are not thread-safe.
    """

    #: Short format name: ``"delta"``, ``"iceberg"``.
    format_name: ClassVar[str]

    @classmethod
    @abc.abstractmethod
    def detect(cls, uri: str, io: FileIO, **options: Any) -> bool:
        """Whether ``uri`` (or ``options`` such as a catalog) names a table of this format."""

    @classmethod
    @abc.abstractmethod
    def open(cls, uri: str, io: FileIO, **options: Any) -> TableSource:
        """Open the table. Raises NotATableError, UnsupportedFeatureError, TableFormatError."""

    @property
    @abc.abstractmethod
    def uri(self) -> str:
        """Canonical URI of the table root (the default side-car location is below it)."""

    def forget(self) -> None:  # noqa: B027 - a connector without caches has nothing to drop
        """Drop what this instance cached of the table's history, so the next call reads the
        table afresh: needed after the history was rewritten underneath (an erasure purge)."""

    def table_id(self, version: int) -> str | None:
        """An id of the table at ``version`` that a table deleted and created again at the same
        location does not share (Delta: the ``metaData`` id); None when the format has none."""
        return None

    @abc.abstractmethod
    def latest_version(self) -> int:
        """The newest committed version (re-reads the log: sees commits by other engines)."""

    @abc.abstractmethod
    def versions(self) -> list[VersionInfo]:
        """Every version still reachable, oldest first (current lineage first for Iceberg)."""

    @abc.abstractmethod
    def version_info(self, version: int) -> VersionInfo:
        """Ordinal, timestamp and parent of one version; VersionNotFoundError if unknown."""

    @abc.abstractmethod
    def version_at(self, timestamp_ms: int) -> int:
        """The latest version committed at or before ``timestamp_ms``."""

    def resolve_version(self, ref: int | str | None) -> int:
        """A version from a user reference: None → latest, int → itself, str → tag/branch."""
        if ref is None:
            return self.latest_version()
        if isinstance(ref, int):
            self.version_info(ref)
            return ref
        raise VersionNotFoundError(f"{self.format_name} tables have no named references: {ref!r}")

    @abc.abstractmethod
    def snapshot(self, version: int | None = None) -> Snapshot:
        """The live state at ``version`` (latest when None)."""

    @abc.abstractmethod
    def changes(self, after: int | None, upto: int | None = None) -> Iterator[Change]:
        """One :class:`Change` per commit in (after, upto], in commit order.

        ``after=None`` starts from the table's creation. Reads only commits after
        ``after``; raises HistoryTruncatedError if they were cleaned up.
        """

    def diff(self, a: int, b: int) -> Diff:
        """Live-state difference from version ``a`` to ``b`` (``b`` may be older)."""
        return diff_snapshots(self.snapshot(a), self.snapshot(b))

    @abc.abstractmethod
    def deleted_positions(self, entry: FileEntry) -> BitMap64:
        """Row positions deleted by ``entry.deletes`` (empty when None)."""

    def equality_delete_rows(self, deletes: EqualityDeletes, columns: Sequence[Column]) -> pa.Table:
        """Rows of an equality-delete file, with logical column names."""
        raise UnsupportedFeatureError(f"{self.format_name} has no equality deletes")

    def domain_metadata(self, version: int, domain: str) -> str | None:
        """The configuration of a named metadata domain at ``version`` (Delta ``domainMetadata``).

        None when the table has no such domain (or the format has no domains). Writers that
        commit files need it, e.g. the ``delta.rowTracking`` row-id high-water mark.
        """
        return None

    def file_records(self, version: int, paths: Collection[str]) -> dict[str, dict[str, Any]]:
        """The format's own log record of each live file of ``paths`` at ``version``, JSON-able.

        A writer that commits a ``remove`` of exactly these files needs it. Delta: the
        ``add`` action as a new commit would repeat it (``path`` relative to the table root
        when below it and percent-encoded, ``partitionValues``, ``size``, ``deletionVector``,
        ``baseRowId``, ``defaultRowCommitVersion``). Paths that are not live are left out.
        Formats whose commits go through their own library (Iceberg) need not implement it.
        """
        raise UnsupportedFeatureError(f"{self.format_name} does not expose its file records")

    @property
    @abc.abstractmethod
    def io(self) -> FileIO:
        """Storage access for the table's data files."""


def connector_entry_points() -> dict[str, EntryPoint]:
    """The ``lakehouse_index.connectors`` entry points by name, in discovery order (none loaded).

    Discovered once per process, as the index kinds are: a discovery reads the metadata of
    every installed distribution (about 10 ms, which every cold ``open_table`` paid).
    """
    return {ep.name: ep for ep in _discovered_connectors()}


@cache
def _discovered_connectors() -> tuple[EntryPoint, ...]:
    from importlib.metadata import entry_points

    return tuple(entry_points(group=ENTRY_POINT_GROUP))


def load_connector(ep: EntryPoint) -> type[TableSource]:
    """The connector class of one entry point (imports its package and the format's libraries)."""
    cls = ep.load()
    if not (isinstance(cls, type) and issubclass(cls, TableSource)):
        raise TypeError(f"entry point {ep.name} = {ep.value} is not a TableSource")
    return cls


def relative_log_path(table_root: str, uri: str) -> str:
    """The path a new Delta-style log action records for the canonical ``uri``.

    Relative to ``table_root`` and percent-encoded when below it (decoding it once gives
    ``uri`` back), else ``uri`` itself.
    """
    prefix = table_root + "/"
    if uri.startswith(prefix):
        return quote(uri[len(prefix) :], safe="/=")
    return uri
