"""The demo: a sample Delta table, a secondary index on ``email``, lookups next to plain scans.

Run with ``lakehouse-index demo`` (or ``make demo``, which also installs everything). The
baselines read every live file of the version the index answers for, with no index: a
pyarrow scan, a Spark read and DuckDB's ``read_parquet`` of deltalake's file list. Every
answer is then checked against deltalake's own read of that version (an independent reader):
a difference fails the demo.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import pyarrow as pa
from rich.console import Console
from rich.table import Table as RichTable

if TYPE_CHECKING:
    from lakehouse_index.api import Table

T = TypeVar("T")

#: The index key and record key: the columns ``locate`` answers (besides the row address).
KEY, RECORD_KEY = "email", "id"


def sample_batch(rng: np.random.Generator, ids: np.ndarray) -> pa.Table:
    """Rows for the given ids: unique ``email`` (spread randomly over files), country, amount."""
    countries = np.array(["DE", "FR", "US", "JP", "BR", "IN", "NL", "SE"])
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "email": pa.array([f"user{i:07d}@example.com" for i in ids]),
            "country": pa.array(countries[rng.integers(0, len(countries), len(ids))]),
            "amount": pa.array(np.round(rng.uniform(1, 500, len(ids)), 2)),
        }
    )


def write_sample_table(path: str, rows: int, files: int, seed: int = 7) -> None:
    """A Delta table of ``rows`` rows in ``files`` appends; ids are shuffled across files."""
    from deltalake import write_deltalake

    rng = np.random.default_rng(seed)
    ids = rng.permutation(rows)
    for chunk in np.array_split(ids, files):
        write_deltalake(path, sample_batch(rng, chunk), mode="append")


def _timed(fn: Callable[[], T]) -> tuple[T, float]:
    start = time.perf_counter()
    out = fn()
    return out, (time.perf_counter() - start) * 1000


def _timed_warm(fn: Callable[[], T]) -> tuple[T, float]:
    """``fn``'s answer and the time of its second run: the first, untimed, warms caches (and Spark's JVM)."""
    fn()
    return _timed(fn)


@dataclass(frozen=True)
class Measure:
    """One way the demo answered its keys: rows returned, data files read and wall time."""

    method: str
    rows: int
    #: Data files of the table read (an index's own files are not counted).
    files: int
    ms: float


@dataclass(frozen=True)
class Answer:
    """A method's measure and its answer: column names and rows."""

    measure: Measure
    columns: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]
    #: The columns checked against the independent read; None: every column (a full-row answer).
    checked: tuple[str, ...] | None = None


@dataclass(frozen=True)
class DemoReport:
    """What the demo built and measured (``lakehouse-index demo --json`` prints :meth:`to_json`)."""

    table: str
    rows: int
    files: int
    #: The table version every method read.
    version: int
    index_entries: int
    index_files: int
    index_bytes: int
    keys: tuple[str, ...]
    #: Data files (names) holding the keys' rows, found by ``locate``.
    files_touched: tuple[str, ...]
    measures: tuple[Measure, ...]
    #: Methods not run, each with the reason.
    skipped: tuple[tuple[str, str], ...]

    def to_json(self) -> dict[str, Any]:
        """As a JSON object."""
        return {
            "table": self.table,
            "rows": self.rows,
            "files": self.files,
            "version": self.version,
            "index": {"entries": self.index_entries, "files": self.index_files, "bytes": self.index_bytes},
            "keys": list(self.keys),
            "files_touched": list(self.files_touched),
            "measures": [
                {"method": m.method, "rows": m.rows, "files": m.files, "ms": round(m.ms, 3)}
                for m in self.measures
            ],
            "skipped": dict(self.skipped),
        }


