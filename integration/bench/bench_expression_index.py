"""Scans through an expression index (``key="lower(email)"``) against a column index, a plain scan and DuckDB.

Data: the W1 table of the point-lookup benchmark (:mod:`integration.bench.datagen`: ids dealt
to the files by a seeded permutation, ``email = user<id>@example.com``, lower case already,
so ``lower(email) = k`` and ``email = k`` select the same row), in two copies (data files
hard-linked), each with one index built in process: ``SecondaryIndex("by_login",
key="lower(email)")`` (the expression index) on one, ``SecondaryIndex("by_email", key="email")``
(the column index) on the other, so each ``where`` meets one index. Each repetition probes a
different existing address, warm (process caches populated by an untimed first call):

* **expression index** — ``t.scan(where="lower(email) = '<k>'")``: the planner rewrites the
  condition onto the index column and reads only the files the index locates;
* **column index** — ``t.scan(where="email = '<k>'")`` through ``by_email``;
* the same two as ``lookup`` (``t.lookup("by_login", [k])`` / ``t.lookup("by_email", [k])``);
* **plain scan** — ``t.scan(where="lower(email) = '<k>'", use_indexes=False)``: every file,
  the expression evaluated in process;
* **DuckDB** — ``read_parquet`` of the version's files with ``WHERE lower(email) = '<k>'``.

Every method's answer is checked against the generator (the id whose email is the key).
The goal (issue: expression indexes): expression lookups as fast as column lookups, at most
1.2x.

Run: ``python -m integration.bench.bench_expression_index --scale small|full``.
"""

from __future__ import annotations

import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from integration.bench import datagen
from integration.bench.common import bench_main, fmt_ms, fmt_ratio, load_average, ratio, verdict

SCRIPT = "integration/bench/bench_expression_index.py"
GOAL = 1.2
METHODS = (
    "scan, expression index",
    "scan, column index",
    "lookup, expression index",
    "lookup, column index",
    "plain scan (no index)",
    "DuckDB scan",
)


@dataclass(frozen=True)
class ExprScale:
    """Table size and repetitions of one scale."""

    rows: int
    files: int
    reps: int
    slow_reps: int


SCALES = {
    "tiny": ExprScale(rows=20_000, files=4, reps=5, slow_reps=2),
    "small": ExprScale(rows=200_000, files=20, reps=21, slow_reps=5),
    "full": ExprScale(rows=5_000_000, files=100, reps=31, slow_reps=5),
}


@dataclass
class ExprResults:
    """Per method, each repetition's seconds; the build times; problems found."""

    scale: str
    sc: ExprScale
    seconds: dict[str, list[float]] = field(default_factory=dict)
    build_s: dict[str, float] = field(default_factory=dict)
    chosen: dict[str, str] = field(default_factory=dict)
    disagreements: list[str] = field(default_factory=list)
    load: float = 0.0


def _duckdb(files: list[str]) -> Callable[[str], pa.Table]:
    """DuckDB's scan of the version's files with the same condition (DuckDB's lower)."""
    import duckdb

    con = duckdb.connect()
    listed = ", ".join(f"'{f}'" for f in files)
    con.sql(f"CREATE VIEW t AS SELECT * FROM read_parquet([{listed}])")
    return lambda key: con.sql(f"SELECT * FROM t WHERE lower(email) = '{key}'").to_arrow_table()


