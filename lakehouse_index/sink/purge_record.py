"""Purge records: ``<index_root>/_erasure/purges/<keep_version>.json``, one per purge.

A purge writes its record (put-if-absent) before it removes anything, so a query at a
version that is gone, or going, can say why: :func:`purged_error` turns the table's
"version not found" into :class:`~lakehouse_index.errors.VersionPurgedError` naming the
purge and its time. A rerun of a crashed purge finds its record and keeps it (the
record lists every version the first run planned to remove).
"""

from __future__ import annotations

import datetime as dt
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from lakehouse_index.errors import IndexLogError, VersionPurgedError
from lakehouse_index.io import ObjectExistsError, Storage, join_uri
from lakehouse_index.sink.history import PurgedVersion

#: Folder of the purge records, below the index root.
PURGES_DIR = "_erasure/purges"


@dataclass(frozen=True)
class PurgeRecord:
    """One purge: what it made unreadable, and when."""

    format: str
    table_uri: str
    keep_version: int
    kept_version: int
    purged: tuple[PurgedVersion, ...]
    refs_removed: tuple[str, ...]
    purged_at_ms: int

    def to_json(self) -> str:
        """The record's JSON text."""
        return json.dumps(
            {
                "format": self.format,
                "table_uri": self.table_uri,
                "keep_version": self.keep_version,
                "kept_version": self.kept_version,
                "purged": [{"version": p.version, "timestamp_ms": p.timestamp_ms} for p in self.purged],
                "refs_removed": list(self.refs_removed),
                "purged_at_ms": self.purged_at_ms,
            },
            indent=1,
        )

    @staticmethod
    def from_json(text: bytes, where: str) -> PurgeRecord:
        """A record from its JSON text; IndexLogError naming ``where`` when it is malformed."""
        try:
            return PurgeRecord._parse(json.loads(text))
        except (ValueError, KeyError, TypeError, AttributeError) as e:  # JSON and Unicode errors too
            raise IndexLogError(f"purge record {where} is malformed: {e!r}") from e

    @staticmethod
    def _parse(d: Any) -> PurgeRecord:
        return PurgeRecord(
            format=str(d["format"]),
            table_uri=str(d["table_uri"]),
            keep_version=int(d["keep_version"]),
            kept_version=int(d["kept_version"]),
            purged=tuple(PurgedVersion(int(p["version"]), int(p["timestamp_ms"])) for p in d["purged"]),
            refs_removed=tuple(str(r) for r in d["refs_removed"]),
            purged_at_ms=int(d["purged_at_ms"]),
        )

    def covers(self, version: int | str | None, timestamp_ms: int | None) -> bool:
        """Whether a query at ``version`` (or ``timestamp_ms``) asks for what this purge removed."""
        if isinstance(version, str):
            return version in self.refs_removed or (
                version.lstrip("-").isdigit() and self.covers(int(version), None)
            )
        if version is not None:
            return any(p.version == version for p in self.purged)
        # The table found no version at that time: if a purged version was committed at or
        # before it, the answer was purged (a time before the oldest commit never had one).
        return timestamp_ms is not None and any(p.timestamp_ms <= timestamp_ms for p in self.purged)


def record_path(index_root: str, keep_version: int) -> str:
    """Where the record of the purge keeping ``keep_version`` lives."""
    return join_uri(index_root, PURGES_DIR, f"{keep_version}.json")


def write_record(storage: Storage, index_root: str, record: PurgeRecord) -> tuple[PurgeRecord, str]:
    """Write ``record`` unless a (crashed) purge of the same version wrote one: the stored record wins."""
    path = record_path(index_root, record.keep_version)
    try:
        storage.put_if_absent(path, record.to_json().encode())
        return record, path
    except ObjectExistsError:
        return PurgeRecord.from_json(storage.read_bytes(path), path), path


def records(storage: Storage, index_root: str) -> list[PurgeRecord]:
    """Every purge record of the table, oldest purge first."""
    found = [
        PurgeRecord.from_json(storage.read_bytes(s.path), s.path)
        for s in storage.list_dir(join_uri(index_root, PURGES_DIR))
        if s.path.endswith(".json")
    ]
    return sorted(found, key=lambda r: r.purged_at_ms)


def new_record(
    format: str,
    table_uri: str,
    keep_version: int,
    kept_version: int,
    purged: Sequence[PurgedVersion],
    refs_removed: Sequence[str] = (),
) -> PurgeRecord:
    """A record stamped now."""
    return PurgeRecord(
        format,
        table_uri,
        keep_version,
        kept_version,
        tuple(purged),
        tuple(refs_removed),
        int(time.time() * 1000),
    )


def purged_error(
    storage: Storage, index_root: str, version: int | str | None, timestamp_ms: int | None
) -> VersionPurgedError | None:
    """The error for a query at a purged version (or a time only purged versions covered); None otherwise."""
    for record in records(storage, index_root):
        if record.covers(version, timestamp_ms):
            what = f"version {version!r}" if version is not None else f"the version at {timestamp_ms} ms"
            when = dt.datetime.fromtimestamp(record.purged_at_ms / 1000, dt.timezone.utc).isoformat()
            return VersionPurgedError(
                f"{what} of {record.table_uri} was purged for erasure at {when} (a GDPR erase kept only "
                f"version {record.kept_version} and removed {len(record.purged)} older version(s)): "
                "it cannot be read any more"
            )
    return None
