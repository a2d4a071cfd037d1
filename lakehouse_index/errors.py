"""Every error lakehouse-index raises on purpose. Each class says when it is raised."""

from __future__ import annotations


class LakehouseIndexError(Exception):
    """Base class of every error raised on purpose by lakehouse-index."""


class NotATableError(LakehouseIndexError):
    """The location holds no table any installed connector recognises."""


class TableFormatError(LakehouseIndexError):
    """The table's own metadata is corrupt, inconsistent or incomplete (names the file)."""


class UnsupportedFeatureError(LakehouseIndexError):
    """The table uses a reader feature this connector cannot honour (names the feature)."""


class VersionNotFoundError(LakehouseIndexError):
    """The requested table version, snapshot, tag or timestamp does not exist (or was cleaned up)."""


class HistoryTruncatedError(VersionNotFoundError):
    """Commits needed to tail from a position were cleaned up; resync from a snapshot."""


class VersionPurgedError(VersionNotFoundError):
    """The requested version was purged for a GDPR erasure (``_erasure/purges/`` says when).

    Raised instead of answering: a purged version's rows no longer exist anywhere.
    """


class PurgeRefusedError(LakehouseIndexError):
    """A purge was refused before anything changed: the table's retention settings forbid it
    (each reason names the setting; ``force=True`` overrides), or the version to keep is not
    the table's latest."""


class InvalidIndexSpecError(LakehouseIndexError):
    """An index specification is malformed or does not fit the table's schema."""


class IndexNotFoundError(LakehouseIndexError):
    """No index of that name exists on the table."""


class IndexExistsError(LakehouseIndexError):
    """An index of that name already exists (and is not vacuumed)."""


class IllegalIndexStateError(LakehouseIndexError):
    """The operation is not allowed in the index's current lifecycle state."""


class ConcurrentIndexUpdate(LakehouseIndexError):
    """Another writer committed the log entry this operation wanted to write; retry."""


class IndexBusyError(ConcurrentIndexUpdate, IllegalIndexStateError):
    """Another operation on the index is in progress (its transient entry is the latest).

    Both a ``ConcurrentIndexUpdate`` (retry once it finishes) and an
    ``IllegalIndexStateError`` (the operation is not allowed in a transient state); if
    the writer of the transient entry died, ``cancel`` the index.
    """


class IndexLogError(LakehouseIndexError):
    """An index log entry is unreadable or of an unknown format version (also raised for the
    other side-car records: erasure audit and purge records)."""


class SparkUnavailableError(LakehouseIndexError):
    """Spark cannot start here (Java missing or too old, pyspark missing)."""


class QueryError(LakehouseIndexError):
    """A lookup, scan or predicate is malformed for this table or index."""


class WriteRefusedError(LakehouseIndexError):
    """A write was refused before anything was committed: the table and its indexes are unchanged.

    Raised for data whose schema does not fit the table, ``upsert`` keys that are not
    unique (or null) in the data, and tables this process must not write (read-only).
    """


class ReadOnlyTableError(WriteRefusedError):
    """The table was opened read-only (indexes under a separate ``index_root``, or an
    Iceberg table opened by path, which has no atomic commit): writes are refused."""


class UnsupportedWriterFeatureError(UnsupportedFeatureError, WriteRefusedError):
    """The table declares a writer feature the format library used for writes cannot honour
    (names the feature); nothing was written."""


class WriteConflictError(LakehouseIndexError):
    """Another writer won the table commit with a change this write conflicts with (it removed,
    rewrote or added rows the write reads, or changed the schema), or the race was lost too
    often in a row (``lakehouse_index.sink.conflicts``).

    Nothing of this write was committed; re-run it against the new table state. ``version``:
    the winning commit the write conflicts with (None when the race was lost too often).
    """

    def __init__(self, message: str, version: int | None = None) -> None:
        super().__init__(message)
        self.version = version


class IndexMaintenanceError(LakehouseIndexError):
    """The table commit succeeded but maintaining one or more indexes failed.

    The commit stands. Each failed index stays at its last stable state (still answering
    correctly through the hybrid scan); the message names it and how to recover
    (``refresh_index`` or, for an operation left in progress, ``cancel_index``).
    ``result`` holds the write's (or sync's) full result with every index report.
    """

    def __init__(self, message: str, result: object) -> None:
        super().__init__(message)
        self.result = result


class SchemaMismatchError(WriteRefusedError):
    """The data's columns or types do not fit the table's schema (names each difference)."""


class DuplicateKeyError(WriteRefusedError):
    """``upsert`` data holds a key twice (or a null key): which row wins would be undefined."""


class EraseRefusedError(WriteRefusedError, ValueError):
    """An erase was refused before anything changed: bad keys, the wrong index, retention settings."""


class ErasureVerificationError(LakehouseIndexError):
    """After an erase, a subject was still found (by the index or in a file); ``report`` says where."""

    def __init__(self, message: str, report: object = None) -> None:
        super().__init__(message)
        self.report = report


class ErasedSubjectsWarning(UserWarning):
    """A time-travel read of a version that still holds subjects erased by a later version."""
