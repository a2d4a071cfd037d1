"""The peer Delta tables (written by Spark, Databricks, delta-rs) and deltalake as their oracle."""

from __future__ import annotations

import collections
import functools
import re
import shutil
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
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


#: The suite's stated minimum: readable peer tables (``peer_tables()``), and (table, version)
#: pairs the oracle reads (``oracle_cases()``). A fixture that stops loading fails the tests
#: that check these, instead of silently shrinking every test that iterates over the tables.
MIN_PEER_TABLES = 48
MIN_ORACLE_CASES = 161


@dataclass(frozen=True)
class Unreadable:
    """Why deltalake (the oracle) cannot read a peer table version, and what its error says."""

    reason: str
    #: A regular expression searched in the oracle's error message.
    error: str
    #: The log reads (files listed) but the version's data files are not in the fixture.
    log_only: bool = False


LOG_ONLY = Unreadable(
    "log-only fixture: the version's data files are not part of the upstream test data",
    r"Object at location .* not found",
    log_only=True,
)
NULL_SCHEMA_STRING = Unreadable(
    "the metaData action of version 0 has a null schemaString (a Delta Live Tables quirk); "
    "deltalake refuses the whole version, the connector reads the schema of version 1",
    r"Encountered unmasked nulls in non-nullable StructArray child.*schemaString",
)
NO_METADATA = Unreadable(
    "the log keeps commit 1 without its metaData/protocol (they are in checkpoint 2 only): "
    "deltalake's history lists version 1 but cannot load it",
    r"No table metadata or protocol found",
)


def _pairs(name: str, versions: Iterable[int], why: Unreadable) -> dict[tuple[str, int], Unreadable]:
    return {(name, v): why for v in versions}


#: Every (table, version) of the readable peer tables that deltalake cannot read, with the
#: reason (found by running the oracle on every version). Any other oracle error is raised;
#: a listed pair the oracle reads after all fails too (the list must stay true).
ORACLE_UNREADABLE: dict[tuple[str, int], Unreadable] = {
    **_pairs("checkpoint_with_partitions", [1], NO_METADATA),
    **_pairs("checkpoint_with_partitions", [2], LOG_ONLY),
    **_pairs("checkpoints", range(1, 13), LOG_ONLY),
    **_pairs("checkpoints_vacuumed", range(5, 13), LOG_ONLY),
    **_pairs("delta-live-table", [0], NULL_SCHEMA_STRING),
    **_pairs("latest_not_checkpointed", range(1, 4), LOG_ONLY),
    **_pairs("spark-variant-stable-feature-checkpoint", [0, 1], LOG_ONLY),
    **_pairs("table-with-domain-metadata", [108], LOG_ONLY),
    **_pairs("with_checkpoint_no_last_checkpoint", range(1, 4), LOG_ONLY),
}


def peer_tables() -> list[str]:
    """Names (paths relative to the peer-table folder) of every readable peer table."""
    found = sorted(str(p.parent.relative_to(PEER_TABLES)) for p in PEER_TABLES.glob("**/_delta_log"))
    return [n for n in found if n not in REFUSED]


def oracle_cases() -> list[tuple[str, int]]:
    """Every (table, version) of the readable peer tables that the oracle must read."""
    from lakehouse_index_delta import DeltaSource

    from lakehouse_index.io import Storage

    cases = []
    for name in peer_tables():
        path = str(PEER_TABLES / name)
        src = DeltaSource.open(path, Storage.for_uri(path))
        cases += [(name, i.version) for i in src.versions() if (name, i.version) not in ORACLE_UNREADABLE]
    return cases


def check_minimum_cases() -> None:
    """Fail when fewer peer tables or oracle cases load than the suite states."""
    tables = peer_tables()
    assert len(tables) >= MIN_PEER_TABLES, f"{len(tables)} peer tables under {PEER_TABLES}"
    cases = oracle_cases()
    assert len(cases) >= MIN_ORACLE_CASES, f"only {len(cases)} (table, version) oracle cases"


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


def expect_oracle_failure(name: str, version: int, call: Callable[[], object]) -> Unreadable:
    """Run the oracle ``call`` on a listed unreadable version: it must fail as listed."""
    why = ORACLE_UNREADABLE[(name, version)]
    try:
        call()
    except Exception as e:
        if not re.search(why.error, str(e), re.DOTALL):
            raise AssertionError(f"{name}@{version}: the oracle failed otherwise than listed") from e
        return why
    raise AssertionError(f"deltalake reads {name}@{version}, listed as unreadable: {why.reason}")


def readable_versions(name: str, path: str, versions: Iterable[int]) -> Iterator[tuple[int, pa.Table]]:
    """(version, deltalake's rows) for each of ``versions`` but those in ``ORACLE_UNREADABLE``.

    A listed version must fail in the oracle as listed; any other oracle error is raised.
    """
    for version in versions:
        if (name, version) in ORACLE_UNREADABLE:
            expect_oracle_failure(name, version, functools.partial(oracle_scan, path, version))
            continue
        yield version, oracle_scan(path, version)


def compared_schema(name: str, snap: Snapshot) -> pa.Schema:
    """The snapshot's columns that the oracle reads correctly for table ``name``."""
    bug = ORACLE_BUGS.get(name)
    return pa.schema([f for f in snap.schema if not (bug and bug in str(f.type))])
