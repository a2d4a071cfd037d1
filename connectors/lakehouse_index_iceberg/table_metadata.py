"""Locating and parsing an Iceberg table metadata file, and the history it describes.

A table is reached either through a pyiceberg catalog (which knows the current
metadata location) or by path: ``<table>/metadata/`` holds ``*.metadata.json`` files,
and ``version-hint.text`` (written by Spark's Hadoop catalog) names the newest
``v<N>.metadata.json``. Without a hint the highest-numbered file wins.

Ordinals (the contract's commit order) are the snapshot sequence numbers for v2+
tables. v1 tables have no sequence numbers; there the ordinal is
``timestamp_ms * 1000 + k``, ``k`` numbering snapshots committed in the same
millisecond in metadata order. That is stable under snapshot expiry except for the
corner case of expiring one of two snapshots committed in the same millisecond.
Snapshots of an upgraded table that predate the upgrade (sequence number 0) get
negative ordinals counted back from the last of them, which expiry cannot shift.

Versions are snapshot ids; the lineage questions (the main branch's history, refs, the
snapshot current at a time, the chain a tailer walks) are answered by :class:`History`.
"""

from __future__ import annotations

import gzip
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pyiceberg.schema import Schema
from pyiceberg.table.metadata import TableMetadata, TableMetadataUtil
from pyiceberg.table.snapshots import Snapshot as IcebergSnapshot

from lakehouse_index.source import (
    FileIO,
    HistoryTruncatedError,
    NotATableError,
    TableFormatError,
    UnsupportedFeatureError,
    VersionInfo,
    VersionNotFoundError,
)

MAIN_BRANCH = "main"
_VERSION_RE = re.compile(r"^v?(\d+)[-.]")


def _join(base: str, *parts: str) -> str:
    out = base.rstrip("/")
    for p in parts:
        out += "/" + p.strip("/")
    return out


def find_metadata_file(io: FileIO, table_uri: str) -> str:
    """The newest ``*.metadata.json`` of a table folder (hint first, then listing)."""
    meta_dir = _join(table_uri, "metadata")
    hint_path = _join(meta_dir, "version-hint.text")
    # Read, not checked for first: on an object store an absent object's existence check
    # costs two requests (a HEAD, then a listing for a directory of that name), a read one.
    try:
        hinted: int | None = int(io.read_bytes(hint_path).decode().strip())
    except (FileNotFoundError, ValueError, UnicodeDecodeError):
        hinted = None  # absent, or torn (only a hint): fall back to listing
    if hinted is not None:
        # The Hadoop catalog writes v<N+1> before updating the hint: probe upwards.
        found = None
        n = hinted
        while True:
            candidates = [
                _join(meta_dir, f"v{n}.metadata.json"),
                _join(meta_dir, f"v{n}.gz.metadata.json"),
            ]
            hit = next((c for c in candidates if io.exists(c)), None)
            if hit is None:
                break
            found, n = hit, n + 1
        if found is not None:
            return found
    best: tuple[int, str] | None = None
    for st in io.list_dir(meta_dir):
        name = st.path.rsplit("/", 1)[-1]
        if not name.endswith(".metadata.json"):
            continue
        m = _VERSION_RE.match(name)
        key = (int(m.group(1)) if m else -1, name)
        if best is None or key > (best[0], best[1].rsplit("/", 1)[-1]):
            best = (key[0], st.path)
    if best is None:
        raise NotATableError(f"{table_uri} is not an Iceberg table: no metadata/*.metadata.json")
    return best[1]


def has_metadata(io: FileIO, table_uri: str) -> bool:
    """Whether ``<table_uri>/metadata`` holds a metadata JSON file."""
    meta_dir = _join(table_uri, "metadata")
    try:
        return any(st.path.endswith(".metadata.json") for st in io.list_dir(meta_dir))
    except (OSError, ValueError):
        return False


def parse_metadata(io: FileIO, location: str) -> TableMetadata:
    """Read and validate one metadata file; TableFormatError naming it when corrupt."""
    try:
        raw = io.read_bytes(location)
    except FileNotFoundError as e:
        raise TableFormatError(f"Iceberg metadata file {location} is missing") from e
    try:
        if location.endswith(".gz.metadata.json") or raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
        return TableMetadataUtil.parse_raw(raw.decode("utf-8"))
    except Exception as e:  # JSON, gzip, unicode and pydantic validation errors
        raise TableFormatError(f"corrupt Iceberg metadata file {location}: {e}") from e


def read_history(io: FileIO, location: str) -> History:
    """The history of metadata file ``location``; UnsupportedFeatureError beyond format v3."""
    meta = parse_metadata(io, location)
    if int(meta.format_version) > 3:
        raise UnsupportedFeatureError(f"Iceberg format version {meta.format_version} in {location}")
    return History(meta, location)


