"""The conflict rules: may a write that lost the commit race commit again on the newer version?

Both formats commit optimistically: a write reads the version it builds on (its *base*)
and commits the next one; when another writer committed first, the format library refuses
the commit (deltalake's ``CommitFailedError``, pyiceberg's ``CommitFailedException`` or
``ValidationException``; each writer raises it as ``WriteConflictError``). The library's
own checks are coarse (deltalake's MERGE conflicts with every concurrent append; file
statistics stand in for rows), so the writer then asks :func:`find_conflict` what the
winning commits did against what the write reads (its :class:`ReadSet`). The rules, per
winning commit in commit order, after Delta's (WriteSerializable / Serializable) and
Iceberg's (``validateNoConflictingData``, ``validateNoConflictingDeletes``):

1. it changed the table's schema (columns, their types, physical names or field ids),
   its partition columns or its identity (a table created again): conflict, for every
   write (appends included: their rows were conformed to the old schema);
2. it removed a file of the base, or changed the row-level deletes of one, holding a live
   row the write reads: conflict. Commits that only rearranged rows (``data_change``
   False: OPTIMIZE, compaction, Iceberg ``replace``) count too: a write whose commit
   repeats file actions computed on the base (the erase's rewrites; Delta's model) would
   bring back the rows the compaction moved;
3. it added data files (``data_change``) holding a row the write reads: conflict when the
   isolation level checks that commit's files (:meth:`Isolation.checks_added`).

"Holds a row the write reads" is decided exactly: only the columns the read set names are
read from those files, by this project's reader and evaluator
(:func:`lakehouse_index.read.scan.scan_files`, so exactly the rows ``scan(where)`` would
return), after partition pruning. Appends read nothing (:meth:`ReadSet.nothing`): they
conflict only by rule 1. Without a conflict :func:`commit_rebasing` runs the write again on
the newer version, which then builds on it: with bounded attempts and jittered backoff.
"""

from __future__ import annotations

import dataclasses
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

from lakehouse_index.errors import WriteConflictError
from lakehouse_index.sink.contract import Commit
from lakehouse_index.sink.read_set import ReadSet
from lakehouse_index.source import Change, Snapshot, TableSource


class Isolation(str, Enum):
    """Which concurrently added files a write must have read (the table's isolation setting).

    ``SERIALIZABLE``: every file added by a winning commit (Delta ``Serializable``, Iceberg
    ``serializable``); ``WRITE_SERIALIZABLE`` (Delta's default): not those of blind appends,
    commits that declared they read nothing of the table (Delta ``isBlindAppend``; the write
    is then ordered before them, as Delta allows); ``SNAPSHOT`` (Iceberg ``snapshot``): none.
    """

    SERIALIZABLE = "Serializable"
    WRITE_SERIALIZABLE = "WriteSerializable"
    SNAPSHOT = "Snapshot"

    def checks_added(self, change: Change) -> bool:
        """Whether rule 3 applies to the files ``change`` added."""
        if not change.data_change or self is Isolation.SNAPSHOT:
            return False
        return self is Isolation.SERIALIZABLE or not change.blind_append


@dataclass(frozen=True)
class Conflict:
    """A winning commit the write conflicts with: its version and what it did."""

    version: int
    reason: str


def _same_table(a: Snapshot | None, b: Snapshot | None, source: TableSource) -> bool:
    if a is None or b is None:
        return True
    return (
        a.columns == b.columns
        and a.partition_columns == b.partition_columns
        and a.row_id_column == b.row_id_column
        and source.table_id(a.version) == source.table_id(b.version)
    )


def find_conflict(
    source: TableSource,
    base: Snapshot | None,
    newer: Snapshot | None,
    reads: ReadSet,
    isolation: Isolation,
) -> Conflict | None:
    """The first commit after ``base`` up to ``newer`` that the write conflicts with (module
    doc), None when it may commit on ``newer``. ``base`` None: the table had no version."""
    if newer is None or (base is not None and base.version == newer.version):
        return None
    changes = list(source.changes(None if base is None else base.version, newer.version))
    if not _same_table(base, newer, source):
        for c in changes:
            if not _same_table(base, source.snapshot(c.version), source):
                return Conflict(c.version, "changed the table's schema, partitioning or identity")
        return Conflict(newer.version, "changed the table's schema, partitioning or identity")
    if not reads.reads_rows:
        return None
    for c in changes:
        if base is not None:
            touched = [e.path for e in c.removed] + [d.path for d in c.delete_changes]
            held = reads.first_holder(source, base, [base.files[p] for p in touched if p in base.files])
            if held is not None:
                what = "removed or rewrote" if c.data_change else "compacted"
                return Conflict(c.version, f"{what} file {held}, which held {reads.describe()}")
        if c.added and isolation.checks_added(c):
            held = reads.first_holder(source, newer, c.added)
            if held is not None:
                return Conflict(
                    c.version,
                    f"added file {held}, which holds {reads.describe()} (isolation level {isolation.value})",
                )
    return None


@dataclass(frozen=True)
class Retries:
    """How often a write that lost the race without a conflict runs again, and the waits between:
    ``attempts`` runs in all, the n-th wait drawn from [0, min(``max_wait_s``,
    ``first_wait_s`` * 2^n)] (full jitter: racing writers spread out)."""

    attempts: int = 10
    first_wait_s: float = 0.01
    max_wait_s: float = 1.0

    def wait(self, n: int) -> None:
        """Sleep before attempt ``n + 2``."""
        time.sleep(random.uniform(0.0, min(self.max_wait_s, self.first_wait_s * 2**n)))


RETRIES = Retries()


def refusal(what: str, uri: str, conflict: Conflict) -> str:
    """The message of a write refused by ``conflict``."""
    return (
        f"{what} on {uri}: version {conflict.version} was committed first and {conflict.reason}; "
        "nothing was written. Run the write again on the new version"
    )


def commit_rebasing(
    source: TableSource,
    base: Snapshot | None,
    reads: ReadSet,
    isolation: Isolation,
    what: str,
    run: Callable[[Snapshot | None], Commit],
    catch_up: Callable[[], int | None],
    retries: Retries = RETRIES,
) -> Commit:
    """``run(base)``, run again after each lost race (a ``WriteConflictError`` from it) the
    winning commits do not conflict with, on the version ``catch_up()`` brought the writer's
    table to (None: none yet); the commit, with ``retries`` set to the reruns.

    A conflict (:func:`find_conflict`) raises WriteConflictError naming the commit and why;
    so does a race still lost after ``retries.attempts`` runs.
    """
    for n in range(retries.attempts):
        try:
            return dataclasses.replace(run(base), retries=n)
        except WriteConflictError as lost:
            version = catch_up()
            newer = None if version is None else source.snapshot(version)
            conflict = find_conflict(source, base, newer, reads, isolation)
            if conflict is not None:
                raise WriteConflictError(
                    refusal(what, source.uri, conflict), version=conflict.version
                ) from lost
            if n == retries.attempts - 1:
                raise WriteConflictError(
                    f"{what} on {source.uri}: lost the commit race {retries.attempts} times in a row "
                    f"to commits that did not conflict with it; nothing was written: {lost}"
                ) from lost
            base = newer
            retries.wait(n)
    raise AssertionError("unreachable")
