"""Queries of one table's indexes: which snapshot answers a lookup, lookups, locates, read plans.

Every function takes the table's :class:`~lakehouse_index.context.IndexContext` and the
target table version as a :class:`~lakehouse_index.source.Snapshot`, or as a function
resolving it (``target``) where the index log is read while the table's log is.
:func:`relisting` wraps a query so that an index file deleted under a stale view of
the log (another process's vacuum) makes it relist the logs and answer again.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeGuard, TypeVar

import pyarrow as pa

from lakehouse_index import expressions as expr
from lakehouse_index.context import IndexContext
from lakehouse_index.errors import IllegalIndexStateError, IndexNotFoundError
from lakehouse_index.io.parallel import shared_pool
from lakehouse_index.kinds.base import kind_of
from lakehouse_index.kinds.keys import ArrowKeys
from lakehouse_index.log.entry import IndexState, LogEntry
from lakehouse_index.query import bucketed_read as br
from lakehouse_index.query import index_scan, planner
from lakehouse_index.query import lookup as lk
from lakehouse_index.query.coverage import Coverage, plain_scan
from lakehouse_index.source import FileEntry, Snapshot

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

_R = TypeVar("_R")

#: A predicate as queries take it: SQL text, a parsed predicate, or a pyarrow Expression.
Where = str | expr.Predicate | Any
#: Lookup keys as queries take them: Python values (tuples for composite keys), Arrow data
#: (``kinds.keys.ArrowKeys``), or a Spark DataFrame with the key columns.
Keys = Sequence[Any] | ArrowKeys | Any


def relisting(ctx: IndexContext, query: Callable[[], _R]) -> _R:
    """Run ``query``; if an index data file it needs is gone, relist the index logs and run it again.

    This process's view of a log is relisted only every ``relist_after_s``; meanwhile
    another process's zero-retention vacuum or erase purge may have expired the snapshot
    the view still ends at, and deleted its data. The full listing finds the newer entries.
    """
    try:
        return query()
    except FileNotFoundError:
        for log in ctx.logs():
            log.refresh(full=True)
        return query()


def lookup_snapshots(ctx: IndexContext, name: str) -> list[LogEntry]:
    """The retained ACTIVE snapshots of index ``name``; clear errors when it cannot answer lookups."""
    log = ctx.log(name)
    snapshots = log.active_snapshots()  # one probe of the log when warm
    if not snapshots:
        stable = log.latest_stable()
        if stable is None or stable.state is IndexState.DOES_NOT_EXIST:
            raise IndexNotFoundError(f"no index {name!r} on {ctx.uri}")
        raise IllegalIndexStateError(f"index {name!r} is {stable.state.value}; restore it to query it")
    spec = snapshots[-1].spec
    if not kind_of(spec).answers_lookups:
        raise IllegalIndexStateError(
            f"index {name!r} is a {spec.kind} index: it prunes scans, it has no lookups"
        )
    return snapshots


#: The number of keys the planner is given for a Spark DataFrame of keys (not counted: a
#: job): many, so each index file costs at most its size (read once for all the keys).
_MANY_KEYS = 2**40


def plan(ctx: IndexContext, name: str, keys: Sequence[Any], target: Callable[[], Snapshot]) -> planner.Plan:
    """The planner's choice of index snapshot (or plain scan) for a lookup of ``keys`` at ``target()``.

    On an object store the index log and the table's log are read concurrently (one
    round trip instead of two when warm); on local files, where a read costs less than
    handing work to a thread, one after the other (``LogConfig.concurrent_reads``).
    """
    return _plan(ctx, name, len(keys), target)


def _plan(ctx: IndexContext, name: str, n_keys: int, target: Callable[[], Snapshot]) -> planner.Plan:
    if not ctx.config.log.reads_concurrently(ctx.storage.concurrent_reads):
        snapshots = lookup_snapshots(ctx, name)
        return planner.plan(ctx.source, name, snapshots, target(), n_keys, ctx.config)
    # The index's log is read while the table's log is (``IndexLog`` is thread-safe; the
    # table source stays on the caller's thread).
    pending = shared_pool("lakehouse-index-log", 4).submit(lookup_snapshots, ctx, name)
    try:
        snap = target()
    except BaseException:
        pending.result()  # the index's own error (no such index...) comes first
        raise
    return planner.plan(ctx.source, name, pending.result(), snap, n_keys, ctx.config)


def _choice(
    ctx: IndexContext, name: str, n_keys: int, target: Callable[[], Snapshot]
) -> tuple[LogEntry, Coverage, Snapshot]:
    """The snapshot a lookup of ``n_keys`` keys reads, its repair to ``target()``, and that version."""
    chosen = _plan(ctx, name, n_keys, target)
    best = chosen.chosen
    entry = best.entry or ctx.log(name).latest_stable()
    assert entry is not None
    return entry, best.coverage or plain_scan(chosen.target), chosen.target


def lookup_plan(
    ctx: IndexContext, name: str, keys: Sequence[Any] | ArrowKeys, target: Callable[[], Snapshot]
) -> lk.LookupPlan:
    """What a lookup or locate of ``keys`` reads: the chosen snapshot and its repair to ``target()``."""
    entry, cov, snap = _choice(ctx, name, len(keys), target)
    return lk.plan_lookup(ctx.source, entry, snap, keys, cov, ctx.config.read)


def lookup(
    ctx: IndexContext,
    name: str,
    keys: Keys,
    target: Callable[[], Snapshot],
    columns: Sequence[str] | None = None,
) -> Any:
    """The rows of ``target()`` whose index key is one of ``keys`` (see ``Table.lookup``): a
    pyarrow Table, or a Spark DataFrame for a DataFrame of keys."""
    if spark_keys_given(keys):
        from lakehouse_index.query import spark_keys

        entry, cov, snap = relisting(ctx, lambda: _choice(ctx, name, _MANY_KEYS, target))
        index_dir = ctx.index_dir(name)
        return spark_keys.lookup(
            ctx.source, ctx.storage, index_dir, entry, snap, cov, keys, columns, ctx.config.read
        )

    def query() -> pa.Table:
        found = lookup_plan(ctx, name, keys, target)
        return lk.lookup(ctx.source, ctx.storage, ctx.index_dir(name), found, columns)

    return relisting(ctx, query)


def locate(ctx: IndexContext, name: str, keys: Keys, target: Callable[[], Snapshot]) -> Any:
    """Where the rows of ``target()`` with ``keys`` live (see ``Table.locate``): a pyarrow
    Table, or a Spark DataFrame for a DataFrame of keys."""
    if spark_keys_given(keys):
        from lakehouse_index.query import spark_keys

        entry, cov, snap = relisting(ctx, lambda: _choice(ctx, name, _MANY_KEYS, target))
        index_dir = ctx.index_dir(name)
        return spark_keys.locate(ctx.source, ctx.storage, index_dir, entry, snap, cov, keys, ctx.config.read)

    def query() -> pa.Table:
        found = lookup_plan(ctx, name, keys, target)
        return lk.locate(ctx.source, ctx.storage, ctx.index_dir(name), found)

    return relisting(ctx, query)


def spark_keys_given(keys: object) -> TypeGuard[DataFrame]:
    """Whether ``keys`` is a Spark DataFrame (classic or Connect), without importing pyspark."""
    return type(keys).__module__.startswith("pyspark.sql") and hasattr(keys, "sparkSession")


def _handles(ctx: IndexContext) -> list[planner.IndexHandle]:
    """Every active index of the table, as the planner weighs it."""
    return [
        planner.IndexHandle(
            info.name,
            kind_of(info.spec),
            ctx.index_dir(info.name),
            tuple(ctx.log(info.name).active_snapshots()),
        )
        for info in ctx.indexes()
        if info.state is IndexState.ACTIVE
    ]


def read_plan(ctx: IndexContext, snap: Snapshot, where: Where) -> planner.Plan:
    """The planner's choice among every active index (and a plain scan) for ``where`` at ``snap``."""
    predicate = expr.Predicate.of(where, snap.schema)
    assert predicate is not None
    indexes = _handles(ctx)
    text = where if isinstance(where, str) else str(where)
    return planner.plan_read(
        ctx.source, ctx.storage, f"read where {text}", indexes, snap, predicate, ctx.config
    )


