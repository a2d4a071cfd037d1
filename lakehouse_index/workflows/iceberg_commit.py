"""Iceberg commits through pyiceberg, loaded through the table's catalog.

pyiceberg commits each transaction atomically through the catalog (the commit asserts
that the branch head did not move); a lost race raises ``CommitFailedException`` and
the operation is redone on the reloaded table, up to :data:`ATTEMPTS` times. Every
operation here is a function of the table state it runs on, so redoing it is the
format's rule for a retry. ``update`` (pyiceberg has none) reads the matching rows,
sets the columns and commits delete + append in one transaction.
"""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pyarrow as pa

from lakehouse_index.errors import ReadOnlyTableError, WriteConflictError
from lakehouse_index.workflows.reports import Commit

ATTEMPTS = 4


def open_for_write(source: Any, uri: str) -> Any:
    """The pyiceberg Table to commit to; ReadOnlyTableError for a table opened by path."""
    load = getattr(source, "catalog_table", None)
    tbl = load() if load is not None else None
    if tbl is None:
        raise ReadOnlyTableError(
            f"{uri}: an Iceberg table opened by path has no atomic commit; open it through its "
            "catalog (open_table(identifier, catalog=...)) to write"
        )
    return tbl


def _live_total(snapshot: Any) -> int | None:
    """Live rows of a snapshot from its summary (None when row-level deletes make it unknown)."""
    if snapshot is None:
        return 0
    summary = snapshot.summary
    if summary is None:
        return None
    props = summary.additional_properties if hasattr(summary, "additional_properties") else dict(summary)
    if int(props.get("total-position-deletes", 0)) or int(props.get("total-equality-deletes", 0)):
        return None
    total = props.get("total-records")
    return None if total is None else int(total)


def _in_table_schema(tbl: Any, data: pa.Table) -> pa.Table:
    target = tbl.schema().as_arrow()
    return data.select(target.names).cast(target)


def _with_retries(tbl: Any, op: Callable[[Any], Commit]) -> Commit:
    from pyiceberg.exceptions import CommitFailedException

    for attempt in range(ATTEMPTS):
        try:
            return op(tbl)
        except CommitFailedException as e:
            if attempt == ATTEMPTS - 1:
                raise WriteConflictError(
                    f"the Iceberg commit lost to concurrent writers {ATTEMPTS} times: {e}"
                ) from e
            tbl = tbl.catalog.load_table(tbl.name())
    raise AssertionError("unreachable")


def _head(tbl: Any) -> Any:
    return tbl.current_snapshot()


def _version(tbl: Any, before: Any) -> int:
    head = _head(tbl)
    if head is None:
        assert before is not None
        return int(before.snapshot_id)
    return int(head.snapshot_id)


def append(tbl: Any, data: pa.Table) -> Commit:
    """Append ``data``."""

    def op(t: Any) -> Commit:
        before = _head(t)
        t.append(_in_table_schema(t, data))
        return Commit(_version(t, before), rows_written=data.num_rows)

    return _with_retries(tbl, op)


def overwrite(tbl: Any, data: pa.Table, row_filter: Any | None) -> Commit:
    """Replace every row (``row_filter`` None) or the rows matching it with ``data``."""
    from pyiceberg.expressions import AlwaysTrue

    def op(t: Any) -> Commit:
        before = _head(t)
        total_before = _live_total(before)
        t.overwrite(_in_table_schema(t, data), overwrite_filter=row_filter or AlwaysTrue())
        total_after = _live_total(_head(t))
        deleted = None
        if total_before is not None and total_after is not None:
            deleted = total_before - (total_after - data.num_rows)
        return Commit(_version(t, before), rows_written=data.num_rows, rows_deleted=deleted)

    return _with_retries(tbl, op)


