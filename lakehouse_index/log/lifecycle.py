"""The index lifecycle (Hyperspace §4.2): which operation may start from which state,
and the one template every operation runs through.

Every operation writes two log entries, each put-if-absent:

1. entry ``n+1`` in the operation's *transient* state (REFRESHING, ...), naming the
   stable entry ``n`` it starts from (``base_id = n``; source version fields copied,
   file map and content left empty): from now on the index is busy;
2. the body writes index data under a fresh ``<index_dir>/data/<uuid>/`` directory;
3. entry ``n+2`` in the *final* state, naming the new data.

Readers use the latest *stable* entry, so they never see a half-done operation. Losing a
put-if-absent race raises :class:`~lakehouse_index.errors.ConcurrentIndexUpdate` and
changes nothing. If the body raises, a final entry restoring entry ``n`` is written
(operation ``cancel``) and the error re-raised. If the process dies, the transient entry
stays, readers keep using entry ``n`` and :func:`cancel` brings the index back to it.
Data written by failed or dead operations is named by no entry: ``garbage.orphans``
finds it for vacuum.

Example (a refresh; the real bodies live in ``kinds`` / ``maintenance``)::

    from lakehouse_index.log.entry import Content, IndexFile, Operation
    from lakehouse_index.log.lifecycle import OpContext, OpResult, run_operation, retrying

    def body(ctx: OpContext) -> OpResult:
        rel = ctx.data_path("part-0.parquet")             # "data/<uuid>/part-0.parquet"
        ctx.storage.write_bytes(ctx.log.uri(rel), payload)
        files = ctx.stable.content.files + (IndexFile(rel, rows=10, size=len(payload)),)
        return OpResult(source=new_source, content=Content(files))

    entry = retrying(lambda: run_operation(
        log, Operation.REFRESH_INCREMENTAL, body,
        precheck=lambda stable: stable.source.version < table_version))   # False: no-op
"""

from __future__ import annotations

import logging
import os
import random
import socket
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TypeVar

from lakehouse_index.errors import (
    ConcurrentIndexUpdate,
    IllegalIndexStateError,
    IndexBusyError,
    IndexExistsError,
    IndexNotFoundError,
    InvalidIndexSpecError,
)
from lakehouse_index.faults import crash_point
from lakehouse_index.io import Storage, join_uri
from lakehouse_index.log.entry import DATA_DIR, Content, IndexState, LogEntry, Operation, Pending, SourceState
from lakehouse_index.log.store import IndexLog
from lakehouse_index.spec import IndexSpec

_log = logging.getLogger(__name__)

S = IndexState
O = Operation  # noqa: E741 - short alias keeps the table readable


# --------------------------------------------------------------------------- the table


@dataclass(frozen=True)
class Transition:
    """One row of the state machine.

    ``start`` is the state of the latest entry (``None``: the log is empty);
    ``final`` ``None`` means "the stable state the interrupted operation started from"
    (only ``cancel`` uses it).
    """

    operation: Operation
    start: IndexState | None
    transient: IndexState
    final: IndexState | None


TRANSIENT_STATES: tuple[IndexState, ...] = tuple(s for s in IndexState if not s.is_stable)
STABLE_STATES: tuple[IndexState, ...] = tuple(s for s in IndexState if s.is_stable)

