"""Smoke tests of the index and query benchmarks at a tiny scale.

They check that the benchmarks run end to end and that the numbers they produce are
sane, above all that every method's answers agree: the expected ids are derived here
from the generator's contract (``email_of(i)`` names row ``i``, which exists iff ``i`` is
below the number of rows written by that version) and from deltalake's reader, never from
the benchmark's own bookkeeping. No time limits are asserted. Results go to a temporary
BENCHMARKS file; docs/BENCHMARKS.md is never touched. The JSON results go next to it, and must
keep the structure of the sample the benchmarks notebook plots in CI (notebooks/data/bench).
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

from integration.bench import datagen, run_all
from integration.bench.report import (
    BENCHMARKS_ENV,
    BENCHMARKS_MD,
    RESULTS_SCHEMA,
    results_path,
    write_results,
    write_section,
)
from tests.support.paths import REPO_ROOT

#: The tiny-scale results the benchmarks notebook plots in CI.
NOTEBOOK_SAMPLE = REPO_ROOT / "notebooks" / "data" / "bench"

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@pytest.fixture(autouse=True)
def isolated(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Private data cache and BENCHMARKS file per test; docs/BENCHMARKS.md must stay unchanged."""
    cache = tmp_path_factory.getbasetemp() / "bench-cache"  # shared by the tests of one run
    report = tmp_path_factory.mktemp("report") / "BENCHMARKS.md"
    monkeypatch.setenv(datagen.CACHE_ENV, str(cache))
    monkeypatch.setenv(BENCHMARKS_ENV, str(report))
    before = BENCHMARKS_MD.read_bytes() if BENCHMARKS_MD.exists() else None
    yield report
    after = BENCHMARKS_MD.read_bytes() if BENCHMARKS_MD.exists() else None
    assert after == before, "a smoke test wrote docs/BENCHMARKS.md"


def _row_of(email: str) -> int:
    assert email.startswith("user") and email.endswith("@example.com"), email
    return int(email[4:14])


def test_report_is_redirected(isolated: Path) -> None:
    written = write_section("smoke", "Smoke", "tests", "| a |\n|---|\n| 1 |")
    assert written == isolated
    text = isolated.read_text()
    assert "<!-- bench:smoke -->" in text and "| 1 |" in text
    write_section("smoke", "Smoke", "tests", "second")  # replaces its own section only
    text = isolated.read_text()
    assert text.count("<!-- bench:smoke -->") == 1 and "second" in text and "| 1 |" not in text


def test_results_are_json_next_to_the_report(isolated: Path) -> None:
    written = write_results("smoke", {"ms": [1.5, float("nan")], "nested": {"inf": float("inf"), "n": 3}})
    assert written == results_path("smoke") == isolated.parent / "bench" / "smoke.json"
    doc = json.loads(written.read_text())  # strict JSON: NaN and infinities became null
    assert doc["benchmark"] == "smoke" and doc["schema"] == RESULTS_SCHEMA
    assert doc["results"] == {"ms": [1.5, None], "nested": {"inf": None, "n": 3}}
    assert set(doc["run"]) == {"utc", "machine", "cores", "python", "load_average"}
    assert doc["run"]["cores"] >= 1


def _shape(value: Any) -> Any:
    """The structure of a JSON value: keys of objects, the union of list items' shapes; leaves as '.'."""
    if isinstance(value, dict):
        return {k: _shape(v) for k, v in value.items()}
    if isinstance(value, list):
        shapes = {json.dumps(_shape(v), sort_keys=True) for v in value}
        return sorted(shapes)
    return "."


def _same(got: Any, want: Any) -> bool:
    """``got`` (read back from JSON) equals ``want``, where a non-finite float was written as null."""
    if isinstance(want, float) and not math.isfinite(want):
        return got is None
    if isinstance(want, dict):
        same_keys = isinstance(got, dict) and got.keys() == want.keys()
        return same_keys and all(_same(got[k], want[k]) for k in want)
    if isinstance(want, (list, tuple)):
        return isinstance(got, list) and len(got) == len(want) and all(map(_same, got, want))
    return bool(got == want)


