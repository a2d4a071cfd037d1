"""W8: warm point-lookup cost against table size, refresh cost against table size, and LSM depth.

Tables from :mod:`integration.bench.datagen` at 50,000 rows per file (keys spread over every
file), each with ``SecondaryIndex("by_email", key="email", record_key="id")`` built in
process. Per size, in one run:

* warm ``locate`` and ``lookup`` (full rows): median over keys drawn from every file, each
  key timed after one untimed call (process caches populated), next to a DuckDB scan of the
  version's files for the same key;
* the index's size on disk;
* an incremental refresh after appending one file of a fixed size (the cost must follow
  the change, not the table);
* the same on a table of many small files (``--scale full``: 2M rows in 2,000 files), where
  per-file planning work would show.

On the smallest size, the lookup latency against the number of LSM delta files (one per
appended file and incremental refresh), then after ``optimize quick`` and ``optimize full``.
Every answer is checked against the generator (``email_of(i)`` names row ``i``).

Goal (issue 18): warm locate and lookup at the largest size within 1.5x of the smallest.
Sizes: ``--scale full`` 1M and 10M rows; ``--large`` adds 100M (generated once, cached).

Run: ``python -m integration.bench.bench_scaling --scale small|full [--large]``.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from integration.bench import datagen
from integration.bench.common import Timing, fmt_ms, fmt_ratio, load_average, ratio, timed, verdict

INDEX = "by_email"
SCRIPT = "integration/bench/bench_scaling.py"
SECTION = ("scaling", "W8: lookup cost against table size (issue 18)", SCRIPT)
ROWS_PER_FILE = 50_000
GOAL = 1.5  # largest / smallest, warm
#: ``run_all --large`` runs this module with :func:`scale_args` ("large").
HAS_LARGE = True


@dataclass(frozen=True)
class ScalingScale:
    """Table sizes (rows; files follow at ``rows_per_file``) and repetitions."""

    sizes: tuple[int, ...]
    rows_per_file: int
    keys: int
    scan_reps: int
    change_rows: int
    lsm_depths: tuple[int, ...]
    #: (rows, files) of tables with many small files: planning cost against the file count.
    many_files: tuple[tuple[int, int], ...] = ()


SCALES: dict[str, ScalingScale] = {
    "tiny": ScalingScale((20_000, 80_000), 5_000, 5, 1, 500, (0, 2), ((4_000, 8),)),
    "small": ScalingScale((200_000, 1_000_000), ROWS_PER_FILE, 15, 2, 5_000, (0, 2, 4), ((200_000, 200),)),
    "full": ScalingScale(
        (1_000_000, 10_000_000), ROWS_PER_FILE, 41, 3, 50_000, (0, 2, 4, 8), ((2_000_000, 2_000),)
    ),
}
LARGE = 100_000_000


@dataclass
class SizeResult:
    """Everything measured at one table size."""

    rows: int
    files: int
    locate: Timing = field(default_factory=Timing)
    lookup: Timing = field(default_factory=Timing)
    duckdb: Timing = field(default_factory=Timing)
    index_bytes: int = 0
    build_s: float = float("nan")
    refresh_s: float = float("nan")

    def to_json(self) -> dict[str, Any]:
        """JSON-ready figures."""
        return {
            "rows": self.rows,
            "files": self.files,
            "locate": self.locate.to_json(),
            "lookup": self.lookup.to_json(),
            "duckdb_scan": self.duckdb.to_json(),
            "index_bytes": self.index_bytes,
            "build_s": self.build_s,
            "refresh_s": self.refresh_s,
        }


@dataclass
class ScalingResults:
    """One run (returned by :func:`run` for tests and reports)."""

    scale: str
    sizes: list[SizeResult] = field(default_factory=list)
    #: The same measurements on tables of many small files.
    many_files: list[SizeResult] = field(default_factory=list)
    #: (label, delta files in the index, warm lookup timing) on the smallest size.
    lsm: list[tuple[str, int, Timing]] = field(default_factory=list)
    disagreements: list[str] = field(default_factory=list)
    load: list[float] = field(default_factory=list)
    plot: str | None = None


def _probe_ids(params: datagen.TableParams, n: int) -> list[int]:
    """``n`` existing ids, drawn from files spread over the whole table."""
    chunks = params.file_ids()
    picks = np.linspace(0, len(chunks) - 1, n).round().astype(int)
    rng = np.random.default_rng(5)
    return [int(chunks[i][rng.integers(len(chunks[i]))]) for i in picks]


def _check(res: ScalingResults, what: str, got: Sequence[int], want: Sequence[int]) -> None:
    if sorted(got) != sorted(want):
        res.disagreements.append(f"{what}: got ids {sorted(got)[:5]}, expected {sorted(want)[:5]}")


def _warm(
    fn: Callable[[str], Any],
    ids: Sequence[int],
    res: ScalingResults,
    what: str,
    id_of: Callable[[Any], list[int]],
) -> Timing:
    """Each key once untimed, then timed; answers checked."""
    timing = Timing()
    for i in ids:
        key = datagen.email_of(i)
        fn(key)
        dt, out = timed(lambda k=key: fn(k))  # type: ignore[misc]
        timing.samples.append(dt)
        _check(res, f"{what} {key}", id_of(out), [i])
    return timing


def _open(path: Path, rows: int) -> Any:
    import lakehouse_index as li

    cfg = li.Config(executor=li.ExecutorConfig(local_max_rows=max(rows * 2, 1_000_000)))
    return li.open_table(str(path), config=cfg)


def _measure_size(
    rows: int, files: int, sc: ScalingScale, work: Path, res: ScalingResults, *, lsm: bool = False
) -> SizeResult:
    import duckdb

    import lakehouse_index as li

    params = datagen.TableParams(rows, files)
    table = datagen.work_copy(datagen.delta_table(params), work / f"t{rows}-{files}")
    t = _open(table, rows)
    out = SizeResult(rows, params.files)
    out.build_s, info = timed(lambda: t.create_index(li.SecondaryIndex(INDEX, key="email", record_key="id")))
    out.index_bytes = info.size_bytes
    ids = _probe_ids(params, sc.keys)
    out.locate = _warm(
        lambda k: t.locate(INDEX, [k]), ids, res, f"locate {rows}", lambda o: o["id"].to_pylist()
    )
    out.lookup = _warm(
        lambda k: t.lookup(INDEX, [k]), ids, res, f"lookup {rows}", lambda o: o["id"].to_pylist()
    )
    paths = sorted(t.snapshot().files)
    con = duckdb.connect()
    sql = "SELECT id FROM read_parquet($files) WHERE email = $key"
    for i in ids[: sc.scan_reps]:
        dt, got = timed(lambda i=i: con.execute(sql, {"files": paths, "key": datagen.email_of(i)}).fetchall())  # type: ignore[misc]
        out.duckdb.samples.append(dt)
        _check(res, f"duckdb {rows}", [r[0] for r in got], [i])
    # Refresh cost at a fixed change size: one appended file of change_rows rows.
    new = datagen.append_files(table, rows, 1, sc.change_rows)
    out.refresh_s, _ = timed(lambda: t.refresh_index(INDEX, "incremental"))
    probe = int(new[len(new) // 2])
    _check(
        res, f"after refresh {rows}", t.lookup(INDEX, [datagen.email_of(probe)])["id"].to_pylist(), [probe]
    )
    res.load.append(load_average())
    if lsm:
        _measure_lsm(t, table, rows + sc.change_rows, sc, ids, res)
    shutil.rmtree(table, ignore_errors=True)
    return out


def _measure_lsm(
    t: Any, table: Path, first_id: int, sc: ScalingScale, ids: list[int], res: ScalingResults
) -> None:
    """Warm lookups with 0..n delta files (append + incremental refresh each), then optimized."""
    from lakehouse_index.log.entry import Level

    def deltas() -> int:
        stable = t.context.log(INDEX).latest_stable()
        return sum(1 for f in stable.content.files if f.level is Level.DELTA)

    def measure(label: str) -> None:
        timing = _warm(
            lambda k: t.lookup(INDEX, [k]), ids, res, f"lsm {label}", lambda o: o["id"].to_pylist()
        )
        res.lsm.append((label, deltas(), timing))

    t.optimize_index(INDEX, "full")  # start from a base without delta files
    done = deltas()
    nxt = first_id
    for depth in sc.lsm_depths:
        while done < depth:
            datagen.append_files(table, nxt, 1, max(1, sc.change_rows // 10))
            nxt += max(1, sc.change_rows // 10)
            t.refresh_index(INDEX, "incremental")
            done = deltas()
        measure(f"{done} delta files")
    t.optimize_index(INDEX, "quick")
    measure("after optimize quick")
    t.optimize_index(INDEX, "full")
    measure("after optimize full")


def run(scale: str, large: bool = False, plot_dir: Path | None = None) -> ScalingResults:
    """Measure every size of ``scale`` (plus 100M rows with ``large``)."""
    sc = SCALES[scale]
    sizes = (*sc.sizes, LARGE) if large else sc.sizes
    res = ScalingResults(scale)
    work = Path(tempfile.mkdtemp(prefix="bench-scaling-"))
    try:
        for rows in sizes:
            print(f"scaling: {rows:,} rows", flush=True)
            files = rows // sc.rows_per_file
            res.sizes.append(_measure_size(rows, files, sc, work, res, lsm=rows == sizes[0]))
        for rows, files in sc.many_files:
            print(f"scaling: {rows:,} rows in {files:,} files", flush=True)
            res.many_files.append(_measure_size(rows, files, sc, work, res))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if plot_dir is not None:
        res.plot = _plot(res, plot_dir)
    return res


def _plot(res: ScalingResults, out_dir: Path) -> str:
    """Log-log plot of warm locate / lookup / DuckDB scan against rows; returns the file name."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [s.rows for s in res.sizes]
    fig, ax = plt.subplots(figsize=(6, 4))
    for label, pick in (
        ("lookup (full row)", lambda s: s.lookup.ms),
        ("locate", lambda s: s.locate.ms),
        ("DuckDB scan", lambda s: s.duckdb.ms),
    ):
        ax.plot(rows, [pick(s) for s in res.sizes], marker="o", label=label)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("table rows (50k rows per file)")
    ax.set_ylabel("warm latency, median (ms)")
    ax.set_title("W8: point lookup cost against table size")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    name = "scaling.png"
    out_dir.mkdir(parents=True, exist_ok=True)
    fig.savefig(out_dir / name, dpi=100, bbox_inches="tight")
    plt.close(fig)
    return name


