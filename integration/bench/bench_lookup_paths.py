"""W1 along other paths (issue 18): Iceberg against Delta, cold lookups, and object-store latency.

Same rows everywhere: a :mod:`integration.bench.datagen` Delta table (ids dealt over every
file), an Iceberg copy written by pyiceberg into a SQLite ``SqlCatalog`` (one append per
Delta data file: one snapshot each), and the Lance copy with a BTREE index on ``email``.
Both tables get ``SecondaryIndex("by_email", key="email", record_key="id")``, built in
process. Every answer is checked against the generator (``email_of(i)`` names row ``i``).

* **Warm** ``locate`` / ``lookup`` (full rows), Iceberg (opened through the catalog) next to
  Delta: each key timed after one untimed call, the methods interleaved key by key (a shared
  machine's load drifts). Goal: Iceberg locate within 1.2x of Delta.
* **Cold** lookup: ``open_table`` + ``lookup`` with the process caches cleared (footers,
  coverages), next to Lance cold (``lance.dataset`` + filtered ``to_table``); the OS page
  cache stays warm for both. Goal: within 3x of Lance.
* **Page and dictionary size**: lookups of the main table and of copies written with smaller
  data pages and dictionary pages (:data:`PAGE_LAYOUTS`): data-file bytes read per warm lookup
  against the pages holding the row (goal: at most 64 KB), cold lookups beside Lance's (goal:
  within 3x), and a filtered scan of the whole table (what the layout costs scans).
* **S3 emulator**: the Delta table (with its index) and the Lance copy uploaded to moto on
  loopback, read through a proxy adding ``--latency-ms`` (default 20) per request
  (:mod:`integration.bench.latency`): warm and cold lookups, their requests, and their
  *sequential* round trips (requests in flight together count once), by kind of object.

Run: ``python -m integration.bench.bench_lookup_paths --scale small|full``.
"""

from __future__ import annotations

import argparse
import functools
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from integration.bench import datagen
from integration.bench.common import (
    Timing,
    clear_engine_caches,
    fmt_ms,
    fmt_ratio,
    load_average,
    ratio,
    timed,
    verdict,
)
from integration.bench.latency import RequestLog, rounds

INDEX = "by_email"
SCRIPT = "integration/bench/bench_lookup_paths.py"
SECTION = ("lookup_paths", "W1 on Iceberg, cold, and with object-store latency (issue 18)", SCRIPT)
S3_BUCKET = "bench-lookup-paths"
ICEBERG_GOAL = 1.2
COLD_GOAL = 3.0
#: Data-file KB a warm full-row lookup may read (issue 18).
DATA_KB_GOAL = 64.0
#: (rows per data page, dictionary page bytes at most or None for deltalake's 1 MB) of the
#: extra copies of the table measured by ``_page_sizes`` (the main table has deltalake's
#: defaults: pages of 20,480 rows, dictionaries up to 1 MB).
PAGE_LAYOUTS: tuple[tuple[int, int | None], ...] = ((8_192, None), (2_048, None), (2_048, 128 << 10))
#: The phases of a cold Delta lookup (``_cold_phases``).
COLD_PHASES = ("open the table", "locate (index)", "read the row (data file)")


@dataclass(frozen=True)
class PathsScale:
    """Table shape and repetitions."""

    rows: int
    files: int
    keys: int
    cold_reps: int
    s3_reps: int


SCALES: dict[str, PathsScale] = {
    "tiny": PathsScale(20_000, 4, 5, 2, 2),
    "small": PathsScale(200_000, 20, 15, 5, 3),
    "full": PathsScale(5_000_000, 100, 41, 9, 9),
}


@dataclass
class LatencyRun:
    """One lookup served through the delaying proxy."""

    seconds: float
    requests: int
    rounds: int
    by_category: dict[str, int]

    def to_json(self) -> dict[str, Any]:
        """JSON-ready figures."""
        return {
            "seconds": self.seconds,
            "requests": self.requests,
            "rounds": self.rounds,
            "by_category": self.by_category,
        }