def delete(tbl: Any, row_filter: Any) -> Commit:
    """Delete the rows matching ``row_filter``."""

    def op(t: Any) -> Commit:
        before = _head(t)
        total_before = _live_total(before)
        t.delete(row_filter)
        total_after = _live_total(_head(t))
        deleted = None
        if total_before is not None and total_after is not None:
            deleted = total_before - total_after
        return Commit(_version(t, before), rows_deleted=deleted)

    return _with_retries(tbl, op)


def update(tbl: Any, row_filter: Any, values: Mapping[str, Any]) -> Commit:
    """Set ``values`` (Python literals) on the rows matching ``row_filter`` (delete + append, one commit)."""

    def op(t: Any) -> Commit:
        before = _head(t)
        if before is None:
            return Commit(0, rows_updated=0)
        rows = t.scan(row_filter=row_filter, snapshot_id=before.snapshot_id).to_arrow()
        if rows.num_rows == 0:
            return Commit(int(before.snapshot_id), rows_updated=0)
        schema = t.schema().as_arrow()
        for name, value in values.items():
            field = schema.field(name)
            rows = rows.set_column(
                rows.schema.get_field_index(name), field, pa.array([value] * rows.num_rows, field.type)
            )
        with t.transaction() as tx:
            tx.delete(row_filter)
            tx.append(_in_table_schema(t, rows))
        return Commit(_version(t, before), rows_updated=rows.num_rows)

    return _with_retries(tbl, op)


def _literal(value: Any) -> Any:
    """A Python value as pyiceberg binds it (dates and timestamps through ISO text)."""
    if isinstance(value, (dt.date, dt.datetime)):
        return value.isoformat()
    return value


def upsert(tbl: Any, data: pa.Table, on: Sequence[str]) -> Commit:
    """Rows matching a data row on ``on`` become that data row, other data rows are inserted.

    One transaction: the target rows whose key columns take the data's values are read
    (an ``IN`` filter per key column, a superset for composite keys), deleted, and
    appended back, each matched one replaced by its data row, together with the
    unmatched data rows. Like a SQL MERGE (and deltalake), every matching target row is
    updated, duplicates included; pyiceberg 0.12's own ``upsert`` refuses a target with
    duplicate keys, so it is not used. Keys are unique and not null in ``data``.
    """
    from pyiceberg import expressions

    ie: Any = expressions  # pyiceberg's expression classes are pydantic models mypy reads badly

    def op(t: Any) -> Commit:
        before = _head(t)
        incoming = _in_table_schema(t, data)
        if before is None:
            t.append(incoming)
            return Commit(_version(t, before), rows_written=incoming.num_rows, rows_updated=0)
        filters = [ie.In(c, {_literal(v) for v in incoming[c].to_pylist()}) for c in on]
        key_filter = functools.reduce(ie.And, filters)
        current = _in_table_schema(
            t, t.scan(row_filter=key_filter, snapshot_id=before.snapshot_id).to_arrow()
        )
        position = {key: i for i, key in enumerate(zip(*(incoming[c].to_pylist() for c in on), strict=True))}
        current_keys = zip(*(current[c].to_pylist() for c in on), strict=True) if current.num_rows else []
        matched_from: list[int] = []  # data row replacing each matched target row
        kept: list[bool] = []
        for key in current_keys:
            i = position.get(key)
            kept.append(i is None)
            if i is not None:
                matched_from.append(i)
        used = set(matched_from)
        inserted = [i for i in range(incoming.num_rows) if i not in used]
        parts = [
            current.filter(pa.array(kept, pa.bool_())) if current.num_rows else current,
            incoming.take(pa.array(matched_from, pa.int64())),
            incoming.take(pa.array(inserted, pa.int64())),
        ]
        with t.transaction() as tx:
            if current.num_rows:
                tx.delete(key_filter)
            tx.append(pa.concat_tables(parts))
        return Commit(_version(t, before), rows_written=len(inserted), rows_updated=len(matched_from))

    return _with_retries(tbl, op)
