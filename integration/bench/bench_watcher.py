"""Watcher lag: seconds from a foreign commit to the index covering it, under one commit per second.

For Delta and Iceberg in turn: a table with a secondary index (``auto_refresh="incremental"``)
is watched by ``lakehouse-index watch TABLE --interval S --json`` in a subprocess (Iceberg
through a SQLite catalog named by ``PYICEBERG_CATALOG__*`` variables), while this process
appends one file per ``--every`` seconds for ``--duration`` seconds with the format library
alone (``write_deltalake`` / pyiceberg ``Table.append``): the watcher is the only thing
maintaining the index.

A commit's **lag** is the time from the moment its write call returned to the arrival of
the first JSON line reporting an ``incremental`` refresh whose ``indexed_version`` is that
commit or a later one (both read on this process's monotonic clock; lines are flushed per
action). Reported: median, p99 and maximum lag, the refreshes' own seconds, the watcher's
CPU time, and the load average. Goal: p99 under 2 x interval + the refresh time (median).
At the end, lookups of every appended key equal the format library's reader.

Run: ``python -m integration.bench.bench_watcher --scale small|full`` (small and full: 3 minutes
per format).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from integration.bench.common import bench_main, fmt_ms, load_average, verdict
from integration.bench.datagen import email_of, rows_for
from integration.bench.report import markdown_table

SCRIPT = "integration/bench/bench_watcher.py"
REPO = Path(__file__).resolve().parents[2]
INDEX = "by_email"
FORMATS = ("delta", "iceberg")
CATALOG = "benchwatch"


@dataclass(frozen=True)
class WatchScale:
    """A run: seconds of commits, seconds between commits, the watcher's interval, rows per commit."""

    duration: float
    every: float
    interval: float
    rows: int


SCALES = {
    "tiny": WatchScale(duration=4, every=1.0, interval=1.0, rows=200),
    "small": WatchScale(duration=180, every=1.0, interval=1.0, rows=1_000),
    "full": WatchScale(duration=180, every=1.0, interval=1.0, rows=1_000),
}


@dataclass
class FormatRun:
    """What one format's run measured."""

    fmt: str
    commits: int = 0
    lags: list[float] = field(default_factory=list)
    refresh_seconds: list[float] = field(default_factory=list)
    actions: dict[str, int] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    watcher_cpu: float = 0.0
    wall: float = 0.0
    load: list[float] = field(default_factory=list)

    def quantile(self, q: float) -> float:
        """The ``q`` quantile of the lags (nearest rank)."""
        if not self.lags:
            return float("nan")
        ordered = sorted(self.lags)
        return ordered[min(len(ordered) - 1, max(0, int(np.ceil(q * len(ordered))) - 1))]


@dataclass
class WatchResults:
    """Every format's run."""

    scale: str
    sc: WatchScale
    runs: list[FormatRun] = field(default_factory=list)


def _batch(first_id: int, rows: int) -> pa.Table:
    return rows_for(np.arange(first_id, first_id + rows, dtype=np.int64))


class Writer:
    """The foreign writer of one format: ``commit`` appends and returns the new version."""

    table_arg: list[str]

    def commit(self, data: pa.Table) -> int:
        """Append ``data`` with the format library alone; the committed version."""
        raise NotImplementedError

    def read(self) -> pa.Table:
        """Every row at the latest version, read by the format library."""
        raise NotImplementedError

    def open(self) -> Any:
        """``lakehouse_index.open_table`` of the table."""
        raise NotImplementedError

    def env(self) -> dict[str, str]:
        """Extra environment of the watcher process."""
        return {}


class DeltaWriter(Writer):
    """A Delta table at ``path``, appended to by ``write_deltalake``."""

    def __init__(self, path: Path, first: pa.Table) -> None:
        from deltalake import write_deltalake

        self.path = str(path)
        write_deltalake(self.path, first)
        self.table_arg = [self.path]

    def commit(self, data: pa.Table) -> int:
        from deltalake import DeltaTable, write_deltalake

        dt = DeltaTable(self.path)
        write_deltalake(dt, data, mode="append")
        return int(dt.version())

    def read(self) -> pa.Table:
        from deltalake import DeltaTable

        return DeltaTable(self.path).to_pyarrow_table()

    def open(self) -> Any:
        import lakehouse_index as li

        return li.open_table(self.path)


