"""Indexes on the peer Delta tables: every answer at every version equals deltalake's scan.

The peer tables were written by Spark, Databricks and delta-rs (deletion vectors, column
mapping, checkpoints of every kind, partition encodings, special characters, null
partitions, edge timestamps). On each, a secondary index is created at the latest version
on the first scalar data column and, for partitioned tables, on the first partition
column; then at every version deltalake can read, ``lookup`` and ``locate`` for values
present at that version (null included), for all of them at once and for a value that
does not exist, equal deltalake's rows with that key. Tables with only nested columns must
refuse the index clearly; log-only fixtures (data files absent) must fail the build naming
the missing file and leave no active index. Earlier versions are answered by
repairing the latest snapshot (backward diffs), so time travel over real histories is
covered too. The planner is forced onto the index: these tables are tiny.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import deltalake
import pyarrow as pa
import pytest

import lakehouse_index as li
from lakehouse_index.config import PlannerConfig
from lakehouse_index.errors import InvalidIndexSpecError, TableFormatError
from lakehouse_index.kinds.keys import check_key_type
from lakehouse_index.log.entry import IndexState
from lakehouse_index.source import Snapshot
from tests.support.delta_peers import (
    check_minimum_cases,
    compared_schema,
    copy_peer_tables,
    multiset,
    oracle_scan,
    peer_tables,
    readable_versions,
)
from tests.support.paths import PEER_TABLES

#: Distinct present values probed per key column and version.
PROBES = 4


@pytest.fixture(scope="module")
def peer_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return copy_peer_tables(tmp_path_factory.mktemp("peer-index"))


def _scalar(snap: Snapshot, name: str) -> bool:
    try:
        check_key_type(name, snap.column(name).type)
    except InvalidIndexSpecError:
        return False
    return True


def key_columns(snap: Snapshot, schema: pa.Schema) -> list[str]:
    """The first scalar data column and the first scalar partition column the oracle reads."""
    data = [c.name for c in snap.columns if c.in_data_files and c.name in schema.names]
    parts = [c.name for c in snap.columns if not c.in_data_files and c.name in schema.names]
    picks = [next((c for c in group if _scalar(snap, c)), None) for group in (data, parts)]
    return [c for c in picks if c is not None]


def _present(rows: pa.Table, column: str) -> list[Any]:
    values = rows.column(column).to_pylist()
    distinct = list(dict.fromkeys(values))
    spread = distinct[:: max(1, len(distinct) // PROBES)][:PROBES]
    return spread + ([None] if None in distinct and None not in spread else [])


def _with_key(rows: pa.Table, column: str, keys: list[Any]) -> pa.Table:
    wanted = set(keys)
    mask = [v in wanted for v in rows.column(column).to_pylist()]
    return rows.filter(pa.array(mask, pa.bool_()))


def test_peer_oracle_cases_at_least_minimum() -> None:
    """The parametrised oracle tests below cannot shrink silently: the tables and versions load."""
    check_minimum_cases()
    assert len(REPLAYABLE) >= MIN_REPLAYABLE, REPLAYABLE


#: Peer tables whose indexes are built on Spark (``local_max_rows=0``), so the peers' builds are
#: proven on both executors; the others are indexed in process.
SPARK_BUILDS = {"COVID-19_NYT"}


@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=pytest.mark.spark) if n in SPARK_BUILDS else n for n in peer_tables()]
)
def test_index_answers_equal_deltalake_at_every_version(name: str, peer_copy: Path) -> None:
    path = str(peer_copy / name)
    table = li.open_table(path)
    latest = table.snapshot()
    keys = key_columns(latest, compared_schema(name, latest))
    if not keys:  # only nested columns: refused clearly, nothing written
        with pytest.raises(InvalidIndexSpecError, match="cannot be an index key"):
            table.create_index(li.SecondaryIndex("nested", key=latest.columns[0].name))
        assert table.indexes() == []
        return
    absent = [f.path for f in latest.files.values() if not table.storage.exists(f.path)]
    if absent:  # a log-only fixture: the build names the missing file, no index is left behind
        with pytest.raises(TableFormatError, match="missing"):
            table.create_index(li.SecondaryIndex("by_key0", key=keys[0]))
        assert all(i.state is not IndexState.ACTIVE for i in table.indexes())
        return
    table.planner_config = PlannerConfig(force_index=True)
    names = {key: f"by_key{i}" for i, key in enumerate(keys)}
    on_spark = 0 if name in SPARK_BUILDS else None
    for key, index in names.items():
        table.create_index(li.SecondaryIndex(index, key=key), local_max_rows=on_spark)
    checked = 0
    for version, theirs in readable_versions(name, path, (i.version for i in table.source.versions())):
        snap = table.snapshot(version)
        schema = compared_schema(name, snap)
        theirs = theirs.select(schema.names).cast(schema)  # string views → strings (filterable)
        for key in keys:
            if key not in snap.schema.names:
                continue  # the column did not exist yet
            present = _present(theirs, key)
            probes = [[p] for p in present] + ([present] if len(present) > 1 else [])
            for probe in [*probes, [_missing(snap.column(key).type)]]:
                want = _with_key(theirs, key, probe)
                got = table.lookup(names[key], probe, version_as_of=version)
                assert multiset(got, schema) == multiset(want, schema), f"{name}@{version} {key}={probe}"
                located = table.locate(names[key], probe, version_as_of=version)
                assert located.num_rows == want.num_rows
                assert set(located["_file"].to_pylist()) <= set(snap.files)
                checked += 1
    assert checked > 0


def _missing(typ: pa.DataType) -> Any:
    """A value of ``typ`` no peer table holds."""
    if pa.types.is_string(typ) or pa.types.is_large_string(typ) or pa.types.is_string_view(typ):
        return "\u2603 not a value of any peer table"
    if pa.types.is_integer(typ):
        return 97 if pa.types.is_int8(typ) or pa.types.is_uint8(typ) else 987_654_321
    return None


# --------------------------------------------------------------------------- replayed histories

#: What follows each revealed commit, in turn: every refresh mode and both optimizes.
MAINTENANCE = [
    "incremental",
    "quick",
    "incremental",
    "optimize-quick",
    "full",
    "incremental",
    "optimize-full",
]


def _log_version(name: str) -> int | None:
    """The table version a ``_delta_log`` file belongs to (a compacted range: its last version)."""
    parts = name.split(".")
    if not parts[0].isdigit():
        return None  # _last_checkpoint, temporary files
    if len(parts) > 2 and parts[1].isdigit() and parts[2] == "compacted":
        return int(parts[1])
    return int(parts[0])


def _reveal(src: Path, dst: Path, upto: int) -> None:
    """Copy the commits, checkpoints and sidecars of versions ``<= upto`` into ``dst``'s log."""
    log = dst / "_delta_log"
    log.mkdir(exist_ok=True)
    for f in (src / "_delta_log").iterdir():
        if f.is_dir():  # _sidecars: only referenced by checkpoints, safe to show early
            if not (log / f.name).exists():
                shutil.copytree(f, log / f.name)
            continue
        version = _log_version(f.name)
        if version is not None and version <= upto and not (log / f.name).exists():
            shutil.copy2(f, log / f.name)


