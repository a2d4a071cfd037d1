"""Benchmark of batch lookups and locates (issue 32, item 1): cost per key against the batch size.

Data: W1's table of :mod:`integration.bench.bench_lookup` (:mod:`integration.bench.datagen`:
ids dealt to the files by a seeded permutation, so a batch's keys are spread over every file),
the secondary index ``by_email`` (record key ``id``) and the Lance copy with a BTREE index.
Per batch of 1, 10, 100, 1,000 and 10,000 existing keys (a new batch per repetition, after an
untimed warm-up batch): the index ``lookup`` (full rows) and ``locate``, Lance's
``email IN (...)`` (full rows) and DuckDB's ``email IN (...)`` scan of the version's files,
warm, in the same run; every answer is checked against the generator.

Where the time goes for the 1,000-key batch: the index row groups read (counted by the lookup
engine), and the data pages the rows lie in (from the files' offset indexes): a compressed
page is fetched and decoded whole, so those pages are what any reader of these files must
decode; their share of the table's pages bounds what a lookup can save over a scan.

``--scale large``: also a 100,000-key locate on a table of 10M rows of W1's shape (the issue's
goal: at most 1 s in process).

Run: ``python -m integration.bench.bench_batch_lookup --scale small|full|large``.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from integration.bench import datagen
from integration.bench.bench_lookup import INDEX, KEY, duckdb_in, lance_in
from integration.bench.common import (
    Timing,
    bench_main,
    clear_engine_caches,
    fmt_ms,
    fmt_ratio,
    load_average,
    ratio,
    timed,
    verdict,
)

SCRIPT = "integration/bench/bench_batch_lookup.py"
BATCH_SIZES = (1, 10, 100, 1_000, 10_000)
#: The large point: keys of one locate, and the table's rows (files of W1's 50,000 rows).
LARGE_KEYS = 100_000
#: Marks the module for ``run_all --large`` (the 10M-row point).
HAS_LARGE = True


@dataclass(frozen=True)
class BatchScale:
    rows: int
    files: int
    #: Repetitions of batches of up to 100 keys, and of larger ones.
    reps: tuple[int, int]
    large_rows: int = 0


SCALES: dict[str, BatchScale] = {
    "tiny": BatchScale(20_000, 4, (3, 2)),
    "small": BatchScale(200_000, 20, (9, 3)),
    "full": BatchScale(5_000_000, 100, (21, 5)),
    "large": BatchScale(5_000_000, 100, (21, 5), large_rows=10_000_000),
}

METHODS = {
    "lookup": "index lookup (full rows)",
    "locate": "index locate",
    "lance": "Lance BTREE IN (...) (full rows)",
    "duckdb": "DuckDB IN (...) scan (full rows)",
}


@dataclass
class BatchResults:
    scale: str
    params: datagen.TableParams
    #: keys per batch → method → warm timing of one batch.
    batches: dict[int, dict[str, Timing]] = field(default_factory=dict)
    #: The 1,000-key batch: index row groups read and the data pages its rows lie in.
    floor: dict[str, float] = field(default_factory=dict)
    large: dict[str, float] = field(default_factory=dict)
    disagreements: list[str] = field(default_factory=list)


def _ids(result: Any) -> tuple[int, ...]:
    return tuple(sorted(result.column("id").to_pylist()))


def measure(
    res: BatchResults,
    methods: dict[str, Callable[[list[str]], pa.Table]],
    probe: Callable[[int], list[str]],
    reps: tuple[int, int],
) -> None:
    """Warm timings of each method per batch size (an untimed warm-up batch first); answers
    checked against the generator (the id is in the key)."""
    for n in [b for b in BATCH_SIZES if b <= res.params.rows]:
        per: dict[str, Timing] = {}
        for name, fn in methods.items():
            fn(probe(n))
            timing = Timing()
            for _ in range(reps[0] if n <= 100 else reps[1]):
                keys = probe(n)
                secs, out = timed(lambda keys=keys, fn=fn: fn(keys))  # type: ignore[misc]
                timing.samples.append(secs)
                if _ids(out) != tuple(sorted(int(k[4:14]) for k in keys)):
                    res.disagreements.append(f"batch of {n}: {name} returned other rows than the generator")
            per[name] = timing
        res.batches[n] = per


def pages_touched(table: Any, keys: list[str]) -> dict[str, float]:
    """The data pages the rows of ``keys`` lie in (one per column and row, from each file's offset
    index), against every data page of the files: count and KB."""
    import pyarrow.parquet as pq

    from lakehouse_index.read.page_index import load_page_index

    located = table.locate(INDEX, keys)
    by_file: dict[str, list[int]] = {}
    for uri, row in zip(located["_file"].to_pylist(), located["_row"].to_pylist(), strict=True):
        by_file.setdefault(uri, []).append(row)
    hit = total = hit_bytes = total_bytes = 0
    for uri in table.snapshot().files:
        path = uri[len("file://") :] if uri.startswith("file://") else uri
        pf = pq.ParquetFile(path)
        with pa.OSFile(path) as handle:
            index = load_page_index(handle, pf.metadata, pf.schema_arrow)
        starts = np.cumsum([0] + [pf.metadata.row_group(g).num_rows for g in range(pf.num_row_groups)])
        rows = np.array(by_file.get(uri, []), dtype=np.int64)
        groups = np.searchsorted(starts, rows, side="right") - 1
        for (g, _), chunk in index.chunks.items():
            sizes = np.asarray(chunk.page_sizes, dtype=np.int64)
            total += len(sizes)
            total_bytes += int(sizes.sum())
            local = rows[groups == g] - starts[g]
            pages = np.unique(np.searchsorted(chunk.page_rows, local, side="right") - 1)
            hit += len(pages)
            hit_bytes += int(sizes[pages].sum()) if len(pages) else 0
    return {"pages": hit, "pages_total": total, "KB": hit_bytes / 1024, "KB_total": total_bytes / 1024}


def index_groups(table: Any, keys: list[str]) -> dict[str, float]:
    """Index files and row groups a locate of ``keys`` reads, and the entries decoded."""
    from lakehouse_index.query import index_queries
    from lakehouse_index.query import lookup as lk

    plan = index_queries.lookup_plan(table.context, INDEX, keys, table.snapshot)
    lk.locate(table.source, table.storage, table.context.index_dir(INDEX), plan)
    group_rows = table.config.executor.index_row_group_rows
    return {
        "index_files": plan.stats.files_read,
        "index_row_groups": plan.stats.row_groups_read,
        "index_entries_decoded": plan.stats.row_groups_read * group_rows,
    }


def run(scale: str, *, workdir: Path | None = None, log: Callable[[str], None] = print) -> BatchResults:
    """Every batch size on W1's table (and the large locate at ``large``); nothing written."""
    import lakehouse_index as li

    sc = SCALES[scale]
    params = datagen.TableParams(sc.rows, sc.files)
    res = BatchResults(scale, params)
    own_tmp = workdir is None
    work = Path(tempfile.mkdtemp(prefix="bench-batch-")) if workdir is None else workdir
    try:
        path = datagen.work_copy(datagen.delta_table(params), work / "delta")
        lance_uri = datagen.lance_work_copy(datagen.lance_dataset(params, KEY), work / "data.lance")
        table = li.open_table(str(path))
        log(f"building the index on {sc.rows:,} rows / {sc.files} files")
        table.create_index(li.SecondaryIndex(INDEX, key=KEY, record_key="id"))
        version = table.latest_version()
        rng = np.random.default_rng(32)

        def probe(n: int) -> list[str]:
            return [datagen.email_of(int(i)) for i in rng.choice(sc.rows, size=n, replace=False)]

        # As after a stream of lookups: every data file's footer, page index and dictionaries cached.
        table.lookup(INDEX, [datagen.email_of(int(ids[0])) for ids in params.file_ids()])
        log("batches of " + ", ".join(f"{n:,}" for n in BATCH_SIZES) + " keys")
        measure(
            res,
            {
                "lookup": lambda ks: table.lookup(INDEX, ks),
                "locate": lambda ks: table.locate(INDEX, ks),
                "lance": lance_in(lance_uri),
                "duckdb": duckdb_in(path, version),
            },
            probe,
            sc.reps,
        )
        sample = probe(min(1_000, sc.rows))
        res.floor = {**index_groups(table, sample), **pages_touched(table, sample)}
        if sc.large_rows:
            res.large = large_locate(sc.large_rows, work, log)
    finally:
        clear_engine_caches()
        if own_tmp:
            shutil.rmtree(work, ignore_errors=True)
    return res


