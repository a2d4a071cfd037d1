"""Log layouts: multi-part and V2 checkpoints (with sidecars), log compaction files,
broken or stale ``_last_checkpoint``, commit gaps and cleaned-up history. File sets are
compared with what deltalake reported before the log was rearranged."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import deltalake
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from delta_helpers import RecordingIO, open_source, oracle_files
from lakehouse_index_delta import DeltaSource

from lakehouse_index.io import Storage
from lakehouse_index.source import HistoryTruncatedError, TableFormatError, VersionNotFoundError


def make_table(path: Path, commits: int = 6, checkpoint_at: int | None = 3) -> dict[int, set[str]]:
    """``commits`` appends/deletes; a classic checkpoint at ``checkpoint_at``; deltalake's file sets."""
    for i in range(commits):
        if i % 3 == 2:
            deltalake.DeltaTable(str(path)).delete(f"id = {i * 10 - 15}")
        else:
            ids = list(range(i * 10, i * 10 + 10))
            deltalake.write_deltalake(
                str(path), pa.table({"id": ids, "p": [i % 2] * 10}), mode="append", partition_by=["p"]
            )
        if checkpoint_at == i:
            deltalake.DeltaTable(str(path)).create_checkpoint()
    return {v: oracle_files(path, v) for v in range(commits)}


def log(path: Path) -> Path:
    return path / "_delta_log"


def drop_commits(path: Path, upto: int) -> None:
    for v in range(upto + 1):
        (log(path) / f"{v:020d}.json").unlink()


def check(path: Path, expected: dict[int, set[str]], versions: range) -> DeltaSource:
    src = open_source(path)
    for v in versions:
        assert set(src.snapshot(v).files) == expected[v], v
    return src


