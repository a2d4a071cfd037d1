"""Benchmark of the Delta connector on a large generated log.

The table has ``--versions`` commits of ``--files-per-commit`` added files each (so
versions x files-per-commit live files) and a classic checkpoint every
``--checkpoint-interval`` commits, written by deltalake. Commit JSON is generated directly
(add actions with stats and a date partition); data files are not written because neither
the connector nor ``deltalake.DeltaTable(path)`` reads them when loading a snapshot.

Measured (each cold measurement in a fresh subprocess, ``--cold-runs`` times, medians reported;
peak RSS is the subprocess's own high-water mark, ``VmHWM``):

* cold ``snapshot(latest)`` and the list of its live file URIs, against
  ``deltalake.DeltaTable(path).file_uris()`` (deltalake alone, and with pyarrow imported as in
  a process using this library), and the connector on pyarrow's system allocator;
* ``changes`` of one new commit on a warm connector (files read, time);
* backward ``diff`` across 1,000 versions (warm: latest snapshot cached; and cold).

Run: ``python -m integration.bench.bench_delta_connector [--versions N] [--files-per-commit F]``.
Results go to docs/BENCHMARKS.md through ``integration.bench.report.write_section``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

SCHEMA = {
    "type": "struct",
    "fields": [
        {"name": "id", "type": "long", "nullable": True, "metadata": {}},
        {"name": "email", "type": "string", "nullable": True, "metadata": {}},
        {"name": "day", "type": "date", "nullable": True, "metadata": {}},
    ],
}


def _commit_lines(version: int, files: int) -> str:
    ts = 1_700_000_000_000 + version * 1000
    lines: list[dict[str, Any]] = [{"commitInfo": {"timestamp": ts, "operation": "WRITE"}}]
    if version == 0:
        lines.append({"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}})
        lines.append(
            {
                "metaData": {
                    "id": "bench",
                    "format": {"provider": "parquet", "options": {}},
                    "schemaString": json.dumps(SCHEMA),
                    "partitionColumns": ["day"],
                    "configuration": {},
                    "createdTime": ts,
                }
            }
        )
    day = f"2024-01-{1 + version % 28:02d}"
    for i in range(files):
        stats = {
            "numRecords": 1000,
            "minValues": {"id": i},
            "maxValues": {"id": i + 999},
            "nullCount": {"id": 0},
        }
        lines.append(
            {
                "add": {
                    "path": f"day={day}/part-{version:06d}-{i:03d}.parquet",
                    "partitionValues": {"day": day},
                    "size": 123_456,
                    "modificationTime": ts,
                    "dataChange": True,
                    "stats": json.dumps(stats),
                }
            }
        )
    return "\n".join(json.dumps(x) for x in lines) + "\n"


def generate(path: Path, versions: int, files: int, interval: int) -> float:
    """Write the log; returns seconds taken."""
    import deltalake

    t0 = time.perf_counter()
    log = path / "_delta_log"
    log.mkdir(parents=True)
    for v in range(versions):
        (log / f"{v:020d}.json").write_text(_commit_lines(v, files))
        if v and v % interval == 0:
            deltalake.DeltaTable(str(path), version=v).create_checkpoint()
    return time.perf_counter() - t0


_COLD = r"""
import json, resource, sys, time
mode, path = sys.argv[1], sys.argv[2]


def peak_kb():
    # VmHWM: ru_maxrss survives exec, so it would report the parent's (forked) size.
    try:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


if mode.startswith("deltalake"):
    if mode == "deltalake+pyarrow":
        import pyarrow
    import deltalake
else:
    from lakehouse_index_delta import DeltaSource
    from lakehouse_index.io import Storage
base = peak_kb()
cpu0 = resource.getrusage(resource.RUSAGE_SELF)
t0 = time.perf_counter()
if mode == "connector":
    snapshot = DeltaSource.open(path, Storage.for_uri(path)).snapshot()
    n = len(list(snapshot.files))
elif mode == "connector-diff":
    src = DeltaSource.open(path, Storage.for_uri(path))
    latest = src.latest_version()
    d = src.diff(latest, latest - int(sys.argv[3]))
    n = len(d.removed) + len(d.added)
else:
    n = len(deltalake.DeltaTable(path).file_uris())
secs = time.perf_counter() - t0
cpu1 = resource.getrusage(resource.RUSAGE_SELF)
cpu = cpu1.ru_utime - cpu0.ru_utime + cpu1.ru_stime - cpu0.ru_stime
peak = peak_kb()
out = {"seconds": secs, "cpu_s": cpu, "files": n, "peak_mb": peak / 1024, "delta_mb": (peak - base) / 1024}
print(json.dumps(out))
"""

#: The checkout this script belongs to, and its connectors: what the subprocesses must import.
_ROOT = Path(__file__).resolve().parents[2]


def cold(mode: str, path: Path, runs: int, *extra: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Medians of ``runs`` fresh subprocesses (the machine may be shared: single runs are noisy)."""
    return cold_interleaved([(mode, env or {})], path, runs, *extra)[0]