def _check_results(name: str, fresh: dict[str, Any]) -> None:
    """The run's JSON holds its results, in the structure of the notebook's committed sample."""
    doc = json.loads(results_path(name).read_text())
    assert doc["benchmark"] == name and doc["schema"] == RESULTS_SCHEMA
    assert _same(doc["results"], fresh), name
    sample = json.loads((NOTEBOOK_SAMPLE / f"{name}.json").read_text())
    assert _shape(doc) == _shape(sample), f"regenerate notebooks/data/bench/{name}.json at the tiny scale"


def _size(args: list[str], flag: str) -> int:
    return int(args[args.index(flag) + 1])


@pytest.mark.integration
def test_connector_benchmarks_write_json(isolated: Path) -> None:
    assert run_all.main(["--scale", "tiny", "--only", "delta_connector,iceberg_connector"]) == 0
    text = isolated.read_text()
    assert "<!-- bench:delta-connector -->" in text and "<!-- bench:iceberg-connector -->" in text

    sizes = run_all.SIZE_ARGS["bench_delta_connector"]["tiny"]
    delta = json.loads(results_path("delta-connector").read_text())
    assert delta["benchmark"] == "delta-connector" and delta["schema"] == RESULTS_SCHEMA
    res = delta["results"]
    assert res["live_files"] == _size(sizes, "--versions") * _size(sizes, "--files-per-commit")
    loads = {"connector", "deltalake_with_pyarrow", "deltalake", "connector_system_allocator"}
    assert set(res["cold"]) == loads
    for run in res["cold"].values():  # every cold load saw every live file
        assert run["files"] == res["live_files"] and run["seconds"] > 0 and run["peak_mb"] > 0
    assert res["diff_span"] == _size(sizes, "--diff-span") and res["warm"]["tail_reads"] >= 1

    sizes = run_all.SIZE_ARGS["bench_iceberg_connector"]["tiny"]
    iceberg = json.loads(results_path("iceberg-connector").read_text())
    assert iceberg["benchmark"] == "iceberg-connector" and iceberg["schema"] == RESULTS_SCHEMA
    res = iceberg["results"]
    assert res["snapshots"] == _size(sizes, "--snapshots")
    assert len(res["tail"]["ms"]) == _size(sizes, "--tail")
    assert len(res["cold_snapshot"]["connector_ms"]) == _size(sizes, "--repeats")
    # one data file per appended snapshot (the tail's included)
    assert res["cold_snapshot"]["files"] == res["snapshots"] + _size(sizes, "--tail")
    assert res["diff"]["connector"]["manifests"] <= res["diff"]["pyiceberg_plan_files"]["manifests"]


def test_generated_table_spreads_keys_over_every_file() -> None:
    from deltalake import DeltaTable

    params = datagen.TableParams(rows=2_000, files=4)
    path = datagen.delta_table(params, log=False)
    dt = DeltaTable(str(path))
    assert dt.version() == params.files - 1 and len(dt.file_uris()) == params.files
    data = dt.to_pyarrow_table()
    ids = np.sort(data.column("id").to_numpy())
    assert (ids == np.arange(params.rows)).all()
    assert data.column("email").to_pylist() == [datagen.email_of(i) for i in data.column("id").to_pylist()]
    for f in datagen._parquet_files(path):  # every file spans nearly the whole id range
        import pyarrow.parquet as pq

        fid = pq.read_table(f, columns=["id"]).column("id").to_numpy()
        assert fid.min() < params.rows * 0.1 and fid.max() > params.rows * 0.9
    assert datagen.delta_table(params, log=False) == path  # cached: same directory, no regeneration


