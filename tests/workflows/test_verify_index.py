"""``verify_index``: the users' differential self-check passes on healthy indexes of every kind,
at several versions, and catches an index that lost entries (a corrupted index file)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake

import lakehouse_index as li
from lakehouse_index.io import join_uri
from lakehouse_index.log.entry import Level
from tests.support.paths import code_env


def _batch(start: int, n: int = 200) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "k": pa.array([None if i % 29 == 0 else f"k{i % 37}" for i in ids]),
            "g": pa.array([i % 5 for i in ids], pa.int64()),
        }
    )


def _history(path: Path) -> li.Table:
    """Three appends, a delete and an update; indexes refreshed in between, one left stale."""
    write_deltalake(str(path), _batch(0))
    t = li.open_table(str(path))
    t.create_index(li.SecondaryIndex("by_k", key="k", record_key="id"))
    t.create_index(li.SecondaryIndex("by_kg", key=["k", "g"]))
    t.create_index(li.CoveringIndex("cov", indexed="k", included=["id"], num_buckets=4))
    t.create_index(li.SkippingIndex("skip", columns="g"))
    write_deltalake(str(path), _batch(200), mode="append")
    DeltaTable(str(path)).delete("id % 7 = 0")
    for name in ("by_k", "by_kg", "cov", "skip"):
        t.refresh_index(name, "incremental")
    DeltaTable(str(path)).update(predicate="id % 11 = 1", updates={"k": "'changed'"})
    write_deltalake(str(path), _batch(400), mode="append")  # not indexed: the hybrid scan repairs
    return t


@pytest.mark.parametrize("name", ["by_k", "by_kg", "cov", "skip"])
def test_healthy_indexes_pass_at_every_version(tmp_path: Path, name: str) -> None:
    t = _history(tmp_path / "t")
    report = t.verify_index(name, sample=30, versions=list(range(t.latest_version() + 1)), seed=1)
    assert report.ok, str(report)
    assert report.versions == tuple(range(t.latest_version() + 1))
    distinct = 5 if name == "skip" else 30  # g has 5 values; k (and (k, g)) more than 30
    assert report.keys == distinct and report.checks >= distinct * len(report.versions)


def _lose_key(t: li.Table, name: str, key: str) -> None:
    """Silently drop every entry of ``key`` from the index's base file (simulated data loss)."""
    entry = t.context.log(name).latest_stable()
    assert entry is not None
    base = next(f for f in entry.content.files if f.level is Level.BASE)
    fs, path = t.storage.arrow(join_uri(t.context.index_dir(name), base.path))
    rows = pq.read_table(path, filesystem=fs)
    pq.write_table(rows.filter(pc.fill_null(pc.not_equal(rows["k"], key), True)), path, filesystem=fs)


def test_an_index_that_lost_entries_is_caught(tmp_path: Path) -> None:
    t = _history(tmp_path / "t")
    _lose_key(t, "by_k", "k3")
    report = t.verify_index("by_k", sample=39, seed=2)  # every key
    assert not report.ok
    lost = {m.key for m in report.mismatches}
    assert lost == {("k3",)}, str(report)
    assert all(m.got < m.expected for m in report.mismatches)


def test_cli_verify_exits_1_on_a_mismatch(tmp_path: Path) -> None:
    t = _history(tmp_path / "t")
    cmd = [sys.executable, "-m", "lakehouse_index.cli", "verify", t.uri, "by_k", "--sample", "20"]
    env = code_env()
    ok = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert ok.returncode == 0, ok.stderr
    assert "OK" in ok.stdout
    _lose_key(t, "by_k", "k5")
    bad = subprocess.run([*cmd[:-1], "39"], capture_output=True, text=True, env=env, timeout=300)
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert "MISMATCHES" in bad.stdout and "'k5'" in bad.stdout