TRANSITIONS: tuple[Transition, ...] = (
    Transition(O.CREATE, None, S.CREATING, S.ACTIVE),
    Transition(O.CREATE, S.DOES_NOT_EXIST, S.CREATING, S.ACTIVE),
    Transition(O.REFRESH_FULL, S.ACTIVE, S.REFRESHING, S.ACTIVE),
    Transition(O.REFRESH_INCREMENTAL, S.ACTIVE, S.REFRESHING, S.ACTIVE),
    Transition(O.REFRESH_QUICK, S.ACTIVE, S.REFRESHING, S.ACTIVE),
    Transition(O.OPTIMIZE_QUICK, S.ACTIVE, S.OPTIMIZING, S.ACTIVE),
    Transition(O.OPTIMIZE_FULL, S.ACTIVE, S.OPTIMIZING, S.ACTIVE),
    Transition(O.OPTIMIZE_PURGE, S.ACTIVE, S.OPTIMIZING, S.ACTIVE),
    Transition(O.DELETE, S.ACTIVE, S.DELETING, S.DELETED),
    Transition(O.RESTORE, S.DELETED, S.RESTORING, S.ACTIVE),
    # Vacuum of a deleted index removes everything; of an active index, only data no
    # retained snapshot names (the body decides what that is).
    Transition(O.VACUUM, S.DELETED, S.VACUUMING, S.DOES_NOT_EXIST),
    Transition(O.VACUUM, S.ACTIVE, S.VACUUMING, S.ACTIVE),
    *(Transition(O.CANCEL, s, S.CANCELLING, None) for s in TRANSIENT_STATES),
)

_BY_KEY: dict[tuple[Operation, IndexState | None], Transition] = {
    (t.operation, t.start): t for t in TRANSITIONS
}

# What to tell the user when an operation is refused in a stable state.
_HINTS: dict[IndexState, str] = {
    S.ACTIVE: "the index is active",
    S.DELETED: "the index is deleted: restore it first (or vacuum it to remove it)",
}


def transition(operation: Operation, state: IndexState | None) -> Transition | None:
    """The transition ``operation`` takes from ``state``, or ``None`` if not allowed."""
    return _BY_KEY.get((operation, state))


def allowed_operations(state: IndexState | None) -> list[Operation]:
    """Operations that may start when the latest entry is in ``state``."""
    return [op for op in Operation if (op, state) in _BY_KEY]


def check_allowed(operation: Operation, latest: LogEntry | None, name: str) -> Transition:
    """The transition for ``operation`` given the latest entry, or the error to raise.

    * a transient latest entry (another operation running or dead): ``IndexBusyError``
      for anything but cancel;
    * create of an index that exists (not vacuumed): ``IndexExistsError``;
    * anything but create on an empty log or a vacuumed index: ``IndexNotFoundError``;
    * otherwise not in the table: ``IllegalIndexStateError`` naming state and operation.
    """
    state = latest.state if latest is not None else None
    found = transition(operation, state)
    if found is not None:
        return found
    op = operation.value
    if latest is not None and state is not None and not state.is_stable:
        age_s = max(0.0, time.time() - latest.timestamp_ms / 1000) if latest.timestamp_ms else None
        since = f", {age_s:.0f} s ago" if age_s is not None else ""
        raise IndexBusyError(
            f"{op} of index {name!r} refused: a {latest.operation.value} is in progress "
            f"(log entry {latest.id} in state {state.value}, written by {latest.writer or '?'}{since}); "
            "retry when it finishes, or cancel the index if that writer died"
        )
    if operation is Operation.CREATE:
        hint = " (restore it, or vacuum it first)" if state is S.DELETED else ""
        raise IndexExistsError(
            f"create of index {name!r} refused: it already exists and is {state and state.value}{hint}"
        )
    if state is None or state is S.DOES_NOT_EXIST:
        gone = " (it was vacuumed)" if state is S.DOES_NOT_EXIST else ""
        raise IndexNotFoundError(f"{op} of index {name!r}: the index does not exist{gone}")
    allowed = sorted(t.start.value for t in TRANSITIONS if t.operation is operation and t.start)
    hint = _HINTS.get(state, "")
    raise IllegalIndexStateError(
        f"{op} of a {state.value} index {name!r} is not allowed: {op} needs "
        f"{' or '.join(allowed)}" + (f"; {hint}" if hint else "")
    )


# --------------------------------------------------------------------------- running