def test_run_all_finds_every_benchmark() -> None:
    names = run_all.discover()
    assert {"bench_lookup", "bench_build"} <= set(names)
    import integration.bench.bench_build as bb
    import integration.bench.bench_lookup as bl

    assert run_all.args_for(bl, "bench_lookup", "tiny") == ["--scale", "tiny"]
    assert run_all.args_for(bb, "bench_build", "full") == ["--scale", "full"]


def test_run_all_large_reaches_the_100m_row_points() -> None:
    """``--large`` runs the largest sizes where a module defines them, ``full`` elsewhere."""
    import integration.bench.bench_build as bb
    import integration.bench.bench_cdc as bc
    import integration.bench.bench_scaling as bs

    assert run_all.args_for(bs, "bench_scaling", "large") == ["--scale", "full", "--large"]
    assert run_all.args_for(bc, "bench_cdc", "large") == ["--scale", "large"]
    assert bc.SCALES["large"].rows == 100_000_000
    assert run_all.args_for(bb, "bench_build", "large") == ["--scale", "full"]
    # The 100M-row CDC run is written beside the 10M-row one, not over it.
    assert bc.section("large")[0] != bc.section("full")[0]


@pytest.mark.spark
def test_lookup_benchmark_tiny(spark: SparkSession, isolated: Path) -> None:
    from integration.bench import bench_lookup

    res = bench_lookup.main(["--scale", "tiny"])
    sc = bench_lookup.SCALES["tiny"]
    assert res.disagreements == []

    def check(
        methods: dict[str, bench_lookup.MethodResult], rows_in_version: int, only_new: bool = False
    ) -> None:
        for m in methods.values():
            assert m.answers, m.name
            for key, ids in m.answers.items():
                i = _row_of(key)
                exists = i < rows_in_version and not (only_new and i < sc.rows)
                assert ids == ((i,) if exists else ()), (m.name, key, ids)
            for t in [*m.warm.samples, *m.cold.samples]:
                assert math.isfinite(t) and t > 0, m.name

    check(res.w1, sc.rows)
    assert {"lookup", "locate", "lance", "lance_locate", "duckdb", "pyarrow", "spark"} <= set(res.w1)
    # Every method also answered the missing key (with nothing).
    assert all(any(ids == () for ids in m.answers.values()) for m in res.w1.values())
    appended = res.versions["latest"] - res.versions["indexed"]
    rows_latest = sc.rows + appended * res.params.rows_per_file
    check({k: m for k, m in res.w3.items() if k not in ("at_indexed", "scan_appended")}, rows_latest)
    check({"at": res.w3["at_indexed"]}, sc.rows)
    check({"scan": res.w3["scan_appended"]}, rows_latest, only_new=True)
    check({"latest": res.w2["latest"]}, rows_latest)
    between_rows = sc.rows + (res.versions["between"] - res.versions["indexed"]) * res.params.rows_per_file
    check({"between": res.w2["between"], "oracle": res.w2["oracle"]}, between_rows)
    # The probes really cover appended keys, and keys appended after the version in between.
    assert any(_row_of(k) >= between_rows for k in res.w2["between"].answers)

    # W3 at three shares of appended files, each checked against what the generator wrote:
    # the first two on the index built before W3, the last on top of the refreshed index.
    low, mid, high = res.w3_shares
    assert low.appended < mid.appended and mid.hybrid is res.w3["hybrid"]
    assert low.indexed == mid.indexed == sc.files and high.indexed == sc.files + mid.appended
    for share in res.w3_shares:
        indexed_rows = sc.rows + (share.indexed - sc.files) * res.params.rows_per_file
        latest_rows = indexed_rows + share.appended * res.params.rows_per_file
        check({"hybrid": share.hybrid}, latest_rows)
        check({"at": share.at_indexed}, indexed_rows)
        new = {k: v for k, v in share.scan_appended.answers.items() if _row_of(k) >= indexed_rows}
        assert new and all(ids == (_row_of(k),) for k, ids in new.items())
        assert all(ids == () for k, ids in share.scan_appended.answers.items() if k not in new)
    assert "files appended (of indexed)" in isolated.read_text()

    warm = res.io["lookup, warm"]
    assert warm["index-data reads"] >= 1 and warm["table-data reads"] >= 1
    assert res.io["locate, warm"]["table-data reads"] == 0  # locate answers from the index alone
    # The pages holding the probed rows: never more than the reader fetched for them.
    assert 0 < res.data_floor_kb <= warm["table-data KB"]
    text = isolated.read_text()
    assert "<!-- bench:lookup -->" in text and "### W1" in text and "What this shows" in text
    _check_results("lookup", bench_lookup.results(res))