@dataclass(frozen=True)
class PageSizeRun:
    """Full-row lookups of one copy of the table, written with pages of ``page_rows`` rows and
    dictionary pages of at most ``dict_bytes`` (None: the writer's default)."""

    page_rows: int
    dict_bytes: int | None
    #: Data-file KB read per warm lookup (counted on the storage calls).
    data_kb: float
    #: KB of the data pages holding a probed row, one page per column (the least a reader of
    #: these files can fetch once dictionaries are cached).
    floor_kb: float
    warm: Timing
    #: Cold lookups (fresh open, caches cleared), each beside a cold Lance lookup of the same key.
    cold: Timing
    lance_cold: Timing
    #: A filtered pyarrow dataset scan of the whole table for one key (what the layout costs scans).
    scan: Timing
    #: Bytes of the table's data files.
    table_bytes: int

    def to_json(self) -> dict[str, Any]:
        """JSON-ready figures."""
        return {
            "page_rows": self.page_rows,
            "dict_bytes": self.dict_bytes,
            "data_kb": self.data_kb,
            "floor_kb": self.floor_kb,
            "warm": self.warm.to_json(),
            "cold": self.cold.to_json(),
            "lance_cold": self.lance_cold.to_json(),
            "scan": self.scan.to_json(),
            "table_bytes": self.table_bytes,
        }


@dataclass
class PathsResults:
    """Everything one run measured."""

    scale: str
    params: datagen.TableParams
    latency_ms: float
    warm: dict[str, Timing] = field(default_factory=dict)
    cold: dict[str, Timing] = field(default_factory=dict)
    cold_phases: dict[str, Timing] = field(default_factory=dict)
    #: On the S3 emulator behind the delaying proxy: one record per lookup.
    s3: dict[str, list[LatencyRun]] = field(default_factory=dict)
    #: Warm lookups by the writer's page size (``_page_sizes``).
    page_sizes: list[PageSizeRun] = field(default_factory=list)
    disagreements: list[str] = field(default_factory=list)
    load: list[float] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _probe_ids(params: datagen.TableParams, n: int) -> list[int]:
    chunks = params.file_ids()
    picks = np.linspace(0, len(chunks) - 1, n).round().astype(int)
    rng = np.random.default_rng(11)
    return [int(chunks[i][rng.integers(len(chunks[i]))]) for i in picks]


def _check(res: PathsResults, what: str, got: Sequence[int], want: int) -> None:
    if sorted(got) != [want]:
        res.disagreements.append(f"{what}: got ids {sorted(got)[:5]}, expected [{want}]")


def _config(rows: int) -> Any:
    import lakehouse_index as li

    return li.Config(executor=li.ExecutorConfig(local_max_rows=max(2 * rows, 1_000_000)))


def _iceberg_copy(delta: Path, work: Path) -> Any:
    """A SQLite SqlCatalog holding ``db.t``: the Delta table's files appended one snapshot each."""
    from pyiceberg.catalog.sql import SqlCatalog

    wh = work / "warehouse"
    wh.mkdir(parents=True)
    cat = SqlCatalog("bench", uri=f"sqlite:///{work}/catalog.db", warehouse=f"file://{wh}")
    cat.create_namespace("db")
    table = cat.create_table("db.t", schema=datagen.SCHEMA)
    files = sorted(p for p in delta.rglob("*.parquet") if "_delta_log" not in p.parts)
    for p in files:
        table.append(pq.read_table(p).cast(datagen.SCHEMA))
    return cat


def _clear_caches() -> None:
    """Forget every process cache a cold lookup must not find (footers, coverages, move maps)."""
    from lakehouse_index.kinds import moves
    from lakehouse_index.query import coverage

    clear_engine_caches()
    coverage._CACHE.clear()
    moves._CACHE.clear()