def render(res: ScalingResults) -> str:
    """The BENCHMARKS.md section."""
    from integration.bench.report import markdown_table

    rows = [
        [
            f"{s.rows:,} / {s.files:,}",
            fmt_ms(s.locate.median),
            fmt_ms(s.lookup.median),
            fmt_ms(s.duckdb.median),
            fmt_ratio(ratio(s.duckdb.median, s.lookup.median)),
            f"{s.index_bytes / 1e6:,.1f} MB",
            f"{s.build_s:.1f} s",
            fmt_ms(s.refresh_s),
        ]
        for s in [*res.sizes, *res.many_files]
    ]
    head = [
        "rows / files",
        "warm locate",
        "warm lookup",
        "DuckDB scan",
        "scan / lookup",
        "index size",
        "index build",
        "refresh of one appended file",
    ]
    small, big = res.sizes[0], res.sizes[-1]
    loc = ratio(big.locate.median, small.locate.median)
    look = ratio(big.lookup.median, small.lookup.median)
    parts = [
        f"Scale `{res.scale}`; load average during the run: "
        + ", ".join(f"{x:.1f}" for x in res.load)
        + " (2 shared cores).",
        markdown_table(head, rows),
        "The last row(s), if any, hold the same rows in many small files: warm planning must not "
        "grow with the file count (before issue 18 it computed the index's coverage file by file "
        "on every lookup).",
        markdown_table(
            ["largest / smallest", "ratio", f"goal ≤ {GOAL}x"],
            [
                ["warm locate", fmt_ratio(loc), verdict(loc, GOAL, higher_is_better=False)],
                ["warm lookup", fmt_ratio(look), verdict(look, GOAL, higher_is_better=False)],
            ],
        ),
    ]
    if res.plot:
        parts.append(f"![warm latency against table size, log-log](bench/{res.plot})")
    if res.lsm:
        parts.append(
            f"LSM depth on the {small.rows:,}-row table "
            "(one delta file per append + incremental refresh):\n\n"
            + markdown_table(
                ["index state", "delta files", "warm lookup"],
                [[label, n, fmt_ms(t.median)] for label, n, t in res.lsm],
            )
        )
    parts.append(
        "Answers checked against the generator: "
        + ("all agree." if not res.disagreements else "**disagreements**: " + "; ".join(res.disagreements))
    )
    return "\n\n".join(parts)


