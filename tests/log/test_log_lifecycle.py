"""The lifecycle state machine: every operation from every state, rollback, cancel, re-create.

The expected transitions below are written out from the Hyperspace §4.2 lifecycle as the
project brief states it, independently of ``lifecycle.TRANSITIONS``.
"""

from __future__ import annotations

import pytest
from logtest_helpers import append_body, create_body, source, spec, tokens_of, write_token

from lakehouse_index.errors import (
    ConcurrentIndexUpdate,
    IllegalIndexStateError,
    IndexExistsError,
    IndexNotFoundError,
    InvalidIndexSpecError,
)
from lakehouse_index.io.base import FileStatus
from lakehouse_index.log.entry import Content, IndexState, LogEntry, Operation
from lakehouse_index.log.garbage import Garbage, orphans, referenced_paths
from lakehouse_index.log.lifecycle import (
    IndexBusyError,
    OpContext,
    OpResult,
    allowed_operations,
    cancel,
    run_operation,
)
from lakehouse_index.log.store import IndexLog

S = IndexState
O = Operation  # noqa: E741

REFRESHES = (O.REFRESH_FULL, O.REFRESH_INCREMENTAL, O.REFRESH_QUICK)
OPTIMIZES = (O.OPTIMIZE_QUICK, O.OPTIMIZE_FULL, O.OPTIMIZE_PURGE)
TRANSIENT = (S.CREATING, S.REFRESHING, S.OPTIMIZING, S.DELETING, S.RESTORING, S.VACUUMING, S.CANCELLING)

# (operation, state of the latest entry) -> (transient state, final state)
EXPECTED: dict[tuple[Operation, IndexState | None], tuple[IndexState, IndexState]] = {
    (O.CREATE, None): (S.CREATING, S.ACTIVE),
    (O.CREATE, S.DOES_NOT_EXIST): (S.CREATING, S.ACTIVE),
    **{(op, S.ACTIVE): (S.REFRESHING, S.ACTIVE) for op in REFRESHES},
    **{(op, S.ACTIVE): (S.OPTIMIZING, S.ACTIVE) for op in OPTIMIZES},
    (O.DELETE, S.ACTIVE): (S.DELETING, S.DELETED),
    (O.RESTORE, S.DELETED): (S.RESTORING, S.ACTIVE),
    (O.VACUUM, S.DELETED): (S.VACUUMING, S.DOES_NOT_EXIST),
    (O.VACUUM, S.ACTIVE): (S.VACUUMING, S.ACTIVE),
}
# Where a stuck operation started from (set up below); cancel returns there.
BASE_OF = {
    S.CREATING: None,
    S.REFRESHING: S.ACTIVE,
    S.OPTIMIZING: S.ACTIVE,
    S.DELETING: S.ACTIVE,
    S.RESTORING: S.DELETED,
    S.VACUUMING: S.DELETED,
    S.CANCELLING: S.ACTIVE,
}
for _s in TRANSIENT:
    EXPECTED[(O.CANCEL, _s)] = (S.CANCELLING, BASE_OF[_s] or S.DOES_NOT_EXIST)


def expected_error(op: Operation, state: IndexState | None) -> type[Exception]:
    if state in TRANSIENT:
        return IndexBusyError
    if op is O.CANCEL:
        return IllegalIndexStateError
    if op is O.CREATE:
        return IndexExistsError
    if state in (None, S.DOES_NOT_EXIST):
        return IndexNotFoundError
    return IllegalIndexStateError


def _entry(i: int, state: IndexState, op: Operation, base: int | None, content: Content) -> LogEntry:
    return LogEntry(
        id=i, spec=spec(), state=state, operation=op, source=source(i), content=content, base_id=base
    )


def setup_log(log: IndexLog, state: IndexState | None) -> None:
    """Write a small history whose latest entry is in ``state``."""
    if state is None:
        return
    data = "data/seed/part.bin"
    log.storage.write_bytes(log.uri(data), b"seed")
    from lakehouse_index.log.entry import IndexFile

    content = Content((IndexFile(data, rows=1, size=4),))
    if state is S.ACTIVE:
        log.write(_entry(0, S.ACTIVE, O.CREATE, None, content))
    elif state is S.DELETED:
        log.write(_entry(0, S.ACTIVE, O.CREATE, None, content))
        log.write(_entry(1, S.DELETED, O.DELETE, 0, content))
    elif state is S.DOES_NOT_EXIST:
        log.write(_entry(0, S.DELETED, O.DELETE, None, content))
        log.write(_entry(1, S.DOES_NOT_EXIST, O.VACUUM, 0, Content()))
    elif state is S.CREATING:
        log.write(_entry(0, S.CREATING, O.CREATE, None, Content()))
    else:
        base = BASE_OF[state]
        assert base is not None
        log.write(_entry(0, base, O.CREATE, None, content))
        log.write(_entry(1, state, O.REFRESH_FULL, 0, content))


