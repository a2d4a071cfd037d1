"""Which version a read through the source pins: the formats' own time travel, with their errors.

A Spark user moving from ``format("delta")`` or ``format("iceberg")`` keeps their options and
meets the failures those sources raise, in their words:

* **Delta** (delta-spark): ``versionAsOf`` is an integer version the log still has;
  ``timestampAsOf`` names the version current at that instant and must lie between the first
  and the latest commit (delta-spark refuses a time after the latest commit, where the library's
  ``Table.resolve_version`` reads the latest version).
* **Iceberg** (Iceberg's Spark source): ``versionAsOf`` is a snapshot id or a branch or tag
  name and ``timestampAsOf`` an instant (Spark's ``VERSION AS OF`` / ``TIMESTAMP AS OF``);
  ``snapshot-id``, ``as-of-timestamp`` (milliseconds), ``branch`` and ``tag`` are Iceberg's
  reader options (one at most, checked by :func:`.options.parse_options`). ``branch`` and
  ``tag`` each accept the name of any reference, as Iceberg's source does. A time after the
  latest snapshot reads the latest.
  Iceberg's options on a Delta table are refused: delta-spark would ignore them and read the
  latest version, which is not what their user asked for.

A version purged for an erasure keeps the library's own error (:class:`VersionPurgedError`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

from lakehouse_index.api import Table
from lakehouse_index.errors import QueryError, VersionNotFoundError, VersionPurgedError
from lakehouse_index.spark_source.options import SourceOptions

__all__ = ["pinned_version"]


def _iso(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc).isoformat(timespec="milliseconds")


def _worded(resolve: Callable[[], int], message: str) -> int:
    """``resolve()``, its VersionNotFoundError said in the format's words (the library's detail kept)."""
    try:
        return resolve()
    except VersionPurgedError:
        raise
    except VersionNotFoundError as e:
        raise VersionNotFoundError(f"{message} ({e})") from e


def _delta(table: Table, options: SourceOptions) -> int:
    version, timestamp = options.version_as_of, options.timestamp_as_of
    if isinstance(version, str):
        raise QueryError(
            f"versionAsOf needs to be a valid begin value: Delta versions are integers, not {version!r}"
        )
    if version is None and timestamp is None:
        return table.resolve_version()
    versions = table.source.versions()
    first, latest = versions[0], versions[-1]
    if version is not None:
        return _worded(
            lambda: table.resolve_version(version),
            f"Cannot time travel Delta table to version {version}. "
            f"Available versions: [{first.version}, {latest.version}].",
        )
    assert timestamp is not None
    ms = int(timestamp.timestamp() * 1000)
    if ms > latest.timestamp_ms:
        raise VersionNotFoundError(
            f"The provided timestamp ({timestamp.isoformat()}) is after the latest version available to "
            f"this table ({latest.version}, committed at {_iso(latest.timestamp_ms)}): use a timestamp at "
            "or before it"
        )
    return _worded(
        lambda: table.resolve_version(timestamp_as_of=timestamp),
        f"The provided timestamp ({timestamp.isoformat()}) is before the earliest version available to "
        f"this table ({first.version}, committed at {_iso(first.timestamp_ms)})",
    )


def _iceberg(table: Table, options: SourceOptions) -> int:
    o = options
    if o.snapshot_id is not None:
        sid = o.snapshot_id
        return _worded(lambda: table.resolve_version(sid), f"Cannot find snapshot with ID {sid}")
    if o.as_of_timestamp_ms is not None:
        ms = o.as_of_timestamp_ms
        return _worded(
            lambda: table.resolve_version(timestamp_as_of=ms), f"Cannot find a snapshot older than {_iso(ms)}"
        )
    if o.branch is not None:
        branch = o.branch
        return _worded(lambda: table.resolve_version(branch), f"Cannot use branch (does not exist): {branch}")
    if o.tag is not None:
        tag = o.tag
        return _worded(
            lambda: table.resolve_version(tag), f"Cannot find snapshot associated with tag name: {tag}"
        )
    if o.version_as_of is not None:
        ref = o.version_as_of
        return _worded(
            lambda: table.resolve_version(ref),
            f"Cannot find matching snapshot ID or reference name for version {ref}",
        )
    if o.timestamp_as_of is not None:
        at = o.timestamp_as_of
        return _worded(
            lambda: table.resolve_version(timestamp_as_of=at),
            f"Cannot find a snapshot older than {at.isoformat()}",
        )
    return table.resolve_version()


def _generic(table: Table, options: SourceOptions) -> int:
    """``versionAsOf`` / ``timestampAsOf`` as ``Table.resolve_version`` takes them (formats without a
    Spark source of their own to follow)."""
    return table.resolve_version(options.version_as_of, options.timestamp_as_of)


#: The time-travel dialect of each format's own Spark source, by format name (a format not listed
#: reads ``versionAsOf`` / ``timestampAsOf`` as ``Table.resolve_version`` does).
DIALECTS: dict[str, Callable[[Table, SourceOptions], int]] = {"iceberg": _iceberg, "delta": _delta}


def pinned_version(table: Table, options: SourceOptions) -> int:
    """The version a read of ``table`` with ``options`` reads, as the table format's own source picks it."""
    fmt = table.source.format_name
    dialect = DIALECTS.get(fmt, _generic)
    if options.iceberg_time_travel and dialect is not _iceberg:
        raise QueryError(
            f"option(s) {', '.join(options.iceberg_time_travel)} are Apache Iceberg's time travel, and "
            f"{options.path} is a {fmt} table: use versionAsOf or timestampAsOf"
        )
    return dialect(table, options)