def large_locate(rows: int, work: Path, log: Callable[[str], None]) -> dict[str, float]:
    """A warm locate of :data:`LARGE_KEYS` keys on ``rows`` rows of W1's shape (median of 3)."""
    import lakehouse_index as li

    params = datagen.TableParams(rows, rows // 50_000)
    path = datagen.work_copy(datagen.delta_table(params), work / "large")
    table = li.open_table(str(path))
    log(f"large: building the index on {rows:,} rows (the sizing policy's executor)")
    build_s, _ = timed(lambda: table.create_index(li.SecondaryIndex(INDEX, key=KEY, record_key="id")))
    rng = np.random.default_rng(100)

    def probe() -> list[str]:
        return [datagen.email_of(int(i)) for i in rng.choice(rows, size=LARGE_KEYS, replace=False)]

    table.locate(INDEX, probe())
    timing = Timing()
    wrong = 0
    for _ in range(3):
        keys = probe()
        secs, out = timed(lambda keys=keys: table.locate(INDEX, keys))  # type: ignore[misc]
        timing.samples.append(secs)
        wrong += out.num_rows != LARGE_KEYS
    arrow = pa.array(probe())
    arrow_s, _ = timed(lambda: table.locate(INDEX, arrow))
    return {
        "rows": rows,
        "build_s": build_s,
        "locate_s": timing.median,
        "arrow_keys_s": arrow_s,
        "wrong": wrong,
    }


def render(res: BatchResults) -> str:
    from integration.bench.report import markdown_table

    p = res.params
    rows = []
    for n, per in res.batches.items():
        for key, timing in per.items():
            med = timing.median
            rows.append(
                [
                    f"{n:,}",
                    METHODS[key],
                    f"{len(timing.samples)}",
                    fmt_ms(med),
                    fmt_ms(med / n),
                    f"{ratio(n, med):,.0f}",
                ]
            )
    k = res.batches.get(1_000, {})
    lk = k.get("lookup", Timing()).median
    goals = [
        [
            "1,000-key lookup / Lance IN",
            fmt_ratio(ratio(lk, k.get("lance", Timing()).median)),
            "≤ 2x",
            verdict(ratio(lk, k.get("lance", Timing()).median), 2, higher_is_better=False),
        ],
        [
            "DuckDB IN scan / 1,000-key lookup",
            fmt_ratio(ratio(k.get("duckdb", Timing()).median, lk)),
            "≥ 5x",
            verdict(ratio(k.get("duckdb", Timing()).median, lk), 5, higher_is_better=True),
        ],
    ]
    per_key = [
        (n, res.batches[n]["lookup"].median / n)
        for n in (10, 10_000)
        if n in res.batches and "lookup" in res.batches[n]
    ]
    if len(per_key) == 2:
        goals.append(
            [
                "lookup per key, 10 keys / 10,000 keys",
                fmt_ratio(ratio(per_key[0][1], per_key[1][1])),
                "> 1x (falls)",
                verdict(ratio(per_key[0][1], per_key[1][1]), 1, higher_is_better=True),
            ]
        )
    if res.large:
        goals.append(
            [
                f"{LARGE_KEYS:,}-key locate on {int(res.large['rows']):,} rows",
                fmt_ms(res.large["locate_s"]),
                "≤ 1 s",
                verdict(res.large["locate_s"], 1.0, higher_is_better=False),
            ]
        )
    f = res.floor
    lines = [
        f"Scale **{res.scale}**: {p.rows:,} rows in {p.files} data files (W1's table, keys spread over "
        "every file), secondary index `by_email`; warm (every data file's footer, page index and "
        "dictionaries cached by an untimed lookup with a key in each file, then an untimed batch per "
        "method and size); medians of the repetitions, a new batch of existing keys each. Answers "
        f"checked against the generator. The machine was shared with other work (load average at "
        f"the end: {load_average():.1f}): compare the methods at one batch size, not figures across runs.",
        "",
        markdown_table(["keys", "method", "batches", "per batch (median)", "per key", "keys/s"], rows),
        "",
        markdown_table(["goal (issue 32)", "measured", "goal", "verdict"], goals),
        "",
    ]
    if f:
        lines += [
            f"Where a 1,000-key batch goes: the index reads {f['index_row_groups']:.0f} row groups of "
            f"{f['index_files']:.0f} index files (about {f['index_entries_decoded']:,.0f} entries decoded "
            "to match 1,000 keys: a row group of 4,096 sorted keys is the unit a key is found in), and "
            f"the rows lie in {f['pages']:.0f} of the table's {f['pages_total']:.0f} data pages "
            f"({f['KB']:,.0f} of {f['KB_total']:,.0f} KB). A compressed page is fetched and decoded "
            f"whole, so a full-row lookup of these keys must decode that share of the table (about "
            f"{1_000 / p.files:,.0f} keys per {p.rows_per_file:,}-row file, in pages of up to 20,480 "
            "rows as deltalake writes them). Where that share is nearly every page, a lookup decodes "
            "as much as a scan does, and no reader of these files can answer 5x faster than DuckDB's "
            "scan, which decodes the key column and the pages of the matching rows: the goal needs "
            "smaller pages (2,048 rows leave most pages untouched).",
            "",
        ]
    if res.large:
        lines += [
            f"Large point: {int(res.large['rows']):,} rows (index built in "
            f"{fmt_ms(res.large['build_s'])}), {LARGE_KEYS:,} keys a locate: "
            f"{fmt_ms(res.large['locate_s'])} (median of 3) with the keys as a Python list, "
            f"{fmt_ms(res.large['arrow_keys_s'])} as a pyarrow array; "
            f"{'every' if not res.large['wrong'] else 'NOT every'} key found once.",
            "",
        ]
    if res.disagreements:
        lines += ["**ANSWERS DISAGREE** (the numbers above are not valid):", ""]
        lines += [f"* {d}" for d in res.disagreements] + [""]
    return "\n".join(lines)


def results(res: BatchResults) -> dict[str, Any]:
    return {
        "scale": res.scale,
        "rows": res.params.rows,
        "files": res.params.files,
        "batches": {str(n): {k: t.to_json() for k, t in per.items()} for n, per in res.batches.items()},
        "floor_1000_keys": res.floor,
        "large": res.large,
        "answers_agree": not res.disagreements,
    }


def main(argv: list[str] | None = None) -> BatchResults:
    """Command line entry: run, print, write the docs/BENCHMARKS.md section (unless ``--no-report``)."""
    return bench_main(
        argv,
        description=__doc__.split("\n")[0],
        scales=list(SCALES),
        run=run,
        render=render,
        section=("batch_lookup", "Batch lookups and locates (issue 32)", SCRIPT),
        results=results,
    )


if __name__ == "__main__":
    main()
