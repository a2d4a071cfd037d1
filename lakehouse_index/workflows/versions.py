"""Which table version a query at ``version_as_of`` / ``timestamp_as_of`` reads.

A version a GDPR purge removed says so (:class:`~lakehouse_index.errors.VersionPurgedError`
naming the purge), never a bare "not found" or a wrong answer; a version still holding
subjects a later erase removed (without purge) warns (``ErasedSubjectsWarning``).
"""

from __future__ import annotations

import datetime as dt
import warnings
from typing import Any

from lakehouse_index.context import IndexContext
from lakehouse_index.errors import ErasedSubjectsWarning, VersionNotFoundError
from lakehouse_index.sink import purge_record
from lakehouse_index.source import Snapshot
from lakehouse_index.workflows.erasure import audit


def epoch_ms(ts: dt.datetime | int) -> int:
    """A timestamp as milliseconds since the epoch (a naive datetime is UTC)."""
    if isinstance(ts, dt.datetime):
        if ts.tzinfo is None:
            ts = ts.replace(tzinfo=dt.timezone.utc)
        return int(ts.timestamp() * 1000)
    return int(ts)


def resolve_version(
    ctx: IndexContext,
    version_as_of: int | str | None = None,
    timestamp_as_of: dt.datetime | int | None = None,
) -> int:
    """The table version a query at (``version_as_of`` | ``timestamp_as_of``) reads (latest: neither)."""
    if version_as_of is not None and timestamp_as_of is not None:
        raise ValueError("give version_as_of or timestamp_as_of, not both")
    ts = epoch_ms(timestamp_as_of) if timestamp_as_of is not None else None
    source = ctx.source
    try:
        version = source.resolve_version(version_as_of) if ts is None else source.version_at(ts)
        if version_as_of is not None:
            source.version_info(version)  # a snapshot id is checked here, not on first read
    except VersionNotFoundError:
        purged = purge_record.purged_error(ctx.storage, ctx.index_root, version_as_of, ts)
        if purged is None:
            raise
        raise purged from None
    if version_as_of is not None or timestamp_as_of is not None:
        _warn_if_erased_later(ctx, version)
    return version


def snapshot(
    ctx: IndexContext, version_as_of: int | str | None = None, timestamp_as_of: Any = None
) -> Snapshot:
    """The table state at a version (latest by default), resolved by :func:`resolve_version`."""
    return ctx.source.snapshot(resolve_version(ctx, version_as_of, timestamp_as_of))


def _warn_if_erased_later(ctx: IndexContext, version: int) -> None:
    """ErasedSubjectsWarning when a later erase (without purge of this version) removed subjects."""
    records = audit.list_records(ctx.storage, ctx.index_root)
    if not records:
        return
    later = audit.erased_after(records, ctx.source.version_info(version).ordinal)
    if later:
        firsts = sorted(v for r in later for v in r.versions_created)
        warnings.warn(
            ErasedSubjectsWarning(
                f"version {version} of {ctx.uri} still holds {sum(len(r.subjects) for r in later)} "
                f"data subject(s) erased by version(s) {firsts}; erase with purge=True to remove them "
                "from the history"
            ),
            stacklevel=4,
        )