def listing(log: IndexLog) -> list[tuple[str, int]]:
    return sorted((s.path, s.size) for s in log.storage.list_tree(log.index_dir))


def run(log: IndexLog, op: Operation, state: IndexState | None) -> LogEntry:
    if op is O.CREATE:
        return run_operation(log, op, create_body(), spec=spec(), source=source(0))
    if op in REFRESHES + OPTIMIZES:
        return run_operation(log, op, append_body(f"{op.value}"))
    if op is O.VACUUM and state is S.DELETED:
        return run_operation(log, op, lambda ctx: OpResult(ctx.stable.source, Content()))
    return run_operation(log, op)


STATES: list[IndexState | None] = [None, *IndexState]


@pytest.mark.parametrize("state", STATES, ids=lambda s: "EMPTY" if s is None else s.value)
@pytest.mark.parametrize("op", list(Operation), ids=lambda o: o.value)
def test_every_operation_from_every_state(local, op: Operation, state: IndexState | None) -> None:
    log = IndexLog(local.storage, local.index_dir)
    setup_log(log, state)
    before = listing(log)
    latest = log.latest()
    expected = EXPECTED.get((op, state))
    assert (op in allowed_operations(state)) == (expected is not None)

    if expected is None:
        with pytest.raises(expected_error(op, state)) as info:
            run(log, op, state)
        message = str(info.value)
        assert op.value in message and "'idx'" in message
        if state is not None and state is not S.DOES_NOT_EXIST and op is not O.CREATE:
            assert state.value in message  # e.g. "refresh-full of a DELETED index 'idx'"
        assert listing(IndexLog(local.storage, local.index_dir)) == before  # nothing written
        return

    transient_state, final_state = expected
    final = run(log, op, state)
    fresh = IndexLog(local.storage, local.index_dir)  # read back without the writer's cache
    n = -1 if latest is None else latest.id
    assert fresh.list_ids() == list(range(n + 3))
    transient = fresh.read(n + 1)
    assert transient.state is transient_state and transient.operation is op
    assert fresh.read(n + 2) == final
    assert final.state is final_state
    assert fresh.latest_stable() == final
    if op is O.CANCEL:
        base = None if BASE_OF[state] is None else fresh.read(0)
        if base is None:
            assert final.content == Content()
        else:
            assert (final.state, final.content, final.source) == (base.state, base.content, base.source)
    elif op is not O.CREATE:
        assert transient.base_id == n and transient.content == Content()
        assert transient.source.version == latest.source.version and transient.source.files == ()


def test_precheck_false_is_a_noop(local) -> None:
    log = IndexLog(local.storage, local.index_dir)
    created = run_operation(log, O.CREATE, create_body(), spec=spec(), source=source(0))
    before = listing(log)
    seen = []
    out = run_operation(
        log, O.REFRESH_INCREMENTAL, append_body("x"), precheck=lambda s: seen.append(s) or False
    )
    assert out == created and seen == [created]
    assert listing(log) == before


def test_body_failure_restores_previous_state_and_leaves_orphans(backend) -> None:
    log = IndexLog(backend.storage, backend.index_dir)
    created = run_operation(log, O.CREATE, create_body(), spec=spec(), source=source(0))
    written: list[str] = []

    def failing(ctx: OpContext) -> OpResult:
        written.append(ctx.log.uri(write_token(ctx, "lost").path))
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        run_operation(log, O.REFRESH_FULL, failing)
    fresh = IndexLog(backend.storage, backend.index_dir)
    states = [(e.state, e.operation) for e in fresh.entries()]
    assert states == [
        (S.CREATING, O.CREATE),
        (S.ACTIVE, O.CREATE),
        (S.REFRESHING, O.REFRESH_FULL),
        (S.ACTIVE, O.CANCEL),
    ]
    restored = fresh.latest_stable()
    assert (restored.content, restored.source) == (created.content, created.source)
    assert [o.path for o in orphans(fresh)] == written
    # The index works again.
    after = run_operation(fresh, O.REFRESH_INCREMENTAL, append_body("next"))
    assert tokens_of(fresh, after) == ["create", "next"]