def _warm(res: PathsResults, methods: dict[str, Callable[[str], Any]], ids: Sequence[int]) -> None:
    """Per key, every method in turn (one untimed call, then timed): the methods compared see the
    same moments of a shared machine's load."""
    timings = {name: Timing() for name in methods}
    for i in ids:
        key = datagen.email_of(i)
        for name, fn in methods.items():
            fn(key)
            dt, out = timed(lambda k=key, f=fn: f(k))  # type: ignore[misc]
            timings[name].samples.append(dt)
            _check(res, f"{name} {key}", out["id"].to_pylist(), i)
    res.warm.update(timings)


def _cold(res: PathsResults, name: str, fn: Callable[[str], Any], ids: Sequence[int]) -> None:
    timing = Timing()
    for i in ids:
        key = datagen.email_of(i)
        _clear_caches()
        dt, out = timed(lambda k=key: fn(k))  # type: ignore[misc]
        timing.samples.append(dt)
        _check(res, f"{name} {key}", out["id"].to_pylist(), i)
    res.cold[name] = timing


def _cold_phases(res: PathsResults, delta: Path, ids: Sequence[int]) -> None:
    """A cold Delta lookup in its three phases, each timed in turn with the process caches
    cleared before the first: open the table (its log), locate the key (the index, cold),
    then read the row (the data file, cold; the index now warm)."""
    import lakehouse_index as li

    phases = {name: Timing() for name in COLD_PHASES}
    for i in ids:
        key = datagen.email_of(i)
        _clear_caches()
        start = time.perf_counter()
        t = li.open_table(str(delta), config=_config(res.params.rows))
        opened = time.perf_counter()
        located = t.locate(INDEX, [key])
        found = time.perf_counter()
        out = t.lookup(INDEX, [key])
        done = time.perf_counter()
        for name, seconds in zip(COLD_PHASES, (opened - start, found - opened, done - found), strict=True):
            phases[name].samples.append(seconds)
        _check(res, f"cold phases {key}", out["id"].to_pylist(), i)
        _check(res, f"cold phases locate {key}", located["id"].to_pylist(), i)
    res.cold_phases = phases


def _page_size_run(
    res: PathsResults,
    path: Path,
    dict_bytes: int | None,
    lance_path: Path,
    ids: Sequence[int],
    cold_ids: Sequence[int],
) -> PageSizeRun:
    """Lookups of the indexed table at ``path``. Warm: every data file read once for another
    key first (footers, page indexes and dictionaries cached, as after a stream of lookups),
    then each key once. Cold: for each of ``cold_ids``, a fresh open with the caches cleared,
    then a cold Lance lookup of the same key. Then filtered scans of the whole table."""
    import lance
    import pyarrow.dataset as pads

    import lakehouse_index as li
    from integration.bench.bench_lookup import count_lookup_io, data_page_floor_kb
    from lakehouse_index.read.page_index import load_page_index

    every_file = [datagen.email_of(int(chunk[0])) for chunk in res.params.file_ids()]
    keys = [datagen.email_of(i) for i in ids]
    table = li.open_table(str(path), config=_config(res.params.rows))
    table.lookup(INDEX, every_file)
    warm = Timing()
    for i, key in zip(ids, keys, strict=True):
        dt, out = timed(lambda k=key: table.lookup(INDEX, [k]))  # type: ignore[misc]
        warm.samples.append(dt)
        _check(res, f"pages {path.name} {key}", out["id"].to_pylist(), i)

    def ours_cold(key: str) -> pa.Table:
        return li.open_table(str(path), config=_config(res.params.rows)).lookup(INDEX, [key])

    def lance_cold_lookup(key: str) -> pa.Table:
        return lance.dataset(str(lance_path)).to_table(filter=f"email = '{key}'")

    cold, lance_cold = Timing(), Timing()
    for i in cold_ids:
        key = datagen.email_of(i)
        for timing, fn, what in (
            (cold, ours_cold, "pages cold"),
            (lance_cold, lance_cold_lookup, "lance cold"),
        ):
            _clear_caches()  # before the clock starts, as in _cold
            dt, out = timed(functools.partial(fn, key))
            timing.samples.append(dt)
            _check(res, f"{what} {path.name} {key}", out["id"].to_pylist(), i)
    files = sorted(p for p in path.glob("*.parquet"))
    dataset = pads.dataset([str(f) for f in files], format="parquet")
    scan = Timing()
    for i in cold_ids[:3]:
        key = datagen.email_of(i)
        dt, out = timed(functools.partial(dataset.to_table, filter=pads.field("email") == key))
        scan.samples.append(dt)
        _check(res, f"pages scan {path.name} {key}", out["id"].to_pylist(), i)
    with pa.OSFile(str(files[0])) as handle:
        pf = pq.ParquetFile(handle)
        # Rows per page of a column whose pages all stay dictionary encoded (a writer that
        # falls back to plain encoding starts a new page there).
        chunk = load_page_index(handle, pf.metadata, pf.schema_arrow).chunks[(0, "id")]
    io = count_lookup_io(path, keys, locate=False, cold=False, warm_keys=every_file)
    return PageSizeRun(
        page_rows=int(np.median(np.diff(chunk.page_rows))),
        dict_bytes=dict_bytes,
        data_kb=io["table-data KB"],
        floor_kb=data_page_floor_kb(table, keys),
        warm=warm,
        cold=cold,
        lance_cold=lance_cold,
        scan=scan,
        table_bytes=sum(p.stat().st_size for p in files),
    )


