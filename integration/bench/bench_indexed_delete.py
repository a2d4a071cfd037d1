"""Index-planned delete on Delta: merge-on-read (deletion vectors) vs copy-on-write vs deltalake's delete.

Each run writes one table of ``files`` data files of ``rows_per_file`` rows (``id``, ``name``,
``v``; one id range per file) three times afresh: with deletion vectors
(``delta.enableDeletionVectors``) and twice without, and deletes ``keys`` ids spread over every
file (the same ids from each), with the predicate ``id IN (...)``:

* **merge-on-read** — ``t.delete(where)`` on the deletion-vector table with a secondary index
  on ``id``: the index locates the rows and every file gets a deletion vector;
* **copy-on-write** — the same call on a table without deletion vectors: every file is
  rewritten without its rows;
* **deltalake** — ``DeltaTable.delete(where)`` (no index; deltalake scans the files the
  statistics cannot exclude and rewrites them).

The API's times include the index's incremental refresh after the commit (``seconds`` of its
report; the commit part is reported apart). After an unmeasured warm-up delete of absent ids
(the first parse, plan and commit of a process pay one-time costs), the methods run in
rotating order; medians of ``repeats`` runs are reported, with the bytes each delete added to
the table folder. After each run the three tables hold the same rows by deltalake's own read
(its scan applies deletion vectors).

Run: ``python -m integration.bench.bench_indexed_delete --scale small|full``.
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

from integration.bench.common import bench_main, fmt_ms, load_average

SCRIPT = "integration/bench/bench_indexed_delete.py"
METHODS = ("merge-on-read", "copy-on-write", "deltalake")


@dataclass(frozen=True)
class DeleteScale:
    """Sizes of one run: data files, rows per file, ids deleted per run, runs."""

    files: int
    rows_per_file: int
    keys: int
    repeats: int


SCALES = {
    "tiny": DeleteScale(files=4, rows_per_file=2_000, keys=40, repeats=1),
    "small": DeleteScale(files=10, rows_per_file=20_000, keys=1_000, repeats=3),
    "full": DeleteScale(files=20, rows_per_file=100_000, keys=1_000, repeats=3),
}


@dataclass
class DeleteResults:
    """Per method, each run's seconds (total, and the commit alone for the API) and bytes added."""

    scale: str
    sc: DeleteScale
    seconds: dict[str, list[float]] = field(default_factory=dict)
    commit_seconds: dict[str, list[float]] = field(default_factory=dict)
    bytes_added: dict[str, list[int]] = field(default_factory=dict)
    files_touched: dict[str, int] = field(default_factory=dict)
    load: float = 0.0


def _rows(first: int, n: int) -> pa.Table:
    ids = np.arange(first, first + n, dtype=np.int64)
    return pa.table({"id": ids, "name": pa.array([f"name-{i}" for i in ids]), "v": ids % 97})


def _folder_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and "_lakehouse_index" not in p.parts)


def _scan(path: Path) -> pa.Table:
    from deltalake import DeltaTable

    rows = pa.RecordBatchReader.from_stream(DeltaTable(str(path)).scan()).read_all()
    return rows.select(["id"]).sort_by("id")


def _tables(root: Path, sc: DeleteScale) -> tuple[dict[str, Path], dict[str, Any]]:
    """The three tables (same rows) and the two indexed ones opened, after an unmeasured warm-up
    delete of absent ids on each (a process's first parse, plan and commit pay one-time costs)."""
    from deltalake import DeltaTable, write_deltalake

    import lakehouse_index as li

    paths = {m: root / m.replace("-", "_") for m in METHODS}
    for method, path in paths.items():
        config = {"delta.enableDeletionVectors": "true"} if method == "merge-on-read" else None
        for f in range(sc.files):
            write_deltalake(
                str(path), _rows(f * sc.rows_per_file, sc.rows_per_file), mode="append", configuration=config
            )
    tables: dict[str, Any] = {}
    for method in ("merge-on-read", "copy-on-write"):
        tables[method] = li.open_table(str(paths[method]))
        # Built in process (no JVM): only the deletes are measured.
        tables[method].create_index(li.SecondaryIndex("by_id", key="id"), local_max_rows=10**9)
        tables[method].delete("id IN (-1, -2)")
    DeltaTable(str(paths["deltalake"])).delete("id IN (-1, -2)")
    return paths, tables


