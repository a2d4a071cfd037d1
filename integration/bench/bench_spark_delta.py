"""Benchmark: a selective ``WHERE key = …`` at ``versionAsOf`` against the formats' Spark readers (issue 33).

Data: the lookup benchmark's Delta table (:mod:`integration.bench.datagen`: one data file
per commit, ids dealt to the files by a seeded permutation, so row-group statistics prune
nothing), and an Iceberg copy with the same files' rows, one Spark append (snapshot) per
file, in a Hadoop catalog. Both get ``SecondaryIndex("by_email", key="email",
record_key="id")`` at the latest version; every query reads the version before it
(``versionAsOf``), one existing address at a time, rows collected on the driver, in one
Spark session (``local[2]``):

* **source**: ``spark.read.format("lakehouse_index").option("versionAsOf", v)
  .option("where", "email = '…'").load(path)`` (pyspark >= 4.1); on pyspark 3.5, **t.read**:
  ``Table.read(spark, where=…, version_as_of=v)``, the library's own Spark read, stands in;
* **delta-spark**: ``spark.read.format("delta").option("versionAsOf", v).load(path)`` with the
  same filter (Delta's data skipping on the log's statistics);
* **Iceberg runtime**: ``SELECT * FROM … VERSION AS OF s WHERE …`` (Iceberg's Spark reader);
* **floor** (pyspark >= 4.1): a Python data source that opens no table and plans nothing
  (:mod:`integration.bench.spark_floor`): what Spark's Python data source protocol costs by
  itself, the least any Python data source can take here.

Goal (issue 33): the source (or ``t.read``) at least 20x faster than each format's reader. The
report also gives the floor's ratio to each reader: the most a Python data source can reach.
Every method's rows are checked against the generator (address ``i`` is row ``i``).

``python -m integration.bench.bench_spark_delta --scale tiny|small|full`` (``full``: 50M rows,
needs the disk and an hour of a quiet machine; run in ``.venv-spark4`` for the source).
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

SCRIPT = "integration/bench/bench_spark_delta.py"
INDEX = "by_email"
KEY = "email"
CATALOG = "li_bench"


@dataclass(frozen=True)
class Scale:
    """Table shape and repetitions of one scale."""

    rows: int
    files: int
    reps: int


SCALES: dict[str, Scale] = {
    "tiny": Scale(rows=20_000, files=4, reps=3),
    "small": Scale(rows=1_000_000, files=20, reps=5),
    "full": Scale(rows=50_000_000, files=200, reps=5),
}


@dataclass
class Results:
    """What one run measured."""

    scale: str
    params: datagen.TableParams
    pyspark: str = ""
    #: "source" on pyspark >= 4.1, else "t.read".
    ours: str = ""
    version: int = 0
    timings: dict[str, Timing] = field(default_factory=dict)
    plans: dict[str, str] = field(default_factory=dict)
    wrong: list[str] = field(default_factory=list)
    load: tuple[float, float] = (0.0, 0.0)


FLOOR = "floor (Python data source, no table)"


def _has_source() -> bool:
    from importlib.metadata import version

    from lakehouse_index.spark_source import MIN_PYSPARK

    major, minor = version("pyspark").split(".")[:2]
    return (int(major), int(minor)) >= MIN_PYSPARK


def _iceberg_copy(spark: Any, delta_files: list[str], warehouse: Path) -> tuple[str, str]:
    """The Iceberg table (one append per Delta data file, in commit order): its Spark name and path."""
    spark.conf.set(f"spark.sql.catalog.{CATALOG}", "org.apache.iceberg.spark.SparkCatalog")
    spark.conf.set(f"spark.sql.catalog.{CATALOG}.type", "hadoop")
    spark.conf.set(f"spark.sql.catalog.{CATALOG}.warehouse", str(warehouse))
    name = f"{CATALOG}.db.t"
    for i, f in enumerate(delta_files):
        frame = spark.read.parquet(f).coalesce(1)
        if i == 0:
            frame.writeTo(name).using("iceberg").create()
        else:
            frame.writeTo(name).append()
    return name, str(warehouse / "db" / "t")


def run(scale: str, *, log: Callable[[str], None] = print) -> Results:
    """Measure the reads at ``scale``; returns the results (nothing is written to the docs)."""
    import pyspark

    import lakehouse_index as li
    from lakehouse_index.spark import get_spark

    sc = SCALES[scale]
    params = datagen.TableParams(rows=sc.rows, files=sc.files)
    source = _has_source()
    res = Results(scale, params, pyspark=pyspark.__version__, ours="source" if source else "t.read")
    work = Path(tempfile.mkdtemp(prefix="bench-spark-delta-"))
    try:
        delta_path = str(datagen.work_copy(datagen.delta_table(params), work / "t"))
        spark = get_spark(master="local[2]", conf={"spark.sql.shuffle.partitions": "2"})
        if source:
            li.register_spark_source(spark)
            spark_floor.register(spark)
        delta = li.open_table(delta_path)
        files = _commit_order(delta)
        log(f"copying {params.rows:,} rows into Iceberg, one snapshot per file")
        ice_name, ice_path = _iceberg_copy(spark, files, work / "wh")
        iceberg = li.open_table(ice_path)
        for t in (delta, iceberg):
            log(f"building {INDEX} on {t.format} ({params.rows:,} rows)")
            t.create_index(li.SecondaryIndex(INDEX, key=KEY, record_key="id"), spark=spark)
        res.version = delta.latest_version() - 1
        ice_versions = [v.version for v in iceberg.source.versions()]
        ice_version = ice_versions[-2]
        present = np.concatenate(params.file_ids()[: res.version + 1])

        def ours(t: li.Table, path: str, version: int, where: str) -> list[Any]:
            if source:
                reader = spark.read.format("lakehouse_index").option("versionAsOf", str(version))
                return reader.option("where", where).load(path).collect()
            return t.read(spark, where=where, version_as_of=version).collect()

        def delta_spark(where: str) -> list[Any]:
            reader = spark.read.format("delta").option("versionAsOf", res.version)
            return reader.load(delta_path).where(where).collect()

        def iceberg_runtime(where: str) -> list[Any]:
            return spark.sql(f"SELECT * FROM {ice_name} VERSION AS OF {ice_version} WHERE {where}").collect()

        methods: dict[str, Callable[[str], list[Any]]] = {
            f"{res.ours} on Delta": partial(ours, delta, delta_path, res.version),
            "delta-spark": delta_spark,
            f"{res.ours} on Iceberg": partial(ours, iceberg, ice_path, ice_version),
            "Iceberg runtime": iceberg_runtime,
        }
        if source:
            methods[FLOOR] = partial(spark_floor.read, spark)
        keys = [int(i) for i in np.random.default_rng(5).choice(present, size=sc.reps + 1, replace=False)]
        res.load = (load_average(), 0.0)
        for name, fn in methods.items():
            fn(f"{KEY} = '{datagen.email_of(keys[-1])}'")  # warm-up (JIT, footers, Python workers)
            res.timings[name] = Timing()
        settle(spark, 3.0)
        for i in keys[:-1]:  # round robin: a drifting load weighs on every method alike
            for name, fn in methods.items():
                seconds, rows = timed(partial(fn, f"{KEY} = '{datagen.email_of(i)}'"))
                res.timings[name].samples.append(seconds)
                if sorted(r["id"] for r in rows) != [i]:
                    res.wrong.append(f"{name}: {datagen.email_of(i)} → {sorted(r['id'] for r in rows)}")
        res.load = (res.load[0], load_average())
        probe = f"{KEY} = '{datagen.email_of(keys[0])}'"
        for t, v in ((delta, res.version), (iceberg, ice_version)):
            res.plans[t.format] = t.explain(where=probe, version_as_of=v).summary
        for name, timing in res.timings.items():
            log(f"{name}: median {fmt_ms(timing.median)}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return res


def _commit_order(t: Any) -> list[str]:
    """The table's data files in the order the commits added them."""
    seen: list[str] = []
    for v in range(t.latest_version() + 1):
        seen += sorted(set(t.snapshot(v).files) - set(seen))
    return [t.snapshot().files[p].path for p in seen]