def results(res: ScalingResults) -> dict[str, Any]:
    """Machine-readable results."""
    return {
        "scale": res.scale,
        "sizes": [s.to_json() for s in res.sizes],
        "many_files": [s.to_json() for s in res.many_files],
        "lsm": [{"state": label, "delta_files": n, "lookup": t.to_json()} for label, n, t in res.lsm],
        "load_average": res.load,
        "disagreements": res.disagreements,
        "plot": res.plot,
    }


def scale_args(scale: str) -> list[str]:
    """How ``run_all`` runs this module at ``scale``: ``large`` is ``full`` plus the 100M-row table."""
    return ["--scale", "full", "--large"] if scale == "large" else ["--scale", scale]


def main(argv: list[str] | None = None) -> ScalingResults:
    """Command line: ``--scale``, ``--large`` (adds 100M rows), ``--no-report``, ``--report-path``."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scale", choices=sorted(SCALES), default="small")
    ap.add_argument("--large", action="store_true", help="add the 100M-row table (generated once)")
    ap.add_argument("--no-report", action="store_true", help="print only; do not write the benchmarks file")
    ap.add_argument("--report-path", default=None, help="write to this file instead of docs/BENCHMARKS.md")
    args = ap.parse_args(argv)
    from integration.bench.report import benchmarks_path, write_results, write_section

    plot_dir = None if args.no_report else benchmarks_path(args.report_path).parent / "bench"
    t0 = time.perf_counter()
    res = run(args.scale, args.large, plot_dir)
    body = render(res) + f"\n\nWall time of the run: {time.perf_counter() - t0:.0f} s."
    print(body)
    if not args.no_report:
        name, title, script = SECTION
        write_section(name, title, script, body, path=args.report_path)
        write_results(name, results(res), path=args.report_path)
    return res


if __name__ == "__main__":
    main()
