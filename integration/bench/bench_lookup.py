"""Benchmark of point lookups through a secondary index (issue 6, W1-W3), side by side in one run.

Data: a Delta table written by deltalake (:mod:`integration.bench.datagen`), ids dealt to the
files by a seeded permutation so every key value range spans every file. The index is
``SecondaryIndex("by_email", key="email", record_key="id")``; every probe is
``email = '<one existing address>'`` (a different key per repetition).

* **W1** (latest version, index up to date): index ``lookup`` (full rows) and ``locate``
  against a plain Spark scan (``Table.read(spark, where=..., use_indexes=False)``: every
  live file read, as Spark reads a table without an index), a pyarrow dataset scan
  (``deltalake.DeltaTable.to_pyarrow_dataset()``), a DuckDB ``read_parquet`` scan of the
  version's files, and a Lance dataset with the same rows and a BTREE scalar index.
  Warm: process caches populated by an untimed first call (Parquet footers, Lance index
  cache, DuckDB connection, Spark session and JIT) and, for the index, an untimed batch
  lookup with one key in every data file (footers, page indexes, dictionaries of every file).
  Cold: a fresh ``open_table`` /
  ``DeltaTable`` / DuckDB connection / ``lance.dataset`` and the engine's footer caches
  cleared; the OS page cache stays warm in both (the machine is shared: no cache drop).
* **W3** (5% of files appended, the index not refreshed): hybrid lookup vs the index
  lookup at the indexed version plus a pyarrow scan of just the appended files, vs a
  DuckDB scan of the whole version, vs Lance with the appended fragments not indexed;
  then the lookup after a refresh (incremental; full while incremental is not available).
  The hybrid lookup and its floor (lookup at the indexed version + scan of the appended
  files) are also measured with 1% appended (before the 5% stage, on the way to it) and
  with 20% appended (after the refresh, on top of the refreshed index).
* **W2** (time travel): a lookup at a version between the two index snapshots of W3
  vs a lookup at the indexed version.

Index object reads per lookup are counted by wrapping the engine's pyarrow filesystem
(:func:`integration.bench.common.count_io`) in a separate, untimed pass.

Every method's answers are checked against each other and against the generator (the
ids each key must return at that version); a disagreement is reported in the results
and in docs/BENCHMARKS.md, never hidden.

Run: ``python -m integration.bench.bench_lookup --scale small|full``.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from integration.bench import datagen
from integration.bench.common import (
    IOCounters,
    Timing,
    bench_main,
    clear_engine_caches,
    count_io,
    fmt_ms,
    fmt_ratio,
    load_average,
    not_available,
    ratio,
    settle,
    timed,
    verdict,
)

INDEX = "by_email"
KEY = "email"
#: A covering index holding every column: full rows answered from the index alone.
COVERING = "by_email_all"
SCRIPT = "integration/bench/bench_lookup.py"


@dataclass(frozen=True)
class LookupScale:
    """Sizes and repetition counts of one benchmark scale."""

    rows: int
    files: int
    reps: int  # repetitions of the fast methods (index, pyarrow, DuckDB, Lance)
    slow_reps: int  # repetitions of Spark scans
    append_share: float = 0.05
    #: W3's other shares of appended files: the hybrid lookup against its floor at each.
    low_share: float = 0.01
    high_share: float = 0.20
    #: Seconds of the settle pause before W1 (:func:`~integration.bench.common.settle`).
    settle_seconds: float = 10.0


SCALES: dict[str, LookupScale] = {
    "tiny": LookupScale(rows=20_000, files=4, reps=4, slow_reps=1, settle_seconds=0.0),
    "small": LookupScale(rows=200_000, files=20, reps=9, slow_reps=3),
    "full": LookupScale(rows=5_000_000, files=100, reps=21, slow_reps=5),
}


# --------------------------------------------------------------------------- results


@dataclass
class MethodResult:
    """Timings of one method and the ids it returned per key."""

    name: str
    warm: Timing = field(default_factory=Timing)
    cold: Timing = field(default_factory=Timing)
    answers: dict[str, tuple[int, ...]] = field(default_factory=dict)
    note: str = ""


@dataclass
class HybridShare:
    """W3 at one share of appended files: the hybrid lookup next to its floor, the index
    lookup at the indexed version plus a scan of just the appended files."""

    #: Files appended since the indexed version, and the files the index covers.
    appended: int
    indexed: int
    hybrid: MethodResult
    at_indexed: MethodResult
    scan_appended: MethodResult

    @property
    def share(self) -> float:
        """Appended files as a share of the indexed ones."""
        return self.appended / self.indexed

    @property
    def floor(self) -> float:
        """Median lookup at the indexed version plus median scan of the appended files (s)."""
        return self.at_indexed.warm.median + self.scan_appended.warm.median


@dataclass
class LookupResults:
    """Everything one run measured (returned by :func:`run` for tests and reports)."""

    scale: str
    params: datagen.TableParams
    versions: dict[str, int] = field(default_factory=dict)
    w1: dict[str, MethodResult] = field(default_factory=dict)
    w2: dict[str, MethodResult] = field(default_factory=dict)
    w3: dict[str, MethodResult] = field(default_factory=dict)
    #: W3 at each share of appended files (1%, 5%, 20%), in that order.
    w3_shares: list[HybridShare] = field(default_factory=list)
    io: dict[str, dict[str, float]] = field(default_factory=dict)
    #: Per scenario: key → ids the generator says the key must return.
    expected: dict[str, dict[str, tuple[int, ...]]] = field(default_factory=dict)
    disagreements: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    index_build_s: float = float("nan")
    covering_build_s: float = float("nan")
    covering_bytes: int = 0
    refresh_mode: str = ""
    refresh_s: float = float("nan")
    #: Mean KB of the data pages holding a probed row, one per column (:func:`data_page_floor_kb`).
    data_floor_kb: float = float("nan")


# --------------------------------------------------------------------------- answers


def _ids(result: Any) -> tuple[int, ...]:
    """Sorted ids of a method's result (pyarrow table or list of Spark rows)."""
    if isinstance(result, pa.Table):
        return tuple(sorted(result.column("id").to_pylist()))
    return tuple(sorted(int(r["id"]) for r in result))