def test_multipart_checkpoint(table_dir: Path) -> None:
    expected = make_table(table_dir)
    classic = log(table_dir) / f"{3:020d}.checkpoint.parquet"
    t = pq.read_table(classic)
    n = t.num_rows
    cuts = [0, n // 3, 2 * n // 3, n]
    for i in range(3):
        pq.write_table(
            t.slice(cuts[i], cuts[i + 1] - cuts[i]),
            log(table_dir) / f"{3:020d}.checkpoint.{i + 1:010d}.{3:010d}.parquet",
        )
    classic.unlink()
    drop_commits(table_dir, 2)  # only the checkpoint can rebuild version 3
    (log(table_dir) / "_last_checkpoint").write_text(json.dumps({"version": 3, "size": n, "parts": 3}))
    src = check(table_dir, expected, range(3, 6))
    assert [i.version for i in src.versions()] == [3, 4, 5]
    # deltalake agrees on the multi-part checkpoint.
    assert oracle_files(table_dir, 5) == expected[5]
    # An incomplete set is ignored; with the commits gone nothing can rebuild version 3.
    (log(table_dir) / f"{3:020d}.checkpoint.{2:010d}.{3:010d}.parquet").unlink()
    with pytest.raises(VersionNotFoundError, match="incomplete multi-part checkpoints at versions \\[3\\]"):
        open_source(table_dir)


def test_incomplete_multipart_falls_back_to_older_checkpoint(table_dir: Path) -> None:
    expected = make_table(table_dir, commits=8, checkpoint_at=2)
    deltalake.DeltaTable(str(table_dir), version=5).create_checkpoint()
    classic = log(table_dir) / f"{5:020d}.checkpoint.parquet"
    t = pq.read_table(classic)
    pq.write_table(t.slice(0, 2), log(table_dir) / f"{5:020d}.checkpoint.{1:010d}.{2:010d}.parquet")
    classic.unlink()  # part 2 of 2 never written
    drop_commits(table_dir, 1)
    check(table_dir, expected, range(2, 8))


def _write_v2(table_dir: Path, version: int, fmt: str) -> None:
    """Turn the classic checkpoint of ``version`` into a V2 checkpoint with two sidecars."""
    classic = log(table_dir) / f"{version:020d}.checkpoint.parquet"
    t = pq.read_table(classic)
    adds = t.filter(pa.compute.is_valid(t.column("add"))).select(["add"])
    (log(table_dir) / "_sidecars").mkdir()
    sidecars = []
    half = adds.num_rows // 2
    for part in (adds.slice(0, half), adds.slice(half)):
        name = f"{uuid.uuid4()}.parquet"
        pq.write_table(part, log(table_dir) / "_sidecars" / name)
        sidecars.append({"path": name, "sizeInBytes": 1, "modificationTime": 0})
    rows = t.to_pylist()
    proto = next(r["protocol"] for r in rows if r.get("protocol"))
    meta = next(r["metaData"] for r in rows if r.get("metaData"))
    meta["configuration"] = dict(meta["configuration"] or [])
    meta["format"]["options"] = dict(meta["format"]["options"] or [])
    actions: list[dict[str, Any]] = [
        {"checkpointMetadata": {"version": version}},
        {"protocol": proto},
        {"metaData": meta},
    ] + [{"sidecar": s} for s in sidecars]
    target = log(table_dir) / f"{version:020d}.checkpoint.{uuid.uuid4()}.{fmt}"
    if fmt == "json":
        target.write_text("\n".join(json.dumps({k: v for k, v in a.items()}) for a in actions) + "\n")
    else:
        sidecar_col = pa.array(
            [a.get("sidecar") for a in actions],
            pa.struct([("path", pa.string()), ("sizeInBytes", pa.int64()), ("modificationTime", pa.int64())]),
        )
        proto_rows = [a.get("protocol") for a in actions]
        body = pa.table(
            {
                "sidecar": sidecar_col,
                "protocol": pa.array(proto_rows, t.schema.field("protocol").type),
                "metaData": pa.array(
                    [None, None, meta] + [None] * len(sidecars), t.schema.field("metaData").type
                ),
            }
        )
        pq.write_table(body, target)
    classic.unlink()


@pytest.mark.parametrize("fmt", ["json", "parquet"])
def test_v2_checkpoint_with_sidecars(table_dir: Path, fmt: str) -> None:
    expected = make_table(table_dir)
    _write_v2(table_dir, 3, fmt)
    drop_commits(table_dir, 2)
    (log(table_dir) / "_last_checkpoint").unlink()
    check(table_dir, expected, range(3, 6))
    # A missing sidecar is an error naming it.
    sidecar = next((log(table_dir) / "_sidecars").iterdir())
    sidecar.unlink()
    with pytest.raises(TableFormatError, match=sidecar.name):
        open_source(table_dir)


def test_log_compaction_is_used_and_agrees(table_dir: Path) -> None:
    expected = make_table(table_dir, commits=8, checkpoint_at=None)
    deltalake.DeltaTable(str(table_dir)).compact_logs(1, 5)
    deltalake.DeltaTable(str(table_dir)).compact_logs(3, 6)  # overlapping ranges are legal
    assert (log(table_dir) / f"{1:020d}.{5:020d}.compacted.json").exists()
    io = RecordingIO(str(table_dir))
    src = DeltaSource.open(str(table_dir), io)
    assert set(src.snapshot(7).files) == expected[7]
    names = [p.rsplit("/", 1)[-1] for p in io.reads]
    assert f"{1:020d}.{5:020d}.compacted.json" in names
    assert not any(n == f"{v:020d}.json" for v in range(2, 6) for n in names)
    # Per-version reads still see every version (compaction files are never required).
    for v in range(8):
        assert set(open_source(table_dir).snapshot(v).files) == expected[v]
    assert oracle_files(table_dir, 7) == expected[7]


@pytest.mark.parametrize("content", [None, "", "{not json", '{"version": 1}', '{"version": 99}'])
def test_broken_or_stale_last_checkpoint(table_dir: Path, content: str | None) -> None:
    expected = make_table(table_dir, commits=7, checkpoint_at=4)
    target = log(table_dir) / "_last_checkpoint"
    if content is None:
        target.unlink()
    else:
        target.write_text(content)
    check(table_dir, expected, range(7))


def test_gap_in_commits_is_an_error(table_dir: Path) -> None:
    expected = make_table(table_dir, commits=6, checkpoint_at=None)
    (log(table_dir) / f"{3:020d}.json").unlink()
    src = DeltaSource(str(table_dir), Storage.for_uri(str(table_dir)))
    assert set(src.snapshot(2).files) == expected[2]
    with pytest.raises(TableFormatError, match=f"{3:020d}.json is missing"):
        src.snapshot(5)
    with pytest.raises(TableFormatError, match="gap"):
        list(src.changes(1))


def test_cleaned_up_history(table_dir: Path) -> None:
    expected = make_table(table_dir, commits=7, checkpoint_at=3)
    src = open_source(table_dir)
    list(src.changes(None, 1))  # a tailer positioned at version 1
    drop_commits(table_dir, 2)
    assert [i.version for i in src.versions()] == [3, 4, 5, 6]
    with pytest.raises(HistoryTruncatedError, match="checkpoint at version 3"):
        list(src.changes(1))
    with pytest.raises(VersionNotFoundError):
        src.snapshot(2)
    # Resync from the checkpoint, then tail.
    assert set(src.snapshot(3).files) == expected[3]
    live = set(expected[3])
    for ch in src.changes(3):
        live = (live - {f.path for f in ch.removed}) | {f.path for f in ch.added}
        assert live == expected[ch.version]


def test_a_checkpoint_left_before_a_gap_is_not_readable(table_dir: Path) -> None:
    """A log cleanup that keeps an older checkpoint (deltalake's ``cleanup_metadata`` keeps V2
    checkpoints; found by the delta-spark oracle) leaves it before a gap: delta-spark reads no
    version before its earliest recreatable commit (``Cannot time travel ... Available
    versions``), so neither does the connector: versions, snapshots and the cleaned-up error
    all start after the gap."""
    expected = make_table(table_dir, commits=7, checkpoint_at=1)
    deltalake.DeltaTable(str(table_dir), version=4).create_checkpoint()
    drop_commits(table_dir, 3)  # commits 0-3 gone; checkpoints 1 and 4 stay
    assert (log(table_dir) / f"{1:020d}.checkpoint.parquet").exists()
    src = open_source(table_dir)
    assert [i.version for i in src.versions()] == [4, 5, 6]
    for v in (1, 2):
        with pytest.raises(HistoryTruncatedError, match="resync from version 4"):
            src.snapshot(v)
    assert set(src.snapshot(4).files) == expected[4]


def test_consecutive_checkpoints_left_by_a_cleanup(table_dir: Path) -> None:
    """Checkpoints at 2 and 3 outlive commits 0-3 (found by the delta-spark oracle: checkpoints
    every other commit, a RESTORE, then ``cleanup_metadata``). delta-spark's earliest
    recreatable version is 3, the newest checkpoint below the unbroken run of commits from 4:
    the checkpoint at 2 rebuilds nothing the log carries forward, so version 2 is refused."""
    expected = make_table(table_dir, commits=7, checkpoint_at=2)
    deltalake.DeltaTable(str(table_dir), version=3).create_checkpoint()
    drop_commits(table_dir, 3)
    assert (log(table_dir) / f"{2:020d}.checkpoint.parquet").exists()
    src = open_source(table_dir)
    assert [i.version for i in src.versions()] == [3, 4, 5, 6]
    with pytest.raises(HistoryTruncatedError, match="resync from version 3"):
        src.snapshot(2)
    check(table_dir, expected, range(3, 7))
