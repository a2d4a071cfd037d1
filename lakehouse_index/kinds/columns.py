"""Checks every index kind makes of its columns against a table snapshot."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence

from lakehouse_index.errors import InvalidIndexSpecError
from lakehouse_index.log.entry import ColumnIdentity
from lakehouse_index.source import Snapshot


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


def column_identities(columns: Iterable[str], snapshot: Snapshot) -> tuple[ColumnIdentity, ...]:
    """The identity of each of ``columns`` in ``snapshot`` (each must exist)."""
    return tuple(
        ColumnIdentity(c.name, c.stored_name, c.field_id) for c in (snapshot.column(n) for n in columns)
    )


def changed_columns(recorded: Sequence[ColumnIdentity], snapshot: Snapshot) -> list[str]:
    """The recorded columns that name another column in ``snapshot`` (renamed over, or dropped
    and added again): another stored name or field id. Absent ones are not listed (the
    kinds' ``validate`` refuses them)."""
    present = {c.name: c for c in snapshot.columns}
    return [
        r.name
        for r in recorded
        if r.name in present
        and (present[r.name].stored_name, present[r.name].field_id) != (r.stored_name, r.field_id)
    ]


def require_same_columns(index: str, recorded: Sequence[ColumnIdentity], snapshot: Snapshot) -> None:
    """``InvalidIndexSpecError`` when a column the index's entries were computed from names
    another column in ``snapshot``: new entries must not be mixed with them."""
    changed = changed_columns(recorded, snapshot)
    if changed:
        raise InvalidIndexSpecError(
            f"index {index!r}: column(s) {changed} of version {snapshot.version} are not the columns "
            "the index was built from (renamed over, or dropped and added again); queries answer "
            f"without the index until it is rebuilt: refresh_index({index!r}, mode='full')"
        )
