"""The peer Delta tables (written by Spark, Databricks, delta-rs) and deltalake as their oracle."""

from __future__ import annotations

import collections
import shutil
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import deltalake
import pyarrow as pa

from lakehouse_index.source import Snapshot
from tests.support.paths import PEER_TABLES

#: Tables the connector refuses on purpose (covered by the connector's tests).
REFUSED = {"simple_table_features", "spark-shredded-variant-preview-delta"}

#: deltalake decodes INT96 as nanoseconds: 9999-12-31 overflows. Leave those columns out.
ORACLE_BUGS = {"table_with_edge_timestamps": "timestamp"}


def peer_tables() -> list[str]:
    """Names (paths relative to the peer-table folder) of every readable peer table."""
    found = sorted(str(p.parent.relative_to(PEER_TABLES)) for p in PEER_TABLES.glob("**/_delta_log"))
    return [n for n in found if n not in REFUSED]


def copy_peer_tables(dst: Path) -> Path:
    """A writable copy of every peer table under ``dst`` (the originals are shared, read-only)."""
    target = dst / "delta-rs"
    shutil.copytree(PEER_TABLES, target, symlinks=True)
    return target


def multiset(table: pa.Table | list[Any], schema: pa.Schema) -> collections.Counter[str]:
    """Rows as a multiset of canonical strings, values cast to ``schema``'s types."""
    if isinstance(table, list):  # Spark rows
        return collections.Counter(repr(tuple(r)) for r in table)
    cols = [_as(table.column(f.name), f.type).to_pylist() for f in schema]
    return collections.Counter(repr(row) for row in zip(*cols, strict=True))


def _as(column: pa.ChunkedArray, typ: pa.DataType) -> pa.ChunkedArray:
    # A cast to the same type still checks non-nullable children, and ``take`` leaves values
    # under null parents that fail that check although no reader sees them: cast only if needed.
    return column if column.type.equals(typ) else column.cast(typ)


def oracle_scan(path: str, version: int) -> pa.Table:
    """Every live row of ``path`` at ``version``, read by deltalake (deletion vectors applied)."""
    return pa.RecordBatchReader.from_stream(deltalake.DeltaTable(path, version=version).scan()).read_all()


def readable_versions(path: str, versions: Iterable[int]) -> Iterator[tuple[int, pa.Table]]:
    """(version, deltalake's rows) for each of ``versions`` deltalake can read.

    Some fixtures lack data files of some versions: those are left out.
    """
    for version in versions:
        try:
            rows = oracle_scan(path, version)
        except Exception:
            continue
        yield version, rows


def compared_schema(name: str, snap: Snapshot) -> pa.Schema:
    """The snapshot's columns that the oracle reads correctly for table ``name``."""
    bug = ORACLE_BUGS.get(name)
    return pa.schema([f for f in snap.schema if not (bug and bug in str(f.type))])