def files_for(ctx: IndexContext, snap: Snapshot, where: Where) -> list[FileEntry] | None:
    """The files the planner's choice says may hold rows of ``snap`` matching ``where`` (None: all),
    relisting the index logs if a stale view named deleted data."""

    def query() -> list[FileEntry] | None:
        plan = read_plan(ctx, snap, where)
        chosen = plan.chosen
        if chosen.scans:
            assert chosen.entry is not None and chosen.coverage is not None and chosen.index is not None
            assert chosen.picked is not None
            predicate = expr.Predicate.of(where, snap.schema)
            assert predicate is not None
            return index_scan.files_matching(
                ctx.source,
                ctx.storage,
                ctx.index_dir(chosen.index),
                chosen.entry,
                snap,
                chosen.coverage,
                predicate,
                chosen.picked,
            )
        return None if chosen.files is None else list(chosen.files)

    return relisting(ctx, query)


def _scan_answer(
    ctx: IndexContext,
    chosen: planner.Candidate,
    snap: Snapshot,
    predicate: expr.Predicate | None,
    columns: Sequence[str] | None,
    fraction: float | None = None,
) -> pa.Table:
    """The answer of a scanning index the planner chose (with ``fraction``: of the sample)."""
    assert chosen.entry is not None and chosen.coverage is not None and chosen.index is not None
    assert chosen.picked is not None
    spec = chosen.entry.spec
    identity = kind_of(spec).sample_identity(spec) if fraction is not None else ()
    return index_scan.answer(
        ctx.source,
        ctx.storage,
        ctx.index_dir(chosen.index),
        chosen.entry,
        snap,
        chosen.coverage,
        predicate,
        columns,
        chosen.picked,
        fraction,
        identity,
    )