def run(scale: str, *, workdir: Path | None = None, log: Callable[[str], None] = print) -> ExprResults:
    """Build both indexes on a copy of the W1 table, then time every method on the same keys."""
    import lakehouse_index as li

    sc = SCALES[scale]
    res = ExprResults(scale, sc)
    cached = datagen.delta_table(datagen.TableParams(rows=sc.rows, files=sc.files))
    root = Path(workdir or tempfile.mkdtemp(prefix="bench-expression-index-"))
    # One copy of the table per index (data files hard-linked): each where meets one index,
    # as a table indexed on the expression or on the column would.
    tables: dict[str, Any] = {}
    for spec in (
        li.SecondaryIndex("by_login", key="lower(email)"),
        li.SecondaryIndex("by_email", key="email"),
    ):
        t = li.open_table(str(datagen.work_copy(cached, root / spec.name)))
        start = time.perf_counter()
        t.create_index(spec, local_max_rows=10**9)
        res.build_s[spec.name] = time.perf_counter() - start
        tables[spec.name] = t
    by_login, by_email = tables["by_login"], tables["by_email"]
    snap = by_login.snapshot()
    base = root / "by_login"
    files = [p if "://" in p or p.startswith("/") else str(base / p) for p in snap.files]
    duck = _duckdb(files)
    methods: dict[str, Callable[[str], pa.Table]] = {
        METHODS[0]: lambda k: by_login.scan(where=f"lower(email) = '{k}'"),
        METHODS[1]: lambda k: by_email.scan(where=f"email = '{k}'"),
        METHODS[2]: lambda k: by_login.lookup("by_login", [k]),
        METHODS[3]: lambda k: by_email.lookup("by_email", [k]),
        METHODS[4]: lambda k: by_login.scan(where=f"lower(email) = '{k}'", use_indexes=False),
        METHODS[5]: duck,
    }
    probe = datagen.email_of(0)
    res.chosen = {
        "lower(email)": str(by_login.explain(where=f"lower(email) = '{probe}'").chosen.index),
        "email": str(by_email.explain(where=f"email = '{probe}'").chosen.index),
    }
    rng = np.random.default_rng(3)
    ids = rng.choice(sc.rows, sc.reps + 1, replace=False).tolist()
    res.load = load_average()
    for name, fn in methods.items():
        reps = sc.slow_reps if name in METHODS[4:] else sc.reps
        fn(datagen.email_of(ids[-1]))  # warm: footers, dictionaries, the connection
        for i in ids[:reps]:
            start = time.perf_counter()
            got = fn(datagen.email_of(i))
            res.seconds.setdefault(name, []).append(time.perf_counter() - start)
            found = sorted(got.column("id").to_pylist())
            if found != [i]:
                res.disagreements.append(f"{name}: key of id {i} returned ids {found}")
        log(f"{name}: {fmt_ms(statistics.median(res.seconds[name]))}")
    if workdir is None:
        shutil.rmtree(root, ignore_errors=True)
    return res


def _median(res: ExprResults, method: str) -> float:
    return statistics.median(res.seconds[method])


def render(res: ExprResults) -> str:
    """A Markdown table of the medians, the goal's verdict and the answers' check."""
    sc = res.sc
    scan_ratio = ratio(_median(res, METHODS[0]), _median(res, METHODS[1]))
    lookup_ratio = ratio(_median(res, METHODS[2]), _median(res, METHODS[3]))
    lines = [
        f"Scale **{res.scale}**: the W1 table, {sc.rows:,} rows in {sc.files} data files; indexes "
        f'`by_login` (`key="lower(email)"`, built in {res.build_s["by_login"]:.2f} s) and `by_email` '
        f'(`key="email"`, {res.build_s["by_email"]:.2f} s), in process. Warm; median of {sc.reps} keys '
        f"({sc.slow_reps} for the scans of every file), a different existing address each. The planner "
        f"chose `{res.chosen['lower(email)']}` for `lower(email) = ...` and `{res.chosen['email']}` for "
        f"`email = ...`. Load average {res.load:.1f} (the machine is shared: compare methods within "
        "the run).",
        "",
        "| method | median | vs column index |",
        "|---|---:|---:|",
    ]
    for m in METHODS:
        base = METHODS[3] if m.startswith("lookup") else METHODS[1]
        lines.append(
            f"| {m} | {fmt_ms(_median(res, m))} | {fmt_ratio(ratio(_median(res, m), _median(res, base)))} |"
        )
    lines += [
        "",
        "| goal | measured | goal | verdict |",
        "|---|---:|---:|---|",
        f"| scan via expression index / via column index | {fmt_ratio(scan_ratio)} | ≤ {GOAL}x | "
        f"{verdict(scan_ratio, GOAL, higher_is_better=False)} |",
        f"| lookup via expression index / via column index | {fmt_ratio(lookup_ratio)} | ≤ {GOAL}x | "
        f"{verdict(lookup_ratio, GOAL, higher_is_better=False)} |",
        "",
        "Answers: "
        + (
            "every method returned the generator's row for every key."
            if not res.disagreements
            else "; ".join(res.disagreements)
        ),
    ]
    return "\n".join(lines)


def results(res: ExprResults) -> dict[str, Any]:
    """The medians and ratios, machine-readable."""
    return {
        "medians_s": {m: _median(res, m) for m in METHODS},
        "scan_ratio": ratio(_median(res, METHODS[0]), _median(res, METHODS[1])),
        "lookup_ratio": ratio(_median(res, METHODS[2]), _median(res, METHODS[3])),
        "build_s": res.build_s,
        "answers_agree": not res.disagreements,
        "load_average": res.load,
    }


def main(argv: list[str] | None = None) -> ExprResults:
    """Run at ``--scale`` and write the BENCHMARKS.md section."""
    return bench_main(
        argv,
        description=__doc__.split("\n")[0],
        scales=list(SCALES),
        run=run,
        render=render,
        section=("expression-index", "Expression indexes: lower(email) vs a column index (W1 table)", SCRIPT),
        results=results,
    )


if __name__ == "__main__":
    main()
