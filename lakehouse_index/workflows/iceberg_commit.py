"""Iceberg commits through pyiceberg, loaded through the table's catalog.

pyiceberg commits each transaction atomically through the catalog (the commit asserts
that the branch head did not move); a lost race raises ``CommitFailedException`` and
the operation is redone on the reloaded table, up to :data:`ATTEMPTS` times. Every
operation here is a function of the table state it runs on, so redoing it is the
format's rule for a retry. ``update`` (pyiceberg has none) reads the matching rows,
sets the columns and commits delete + append in one transaction.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from lakehouse_index.errors import ReadOnlyTableError, WriteConflictError

ATTEMPTS = 4


@dataclass(frozen=True)
class Commit:
    """What one pyiceberg transaction committed (``version``: the new main head snapshot id)."""

    version: int
    rows_written: int | None = None
    rows_deleted: int | None = None
    rows_updated: int | None = None


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


def upsert(tbl: Any, data: pa.Table, on: Sequence[str]) -> Commit:
    """pyiceberg's upsert: rows matching on ``on`` updated (when they differ), the rest inserted."""

    def op(t: Any) -> Commit:
        before = _head(t)
        res = t.upsert(_in_table_schema(t, data), join_cols=list(on))
        return Commit(_version(t, before), rows_written=res.rows_inserted, rows_updated=res.rows_updated)

    return _with_retries(tbl, op)
