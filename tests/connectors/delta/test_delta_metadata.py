"""Timestamps (in-commit and file times), row tracking, partition value encodings, reader
feature refusal, OPTIMIZE lineage and column mapping ``id`` mode."""

from __future__ import annotations

import datetime as dt
import decimal
import json
import os
import shutil
from pathlib import Path
from typing import Any

import deltalake
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from delta_helpers import (
    PEER_TABLES,
    RecordingIO,
    multiset,
    open_source,
    oracle_files,
    oracle_rows,
    read_snapshot_rows,
)
from lakehouse_index_delta import DeltaSource
from lakehouse_index_delta.schema import parse_partition_value

from lakehouse_index.io import Storage
from lakehouse_index.source import TableFormatError, UnsupportedFeatureError, VersionNotFoundError


def copy_peer(name: str, tmp_path: Path) -> Path:
    dst = tmp_path / name
    shutil.copytree(PEER_TABLES / name, dst)
    for root, dirs, files in os.walk(dst):
        for n in dirs + files:
            os.chmod(os.path.join(root, n), 0o755)
    return dst


def log_lines(path: Path, version: int) -> list[dict[str, Any]]:
    text = (path / "_delta_log" / f"{version:020d}.json").read_text()
    return [json.loads(x) for x in text.splitlines() if x.strip()]


def write_commit(path: Path, version: int, actions: list[dict[str, Any]]) -> None:
    body = "\n".join(json.dumps(a) for a in actions) + "\n"
    (path / "_delta_log" / f"{version:020d}.json").write_text(body)


# --------------------------------------------------------------------------- timestamps


def test_in_commit_timestamps_from_peer_table(tmp_path: Path) -> None:
    path = copy_peer("cdc_ict_table", tmp_path)
    src = open_source(path)
    history = {h["version"]: h["inCommitTimestamp"] for h in deltalake.DeltaTable(str(path)).history()}
    assert {i.version: i.timestamp_ms for i in src.versions()} == history
    assert src.snapshot(1).timestamp_ms == history[1]  # differs from commitInfo.timestamp on purpose
    assert src.version_at(history[3]) == 3
    assert src.version_at(history[3] - 1) == 2
    changes = list(src.changes(None))
    assert [c.timestamp_ms for c in changes] == [history[v] for v in range(4)]


def test_in_commit_timestamps_enabled_mid_history(table_dir: Path) -> None:
    for i in range(3):
        deltalake.write_deltalake(str(table_dir), pa.table({"id": [i]}), mode="append")
    base = 1_600_000_000_000
    for v in range(3):  # file times for the versions before enablement
        os.utime(table_dir / "_delta_log" / f"{v:020d}.json", (base / 1000 + v * 10, base / 1000 + v * 10))
    meta = next(a["metaData"] for a in log_lines(table_dir, 0) if "metaData" in a)
    meta["configuration"] = {
        "delta.enableInCommitTimestamps": "true",
        "delta.inCommitTimestampEnablementVersion": "3",
        "delta.inCommitTimestampEnablementTimestamp": str(base + 100_000),
    }
    ict = {3: base + 100_000, 4: base + 200_000}
    write_commit(
        table_dir, 3, [{"commitInfo": {"inCommitTimestamp": ict[3], "timestamp": 1}}, {"metaData": meta}]
    )
    write_commit(table_dir, 4, [{"commitInfo": {"inCommitTimestamp": ict[4], "timestamp": 2}}])
    src = open_source(table_dir)
    ts = {i.version: i.timestamp_ms for i in src.versions()}
    assert ts == {0: base, 1: base + 10_000, 2: base + 20_000, 3: ict[3], 4: ict[4]}
    assert src.version_at(base + 15_000) == 1
    assert src.version_at(ict[3] + 5) == 3
    assert src.version_at(ict[4]) == 4
    # deltalake agrees where it uses file times (before enablement).
    t = deltalake.DeltaTable(str(table_dir))
    t.load_as_version(dt.datetime.fromtimestamp((base + 15_000) / 1000, dt.timezone.utc))
    assert t.version() == 1


def test_version_at_uses_commit_file_times_like_deltalake(table_dir: Path) -> None:
    for i in range(5):
        deltalake.write_deltalake(str(table_dir), pa.table({"id": [i]}), mode="append")
    base = 1_700_000_000
    for v in range(5):
        os.utime(table_dir / "_delta_log" / f"{v:020d}.json", (base + 60 * v, base + 60 * v))
    src = open_source(table_dir)
    for probe in range(base, base + 300, 17):
        t = deltalake.DeltaTable(str(table_dir))
        t.load_as_version(dt.datetime.fromtimestamp(probe, dt.timezone.utc))
        assert src.version_at(probe * 1000) == t.version(), probe


