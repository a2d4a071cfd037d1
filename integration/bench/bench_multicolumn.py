"""Multi-column index (issue 36): ranges on any of three columns, and samples, against plain scans.

One Delta table (deltalake) of ``rows`` rows in ``files`` files, rows in random order:
``id`` (int64), three indexed columns ``a`` (int64 uniform), ``b`` (float64 uniform), ``ts``
(timestamp[us] over a year), and payload ``v`` (float64), ``q`` (int64). Measured, in one
process, warm (each method's first call is an untimed warm-up; medians of ``repeats``):

* **range** — for each indexed column, ``col`` in a range holding 1% of the rows (from its
  quantiles), asking for ``id, a, b, ts``: through a single-column covering index on ``a``
  (``CoveringIndex(indexed=a, included=[b, ts, id])``, the planner's choice while it is the
  only index), through the multi-column index (``MultiColumnIndex(columns=[a, b, ts],
  included=[id])``, index only), and the plain scan (``use_indexes=False``, reading only the
  columns asked for); *index share* is the compressed bytes of the index row groups the
  multi-column read takes over the index's size (the planner's ``index_bytes``);
* **sample** — ``sample(0.01)`` through the index (all columns of the index) against the plain
  scan of the same columns and the plain-scan sample (``use_indexes=False``: every file read,
  weights computed).

Every index answer is checked against the plain scan (same rows). Goals from the issue:
range ≤ 5% of the index and ≥ 10x faster than the plain scan; sample ≤ 3% and ≥ 20x faster.

Run: ``python -m integration.bench.bench_multicolumn --scale tiny|small|full``.
"""

from __future__ import annotations

import shutil
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from integration.bench.common import bench_main, fmt_ms, fmt_ratio, load_average, ratio, timed, verdict

SCRIPT = "integration/bench/bench_multicolumn.py"
INDEXED = ("a", "b", "ts")
COLUMNS = ["id", *INDEXED]


@dataclass(frozen=True)
class Scale:
    """Rows, data files, repetitions."""

    rows: int
    files: int
    repeats: int


SCALES = {
    "tiny": Scale(rows=100_000, files=2, repeats=2),
    "small": Scale(rows=1_000_000, files=4, repeats=3),
    "full": Scale(rows=10_000_000, files=10, repeats=3),
}


@dataclass
class Results:
    """Medians (seconds) and index shares of one run."""

    sc: Scale
    build_s: dict[str, float] = field(default_factory=dict)
    index_bytes: dict[str, int] = field(default_factory=dict)
    table_bytes: int = 0
    #: column → method → seconds
    ranges: dict[str, dict[str, float]] = field(default_factory=dict)
    #: column → share of the multi-column index read
    range_share: dict[str, float] = field(default_factory=dict)
    range_rows: dict[str, int] = field(default_factory=dict)
    covering_choice: dict[str, str] = field(default_factory=dict)
    sample: dict[str, float] = field(default_factory=dict)
    sample_share: float = float("nan")
    sample_rows: int = 0
    load: float = 0.0