def run_demo(
    path: str | None = None,
    rows: int = 300_000,
    files: int = 50,
    keep: bool = False,
    *,
    spark: bool = True,
    console: Console | None = None,
) -> DemoReport:
    """Build the sample table and index, look up keys, compare with plain scans; print a report.

    ``spark``: also time a plain Spark read. ``console``: where the report goes (a quiet
    console prints nothing). Raises ``SystemExit`` naming the rows that differ when an
    answer (the index's or a plain scan's) differs from deltalake's read of the version.
    """
    import lakehouse_index as li

    console = console or Console()
    workdir = Path(path) if path else Path(tempfile.mkdtemp(prefix="lakehouse-index-demo-"))
    table_path = workdir / "customers"
    if table_path.exists():
        shutil.rmtree(table_path)
    try:
        with console.status(f"writing {rows:,} rows in {files} Delta commits to {table_path} (deltalake)"):
            _, ms = _timed(lambda: write_sample_table(str(table_path), rows, files))
        console.print(f"[green]✓[/] sample Delta table: {rows:,} rows, {files} files ({ms / 1000:.1f} s)")

        t = li.open_table(str(table_path))
        version = t.latest_version()
        console.print(f"  format={t.format}, latest version={version}")
        with console.status("building index by_email (email → id)"):
            info, ms = _timed(
                lambda: t.create_index(li.SecondaryIndex("by_email", key=KEY, record_key=RECORD_KEY))
            )
        console.print(
            f"[green]✓[/] index {info.name}: {info.rows:,} entries in {info.files} file(s), "
            f"{info.size_bytes / 1e6:.1f} MB, table version {info.indexed_version} ({ms / 1000:.1f} s)"
        )

        keys = [f"user{i:07d}@example.com" for i in (11, rows // 2, rows - 3)] + ["nobody@example.com"]
        where = f"{KEY} IN (" + ", ".join(f"'{k}'" for k in keys) + ")"
        live = len(t.snapshot(version).files)
        t.lookup("by_email", keys[:1], version_as_of=version)  # warm footers, as a long-running service
        found, lookup_ms = _timed(lambda: t.lookup("by_email", keys, version_as_of=version))
        located, locate_ms = _timed(lambda: t.locate("by_email", keys, version_as_of=version))
        files_touched = tuple(sorted({p.rsplit("/", 1)[-1] for p in located["_file"].to_pylist()}))
        scanned, scan_ms = _timed_warm(lambda: t.scan(version_as_of=version, where=where, use_indexes=False))
        answers = [
            _answer(
                Measure("index lookup (full rows, pyarrow)", found.num_rows, len(files_touched), lookup_ms),
                found,
            ),
            _answer(
                Measure("index locate (file, row)", located.num_rows, 0, locate_ms),
                located,
                (KEY, RECORD_KEY),
            ),
            _answer(Measure("plain scan (pyarrow)", scanned.num_rows, live, scan_ms), scanned),
        ]
        skipped: list[tuple[str, str]] = []
        if spark:
            answers.append(_spark_scan(t, version, where, live, console))
        else:
            skipped.append(("plain scan (Spark)", "not asked for (--no-spark)"))

        from deltalake import DeltaTable, QueryBuilder

        oracle_table = DeltaTable(str(table_path), version=version)
        duck = _duckdb_scan(oracle_table.file_uris(), where)
        if isinstance(duck, str):
            skipped.append(("plain scan (DuckDB)", duck))
        else:
            answers.append(duck)

        _print_rows(console, found)
        console.print(
            f"files touched by the lookup: {len(files_touched)} of {live}: {', '.join(files_touched)}"
        )
        _print_measures(console, answers, skipped, version, live, len(keys))
        # deltalake's own engine (DataFusion), not a pyarrow dataset over deltalake's Python
        # filesystem: that scan's last file handles are released on an Arrow thread, which aborts
        # the process at interpreter exit ("terminate called without an active exception").
        engine = QueryBuilder().register("t", oracle_table)
        oracle = engine.execute(f"SELECT * FROM t WHERE {where}").read_all()  # the scans' predicate
        _check_answers(answers, oracle, version)
        console.print(
            f"[green]✓[/] every answer equals deltalake's own read of version {version} "
            f"({oracle.num_rows} rows, every column; locate on {KEY}, {RECORD_KEY})"
        )
        return DemoReport(
            table=str(table_path),
            rows=rows,
            files=files,
            version=version,
            index_entries=info.rows,
            index_files=info.files,
            index_bytes=info.size_bytes,
            keys=tuple(keys),
            files_touched=files_touched,
            measures=tuple(a.measure for a in answers),
            skipped=tuple(skipped),
        )
    finally:
        if not keep and path is None:
            shutil.rmtree(workdir, ignore_errors=True)


def _answer(measure: Measure, table: pa.Table, checked: tuple[str, ...] | None = None) -> Answer:
    return Answer(measure, tuple(table.column_names), _rows(table), checked)


def _rows(table: pa.Table) -> tuple[tuple[Any, ...], ...]:
    return tuple(zip(*(c.to_pylist() for c in table.columns), strict=True))


def _spark_scan(t: Table, version: int, where: str, live: int, console: Console) -> Answer:
    """A plain Spark read (every live file, no index) of ``version``, timed on its second run."""
    from lakehouse_index.spark import get_spark

    with console.status("starting Spark"):
        session = get_spark()
    frame = t.read(session, version_as_of=version, where=where, use_indexes=False)
    with console.status("Spark: one untimed run (the JVM's first job), then the timed one"):
        rows, ms = _timed_warm(frame.collect)
    measure = Measure("plain scan (Spark)", len(rows), live, ms)
    return Answer(measure, tuple(frame.columns), tuple(tuple(r) for r in rows))


def _duckdb_scan(files: Sequence[str], where: str) -> Answer | str:
    """DuckDB's scan of the Parquet ``files`` (timed on its second run), or why it was skipped.

    The files are deltalake's list of the version's live files. The demo's table has only
    appends, so no deletion vector applies to them and the files hold the version's rows.
    """
    try:
        import duckdb
    except ImportError:
        return "duckdb is not installed (a dev dependency: pip install duckdb)"
    con = duckdb.connect()

    def scan() -> tuple[tuple[str, ...], list[tuple[Any, ...]]]:
        query = con.execute(f"SELECT * FROM read_parquet(?) WHERE {where}", [list(files)])
        return tuple(d[0] for d in query.description), query.fetchall()

    try:
        (columns, rows), ms = _timed_warm(scan)
    finally:
        con.close()
    return Answer(Measure("plain scan (DuckDB)", len(rows), len(files), ms), columns, tuple(rows))


def _print_rows(console: Console, rows: pa.Table) -> None:
    out = RichTable(title="rows found")
    for name in rows.column_names:
        out.add_column(name)
    for rec in rows.to_pylist():
        out.add_row(*(str(v) for v in rec.values()))
    console.print(out)


def _print_measures(
    console: Console,
    answers: Sequence[Answer],
    skipped: Sequence[tuple[str, str]],
    version: int,
    live: int,
    keys: int,
) -> None:
    report = RichTable(title=f"{keys} keys at table version {version} ({live} live data files)")
    for col in ("method", "rows", "data files read", "time (ms)"):
        report.add_column(col, justify="left" if col == "method" else "right")
    for a in answers:
        m = a.measure
        report.add_row(m.method, str(m.rows), str(m.files), f"{m.ms:.1f}")
    console.print(report)
    console.print(
        "plain scans: every live file, no index, each timed on its second run (the first, untimed, "
        "warms caches and, for Spark, the JVM); the index lookup: after a lookup of another key"
    )
    for method, why in skipped:
        console.print(f"[yellow]skipped[/] {method}: {why}")


def _check_answers(answers: Sequence[Answer], oracle: pa.Table, version: int) -> None:
    """Raise ``SystemExit`` naming what each answer misses or adds, compared with ``oracle``.

    Rows are compared as multisets of tuples of the checked columns (every column of
    ``oracle`` for a full-row answer, which must have exactly those columns).
    """
    names = tuple(oracle.column_names)
    expected = _rows(oracle)
    problems = []
    for a in answers:
        checked = a.checked or names
        if a.checked is None and sorted(a.columns) != sorted(names):
            problems.append(f"{a.measure.method}: columns {list(a.columns)}, deltalake's {list(names)}")
            continue
        want = Counter(_project(expected, names, checked))
        got = Counter(_project(a.rows, a.columns, checked))
        missing, extra = sorted(want - got, key=str), sorted(got - want, key=str)
        if missing or extra:
            problems.append(
                f"{a.measure.method} on ({', '.join(checked)}): "
                f"{len(missing)} row(s) missing {missing}, {len(extra)} extra {extra}"
            )
    if problems:
        raise SystemExit(
            f"demo failed: answers differ from deltalake's own read of version {version} "
            f"({oracle.num_rows} rows):\n  " + "\n  ".join(problems)
        )


def _project(
    rows: Sequence[tuple[Any, ...]], columns: Sequence[str], keep: Sequence[str]
) -> list[tuple[Any, ...]]:
    at = [list(columns).index(c) for c in keep]
    return [tuple(r[i] for i in at) for r in rows]
