"""Benchmark of a selective ``WHERE key = …`` through the ``lakehouse_index`` Spark data source (issue 17).

Data: the lookup benchmark's Delta table (:mod:`integration.bench.datagen`: ids dealt to the
files by a seeded permutation, so every file holds a slice of every key range) with
``SecondaryIndex("by_email", key="email", record_key="id")``. Each repetition asks for one
existing address (a different one each time) and collects the rows on the driver, in one
Spark session (``local[2]``), three ways:

* **source**: ``spark.read.format("lakehouse_index").option("where", "email = '…'").load(path)``:
  the source plans with the predicate, the planner locates the key's file through the index,
  and one partition reads that file;
* **plain Spark**: ``spark.read.parquet(*files of the version).where(…)``: what Spark does
  without an index (row-group statistics cannot prune: every file spans every address range);
* **t.read**: ``Table.read(spark, where=…)``: the library's own Spark read (the 3.5 path);
* **Spark floor**: the same query through a Python data source that does no work
  (:mod:`integration.bench.spark_floor`: one partition, the generator's row): what any Python
  data source pays per query (its creation and planning, each in a Python worker, and a
  one-task job). The source's own work is its time minus this floor.

Goals (issue 17): the source within 1.2x of ``t.read`` and at least 20x faster than the plain
Spark read. Every method's rows are checked against the generator (address ``i`` is row ``i``).

Needs pyspark >= 4.1 (``make test-spark4``'s venv): ``.venv-spark4/bin/python -m
integration.bench.bench_spark_source --scale small|full``.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from integration.bench import datagen, spark_floor
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
from integration.bench.report import markdown_table

SCRIPT = "integration/bench/bench_spark_source.py"
INDEX = "by_email"
KEY = "email"
METHODS = ("source", "plain Spark", "t.read", "Spark floor")


@dataclass(frozen=True)
class SourceScale:
    """Table shape and repetitions of one scale."""

    rows: int
    files: int
    reps: int


SCALES: dict[str, SourceScale] = {
    "tiny": SourceScale(rows=20_000, files=4, reps=3),
    "small": SourceScale(rows=500_000, files=20, reps=5),
    "full": SourceScale(rows=5_000_000, files=100, reps=7),
}


@dataclass
class SourceResults:
    """What one run measured."""

    scale: str
    params: datagen.TableParams
    pyspark: str = ""
    timings: dict[str, Timing] = field(default_factory=dict)
    partitions: int = 0
    plan: str = ""
    wrong: list[str] = field(default_factory=list)
    load: tuple[float, float] = (0.0, 0.0)


def unavailable() -> str | None:
    """Why this benchmark cannot run here (``run_all`` skips it), or None."""
    from importlib.metadata import version

    from lakehouse_index.spark_source import MIN_PYSPARK

    major, minor = version("pyspark").split(".")[:2]
    if (int(major), int(minor)) < MIN_PYSPARK:
        return f"needs pyspark >= 4.1 (this is {version('pyspark')}): run it in .venv-spark4"
    return None


def _keys(params: datagen.TableParams, n: int) -> list[int]:
    """``n`` distinct existing row numbers, spread over the table (seeded)."""
    return [int(i) for i in np.random.default_rng(5).choice(params.rows, size=n, replace=False)]


def run(scale: str, *, log: Callable[[str], None] = print) -> SourceResults:
    """Measure the three reads at ``scale``; returns the results (nothing is written)."""
    import pyspark

    import lakehouse_index as li
    from lakehouse_index.spark import get_spark

    why = unavailable()
    if why:
        raise SystemExit(why)
    sc = SCALES[scale]
    params = datagen.TableParams(rows=sc.rows, files=sc.files)
    res = SourceResults(scale, params, pyspark=pyspark.__version__)
    work = Path(tempfile.mkdtemp(prefix="bench-source-"))
    try:
        path = str(datagen.work_copy(datagen.delta_table(params), work / "t"))
        spark = get_spark(master="local[2]")
        li.register_spark_source(spark)
        table = li.open_table(path)
        log(f"building {INDEX} over {params.rows:,} rows")
        table.create_index(li.SecondaryIndex(INDEX, key=KEY, record_key="id"), spark=spark)
        files = [f.path for f in table.snapshot().files.values()]

        def source(where: str) -> list[Any]:
            return spark.read.format("lakehouse_index").option("where", where).load(path).collect()

        def plain(where: str) -> list[Any]:
            return spark.read.parquet(*files).where(where).collect()

        def library(where: str) -> list[Any]:
            return table.read(spark, where=where).collect()

        spark_floor.register(spark)
        methods: dict[str, Callable[[str], list[Any]]] = {
            "source": source,
            "plain Spark": plain,
            "t.read": library,
            "Spark floor": partial(spark_floor.read, spark),
        }
        keys = _keys(params, sc.reps + 1)
        res.load = (load_average(), 0.0)
        for name, fn in methods.items():
            fn(f"{KEY} = '{datagen.email_of(keys[-1])}'")  # warm-up (JIT, footers, Python workers)
            res.timings[name] = Timing()
        settle(spark, 3.0)
        # Round robin (each key through every method in turn): a load that drifts during the
        # run, as on a shared machine, weighs on every method alike.
        for i in keys[:-1]:
            for name, fn in methods.items():
                seconds, rows = timed(partial(fn, f"{KEY} = '{datagen.email_of(i)}'"))
                res.timings[name].samples.append(seconds)
                if sorted(r["id"] for r in rows) != [i]:
                    res.wrong.append(f"{name}: {datagen.email_of(i)} → {sorted(r['id'] for r in rows)}")
        for name, timing in res.timings.items():
            log(f"{name}: median {fmt_ms(timing.median)}")
        res.load = (res.load[0], load_average())
        probe = f"{KEY} = '{datagen.email_of(keys[0])}'"
        res.partitions = (
            spark.read.format("lakehouse_index").option("where", probe).load(path).rdd.getNumPartitions()
        )
        res.plan = li.explain_spark_source(path, probe).answer
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return res


def render(res: SourceResults) -> str:
    """The docs/BENCHMARKS.md section."""
    p = res.params
    src, plain, lib, floor = (res.timings[m].median for m in METHODS)
    rows = [
        [m, fmt_ms(res.timings[m].median), fmt_ms(min(res.timings[m].samples)), len(res.timings[m].samples)]
        for m in METHODS
    ]
    goals = [
        [
            "source vs t.read",
            fmt_ratio(ratio(src, lib)),
            "≤ 1.2x",
            verdict(ratio(src, lib), 1.2, higher_is_better=False),
        ],
        [
            "plain Spark vs source",
            fmt_ratio(ratio(plain, src)),
            "≥ 20x",
            verdict(ratio(plain, src), 20, higher_is_better=True),
        ],
    ]
    goals.append(
        [
            "plain Spark vs Spark floor (the bound for any Python data source)",
            fmt_ratio(ratio(plain, floor)),
            "",
            "",
        ]
    )
    parts = [
        f"Scale **{res.scale}**: {p.rows:,} rows in {p.files} data files; pyspark {res.pyspark}, "
        f"`local[2]`; load average {res.load[0]:.1f} at the start, {res.load[1]:.1f} at the end "
        "(2 cores shared with other work). Each figure is the median of the repetitions, a "
        "different `email = '…'` each, rows collected on the driver, after an untimed warm-up; the "
        "methods take turns on each key (round robin), so a drifting load weighs on all alike.",
        markdown_table(["method", "median", "best", "reps"], rows),
        markdown_table(["ratio", "measured", "goal", "verdict"], goals),
        f"The source planned {res.partitions} partition(s) for one key: {res.plan}. Its own work "
        f"(its median minus the Spark floor's): {fmt_ms(src - floor)}.",
        "Answers: " + ("; ".join(res.wrong) or "every method returned exactly the expected row."),
    ]
    if res.scale != "full":
        parts.append(f"This is the `{res.scale}` scale; the goals are stated for the 5M-row table (`full`).")
    return "\n\n".join(parts)


def results(res: SourceResults) -> dict[str, Any]:
    """The JSON results: every sample of every method, the plan and the answers' check."""
    return {
        "scale": res.scale,
        "rows": res.params.rows,
        "files": res.params.files,
        "pyspark": res.pyspark,
        "methods": {
            m: {"samples_s": t.samples, "median_s": t.median, "best_s": min(t.samples)}
            for m, t in res.timings.items()
        },
        "partitions": res.partitions,
        "plan": res.plan,
        "wrong": res.wrong,
        "load_average": list(res.load),
    }


def main(argv: list[str] | None = None) -> SourceResults:
    """Command line entry: run, print, write the docs/BENCHMARKS.md section (unless ``--no-report``)."""
    return bench_main(
        argv,
        description=__doc__.split("\n")[0],
        scales=list(SCALES),
        run=run,
        render=render,
        results=results,
        section=("spark_source", "Spark data source: selective WHERE key = … (issue 17)", SCRIPT),
    )


if __name__ == "__main__":
    main()
