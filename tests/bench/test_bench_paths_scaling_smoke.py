"""Smoke tests of the issue-18 benchmarks (lookup paths, W8 scaling) at a tiny scale, and of the
latency wrapper they count sequential requests with.

Answers are checked by the benchmarks against the generator (``email_of(i)`` names row ``i``);
here: no disagreement, sane figures, and the sections and JSON written to a temporary
BENCHMARKS file (the ``isolated`` fixture), never to docs/BENCHMARKS.md.
"""

from __future__ import annotations

import json
import math
import threading
from pathlib import Path

import pyarrow.fs as pafs

from integration.bench import run_all
from integration.bench.latency import DelayedHandler, RequestLog, delayed_local_storage, rounds
from integration.bench.report import results_path
from lakehouse_index.io import Storage
from tests.bench.test_bench_smoke import isolated  # noqa: F401 - the shared fixture

DELAY = 0.02


def _files(tmp_path: Path, n: int) -> list[str]:
    out = []
    for i in range(n):
        p = tmp_path / f"f{i}"
        p.write_bytes(b"x" * 10)
        out.append(str(p))
    return out


def test_concurrent_requests_count_as_one_round_trip(tmp_path: Path) -> None:
    log = RequestLog(DELAY)
    fs = pafs.PyFileSystem(DelayedHandler(pafs.LocalFileSystem(), log))
    paths = _files(tmp_path, 4)
    for p in paths:  # one after another
        with fs.open_input_stream(p) as f:
            assert f.read() == b"x" * 10
    assert len(log.requests) == 4 and rounds(log.requests) == 4
    log.clear()
    barrier = threading.Barrier(len(paths))

    def fetch(p: str) -> None:
        barrier.wait()
        with fs.open_input_stream(p) as f:
            f.read()

    threads = [threading.Thread(target=fetch, args=(p,)) for p in paths]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(log.requests) == 4 and rounds(log.requests) == 1


def test_random_access_reads_are_ranged_gets(tmp_path: Path) -> None:
    log = RequestLog(0.0)
    (path,) = _files(tmp_path, 1)
    with delayed_local_storage(log):
        storage = Storage.for_uri(path)
        assert storage.read_range(path, 2, 3) == b"xxx"  # HEAD + one ranged GET
        assert storage.list_dir(str(tmp_path))  # one listing
    assert len(log.requests) == 3
    log.clear()
    assert Storage.for_uri(path).read_bytes(path) == b"x" * 10  # outside: not served by it
    assert log.requests == []


def test_lookup_paths_benchmark_tiny(isolated: Path) -> None:  # noqa: F811
    from integration.bench import bench_lookup_paths as blp

    res = blp.main(["--scale", "tiny"])
    assert res.disagreements == []
    sc = blp.SCALES["tiny"]
    for name in ("delta locate", "iceberg locate", "delta lookup", "iceberg lookup", "lance lookup"):
        assert len(res.warm[name].samples) == sc.keys and all(t > 0 for t in res.warm[name].samples)
    for name in ("delta lookup", "iceberg lookup", "lance lookup"):
        assert len(res.cold[name].samples) == sc.cold_reps
    cold, warm = res.delayed["delta cold"], res.delayed["delta warm"]
    assert len(cold) == len(warm) == sc.latency_reps
    for c, w in zip(cold, warm, strict=True):
        # A cold lookup must read the table log, the index log and index data; a warm one far less.
        assert {"table-log", "index-log", "index-data", "table-data"} <= set(c.by_category)
        assert 1 <= w.rounds < c.rounds <= c.requests
        # Every round trip costs at least the added latency.
        assert c.seconds >= c.rounds * res.latency_ms / 1000
    assert "<!-- bench:lookup_paths -->" in isolated.read_text()
    doc = json.loads(results_path("lookup_paths").read_text())
    assert doc["results"]["disagreements"] == [] and doc["results"]["rows"] == sc.rows
    assert run_all.args_for(blp, "bench_lookup_paths", "tiny") == ["--scale", "tiny"]


def test_scaling_benchmark_tiny(isolated: Path) -> None:  # noqa: F811
    from integration.bench import bench_scaling as bs

    res = bs.main(["--scale", "tiny"])
    assert res.disagreements == []
    sc = bs.SCALES["tiny"]
    assert [s.rows for s in res.sizes] == list(sc.sizes)
    for s in res.sizes:
        assert s.files == s.rows // sc.rows_per_file and s.index_bytes > 0
        assert len(s.locate.samples) == len(s.lookup.samples) == sc.keys
        assert math.isfinite(s.refresh_s) and s.refresh_s > 0
    assert [(s.rows, s.files) for s in res.many_files] == list(sc.many_files)
    assert all(len(s.locate.samples) == sc.keys for s in res.many_files)
    depths = [n for _, n, _ in res.lsm]
    assert depths[: len(sc.lsm_depths)] == list(sc.lsm_depths) and depths[-1] == 0
    assert res.plot is not None and (isolated.parent / "bench" / res.plot).stat().st_size > 0
    assert "<!-- bench:scaling -->" in isolated.read_text()
    doc = json.loads(results_path("scaling").read_text())
    assert [s["rows"] for s in doc["results"]["sizes"]] == list(sc.sizes)
    assert run_all.args_for(bs, "bench_scaling", "tiny") == ["--scale", "tiny"]
