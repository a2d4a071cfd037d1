"""Checks every index kind makes of its columns against a table snapshot."""

from __future__ import annotations

from collections.abc import Collection, Iterable

from lakehouse_index.errors import InvalidIndexSpecError
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