def _page_sizes(
    res: PathsResults, delta: Path, work: Path, lance_path: Path, ids: Sequence[int], cold_ids: Sequence[int]
) -> None:
    """Lookups of the main table and of copies written with smaller data pages and
    dictionaries (:data:`PAGE_LAYOUTS`): the bytes a warm lookup reads are the pages holding its
    row, so they follow the writer's page size; a cold lookup also decompresses and decodes a
    dictionary page per column, so it follows the writer's dictionary page size."""
    import lakehouse_index as li

    res.page_sizes.append(_page_size_run(res, delta, None, lance_path, ids, cold_ids))
    for rows, dict_bytes in PAGE_LAYOUTS:
        params = datagen.TableParams(res.params.rows, res.params.files, page_rows=rows, dict_bytes=dict_bytes)
        copy = datagen.work_copy(datagen.delta_table(params), work / params.name)
        li.open_table(str(copy), config=_config(res.params.rows)).create_index(
            li.SecondaryIndex(INDEX, key="email", record_key="id")
        )
        res.page_sizes.append(_page_size_run(res, copy, dict_bytes, lance_path, ids, cold_ids))


def _upload(client: Any, root: Path, prefix: str) -> None:
    for p in sorted(root.rglob("*")):
        if p.is_file():
            client.upload_file(str(p), S3_BUCKET, f"{prefix}/{p.relative_to(root).as_posix()}")


