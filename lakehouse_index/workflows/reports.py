"""Typed, frozen results of writes, syncs and watcher actions."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any

from lakehouse_index.spec import AutoRefresh


class Action(str, Enum):
    """What maintaining one index did."""

    INCREMENTAL = "incremental"  # index data brought to the latest version
    WRITE_JOB = (
        "write_job"  # entries computed from the written rows by the write itself (Spark job or in process)
    )
    QUICK = "quick"  # changes recorded (Pending), repaired by hybrid scan at query time
    NOTHING = "nothing"  # already up to date
    REPORTED = "reported"  # policy off: only the lag is reported
    RACED = "raced"  # another writer (a watcher) updated or is updating the index
    FAILED = "failed"  # the refresh failed; the index stays at its last stable state


@dataclass(frozen=True)
class IndexReport:
    """What happened to one index after a table commit (or on a sync).

    ``indexed_version``: the table version the index data covers after the action;
    ``seen_version``: the newest version its log knows of (a quick refresh records
    changes without indexing them); ``lag`` = commits the index log has not seen
    (table ordinal - seen ordinal; Delta: versions), ``lag_seconds`` the time between
    the seen commit and the latest one. ``entries_written``: index rows written by this
    action (PUT and DEL entries); ``files_tombstoned``: data files newly marked removed.
    ``error`` and ``recovery`` are set when the action failed; ``note`` says why an
    index of a distributed append was indexed by refresh instead of by the write's job.
    """

    name: str
    policy: AutoRefresh
    action: Action
    table_version: int
    version_before: int | None
    indexed_version: int | None
    seen_version: int | None
    lag: int
    lag_seconds: float
    entries_written: int | None = None
    files_tombstoned: int | None = None
    seconds: float = 0.0
    error: str | None = None
    recovery: str | None = None
    note: str | None = None

    @property
    def ok(self) -> bool:
        """False when maintenance of this index failed."""
        return self.action is not Action.FAILED

    def to_json(self) -> dict[str, Any]:
        """The report as a JSON object (the watcher prints one per line with ``--json``)."""
        return {
            "index": self.name,
            "policy": self.policy.value,
            "action": self.action.value,
            "version": self.table_version,
            "version_before": self.version_before,
            "indexed_version": self.indexed_version,
            "seen_version": self.seen_version,
            "lag": self.lag,
            "lag_seconds": round(self.lag_seconds, 3),
            "entries_written": self.entries_written,
            "files_tombstoned": self.files_tombstoned,
            "seconds": round(self.seconds, 3),
            "error": self.error,
            "recovery": self.recovery,
            "note": self.note,
        }


@dataclass(frozen=True)
class Commit:
    """What one format-library call committed: the new table version and the rows it reports
    (None where the library does not say)."""

    version: int
    rows_written: int | None = None
    rows_deleted: int | None = None
    rows_updated: int | None = None


class _IndexReports:
    """The ``ok`` / ``failed`` view of a result's per-index reports."""

    indexes: tuple[IndexReport, ...]

    @property
    def ok(self) -> bool:
        """True when every index was maintained (none failed)."""
        return all(r.ok for r in self.indexes)

    @property
    def failed(self) -> tuple[IndexReport, ...]:
        """The reports of the indexes whose maintenance failed."""
        return tuple(r for r in self.indexes if not r.ok)


@dataclass(frozen=True)
class SyncResult(_IndexReports):
    """``Table.sync_indexes``: the table version synced to and one report per index."""

    table_uri: str
    table_version: int
    indexes: tuple[IndexReport, ...]
    seconds: float


class WritePath(str, Enum):
    """How a write found the rows it changes."""

    #: An index located them; only the files holding them were touched.
    INDEX = "index"
    #: This library's reader scanned for them (a ``where`` with expressions, which only this
    #: library's evaluator and Spark compute); only the files holding them were touched.
    SCAN = "scan"
    #: The format library (deltalake, pyiceberg) scanned for them.
    FORMAT_LIBRARY = "format library"


@dataclass(frozen=True)
class WriteResult(_IndexReports):
    """A write through the API: the commit and what each index did after it.

    ``table_version`` is the version this write committed (for Iceberg writes that make
    several snapshots in one transaction, the last); ``previous_version`` the latest
    version before it. Row counts are None where the format library does not report them.
    ``path`` says how the rows were found; for :attr:`WritePath.INDEX`, ``index`` names the
    index, ``mode`` how the rows were removed (``"copy-on-write"``: ``files_rewritten`` were
    rewritten without them; ``"merge-on-read"``: ``files_marked`` got deletion vectors or
    position deletes) and ``files_added`` holds the written rows.
    ``retries``: how many times the write ran again on a newer version after losing the
    commit race to commits it did not conflict with (``lakehouse_index.sink.conflicts``).
    """

    operation: str
    table_uri: str
    table_version: int
    previous_version: int
    rows_written: int | None
    rows_deleted: int | None
    rows_updated: int | None
    indexes: tuple[IndexReport, ...]
    seconds: float
    path: WritePath = WritePath.FORMAT_LIBRARY
    index: str | None = None
    mode: str | None = None
    files_rewritten: tuple[str, ...] = ()
    files_marked: tuple[str, ...] = ()
    files_added: tuple[str, ...] = ()
    #: Why an index that could have found the rows did not (the format library did instead).
    note: str | None = None
    retries: int = 0


def failure_message(what: str, failed: tuple[IndexReport, ...]) -> str:
    """One message naming every failed index, its error and how to recover."""
    parts = [f"{r.name}: {r.error} — {r.recovery}" for r in failed]
    return f"{what}; index maintenance failed for " + "; ".join(parts)