def cold_interleaved(
    modes: list[tuple[str, dict[str, str]]], path: Path, runs: int, *extra: str
) -> list[dict[str, Any]]:
    """Medians of ``runs`` fresh subprocesses per (mode, extra environment), the modes taking turns.

    Taking turns exposes every mode to the same background load. Each subprocess runs this
    checkout's code, not an installed copy.
    """
    base_env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(_ROOT), str(_ROOT / "connectors")])}
    results: list[list[dict[str, Any]]] = [[] for _ in modes]
    for _ in range(runs):
        for i, (mode, env) in enumerate(modes):
            out = subprocess.run(
                [sys.executable, "-c", _COLD, mode, str(path), *extra],
                check=True,
                capture_output=True,
                text=True,
                cwd=_ROOT,
                env={**base_env, **env},
            )
            results[i].append(json.loads(out.stdout.strip().splitlines()[-1]))
    return [{k: statistics.median(r[k] for r in rs) for k in rs[0]} for rs in results]


class CountingIO:
    """Local storage that counts reads (to show tailing reads only the new commit)."""

    def __init__(self, uri: str) -> None:
        from lakehouse_index.io import Storage

        self.inner = Storage.for_uri(uri)
        self.reads = 0
        self.misses = 0

    def read_bytes(self, path: str) -> bytes:
        try:
            data = self.inner.read_bytes(path)
        except FileNotFoundError:
            self.misses += 1
            raise
        self.reads += 1
        return data

    def read_many(self, paths: Sequence[str]) -> list[bytes | None]:
        out = self.inner.read_many(paths)
        self.reads += sum(d is not None for d in out)
        self.misses += sum(d is None for d in out)
        return out

    def read_range(self, path: str, offset: int, length: int) -> bytes:
        self.reads += 1
        return self.inner.read_range(path, offset, length)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def warm_measurements(path: Path, files: int, diff_span: int, rounds: int) -> dict[str, Any]:
    from lakehouse_index_delta import DeltaSource

    io = CountingIO(str(path))
    src = DeltaSource.open(str(path), io)
    latest = src.latest_version()
    list(src.changes(latest - 1))  # the tailer is positioned at latest
    tail_times, tail_reads, tail_misses = [], [], []
    for _ in range(rounds):
        latest += 1
        (path / "_delta_log" / f"{latest:020d}.json").write_text(_commit_lines(latest, files))
        io.reads = io.misses = 0
        t0 = time.perf_counter()
        got = list(src.changes(latest - 1))
        tail_times.append(time.perf_counter() - t0)
        tail_reads.append(io.reads)
        tail_misses.append(io.misses)
        assert [c.version for c in got] == [latest] and len(got[0].added) == files
    t0 = time.perf_counter()
    src.snapshot(latest)
    snap_secs = time.perf_counter() - t0
    t0 = time.perf_counter()
    d = src.diff(latest, latest - diff_span)
    diff_secs = time.perf_counter() - t0
    assert len(d.removed) == diff_span * files and not d.added
    return {
        "tail_ms": statistics.median(tail_times) * 1000,
        "tail_max_ms": max(tail_times) * 1000,
        "tail_reads": max(tail_reads),
        "tail_misses": max(tail_misses),
        "snapshot_after_tail_s": snap_secs,
        "diff_s": diff_secs,
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--versions", type=int, default=10_000)
    ap.add_argument("--files-per-commit", type=int, default=10)
    ap.add_argument("--checkpoint-interval", type=int, default=100)
    ap.add_argument("--diff-span", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--cold-runs", type=int, default=3)
    ap.add_argument("--dir", default=None, help="where to generate (default: a temp dir)")
    ap.add_argument("--no-report", action="store_true", help="print only; do not touch docs/BENCHMARKS.md")
    args = ap.parse_args(argv)
    base = Path(args.dir or tempfile.mkdtemp(prefix="bench-delta-"))
    path = base / "table"
    gen_secs = generate(path, args.versions, args.files_per_commit, args.checkpoint_interval)
    live = args.versions * args.files_per_commit
    print(f"generated {args.versions} versions / {live} files in {gen_secs:.1f}s at {path}", flush=True)
    system_pool = {"ARROW_DEFAULT_MEMORY_POOL": "system"}
    conn, dl_pa, dl, conn_sys = cold_interleaved(
        [("connector", {}), ("deltalake+pyarrow", {}), ("deltalake", {}), ("connector", system_pool)],
        path,
        args.cold_runs,
    )
    assert conn["files"] == dl["files"] == dl_pa["files"] == conn_sys["files"] == live, (conn, dl)
    cold_diff = cold("connector-diff", path, args.cold_runs, str(args.diff_span))
    warm = warm_measurements(path, args.files_per_commit, args.diff_span, args.rounds)
    from integration.bench.report import markdown_table, write_results, write_section

    def memory(r: dict[str, Any]) -> str:
        return f"{r['peak_mb']:.0f} MB peak RSS (+{r['delta_mb']:.0f} MB over its imports)"

    def wall_cpu(r: dict[str, Any]) -> str:
        return f"{r['seconds']:.2f} s (CPU {r['cpu_s']:.2f} s)"

    def goal(ours: dict[str, Any], theirs: dict[str, Any]) -> str:
        met = ours["seconds"] <= theirs["seconds"] and ours["peak_mb"] <= theirs["peak_mb"]
        return "met" if met else "**NOT met**"

    rows = [
        [
            "cold `snapshot(latest)` + its paths (connector)",
            wall_cpu(conn),
            memory(conn),
        ],
        [
            "cold `deltalake.DeltaTable(path)` + `file_uris()`, pyarrow imported",
            wall_cpu(dl_pa),
            f"{memory(dl_pa)}; goal (connector ≤ this in time and peak): {goal(conn, dl_pa)}",
        ],
        [
            "cold `deltalake.DeltaTable(path)` + `file_uris()`, deltalake alone",
            wall_cpu(dl),
            f"{memory(dl)}; connector ≤ this in time and peak: {goal(conn, dl)}",
        ],
        [
            "cold `snapshot(latest)` + its paths (connector), `ARROW_DEFAULT_MEMORY_POOL=system`",
            wall_cpu(conn_sys),
            memory(conn_sys),
        ],
        [
            "warm `changes` of one new commit",
            f"{warm['tail_ms']:.2f} ms median (max {warm['tail_max_ms']:.2f})",
            f"{warm['tail_reads']} file read + {warm['tail_misses']} probe of the next (absent) commit, "
            f"no listing; {args.rounds} rounds",
        ],
        [
            f"backward `diff` across {args.diff_span} versions, warm",
            f"{warm['diff_s']:.2f} s",
            "latest snapshot cached; older one by undoing the commits in between",
        ],
        [
            f"backward `diff` across {args.diff_span} versions, cold",
            f"{cold_diff['seconds']:.2f} s",
            f"{cold_diff['peak_mb']:.0f} MB peak RSS",
        ],
    ]
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    body = (
        f"Size run: **{args.versions:,} versions, {live:,} live files**, checkpoint every "
        f"{args.checkpoint_interval} commits ({args.files_per_commit} adds per commit, date-partitioned; "
        f"log generated in {gen_secs:.0f} s, checkpoints by deltalake).\n\n"
        + markdown_table(["measurement", "time", "notes"], rows)
        + f"\n\nLoad average when the run ended: {load} (the machine was shared with other jobs; "
        f"times are wall-clock, medians of {args.cold_runs} runs for cold rows, the four cold loads "
        "taking turns; CPU is the process's user + system time over the same span, less sensitive to "
        "the load; the goal compares wall-clock time and peak RSS).\n\n"
        "What the cold rows measure: each is a fresh Python process that imports its library, then "
        "is timed from opening the table until it holds a Python list of the URIs of the live files; "
        "peak RSS is the process's high-water mark (`VmHWM`, imports included) and the growth is over "
        "the process after imports. Both sides then hold every live file's size, partition values "
        "and statistics (the connector keeps sizes, partition values and record counts as Arrow "
        "columns; deltalake its add actions in Arrow). The connector's process imports "
        "`lakehouse_index_delta` and `lakehouse_index.io` (which load pyarrow with its compute and "
        "Parquet modules); deltalake needs no pyarrow, so it is measured both alone and with pyarrow "
        "imported as in any process that uses this library (which reads data with pyarrow). The "
        "last cold row is the connector with pyarrow's system allocator instead of its default "
        "(mimalloc).\n"
    )
    print(body)
    if not args.no_report:
        write_section(
            "delta-connector", "Delta connector", "integration/bench/bench_delta_connector.py", body
        )
        results = {
            "versions": args.versions,
            "live_files": live,
            "files_per_commit": args.files_per_commit,
            "checkpoint_interval": args.checkpoint_interval,
            "generate_s": gen_secs,
            "cold_runs": args.cold_runs,
            "cold": {
                "connector": conn,
                "deltalake_with_pyarrow": dl_pa,
                "deltalake": dl,
                "connector_system_allocator": conn_sys,
            },
            "diff_span": args.diff_span,
            "cold_diff": cold_diff,
            "warm": warm,
        }
        write_results("delta-connector", results)


if __name__ == "__main__":
    main()