def scan(ctx: IndexContext, snap: Snapshot, where: Where, columns: Sequence[str] | None) -> pa.Table | None:
    """The rows of ``snap`` matching ``where`` read through an index scanning its own row groups,
    when the planner chooses one (None: it chose another way; the caller reads files)."""

    def query() -> pa.Table | None:
        chosen = read_plan(ctx, snap, where).chosen
        if not chosen.scans:
            return None
        return _scan_answer(ctx, chosen, snap, expr.Predicate.of(where, snap.schema), columns)

    return relisting(ctx, query)


def sample_plan(ctx: IndexContext, snap: Snapshot, fraction: float, where: Where | None) -> planner.Plan:
    """The planner's choice of index (or plain scan) for a sample of ``fraction`` at ``snap``."""
    predicate = expr.Predicate.of(where, snap.schema)
    identity = sample_identity(ctx, snap)
    handles = [
        h
        for h in _handles(ctx)
        if not h.kind.samples or (h.snapshots and h.kind.sample_identity(h.snapshots[-1].spec) == identity)
    ]
    return planner.plan_sample(ctx.source, ctx.storage, handles, snap, predicate, fraction, ctx.config)


def sample(
    ctx: IndexContext,
    snap: Snapshot,
    fraction: float,
    where: Where | None,
    columns: Sequence[str] | None,
    use_indexes: bool = True,
) -> pa.Table:
    """The rows of ``snap`` (matching ``where``) whose weight is below ``fraction`` (see ``Table.sample``);
    ``use_indexes=False``: by a plain scan computing the weights."""
    if not use_indexes:
        predicate = expr.Predicate.of(where, snap.schema)
        return index_scan.sample_scan(
            ctx.source, snap, fraction, sample_identity(ctx, snap), predicate, columns
        )

    def query() -> pa.Table:
        plan = sample_plan(ctx, snap, fraction, where)
        chosen = plan.chosen
        predicate = expr.Predicate.of(where, snap.schema)
        if chosen.scans:
            return _scan_answer(ctx, chosen, snap, predicate, columns, fraction)
        return index_scan.sample_scan(
            ctx.source, snap, fraction, sample_identity(ctx, snap), predicate, columns
        )

    return relisting(ctx, query)