@pytest.mark.spark
def test_batch_lookup_benchmark_tiny(isolated: Path) -> None:
    from integration.bench import bench_batch_lookup

    res = bench_batch_lookup.main(["--scale", "tiny"])
    assert res.disagreements == []  # every batch's answer equals the generator's (checked inside)
    sizes = [n for n in bench_batch_lookup.BATCH_SIZES if n <= res.params.rows]
    assert list(res.batches) == sizes
    assert all(set(per) == set(bench_batch_lookup.METHODS) for per in res.batches.values())
    # The 1,000-key batch's rows lie in some of the table's pages, found through some index groups.
    floor = res.floor
    assert 0 < floor["pages"] <= floor["pages_total"] and 0 < floor["KB"] <= floor["KB_total"]
    assert floor["index_files"] >= 1 and floor["index_row_groups"] >= 1
    assert "<!-- bench:batch_lookup -->" in isolated.read_text()
    doc = json.loads(results_path("batch_lookup").read_text())
    assert doc["benchmark"] == "batch_lookup" and _same(doc["results"], bench_batch_lookup.results(res))


def test_expression_index_benchmark_tiny(isolated: Path) -> None:
    from integration.bench import bench_expression_index as be

    res = be.main(["--scale", "tiny"])
    assert res.disagreements == []  # every method returned the generator's row for each key
    assert set(res.seconds) == set(be.METHODS)
    assert res.chosen == {"lower(email)": "by_login", "email": "by_email"}
    assert "<!-- bench:expression-index -->" in isolated.read_text()
    doc = json.loads(results_path("expression-index").read_text())
    assert doc["benchmark"] == "expression-index" and _same(doc["results"], be.results(res))


@pytest.mark.spark
def test_build_benchmark_tiny(spark: SparkSession, isolated: Path) -> None:
    from deltalake import DeltaTable

    from integration.bench import bench_build

    res = bench_build.main(["--scale", "tiny"])
    sc = bench_build.SCALES["tiny"]
    assert res.disagreements == []
    assert res.index_rows == sc.build.rows
    assert res.table_bytes == sum(
        p.stat().st_size for p in datagen._parquet_files(datagen.delta_table(sc.build, log=False))
    )
    # Index data has at least the key of every row; it cannot be empty or larger than the table.
    assert 0 < res.index_bytes < res.table_bytes
    assert res.build.samples and res.baseline.samples
    assert all(math.isfinite(t) and t > 0 for t in [*res.build.samples, *res.baseline.samples])
    # Probes: every checked key agrees with deltalake, deleted keys return nothing.
    assert res.checked and all(got == want for got, want in res.checked.values())
    assert any(want == () for _, want in res.checked.values())
    for step in res.steps:
        assert math.isfinite(step.seconds) or "not yet available" in step.note, step
    # The generated refresh table in the cache was not modified by the benchmark (it worked on a copy).
    cached = DeltaTable(str(datagen.delta_table(sc.refresh, log=False)))
    assert cached.version() == sc.refresh.files - 1
    text = isolated.read_text()
    assert "<!-- bench:build -->" in text and "Refresh and optimize" in text
    _check_results("build", bench_build.results(res))
    appended = [s["appended_files"] for s in bench_build.results(res)["steps"] if s["appended_files"]]
    assert sorted(appended) == sorted([*sc.appends, sc.small_append])


