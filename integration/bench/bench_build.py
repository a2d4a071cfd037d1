"""Benchmark of index maintenance (issue 5): build throughput, index size, refresh, optimize.

Data: Delta tables written by deltalake (:mod:`integration.bench.datagen`), keys spread over
all files. The index is ``SecondaryIndex("by_email", key="email", record_key="id")`` (a
unique string key and a long record key).

* **Build throughput**: ``create_index`` against a bare Spark job writing the index's
  columns in the same run and session: read the key, the record key and the lineage of the
  version's files (a 64-bit hash of ``_metadata.file_path``, ``_metadata.row_index``), add
  the version and op stamps, range-partition by key, sort like the index, write zstd
  Parquet (:func:`spark_baseline`). One untimed baseline warms the JVM; then baseline and
  build alternate, medians reported. Goal: build ≤ 1.3x the baseline.
* **Index size** as % of the table's data files. Goal ≤ 10% for a unique key.
* **Incremental refresh** after appending 1, 10, 100 files (one commit each) to a
  1,000-file table (``full`` scale), plus 10 files appended to a 100-file table: the cost
  must grow with the appended files, not with the table. Also: a deltalake DELETE of 100
  keys (copy-on-write: it rewrites every file holding one) followed by an incremental
  refresh, ``optimize`` quick and full, and a full refresh of the final table for reference.

After all refreshes, index answers for old, appended and deleted keys are checked against
deltalake's own reader; disagreements are reported, never hidden.

Run: ``python -m integration.bench.bench_build --scale small|full``.
"""

from __future__ import annotations

import math
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from integration.bench import datagen
from integration.bench.common import (
    Timing,
    bench_main,
    fmt_ms,
    fmt_ratio,
    load_average,
    not_available,
    ratio,
    timed,
    verdict,
)

INDEX = "by_email"
KEY = "email"
SCRIPT = "integration/bench/bench_build.py"
Log = Callable[[str], None]


@dataclass(frozen=True)
class BuildScale:
    """Sizes of one benchmark scale."""

    build: datagen.TableParams
    build_reps: int
    refresh: datagen.TableParams  # the large table appended to
    appends: tuple[int, ...]
    refresh_small: datagen.TableParams  # same rows per file, fewer files
    small_append: int
    delete_keys: int


SCALES: dict[str, BuildScale] = {
    "tiny": BuildScale(
        build=datagen.TableParams(20_000, 4),
        build_reps=1,
        refresh=datagen.TableParams(4_000, 8),
        appends=(1, 2),
        refresh_small=datagen.TableParams(2_000, 4),
        small_append=2,
        delete_keys=5,
    ),
    "small": BuildScale(
        build=datagen.TableParams(200_000, 20),
        build_reps=1,
        refresh=datagen.TableParams(100_000, 100),
        appends=(1, 10, 30),
        refresh_small=datagen.TableParams(10_000, 10),
        small_append=10,
        delete_keys=100,
    ),
    "full": BuildScale(
        build=datagen.TableParams(5_000_000, 100),
        build_reps=3,
        refresh=datagen.TableParams(5_000_000, 1000),
        appends=(1, 10, 100),
        refresh_small=datagen.TableParams(500_000, 100),
        small_append=10,
        delete_keys=100,
    ),
}


@dataclass
class RefreshStep:
    """One maintenance operation and what it cost."""

    label: str
    table_files: int
    seconds: float = float("nan")
    note: str = ""
    #: Data files appended (one commit each) since the previous refresh; 0 for other operations.
    appended_files: int = 0


