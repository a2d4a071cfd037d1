"""The mutating operations of the crash harness: how to set each up, run it, and what it may commit.

Each :class:`CrashOp` runs against a :class:`tests.workflows.watched.Watched` table of either
format (the indexes of :func:`tests.workflows.helpers.create_indexes`: ``by_k`` secondary,
incremental; ``by_kk`` composite, quick; ``cov`` covering, off). ``prepare`` gives the
operation work to do (in the parent), ``run`` is what the killed child executes (and the
parent reruns), ``points`` are the named crash points it passes
(:mod:`lakehouse_index.faults`), ``commit_points`` those reached after its table commit,
and ``expected`` the table's rows after its commit, computed with pyarrow from the rows before
(the independent oracle of "the table holds exactly the commits that succeeded").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

import lakehouse_index as li
from lakehouse_index.errors import IllegalIndexStateError, IndexExistsError
from lakehouse_index.log.entry import IndexState, Operation
from lakehouse_index.log.lifecycle import start_operation
from lakehouse_index.log.store import IndexCatalog
from tests.workflows.helpers import SCHEMA, rows
from tests.workflows.watched import Watched

#: The data subject erase erases: a key no path or number of the test can contain by chance
#: (the residue scan after the purge looks for the value in every file, paths included).
SUBJECT = "subject-9c41e"
#: The rows every crash table starts with (two partitions: two data files).
FIRST = [
    (1, "a", 0, 10, "x"),
    (2, "b", 1, 20, "y"),
    (3, "c", 2, 30, "x"),
    (4, "a", 1, 40, "y"),
    (11, SUBJECT, 1, 110, "x"),
    (12, SUBJECT, 2, 120, "y"),
]
#: The new rows writes bring (id 4 exists: the upsert updates it).
NEW = rows([(4, "b", 2, 41, "y"), (5, "c", 0, 50, "x"), (6, "a", 2, 60, "y")])


@dataclass(frozen=True)
class CrashOp:
    """One mutating operation under test."""

    name: str
    #: What the child runs (the parent reruns it after the kill).
    run: Callable[[li.Table], object]
    #: The named crash points the operation passes, in order.
    points: tuple[str, ...]
    #: Work set up in the parent before the child starts.
    prepare: Callable[[Watched], None] = lambda w: None
    #: Points reached after the operation's table commit (writes and erase).
    commit_points: frozenset[str] = frozenset()
    #: The table's rows after the commit, from the rows before (``None``: never commits).
    expected: Callable[[pa.Table], pa.Table] | None = None
    #: A rerun after the kill: the user's way to finish the operation (default ``run``).
    rerun: Callable[[li.Table, bool], object] | None = None
    #: Whether the operation removes table history (erase with purge: old versions go).
    purges: bool = False


def _index_ops(op: str, *, data: bool) -> tuple[str, ...]:
    return (
        f"{op}.after_transient",
        *(("index_data.file_written",) if data else ()),
        f"{op}.after_data",
        f"{op}.after_final",
    )


def _work(w: Watched) -> None:
    """Table commits the index has not seen: an appended file and a copy-on-write delete."""
    w.native_append(rows([(7, "b", 0, 70, "x"), (8, "c", 1, 80, "y")]))
    w.native_delete("id = 2")


def _delta_files(w: Watched) -> None:
    """Two incremental refreshes (two delta files to optimize; older snapshots to vacuum)."""
    for i in (9, 10):
        w.native_append(rows([(i, "abc"[i % 3], i % 3, i * 10, "x")]))
        w.t.refresh_index("by_k", "incremental")


def _deleted(w: Watched) -> None:
    """A soft-deleted index (what restore brings back)."""
    w.t.delete_index("by_k")


def _old_snapshots(w: Watched) -> None:
    """Snapshots and data a zero-retention vacuum removes: delta files, then a full optimize."""
    _delta_files(w)
    w.t.optimize_index("by_k", "full")


def _stuck(w: Watched) -> None:
    """A refresh whose process died after its transient entry (what cancel resolves)."""
    log = IndexCatalog(w.t.storage, w.t.index_root).log("by_k")
    start_operation(log, Operation.REFRESH_INCREMENTAL, writer="crash-harness:0")


def _stable_state(t: li.Table, name: str) -> IndexState | None:
    entry = IndexCatalog(t.storage, t.index_root).log(name).latest()
    return None if entry is None else entry.state


def _create_again(t: li.Table, _committed: bool) -> object:
    try:
        return t.create_index(li.SecondaryIndex("by_v", key="v"))
    except IndexExistsError:
        return None  # the killed create had finished


def _only_if(state: IndexState, run: Callable[[li.Table], object]) -> Callable[[li.Table, bool], object]:
    def rerun(t: li.Table, _committed: bool) -> object:
        return run(t) if _stable_state(t, "by_k") is state else None

    return rerun


def _cancel_again(t: li.Table, _committed: bool) -> object:
    try:
        return t.cancel_index("by_k")
    except IllegalIndexStateError:
        return None  # the killed cancel had finished


def _write(run: Callable[[li.Table], object]) -> Callable[[li.Table, bool], object]:
    """Rerun of a write: repeat it if it did not commit, else bring the indexes up (sync)."""

    def rerun(t: li.Table, committed: bool) -> object:
        return t.sync_indexes() if committed else run(t)

    return rerun


def _where_not(table: pa.Table, column: str, value: object) -> pa.Table:
    return table.filter(pc.invert(pc.equal(table[column], value)))


def _update(before: pa.Table) -> pa.Table:
    hit = pc.equal(before["k"], "c")
    return before.set_column(
        SCHEMA.get_field_index("v"), "v", pc.if_else(hit, pa.scalar(99, pa.int64()), before["v"])
    )


def _upsert(before: pa.Table) -> pa.Table:
    kept = before.filter(pc.invert(pc.is_in(before["id"], NEW["id"])))
    return pa.concat_tables([kept, NEW.select(before.column_names)])


def _write_points(new_rows: bool) -> tuple[str, ...]:
    """The points of a write; ``new_rows``: whether its index maintenance writes index data (a
    delete, or an update of a column no maintained index holds, is only a lineage remap of the
    rewritten files: no index file)."""
    return (
        "write.before_commit",
        "write.after_commit",
        "refresh-incremental.after_transient",
        *(("index_data.file_written",) if new_rows else ()),
        "refresh-incremental.after_final",
        "sync.after_index",
    )


def _writes() -> list[CrashOp]:
    def write(
        name: str,
        run: Callable[[li.Table], object],
        expected: Callable[[pa.Table], pa.Table],
        *,
        new_rows: bool = True,
    ) -> CrashOp:
        points = _write_points(new_rows)
        after = frozenset(points[1:])
        return CrashOp(name, run, points, commit_points=after, expected=expected, rerun=_write(run))

    return [
        write("append", lambda t: t.append(NEW), lambda b: pa.concat_tables([b, NEW.select(b.column_names)])),
        write(
            "overwrite",
            lambda t: t.overwrite(NEW, where="k = 'a'"),
            lambda b: pa.concat_tables([_where_not(b, "k", "a"), NEW.select(b.column_names)]),
        ),
        write(
            "delete-rows", lambda t: t.delete("k = 'b'"), lambda b: _where_not(b, "k", "b"), new_rows=False
        ),
        write("update", lambda t: t.update("k = 'c'", {"v": 99}), _update, new_rows=False),
        write("upsert", lambda t: t.upsert(NEW, on="id"), _upsert),
    ]


def _erase(t: li.Table) -> object:
    return t.erase("by_k", [SUBJECT], purge=True, force=True)


#: Every operation of the harness, by name.
OPS: dict[str, CrashOp] = {
    op.name: op
    for op in [
        CrashOp(
            "create",
            lambda t: t.create_index(li.SecondaryIndex("by_v", key="v")),
            _index_ops("create", data=True),
            rerun=_create_again,
        ),
        CrashOp(
            "refresh-full",
            lambda t: t.refresh_index("by_k", "full"),
            _index_ops("refresh-full", data=True),
            prepare=_work,
        ),
        CrashOp(
            "refresh-incremental",
            lambda t: t.refresh_index("by_k", "incremental"),
            _index_ops("refresh-incremental", data=True),
            prepare=_work,
        ),
        CrashOp(
            "refresh-quick",
            lambda t: t.refresh_index("by_k", "quick"),
            _index_ops("refresh-quick", data=False),
            prepare=_work,
        ),
        CrashOp(
            "optimize-quick",
            lambda t: t.optimize_index("by_k", "quick"),
            _index_ops("optimize-quick", data=True),
            prepare=_delta_files,
        ),
        CrashOp(
            "optimize-full",
            lambda t: t.optimize_index("by_k", "full"),
            _index_ops("optimize-full", data=True),
            prepare=_delta_files,
        ),
        CrashOp(
            "delete",
            lambda t: t.delete_index("by_k"),
            ("delete.after_transient", "delete.after_final"),
            rerun=_only_if(IndexState.ACTIVE, lambda t: t.delete_index("by_k")),
        ),
        CrashOp(
            "restore",
            lambda t: t.restore_index("by_k"),
            ("restore.after_transient", "restore.after_final"),
            prepare=_deleted,
            rerun=_only_if(IndexState.DELETED, lambda t: t.restore_index("by_k")),
        ),
        CrashOp(
            "vacuum",
            lambda t: t.vacuum_index("by_k", retention_hours=0),
            (
                "vacuum.after_transient",
                "vacuum.after_expire",
                "vacuum.data_deleted",
                "vacuum.after_data",
                "vacuum.after_final",
            ),
            prepare=_old_snapshots,
        ),
        CrashOp(
            "cancel",
            lambda t: t.cancel_index("by_k"),
            ("cancel.after_transient", "cancel.after_final"),
            prepare=_stuck,
            rerun=_cancel_again,
        ),
        *_writes(),
        CrashOp(
            "erase",
            _erase,
            (
                "erase.after_locate",
                "erase.after_delete",
                "refresh-incremental.after_transient",
                "erase.after_refresh",
                "purge.recorded",
                "optimize-full.after_transient",
                "erase.after_purge",
                "erase.after_verify",
            ),
            commit_points=frozenset(
                {
                    "erase.after_delete",
                    "refresh-incremental.after_transient",
                    "erase.after_refresh",
                    "purge.recorded",
                    "optimize-full.after_transient",
                    "erase.after_purge",
                    "erase.after_verify",
                }
            ),
            expected=lambda b: _where_not(b, "k", SUBJECT),
            rerun=lambda t, _committed: _erase(t),
            purges=True,
        ),
        CrashOp(
            "watch",
            lambda t: li.watch([t], once=True, handle_signals=False),
            (
                "refresh-incremental.after_transient",
                "index_data.file_written",
                "refresh-incremental.after_final",
                "sync.after_index",
                "watch.after_poll",
            ),
            prepare=_work,
        ),
    ]
}