def run(scale: str, *, workdir: Path | None = None, log: Callable[[str], None] = print) -> DeleteResults:
    """Per run: write the three tables afresh, delete the same ids from each, check they agree."""
    from deltalake import DeltaTable

    sc = SCALES[scale]
    root = Path(workdir or tempfile.mkdtemp(prefix="bench-indexed-delete-"))
    rng = np.random.default_rng(7)
    res = DeleteResults(scale, sc, load=load_average())
    per_file = sc.keys // sc.files
    for r in range(sc.repeats):
        paths, tables = _tables(root / f"run{r}", sc)
        ids = [
            int(i)
            for f in range(sc.files)
            for i in rng.choice(sc.rows_per_file, per_file, replace=False) + f * sc.rows_per_file
        ]
        where = f"id IN ({', '.join(map(str, ids))})"
        for method in METHODS[r % 3 :] + METHODS[: r % 3]:  # rotating order
            size = _folder_bytes(paths[method])
            start = time.perf_counter()
            if method == "deltalake":
                metrics = DeltaTable(str(paths[method])).delete(where)
                commit, touched = time.perf_counter() - start, int(metrics.get("num_removed_files", 0))
            else:
                out = tables[method].delete(where)
                assert out.mode == method and out.rows_deleted == len(ids), out
                refresh = sum(i.seconds for i in out.indexes)
                commit = time.perf_counter() - start - refresh
                touched = len(out.files_marked or out.files_rewritten)
            res.seconds.setdefault(method, []).append(time.perf_counter() - start)
            res.commit_seconds.setdefault(method, []).append(commit)
            res.bytes_added.setdefault(method, []).append(_folder_bytes(paths[method]) - size)
            res.files_touched[method] = touched
            log(f"run {r} {method}: {fmt_ms(res.seconds[method][-1])}, {touched} files")
        scans = [_scan(p) for p in paths.values()]
        assert all(s.equals(scans[0]) for s in scans[1:]), "the tables disagree after the deletes"
        assert scans[0].num_rows == sc.files * (sc.rows_per_file - per_file)
        shutil.rmtree(root / f"run{r}", ignore_errors=True)
    if workdir is None:
        shutil.rmtree(root, ignore_errors=True)
    return res


def render(res: DeleteResults) -> str:
    """A Markdown table of the medians."""
    sc = res.sc
    rows = sc.files * sc.rows_per_file
    lines = [
        f"{sc.files} files x {sc.rows_per_file:,} rows ({rows:,} rows); each run deletes "
        f"{sc.keys // sc.files * sc.files:,} ids spread over every file; median of {sc.repeats} runs "
        f"(load average {res.load:.1f}).",
        "",
        "| method | delete (total) | commit | files touched | bytes added |",
        "|---|---:|---:|---:|---:|",
    ]
    for m in METHODS:
        total, commit = statistics.median(res.seconds[m]), statistics.median(res.commit_seconds[m])
        added = int(statistics.median(res.bytes_added[m]))
        lines.append(f"| {m} | {fmt_ms(total)} | {fmt_ms(commit)} | {res.files_touched[m]} | {added:,} |")
    return "\n".join(lines)


def results(res: DeleteResults) -> dict[str, Any]:
    """The medians, machine-readable."""
    return {
        m: {
            "seconds": statistics.median(res.seconds[m]),
            "commit_seconds": statistics.median(res.commit_seconds[m]),
            "bytes_added": statistics.median(res.bytes_added[m]),
            "files_touched": res.files_touched[m],
        }
        for m in METHODS
    }


def main(argv: list[str] | None = None) -> DeleteResults:
    """Run at ``--scale`` and write the BENCHMARKS.md section."""
    return bench_main(
        argv,
        description=__doc__.split("\n")[0],
        scales=list(SCALES),
        run=run,
        render=render,
        section=(
            "indexed-delete",
            "Index-planned delete: merge-on-read vs copy-on-write vs deltalake",
            SCRIPT,
        ),
        results=results,
    )


if __name__ == "__main__":
    main()