@dataclass
class BuildResults:
    """Everything one run measured (returned by :func:`run` for tests and reports)."""

    scale: str
    build_rows: int = 0
    baseline: Timing = field(default_factory=Timing)
    build: Timing = field(default_factory=Timing)
    index_bytes: int = 0
    index_rows: int = 0
    table_bytes: int = 0
    refresh_build_s: float = float("nan")
    steps: list[RefreshStep] = field(default_factory=list)
    lookup_before_optimize: Timing = field(default_factory=Timing)
    #: Lookups on the twin table whose DELETE was handled by re-indexing the rewritten files.
    lookup_reindexed: Timing = field(default_factory=Timing)
    #: The refresh after the DELETE: (lineage remap, re-indexing), both measured.
    remap_delete: tuple[RefreshStep, RefreshStep] | None = None
    lookup_after_optimize: Timing = field(default_factory=Timing)
    #: key → (ids from the index, ids from deltalake) for every checked key.
    checked: dict[str, tuple[tuple[int, ...], tuple[int, ...]]] = field(default_factory=dict)
    disagreements: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


# --------------------------------------------------------------------------- build throughput


def _local(uri: str) -> str:
    return uri[len("file://") :] if uri.startswith("file://") else uri


def spark_baseline(spark: Any, table: Path, out: Path, rows: int) -> None:
    """The bare Spark job an index build is compared with: the index's rows, columns and order.

    Reads the key and the record key of the latest version's files with each row's lineage
    as a bare job has it (the file as a 64-bit hash of ``_metadata.file_path``, where the
    index stores a 64-bit file id; ``_metadata.row_index``) and the version and op stamps,
    range-partitions by key into as many files as the build writes, sorts like the index
    and writes zstd Parquet with Spark's default row groups (Spark bounds them by bytes
    only; the index's 4,096-row groups are smaller, which costs the build, not this job).
    """
    from deltalake import DeltaTable
    from pyspark.sql import functions as F

    from lakehouse_index.config import ExecutorConfig
    from lakehouse_index.kinds.entries import FILE_ID, OP, PUT, ROW, VERSION

    delta = DeltaTable(str(table))
    files = [_local(u) for u in delta.file_uris()]
    df = spark.read.parquet(*files).select(
        F.col(KEY),
        F.col("id"),
        F.xxhash64("_metadata.file_path").alias(FILE_ID),
        F.col("_metadata.row_index").alias(ROW),
        F.lit(delta.version()).cast("long").alias(VERSION),
        F.lit(PUT).cast("byte").alias(OP),
    )
    (
        df.repartitionByRange(max(1, math.ceil(rows / ExecutorConfig().rows_per_index_file)), KEY)
        .sortWithinPartitions(KEY, FILE_ID, ROW, VERSION)
        .write.option("compression", "zstd")
        .mode("errorifexists")
        .parquet(str(out))
    )


def _spec(name: str = INDEX) -> Any:
    import lakehouse_index as li

    return li.SecondaryIndex(name, key=KEY, record_key="id")


def measure_build(res: BuildResults, sc: BuildScale, spark: Any, work: Path, log: Log) -> None:
    """Alternate the bare Spark job and ``create_index`` on the same table; size of the index."""
    import lakehouse_index as li

    path = datagen.work_copy(datagen.delta_table(sc.build), work / "build")
    res.build_rows = sc.build.rows
    res.table_bytes = datagen.table_bytes(path)
    log("build: warming Spark with one untimed baseline run")
    spark_baseline(spark, path, work / "baseline-warmup", sc.build.rows)
    for i in range(sc.build_reps):
        log(f"build: repetition {i + 1}/{sc.build_reps}")
        secs, _ = timed(lambda i=i: spark_baseline(spark, path, work / f"baseline-{i}", sc.build.rows))  # type: ignore[misc]
        res.baseline.samples.append(secs)
        table = li.open_table(str(path))
        secs, info = timed(lambda i=i, table=table: table.create_index(_spec(f"{INDEX}{i}"), spark=spark))  # type: ignore[misc]
        res.build.samples.append(secs)
        if i == 0:
            res.index_bytes, res.index_rows = info.size_bytes, info.rows
            if info.rows != sc.build.rows:
                res.disagreements.append(f"build: index has {info.rows} entries for {sc.build.rows} rows")