class IcebergWriter(Writer):
    """An Iceberg table in a SQLite catalog under ``root``, appended to by pyiceberg."""

    def __init__(self, root: Path, first: pa.Table) -> None:
        from pyiceberg.catalog.sql import SqlCatalog

        warehouse = root / "warehouse"
        warehouse.mkdir(parents=True)
        self.props = {"uri": f"sqlite:///{root}/catalog.db", "warehouse": f"file://{warehouse}"}
        self.catalog = SqlCatalog(CATALOG, **self.props)
        self.catalog.create_namespace("db")
        self.catalog.create_table("db.t", schema=first.schema).append(first)
        self.table_arg = ["db.t", "--catalog", CATALOG]

    def commit(self, data: pa.Table) -> int:
        tbl = self.catalog.load_table("db.t")
        tbl.append(data)
        snapshot = tbl.current_snapshot()
        assert snapshot is not None
        return int(snapshot.snapshot_id)

    def read(self) -> pa.Table:
        return self.catalog.load_table("db.t").scan().to_arrow()

    def open(self) -> Any:
        import lakehouse_index as li

        return li.open_table("db.t", catalog=self.catalog)

    def env(self) -> dict[str, str]:
        prefix = f"PYICEBERG_CATALOG__{CATALOG.upper()}__"
        return {prefix + key.upper(): value for key, value in self.props.items()}


def _writer(fmt: str, root: Path, first: pa.Table) -> Writer:
    return DeltaWriter(root / "t", first) if fmt == "delta" else IcebergWriter(root, first)


