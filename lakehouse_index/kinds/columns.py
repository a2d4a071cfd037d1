"""Checks every index kind makes of its columns against a table snapshot."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence

import pyarrow as pa

from lakehouse_index.errors import InvalidIndexSpecError
from lakehouse_index.expressions.types import Family, comparison_class, family
from lakehouse_index.log.entry import ColumnIdentity
from lakehouse_index.source import Column, Snapshot


def require_columns(
    index: str, columns: Iterable[str], snapshot: Snapshot, reserved: Collection[str]
) -> None:
    """Each column exists in the table and does not use a name the index reserves."""
    names = {c.name for c in snapshot.columns}
    for col in columns:
        if col in reserved:
            raise InvalidIndexSpecError(f"index {index!r}: column name {col!r} is reserved by the index")
        if col not in names:
            raise InvalidIndexSpecError(
                f"index {index!r}: table has no column {col!r} (columns: {sorted(names)})"
            )


def value_class(t: pa.DataType) -> str:
    """The kind of values of type ``t`` whose index entries stay valid across a type change:
    all numbers are one (int32 → int64, int → double widen), dates and timestamps one."""
    if family(t) in (Family.DATE, Family.TIMESTAMP):
        return "temporal"
    return comparison_class(t)


def column_identities(columns: Iterable[str], snapshot: Snapshot) -> tuple[ColumnIdentity, ...]:
    """The identity of each of ``columns`` in ``snapshot`` (each must exist)."""
    return tuple(
        ColumnIdentity(c.name, c.stored_name, c.field_id, value_class(c.type))
        for c in (snapshot.column(n) for n in columns)
    )


def _changed(recorded: ColumnIdentity, present: Column) -> bool:
    if (present.stored_name, present.field_id) != (recorded.stored_name, recorded.field_id):
        return True
    return recorded.value_class is not None and recorded.value_class != value_class(present.type)


def changed_columns(recorded: Sequence[ColumnIdentity], snapshot: Snapshot) -> list[str]:
    """The recorded columns that name another column in ``snapshot``: another stored name or
    field id (renamed over, or dropped and added again), or values of another kind (retyped
    by an overwrite that replaced the schema: string → long). Absent ones are not listed
    (the kinds' ``validate`` refuses them)."""
    present = {c.name: c for c in snapshot.columns}
    return [r.name for r in recorded if r.name in present and _changed(r, present[r.name])]


def require_same_columns(index: str, recorded: Sequence[ColumnIdentity], snapshot: Snapshot) -> None:
    """``InvalidIndexSpecError`` when a column the index's entries were computed from names
    another column in ``snapshot``: new entries must not be mixed with them."""
    changed = changed_columns(recorded, snapshot)
    if changed:
        raise InvalidIndexSpecError(
            f"index {index!r}: column(s) {changed} of version {snapshot.version} are not the columns "
            "the index was built from (renamed over, dropped and added again, or retyped); queries answer "
            f"without the index until it is rebuilt: refresh_index({index!r}, mode='full')"
        )