def monotonic_version_at(times_ms: list[int], timestamp_ms: int) -> int | None:
    """Spark's rule (DeltaHistoryManager): each commit's time is the later of its file time and
    one millisecond after the previous commit's; the version at a time is the last at or before it."""
    best, previous = None, None
    for v, t in enumerate(times_ms):
        previous = t if previous is None else max(t, previous + 1)
        if previous <= timestamp_ms:
            best = v
    return best


def skewed_table(path: Path, offsets_s: list[int], base_s: int = 1_700_000_000) -> list[int]:
    """One append per offset; commit file v gets modification time ``base_s + offsets_s[v]``."""
    for i in range(len(offsets_s)):
        deltalake.write_deltalake(str(path), pa.table({"id": pa.array([i], pa.int64())}), mode="append")
    for v, off in enumerate(offsets_s):
        os.utime(path / "_delta_log" / f"{v:020d}.json", (base_s + off, base_s + off))
    return [(base_s + off) * 1000 for off in offsets_s]


def test_version_at_with_skewed_commit_file_times_agrees_with_deltalake(table_dir: Path) -> None:
    # Writers with skewed clocks: version 2's file is older than version 1's.
    raw = skewed_table(table_dir, [0, 100, 50, 200])
    src = open_source(table_dir)
    base = raw[0] // 1000
    for probe in [*range(base, base + 230, 5), base + 99, base + 101, base + 199]:
        t = deltalake.DeltaTable(str(table_dir))
        t.load_as_version(dt.datetime.fromtimestamp(probe, dt.timezone.utc))
        assert src.version_at(probe * 1000) == t.version() == monotonic_version_at(raw, probe * 1000), probe
        assert set(src.snapshot(src.version_at(probe * 1000)).files) == oracle_files(table_dir, t.version())
    # Timestamps are monotonic everywhere they are reported, and version_at inverts them.
    times = {i.version: i.timestamp_ms for i in src.versions()}
    assert times == {0: raw[0], 1: raw[1], 2: raw[1] + 1, 3: raw[3]}
    assert [c.timestamp_ms for c in src.changes(None)] == [times[v] for v in range(4)]
    for v, ts in times.items():
        assert src.version_info(v).timestamp_ms == src.snapshot(v).timestamp_ms == ts
        assert src.version_at(ts) == v