# --------------------------------------------------------------------------- refresh


def _oracle_ids(path: Path, keys: list[str]) -> dict[str, tuple[int, ...]]:
    """Ids per key from deltalake's own reader (independent of the engine)."""
    from deltalake import DeltaTable

    # Filter after reading: files rewritten by deltalake's DELETE store strings as string_view,
    # which pyarrow's dataset filter cannot compare with string literals.
    t = DeltaTable(str(path)).to_pyarrow_dataset().to_table(columns=[KEY, "id"])
    t = t.cast(pa.schema([(KEY, pa.string()), ("id", pa.int64())]))
    t = t.filter(pc.is_in(t.column(KEY), value_set=pa.array(keys, pa.string())))
    out: dict[str, list[int]] = {k: [] for k in keys}
    for k, i in zip(t.column(KEY).to_pylist(), t.column("id").to_pylist(), strict=True):
        out[k].append(i)
    return {k: tuple(sorted(v)) for k, v in out.items()}


def _check(res: BuildResults, table: Any, path: Path, keys: list[str], when: str) -> None:
    want = _oracle_ids(path, keys)
    for k in keys:
        got = tuple(sorted(table.lookup(INDEX, [k]).column("id").to_pylist()))
        res.checked[f"{when}: {k}"] = (got, want[k])
        if got != want[k]:
            res.disagreements.append(f"{when}: lookup({k!r}) returned ids {got}, deltalake {want[k]}")


def _files(path: Path) -> set[str]:
    from deltalake import DeltaTable

    return set(DeltaTable(str(path)).file_uris())


def _refresh(
    res: BuildResults,
    table: Any,
    spark: Any,
    label: str,
    n_files: int,
    mode: str,
    *,
    remap: bool = True,
    appended: int = 0,
) -> RefreshStep:
    step = RefreshStep(label, n_files, appended_files=appended)
    ok, out = not_available(lambda: timed(lambda: table.refresh_index(INDEX, mode, spark=spark, remap=remap)))
    if ok:
        step.seconds = out[0]
        step.note = f"index: {out[1].files} files, {out[1].rows:,} entries, {out[1].size_bytes / 1e6:.1f} MB"
    else:
        step.note = str(out)
    res.steps.append(step)
    return step