@dataclass(frozen=True)
class OpContext:
    """What an operation body gets.

    ``stable`` is the entry the operation starts from (``None`` for create);
    ``transient`` the entry just written; ``data_dir`` the fresh data directory,
    relative to the index directory (``data/<uuid>``): write index files only there,
    and name them in ``IndexFile.path`` relative to the index directory
    (use :meth:`data_path`).
    """

    log: IndexLog
    operation: Operation
    stable: LogEntry | None
    transient: LogEntry
    data_dir: str

    @property
    def storage(self) -> Storage:
        """The storage of the index."""
        return self.log.storage

    @property
    def data_uri(self) -> str:
        """Full URI of the fresh data directory."""
        return self.log.uri(self.data_dir)

    def data_path(self, name: str) -> str:
        """``data/<uuid>/<name>``: the relative path to record for a file written under it."""
        return join_uri(self.data_dir, name)


@dataclass(frozen=True)
class OpResult:
    """The fields of the final entry, produced by an operation body."""

    source: SourceState
    content: Content
    pending: Pending | None = None


Body = Callable[[OpContext], "OpResult | None"]
T = TypeVar("T")


def default_writer() -> str:
    """``host:pid``: who wrote an entry (shown when an operation is found stuck)."""
    return f"{socket.gethostname()}:{os.getpid()}"


def writer_is_dead(writer: str) -> bool:
    """Whether ``writer`` (``host:pid``) is a process of this host that no longer runs.

    False when it runs, runs elsewhere (it cannot be checked from here) or is not in that form.
    """
    host, _, pid = writer.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def _now_ms() -> int:
    return int(time.time() * 1000)


def new_data_dir() -> str:
    """A fresh data directory name, relative to the index directory."""
    return f"{DATA_DIR}/{uuid.uuid4().hex}"


@dataclass(frozen=True)
class Started:
    """An operation whose transient entry is written: the index is held until :meth:`finish`
    or :meth:`abandon` (what :func:`run_operation` does around its body, for callers that
    must hold an index across work of their own, e.g. a write whose Spark job computes the
    index entries before the table commit exists)."""

    ctx: OpContext
    final_state: IndexState
    writer: str

    def finish(self, result: OpResult | None) -> LogEntry:
        """Write the final entry naming ``result`` (``None``: keep the starting entry's)."""
        op = self.ctx.operation.value
        crash_point(f"{op}.after_data")
        final = _final_entry(self.ctx.transient, self.final_state, self.ctx.stable, result, self.writer)
        # Losing this race means someone cancelled us: our data stays unnamed (an orphan).
        self.ctx.log.write(final)
        crash_point(f"{op}.after_final")
        return final

    def abandon(self) -> bool:
        """Write the entry restoring the starting state (best effort, as after a failed body).

        Returns whether the operation had been cancelled (its slot was taken).
        """
        return _restore(self.ctx.log, self.ctx.transient, self.writer)


