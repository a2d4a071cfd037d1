"""The demo: a sample Delta table, a secondary index on ``email``, lookups next to scans.

Run with ``lakehouse-index demo`` (or ``make demo``, which also installs everything).
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pyarrow as pa
from rich.console import Console
from rich.table import Table as RichTable

T = TypeVar("T")


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


@dataclass(frozen=True)
class Measure:
    """One way the demo answered its keys: rows returned and wall time."""

    method: str
    rows: int
    ms: float


@dataclass(frozen=True)
class DemoReport:
    """What the demo built and measured (``lakehouse-index demo --json`` prints :meth:`to_json`)."""

    table: str
    rows: int
    files: int
    index_entries: int
    index_files: int
    index_bytes: int
    keys: tuple[str, ...]
    #: Data files (names) holding the keys' rows, found by ``locate``.
    files_touched: tuple[str, ...]
    measures: tuple[Measure, ...]

    def to_json(self) -> dict[str, Any]:
        """As a JSON object."""
        return {
            "table": self.table,
            "rows": self.rows,
            "files": self.files,
            "index": {"entries": self.index_entries, "files": self.index_files, "bytes": self.index_bytes},
            "keys": list(self.keys),
            "files_touched": list(self.files_touched),
            "measures": [{"method": m.method, "rows": m.rows, "ms": round(m.ms, 3)} for m in self.measures],
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

    ``spark``: also time the plain scan on Spark. ``console``: where the report goes (a
    quiet console prints nothing). Raises ``SystemExit`` when the index answer differs from
    the plain scan.
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
        console.print(f"  format={t.format}, latest version={t.latest_version()}")
        with console.status("building index by_email (email → id)"):
            info, ms = _timed(
                lambda: t.create_index(li.SecondaryIndex("by_email", key="email", record_key="id"))
            )
        console.print(
            f"[green]✓[/] index {info.name}: {info.rows:,} entries in {info.files} file(s), "
            f"{info.size_bytes / 1e6:.1f} MB, table version {info.indexed_version} ({ms / 1000:.1f} s)"
        )

        keys = [f"user{i:07d}@example.com" for i in (11, rows // 2, rows - 3)] + ["nobody@example.com"]
        t.lookup("by_email", keys[:1])  # warm footers, as a long-running service would be
        rows_found, lookup_ms = _timed(lambda: t.lookup("by_email", keys))
        located, locate_ms = _timed(lambda: t.locate("by_email", keys))
        where = "email IN (" + ", ".join(f"'{k}'" for k in keys) + ")"
        scanned, scan_ms = _timed(lambda: t.scan(where=where))
        measures = [
            Measure("index lookup (full rows, pyarrow)", rows_found.num_rows, lookup_ms),
            Measure("index locate (file, row)", located.num_rows, locate_ms),
            Measure("plain scan (pyarrow)", scanned.num_rows, scan_ms),
        ]
        if spark:
            from lakehouse_index.spark import get_spark

            with console.status("starting Spark"):
                session = get_spark()
            spark_rows, spark_ms = _timed(lambda: t.read(session, where=where).collect())
            measures.append(Measure("plain scan (Spark)", len(spark_rows), spark_ms))

        _print_rows(console, rows_found)
        files_touched = tuple(sorted({p.rsplit("/", 1)[-1] for p in located["_file"].to_pylist()}))
        console.print(
            f"files touched by the lookup: {len(files_touched)} of {files}: {', '.join(files_touched)}"
        )
        report = RichTable(title=f"{len(keys)} keys at version {t.latest_version()}")
        for col in ("method", "rows", "time (ms)"):
            report.add_column(col, justify="right" if col != "method" else "left")
        for m in measures:
            report.add_row(m.method, str(m.rows), f"{m.ms:.1f}")
        console.print(report)
        _check_same(rows_found, scanned)
        console.print("[green]✓[/] index answer equals the plain scan")
        return DemoReport(
            table=str(table_path),
            rows=rows,
            files=files,
            index_entries=info.rows,
            index_files=info.files,
            index_bytes=info.size_bytes,
            keys=tuple(keys),
            files_touched=files_touched,
            measures=tuple(measures),
        )
    finally:
        if not keep and path is None:
            shutil.rmtree(workdir, ignore_errors=True)


def _print_rows(console: Console, rows: pa.Table) -> None:
    out = RichTable(title="rows found")
    for name in rows.column_names:
        out.add_column(name)
    for rec in rows.to_pylist():
        out.add_row(*(str(v) for v in rec.values()))
    console.print(out)


def _check_same(a: pa.Table, b: Any) -> None:
    key = sorted(map(str, a.to_pylist())), sorted(map(str, b.select(a.column_names).to_pylist()))
    if key[0] != key[1]:
        raise SystemExit("demo failed: the index answer differs from the plain scan")