def render(res: Results) -> str:
    """The docs/BENCHMARKS.md section."""
    p = res.params
    rows = [[m, fmt_ms(t.median), fmt_ms(min(t.samples)), len(t.samples)] for m, t in res.timings.items()]
    goals = []
    for fmt, reader in (("Delta", "delta-spark"), ("Iceberg", "Iceberg runtime")):
        x = ratio(res.timings[reader].median, res.timings[f"{res.ours} on {fmt}"].median)
        goals.append(
            [f"{reader} vs {res.ours}", fmt_ratio(x), "≥ 20x", verdict(x, 20, higher_is_better=True)]
        )
        if FLOOR in res.timings:
            floor = ratio(res.timings[reader].median, res.timings[FLOOR].median)
            goals.append([f"{reader} vs the floor", fmt_ratio(floor), "(the most reachable)", ""])
    parts = [
        f"Scale **{res.scale}**: {p.rows:,} rows in {p.files} data files (one per commit), read at the "
        f"version before the latest; pyspark {res.pyspark}, `local[2]`; load average {res.load[0]:.1f} "
        f"at the start, {res.load[1]:.1f} at the end (2 cores shared with other work). Medians of the "
        "repetitions, a different `email = '…'` each, rows collected on the driver, after an untimed "
        "warm-up, methods in turn on each key."
        + (
            ""
            if res.ours == "source"
            else " pyspark < 4.1: `t.read(spark, where=…, version_as_of=…)` stands in for the data source."
        ),
        markdown_table(["method", "median", "best", "reps"], rows),
        markdown_table(["ratio", "measured", "goal", "verdict"], goals),
        "Plans: " + "; ".join(f"{fmt}: {plan}" for fmt, plan in res.plans.items()) + ".",
        "Answers: " + ("; ".join(res.wrong) or "every method returned exactly the expected row."),
    ]
    if res.scale != "full":
        parts.append(f"This is the `{res.scale}` scale; the goal is stated for 50M rows (`full`).")
    return "\n\n".join(parts)


def results(res: Results) -> dict[str, Any]:
    """The JSON results: every sample of every method, the plans and the answers' check."""
    return {
        "scale": res.scale,
        "rows": res.params.rows,
        "files": res.params.files,
        "pyspark": res.pyspark,
        "version": res.version,
        "methods": {
            m: {"samples_s": t.samples, "median_s": t.median, "best_s": min(t.samples)}
            for m, t in res.timings.items()
        },
        "plans": res.plans,
        "wrong": res.wrong,
        "load_average": list(res.load),
    }


def main(argv: list[str] | None = None) -> Results:
    """Command line entry: run, print, write the docs/BENCHMARKS.md section (unless ``--no-report``)."""
    return bench_main(
        argv,
        description=__doc__.split("\n")[0],
        scales=list(SCALES),
        run=run,
        render=render,
        results=results,
        section=(
            "spark_delta",
            "Spark: WHERE key = … at versionAsOf vs the formats' readers (issue 33)",
            SCRIPT,
        ),
    )


if __name__ == "__main__":
    main()