def _replayable() -> list[str]:
    """Peer tables with data, a scalar key and more than one version deltalake can read.

    Their indexes are small: every step, optimizes included, runs in process (no JVM).
    """
    out: list[str] = []
    for name in peer_tables():
        path = PEER_TABLES / name
        versions = deltalake.DeltaTable(str(path)).history()
        readable = [v for v, _ in readable_versions(name, str(path), (h["version"] for h in versions))]
        if len(readable) < 2:
            continue
        first = li.open_table(str(path)).snapshot(min(readable))
        if key_columns(first, compared_schema(name, first)):
            out.append(name)
    return out


#: Peer tables whose histories are replayed (stated minimum: see the count test above).
REPLAYABLE = _replayable()
MIN_REPLAYABLE = 23


@pytest.mark.parametrize("name", REPLAYABLE)
def test_refreshes_follow_real_histories(name: str, tmp_path: Path) -> None:
    """The history is revealed commit by commit; after each, a refresh (every mode in turn)
    or an optimize, then every version so far is checked against deltalake."""
    src = PEER_TABLES / name
    dst = tmp_path / "t"
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("_delta_log"))
    versions = sorted(h["version"] for h in deltalake.DeltaTable(str(src)).history())
    readable = [v for v, _ in readable_versions(name, str(src), versions)]
    _reveal(src, dst, readable[0])
    table = li.open_table(str(dst))
    table.planner_config = PlannerConfig(force_index=True)
    first = table.snapshot()
    keys = key_columns(first, compared_schema(name, first))
    assert keys, f"{name} has no scalar key column"
    names = {key: f"by_key{i}" for i, key in enumerate(keys)}
    for key, index in names.items():
        table.create_index(li.SecondaryIndex(index, key=key))
    #: Key column → first version without it (renamed or dropped): no refresh from then on.
    gone: dict[str, int] = {}
    for step, version in enumerate(readable[1:]):
        _reveal(src, dst, version)
        action = MAINTENANCE[step % len(MAINTENANCE)]
        columns = table.snapshot().schema.names
        for key, index in names.items():
            if key in gone:
                continue
            if key not in columns:  # the refresh refuses clearly and changes nothing
                before = table.indexes()
                with pytest.raises(InvalidIndexSpecError, match=repr(key)):
                    table.refresh_index(index, mode="incremental")
                assert table.indexes() == before
                gone[key] = version
            elif action.startswith("optimize-"):
                table.refresh_index(index, mode="incremental")
                table.optimize_index(index, mode=action.removeprefix("optimize-"))
            else:
                table.refresh_index(index, mode=action)
        assert table.latest_version() == version
        for past in readable[: step + 2]:
            live = [k for k in keys if past < gone.get(k, past + 1)]
            _check_version(name, table, str(src), past, live, names)


def _check_version(
    name: str, table: li.Table, oracle_path: str, version: int, keys: list[str], names: dict[str, str]
) -> None:
    snap = table.snapshot(version)
    schema = compared_schema(name, snap)
    theirs = oracle_scan(oracle_path, version).select(schema.names).cast(schema)
    for key in keys:
        if key not in snap.schema.names:
            continue
        present = _present(theirs, key)
        for probe in [present, [_missing(snap.column(key).type)]]:
            if not probe:
                continue
            want = _with_key(theirs, key, probe)
            got = table.lookup(names[key], probe, version_as_of=version)
            assert multiset(got, schema) == multiset(want, schema), f"{name}@{version} {key}={probe}"
