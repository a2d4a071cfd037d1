"""Audit records of erasures, kept under ``<index_root>/_erasure/audit/``.

A record names the subjects only by salted SHA-256 hashes. The salt is random, made
once per table (``_erasure/salt``, put-if-absent) and never leaves the side-car folder,
so a hash cannot be matched against a list of guessed keys without it, while a later
request for the same subject yields the same hash (proof the subject was erased).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import getpass
import hashlib
import json
import os
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from lakehouse_index.errors import IndexLogError
from lakehouse_index.io import Storage
from lakehouse_index.io.base import ObjectExistsError
from lakehouse_index.io.uri import join_uri

ERASURE_DIR = "_erasure"
AUDIT_DIR = "audit"
SALT_FILE = "salt"


def erasure_dir(index_root: str) -> str:
    """The side-car folder of erasure state."""
    return join_uri(index_root, ERASURE_DIR)


def table_salt(storage: Storage, index_root: str) -> bytes:
    """The table's salt, made on first use (concurrent first uses agree through put-if-absent)."""
    uri = join_uri(erasure_dir(index_root), SALT_FILE)
    try:
        return bytes.fromhex(storage.read_bytes(uri).decode())
    except FileNotFoundError:
        pass
    with contextlib.suppress(ObjectExistsError):
        storage.put_if_absent(uri, os.urandom(32).hex().encode())
    return bytes.fromhex(storage.read_bytes(uri).decode())


def _canonical(value: Any) -> Any:
    if isinstance(value, tuple | list):
        return [_canonical(v) for v in value]
    if isinstance(value, bytes):
        return {"bytes": value.hex()}
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return {type(value).__name__: value.isoformat()}
    if isinstance(value, Decimal):
        return {"decimal": str(value)}
    return value


def subject_hash(salt: bytes, key: Any) -> str:
    """``sha256:<hex>`` of the salt and the key's canonical JSON (tuples for composite keys)."""
    text = json.dumps(_canonical(key), sort_keys=True, separators=(",", ":"), default=str)
    return "sha256:" + hashlib.sha256(salt + text.encode()).hexdigest()


@dataclass(frozen=True)
class AuditRecord:
    """One erase, as written under ``_erasure/audit/`` (JSON, camelCase keys)."""

    id: str
    table_uri: str
    table_format: str
    index: str
    subjects: tuple[str, ...]
    purge: bool
    version_before: int
    versions_created: tuple[int, ...]
    ordinal_created: int | None
    files_rewritten: tuple[Mapping[str, Any], ...]
    files_removed: tuple[str, ...]
    rows_erased: int
    bytes_rewritten: int
    index_files_rewritten: tuple[str, ...]
    purge_report: Mapping[str, Any] | None
    verification: Mapping[str, Any] | None
    timings: Mapping[str, float]
    who: str
    when: str
    extra: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The record as JSON."""
        return {
            "id": self.id,
            "tableUri": self.table_uri,
            "tableFormat": self.table_format,
            "index": self.index,
            "subjects": list(self.subjects),
            "purge": self.purge,
            "versionBefore": self.version_before,
            "versionsCreated": list(self.versions_created),
            "ordinalCreated": self.ordinal_created,
            "filesRewritten": [dict(f) for f in self.files_rewritten],
            "filesRemoved": list(self.files_removed),
            "rowsErased": self.rows_erased,
            "bytesRewritten": self.bytes_rewritten,
            "indexFilesRewritten": list(self.index_files_rewritten),
            "purgeReport": self.purge_report,
            "verification": self.verification,
            "timings": dict(self.timings),
            "who": self.who,
            "when": self.when,
            **({"extra": dict(self.extra)} if self.extra else {}),
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> AuditRecord:
        """Parse :meth:`to_json` output."""
        return cls(
            id=d["id"],
            table_uri=d["tableUri"],
            table_format=d["tableFormat"],
            index=d["index"],
            subjects=tuple(d["subjects"]),
            purge=bool(d["purge"]),
            version_before=int(d["versionBefore"]),
            versions_created=tuple(int(v) for v in d["versionsCreated"]),
            ordinal_created=d.get("ordinalCreated"),
            files_rewritten=tuple(d["filesRewritten"]),
            files_removed=tuple(d["filesRemoved"]),
            rows_erased=int(d["rowsErased"]),
            bytes_rewritten=int(d["bytesRewritten"]),
            index_files_rewritten=tuple(d["indexFilesRewritten"]),
            purge_report=d.get("purgeReport"),
            verification=d.get("verification"),
            timings=dict(d["timings"]),
            who=d["who"],
            when=d["when"],
            extra=dict(d.get("extra") or {}),
        )


def who() -> str:
    """``user@host`` of this process."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = str(os.getuid()) if hasattr(os, "getuid") else "unknown"
    return f"{user}@{socket.gethostname()}"


def write_record(storage: Storage, index_root: str, record: AuditRecord) -> str:
    """Write ``record`` (put-if-absent, named by time and id); its URI."""
    stamp = record.when.replace("-", "").replace(":", "").replace(".", "").split("+")[0]
    uri = join_uri(erasure_dir(index_root), AUDIT_DIR, f"{stamp}-{record.id}.json")
    storage.put_if_absent(uri, json.dumps(record.to_json(), indent=2, sort_keys=True).encode())
    return uri


def list_records(storage: Storage, index_root: str) -> list[AuditRecord]:
    """Every audit record of the table, oldest first."""
    folder = join_uri(erasure_dir(index_root), AUDIT_DIR)
    try:
        files = storage.list_dir(folder)
    except FileNotFoundError:
        return []
    paths = [f.path for f in files if f.path.endswith(".json")]
    found = [_read_record(storage, p) for p in paths]
    return sorted(found, key=lambda r: (r.when, r.id))


def _read_record(storage: Storage, path: str) -> AuditRecord:
    try:
        return AuditRecord.from_json(json.loads(storage.read_bytes(path)))
    except (ValueError, KeyError, TypeError, AttributeError) as e:  # JSON and Unicode errors too
        raise IndexLogError(f"erasure audit record {path} is malformed: {e!r}") from e


def erased_after(records: Sequence[AuditRecord], ordinal: int) -> list[AuditRecord]:
    """Records of erases whose table commit came after the version of ordinal ``ordinal``.

    That version still holds those subjects (unless a purge removed it).
    """
    return [r for r in records if r.ordinal_created is not None and r.ordinal_created > ordinal]