def measure_refresh(res: BuildResults, sc: BuildScale, spark: Any, work: Path, log: Log) -> None:
    """Appends, a copy-on-write delete and optimizes on the large table; one append on the small one."""
    from deltalake import DeltaTable

    import lakehouse_index as li

    p = sc.refresh
    path = datagen.work_copy(datagen.delta_table(p), work / "refresh")
    table = li.open_table(str(path))
    log(f"refresh: building the index on {p.rows:,} rows / {p.files} files")
    res.refresh_build_s, _ = timed(lambda: table.create_index(_spec(), spark=spark))
    rng = np.random.default_rng(99)
    probe_old = [datagen.email_of(int(i)) for i in rng.choice(p.rows, size=5, replace=False)]
    next_id, n_files = p.rows, p.files
    appended_probe: list[str] = []
    spare_id = -1  # an appended row no probe uses, deleted before the reference full refresh
    for k in sc.appends:
        log(f"refresh: appending {k} files, incremental refresh")
        new_ids = datagen.append_files(path, next_id, k, p.rows_per_file)
        next_id += len(new_ids)
        n_files += k
        appended_probe.append(datagen.email_of(int(new_ids[0])))
        spare_id = int(new_ids[-1])
        label = f"incremental after appending {k} file(s) ({k} commit(s))"
        _refresh(res, table, spark, label, n_files, "incremental", appended=k)
    _check(res, table, path, probe_old + appended_probe, "after appends")

    # Copy-on-write deletes: deltalake rewrites every file that holds one of the keys. Both
    # ways of maintaining the index are measured, on twin copies of the table: the lineage
    # remap (rows that moved keep their entries) and re-indexing the rewritten files.
    twin_path = work / "refresh-twin"
    shutil.copytree(path, twin_path, ignore=shutil.ignore_patterns("_lakehouse_index"))
    twin = li.open_table(str(twin_path))
    log("refresh: indexing the twin table (the re-indexing path)")
    twin.create_index(_spec(), spark=spark)
    doomed = [int(i) for i in rng.choice(p.rows, size=sc.delete_keys, replace=False)]
    before = _files(path)
    log(f"refresh: deltalake DELETE of {len(doomed)} keys, incremental refresh both ways")
    for t in (path, twin_path):
        DeltaTable(str(t)).delete("id IN (" + ", ".join(str(i) for i in doomed) + ")")
    after = _files(path)
    removed = before - after
    copied = sum(pq.ParquetFile(_local(f)).metadata.num_rows for f in after - before)
    rewrote = (
        f"the DELETE removed {len(removed)} files and wrote {len(after - before)} ({copied:,} rows copied)"
    )
    label = f"incremental after a DELETE of {len(doomed)} keys"
    twin_step = _refresh(
        res, twin, spark, label + ", re-indexing the rewritten files", len(after), "incremental", remap=False
    )
    twin_step.note += "; " + rewrote
    step = _refresh(res, table, spark, label + ", lineage remap", len(after), "incremental")
    step.note += "; " + rewrote
    res.remap_delete = (step, twin_step)
    deleted_probe = [datagen.email_of(i) for i in doomed[:5]]
    _check(res, table, path, probe_old + appended_probe + deleted_probe, "after delete (remap)")
    _check(res, twin, twin_path, probe_old + appended_probe + deleted_probe, "after delete (re-indexed)")

    keys = probe_old + appended_probe
    res.lookup_before_optimize.samples = _lookup_times(table, keys)
    res.lookup_reindexed.samples = _lookup_times(twin, keys)
    shutil.rmtree(twin_path, ignore_errors=True)
    for mode in ("quick", "full"):
        log(f"refresh: optimize {mode}")
        st = RefreshStep(f"optimize {mode}", len(after))

        def optimize(mode: str = mode) -> tuple[float, Any]:
            return timed(lambda: table.optimize_index(INDEX, mode, spark=spark))

        ok, out = not_available(optimize)
        if ok:
            st.seconds = out[0]
            st.note = f"index: {out[1].files} files, {out[1].rows:,} entries"
        else:
            st.note = str(out)
        res.steps.append(st)
    res.lookup_after_optimize.samples = _lookup_times(table, keys)
    _check(res, table, path, probe_old + appended_probe + deleted_probe, "after optimize")
    log("refresh: full refresh for reference")
    DeltaTable(str(path)).delete(f"id = {spare_id}")  # a change, so the full refresh is not a no-op
    _refresh(res, table, spark, "full refresh (reference: rebuild of the whole table)", len(after), "full")

    # The same append on a table with 10x fewer files: incremental cost must not follow table size.
    ps = sc.refresh_small
    small = datagen.work_copy(datagen.delta_table(ps), work / "refresh-small")
    st_table = li.open_table(str(small))
    log(f"refresh: {ps.files}-file table, appending {sc.small_append} files")
    st_table.create_index(_spec(), spark=spark)
    datagen.append_files(small, ps.rows, sc.small_append, ps.rows_per_file)
    label = (
        f"incremental after appending {sc.small_append} file(s) ({sc.small_append} commit(s)) "
        f"to a {ps.files}-file table"
    )
    _refresh(res, st_table, spark, label, ps.files + sc.small_append, "incremental", appended=sc.small_append)


def _lookup_times(table: Any, keys: list[str]) -> list[float]:
    table.lookup(INDEX, [keys[0]])
    return [timed(lambda k=k: table.lookup(INDEX, [k]))[0] for k in keys]  # type: ignore[misc]


# --------------------------------------------------------------------------- run and report