def read_frame(
    ctx: IndexContext,
    spark: SparkSession,
    snap: Snapshot,
    where: Where | None,
    columns: Sequence[str] | None,
    use_indexes: bool,
    fraction: float | None,
) -> DataFrame:
    """A Spark DataFrame of ``snap``'s rows (matching ``where``; see ``Table.read``): with
    ``fraction``, exactly the rows of :func:`sample`; else through a covering index as a
    bucketed table, or the files the planner's choice may find rows in."""
    from lakehouse_index.read.spark_read import spark_frame

    if fraction is not None:
        return spark_sample(ctx, spark, snap, fraction, where, columns, use_indexes)
    if use_indexes:
        bucketed = bucketed_read(ctx, spark, snap, columns, where)
        if bucketed is not None:
            return bucketed
    files = files_for(ctx, snap, where) if use_indexes and where is not None else None
    return spark_frame(
        spark, ctx.source, snap, files=files, columns=columns, where=where, config=ctx.config.read
    )


def spark_sample(
    ctx: IndexContext,
    spark: SparkSession,
    snap: Snapshot,
    fraction: float,
    where: Where | None,
    columns: Sequence[str] | None,
    use_indexes: bool = True,
) -> DataFrame:
    """:func:`sample` as a Spark DataFrame (``query.spark_sample``): the same choice, weights and rows."""
    from lakehouse_index.query import spark_sample as ss

    predicate = expr.Predicate.of(where, snap.schema)

    def query() -> DataFrame:
        chosen = sample_plan(ctx, snap, fraction, where).chosen if use_indexes else None
        if chosen is None or not chosen.scans:
            identity = sample_identity(ctx, snap)
            files = list(snap.files.values())
            return ss.scan_sample(
                spark, ctx.source, snap, files, fraction, identity, predicate, columns, ctx.config.read
            )
        assert chosen.entry is not None and chosen.coverage is not None and chosen.index is not None
        spec = chosen.entry.spec
        index_dir = ctx.index_dir(chosen.index)
        return ss.index_sample(
            spark,
            ctx.source,
            ctx.storage,
            index_dir,
            chosen.entry,
            snap,
            chosen.coverage,
            predicate,
            fraction,
            columns,
            kind_of(spec).sample_identity(spec),
            ctx.config.read,
        )

    return relisting(ctx, query)


def sample_identity(ctx: IndexContext, snap: Snapshot) -> tuple[str, ...]:
    """The columns a sample's weights are hashed from: those of the table's first active index
    keeping weights (by name; only indexes hashing the same columns answer samples), else
    every column of ``snap``."""
    for h in sorted(_handles(ctx), key=lambda h: h.name):
        if h.kind.samples and h.snapshots:
            spec = h.snapshots[-1].spec
            if all(c in snap.schema.names for c in spec.columns):
                return h.kind.sample_identity(spec)
    return tuple(snap.schema.names)


def bucketed_plan(
    ctx: IndexContext, snap: Snapshot, columns: Sequence[str] | None, where: Where | None
) -> br.BucketedPlan:
    """Whether a read of ``columns`` (and ``where``) at ``snap`` is answered by a covering index
    as a bucketed Spark table, and why (not)."""
    predicate = expr.Predicate.of(where, snap.schema) if where is not None else None
    return br.plan_bucketed(ctx, snap, columns, predicate)


def bucketed_read(
    ctx: IndexContext, spark: SparkSession, snap: Snapshot, columns: Sequence[str] | None, where: Where | None
) -> DataFrame | None:
    """The rows of ``snap`` as a DataFrame Spark knows is bucketed by a covering index's key
    (None: no covering index can answer so; the plain read then)."""
    predicate = expr.Predicate.of(where, snap.schema) if where is not None else None

    def query() -> DataFrame | None:
        chosen = br.plan_bucketed(ctx, snap, columns, predicate)
        if chosen.entry is None:
            return None
        return br.bucketed_frame(spark, ctx, chosen, columns, predicate)

    return relisting(ctx, query)