def test_writes_benchmark_tiny(isolated: Path) -> None:
    from integration.bench import bench_writes

    res = bench_writes.main(["--scale", "tiny"])
    sc = bench_writes.SCALES["tiny"]
    # every format and size measured, each method once per repeat (the lookups were checked inside)
    assert [(s.fmt, s.files) for s in res.samples] == [(f, n) for f in bench_writes.FORMATS for n in sc.files]
    for s in res.samples:
        assert s.files_written == s.files and s.rows == s.files * sc.rows_per_file
        series = (s.bare, s.native_write, s.native_refresh, s.api, s.api_index)
        assert all(len(x) == sc.repeats and all(math.isfinite(t) and t > 0 for t in x) for x in series)
        assert all(i < a for i, a in zip(s.api_index, s.api, strict=True))  # the index part of the API write
        assert s.profile["commit"] > 0 and s.profile["read keys"] > 0 and s.profile["sort + write"] > 0
        assert all(len(x) == sc.repeats and all(t > 0 for t in x) for x in (s.bare_cpu, s.api_cpu))
        assert s.profile["index"] < s.profile["total"]
    assert res.checked_keys > 0
    text = isolated.read_text()
    assert "<!-- bench:writes -->" in text and "t.append (of which index)" in text
    doc = json.loads(results_path("writes").read_text())
    assert doc["benchmark"] == "writes" and _same(doc["results"], bench_writes.results(res))


def test_watcher_benchmark_tiny(isolated: Path) -> None:
    from integration.bench import bench_watcher

    res = bench_watcher.main(["--scale", "tiny"])
    sc = bench_watcher.SCALES["tiny"]
    assert [r.fmt for r in res.runs] == list(bench_watcher.FORMATS)
    for r in res.runs:
        # every commit got a lag: the watcher reported a refresh covering it (checked inside)
        assert r.commits == int(sc.duration / sc.every) == len(r.lags)
        assert all(0 <= lag < 120 for lag in r.lags) and r.errors == []
        assert r.actions.get("incremental", 0) >= 1 and r.refresh_seconds
    text = isolated.read_text()
    assert "<!-- bench:watcher -->" in text and "lag p99" in text
    doc = json.loads(results_path("watcher").read_text())
    assert doc["benchmark"] == "watcher" and _same(doc["results"], bench_watcher.results(res))


def test_erase_benchmark_tiny(isolated: Path) -> None:
    from integration.bench import bench_erase

    res = bench_erase.main(["--scale", "tiny"])
    params, subjects = bench_erase.SCALES["tiny"]
    # both paths left the table minus the subjects (checked inside against the ids before)
    assert res.problems == [] and res.subjects == subjects and res.holding_files > 0
    for path in (res.ours, res.naive):
        assert path.rows_left == params.rows - subjects and path.subjects_left == 0
        assert path.files_rewritten == res.holding_files and path.bytes_rewritten == res.holding_bytes
    assert {"locate", "delete", "refresh", "purge", "verify"} <= set(res.ours.steps)
    steps = res.naive.steps
    assert (
        res.naive.seconds
        == steps["delete"] + steps["vacuum + checkpoint + log cleanup"] + steps["index rebuild"]
    )
    # the default verification checked the key columns of the rewrites; the deep one ran too
    assert (
        res.verification["depth"] == "scoped" and res.verification["dataFilesKeyChecked"] == res.holding_files
    )
    assert math.isfinite(res.deep_verify_seconds) and res.deep_verify_seconds > 0
    text = isolated.read_text()
    assert "<!-- bench:erase -->" in text and "deep verification" in text