def _s3(res: PathsResults, delta: Path, lance_path: Path, ids: Sequence[int]) -> None:
    """Warm and cold lookups of the Delta table (with its index) and of the Lance copy, both
    uploaded to a moto S3 server and read through a proxy adding the latency per request."""
    import lance

    import lakehouse_index as li
    from integration.bench.latency import DelayProxy
    from tests.support.moto import moto_s3, s3_client

    rows = res.params.rows
    with moto_s3(S3_BUCKET) as direct:
        client = s3_client(direct)
        _upload(client, delta, "delta")
        _upload(client, lance_path, "lance")
        log = RequestLog(res.latency_ms / 1000.0)
        proxy = DelayProxy(int(direct["AWS_ENDPOINT_URL"].rsplit(":", 1)[1]), log)
        try:
            ours = {**direct, "AWS_ENDPOINT_URL": proxy.url}
            theirs = {
                "aws_endpoint": proxy.url,
                "aws_access_key_id": direct["AWS_ACCESS_KEY_ID"],
                "aws_secret_access_key": direct["AWS_SECRET_ACCESS_KEY"],
                "aws_region": direct["AWS_REGION"],
                "allow_http": "true",
            }
            uri, lance_uri = f"s3://{S3_BUCKET}/delta", f"s3://{S3_BUCKET}/lance"

            def measure(name: str, fn: Callable[[str], Any], warm: bool) -> None:
                runs = []
                for i in ids:
                    key = datagen.email_of(i)
                    if warm:
                        fn(key)
                    else:
                        _clear_caches()
                    log.clear()
                    dt, out = timed(lambda k=key: fn(k))  # type: ignore[misc]
                    runs.append(LatencyRun(dt, len(log.requests), rounds(log.requests), log.by_category()))
                    _check(res, f"s3 {name} {key}", out["id"].to_pylist(), i)
                res.s3[name] = runs

            t = li.open_table(uri, storage_options=ours, config=_config(rows))
            measure("delta warm", lambda k: t.lookup(INDEX, [k]), True)
            measure(
                "delta cold",
                lambda k: li.open_table(uri, storage_options=ours, config=_config(rows)).lookup(INDEX, [k]),
                False,
            )
            ds = lance.dataset(lance_uri, storage_options=theirs)
            measure("lance warm", lambda k: ds.to_table(filter=f"email = '{k}'"), True)
            measure(
                "lance cold",
                lambda k: lance.dataset(lance_uri, storage_options=theirs).to_table(filter=f"email = '{k}'"),
                False,
            )
        finally:
            proxy.close()


def run(scale: str, latency_ms: float = 20.0) -> PathsResults:
    """Measure every path at ``scale``."""
    import lance

    import lakehouse_index as li

    sc = SCALES[scale]
    params = datagen.TableParams(sc.rows, sc.files)
    res = PathsResults(scale, params, latency_ms)
    work = Path(tempfile.mkdtemp(prefix="bench-lookup-paths-"))
    try:
        delta = datagen.work_copy(datagen.delta_table(params), work / "delta")
        cat = _iceberg_copy(delta, work / "iceberg")
        lance_path = datagen.lance_dataset(params, "email")
        spec = li.SecondaryIndex(INDEX, key="email", record_key="id")
        d = li.open_table(str(delta), config=_config(sc.rows))
        d.create_index(spec)
        ice = li.open_table("db.t", catalog=cat, config=_config(sc.rows))
        ice.create_index(spec)
        ids = _probe_ids(params, sc.keys)
        res.load.append(load_average())

        ds = lance.dataset(str(lance_path))
        _warm(
            res,
            {
                "delta locate": lambda k: d.locate(INDEX, [k]),
                "iceberg locate": lambda k: ice.locate(INDEX, [k]),
                "delta lookup": lambda k: d.lookup(INDEX, [k]),
                "iceberg lookup": lambda k: ice.lookup(INDEX, [k]),
                "lance lookup": lambda k: ds.to_table(filter=f"email = '{k}'"),
            },
            ids,
        )
        res.load.append(load_average())

        cold_ids = ids[: sc.cold_reps]
        _cold(
            res,
            "delta lookup",
            lambda k: li.open_table(str(delta), config=_config(sc.rows)).lookup(INDEX, [k]),
            cold_ids,
        )
        _cold(
            res,
            "iceberg lookup",
            lambda k: li.open_table("db.t", catalog=cat, config=_config(sc.rows)).lookup(INDEX, [k]),
            cold_ids,
        )
        _cold(
            res,
            "lance lookup",
            lambda k: lance.dataset(str(lance_path)).to_table(filter=f"email = '{k}'"),
            cold_ids,
        )
        _cold_phases(res, delta, cold_ids)
        res.load.append(load_average())

        _page_sizes(res, delta, work, lance_path, ids, cold_ids)
        res.load.append(load_average())

        _s3(res, delta, lance_path, ids[: sc.s3_reps])
        res.load.append(load_average())
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return res