class Lines:
    """The watcher's JSON lines, each with its arrival time on this process's monotonic clock."""

    def __init__(self, stream: Any) -> None:
        self.items: list[tuple[float, dict[str, Any]]] = []
        self.first = threading.Event()
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def _read(self, stream: Any) -> None:
        for line in stream:
            if line.strip():
                self.items.append((time.monotonic(), json.loads(line)))
                self.first.set()
        self.first.set()

    def join(self) -> None:
        """Wait for the stream to end (the watcher exited)."""
        self._thread.join()


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a live process (Linux /proc; 0 elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_format(fmt: str, sc: WatchScale, work: Path, log: Callable[[str], None]) -> FormatRun:
    """One format: set up, watch in a subprocess, commit every ``sc.every`` s, measure, check."""
    import lakehouse_index as li

    out = FormatRun(fmt)
    writer = _writer(fmt, work / fmt, _batch(0, sc.rows))
    writer.open().create_index(li.SecondaryIndex(INDEX, key="email", auto_refresh="incremental"))
    env = {
        **os.environ,
        **writer.env(),
        "PYTHONPATH": os.pathsep.join([str(REPO), str(REPO / "connectors")]),
    }
    args = [sys.executable, "-m", "lakehouse_index.cli", "watch", *writer.table_arg]
    args += ["--interval", str(sc.interval), "--json"]
    proc = subprocess.Popen(
        args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=REPO
    )
    assert proc.stdout is not None
    lines = Lines(proc.stdout)
    committed: list[tuple[int, float]] = []  # (version, when the write returned)
    appended: list[int] = []
    try:
        if not lines.first.wait(120) or proc.poll() is not None:
            raise RuntimeError(f"the watcher did not start: {proc.stderr.read() if proc.stderr else ''}")
        cpu0 = _cpu_seconds(proc.pid)
        out.load.append(load_average())
        start = time.monotonic()
        n = int(sc.duration / sc.every)
        for i in range(n):
            pause = start + i * sc.every - time.monotonic()
            if pause > 0:
                time.sleep(pause)
            data = _batch((i + 1) * 10_000_000, sc.rows)
            version = writer.commit(data)
            committed.append((version, time.monotonic()))
            appended.extend(data["id"].to_pylist()[:: max(1, sc.rows // 10)])
            if i and i % 60 == 0:
                out.load.append(load_average())
                log(f"{fmt}: {i} commits")
        last = committed[-1][0]
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not _covered(lines, last):
            time.sleep(0.05)
        out.wall = time.monotonic() - start
        out.watcher_cpu = _cpu_seconds(proc.pid) - cpu0
        out.load.append(load_average())
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        lines.join()
    if proc.returncode != 0:
        raise RuntimeError(
            f"the watcher exited with {proc.returncode}: {proc.stderr.read() if proc.stderr else ''}"
        )
    _measure(out, committed, lines.items)
    _check(writer, appended)
    return out


def _covered(lines: Lines, version: int) -> bool:
    return any(
        item.get("action") == "incremental" and item.get("indexed_version") == version
        for _, item in lines.items
    )


def _measure(
    out: FormatRun, committed: list[tuple[int, float]], items: list[tuple[float, dict[str, Any]]]
) -> None:
    """Lag of each commit: first incremental line whose indexed version is it or a later commit."""
    order = {version: i for i, (version, _) in enumerate(committed)}
    covered_at: list[tuple[float, int]] = []  # (arrival, highest commit index covered)
    for when, item in items:
        action = str(item.get("action"))
        out.actions[action] = out.actions.get(action, 0) + 1
        if item.get("error"):
            out.errors.append(str(item["error"]))
        if action == "incremental":
            out.refresh_seconds.append(float(item["seconds"]))
            if item.get("indexed_version") in order:
                covered_at.append((when, order[item["indexed_version"]]))
    out.commits = len(committed)
    for i, (_, at) in enumerate(committed):
        arrivals = [when for when, upto in covered_at if upto >= i and when >= at]
        if not arrivals:
            raise AssertionError(f"{out.fmt}: commit {i} was never reported covered by the watcher")
        out.lags.append(min(arrivals) - at)


def _check(writer: Writer, ids: list[int]) -> None:
    """Lookups of appended keys equal the format library's reader at the latest version."""
    native = writer.read()
    emails = [email_of(i) for i in ids]
    want = native.filter(pc.is_in(native["email"], pa.array(emails)))
    got = writer.open().lookup(INDEX, emails)
    if sorted(got["id"].to_pylist()) != sorted(want["id"].to_pylist()) or len(want) != len(ids):
        raise AssertionError("lookups after the watched commits differ from the format library's reader")


def run(scale: str, *, workdir: Path | None = None, log: Callable[[str], None] = print) -> WatchResults:
    """Both formats at ``scale``."""
    sc = SCALES[scale]
    res = WatchResults(scale, sc)
    base = workdir or Path(tempfile.mkdtemp(prefix="bench-watcher-"))
    try:
        for fmt in FORMATS:
            r = run_format(fmt, sc, base, log)
            res.runs.append(r)
            log(f"{fmt}: median {fmt_ms(statistics.median(r.lags))}, p99 {fmt_ms(r.quantile(0.99))}")
    finally:
        if workdir is None:
            shutil.rmtree(base, ignore_errors=True)
    return res


def goal(r: FormatRun, interval: float) -> float:
    """2 x interval + the median refresh time."""
    return 2 * interval + (statistics.median(r.refresh_seconds) if r.refresh_seconds else 0.0)


def render(res: WatchResults) -> str:
    """The BENCHMARKS.md section."""
    sc = res.sc
    rows = []
    for r in res.runs:
        refresh = sorted(r.refresh_seconds)
        target = goal(r, sc.interval)
        rows.append(
            [
                r.fmt,
                str(r.commits),
                fmt_ms(statistics.median(r.lags)),
                fmt_ms(r.quantile(0.99)),
                fmt_ms(max(r.lags)),
                f"{fmt_ms(statistics.median(refresh))} / {fmt_ms(refresh[-1])}" if refresh else "n/a",
                ", ".join(f"{k} {v}" for k, v in sorted(r.actions.items())),
                f"{r.watcher_cpu:.1f} s of {r.wall:.0f} s",
                ", ".join(f"{x:.2f}" for x in r.load),
                f"< {fmt_ms(target)}: {verdict(r.quantile(0.99), target, higher_is_better=False)}",
            ]
        )
    table = markdown_table(
        [
            "format",
            "commits",
            "lag median",
            "lag p99",
            "lag max",
            "refresh median / max",
            "watcher actions",
            "watcher CPU",
            "load average (1 min)",
            "goal: p99 < 2 x interval + refresh",
        ],
        rows,
    )
    errors = [e for r in res.runs for e in r.errors]
    return "\n".join(
        [
            f"Scale `{res.scale}`: a foreign writer (deltalake / pyiceberg alone) appends one file of "
            f"{sc.rows:,} rows every {sc.every:g} s for {sc.duration:g} s while "
            f"`lakehouse-index watch TABLE --interval {sc.interval:g} --json` runs in a subprocess "
            "(Iceberg through a SQLite catalog). Lag = from the write call's return to the watcher's "
            "JSON line reporting an incremental refresh that covers the commit.",
            "",
            table,
            "",
            f"Watcher errors: {len(errors)}" + (f" (first: {errors[0]})" if errors else "") + ". "
            "After the run, lookups of appended keys equal the format library's reader. "
            f"{os.cpu_count()} cores shared with other work.",
        ]
    )


def results(res: WatchResults) -> dict[str, Any]:
    """The JSON results: per format every commit's lag and every refresh's seconds."""
    sc = res.sc
    return {
        "scale": res.scale,
        "duration_s": sc.duration,
        "commit_every_s": sc.every,
        "interval_s": sc.interval,
        "rows_per_commit": sc.rows,
        "runs": [
            {
                "format": r.fmt,
                "commits": r.commits,
                "lag_s": r.lags,
                "lag_median_s": statistics.median(r.lags),
                "lag_p99_s": r.quantile(0.99),
                "refresh_s": r.refresh_seconds,
                "goal_s": goal(r, sc.interval),
                "actions": r.actions,
                "errors": r.errors,
                "watcher_cpu_s": r.watcher_cpu,
                "wall_s": r.wall,
                "load_average": r.load,
            }
            for r in res.runs
        ],
    }


def main(argv: list[str] | None = None) -> WatchResults:
    """Run at ``--scale`` and write the BENCHMARKS.md section."""
    return bench_main(
        argv,
        description=__doc__.split("\n")[0],
        scales=list(SCALES),
        run=run,
        render=render,
        section=("watcher", "Watcher lag under one foreign commit per second", SCRIPT),
        results=results,
    )


if __name__ == "__main__":
    main()
