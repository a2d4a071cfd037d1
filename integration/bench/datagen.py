"""Deterministic benchmark data: Delta tables written with deltalake, and Lance copies of them.

A generated table has ``rows`` rows in exactly ``files`` data files, one file per commit
(so the table has versions ``0 .. files-1``). The row ids are a seeded permutation of
``0 .. rows-1`` dealt out to the files in order, so every file holds ids from the whole
range: min/max statistics prune nothing and a point lookup without an index must scan
every file (the "needle in a haystack" case). Every other column is a pure function of
the id, so appended rows, the Lance copy and any oracle agree without sharing state.

Columns: ``id`` (int64, unique), ``email`` (unique string derived from the id),
``ts``, ``country``, ``amount``, ``status`` and ``payload`` (24 incompressible hex
characters, so files have a realistic size).

Generated tables are cached under ``~/.cache/lakehouse-index/bench/<params>`` (or
``$LAKEHOUSE_INDEX_BENCH_CACHE``): a rerun with the same parameters reuses them. A cache
directory is complete only when its ``COMPLETE`` marker exists; generation writes into a
scratch directory and renames it into place. Benchmarks that write (indexes, appends)
work on :func:`work_copy`, which hard-links the immutable Parquet files and copies the rest.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

#: Bump when the generated data changes, so stale caches are not reused.
GEN_VERSION = 1
CACHE_ENV = "LAKEHOUSE_INDEX_BENCH_CACHE"
COMPLETE = "COMPLETE"

_COUNTRIES = [f"C{i:02d}" for i in range(50)]
_TS0 = 1_700_000_000_000_000  # microseconds since the epoch

SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("email", pa.string()),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("country", pa.string()),
        ("amount", pa.float64()),
        ("status", pa.int32()),
        ("payload", pa.string()),
    ]
)


def cache_root() -> Path:
    """The benchmark data cache directory."""
    env = os.environ.get(CACHE_ENV)
    return Path(env) if env else Path.home() / ".cache" / "lakehouse-index" / "bench"


def email_of(i: int) -> str:
    """The email of row ``i`` (unique per id)."""
    return f"user{i:010d}@example.com"


def id_of(email: str) -> int:
    """The id of the row whose email is ``email`` (the inverse of :func:`email_of`)."""
    return int(email.removeprefix("user").removesuffix("@example.com"))


def rows_for(ids: np.ndarray) -> pa.Table:
    """The rows with the given ids (every column derived from the id)."""
    ids = np.asarray(ids, dtype=np.int64)
    id_list = ids.tolist()
    payload = [hashlib.blake2b(i.to_bytes(8, "little"), digest_size=12).hexdigest() for i in id_list]
    country_idx = (ids * 7919) % len(_COUNTRIES)
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "email": pa.array([email_of(i) for i in id_list], pa.string()),
            "ts": pa.array(_TS0 + ids * 37_000_000, pa.timestamp("us", tz="UTC")),
            "country": pa.array([_COUNTRIES[c] for c in country_idx.tolist()], pa.string()),
            "amount": pa.array(((ids * 2_654_435_761) % 1_000_000) / 100.0, pa.float64()),
            "status": pa.array((ids % 5).astype(np.int32), pa.int32()),
            "payload": pa.array(payload, pa.string()),
        },
        schema=SCHEMA,
    )


@dataclass(frozen=True)
class TableParams:
    """Shape of a generated Delta table."""

    rows: int
    files: int
    seed: int = 7
    #: Rows per data page (deltalake's ``data_page_row_count_limit``); None: its default,
    #: which gives pages of 20,480 rows (20,000, checked every 1,024-row batch).
    page_rows: int | None = None
    #: Bytes of a column chunk's dictionary page at most (deltalake's
    #: ``dictionary_page_size_limit``; past it the writer falls back to plain pages); None: its
    #: default, 1 MB.
    dict_bytes: int | None = None

    @property
    def name(self) -> str:
        """Cache directory name (every parameter that changes the data is in it)."""
        pages = "" if self.page_rows is None else f"-p{self.page_rows}"
        dicts = "" if self.dict_bytes is None else f"-d{self.dict_bytes}"
        return f"delta-r{self.rows}-f{self.files}-s{self.seed}{pages}{dicts}-g{GEN_VERSION}"

    @property
    def rows_per_file(self) -> int:
        """Rows in each file (the last file takes the remainder)."""
        return -(-self.rows // self.files)

    def file_ids(self) -> list[np.ndarray]:
        """The ids of each data file, in commit order."""
        perm = np.random.default_rng(self.seed).permutation(self.rows)
        return [perm[i : i + self.rows_per_file] for i in range(0, self.rows, self.rows_per_file)]


def _write_files(
    path: Path, chunks: list[np.ndarray], page_rows: int | None = None, dict_bytes: int | None = None
) -> None:
    from deltalake import WriterProperties, write_deltalake

    props = None
    if page_rows is not None or dict_bytes is not None:
        # Given properties replace all of deltalake's defaults: keep its Snappy compression.
        props = WriterProperties(
            data_page_row_count_limit=page_rows, dictionary_page_size_limit=dict_bytes, compression="SNAPPY"
        )
    for ids in chunks:
        # One small write_deltalake call writes exactly one data file and one commit.
        if props is None:
            write_deltalake(str(path), rows_for(ids), mode="append")
        else:
            write_deltalake(str(path), rows_for(ids), mode="append", writer_properties=props)


def _parquet_files(path: Path) -> list[Path]:
    return sorted(p for p in path.rglob("*.parquet") if "_delta_log" not in p.parts)


def _publish(scratch: Path, final: Path) -> None:
    """Move the complete ``scratch`` to ``final`` (one rename). When another process (a
    parallel test worker, a second benchmark) published ``final`` first, its copy stays, as
    it may be in use, and ``scratch`` is left for the caller to remove. A ``final`` without
    its completion mark (left by an older version of this module) is replaced."""
    if (final / COMPLETE).exists():
        return
    if final.exists():
        shutil.rmtree(final)
    try:
        os.rename(scratch, final)
    except OSError:
        if not (final / COMPLETE).exists():  # not a race lost to another publisher
            raise


def delta_table(params: TableParams, *, log: bool = True) -> Path:
    """The cached Delta table for ``params`` (generated on first use)."""
    final = cache_root() / params.name
    if (final / COMPLETE).exists():
        return final / "table"
    final.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{params.name}-", dir=final.parent))
    try:
        chunks = params.file_ids()
        if len(chunks) != params.files:
            raise ValueError(f"{params.rows} rows cannot be dealt into {params.files} non-empty files")
        if log:
            print(f"generating {params.rows:,} rows / {params.files} files into {final}", flush=True)
        _write_files(scratch / "table", chunks, params.page_rows, params.dict_bytes)
        found = len(_parquet_files(scratch / "table"))
        if found != params.files:
            raise RuntimeError(f"deltalake wrote {found} files for {params.files} commits")
        (scratch / COMPLETE).write_text("ok\n")
        _publish(scratch, final)
    finally:
        if scratch.exists():
            shutil.rmtree(scratch)
    return final / "table"


def append_files(table: Path, first_id: int, n_files: int, rows_per_file: int, seed: int = 11) -> np.ndarray:
    """Append ``n_files`` files (one commit each) holding ids ``first_id ..``; returns the new ids.

    File ``j`` holds exactly the ids ``first_id + j * rows_per_file`` up to the next file's
    first id (shuffled inside the file), so after ``m`` of these commits id ``i`` exists iff
    ``i < first_id + m * rows_per_file``: tests derive the answer at every version from that.
    """
    rng = np.random.default_rng(seed + first_id)
    chunks = [first_id + j * rows_per_file + rng.permutation(rows_per_file) for j in range(n_files)]
    _write_files(table, chunks)
    return np.concatenate(chunks)


def work_copy(table: Path, dest: Path) -> Path:
    """A writable copy of ``table`` at ``dest``: Parquet data files hard-linked, everything else copied.

    Data files are immutable, so sharing their inodes with the cache is safe; the Delta log
    is copied because writers replace files in it (``_last_checkpoint``).
    """

    def link_or_copy(src: str, dst: str) -> str:
        if src.endswith(".parquet") and "_delta_log" not in Path(src).parts:
            try:
                os.link(src, dst)
                return dst
            except OSError:
                pass
        return str(shutil.copy2(src, dst))

    shutil.copytree(table, dest, copy_function=link_or_copy)
    return dest


def table_bytes(table: Path) -> int:
    """Bytes of all Parquet data files under ``table`` (every file is live: appends only)."""
    return sum(p.stat().st_size for p in _parquet_files(table))


def lance_dataset(params: TableParams, key: str, *, log: bool = True) -> Path:
    """A cached Lance dataset with the same rows as ``delta_table(params)`` and a BTREE index on ``key``."""
    import lance

    final = cache_root() / f"{params.name}-lance-{key}"
    if (final / COMPLETE).exists():
        return final / "data.lance"
    source = delta_table(params, log=log)
    final.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{final.name}-", dir=final.parent))
    try:
        if log:
            print(f"writing the Lance copy into {final}", flush=True)
        import pyarrow.dataset as pads

        data = pads.dataset([str(p) for p in _parquet_files(source)], format="parquet").to_table()
        ds = lance.write_dataset(data.cast(SCHEMA), str(scratch / "data.lance"))
        ds.create_scalar_index(key, "BTREE")
        (scratch / COMPLETE).write_text("ok\n")
        _publish(scratch, final)
    finally:
        if scratch.exists():
            shutil.rmtree(scratch)
    return final / "data.lance"


def lance_work_copy(dataset: Path, dest: Path) -> Path:
    """A writable copy of a Lance dataset: data files hard-linked, manifests and indexes copied."""

    def link_or_copy(src: str, dst: str) -> str:
        if "data" in Path(src).relative_to(dataset).parts[:1]:
            try:
                os.link(src, dst)
                return dst
            except OSError:
                pass
        return str(shutil.copy2(src, dst))

    shutil.copytree(dataset, dest, copy_function=link_or_copy)
    return dest