def start_operation(
    log: IndexLog,
    operation: Operation,
    *,
    spec: IndexSpec | None = None,
    source: SourceState | None = None,
    precheck: Callable[[LogEntry], bool] | None = None,
    writer: str | None = None,
) -> Started | LogEntry:
    """Check and write the transient entry of ``operation``: the :class:`Started` operation,
    or the stable entry when ``precheck`` says there is nothing to do (nothing written).

    Arguments and errors as :func:`run_operation`.
    """
    writer = writer or default_writer()
    # A full listing, not the cached view: another process's zero-retention vacuum or purge
    # may have expired the slots above this process's view, and writing into such a hole
    # would fork the log (found by the crash harness; one LIST per operation).
    log.refresh(full=True)
    latest = log.latest()
    rule = check_allowed(operation, latest, log.name)
    assert rule.final is not None
    if operation is Operation.CREATE:
        if spec is None or source is None:
            raise TypeError("create needs spec= and source=")
        if precheck is not None:
            raise TypeError("precheck= is not for create")
        if spec.name != log.name:
            raise InvalidIndexSpecError(
                f"index spec name {spec.name!r} does not match the index folder {log.index_dir!r}"
            )
        stable = None
        transient = LogEntry(
            id=0 if latest is None else latest.id + 1,
            spec=spec,
            state=rule.transient,
            operation=operation,
            source=replace(source, files=()),
            timestamp_ms=_now_ms(),
            writer=writer,
            base_id=None if latest is None else latest.id,
        )
    else:
        if spec is not None or source is not None:
            raise TypeError("spec= and source= are only for create")
        assert latest is not None  # check_allowed refuses the empty log
        stable = latest
        if precheck is not None and not precheck(stable):
            return stable
        # Transient entries are markers: readers never use them and cancel restores from
        # the base entry, so they do not repeat its (possibly large) file map and content.
        transient = stable.next(
            state=rule.transient,
            operation=operation,
            source=replace(stable.source, files=()),
            content=Content(),
            pending=None,
            timestamp_ms=_now_ms(),
            writer=writer,
            base_id=stable.id,
        )

    log.write(transient)  # losing this race: ConcurrentIndexUpdate, nothing else written
    crash_point(f"{operation.value}.after_transient")
    return Started(OpContext(log, operation, stable, transient, new_data_dir()), rule.final, writer)


def run_operation(
    log: IndexLog,
    operation: Operation,
    body: Body | None = None,
    *,
    spec: IndexSpec | None = None,
    source: SourceState | None = None,
    precheck: Callable[[LogEntry], bool] | None = None,
    writer: str | None = None,
) -> LogEntry:
    """Run one lifecycle operation on the index of ``log``; return the entry readers now use.

    * ``body(ctx)`` does the work (writes data under ``ctx.data_dir``) and returns the
      final entry's source/content/pending, or ``None`` to keep the starting entry's
      (delete, restore). ``body=None`` is the same as a body returning ``None``.
    * ``create`` needs ``spec`` (its name must be the index folder name) and ``source``
      (the table being indexed; recorded on the CREATING entry).
    * ``precheck(stable)`` runs before anything is written; if it returns ``False``
      the operation is a no-op: nothing is written and ``stable`` is returned.

    Raises ``IndexBusyError`` / ``ConcurrentIndexUpdate`` (retryable, see
    :func:`retrying`), ``IndexExistsError``, ``IndexNotFoundError``,
    ``IllegalIndexStateError`` (nothing written in all these cases), or whatever the
    body raised (after writing an entry that restores the starting state; if a cancel had
    restored it first, ``ConcurrentIndexUpdate`` from the body's error).
    """
    if operation is Operation.CANCEL:
        return cancel(log, writer=writer)
    started = start_operation(log, operation, spec=spec, source=source, precheck=precheck, writer=writer)
    if isinstance(started, LogEntry):
        return started
    try:
        result = body(started.ctx) if body is not None else None
    except BaseException as e:
        if started.abandon() and isinstance(e, Exception):
            # Cancelled while it ran: whatever the body hit next (say, data a vacuum removed
            # once the cancel had released the index) is this lost race's consequence.
            raise ConcurrentIndexUpdate(
                f"index {log.name!r}: the {operation.value} was cancelled while it ran "
                f"(then failed: {type(e).__name__}: {e}); re-read the index and retry"
            ) from e
        raise
    return started.finish(result)


def _final_entry(
    transient: LogEntry,
    final_state: IndexState,
    stable: LogEntry | None,
    result: OpResult | None,
    writer: str,
) -> LogEntry:
    if result is None:
        if stable is None:
            raise TypeError(f"the {transient.operation.value} body must return an OpResult")
        source, content, pending = stable.source, stable.content, stable.pending
    else:
        source, content, pending = result.source, result.content, result.pending
    if final_state is IndexState.DOES_NOT_EXIST and (content.files or pending is not None):
        raise ValueError("an operation ending in DOES_NOT_EXIST must leave no content and no pending changes")
    return transient.next(
        state=final_state,
        source=source,
        content=content,
        pending=pending,
        timestamp_ms=_now_ms(),
        writer=writer,
    )


