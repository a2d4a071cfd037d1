"""The options of ``spark.read.format("lakehouse_index")``, checked once into a frozen dataclass.

Spark hands a Python data source its options with lower-cased keys (``versionAsOf`` arrives
as ``versionasof``), so keys are matched case-insensitively. An unknown key is an error (a
misspelt ``versionAsOf`` must not silently read the latest version).
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
    "catalog": "a pyiceberg catalog name: `path` is then a table identifier (`db.table`)",
    "indexRoot": "where the table's indexes live, when not in `<table>/_lakehouse_index/`",
    "useIndexes": "`false` reads every live file without consulting the indexes (default `true`)",
    "forceIndex": "`true` answers through an index even where the planner estimates a plain scan cheaper",
    "storage.<key>": "an object-store option (`storage.AWS_REGION`...), passed to the storage layer",
}

_STORAGE = "storage."
_BOOLEANS = {"true": True, "false": False}


@dataclass(frozen=True)
class SourceOptions:
    """The checked options of one read."""

    path: str
    version_as_of: int | str | None = None
    timestamp_as_of: dt.datetime | None = None
    catalog: str | None = None
    index_root: str | None = None
    use_indexes: bool = True
    force_index: bool = False
    storage_options: tuple[tuple[str, str], ...] = field(default=())

    @property
    def table_key(self) -> tuple[object, ...]:
        """What identifies the opened table (for caching it in a worker)."""
        return (self.path, self.catalog, self.index_root, self.storage_options, self.force_index)


def _boolean(name: str, value: str) -> bool:
    try:
        return _BOOLEANS[value.strip().lower()]
    except KeyError:
        raise QueryError(f"option {name} must be true or false, not {value!r}") from None


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
        storage_options=tuple(sorted(storage.items())),
    )