def test_cancel_of_a_live_operation_makes_it_lose(local) -> None:
    log = IndexLog(local.storage, local.index_dir)
    run_operation(log, O.CREATE, create_body(), spec=spec(), source=source(0))

    def body(ctx: OpContext) -> OpResult:
        f = write_token(ctx, "zombie")
        cancel(IndexLog(local.storage, local.index_dir), writer="operator")  # someone else cancels us
        return OpResult(ctx.stable.source, Content((f,)))

    with pytest.raises(ConcurrentIndexUpdate, match="slot 3"):
        run_operation(log, O.OPTIMIZE_FULL, body)
    fresh = IndexLog(local.storage, local.index_dir)
    assert [e.state for e in fresh.entries()][-2:] == [S.CANCELLING, S.ACTIVE]
    assert tokens_of(fresh, fresh.latest_stable()) == ["create"]
    assert len(orphans(fresh)) == 1


def test_delete_vacuum_recreate_continues_numbering(backend) -> None:
    log = IndexLog(backend.storage, backend.index_dir)
    run_operation(log, O.CREATE, create_body("v1"), spec=spec(), source=source(0))
    run_operation(log, O.REFRESH_INCREMENTAL, append_body("v1b"))
    with pytest.raises(IndexExistsError):
        run_operation(log, O.CREATE, create_body(), spec=spec(), source=source(0))
    run_operation(log, O.DELETE)
    with pytest.raises(IllegalIndexStateError, match="refresh-full of a DELETED index 'idx'"):
        run_operation(log, O.REFRESH_FULL, append_body("no"))
    assert log.active_snapshots() == []

    def vacuum_all(ctx: OpContext) -> OpResult:
        for path in referenced_paths(ctx.log):
            ctx.storage.delete(ctx.log.uri(path))
        return OpResult(ctx.stable.source, Content())

    gone = run_operation(log, O.VACUUM, vacuum_all)
    assert gone.state is S.DOES_NOT_EXIST and gone.id == 7
    with pytest.raises(IndexNotFoundError, match="vacuumed"):
        run_operation(log, O.RESTORE)
    again = run_operation(log, O.CREATE, create_body("v2"), spec=spec(), source=source(0))
    assert again.id == 9 and log.read(8).base_id == 7
    assert [e.id for e in log.active_snapshots()] == [9]  # the old incarnation's data is gone
    assert tokens_of(log, again) == ["v2"]


def test_create_checks_the_spec_name(local) -> None:
    log = IndexLog(local.storage, local.index_dir)
    with pytest.raises(InvalidIndexSpecError, match="does not match the index folder"):
        run_operation(log, O.CREATE, create_body(), spec=spec("other"), source=source(0))
    assert listing(log) == []


def test_failed_first_create_ends_in_does_not_exist_and_can_be_retried(local) -> None:
    log = IndexLog(local.storage, local.index_dir)

    def failing(ctx: OpContext) -> OpResult:
        raise ValueError("bad column")

    with pytest.raises(ValueError):
        run_operation(log, O.CREATE, failing, spec=spec(), source=source(0))
    assert log.latest_stable().state is S.DOES_NOT_EXIST
    entry = run_operation(log, O.CREATE, create_body(), spec=spec(), source=source(0))
    assert entry.id == 3 and entry.state is S.ACTIVE


def test_loose_files_are_those_outside_the_directories_deleted_whole() -> None:
    """Vacuum deletes a garbage directory as one tree, then only the garbage files outside it;
    a directory whose name starts another's ('a' and 'ab') does not take the other's files."""
    root = "s3://bucket/t/_lakehouse_index/by_k/data"
    files = tuple(
        FileStatus(f"{root}/{rel}", 1, 0)
        for rel in ("a/1.parquet", "a/sub/2.parquet", "ab/3.parquet", "b/4.parquet")
    )
    garbage = Garbage(dirs=(f"{root}/a",), files=files)
    assert [f.path for f in garbage.loose_files] == [f"{root}/ab/3.parquet", f"{root}/b/4.parquet"]
    assert Garbage(dirs=(), files=files).loose_files == files
