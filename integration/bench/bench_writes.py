"""Write overhead: ``t.append`` with an incremental index next to the bare format-library write.

For Delta (deltalake) and Iceberg (pyiceberg, SQLite catalog), and for appends of 1, 10 and
100 data files (one commit each; the table is partitioned by ``part`` and the batch holds
one partition per file), three tables start from the same history and take turns:

* **bare** — the format library alone: ``write_deltalake(path, data, mode="append")``, or
  ``catalog.load_table(...)`` + ``Table.append(data)`` (a writer must load the table to commit);
* **native + refresh** — the same write on a table with a secondary index, then a separate
  ``t.refresh_index(name, "incremental")``;
* **API** — ``t.append(data)`` on a table with the same index (``auto_refresh="incremental"``):
  input checks, the commit, then the index brought to the new version.

Each method makes ``repeats`` appends per size, in rotating order; medians are reported. The
API's time is split into the commit part and index maintenance (its report's ``seconds``).
After the runs, lookups of appended keys on both indexed tables must equal the format
library's own reader (deltalake / pyiceberg), and the API's index must be at the new version.

Run: ``python -m integration.bench.bench_writes --scale small|full``.
"""

from __future__ import annotations

import os
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
import pyarrow.compute as pc

from integration.bench.common import bench_main, fmt_ms, fmt_ratio, load_average, ratio, verdict
from integration.bench.datagen import email_of, rows_for

SCRIPT = "integration/bench/bench_writes.py"
INDEX = "by_email"
GOAL = 1.2
FORMATS = ("delta", "iceberg")
METHODS = ("bare", "native", "api")


@dataclass(frozen=True)
class WriteScale:
    """Sizes of one run: rows per appended file, the appends measured, repeats, history commits."""

    rows_per_file: int
    files: tuple[int, ...]
    repeats: int
    history: int


SCALES = {
    "tiny": WriteScale(rows_per_file=100, files=(1, 4), repeats=1, history=2),
    "small": WriteScale(rows_per_file=5_000, files=(1, 10, 100), repeats=5, history=10),
    "full": WriteScale(rows_per_file=10_000, files=(1, 10, 100), repeats=7, history=20),
}


@dataclass
class Sample:
    """One size of one format: per method the seconds of each repeat."""

    fmt: str
    files: int
    rows: int
    bare: list[float] = field(default_factory=list)
    native_write: list[float] = field(default_factory=list)
    native_refresh: list[float] = field(default_factory=list)
    api: list[float] = field(default_factory=list)
    api_index: list[float] = field(default_factory=list)
    #: CPU seconds of this process (every thread: deltalake's, pyarrow's) per repeat.
    bare_cpu: list[float] = field(default_factory=list)
    native_cpu: list[float] = field(default_factory=list)
    api_cpu: list[float] = field(default_factory=list)
    files_written: int = 0
    #: Where one more (profiled) API append spent its time: part → seconds under cProfile.
    profile: dict[str, float] = field(default_factory=dict)

    def median(self, name: str) -> float:
        """The median of one series (``native`` is write + refresh, per repeat)."""
        if name == "native":
            return statistics.median(
                w + r for w, r in zip(self.native_write, self.native_refresh, strict=True)
            )
        return statistics.median(getattr(self, name))


@dataclass
class WriteResults:
    """Everything one run measured."""

    scale: str
    sc: WriteScale
    samples: list[Sample] = field(default_factory=list)
    load: list[float] = field(default_factory=list)
    checked_keys: int = 0


def batch(first_id: int, n_files: int, rows_per_file: int) -> pa.Table:
    """``n_files * rows_per_file`` rows with ids from ``first_id``, spread over ``n_files`` partitions."""
    n = n_files * rows_per_file
    data = rows_for(np.arange(first_id, first_id + n, dtype=np.int64))
    return data.append_column("part", pa.array((np.arange(n) % n_files).astype(np.int32)))


def _spec() -> Any:
    import lakehouse_index as li

    return li.SecondaryIndex(INDEX, key="email", auto_refresh="incremental")


class Tables:
    """The three tables of one format and size; ``write`` commits natively, ``open`` gives the API."""

    fmt: str

    def write(self, which: str, data: pa.Table) -> None:
        """Append ``data`` to table ``which`` with the format library alone."""
        raise NotImplementedError

    def open(self, which: str) -> Any:
        """``lakehouse_index.open_table`` of table ``which``."""
        raise NotImplementedError

    def read(self, which: str) -> pa.Table:
        """Every row of table ``which`` at its latest version, read by the format library."""
        raise NotImplementedError


