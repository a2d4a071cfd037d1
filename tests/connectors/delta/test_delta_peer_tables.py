"""Real tables written by Spark, Databricks and delta-rs: at every version the connector's live
files and rows (read with pyarrow through the connector's metadata: column mapping, partition
values, deletion vectors) equal deltalake's, or the table is refused with a clear error."""

from __future__ import annotations

import functools
import shutil
from pathlib import Path

import deltalake
import pyarrow as pa
import pytest
from delta_helpers import PEER_TABLES, multiset, open_source, oracle_files, oracle_rows, read_snapshot_rows

from lakehouse_index.source import UnsupportedFeatureError
from tests.support.delta_peers import ORACLE_UNREADABLE, check_minimum_cases, expect_oracle_failure


def _tables() -> list[str]:
    found = []
    for log in sorted(PEER_TABLES.glob("**/_delta_log")):
        found.append(str(log.parent.relative_to(PEER_TABLES)))
    return found


#: Tables the connector refuses on purpose, with the feature its error must name.
REFUSED = {
    # deltalake also refuses it (reader features listed with minReaderVersion 5, one unknown).
    "simple_table_features": "blahabl",
    # Shredded variants need the reader to reassemble values from typed sub-columns.
    "spark-shredded-variant-preview-delta": "variantShredding-preview",
}


#: deltalake misreads these; the row comparison leaves out the columns it gets wrong.
ORACLE_BUGS = {
    # INT96 timestamps are decoded as nanoseconds: 9999-12-31 overflows to 1816.
    "table_with_edge_timestamps": "timestamp",
}


@pytest.fixture(scope="module")
def peer_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    dst = tmp_path_factory.mktemp("peer") / "delta-rs"
    shutil.copytree(PEER_TABLES, dst, symlinks=True)
    return dst


def test_peer_tables_present() -> None:
    assert len(_tables()) >= 45
    check_minimum_cases()  # and the oracle cases of the readable ones


@pytest.mark.parametrize("name", _tables())
def test_peer_table_matches_deltalake(name: str, peer_copy: Path) -> None:
    path = peer_copy / name
    if name in REFUSED:
        with pytest.raises(UnsupportedFeatureError, match=REFUSED[name]):
            open_source(path)
        return
    src = open_source(path)
    for info in src.versions():
        v = info.version
        unreadable = ORACLE_UNREADABLE.get((name, v))
        if unreadable is not None and not unreadable.log_only:
            # deltalake cannot read this version (listed with the reason): neither side is checked
            expect_oracle_failure(name, v, functools.partial(oracle_files, path, v))
            continue
        expected_files = oracle_files(path, v)
        snap = src.snapshot(v)
        assert set(snap.files) == expected_files, f"{name}@{v}"
        if unreadable is not None:
            # The fixture ships the log without the version's data files: both readers must fail.
            expect_oracle_failure(name, v, functools.partial(oracle_rows, path, v))
            with pytest.raises(FileNotFoundError):
                read_snapshot_rows(src, snap)
            continue
        theirs = oracle_rows(path, v)
        mine = read_snapshot_rows(src, snap)
        assert sorted(theirs.column_names) == sorted(snap.schema.names), f"{name}@{v}"
        schema = snap.schema
        if name in ORACLE_BUGS:
            schema = pa.schema([f for f in schema if ORACLE_BUGS[name] not in str(f.type)])
            assert mine.num_rows == theirs.num_rows
        assert multiset(mine, schema) == multiset(theirs, schema), f"{name}@{v}"
    # The latest version agrees with deltalake's notion of latest.
    assert src.latest_version() == deltalake.DeltaTable(str(path)).version()