def _median(runs: list[LatencyRun], pick: Callable[[LatencyRun], float]) -> float:
    return float(np.median([pick(r) for r in runs])) if runs else float("nan")


def render(res: PathsResults) -> str:
    """The BENCHMARKS.md section."""
    from integration.bench.report import markdown_table

    p = res.params
    w, c = res.warm, res.cold
    loc = ratio(w["iceberg locate"].median, w["delta locate"].median)
    look = ratio(w["iceberg lookup"].median, w["delta lookup"].median)
    cold_delta = ratio(c["delta lookup"].median, c["lance lookup"].median)
    cold_ice = ratio(c["iceberg lookup"].median, c["lance lookup"].median)
    parts = [
        f"Scale `{res.scale}`: {p.rows:,} rows in {p.files} files (Iceberg: {p.files} snapshots, "
        f"SQLite SqlCatalog). Load average during the run: "
        + ", ".join(f"{x:.1f}" for x in res.load)
        + " (2 shared cores).",
        "**Warm** (medians of "
        f"{len(w['delta locate'].samples)} keys):\n\n"
        + markdown_table(
            ["method", "Delta", "Iceberg", "Iceberg / Delta", f"goal ≤ {ICEBERG_GOAL}x"],
            [
                [
                    "locate",
                    fmt_ms(w["delta locate"].median),
                    fmt_ms(w["iceberg locate"].median),
                    fmt_ratio(loc),
                    verdict(loc, ICEBERG_GOAL, higher_is_better=False),
                ],
                [
                    "lookup (full row)",
                    fmt_ms(w["delta lookup"].median),
                    fmt_ms(w["iceberg lookup"].median),
                    fmt_ratio(look),
                    "",
                ],
                ["Lance BTREE (full row)", fmt_ms(w["lance lookup"].median), "", "", ""],
            ],
        ),
        "**Cold** (fresh open, process caches cleared; OS page cache warm):\n\n"
        + markdown_table(
            ["method", "cold lookup", "/ Lance cold", f"goal ≤ {COLD_GOAL}x"],
            [
                [
                    "Delta",
                    fmt_ms(c["delta lookup"].median),
                    fmt_ratio(cold_delta),
                    verdict(cold_delta, COLD_GOAL, higher_is_better=False),
                ],
                [
                    "Iceberg",
                    fmt_ms(c["iceberg lookup"].median),
                    fmt_ratio(cold_ice),
                    verdict(cold_ice, COLD_GOAL, higher_is_better=False),
                ],
                ["Lance", fmt_ms(c["lance lookup"].median), "1.00x", ""],
            ],
        ),
    ]
    if res.cold_phases:
        parts.append(
            "**Where a cold Delta lookup goes** (the same keys; each phase timed in turn after one "
            "clearing of the caches: the table's log, then the index cold, then the data file cold "
            "with the index warm; medians):\n\n"
            + markdown_table(
                ["phase", "median"], [[name, fmt_ms(t.median)] for name, t in res.cold_phases.items()]
            )
        )
    if res.page_sizes:
        parts.append(
            "**By the writer's page and dictionary sizes** (the same rows written again with "
            "deltalake's `data_page_row_count_limit` and `dictionary_page_size_limit`, indexed the same "
            "way. Warm: every data file read once for another key first, then each key once; data-file "
            "KB counted on the storage calls; floor = the page holding the row in each column, from the "
            "files' offset indexes. Cold: fresh open, caches cleared, each key beside a cold Lance "
            "lookup of it; medians of "
            f"{len(res.page_sizes[0].cold.samples)} keys. Scan: a pyarrow dataset scan of the whole "
            "table filtered on one email):\n\n"
            + markdown_table(
                [
                    "rows per page",
                    "dictionary page",
                    "data-file KB per warm lookup",
                    f"goal ≤ {DATA_KB_GOAL:.0f} KB",
                    "floor KB",
                    "warm lookup",
                    "cold lookup",
                    "cold / Lance cold",
                    f"goal ≤ {COLD_GOAL}x",
                    "scan",
                    "data files",
                ],
                [
                    [
                        f"{r.page_rows:,}",
                        "≤ 1 MB (default)" if r.dict_bytes is None else f"≤ {r.dict_bytes >> 10} KB",
                        f"{r.data_kb:.0f}",
                        verdict(r.data_kb, DATA_KB_GOAL, higher_is_better=False),
                        f"{r.floor_kb:.0f}",
                        fmt_ms(r.warm.median),
                        fmt_ms(r.cold.median),
                        fmt_ratio(r.cold.median / r.lance_cold.median),
                        verdict(r.cold.median / r.lance_cold.median, COLD_GOAL, higher_is_better=False),
                        fmt_ms(r.scan.median),
                        f"{r.table_bytes / 2**20:.0f} MB",
                    ]
                    for r in res.page_sizes
                ],
            )
        )
    s3_rows = [
        [
            name,
            fmt_ms(_median(runs, lambda r: r.seconds)),
            f"{_median(runs, lambda r: r.requests):.0f}",
            f"{_median(runs, lambda r: r.rounds):.0f}",
            ", ".join(f"{k} {v}" for k, v in sorted(runs[0].by_category.items())),
        ]
        for name, runs in res.s3.items()
        if runs
    ]
    if s3_rows:
        parts.append(
            f"**S3 emulator** (moto on loopback behind a proxy adding {res.latency_ms:.0f} ms per request; "
            "the Delta table with its index and the Lance copy uploaded; cold = fresh open, caches cleared; "
            "requests in flight together count as one sequential round trip; medians of "
            f"{len(next(iter(res.s3.values())))} keys; DuckDB's httpfs extension is not installed here "
            "and cannot be downloaded):\n\n"
            + markdown_table(
                [
                    "lookup (full row)",
                    "latency",
                    "requests",
                    "sequential round trips",
                    "requests by kind (first key)",
                ],
                s3_rows,
            )
        )
    parts += [f"Note: {n}" for n in res.notes]
    parts.append(
        "Answers checked against the generator: "
        + ("all agree." if not res.disagreements else "**disagreements**: " + "; ".join(res.disagreements))
    )
    return "\n\n".join(parts)