def run(scale: str, *, workdir: Path | None = None, log: Callable[[str], None] = print) -> BuildResults:
    """Run every part at ``scale``; returns the measurements (nothing is written)."""
    from lakehouse_index.spark import get_spark

    sc = SCALES[scale]
    res = BuildResults(scale)
    own_tmp = workdir is None
    work = Path(tempfile.mkdtemp(prefix="bench-build-")) if workdir is None else workdir
    try:
        spark = get_spark(master="local[2]")
        measure_build(res, sc, spark, work, log)
        measure_refresh(res, sc, spark, work, log)
    finally:
        if own_tmp:
            shutil.rmtree(work, ignore_errors=True)
    return res


def render(res: BuildResults) -> str:
    """The Markdown section for docs/BENCHMARKS.md."""
    from integration.bench.report import markdown_table

    sc = SCALES[res.scale]
    b, base = res.build.median, res.baseline.median
    size_pct = 100.0 * res.index_bytes / res.table_bytes if res.table_bytes else float("nan")
    appends = [s for s in res.steps if s.label.startswith("incremental after appending")]
    lines = [
        f"Scale **{res.scale}**. Build: {res.build_rows:,} rows in {sc.build.files} files "
        f"({res.table_bytes / 2**20:.0f} MiB of Parquet). Refresh: a {sc.refresh.files}-file table of "
        f"{sc.refresh.rows:,} rows ({sc.refresh.rows_per_file:,} rows per file), appended to in place, "
        f"one commit per file. Spark `local[2]`, one session for the whole run; medians of "
        f"{len(res.build.samples)} alternating repetitions after an untimed warm-up. Load average at the "
        f"end: {load_average():.1f} (the machine is shared; absolute times vary with it, the ratios less).",
        "",
        "### Build throughput and index size",
        "",
        markdown_table(
            ["measurement", "time (median)", "throughput"],
            [
                [
                    "bare Spark read → repartitionByRange → sort → write "
                    "(key, record key, file hash, row, version, op)",
                    fmt_ms(base),
                    f"{res.build_rows / base:,.0f} rows/s" if base == base else "n/a",
                ],
                [
                    "`create_index` (secondary, email → id)",
                    fmt_ms(b),
                    f"{res.build_rows / b:,.0f} rows/s" if b == b else "n/a",
                ],
            ],
        ),
        "",
        markdown_table(
            ["goal (issue 5)", "measured", "goal", "verdict"],
            [
                [
                    "build time / bare Spark job",
                    fmt_ratio(ratio(b, base)),
                    "≤ 1.3x",
                    verdict(ratio(b, base), 1.3, higher_is_better=False),
                ],
                [
                    "index size / table size (unique key)",
                    f"{size_pct:.1f}% ({res.index_bytes / 2**20:.1f} MiB, {res.index_rows:,} entries)",
                    "≤ 10%",
                    verdict(size_pct, 10, higher_is_better=False),
                ],
            ],
        ),
        "",
        "### Refresh and optimize",
        "",
        f"Initial index build on the refresh table: {fmt_ms(res.refresh_build_s)}.",
        "",
        markdown_table(
            ["operation", "table files", "time", "notes"],
            [[s.label, f"{s.table_files:,}", fmt_ms(s.seconds), s.note] for s in res.steps],
        ),
        "",
        f"Warm lookup before optimize: {fmt_ms(res.lookup_before_optimize.median)}, after: "
        f"{fmt_ms(res.lookup_after_optimize.median)} "
        f"(median over {len(res.lookup_after_optimize.samples)} keys).",
        "",
        *_remap_lines(res),
    ]
    if res.disagreements:
        lines += ["**ANSWERS DISAGREE** (correctness problem):", ""]
        lines += [f"* {d}" for d in res.disagreements] + [""]
    else:
        lines += [
            f"Index answers for {len(res.checked)} probes (old, appended and deleted keys, after "
            "appends, the DELETE and optimize) equal deltalake's own reader.",
            "",
        ]
    lines += ["**What this shows.** " + _summary(res, appends, size_pct)]
    return "\n".join(lines)