def test_version_at_with_skewed_commit_file_times_follows_spark(table_dir: Path) -> None:
    # deltalake binary-searches the raw file times, so its answer here depends on its search
    # path; Spark's monotonic rule (the reference implementation's) is checked instead.
    offsets = [0, 300, 100, 200, 400, 350, 500]
    raw = skewed_table(table_dir, offsets)
    src = open_source(table_dir)
    base = raw[0]
    for probe in sorted({base + o * 1000 + d for o in offsets for d in (-1, 0, 1)} | {base + 420_000}):
        want = monotonic_version_at(raw, probe)
        if want is None:
            with pytest.raises(VersionNotFoundError):
                src.version_at(probe)
        else:
            assert src.version_at(probe) == want, probe
    # The tail keeps timestamps monotonic across commits found after the listing.
    deltalake.write_deltalake(str(table_dir), pa.table({"id": pa.array([7], pa.int64())}), mode="append")
    os.utime(table_dir / "_delta_log" / f"{7:020d}.json", (base // 1000 + 10, base // 1000 + 10))
    (change,) = src.changes(6)
    assert change.timestamp_ms == src.version_info(6).timestamp_ms + 1
    assert {i.version: i.timestamp_ms for i in src.versions()}[7] == change.timestamp_ms


def test_version_at_with_in_commit_timestamps_reads_few_commits(table_dir: Path) -> None:
    # Versions 0-2 by file time (skewed), in-commit timestamps from version 3, a checkpoint at 39.
    raw = skewed_table(table_dir, [0, 20, 10])
    base = raw[0]
    meta = next(a["metaData"] for a in log_lines(table_dir, 0) if "metaData" in a)
    meta["configuration"] = {
        "delta.enableInCommitTimestamps": "true",
        "delta.inCommitTimestampEnablementVersion": "3",
        "delta.inCommitTimestampEnablementTimestamp": str(base + 100_000),
    }
    ict = {v: base + 100_000 + 1_000 * (v - 3) for v in range(3, 40)}
    write_commit(
        table_dir, 3, [{"commitInfo": {"inCommitTimestamp": ict[3], "timestamp": 1}}, {"metaData": meta}]
    )
    for v in range(4, 40):
        write_commit(table_dir, v, [{"commitInfo": {"inCommitTimestamp": ict[v], "timestamp": 1}}])
        os.utime(table_dir / "_delta_log" / f"{v:020d}.json", (base // 1000, base // 1000))  # file times lie
    deltalake.DeltaTable(str(table_dir)).create_checkpoint()
    io = RecordingIO(str(table_dir))
    src = DeltaSource.open(str(table_dir), io)
    del io.reads[:]
    assert src.version_at(ict[25] + 500) == 25
    commit_reads = [p for p in io.reads if p.endswith(".json") and "/_delta_log/" in p]
    assert len(commit_reads) <= 8, commit_reads  # a binary search, not one read per commit
    assert src.version_at(ict[3]) == 3
    assert src.version_at(ict[39] + 10**6) == 39
    # Before the enablement time, only the versions before it count, by monotonic file time.
    for probe in (base, base + 10_000, base + 15_000, base + 20_000, base + 99_999):
        assert src.version_at(probe) == monotonic_version_at(raw, probe), probe
    assert {i.version: i.timestamp_ms for i in src.versions()} == {0: raw[0], 1: raw[1], 2: raw[1] + 1, **ict}


# --------------------------------------------------------------------------- row tracking


def test_row_tracking_exposes_base_row_ids(tmp_path: Path) -> None:
    path = copy_peer("table_with_liquid_clustering", tmp_path)
    src = open_source(path)
    snap = src.snapshot()
    config = deltalake.DeltaTable(str(path)).metadata().configuration
    assert snap.row_id_column == config["delta.rowTracking.materializedRowIdColumnName"]
    raw = {}
    for v in range(snap.version + 1):
        for a in log_lines(path, v):
            if "add" in a:
                raw[a["add"]["path"]] = a["add"].get("baseRowId")
    ids: list[int] = []
    for f in snap.files.values():
        name = f.path.rsplit("/", 1)[-1]
        assert f.first_row_id == raw[name]
        assert f.first_row_id is not None and f.num_records is not None
        table = pq.read_table(f.path[len("file://") :])
        materialized = (
            table.column(snap.row_id_column).to_pylist()
            if snap.row_id_column in table.column_names
            else [None] * table.num_rows
        )
        deleted = src.deleted_positions(f)
        ids += [
            m if m is not None else f.first_row_id + i for i, m in enumerate(materialized) if i not in deleted
        ]
    assert len(ids) == len(set(ids))  # stable row ids are unique


def test_no_row_tracking_means_no_row_id_column(table_dir: Path) -> None:
    deltalake.write_deltalake(str(table_dir), pa.table({"id": [1]}))
    snap = open_source(table_dir).snapshot()
    assert snap.row_id_column is None
    assert all(f.first_row_id is None for f in snap.files.values())


# --------------------------------------------------------------------------- partition values


@pytest.mark.parametrize(
    ("raw", "dtype", "expected"),
    [
        (None, "string", None),
        ("", "integer", None),
        ("", "date", None),
        ("a%b c", "string", "a%b c"),
        ("-12", "long", -12),
        ("3.5", "double", 3.5),
        ("true", "boolean", True),
        ("2021-02-03", "date", dt.date(2021, 2, 3)),
        ("2021-02-03 04:05:06", "timestamp", dt.datetime(2021, 2, 3, 4, 5, 6, tzinfo=dt.timezone.utc)),
        (
            "2021-02-03 04:05:06.123456",
            "timestamp",
            dt.datetime(2021, 2, 3, 4, 5, 6, 123456, dt.timezone.utc),
        ),
        ("2021-02-03T04:05:06.123Z", "timestamp", dt.datetime(2021, 2, 3, 4, 5, 6, 123000, dt.timezone.utc)),
        ("2021-02-03T06:05:06+02:00", "timestamp", dt.datetime(2021, 2, 3, 4, 5, 6, tzinfo=dt.timezone.utc)),
        ("2021-02-03 04:05:06.123456789", "timestamp_ntz", dt.datetime(2021, 2, 3, 4, 5, 6, 123456)),
        ("12.340", "decimal(10,3)", decimal.Decimal("12.340")),
        ("\u0001\u0002", "binary", b"\x01\x02"),
    ],
)
def test_partition_value_encodings(raw: str | None, dtype: str, expected: Any) -> None:
    assert parse_partition_value(raw, dtype, "test") == expected


def test_bad_partition_value_names_the_file(table_dir: Path) -> None:
    deltalake.write_deltalake(str(table_dir), pa.table({"id": [1], "p": [1]}), partition_by=["p"])
    path = table_dir / "_delta_log" / f"{0:020d}.json"
    path.write_text(path.read_text().replace('"p":"1"', '"p":"one"'))
    with pytest.raises(TableFormatError, match=r"'one' is not a valid (integer|long)"):
        open_source(table_dir).snapshot()


# --------------------------------------------------------------------------- features


def test_unknown_reader_feature_is_refused_and_writer_feature_tolerated(table_dir: Path) -> None:
    deltalake.write_deltalake(str(table_dir), pa.table({"id": [1]}))
    proto = {
        "minReaderVersion": 3,
        "minWriterVersion": 7,
        "readerFeatures": ["deletionVectors"],
        "writerFeatures": ["deletionVectors", "someFutureWriterFeature"],
    }
    write_commit(table_dir, 1, [{"commitInfo": {"timestamp": 1}}, {"protocol": proto}])
    assert open_source(table_dir).latest_version() == 1
    proto2 = dict(proto, readerFeatures=["deletionVectors", "catalogManaged", "fancyNewThing"])
    write_commit(table_dir, 2, [{"commitInfo": {"timestamp": 2}}, {"protocol": proto2}])
    with pytest.raises(UnsupportedFeatureError, match=r"catalogManaged.*fancyNewThing"):
        open_source(table_dir)
    # Older versions remain readable; tailing into the upgrade stops with the same error.
    src = open_source_at_most(table_dir, 1)
    with pytest.raises(UnsupportedFeatureError, match="fancyNewThing"):
        list(src.changes(1))


def open_source_at_most(path: Path, version: int) -> Any:
    from lakehouse_index_delta import DeltaSource

    src = DeltaSource(str(path), Storage.for_uri(str(path)))
    src.snapshot(version)
    return src


# --------------------------------------------------------------------------- lineage


def test_optimize_is_not_a_data_change(table_dir: Path) -> None:
    for i in range(4):
        deltalake.write_deltalake(
            str(table_dir), pa.table({"id": list(range(i * 5, i * 5 + 5))}), mode="append"
        )
    deltalake.DeltaTable(str(table_dir)).optimize.compact()
    src = open_source(table_dir)
    (change,) = list(src.changes(3))
    assert change.data_change is False and change.operation == "OPTIMIZE"
    assert len(change.removed) == 4 and len(change.added) == 1
    assert (
        sum(f.num_records or 0 for f in change.removed) == sum(f.num_records or 0 for f in change.added) == 20
    )
    appends = list(src.changes(None, 3))
    assert all(c.data_change for c in appends)


# --------------------------------------------------------------------------- column mapping id mode


def test_column_mapping_id_mode(table_dir: Path) -> None:
    """Data files whose column names mean nothing: only field ids link them to the schema."""
    (table_dir / "_delta_log").mkdir()
    fields = [
        pa.field("col-aaa", pa.int64(), metadata={b"PARQUET:field_id": b"1"}),
        pa.field("col-bbb", pa.string(), metadata={b"PARQUET:field_id": b"2"}),
    ]
    data = pa.table([pa.array([1, 2, 3]), pa.array(["x", "y", None])], schema=pa.schema(fields))
    pq.write_table(data, table_dir / "f1.parquet")
    schema = {
        "type": "struct",
        "fields": [
            {
                "name": "id",
                "type": "long",
                "nullable": True,
                "metadata": {"delta.columnMapping.id": 1, "delta.columnMapping.physicalName": "col-aaa"},
            },
            {
                "name": "name",
                "type": "string",
                "nullable": True,
                "metadata": {"delta.columnMapping.id": 2, "delta.columnMapping.physicalName": "col-bbb"},
            },
            {
                "name": "part",
                "type": "date",
                "nullable": True,
                "metadata": {"delta.columnMapping.id": 3, "delta.columnMapping.physicalName": "col-ccc"},
            },
        ],
    }
    meta = {
        "id": "t",
        "format": {"provider": "parquet", "options": {}},
        "schemaString": json.dumps(schema),
        "partitionColumns": ["part"],
        "createdTime": 0,
        "configuration": {"delta.columnMapping.mode": "id", "delta.columnMapping.maxColumnId": "3"},
    }
    proto = {"minReaderVersion": 2, "minWriterVersion": 5}
    add = {
        "path": "f1.parquet",
        "partitionValues": {"col-ccc": "2024-02-29"},
        "size": (table_dir / "f1.parquet").stat().st_size,
        "modificationTime": 0,
        "dataChange": True,
        "stats": json.dumps({"numRecords": 3}),
    }
    write_commit(
        table_dir,
        0,
        [{"commitInfo": {"timestamp": 0}}, {"protocol": proto}, {"metaData": meta}, {"add": add}],
    )
    src = open_source(table_dir)
    snap = src.snapshot()
    assert [(c.name, c.physical_name, c.field_id, c.in_data_files) for c in snap.columns] == [
        ("id", "col-aaa", 1, True),
        ("name", "col-bbb", 2, True),
        ("part", "col-ccc", 3, False),
    ]
    (entry,) = snap.files.values()
    assert entry.partition_dict == {"part": dt.date(2024, 2, 29)}
    mine = read_snapshot_rows(src, snap)
    assert multiset(mine, snap.schema) == multiset(oracle_rows(table_dir, 0), snap.schema)