def results(res: PathsResults) -> dict[str, Any]:
    """Machine-readable results."""
    return {
        "scale": res.scale,
        "rows": res.params.rows,
        "files": res.params.files,
        "latency_ms": res.latency_ms,
        "warm": {k: v.to_json() for k, v in res.warm.items()},
        "cold": {k: v.to_json() for k, v in res.cold.items()},
        "cold_phases": {k: v.to_json() for k, v in res.cold_phases.items()},
        "s3_emulator": {k: [r.to_json() for r in v] for k, v in res.s3.items()},
        "page_sizes": [r.to_json() for r in res.page_sizes],
        "load_average": res.load,
        "disagreements": res.disagreements,
    }


def main(argv: list[str] | None = None) -> PathsResults:
    """Command line: ``--scale``, ``--latency-ms``, ``--no-report``, ``--report-path``."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scale", choices=sorted(SCALES), default="small")
    ap.add_argument("--latency-ms", type=float, default=20.0, help="added per object-store request")
    ap.add_argument("--no-report", action="store_true", help="print only; do not write the benchmarks file")
    ap.add_argument("--report-path", default=None, help="write to this file instead of docs/BENCHMARKS.md")
    args = ap.parse_args(argv)
    res = run(args.scale, args.latency_ms)
    body = render(res)
    print(body)
    if not args.no_report:
        from integration.bench.report import write_results, write_section

        name, title, script = SECTION
        write_section(name, title, script, body, path=args.report_path)
        write_results(name, results(res), path=args.report_path)
    return res


if __name__ == "__main__":
    main()