def _data(start: int, n: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    year_us = 365 * 86400 * 10**6
    return pa.table(
        {
            "id": np.arange(start, start + n, dtype=np.int64),
            "a": rng.integers(0, 10**9, n),
            "b": rng.random(n),
            "ts": pa.array(1_700_000_000 * 10**6 + rng.integers(0, year_us, n), pa.timestamp("us")),
            "v": rng.random(n),
            "q": rng.integers(0, 1000, n),
        }
    )


def _median(fn: Any, repeats: int) -> tuple[float, Any]:
    fn()  # warm-up
    runs = [timed(fn) for _ in range(repeats)]
    return float(np.median([s for s, _ in runs])), runs[-1][1]


def _same(a: pa.Table, b: pa.Table, cols: list[str]) -> bool:
    return Counter(zip(*(a[c].to_pylist() for c in cols), strict=True)) == Counter(
        zip(*(b[c].to_pylist() for c in cols), strict=True)
    )


def _range(table: pa.Table, col: str) -> str:
    """A SQL range on ``col`` holding about 1% of the rows (its 0.40..0.41 quantiles)."""
    lo, hi = pc.quantile(
        table[col].cast(pa.int64()) if col == "ts" else table[col], q=[0.40, 0.41]
    ).to_pylist()
    if col == "ts":
        return f"ts >= TIMESTAMP '{_ts(lo)}' AND ts < TIMESTAMP '{_ts(hi)}'"
    return f"{col} >= {lo} AND {col} < {hi}"


def _ts(us: float) -> str:
    import datetime as dt

    return (dt.datetime(1970, 1, 1) + dt.timedelta(microseconds=int(us))).isoformat(sep=" ")


def run(scale: str, workdir: Path | None = None) -> Results:
    """Write the table, build both indexes, measure."""
    from deltalake import write_deltalake

    import lakehouse_index as li

    sc = SCALES[scale]
    res = Results(sc, load=load_average())
    root = workdir or Path(tempfile.mkdtemp(prefix="bench-multicolumn-"))
    path = str(root / "t")
    per = sc.rows // sc.files
    for f in range(sc.files):
        write_deltalake(path, _data(f * per, per, f), mode="append" if f else "error")
    t = li.open_table(path)
    res.table_bytes = t.snapshot().total_bytes
    sample_of = pa.concat_tables([_data(f * per, per, f).slice(0, 200_000) for f in range(sc.files)])
    wheres = {c: _range(sample_of, c) for c in INDEXED}

    res.build_s["covering"], _ = timed(
        lambda: t.create_index(li.CoveringIndex("cov_a", indexed="a", included=["b", "ts", "id"]))
    )
    plain: dict[str, pa.Table] = {}
    for c, where in wheres.items():
        res.ranges[c] = {}
        res.ranges[c]["plain scan"], plain[c] = _median(
            lambda w=where: t.scan(where=w, columns=COLUMNS, use_indexes=False), sc.repeats
        )
        res.range_rows[c] = plain[c].num_rows
        res.covering_choice[c] = t.explain(where=where).chosen.label.split(":")[0]
        res.ranges[c]["covering on a"], got = _median(
            lambda w=where: t.scan(where=w, columns=COLUMNS), sc.repeats
        )
        assert _same(got, plain[c], COLUMNS), f"covering answer differs for {where}"
    t.delete_index("cov_a")
    t.vacuum_index("cov_a", retention_hours=0)

    spec = li.MultiColumnIndex("mc", columns=list(INDEXED), included=["id"])
    res.build_s["multicolumn"], _ = timed(lambda: t.create_index(spec))
    for c, where in wheres.items():
        plan = t.explain(where=where)
        assert plan.chosen.scans and plan.chosen.entry is not None, str(plan)
        res.range_share[c] = plan.chosen.index_bytes / plan.chosen.entry.content.size
        res.index_bytes["multicolumn"] = plan.chosen.entry.content.size
        res.ranges[c]["multicolumn"], got = _median(
            lambda w=where: t.scan(where=w, columns=COLUMNS), sc.repeats
        )
        assert _same(got, plain[c], COLUMNS), f"multi-column answer differs for {where}"

    res.sample["full scan"], full = _median(lambda: t.scan(columns=COLUMNS, use_indexes=False), sc.repeats)
    res.sample["sample, plain scan"], scanned = _median(
        lambda: t.sample(0.01, columns=COLUMNS, use_indexes=False), sc.repeats
    )
    res.sample["sample, multicolumn"], sampled = _median(lambda: t.sample(0.01, columns=COLUMNS), sc.repeats)
    assert _same(sampled, scanned, COLUMNS), "the index's sample differs from the plain scan's"
    plan = t.explain(sample=0.01)
    assert plan.chosen.entry is not None
    res.sample_share = plan.chosen.index_bytes / plan.chosen.entry.content.size
    res.sample_rows = sampled.num_rows
    assert full.num_rows == sc.rows
    if workdir is None:
        shutil.rmtree(root, ignore_errors=True)
    return res


def render(res: Results) -> str:
    """Markdown tables of the medians and the goals."""
    sc = res.sc
    lines = [
        f"{sc.rows:,} rows in {sc.files} Delta files ({res.table_bytes:,} bytes); multi-column index "
        f"{res.index_bytes.get('multicolumn', 0):,} bytes, built in {fmt_ms(res.build_s['multicolumn'])} "
        f"(covering index on `a`: {fmt_ms(res.build_s['covering'])}); warm, median of {sc.repeats} "
        f"(load average {res.load:.1f}; the machine was shared with other work).",
        "",
        "| range on (1% of rows) | rows | plain scan | covering on `a` (chosen) | multi-column | "
        "index share (goal ≤ 5%) | speed-up vs plain (goal ≥ 10x) |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for c, m in res.ranges.items():
        up = ratio(m["plain scan"], m["multicolumn"])
        lines.append(
            f"| `{c}` | {res.range_rows[c]:,} | {fmt_ms(m['plain scan'])} | {fmt_ms(m['covering on a'])} "
            f"({res.covering_choice[c]}) | {fmt_ms(m['multicolumn'])} | {res.range_share[c]:.1%} "
            f"{verdict(res.range_share[c], 0.05, higher_is_better=False)} | {fmt_ratio(up)} "
            f"{verdict(up, 10, higher_is_better=True)} |"
        )
    s = res.sample
    up = ratio(s["full scan"], s["sample, multicolumn"])
    lines += [
        "",
        "| sample(0.01) | time | index share (goal ≤ 3%) | speed-up vs full scan (goal ≥ 20x) |",
        "|---|---:|---:|---:|",
        f"| full scan of `id, a, b, ts` | {fmt_ms(s['full scan'])} | | |",
        f"| plain-scan sample (weights computed) | {fmt_ms(s['sample, plain scan'])} | | "
        f"{fmt_ratio(ratio(s['full scan'], s['sample, plain scan']))} |",
        f"| multi-column index ({res.sample_rows:,} rows) | {fmt_ms(s['sample, multicolumn'])} | "
        f"{res.sample_share:.1%} {verdict(res.sample_share, 0.03, higher_is_better=False)} | "
        f"{fmt_ratio(up)} {verdict(up, 20, higher_is_better=True)} |",
    ]
    return "\n".join(lines)


def results(res: Results) -> dict[str, Any]:
    """Machine-readable medians."""
    return {
        "rows": res.sc.rows,
        "table_bytes": res.table_bytes,
        "index_bytes": res.index_bytes,
        "build_seconds": res.build_s,
        "ranges_seconds": res.ranges,
        "range_index_share": res.range_share,
        "sample_seconds": res.sample,
        "sample_index_share": res.sample_share,
        "load_average": res.load,
    }


def main(argv: list[str] | None = None) -> Results:
    """Run at ``--scale`` and write the BENCHMARKS.md section."""
    return bench_main(
        argv,
        description=__doc__.split("\n")[0],
        scales=list(SCALES),
        run=run,
        render=render,
        section=("multicolumn", "Multi-column index: ranges on any column, samples", SCRIPT),
        results=results,
    )


if __name__ == "__main__":
    main()
