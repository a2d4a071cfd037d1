"""Smoke tests of the issue-18 benchmarks (lookup paths, W8 scaling) at a tiny scale, and of the
delaying proxy they count sequential requests with.

Answers are checked by the benchmarks against the generator (``email_of(i)`` names row ``i``);
here: no disagreement, sane figures, and the sections and JSON written to a temporary
BENCHMARKS file (the ``isolated`` fixture), never to docs/BENCHMARKS.md.
"""

from __future__ import annotations

import json
import math
import threading
from pathlib import Path

from integration.bench import run_all
from integration.bench.latency import DelayProxy, RequestLog, rounds
from integration.bench.report import results_path
from tests.bench.test_bench_smoke import isolated  # noqa: F401 - the shared fixture
from tests.support.moto import moto_s3, s3_client

DELAY = 0.02


def test_proxy_records_each_request_and_counts_concurrent_ones_once() -> None:
    with moto_s3("proxied") as direct:
        client = s3_client(direct)
        names = [f"t/_delta_log/{i:020d}.json" for i in range(4)]
        for n in names:
            client.put_object(Bucket="proxied", Key=n, Body=b"{}")
        log = RequestLog(DELAY)
        proxy = DelayProxy(int(direct["AWS_ENDPOINT_URL"].rsplit(":", 1)[1]), log)
        try:
            proxied = s3_client({**direct, "AWS_ENDPOINT_URL": proxy.url})

            def get(name: str) -> bytes:
                return bytes(proxied.get_object(Bucket="proxied", Key=name)["Body"].read())

            for n in names:  # one after another
                assert get(n) == b"{}"
            assert len(log.requests) == 4 and rounds(log.requests) == 4
            assert log.by_category() == {"table-log": 4}
            assert all(end - start >= DELAY for start, end, _ in log.requests)
            log.clear()
            barrier = threading.Barrier(len(names))

            def fetch(name: str) -> None:
                barrier.wait()
                get(name)

            threads = [threading.Thread(target=fetch, args=(n,)) for n in names]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            assert len(log.requests) == 4 and rounds(log.requests) == 1
        finally:
            proxy.close()


def test_lookup_paths_benchmark_tiny(isolated: Path) -> None:  # noqa: F811
    from integration.bench import bench_lookup_paths as blp

    res = blp.main(["--scale", "tiny"])
    assert res.disagreements == []
    sc = blp.SCALES["tiny"]
    for name in ("delta locate", "iceberg locate", "delta lookup", "iceberg lookup", "lance lookup"):
        assert len(res.warm[name].samples) == sc.keys and all(t > 0 for t in res.warm[name].samples)
    for name in ("delta lookup", "iceberg lookup", "lance lookup"):
        assert len(res.cold[name].samples) == sc.cold_reps
    assert list(res.cold_phases) == list(blp.COLD_PHASES)
    assert all(len(t.samples) == sc.cold_reps and min(t.samples) > 0 for t in res.cold_phases.values())
    cold, warm = res.s3["delta cold"], res.s3["delta warm"]
    assert len(cold) == len(warm) == len(res.s3["lance cold"]) == sc.s3_reps
    for c, w in zip(cold, warm, strict=True):
        # A cold lookup must read the table log, the index log and index data; a warm one far less.
        assert {"table-log", "index-log", "index-data", "table-data"} <= set(c.by_category)
        assert 1 <= w.rounds < c.rounds <= c.requests
        # Every round trip costs at least the added latency.
        assert c.seconds >= c.rounds * res.latency_ms / 1000
    # The main table, then one copy per layout; each measured warm, cold beside Lance, and scanned.
    assert [r.dict_bytes for r in res.page_sizes] == [None, *(d for _, d in blp.PAGE_LAYOUTS)]
    for r in res.page_sizes:
        assert len(r.warm.samples) == sc.keys and len(r.scan.samples) == min(3, sc.cold_reps)
        assert len(r.cold.samples) == len(r.lance_cold.samples) == sc.cold_reps
        assert r.data_kb > 0 and r.floor_kb > 0 and r.table_bytes > 0
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