def _restoring_entry(transient: LogEntry, base: LogEntry | None, writer: str) -> LogEntry:
    """The final entry that returns the index to ``base`` (or to DOES_NOT_EXIST)."""
    if base is None:
        # A first create that never finished: the index does not exist.
        return transient.next(
            state=IndexState.DOES_NOT_EXIST,
            operation=Operation.CANCEL,
            content=Content(),
            pending=None,
            timestamp_ms=_now_ms(),
            writer=writer,
            base_id=None,
        )
    return replace(
        base,
        id=transient.id + 1,
        operation=Operation.CANCEL,
        timestamp_ms=_now_ms(),
        writer=writer,
        base_id=base.id,
    )


def _base_of(log: IndexLog, transient: LogEntry) -> LogEntry | None:
    if transient.base_id is None:
        return None
    base = log.read(transient.base_id)
    # A create's base may be a DOES_NOT_EXIST entry; other bases are ACTIVE or DELETED.
    if not base.state.is_stable:
        raise IllegalIndexStateError(
            f"index {log.name!r}: entry {transient.id} names a non-stable base entry {base.id}"
        )
    return base


def _restore(log: IndexLog, transient: LogEntry, writer: str) -> bool:
    """After a failed body: write the entry that restores the starting state, best effort.

    Returns whether someone had cancelled the operation first (the index is restored already).
    """
    try:
        log.write(_restoring_entry(transient, _base_of(log, transient), writer))
    except ConcurrentIndexUpdate:
        return True
    except Exception:  # the body's error matters more; the index stays cancellable
        _log.exception("index %r: could not restore after a failed %s", log.name, transient.operation.value)
    return False


def cancel(log: IndexLog, *, writer: str | None = None) -> LogEntry:
    """Return an index stuck in a transient state to the stable state it started from.

    Writes CANCELLING (``n+1``) then a copy of the starting stable entry (``n+2``,
    operation ``cancel``); a stuck first create ends in DOES_NOT_EXIST. Cancelling a
    live operation makes its final write lose the race (it gets ConcurrentIndexUpdate).
    ``IllegalIndexStateError`` when the index is not in a transient state.
    """
    writer = writer or default_writer()
    log.refresh(full=True)  # as start_operation: never write into a hole left by an expiry
    latest = log.latest()
    if latest is None or latest.state.is_stable:
        state = latest.state.value if latest is not None else "non-existent"
        raise IllegalIndexStateError(
            f"cancel of a {state} index {log.name!r} is not allowed: no operation is in progress"
        )
    check_allowed(Operation.CANCEL, latest, log.name)
    base = _base_of(log, latest)
    transient = latest.next(
        state=IndexState.CANCELLING,
        operation=Operation.CANCEL,
        timestamp_ms=_now_ms(),
        writer=writer,
    )
    log.write(transient)
    crash_point("cancel.after_transient")
    final = _restoring_entry(transient, base, writer)
    log.write(final)
    crash_point("cancel.after_final")
    return final


def retrying(
    fn: Callable[[], T],
    *,
    attempts: int = 20,
    backoff_s: float = 0.02,
    max_backoff_s: float = 1.0,
) -> T:
    """Call ``fn`` until it does not raise ``ConcurrentIndexUpdate`` (incl. IndexBusyError).

    Exponential backoff with jitter between attempts; the last error is re-raised
    after ``attempts`` tries.
    """
    delay = backoff_s
    for attempt in range(attempts):
        try:
            return fn()
        except ConcurrentIndexUpdate:
            if attempt == attempts - 1:
                raise
            time.sleep(delay * (0.5 + random.random()))
            delay = min(delay * 2, max_backoff_s)
    raise AssertionError("unreachable")