def _check_full_rows(name: str, result: Any, problems: list[str]) -> None:
    """Full-row methods: every returned row equals the generator's row for its id."""
    if not isinstance(result, pa.Table) or result.num_rows == 0:
        return
    ids = np.array(result.column("id").to_pylist(), dtype=np.int64)
    truth = datagen.rows_for(ids)
    for col in ("email", "payload", "amount", "country", "status"):
        if result.column(col).to_pylist() != truth.column(col).to_pylist():
            problems.append(f"{name}: column {col!r} of the returned rows differs from the generated rows")


def measure(
    res: MethodResult,
    fn: Callable[[str], Any],
    keys: Sequence[str],
    reps: int,
    *,
    full_rows: bool,
    problems: list[str],
    cold_setup: Callable[[], Callable[[str], Any]] | None = None,
    cold_reps: int = 0,
    warmup: Callable[[], Any] | None = None,
) -> MethodResult:
    """Warm-up call, then ``reps`` warm timed calls (one key each), then optional cold calls.

    ``warmup`` (untimed) populates the process caches further: for the index, one batch
    lookup with a key in every data file, so every file's footer, page index and
    dictionaries, and the footers of the index files holding those keys (spread over the
    whole key range), are cached as after a stream of lookups.
    ``cold_setup`` returns a fresh function (new handles, cleared caches): its setup is timed
    together with the call, because a cold lookup pays for opening the table.
    """
    fn(keys[0])
    if warmup is not None:
        warmup()
    for i in range(reps):
        key = keys[i % len(keys)]
        secs, out = timed(lambda key=key: fn(key))  # type: ignore[misc]
        res.warm.samples.append(secs)
        res.answers[key] = _ids(out)
        if full_rows:
            _check_full_rows(res.name, out, problems)
    for i in range(cold_reps):
        key = keys[(i + 1) % len(keys)]
        assert cold_setup is not None

        def cold_call(key: str = key) -> Any:
            return cold_setup()(key)

        secs, out = timed(cold_call)
        res.cold.samples.append(secs)
        res.answers.setdefault(key, _ids(out))
    return res


def _compare(
    scenario: str, methods: dict[str, MethodResult], expected: dict[str, tuple[int, ...]], problems: list[str]
) -> None:
    for m in methods.values():
        for key, ids in m.answers.items():
            want = expected.get(key)
            if want is not None and ids != want:
                problems.append(f"{scenario}: {m.name} returned ids {ids} for {key!r}, expected {want}")


# --------------------------------------------------------------------------- methods


@dataclass(frozen=True)
class HybridProbes:
    """W3 probes: W1 keys alternating with keys of appended rows, and what each must return."""

    keys: list[str]
    #: At the latest version, at the indexed version, and in the appended files alone.
    latest: dict[str, tuple[int, ...]]
    at_indexed: dict[str, tuple[int, ...]]
    appended_only: dict[str, tuple[int, ...]]


def hybrid_probes(old: dict[str, tuple[int, ...]], new_ids: Sequence[int], n: int) -> HybridProbes:
    """``n`` probes alternating the keys of ``old`` (the W1 keys, not changed by appends) and
    the keys of ``new_ids`` (rows in the appended files)."""
    new = [datagen.email_of(int(i)) for i in new_ids]
    keys = [k for pair in zip(old, new, strict=False) for k in pair][:n]
    latest = dict(old) | {datagen.email_of(int(i)): (int(i),) for i in new_ids}
    return HybridProbes(
        keys,
        latest,
        {k: (v if k in old else ()) for k, v in latest.items()},
        {k: (() if k in old else v) for k, v in latest.items()},
    )


def measure_hybrid_share(
    table: Any,
    indexed_version: int,
    indexed_files: int,
    appended: Sequence[str],
    probes: HybridProbes,
    *,
    reps: int,
    warm_keys: list[str],
    problems: list[str],
) -> HybridShare:
    """W3 at one share: the hybrid lookup at the latest version, the lookup at the indexed
    version and a pyarrow scan of just the ``appended`` files, each checked."""
    label = f"W3 with {len(appended)} of {indexed_files} files appended"
    total = indexed_files + len(appended)
    out = HybridShare(
        len(appended),
        indexed_files,
        measure(
            MethodResult(f"hybrid lookup ({len(appended)} of {total} files not indexed)"),
            lambda k: table.lookup(INDEX, [k]),
            probes.keys,
            reps,
            full_rows=True,
            problems=problems,
            # the probes' appended files' key columns cached too (kept until the next refresh)
            warmup=lambda: table.lookup(INDEX, [*warm_keys, *probes.keys]),
        ),
        measure(
            MethodResult("index lookup at the indexed version"),
            lambda k: table.lookup(INDEX, [k], version_as_of=indexed_version),
            probes.keys,
            reps,
            full_rows=True,
            problems=problems,
            warmup=lambda: table.lookup(INDEX, [*warm_keys, *probes.keys], version_as_of=indexed_version),
        ),
        measure(
            MethodResult("pyarrow scan of the appended files only"),
            _files_scan(appended),
            probes.keys,
            reps,
            full_rows=True,
            problems=problems,
        ),
    )
    _compare(label, {"hybrid": out.hybrid}, probes.latest, problems)
    _compare(f"{label}, at the indexed version", {"at": out.at_indexed}, probes.at_indexed, problems)
    _compare(f"{label}, appended files alone", {"scan": out.scan_appended}, probes.appended_only, problems)
    return out