class DeltaTables(Tables):
    """Three Delta tables under ``root``, partitioned by ``part``."""

    fmt = "delta"

    def __init__(self, root: Path, history: list[pa.Table]) -> None:
        from deltalake import write_deltalake

        self.root = root
        for which in METHODS:
            path = self._path(which)
            write_deltalake(path, history[0], partition_by=["part"])
            for data in history[1:]:
                write_deltalake(path, data, mode="append")

    def _path(self, which: str) -> str:
        return str(self.root / which)

    def write(self, which: str, data: pa.Table) -> None:
        from deltalake import write_deltalake

        write_deltalake(self._path(which), data, mode="append")

    def open(self, which: str) -> Any:
        import lakehouse_index as li

        return li.open_table(self._path(which))

    def read(self, which: str) -> pa.Table:
        from deltalake import DeltaTable

        return DeltaTable(self._path(which)).to_pyarrow_table()


class IcebergTables(Tables):
    """Three Iceberg tables in one SQLite catalog, partitioned by identity(``part``)."""

    fmt = "iceberg"

    def __init__(self, root: Path, history: list[pa.Table]) -> None:
        from pyiceberg.catalog.sql import SqlCatalog

        warehouse = root / "warehouse"
        warehouse.mkdir(parents=True)
        self.catalog = SqlCatalog(
            "bench", uri=f"sqlite:///{root}/catalog.db", warehouse=f"file://{warehouse}"
        )
        self.catalog.create_namespace("db")
        for which in METHODS:
            tbl = self.catalog.create_table(f"db.{which}", schema=history[0].schema)
            with tbl.update_spec() as spec:
                spec.add_identity("part")
            for data in history:
                tbl.append(data)

    def write(self, which: str, data: pa.Table) -> None:
        self.catalog.load_table(f"db.{which}").append(data)

    def open(self, which: str) -> Any:
        import lakehouse_index as li

        return li.open_table(f"db.{which}", catalog=self.catalog)

    def read(self, which: str) -> pa.Table:
        return self.catalog.load_table(f"db.{which}").scan().to_arrow()


def _tables(fmt: str, root: Path, history: list[pa.Table]) -> Tables:
    return DeltaTables(root, history) if fmt == "delta" else IcebergTables(root, history)


