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
    """An index log entry is unreadable or of an unknown format version."""


class SparkUnavailableError(LakehouseIndexError):
    """Spark cannot start here (Java missing or too old, pyspark missing)."""


class QueryError(LakehouseIndexError):
    """A lookup, scan or predicate is malformed for this table or index."""
