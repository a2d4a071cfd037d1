"""Committing a snapshot this package built itself (merge-on-read deletes, the purge's replace)."""

from __future__ import annotations

from typing import Any


def commit_on_main(tbl: Any, parent_snapshot_id: int, snapshot: Any) -> None:
    """Add ``snapshot`` to pyiceberg table ``tbl`` and point ``main`` at it, asserting that ``main``
    is still ``parent_snapshot_id`` (a lost race raises pyiceberg's ``CommitFailedException``)."""
    from pyiceberg.table import update
    from pyiceberg.table.refs import SnapshotRefType

    up: Any = update  # pydantic models with aliased fields, which mypy reads badly

    tbl.catalog.commit_table(
        tbl,
        (up.AssertRefSnapshotId(snapshot_id=parent_snapshot_id, ref="main"),),
        (
            up.AddSnapshotUpdate(snapshot=snapshot),
            up.SetSnapshotRefUpdate(
                snapshot_id=snapshot.snapshot_id,
                parent_snapshot_id=parent_snapshot_id,
                ref_name="main",
                type=SnapshotRefType.BRANCH,
            ),
        ),
    )