def _sql_literal(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def _local(uri: str) -> str:
    return uri[len("file://") :] if uri.startswith("file://") else uri


def _pyarrow_scan(path: Path, version: int) -> Callable[[str], pa.Table]:
    from deltalake import DeltaTable

    dset = DeltaTable(str(path), version=version).to_pyarrow_dataset()
    return lambda key: dset.to_table(filter=pc.field(KEY) == key)


def _files_scan(files: Sequence[str]) -> Callable[[str], pa.Table]:
    import pyarrow.dataset as pads

    dset = pads.dataset(list(files), format="parquet")
    return lambda key: dset.to_table(filter=pc.field(KEY) == key)


def _duckdb_scan(path: Path, version: int) -> Callable[[str], pa.Table]:
    import duckdb
    from deltalake import DeltaTable

    files = [_local(u) for u in DeltaTable(str(path), version=version).file_uris()]
    con = duckdb.connect()
    listed = ", ".join(_sql_literal(f) for f in files)
    con.sql(f"CREATE VIEW t AS SELECT * FROM read_parquet([{listed}])")
    return lambda key: con.sql(f"SELECT * FROM t WHERE {KEY} = {_sql_literal(key)}").to_arrow_table()


def _lance_query(uri: Path, *, locate: bool) -> Callable[[str], pa.Table]:
    import lance

    ds = lance.dataset(str(uri))
    if locate:
        return lambda key: ds.to_table(
            columns=["id"], filter=f"{KEY} = {_sql_literal(key)}", with_row_address=True
        )
    return lambda key: ds.to_table(filter=f"{KEY} = {_sql_literal(key)}")


def _spark_scan(table: Any, spark: Any, version: int | None = None) -> Callable[[str], list[Any]]:
    def scan(key: str) -> list[Any]:
        # A plain Spark scan: with indexes, Table.read would locate the key's file first.
        where = f"{KEY} = {_sql_literal(key)}"
        return table.read(spark, version_as_of=version, where=where, use_indexes=False).collect()

    return scan


# --------------------------------------------------------------------------- I/O counting


def _io_per_lookup(counters: IOCounters, n: int) -> dict[str, float]:
    out: dict[str, float] = {}
    for cat in ("index-log", "index-data", "table-log", "table-data"):
        out[f"{cat} opens"] = counters.opens[cat] / n
        out[f"{cat} reads"] = counters.reads[cat] / n
        out[f"{cat} KB"] = counters.bytes[cat] / n / 1024
        out[f"{cat} lists"] = counters.lists[cat] / n
    return out


def count_lookup_io(
    path: Path, keys: Sequence[str], *, locate: bool, cold: bool, warm_keys: Sequence[str] = ()
) -> dict[str, float]:
    """Average storage requests per lookup, by category (untimed pass)."""
    import lakehouse_index as li

    n = len(keys)
    table = li.open_table(str(path))
    call = table.locate if locate else table.lookup
    clear_engine_caches()
    with count_io(table.storage, table.source.io) as counters:
        if cold:
            # Each lookup from a fresh Table and empty footer caches (opening is counted too).
            for key in keys:
                clear_engine_caches()
                fresh = li.open_table(str(path))
                with count_io(fresh.storage, fresh.source.io) as inner:
                    (fresh.locate if locate else fresh.lookup)(INDEX, [key])
                for attr in ("opens", "reads", "bytes", "lists", "stats"):
                    getattr(counters, attr).update(getattr(inner, attr))
        else:
            # Populate the caches through the counting wrapper: a key in every data file.
            call(INDEX, [keys[0], *warm_keys])
            counters.reset()
            for key in keys:
                call(INDEX, [key])
    clear_engine_caches()  # drop handles opened through the wrapper
    return _io_per_lookup(counters, n)


def data_page_floor_kb(table: Any, keys: Sequence[str]) -> float:
    """Mean KB of the data pages holding each key's row, one page per column: the bytes a warm
    full-row lookup cannot avoid reading from these files (dictionaries cached), taken from
    each file's offset index."""
    import pyarrow.parquet as pq

    from lakehouse_index.read.page_index import load_page_index

    located = table.locate(INDEX, list(keys))
    sizes = []
    for uri, row in zip(located["_file"].to_pylist(), located["_row"].to_pylist(), strict=True):
        path = _local(uri)
        pf = pq.ParquetFile(path)
        with pa.OSFile(path) as handle:
            index = load_page_index(handle, pf.metadata, pf.schema_arrow)
        starts = np.cumsum([0] + [pf.metadata.row_group(g).num_rows for g in range(pf.num_row_groups)])
        group = int(np.searchsorted(starts, row, side="right")) - 1  # the row group holding the row
        first = int(starts[group])
        pages = [c for (g, _), c in index.chunks.items() if g == group]
        sizes.append(
            sum(int(c.page_sizes[np.searchsorted(c.page_rows, row - first, side="right") - 1]) for c in pages)
        )
    return float(np.mean(sizes)) / 1024


def duckdb_in(path: Path, version: int) -> Callable[[list[str]], pa.Table]:
    import duckdb
    from deltalake import DeltaTable

    files = [_local(u) for u in DeltaTable(str(path), version=version).file_uris()]
    con = duckdb.connect()
    listed = ", ".join(_sql_literal(f) for f in files)
    con.sql(f"CREATE VIEW t AS SELECT * FROM read_parquet([{listed}])")

    def query(keys: list[str]) -> pa.Table:
        values = ", ".join(_sql_literal(k) for k in keys)
        return con.sql(f"SELECT * FROM t WHERE {KEY} IN ({values})").to_arrow_table()

    return query


def lance_in(uri: Path) -> Callable[[list[str]], pa.Table]:
    import lance

    ds = lance.dataset(str(uri))

    def query(keys: list[str]) -> pa.Table:
        values = ", ".join(_sql_literal(k) for k in keys)
        return ds.to_table(filter=f"{KEY} IN ({values})")

    return query


# --------------------------------------------------------------------------- the run


def run(scale: str, *, workdir: Path | None = None, log: Callable[[str], None] = print) -> LookupResults:
    """Run W1, W3 and W2 at ``scale``; returns every measurement (nothing is written)."""
    import lance

    import lakehouse_index as li
    from lakehouse_index.spark import get_spark

    sc = SCALES[scale]
    params = datagen.TableParams(sc.rows, sc.files)
    res = LookupResults(scale, params)
    problems = res.disagreements
    cached = datagen.delta_table(params)
    lance_cached = datagen.lance_dataset(params, KEY)
    own_tmp = workdir is None
    work = Path(tempfile.mkdtemp(prefix="bench-lookup-")) if workdir is None else workdir
    try:
        path = datagen.work_copy(cached, work / "delta")
        lance_uri = datagen.lance_work_copy(lance_cached, work / "data.lance")
        spark = get_spark(master="local[2]")
        table = li.open_table(str(path))
        v_a = table.latest_version()
        res.versions["indexed"] = v_a
        log(f"building the index on {sc.rows:,} rows / {sc.files} files")
        res.index_build_s, _ = timed(
            lambda: table.create_index(li.SecondaryIndex(INDEX, key=KEY, record_key="id"), spark=spark)
        )

        log("building a covering index of every column (index-only full rows)")
        others = [c for c in table.snapshot().schema.names if c != KEY]
        res.covering_build_s, cov_info = timed(
            lambda: table.create_index(li.CoveringIndex(COVERING, indexed=KEY, included=others), spark=spark)
        )
        res.covering_bytes = cov_info.size_bytes

        rng = np.random.default_rng(2024)
        probe_ids = rng.choice(sc.rows, size=max(sc.reps, 3), replace=False)
        keys = [datagen.email_of(int(i)) for i in probe_ids]
        missing = datagen.email_of(10**9 + 7)
        expect: dict[str, tuple[int, ...]] = {datagen.email_of(int(i)): (int(i),) for i in probe_ids}
        expect[missing] = ()
        res.expected["W1"] = expect

        # ---------------------------------------------------------------- W1
        settle(spark, sc.settle_seconds)
        log("W1: index lookup / locate")
        w1 = res.w1
        fns: dict[str, Callable[[str], Any]] = {
            "lookup": lambda k: table.lookup(INDEX, [k]),
            "covering": lambda k: table.lookup(COVERING, [k]),
            "locate": lambda k: table.locate(INDEX, [k]),
            "lance": _lance_query(lance_uri, locate=False),
            "lance_locate": _lance_query(lance_uri, locate=True),
            "duckdb": _duckdb_scan(path, v_a),
            "pyarrow": _pyarrow_scan(path, v_a),
            "spark": _spark_scan(table, spark),
        }
        every_file = [datagen.email_of(int(ids[0])) for ids in params.file_ids()]
        w1["lookup"] = measure(
            MethodResult("index lookup (full rows)"),
            fns["lookup"],
            keys,
            sc.reps,
            full_rows=True,
            problems=problems,
            warmup=lambda: table.lookup(INDEX, every_file),
            cold_setup=lambda: _cold_index(path, locate=False),
            cold_reps=sc.slow_reps,
        )
        w1["covering"] = measure(
            MethodResult("covering index of every column (full rows, index only)"),
            fns["covering"],
            keys,
            sc.reps,
            full_rows=True,
            problems=problems,
            # The lookup pass's cold calls cleared the caches: warm them as it did.
            warmup=lambda: table.lookup(COVERING, every_file),
            cold_setup=lambda: _cold_index(path, locate=False, index=COVERING),
            cold_reps=sc.slow_reps,
        )
        w1["locate"] = measure(
            MethodResult("index locate"),
            fns["locate"],
            keys,
            sc.reps,
            full_rows=False,
            problems=problems,
            warmup=lambda: table.locate(INDEX, every_file),
            cold_setup=lambda: _cold_index(path, locate=True),
            cold_reps=sc.slow_reps,
        )
        log("W1: Lance")
        w1["lance"] = measure(
            MethodResult("Lance BTREE (full rows)"),
            fns["lance"],
            keys,
            sc.reps,
            full_rows=True,
            problems=problems,
            cold_setup=lambda: _lance_query(lance_uri, locate=False),
            cold_reps=sc.slow_reps,
        )
        w1["lance_locate"] = measure(
            MethodResult("Lance BTREE (id + row address)"),
            fns["lance_locate"],
            keys,
            sc.reps,
            full_rows=False,
            problems=problems,
            cold_setup=lambda: _lance_query(lance_uri, locate=True),
            cold_reps=sc.slow_reps,
        )
        log("W1: DuckDB / pyarrow / Spark scans")
        w1["duckdb"] = measure(
            MethodResult("DuckDB read_parquet scan"),
            fns["duckdb"],
            keys,
            sc.reps,
            full_rows=True,
            problems=problems,
            cold_setup=lambda: _duckdb_scan(path, v_a),
            cold_reps=sc.slow_reps,
        )
        w1["pyarrow"] = measure(
            MethodResult("pyarrow dataset scan"),
            fns["pyarrow"],
            keys,
            sc.reps,
            full_rows=True,
            problems=problems,
            cold_setup=lambda: _pyarrow_scan(path, v_a),
            cold_reps=sc.slow_reps,
        )
        w1["spark"] = measure(
            MethodResult("plain Spark scan (Table.read, use_indexes=False)", note="warm only"),
            fns["spark"],
            keys,
            sc.slow_reps,
            full_rows=False,
            problems=problems,
        )
        for name, m in w1.items():
            m.answers[missing] = _ids(fns[name](missing))
        _compare("W1", w1, expect, problems)

        log("W1: counting index object reads")
        n_io = min(len(keys), 10)
        res.io["lookup, warm"] = count_lookup_io(
            path, keys[:n_io], locate=False, cold=False, warm_keys=every_file
        )
        res.io["locate, warm"] = count_lookup_io(
            path, keys[:n_io], locate=True, cold=False, warm_keys=every_file
        )
        res.io["lookup, cold"] = count_lookup_io(path, keys[:3], locate=False, cold=True)
        res.data_floor_kb = data_page_floor_kb(table, keys[:n_io])

        # ---------------------------------------------------------------- W3
        n_probes = max(sc.reps, 4)
        n_low = max(1, round(sc.files * sc.low_share))
        n_app = max(n_low + 1, round(sc.files * sc.append_share))
        before = set(_file_uris(path, None))

        def appended_since(before: set[str]) -> list[str]:
            return sorted(_local(u) for u in set(_file_uris(path, None)) - before)

        log(f"W3: appending {n_low} file(s) (one commit each) without refreshing the index")
        low_ids = datagen.append_files(path, sc.rows, n_low, params.rows_per_file)
        table = li.open_table(str(path))
        res.w3_shares.append(
            measure_hybrid_share(
                table,
                v_a,
                sc.files,
                appended_since(before),
                hybrid_probes(expect, rng.choice(low_ids, size=len(keys)).tolist(), n_probes),
                reps=sc.reps,
                warm_keys=every_file,
                problems=problems,
            )
        )
        log(f"W3: appending {n_app - n_low} more files, {n_app} in all")
        new_ids = np.concatenate(
            [
                low_ids,
                datagen.append_files(path, sc.rows + len(low_ids), n_app - n_low, params.rows_per_file),
            ]
        )
        appended = appended_since(before)
        table = li.open_table(str(path))
        v_b = table.latest_version()
        v_mid = v_a + 1
        res.versions.update(latest=v_b, between=v_mid)
        # New keys alternate between the first appended file (live at the version in between,
        # used by W2) and the last one (not yet live there).
        first_new, last_new = new_ids[: params.rows_per_file], new_ids[-params.rows_per_file :]
        new_probe = [int(rng.choice(first_new if j % 2 == 0 else last_new)) for j in range(len(keys))]
        probes3 = hybrid_probes(expect, new_probe, n_probes)
        keys3, expect3 = probes3.keys, probes3.latest
        res.expected["W3"] = expect3
        res.expected["W3 at indexed version"] = probes3.at_indexed

        w3 = res.w3
        share = measure_hybrid_share(
            table,
            v_a,
            sc.files,
            appended,
            probes3,
            reps=sc.reps,
            warm_keys=every_file,
            problems=problems,
        )
        res.w3_shares.append(share)
        w3["hybrid"], w3["at_indexed"] = share.hybrid, share.at_indexed
        w3["scan_appended"] = share.scan_appended
        # Warm as in the timed pass: the probes' appended files' key columns are cached too.
        res.io["hybrid lookup (W3), warm"] = count_lookup_io(
            path, keys3[:4], locate=False, cold=False, warm_keys=[*every_file, *keys3[:4]]
        )
        w3["duckdb"] = measure(
            MethodResult("DuckDB read_parquet scan (whole version)"),
            _duckdb_scan(path, v_b),
            keys3,
            sc.reps,
            full_rows=True,
            problems=problems,
        )
        lance_ds = lance.dataset(str(lance_uri))
        lance_indexed_version = lance_ds.version
        lance.write_dataset(datagen.rows_for(new_ids), str(lance_uri), mode="append")
        w3["lance"] = measure(
            MethodResult("Lance, appended fragments not indexed"),
            _lance_query(lance_uri, locate=False),
            keys3,
            sc.reps,
            full_rows=True,
            problems=problems,
        )
        w3["lance"].note = f"index covers version {lance_indexed_version}"

        ok, msg = not_available(lambda: table.refresh_index(INDEX, "quick", spark=spark))
        if ok:
            w3["quick"] = measure(
                MethodResult("hybrid lookup after quick refresh"),
                lambda k: table.lookup(INDEX, [k]),
                keys3,
                sc.reps,
                full_rows=True,
                problems=problems,
            )
        else:
            res.notes.append(f"quick refresh: {msg}")
        log("W3: refreshing the index")
        res.refresh_mode = "incremental"
        ok, out = not_available(lambda: timed(lambda: table.refresh_index(INDEX, "incremental", spark=spark)))
        if not ok:
            res.notes.append(f"incremental refresh: {out}; W3/W2 use a full refresh instead")
            res.refresh_mode = "full"
            out = timed(lambda: table.refresh_index(INDEX, "full", spark=spark))
        res.refresh_s = out[0]
        w3["refreshed"] = measure(
            MethodResult(f"index lookup after {res.refresh_mode} refresh"),
            lambda k: table.lookup(INDEX, [k]),
            keys3,
            sc.reps,
            full_rows=True,
            problems=problems,
        )
        _compare(
            "W3", {k: m for k, m in w3.items() if k not in ("at_indexed", "scan_appended")}, expect3, problems
        )

        # ---------------------------------------------------------------- W2
        log("W2: time travel between index snapshots")
        # At v_mid only the first appended file exists.
        first_file_ids = set(new_ids[: params.rows_per_file].tolist())
        expect2: dict[str, tuple[int, ...]] = dict(expect)
        expect2.update({datagen.email_of(i): ((i,) if i in first_file_ids else ()) for i in new_probe})
        res.expected["W2 between"] = expect2
        w2 = res.w2
        w2["latest"] = measure(
            MethodResult(f"lookup at the indexed version {v_b}"),
            lambda k: table.lookup(INDEX, [k]),
            keys3,
            sc.reps,
            full_rows=True,
            problems=problems,
        )
        w2["between"] = measure(
            MethodResult(f"lookup at version {v_mid} (between snapshots {v_a} and {v_b})"),
            lambda k: table.lookup(INDEX, [k], version_as_of=v_mid),
            keys3,
            sc.reps,
            full_rows=True,
            problems=problems,
        )
        w2["oracle"] = measure(
            MethodResult(f"pyarrow scan at version {v_mid}"),
            _pyarrow_scan(path, v_mid),
            keys3,
            sc.reps,
            full_rows=True,
            problems=problems,
        )
        _compare("W2 between", {"between": w2["between"], "oracle": w2["oracle"]}, expect2, problems)
        _compare("W2 latest", {"latest": w2["latest"]}, expect3, problems)

        # ------------------------------------------------- W3 at the high share
        indexed_files = sc.files + n_app
        n_high = max(1, round(indexed_files * sc.high_share))
        log(f"W3: appending {n_high} files on top of the refreshed index")
        refreshed = set(_file_uris(path, None))
        high_ids = datagen.append_files(path, sc.rows + len(new_ids), n_high, params.rows_per_file)
        table = li.open_table(str(path))
        res.w3_shares.append(
            measure_hybrid_share(
                table,
                v_b,
                indexed_files,
                appended_since(refreshed),
                hybrid_probes(expect3, rng.choice(high_ids, size=len(keys3)).tolist(), n_probes),
                reps=sc.reps,
                warm_keys=every_file,
                problems=problems,
            )
        )
    finally:
        clear_engine_caches()
        if own_tmp:
            shutil.rmtree(work, ignore_errors=True)
    return res


def _cold_index(path: Path, *, locate: bool, index: str = INDEX) -> Callable[[str], pa.Table]:
    import lakehouse_index as li

    clear_engine_caches()
    fresh = li.open_table(str(path))
    return (lambda k: fresh.locate(index, [k])) if locate else (lambda k: fresh.lookup(index, [k]))


def _file_uris(path: Path, version: int | None) -> list[str]:
    from deltalake import DeltaTable

    dt = DeltaTable(str(path)) if version is None else DeltaTable(str(path), version=version)
    return list(dt.file_uris())


# --------------------------------------------------------------------------- report


def render(res: LookupResults) -> str:
    """The Markdown section for docs/BENCHMARKS.md."""
    from integration.bench.report import markdown_table

    p = res.params
    w1, w2, w3 = res.w1, res.w2, res.w3
    lk, lc = w1["lookup"].warm.median, w1["locate"].warm.median
    warm_reads = res.io.get("lookup, warm", {}).get("index-data reads", float("nan"))
    lines = [
        f"Scale **{res.scale}**: {p.rows:,} rows in {p.files} data files ({p.rows_per_file:,} rows per file, "
        f"one row group each as deltalake writes them), keys spread over all files; probe "
        f"`email = '<address>'`, one row per key. Medians of {len(w1['lookup'].warm.samples)} warm "
        f"repetitions (Spark: {len(w1['spark'].warm.samples)}), a different key each. Warm = footers, "
        "Lance index cache, DuckDB connection and Spark session populated by an untimed first call; "
        "cold = fresh `open_table`/`DeltaTable`/connection/`lance.dataset` and the engine's footer "
        "caches cleared (opening is timed). The OS page cache is warm in both. "
        f"Index build before the run: {fmt_ms(res.index_build_s)}; covering index of every column: "
        f"{fmt_ms(res.covering_build_s)}, {res.covering_bytes / 2**20:.0f} MiB. Load average at the end: "
        f"{load_average():.1f}.",
        "",
        "### W1: point lookup at the latest version",
        "",
        markdown_table(
            ["method", "warm (median)", "cold (median)", "index speed-up (warm)"],
            [
                [
                    m.name,
                    fmt_ms(m.warm.median),
                    fmt_ms(m.cold.median) if m.cold.samples else "-",
                    fmt_ratio(ratio(m.warm.median, lc if "locate" in k else lk))
                    if k not in ("lookup", "locate")
                    else "-",
                ]
                for k, m in w1.items()
            ],
        ),
        "",
        markdown_table(
            ["goal (issue 6, W1)", "measured", "goal", "verdict"],
            [
                [
                    "index lookup vs Spark scan",
                    fmt_ratio(ratio(w1["spark"].warm.median, lk)),
                    "≥ 100x",
                    verdict(ratio(w1["spark"].warm.median, lk), 100, higher_is_better=True),
                ],
                [
                    "index lookup vs DuckDB scan (issue 18)",
                    fmt_ratio(ratio(w1["duckdb"].warm.median, lk)),
                    "≥ 15x",
                    verdict(ratio(w1["duckdb"].warm.median, lk), 15, higher_is_better=True),
                ],
                [
                    "index lookup / Lance (full rows, issue 18)",
                    fmt_ratio(ratio(lk, w1["lance"].warm.median)),
                    "≤ 2x",
                    verdict(ratio(lk, w1["lance"].warm.median), 2, higher_is_better=False),
                ],
                [
                    "data-file KB per warm lookup (issue 18)",
                    f"{res.io.get('lookup, warm', {}).get('table-data KB', float('nan')):.0f} KB",
                    "≤ 64 KB",
                    verdict(
                        res.io.get("lookup, warm", {}).get("table-data KB", float("nan")),
                        64,
                        higher_is_better=False,
                    ),
                ],
                [
                    "covering index (every column, index only) vs Spark scan",
                    fmt_ratio(ratio(w1["spark"].warm.median, w1["covering"].warm.median)),
                    "≥ 100x",
                    verdict(
                        ratio(w1["spark"].warm.median, w1["covering"].warm.median), 100, higher_is_better=True
                    ),
                ],
                [
                    "covering index (every column, index only) vs DuckDB scan",
                    fmt_ratio(ratio(w1["duckdb"].warm.median, w1["covering"].warm.median)),
                    "≥ 10x",
                    verdict(
                        ratio(w1["duckdb"].warm.median, w1["covering"].warm.median), 10, higher_is_better=True
                    ),
                ],
                [
                    "index lookup / Lance (full rows)",
                    fmt_ratio(ratio(lk, w1["lance"].warm.median)),
                    "≤ 5x",
                    verdict(ratio(lk, w1["lance"].warm.median), 5, higher_is_better=False),
                ],
                [
                    "index locate / Lance (id + row address)",
                    fmt_ratio(ratio(lc, w1["lance_locate"].warm.median)),
                    "≤ 2x",
                    verdict(ratio(lc, w1["lance_locate"].warm.median), 2, higher_is_better=False),
                ],
            ],
        ),
        "",
        "Storage requests per lookup (counted through a wrapped pyarrow filesystem; a read is one "
        "ranged GET on an object store):",
        "",
        markdown_table(
            [
                "pass",
                "index data: opens / reads / KB",
                "index log: reads / lists",
                "table log: reads / lists",
                "data files: opens / reads / KB",
            ],
            [
                [
                    name,
                    f"{c['index-data opens']:.1f} / {c['index-data reads']:.1f} / {c['index-data KB']:.0f}",
                    f"{c['index-log reads']:.1f} / {c['index-log lists']:.1f}",
                    f"{c['table-log reads']:.1f} / {c['table-log lists']:.1f}",
                    f"{c['table-data opens']:.1f} / {c['table-data reads']:.1f} / {c['table-data KB']:.0f}",
                ]
                for name, c in res.io.items()
            ],
        ),
        "",
        f"Goal ≤ 3 index object reads per key (warm): measured {warm_reads:.1f} → "
        f"{verdict(warm_reads, 3, higher_is_better=False)}.",
        "",
        f"Floor: the data pages holding a probed row, one per column, total {res.data_floor_kb:.0f} KB on "
        "average (from the files' offset indexes); the warm lookup read "
        f"{res.io.get('lookup, warm', {}).get('table-data KB', float('nan')):.0f} KB. A compressed page is "
        "fetched and decompressed whole, so no reader can fetch less from these files (row groups of at "
        "most `page_read_min_rows` rows are read whole instead). deltalake writes pages of up to 20,480 "
        "rows; on this data a lookup within 64 KB needs pages of about 2,048 rows "
        '(`WriterProperties(data_page_row_count_limit=2048, compression="SNAPPY")`: measured in the '
        "page-size table of the lookup-paths section below).",
        "",
        "Batch lookups (10 to 10,000 keys, with Lance's and DuckDB's `IN`): see the batch-lookup section.",
        "",
    ]
    hy = w3["hybrid"].warm.median
    summ = w3["at_indexed"].warm.median + w3["scan_appended"].warm.median
    tt_ratio = ratio(w2["between"].warm.median, w2["latest"].warm.median)
    lines += [
        f"### W3: {res.versions.get('latest', 0) - res.versions.get('indexed', 0)} files "
        f"({100 * (res.versions.get('latest', 0) - res.versions.get('indexed', 0)) / p.files:.0f}%) "
        "appended, index not refreshed",
        "",
        markdown_table(
            ["method", "warm (median)", "note"],
            [[m.name, fmt_ms(m.warm.median), m.note] for m in w3.values()]
            + [["index lookup at indexed version + scan of appended files (sum)", fmt_ms(summ), ""]],
        ),
        "",
        markdown_table(
            ["goal (issue 6, W3)", "measured", "goal", "verdict"],
            [
                [
                    "hybrid / (index lookup + scan of appended) (issue 18)",
                    fmt_ratio(ratio(hy, summ)),
                    "≤ 1.3x",
                    verdict(ratio(hy, summ), 1.3, higher_is_better=False),
                ],
                [
                    "DuckDB whole-version scan / hybrid",
                    fmt_ratio(ratio(w3["duckdb"].warm.median, hy)),
                    "≥ 10x",
                    verdict(ratio(w3["duckdb"].warm.median, hy), 10, higher_is_better=True),
                ],
            ],
        ),
        "",
        *_render_shares(res),
        f"Refresh used to close the gap: **{res.refresh_mode}** ({fmt_ms(res.refresh_s)}).",
        "",
        "### W2: time travel between two index snapshots",
        "",
        markdown_table(["method", "warm (median)"], [[m.name, fmt_ms(m.warm.median)] for m in w2.values()]),
        "",
        markdown_table(
            ["goal (issue 6, W2)", "measured", "goal", "verdict"],
            [
                [
                    "lookup between snapshots / at indexed version",
                    fmt_ratio(tt_ratio),
                    "≤ 2x",
                    verdict(tt_ratio, 2, higher_is_better=False),
                ]
            ],
        ),
        "",
    ]
    if res.notes:
        lines += ["Not measured yet: " + "; ".join(res.notes), ""]
    if res.disagreements:
        lines += ["**ANSWERS DISAGREE** (correctness problem, numbers above are not valid):", ""]
        lines += [f"* {d}" for d in res.disagreements] + [""]
    else:
        lines += [
            "Every method returned the same ids for every probe (and none for a missing key), "
            "and every full row matched the generated row.",
            "",
        ]
    lines += ["**What this shows.** " + _summary(res)]
    return "\n".join(lines)


def _render_shares(res: LookupResults) -> list[str]:
    """W3 against the share of appended files: the hybrid lookup next to its floor."""
    from integration.bench.report import markdown_table

    if not res.w3_shares:
        return []
    rows = [
        [
            f"{s.appended} of {s.indexed} ({100 * s.share:.0f}%)",
            fmt_ms(s.hybrid.warm.median),
            fmt_ms(s.at_indexed.warm.median),
            fmt_ms(s.scan_appended.warm.median),
            fmt_ratio(ratio(s.hybrid.warm.median, s.floor)),
            verdict(ratio(s.hybrid.warm.median, s.floor), 1.3, higher_is_better=False),
        ]
        for s in res.w3_shares
    ]
    return [
        "Hybrid lookup against the share of appended files (the largest share on top of the "
        "refreshed index; each row's probes alternate indexed keys and keys of its appended files):",
        "",
        markdown_table(
            [
                "files appended (of indexed)",
                "hybrid lookup",
                "lookup at indexed version",
                "scan of appended files",
                "hybrid / (lookup + scan)",
                "goal ≤ 1.3x",
            ],
            rows,
        ),
        "",
    ]


def results(res: LookupResults) -> dict[str, Any]:
    """The JSON results: every method's warm and cold timings per workload, the table's size."""

    def methods(ms: dict[str, MethodResult]) -> list[dict[str, Any]]:
        return [
            {"method": key, "label": m.name, "warm": m.warm.to_json(), "cold": m.cold.to_json()}
            for key, m in ms.items()
        ]

    return {
        "scale": res.scale,
        "rows": res.params.rows,
        "files": res.params.files,
        "versions": dict(res.versions),
        "w1": methods(res.w1),
        "w2": methods(res.w2),
        "w3": methods(res.w3),
        "w3_shares": [
            {
                "appended_files": s.appended,
                "indexed_files": s.indexed,
                "hybrid": s.hybrid.warm.to_json(),
                "at_indexed": s.at_indexed.warm.to_json(),
                "scan_appended": s.scan_appended.warm.to_json(),
            }
            for s in res.w3_shares
        ],
        "index_build_s": res.index_build_s,
        "refresh": {"mode": res.refresh_mode, "seconds": res.refresh_s},
        "io": res.io,
        "data_page_floor_kb": res.data_floor_kb,
        "answers_agree": not res.disagreements,
    }


def _summary(res: LookupResults) -> str:
    w1 = res.w1
    lk = w1["lookup"].warm.median
    lc = w1["locate"].warm.median
    io = res.io.get("lookup, warm", {})
    parts = [
        f"A warm index lookup of one full row took {fmt_ms(lk)} ({fmt_ms(lc)} to locate); speed-up of the "
        f"index over a Spark scan {fmt_ratio(ratio(w1['spark'].warm.median, lk))}, over DuckDB "
        f"{fmt_ratio(ratio(w1['duckdb'].warm.median, lk))} (above 1x means the index is faster); Lance's "
        f"BTREE answered in {fmt_ms(w1['lance'].warm.median)}.",
        f"Per warm lookup the engine made {io.get('index-data reads', float('nan')):.1f} index-data reads "
        f"({io.get('index-data KB', float('nan')):.0f} KB) and read "
        f"{io.get('table-data KB', float('nan')):.0f} KB of the data file, and listed the table log "
        f"{io.get('table-log lists', float('nan')):.1f} times (the latest version is re-resolved per call).",
        f"With {res.versions.get('latest', 0) - res.versions.get('indexed', 0)} appended files not yet "
        "indexed, the hybrid lookup took "
        f"{fmt_ms(res.w3['hybrid'].warm.median)}, "
        f"and time travel between snapshots {fmt_ms(res.w2['between'].warm.median)} vs "
        f"{fmt_ms(res.w2['latest'].warm.median)} at the indexed version.",
    ]
    if res.scale != "full":
        parts.append(f"This is the `{res.scale}` scale; the goals are stated for the `full` scale (5M rows).")
    return " ".join(parts)


def main(argv: list[str] | None = None) -> LookupResults:
    """Command line entry: run, print, write the docs/BENCHMARKS.md section (unless ``--no-report``)."""
    return bench_main(
        argv,
        description=__doc__.split("\n")[0],
        scales=list(SCALES),
        run=run,
        render=render,
        section=("lookup", "Point lookups (issue 6: W1, W2, W3)", SCRIPT),
        results=results,
    )


if __name__ == "__main__":
    main()