def _remap_lines(res: BuildResults) -> list[str]:
    """The DELETE refresh measured both ways (issue 5: lineage remap vs re-indexing)."""
    from integration.bench.report import markdown_table

    if res.remap_delete is None:
        return []
    remap, reindex = res.remap_delete
    return [
        "### Copy-on-write DELETE: lineage remap vs re-indexing the rewritten files",
        "",
        markdown_table(
            ["path", "refresh time", "index afterwards", "warm lookup (median)"],
            [
                [
                    "lineage remap (default): align the rewritten files with the removed ones, record moves",
                    fmt_ms(remap.seconds),
                    remap.note.split("; ")[0],
                    fmt_ms(res.lookup_before_optimize.median),
                ],
                [
                    "re-index the rewritten files' key columns (`remap=False`)",
                    fmt_ms(reindex.seconds),
                    reindex.note.split("; ")[0],
                    fmt_ms(res.lookup_reindexed.median),
                ],
            ],
        ),
        "",
        f"Remap / re-index refresh time: {fmt_ratio(ratio(remap.seconds, reindex.seconds))}; "
        f"{remap.note.split('; ')[-1]}. Both indexes answer the probes like deltalake (checked above).",
        "",
    ]


def results(res: BuildResults) -> dict[str, Any]:
    """The JSON results: build against the bare Spark job, index size, every refresh and optimize."""
    return {
        "scale": res.scale,
        "build": {
            "rows": res.build_rows,
            "create_index": res.build.to_json(),
            "bare_spark_job": res.baseline.to_json(),
        },
        "index_bytes": res.index_bytes,
        "index_rows": res.index_rows,
        "table_bytes": res.table_bytes,
        "refresh_build_s": res.refresh_build_s,
        "steps": [
            {
                "label": s.label,
                "table_files": s.table_files,
                "appended_files": s.appended_files,
                "seconds": s.seconds,
            }
            for s in res.steps
        ],
        "lookup_before_optimize": res.lookup_before_optimize.to_json(),
        "lookup_after_optimize": res.lookup_after_optimize.to_json(),
        "answers_agree": not res.disagreements,
    }


def _summary(res: BuildResults, appends: list[RefreshStep], size_pct: float) -> str:
    b, base = res.build.median, res.baseline.median
    parts = [
        f"Building the index took {fmt_ratio(ratio(b, base))} the time of the bare Spark job over the same "
        f"columns, and the index is {size_pct:.1f}% of the table.",
    ]
    timed_appends = [s for s in appends if s.seconds == s.seconds]
    if timed_appends:
        seq = ", ".join(
            f"{s.label.split('appending ')[1].split(' ')[0]} files → {fmt_ms(s.seconds)}"
            for s in timed_appends
        )
        full = [s for s in res.steps if s.label.startswith("full refresh")]
        parts.append(
            f"Incremental refresh after appends: {seq}"
            + (f"; a full rebuild of the table takes {fmt_ms(full[0].seconds)}." if full else ".")
        )
        parts.append(
            "Compare the two 'appending' rows with the same number of files on tables of different "
            "size to see whether the cost follows the appended files or the table."
        )
    else:
        parts.append("Incremental refresh is not available yet.")
    if res.scale != "full":
        parts.append(f"This is the `{res.scale}` scale; the goals are stated for the `full` scale.")
    return " ".join(parts)


def main(argv: list[str] | None = None) -> BuildResults:
    """Command line entry: run, print, write the docs/BENCHMARKS.md section (unless ``--no-report``)."""
    return bench_main(
        argv,
        description=__doc__.split("\n")[0],
        scales=list(SCALES),
        run=run,
        render=render,
        section=("build", "Index build, size and refresh (issue 5)", SCRIPT),
        results=results,
    )


if __name__ == "__main__":
    main()