def test_cdc_benchmark_tiny(isolated: Path) -> None:
    from integration.bench import bench_cdc

    res = bench_cdc.main(["--scale", "tiny"])
    sc = bench_cdc.SCALES["tiny"]
    # every batch size of the main variant, the others' one size, measured on both copies;
    # lookups were checked against the format library's read inside
    expected = [(bench_cdc.VARIANTS[0].label, n) for n in sc.batches] + [
        (v.label, sc.variant_batch) for v in bench_cdc.VARIANTS[1:]
    ]
    assert [(s.variant, s.rows) for s in res.samples] == expected and res.checked_keys > 0
    marked = {s.variant: s.files_marked for s in res.samples}
    assert all(marked["Delta, deletion vectors, spread"]) and not any(marked["Delta, copy-on-write, spread"])
    for s in res.samples:
        series = (s.bare, s.api, s.index, s.api_merge)
        assert all(len(x) == sc.repeats and all(math.isfinite(t) for t in x) for x in series)
        assert all(0 < i < a for i, a in zip(s.index, s.api, strict=True))
        assert all(n > 0 for n in s.entries_written)  # changed and inserted rows got entries
    text = isolated.read_text()
    assert "<!-- bench:cdc -->" in text and "index upkeep" in text
    doc = json.loads(results_path("cdc").read_text())
    assert doc["benchmark"] == "cdc" and _same(doc["results"], bench_cdc.results(res))


def test_cdc_benchmark_growth_from_a_baseline(monkeypatch: pytest.MonkeyPatch) -> None:
    """A scale with a baseline (as ``large`` has) runs the baseline's merge-on-read spread batch
    first, its own variants and deletes as it names them, and reports the growth."""
    from dataclasses import replace

    from integration.bench import bench_cdc as bc

    tiny = bc.SCALES["tiny"]
    grown = replace(
        tiny,
        rows=2 * tiny.rows,
        variants=(bc.VARIANTS[0], bc.MOR_SPREAD),
        deletes_of=(bc.MOR_SPREAD,),
        baseline="tiny",
        bare_in_worker=True,
    )
    monkeypatch.setitem(bc.SCALES, "grown", grown)
    res = bc.run("grown", log=lambda _: None)
    assert res.baseline is not None and res.baseline.sc.rows == tiny.rows
    assert [(s.variant, s.rows) for s in res.baseline.samples] == [(bc.MOR_SPREAD.label, tiny.variant_batch)]
    assert not res.baseline.deletes
    assert [(s.variant, s.rows) for s in res.samples] == [
        *((bc.VARIANTS[0].label, n) for n in tiny.batches),
        (bc.MOR_SPREAD.label, tiny.variant_batch),
    ]
    assert {d.variant for d in res.deletes} == {bc.MOR_SPREAD.label} and len(res.deletes) == 2
    small, large = (statistics.median(r.samples[-1].api) for r in (res.baseline, res))
    text = bc.render(res)
    assert f"**{bc.fmt_ratio(large / small)}**" in text and "Growth with the table" in text
    assert "a process of their own" in text  # the bare copy's calls went to the worker
    assert bc.results(res)["baseline"]["rows"] == tiny.rows


@pytest.mark.spark
def test_distributed_append_benchmark_tiny(spark: SparkSession, isolated: Path) -> None:
    from integration.bench import bench_distributed_append as bench

    res = bench.main(["--scale", "tiny"])
    assert res.problems == []  # rows written, entries from the job, lookups equal to the scans
    for t in (res.bare, res.delta, res.iceberg):
        assert t.samples and all(math.isfinite(s) and s > 0 for s in t.samples)
    assert "<!-- bench:distributed-append -->" in isolated.read_text()
    _check_results("distributed-append", bench.results(res))


@pytest.mark.spark
def test_spark_delta_benchmark_tiny(spark: SparkSession, isolated: Path) -> None:
    from integration.bench import bench_spark_delta as bench

    res = bench.main(["--scale", "tiny"])
    assert res.wrong == []  # every method found exactly the row of each address at the version
    assert set(res.plans) == {"delta", "iceberg"} and res.version == res.params.files - 2
    for t in res.timings.values():
        assert len(t.samples) == bench.SCALES["tiny"].reps and all(
            math.isfinite(s) and s > 0 for s in t.samples
        )
    assert "<!-- bench:spark_delta -->" in isolated.read_text()
