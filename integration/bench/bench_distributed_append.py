"""Distributed Spark append with index entries built in the same job, next to a bare Spark Parquet write.

Issue 13's goal: ``Table.append`` of a Spark DataFrame of 5M rows — data files written by
Spark tasks into the table, committed through deltalake / pyiceberg, the secondary index's
entries computed and written by the same job — within 1.3x a bare ``df.write.parquet`` of the
same frame, in the same run.

Each round times, in turn: the bare write, the Delta append and the Iceberg append (each into a
fresh table holding one row and a secondary index on the string key ``k``); a settle pause
precedes every measurement. Medians over the rounds after an untimed warm-up round. After each
append the result is checked: every row written, the index's entries written by the job, and a
lookup of a few keys equal to a filter of the format library's own scan.

Run: ``python -m integration.bench.bench_distributed_append --scale tiny|small|full``.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from integration.bench.common import (
    Timing,
    bench_main,
    fmt_ms,
    fmt_ratio,
    load_average,
    ratio,
    settle,
    timed,
    verdict,
)

SCRIPT = "integration/bench/bench_distributed_append.py"
#: Rows per scale, measured rounds (after one warm-up round) and the settle pause in seconds
#: (none at the tiny scale: a smoke run, whose times are not reported).
SCALES: dict[str, tuple[int, int, float]] = {
    "tiny": (50_000, 1, 0.0),
    "small": (1_000_000, 2, 10.0),
    "full": (5_000_000, 3, 10.0),
}
GOAL = 1.3
#: Distinct values of the index key ``k``.
KEYS = 1_000_003
PROBE = [0, 7919, 123_457, 999_999]

SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64()),
        pa.field("k", pa.string()),
        pa.field("k2", pa.int64()),
        pa.field("v", pa.int64()),
        pa.field("payload", pa.string()),
    ]
)


def scale_args(scale: str) -> list[str]:
    """How ``run_all`` runs this module at ``scale``."""
    return ["--scale", scale]


@dataclass
class Results:
    """Times of each method and what the checks found."""

    scale: str
    rows: int
    bare: Timing = field(default_factory=Timing)
    delta: Timing = field(default_factory=Timing)
    iceberg: Timing = field(default_factory=Timing)
    load_start: float = 0.0
    load_end: float = 0.0
    problems: list[str] = field(default_factory=list)


def frame(spark: Any, rows: int) -> Any:
    """The appended data: ``rows`` rows computed from ``spark.range`` (no input to read)."""
    from pyspark.sql import functions as F

    return spark.range(rows).select(
        F.col("id"),
        F.concat(F.lit("key-"), (F.col("id") * 7919 % KEYS).cast("string")).alias("k"),
        (F.col("id") % 1000).alias("k2"),
        (F.col("id") * 31 % 100_000).alias("v"),
        F.concat(F.lit("payload-"), F.col("id").cast("string")).alias("payload"),
    )


def _seed() -> pa.Table:
    return pa.table(
        [pa.array([-1]), pa.array(["seed"]), pa.array([0]), pa.array([0]), pa.array(["x"])], SCHEMA
    )


def _config(rows: int) -> Any:
    """The default configuration, with ``local_max_rows`` below the frame's rows at every scale."""
    import lakehouse_index as li

    # This project's distributed append (not delta-spark's writer, which the session may have).
    return li.Config(
        executor=li.ExecutorConfig(local_max_rows=min(1_000_000, rows // 2), format_spark_writer=False)
    )


def _delta_table(work: Path, name: str, rows: int) -> tuple[Any, Callable[[int], pa.Table]]:
    from deltalake import DeltaTable, write_deltalake

    import lakehouse_index as li

    path = str(work / name)
    write_deltalake(path, _seed())
    t = li.open_table(path, config=_config(rows))
    t.create_index(li.SecondaryIndex("by_k", key="k"))
    return t, lambda v: pa.table(DeltaTable(path, version=v).to_pyarrow_table())


def _iceberg_table(work: Path, name: str, rows: int) -> tuple[Any, Callable[[int], pa.Table]]:
    from pyiceberg.catalog.sql import SqlCatalog

    import lakehouse_index as li

    wh = work / name
    wh.mkdir(parents=True)
    catalog = SqlCatalog(name, uri=f"sqlite:///{wh}/catalog.db", warehouse=f"file://{wh}")
    catalog.create_namespace("db")
    catalog.create_table("db.t", schema=SCHEMA).append(_seed())
    t = li.open_table("db.t", catalog=catalog, config=_config(rows))
    t.create_index(li.SecondaryIndex("by_k", key="k"))
    return t, lambda v: catalog.load_table("db.t").scan(snapshot_id=v).to_arrow()


def _check(res: Results, what: str, t: Any, result: Any, native: Callable[[int], pa.Table]) -> None:
    """Every row written, entries from the job, lookups equal to the format library's scan."""
    from lakehouse_index.workflows.reports import Action

    if result.rows_written != res.rows:
        res.problems.append(f"{what}: {result.rows_written} rows written, expected {res.rows}")
    actions = [r.action for r in result.indexes]
    if actions != [Action.WRITE_JOB]:
        res.problems.append(f"{what}: index actions {actions}, expected the write's job")
    keys = [f"key-{k}" for k in PROBE]
    full = native(result.table_version)
    want = sorted(full.filter(pc.is_in(full["k"], pa.array(keys)))["id"].to_pylist())
    got = sorted(t.lookup("by_k", keys)["id"].to_pylist())
    if got != want:
        res.problems.append(f"{what}: lookup found {len(got)} rows, the scan {len(want)}")


def run(scale: str, *, workdir: Path | None = None, log: Callable[[str], None] = print) -> Results:
    """Alternate the three methods for the scale's rounds (the first untimed); returns the times."""
    from lakehouse_index.spark import get_spark

    rows, rounds, pause = SCALES[scale]
    res = Results(scale, rows)
    own = workdir is None
    work = Path(tempfile.mkdtemp(prefix="bench-dappend-")) if workdir is None else workdir
    try:
        spark = get_spark(master="local[2]")
        res.load_start = load_average()
        for r in range(rounds + 1):
            settle(spark, pause)

            def bare(out: str = str(work / f"bare-{r}")) -> None:
                frame(spark, rows).write.parquet(out)

            bare_s, _ = timed(bare)
            for what, make, timing in (
                ("delta", _delta_table, res.delta),
                ("iceberg", _iceberg_table, res.iceberg),
            ):
                t, native = make(work, f"{what}-{r}", rows)
                settle(spark, pause)

                def append(t: Any = t) -> Any:
                    return t.append(frame(spark, rows))

                seconds, result = timed(append)
                _check(res, what, t, result, native)
                if r:
                    timing.samples.append(seconds)
                log(f"round {r} {what}: {seconds:.2f} s")
            if r:
                res.bare.samples.append(bare_s)
            log(f"round {r} bare write: {bare_s:.2f} s")
            for p in work.iterdir():  # keep the disk use of a round bounded
                shutil.rmtree(p, ignore_errors=True)
        res.load_end = load_average()
    finally:
        if own:
            shutil.rmtree(work, ignore_errors=True)
    return res


def render(res: Results) -> str:
    """The Markdown section for docs/BENCHMARKS.md."""
    from integration.bench.report import markdown_table

    bare = res.bare.median
    lines = [
        f"Scale **{res.scale}**: a Spark DataFrame of {res.rows:,} rows (`spark.range` with a string "
        f"key `k` of {KEYS:,} values, three other columns), `local[2]`, appended by `Table.append` "
        "into a fresh table with a secondary index on `k` (`auto_refresh` incremental; "
        f"`local_max_rows` {min(1_000_000, res.rows // 2):,}, so the distributed path runs), next to "
        "`df.write.parquet` of the same frame. Medians of "
        f"{len(res.bare.samples)} alternating rounds after a warm-up round, each measurement after a "
        f"settle pause. Load average at the start {res.load_start:.1f}, at the end {res.load_end:.1f} "
        "(the machine's 2 cores are shared; absolute times vary with the load, the ratios less).",
        "",
        markdown_table(
            ["method", "time (median)", "samples", "/ bare write", f"goal ≤ {GOAL}x"],
            [
                ["bare `df.write.parquet`", fmt_ms(bare), _samples(res.bare), "1.00x", ""],
                *[
                    [
                        label,
                        fmt_ms(t.median),
                        _samples(t),
                        fmt_ratio(ratio(t.median, bare)),
                        verdict(ratio(t.median, bare), GOAL, higher_is_better=False),
                    ]
                    for label, t in (
                        ("Delta: distributed append + index entries (one job) + commit", res.delta),
                        ("Iceberg: distributed append + index entries (one job) + commit", res.iceberg),
                    )
                ],
            ],
        ),
        "",
        "Checks after every append (warm-up included): "
        + (
            "all rows written, the index's entries written by the job, lookups equal to the scan."
            if not res.problems
            else "**problems**: " + "; ".join(res.problems)
        ),
    ]
    if res.scale != "full":
        lines.append(f"\nThis is the `{res.scale}` scale; the goal is stated for the `full` scale (5M rows).")
    return "\n".join(lines)


def results(res: Results) -> dict[str, Any]:
    """The machine-readable results (docs/bench/distributed-append.json)."""
    bare = res.bare.median
    return {
        "scale": res.scale,
        "rows": res.rows,
        "goal_ratio": GOAL,
        "bare_write": res.bare.to_json(),
        "delta_append": {**res.delta.to_json(), "ratio": ratio(res.delta.median, bare)},
        "iceberg_append": {**res.iceberg.to_json(), "ratio": ratio(res.iceberg.median, bare)},
        "load_average": {"start": res.load_start, "end": res.load_end},
        "problems": list(res.problems),
    }


def _samples(t: Timing) -> str:
    return ", ".join(f"{s:.1f}" for s in t.samples) + " s"


def main(argv: list[str] | None = None) -> Results:
    """Command line entry: run, print, write the docs/BENCHMARKS.md section (unless ``--no-report``)."""
    return bench_main(
        argv,
        description=__doc__.split("\n")[0],
        scales=list(SCALES),
        run=run,
        render=render,
        section=("distributed-append", "Distributed Spark append with index entries (issue 13)", SCRIPT),
        results=results,
    )


if __name__ == "__main__":
    main()