@dataclass(frozen=True)
class History:
    """Snapshots of one metadata file, indexed for lineage and ordinal questions."""

    metadata: TableMetadata
    location: str

    @property
    def format_version(self) -> int:
        """Table format version (1, 2 or 3)."""
        return int(self.metadata.format_version)

    def snapshots(self) -> dict[int, IcebergSnapshot]:
        """Snapshot id → snapshot (cached)."""
        cached = self.__dict__.get("_snapshots")
        if cached is None:
            cached = {s.snapshot_id: s for s in self.metadata.snapshots}
            object.__setattr__(self, "_snapshots", cached)
        return cached

    def get(self, snapshot_id: int) -> IcebergSnapshot:
        """The snapshot; VersionNotFoundError if unknown or expired."""
        snap = self.snapshots().get(snapshot_id)
        if snap is None:
            raise VersionNotFoundError(
                f"Iceberg snapshot {snapshot_id} does not exist in {self.location} (never created or expired)"
            )
        return snap

    @property
    def main_head(self) -> int | None:
        """The current snapshot of the main branch (None for an empty table)."""
        ref = self.metadata.refs.get(MAIN_BRANCH)
        if ref is not None:
            return ref.snapshot_id
        sid = self.metadata.current_snapshot_id
        return sid if sid is not None and sid >= 0 else None

    def ref(self, name: str) -> int | None:
        """Snapshot id a branch or tag points to."""
        r = self.metadata.refs.get(name)
        return r.snapshot_id if r is not None else None

    def resolve(self, name: str) -> int | None:
        """The snapshot a branch or tag ``name`` points to, else the id a numeric ``name`` spells
        (None: neither); VersionNotFoundError when that snapshot expired."""
        sid = self.ref(name)
        if sid is None and name.lstrip("-").isdigit():
            sid = int(name)
        if sid is not None:
            self.get(sid)
        return sid

    def main_at(self, timestamp_ms: int) -> int | None:
        """The main branch's snapshot current at ``timestamp_ms``, from the snapshot log (so
        rollbacks are honoured); None before the first; VersionNotFoundError once it expired."""
        log = [e for e in self.metadata.snapshot_log if e.timestamp_ms <= timestamp_ms]
        if not log:
            return None
        sid = log[-1].snapshot_id
        if sid not in self.snapshots():
            raise VersionNotFoundError(f"snapshot {sid}, current at {timestamp_ms}, has expired")
        return sid

    def version_info(self, snap: IcebergSnapshot) -> VersionInfo:
        """Ordinal, timestamp and parent of ``snap``."""
        return VersionInfo(
            snap.snapshot_id, self.ordinals()[snap.snapshot_id], snap.timestamp_ms, snap.parent_snapshot_id
        )

    def lineage(self) -> list[IcebergSnapshot]:
        """Every snapshot: the main branch's lineage oldest first, then the others by ordinal."""
        head = self.main_head
        main = list(reversed(self.ancestors(head))) if head is not None else []
        on_main = {s.snapshot_id for s in main}
        others = sorted(
            (s for s in self.metadata.snapshots if s.snapshot_id not in on_main),
            key=lambda s: self.ordinals()[s.snapshot_id],
        )
        return main + others

    def chain(self, after: int | None, target: int) -> list[IcebergSnapshot]:
        """The snapshots after ``after`` (None: from the oldest retained) up to ``target`` on its
        lineage, oldest first.

        HistoryTruncatedError when one of them expired, or ``after`` is not an ancestor of
        ``target`` (rollback, another branch) or does not exist: the caller must resync.
        """
        snaps = self.snapshots()
        out: list[IcebergSnapshot] = []
        cur: int | None = target
        while cur is not None and cur != after:
            s = snaps.get(cur)
            if s is None:
                raise HistoryTruncatedError(
                    f"snapshot {cur}, an ancestor of {target}, has expired: resync from a snapshot"
                )
            out.append(s)
            cur = s.parent_snapshot_id
        if after is not None and cur != after:
            if after in snaps:
                raise HistoryTruncatedError(
                    f"snapshot {after} is not an ancestor of {target} (rollback or another branch): resync"
                )
            raise HistoryTruncatedError(
                f"snapshot {after} has expired or never existed: resync from a snapshot"
            )
        out.reverse()
        return out

    def ordinals(self) -> dict[int, int]:
        """Snapshot id → ordinal (see module docstring)."""
        cached = self.__dict__.get("_ordinals")
        if cached is not None:
            return cached
        snaps = list(self.metadata.snapshots)
        out: dict[int, int] = {}
        unsequenced = [s for s in snaps if not s.sequence_number]
        if self.format_version >= 2:
            for s in snaps:
                if s.sequence_number:
                    out[s.snapshot_id] = s.sequence_number
            for i, s in enumerate(unsequenced):
                out[s.snapshot_id] = -(len(unsequenced) - i)
        else:
            same_ms: dict[int, int] = {}
            for s in snaps:
                k = same_ms.get(s.timestamp_ms, 0)
                same_ms[s.timestamp_ms] = k + 1
                out[s.snapshot_id] = s.timestamp_ms * 1000 + k
        object.__setattr__(self, "_ordinals", out)
        return out

    def ancestors(self, snapshot_id: int) -> list[IcebergSnapshot]:
        """``snapshot_id`` and its ancestors still in the metadata, newest first."""
        out = []
        snaps = self.snapshots()
        cur: int | None = snapshot_id
        while cur is not None and cur in snaps:
            s = snaps[cur]
            out.append(s)
            cur = s.parent_snapshot_id
        return out

    def schema_for(self, snap: IcebergSnapshot | None) -> Schema:
        """The schema a snapshot was written with (the current schema when unknown)."""
        if snap is not None and snap.schema_id is not None:
            for s in self.metadata.schemas:
                if s.schema_id == snap.schema_id:
                    return s
        return self.metadata.schema()


def operation_of(snap: IcebergSnapshot) -> str | None:
    """The snapshot summary's operation (append, overwrite, delete, replace)."""
    if snap.summary is None:
        return None
    op: Any = snap.summary.operation
    return str(getattr(op, "value", op))


MetadataLocator = Callable[[], str]
