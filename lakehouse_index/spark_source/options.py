"""The options of ``spark.read.format("lakehouse_index")``, checked once into a frozen dataclass.

Spark hands a Python data source its options with lower-cased keys (``versionAsOf`` arrives
as ``versionasof``), so keys are matched case-insensitively. An unknown key is an error (a
misspelt ``versionAsOf`` must not silently read the latest version).

The time-travel options are the formats' own: Delta's (and Spark's) ``versionAsOf`` and
``timestampAsOf``, Iceberg's ``snapshot-id``, ``as-of-timestamp``, ``branch`` and ``tag``. Their
combinations are checked here, their values against the table in :mod:`.time_travel`.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field

from lakehouse_index.errors import QueryError
from lakehouse_index.expressions.literals import parse_timestamp

__all__ = ["OPTIONS", "SourceOptions", "parse_options"]

#: Every option the source accepts (its spelling in the docs) → what it means.
OPTIONS: Mapping[str, str] = {
    "path": "the table: a Delta or Iceberg table location, or an Iceberg identifier with `catalog`",
    "versionAsOf": "the table version to read (Delta version, Iceberg snapshot id, or tag / branch name)",
    "timestampAsOf": "read the version current at this instant (ISO timestamp; UTC without an offset)",
    "snapshot-id": "Iceberg: the snapshot to read, by id",
    "as-of-timestamp": "Iceberg: read the snapshot current at this instant (milliseconds since the epoch)",
    "branch": "Iceberg: read the head of this branch",
    "tag": "Iceberg: read the snapshot of this tag",
    "catalog": "a pyiceberg catalog name: `path` is then a table identifier (`db.table`)",
    "indexRoot": "where the table's indexes live, when not in `<table>/_lakehouse_index/`",
    "useIndexes": "`false` reads every live file without consulting the indexes (default `true`)",
    "forceIndex": "`true` answers through an index even where the planner estimates a plain scan cheaper",
    "where": "a predicate (the library's Spark SQL `where`) every row of the DataFrame satisfies, planned "
    "with the indexes once for the DataFrame: the index-accelerated read that stays exact however often "
    "the DataFrame is queried",
    "pushFilters": "`true` also plans the read with the filters Spark pushes from each query's WHERE "
    "(default `false`): exact only for a DataFrame queried once (see the Spark guide)",
    "storage.<key>": "an object-store option (`storage.AWS_REGION`...), passed to the storage layer",
}

_STORAGE = "storage."
_BOOLEANS = {"true": True, "false": False}
#: Iceberg's own time-travel options: at most one of them, and none with versionAsOf / timestampAsOf.
ICEBERG_TIME_TRAVEL = ("snapshot-id", "as-of-timestamp", "branch", "tag")


@dataclass(frozen=True)
class SourceOptions:
    """The checked options of one read."""

    path: str
    version_as_of: int | str | None = None
    timestamp_as_of: dt.datetime | None = None
    snapshot_id: int | None = None
    as_of_timestamp_ms: int | None = None
    branch: str | None = None
    tag: str | None = None
    catalog: str | None = None
    index_root: str | None = None
    use_indexes: bool = True
    force_index: bool = False
    where: str | None = None
    push_filters: bool = False
    storage_options: tuple[tuple[str, str], ...] = field(default=())

    @property
    def iceberg_time_travel(self) -> dict[str, object]:
        """The Iceberg time-travel options given, by name."""
        values = (self.snapshot_id, self.as_of_timestamp_ms, self.branch, self.tag)
        return {name: v for name, v in zip(ICEBERG_TIME_TRAVEL, values, strict=True) if v is not None}

    @property
    def table_key(self) -> tuple[object, ...]:
        """What identifies the opened table (for caching it in a worker)."""
        return (self.path, self.catalog, self.index_root, self.storage_options, self.force_index)


def _boolean(name: str, value: str) -> bool:
    try:
        return _BOOLEANS[value.strip().lower()]
    except KeyError:
        raise QueryError(f"option {name} must be true or false, not {value!r}") from None


def _integer(name: str, value: str, what: str) -> int:
    try:
        return int(value.strip())
    except ValueError:
        raise QueryError(f"option {name} is {what}, not {value!r}") from None


def _where(value: str | None) -> str | None:
    if value is not None and not value.strip():
        raise QueryError("option where is empty")
    return value


def _iceberg_time_travel(values: Mapping[str, str]) -> tuple[int | None, int | None, str | None, str | None]:
    """Iceberg's options (snapshot id, milliseconds, branch, tag), checked as Iceberg's source checks them."""
    given = [name for name in ICEBERG_TIME_TRAVEL if name in values]
    if len(given) > 1:
        listed = ", ".join(f"{name} ({values.get(name)})" for name in ICEBERG_TIME_TRAVEL)
        raise QueryError(f"Can specify only one of {listed}")
    if given and ("versionAsOf" in values or "timestampAsOf" in values):
        raise QueryError(
            f"give versionAsOf / timestampAsOf or Iceberg's {given[0]}, not both "
            "(Iceberg: cannot do time-travel based on both table identifier and AS OF)"
        )
    snapshot = values.get("snapshot-id")
    ms = values.get("as-of-timestamp")
    refs: dict[str, str] = {}
    for name in ("branch", "tag"):
        if name in values:
            refs[name] = values[name].strip()
            if not refs[name]:
                raise QueryError(f"option {name} is empty")
    return (
        None if snapshot is None else _integer("snapshot-id", snapshot, "a snapshot id (a number)"),
        None if ms is None else _integer("as-of-timestamp", ms, "milliseconds since the epoch"),
        refs.get("branch"),
        refs.get("tag"),
    )


def parse_options(options: Mapping[str, str]) -> SourceOptions:
    """Check the reader options; QueryError names the offending one."""
    known = {k.lower(): k for k in OPTIONS if not k.endswith("<key>")}
    values: dict[str, str] = {}
    storage: dict[str, str] = {}
    for key, value in options.items():
        if key.lower().startswith(_STORAGE):
            storage[key[len(_STORAGE) :]] = value
        elif key.lower() in known:
            values[known[key.lower()]] = value
        else:
            raise QueryError(
                f"unknown option {key!r} for format lakehouse_index; known: {', '.join(OPTIONS)}"
            )
    path = values.get("path")
    if not path:
        raise QueryError("lakehouse_index needs a table: .load(path) or option path")
    if "versionAsOf" in values and "timestampAsOf" in values:
        raise QueryError("give versionAsOf or timestampAsOf, not both")
    version: int | str | None = values.get("versionAsOf")
    if isinstance(version, str):
        version = int(version) if version.strip().lstrip("-").isdigit() else version.strip()
    snapshot_id, as_of_ms, branch, tag = _iceberg_time_travel(values)
    timestamp = None
    if "timestampAsOf" in values:
        try:
            timestamp = parse_timestamp(values["timestampAsOf"])
        except ValueError:
            raise QueryError(f"timestampAsOf is no timestamp: {values['timestampAsOf']!r}") from None
        if timestamp.tzinfo is None:
            timestamp = timestamp.replace(tzinfo=dt.timezone.utc)
    return SourceOptions(
        path=path,
        version_as_of=version,
        timestamp_as_of=timestamp,
        catalog=values.get("catalog"),
        index_root=values.get("indexRoot"),
        use_indexes=_boolean("useIndexes", values.get("useIndexes", "true")),
        force_index=_boolean("forceIndex", values.get("forceIndex", "false")),
        where=_where(values.get("where")),
        push_filters=_boolean("pushFilters", values.get("pushFilters", "false")),
        storage_options=tuple(sorted(storage.items())),
        snapshot_id=snapshot_id,
        as_of_timestamp_ms=as_of_ms,
        branch=branch,
        tag=tag,
    )