def measure(fmt: str, n_files: int, sc: WriteScale, work: Path, first_id: int) -> tuple[Sample, list[int]]:
    """Time the three methods on fresh tables; returns the sample and the ids appended through indexes."""
    history = [batch(i * 1_000_000, 4, 500) for i in range(sc.history)]
    tables = _tables(fmt, work / f"{fmt}-{n_files}", history)
    indexed = {which: tables.open(which) for which in ("native", "api")}
    for t in indexed.values():
        t.create_index(_spec())
    sample = Sample(fmt, n_files, n_files * sc.rows_per_file)
    appended: list[int] = []
    next_id = first_id

    def data() -> pa.Table:
        nonlocal next_id
        out = batch(next_id, n_files, sc.rows_per_file)
        next_id += out.num_rows
        return out

    def run_bare() -> None:
        d = data()
        c0, t0 = time.process_time(), time.perf_counter()
        tables.write("bare", d)
        sample.bare.append(time.perf_counter() - t0)
        sample.bare_cpu.append(time.process_time() - c0)

    def run_native() -> None:
        d = data()
        c0, t0 = time.process_time(), time.perf_counter()
        tables.write("native", d)
        t1 = time.perf_counter()
        indexed["native"].refresh_index(INDEX, "incremental")
        sample.native_refresh.append(time.perf_counter() - t1)
        sample.native_write.append(t1 - t0)
        sample.native_cpu.append(time.process_time() - c0)
        appended.extend(d["id"].to_pylist()[:: max(1, d.num_rows // 5)])

    def run_api() -> None:
        d = data()
        t = indexed["api"]
        before = len(t.snapshot().files)
        c0, t0 = time.process_time(), time.perf_counter()
        result = t.append(d)
        sample.api.append(time.perf_counter() - t0)
        sample.api_cpu.append(time.process_time() - c0)
        (report,) = result.indexes
        wrote = report.action.value in ("incremental", "write_job")
        if not wrote or report.indexed_version != result.table_version:
            raise AssertionError(f"the API append left {INDEX} at {report} (commit {result.table_version})")
        sample.api_index.append(report.seconds)
        sample.files_written = len(t.snapshot(result.table_version).files) - before
        appended.extend(d["id"].to_pylist()[:: max(1, d.num_rows // 5)])

    runs = [run_bare, run_native, run_api]
    for rep in range(sc.repeats):
        for i in range(len(runs)):
            runs[(rep + i) % len(runs)]()
    profiled = data()
    sample.profile = profile_append(indexed["api"], profiled)
    appended.extend(profiled["id"].to_pylist()[:: max(1, profiled.num_rows // 5)])
    if sample.files_written != n_files:
        raise AssertionError(f"{fmt}: an append of {n_files} partitions wrote {sample.files_written} files")
    for which, t in indexed.items():
        _check(tables, which, t, appended)
    return sample, appended


#: Parts of an API append, each the cumulative time of (module path suffix, function) under cProfile
#: (main thread: the task's own threads count in ``task``, which waits for them).
PARTS: dict[str, tuple[tuple[str, str], ...]] = {
    "checks": (("workflows/writes.py", "begin"), ("workflows/data.py", "conform")),
    "commit": (
        ("deltalake/writer/writer.py", "write_deltalake"),
        ("pyiceberg/table/__init__.py", "append"),
        ("lakehouse_index_delta/write/new_files.py", "commit_files"),
        ("lakehouse_index_iceberg/write/new_files.py", "append_data_files"),
    ),
    "task": (("workflows/append_task.py", "write"),),
    "hold + log entries": (
        ("workflows/direct_append.py", "_hold"),
        ("workflows/direct_append.py", "_finish"),
    ),
    "index": (("workflows/sync.py", "sync_indexes"),),
    "read keys": (("executors/local.py", "entries"),),
    "sort + write": (("executors/local.py", "write"),),
    "log": (("log/store.py", "write"),),
}


def profile_append(t: Any, data: pa.Table) -> dict[str, float]:
    """One ``t.append(data)`` under cProfile: seconds per part of :data:`PARTS`, and ``total``.

    Functions that call each other under the same name (pyiceberg's ``Table.append`` calls
    ``Transaction.append``) count once: the largest cumulative time per part and function.
    """
    import cProfile
    import pstats

    prof = cProfile.Profile()
    prof.enable()
    t0 = time.perf_counter()
    t.append(data)
    total = time.perf_counter() - t0
    prof.disable()
    stats = pstats.Stats(prof).stats  # type: ignore[attr-defined]
    out = {"total": total}
    for part, functions in PARTS.items():
        seconds = 0.0
        for suffix, name in functions:
            cumulative = [v[3] for (path, _, fn), v in stats.items() if fn == name and path.endswith(suffix)]
            seconds += max(cumulative, default=0.0)
        out[part] = seconds
    return out


def _check(tables: Tables, which: str, t: Any, ids: list[int]) -> None:
    """Lookups of appended keys equal the format library's reader (ids of that table only)."""
    native = tables.read(which)
    emails = [email_of(i) for i in ids]
    want = native.filter(pc.is_in(native["email"], pa.array(emails)))
    got = t.lookup(INDEX, emails)
    if sorted(got["id"].to_pylist()) != sorted(want["id"].to_pylist()):
        raise AssertionError(f"{tables.fmt} {which}: lookups differ from the format library's reader")


def run(scale: str, *, workdir: Path | None = None, log: Callable[[str], None] = print) -> WriteResults:
    """Measure every format and size at ``scale``."""
    sc = SCALES[scale]
    res = WriteResults(scale, sc)
    base = workdir or Path(tempfile.mkdtemp(prefix="bench-writes-"))
    try:
        first_id = 1_000_000_000
        for fmt in FORMATS:
            for n in sc.files:
                res.load.append(load_average())
                sample, ids = measure(fmt, n, sc, base, first_id)
                first_id += 10_000_000
                res.samples.append(sample)
                res.checked_keys += len(ids)
                log(
                    f"{fmt} {n} files: bare {fmt_ms(sample.median('bare'))}, native+refresh "
                    f"{fmt_ms(sample.median('native'))}, API {fmt_ms(sample.median('api'))}"
                )
        res.load.append(load_average())
    finally:
        if workdir is None:
            shutil.rmtree(base, ignore_errors=True)
    return res


def render(res: WriteResults) -> str:
    """The BENCHMARKS.md section."""
    sc = res.sc
    rows = []
    for s in res.samples:
        bare, api, native = s.median("bare"), s.median("api"), s.median("native")
        index = statistics.median(s.api_index)
        rows.append(
            [
                s.fmt,
                f"{s.files} ({s.rows:,} rows)",
                fmt_ms(bare),
                " + ".join(fmt_ms(statistics.median(x)) for x in (s.native_write, s.native_refresh)),
                fmt_ms(native),
                fmt_ratio(ratio(native, bare)),
                f"{fmt_ms(api)} ({fmt_ms(index)} index)",
                fmt_ratio(ratio(api, bare)),
                verdict(ratio(api, bare), GOAL, higher_is_better=False),
                " / ".join(fmt_ms(statistics.median(x)) for x in (s.bare_cpu, s.native_cpu, s.api_cpu)),
                fmt_ratio(ratio(statistics.median(s.api_cpu), statistics.median(s.bare_cpu))),
            ]
        )
    from integration.bench.report import markdown_table

    table = markdown_table(
        [
            "format",
            "files appended",
            "bare write",
            "native write + refresh_index",
            "native + refresh",
            "vs bare",
            "t.append (of which index)",
            "vs bare",
            f"goal ≤{GOAL}x",
            "CPU: bare / native + refresh / t.append",
            "t.append CPU vs bare",
        ],
        rows,
    )
    profile_rows = []
    for s in res.samples:
        p = s.profile
        profile_rows.append(
            [
                s.fmt,
                str(s.files),
                fmt_ms(p["total"]),
                fmt_ms(p["checks"]),
                fmt_ms(p["commit"]),
                fmt_ms(p["task"]),
                fmt_ms(p["hold + log entries"]),
                fmt_ms(p["index"]),
                fmt_ms(p["read keys"]),
                fmt_ms(p["sort + write"]),
                fmt_ms(p["log"]),
            ]
        )
    profile_table = markdown_table(
        [
            "format",
            "files",
            "API append (profiled)",
            "checks + open",
            "commit",
            "data files + entries (in-process task)",
            "index: hold + log the task's entries",
            "index: sync / refresh",
            "of which: read keys",
            "sort + write files",
            "log entries",
        ],
        profile_rows,
    )
    loads = ", ".join(f"{x:.2f}" for x in res.load)
    return "\n".join(
        [
            f"Scale `{res.scale}`: appends of {', '.join(map(str, sc.files))} files of "
            f"{sc.rows_per_file:,} rows each "
            f"(datagen columns plus a partition column `part`, one partition per file) to tables with "
            f"{sc.history} earlier commits; a secondary index on `email` (`auto_refresh='incremental'`). "
            f"Medians of {sc.repeats} appends per method, in rotating order, every method on its own "
            "table from the same history. Bare Iceberg writes include `catalog.load_table`.",
            "",
            table,
            "",
            "CPU = this process's CPU seconds over all its threads (deltalake's and pyarrow's included), "
            "which a loaded machine changes less than wall time. 'of which index' is the index "
            "report's seconds: for an append that wrote its own entries (`write_job`) only the sync "
            "after the commit; the entries were computed inside the write.",
            "",
            "Where the API append's time goes (one more append per size under cProfile, which slows "
            "Python-heavy parts most; the in-process task's threads count in its column, the "
            "refresh columns apply to appends through the format library):",
            "",
            profile_table,
            "",
            f"Lookups of {res.checked_keys:,} appended keys on both indexed tables equal deltalake's / "
            f"pyiceberg's reader. Load average (1 min) during the run: {loads} ({os.cpu_count()} cores).",
        ]
    )


def results(res: WriteResults) -> dict[str, Any]:
    """The JSON results: per format and size, every method's samples (seconds) and the profile."""
    return {
        "scale": res.scale,
        "rows_per_file": res.sc.rows_per_file,
        "repeats": res.sc.repeats,
        "goal_ratio": GOAL,
        "samples": [
            {
                "format": s.fmt,
                "files": s.files,
                "rows": s.rows,
                "bare_s": s.bare,
                "native_write_s": s.native_write,
                "native_refresh_s": s.native_refresh,
                "api_s": s.api,
                "api_index_s": s.api_index,
                "bare_cpu_s": s.bare_cpu,
                "native_cpu_s": s.native_cpu,
                "api_cpu_s": s.api_cpu,
                "api_vs_bare": ratio(s.median("api"), s.median("bare")),
                "native_vs_bare": ratio(s.median("native"), s.median("bare")),
                "profile_s": s.profile,
            }
            for s in res.samples
        ],
        "load_average": res.load,
        "checked_keys": res.checked_keys,
    }


def main(argv: list[str] | None = None) -> WriteResults:
    """Run at ``--scale`` and write the BENCHMARKS.md section."""
    return bench_main(
        argv,
        description=__doc__.split("\n")[0],
        scales=list(SCALES),
        run=run,
        render=render,
        section=("writes", "Write overhead: t.append with an incremental index vs the bare write", SCRIPT),
        results=results,
    )


if __name__ == "__main__":
    main()
