"""A data file rewritten in place (same path, new bytes) is never served from a cache.

A path is immutable in a lakehouse table, but an external tool may rewrite a table in
place, and a log may not record what identifies the bytes (Iceberg has no modification
time; the log here keeps claiming the old size and mtime 0). The footer, page-index,
dictionary and scan-key caches are keyed by what the store reports when the file is
opened (size and ETag on S3, size and mtime in ns on local disk), so every read below
must equal a plain pyarrow read of the file's current bytes.
"""

from __future__ import annotations

import dataclasses
import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import deltalake
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lakehouse_index_delta import DeltaSource

from lakehouse_index.config import ReadConfig, configure_caches
from lakehouse_index.io import Storage
from lakehouse_index.read import footers
from lakehouse_index.read.datafiles import read_file
from lakehouse_index.source import FileEntry, Snapshot
from tests.support.moto import moto_s3, s3_client

#: Rows per file: above ReadConfig().page_read_min_rows, so point reads go page by page.
ROWS = ReadConfig().page_read_min_rows + 2_000


@pytest.fixture(autouse=True)
def fresh_caches() -> Iterator[None]:
    configure_caches()
    footers.clear_footer_cache()
    yield
    footers.clear_footer_cache()


def _bytes(order: np.ndarray, tag: str) -> bytes:
    """A Parquet file of ROWS rows in ``order``: unique fixed-width keys, dictionary pages,
    a page index, no compression or statistics, so any permutation has the same size."""
    table = pa.table(
        {
            "k": pa.array([f"k{i:07d}" for i in order.tolist()], pa.string()),
            "v": pa.array([f"{tag}{i % 97:04d}" for i in order.tolist()], pa.string()),
        }
    )
    out = io.BytesIO()
    pq.write_table(
        table,
        out,
        compression="NONE",
        use_dictionary=True,
        write_statistics=False,
        write_page_index=True,
        data_page_size=4096,
        row_group_size=ROWS,
    )
    return out.getvalue()


def _table(
    root: str, storage_options: dict[str, str] | None = None
) -> tuple[DeltaSource, Snapshot, FileEntry]:
    """A one-file Delta table of the schema of :func:`_bytes` (its file is replaced by the tests)."""
    seed = pa.table({"k": pa.array(["x"], pa.string()), "v": pa.array(["y"], pa.string())})
    writer = (
        {**storage_options, "AWS_ALLOW_HTTP": "true", "AWS_S3_ALLOW_UNSAFE_RENAME": "true"}
        if storage_options
        else None
    )
    deltalake.write_deltalake(root, seed, storage_options=writer)
    source = DeltaSource.open(root, Storage.for_uri(root, storage_options))
    snap = source.snapshot()
    (entry,) = snap.files.values()
    return source, snap, entry


def _check(source: DeltaSource, snap: Snapshot, entry: FileEntry, data: bytes, positions: list[int]) -> None:
    """Point reads (page path, dictionary cache) and a whole read equal pyarrow on ``data``."""
    want = pq.read_table(pa.BufferReader(data))
    got = read_file(source, snap, entry, positions=positions)
    assert got.to_pydict() == want.take(positions).to_pydict()
    assert read_file(source, snap, entry).to_pydict() == want.to_pydict()


def test_local_rewrite_with_the_same_size_misses(tmp_path: Path) -> None:
    root = str(tmp_path / "t")
    source, snap, entry = _table(root)
    path = entry.path[len("file://") :]
    first = _bytes(np.arange(ROWS), "a")
    Path(path).write_bytes(first)
    # What an Iceberg log says: the size, no modification time; it never changes below.
    logged = dataclasses.replace(entry, size=len(first), mtime_ms=0)
    positions = [3, ROWS // 2, ROWS - 1]
    _check(source, snap, logged, first, positions)
    _check(source, snap, logged, first, positions)  # warm: every cache hit
    assert len(footers.DICTIONARIES) > 0

    second = _bytes(np.random.default_rng(1).permutation(ROWS), "b")
    assert len(second) == len(first) and second != first
    Path(path).write_bytes(second)
    _check(source, snap, logged, second, positions)


def test_s3_rewrite_with_the_same_size_misses() -> None:
    with moto_s3("lake-stale") as options:
        root = "s3://lake-stale/t"
        source, snap, entry = _table(root, options)
        client: Any = s3_client(options)
        key = entry.path[len("s3://lake-stale/") :]
        first = _bytes(np.arange(ROWS), "a")
        client.put_object(Bucket="lake-stale", Key=key, Body=first)
        logged = dataclasses.replace(entry, size=len(first), mtime_ms=0)
        positions = [0, ROWS // 3, ROWS - 2]
        _check(source, snap, logged, first, positions)
        _check(source, snap, logged, first, positions)

        # Same size, same second: only the ETag tells the new bytes apart.
        second = _bytes(np.random.default_rng(2).permutation(ROWS), "b")
        assert len(second) == len(first)
        client.put_object(Bucket="lake-stale", Key=key, Body=second)
        _check(source, snap, logged, second, positions)


@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    steps=st.lists(
        st.tuples(
            st.booleans(),  # rewrite the file before reading
            st.integers(0, 2**31),  # seed of the rewrite's order
            st.lists(st.integers(0, ROWS - 1), min_size=1, max_size=4, unique=True),
        ),
        min_size=1,
        max_size=5,
    )
)
def test_reads_through_caches_equal_pyarrow_over_rewrites(
    tmp_path_factory: pytest.TempPathFactory, steps: list[tuple[bool, int, list[int]]]
) -> None:
    root = str(tmp_path_factory.mktemp("h") / "t")
    source, snap, entry = _table(root)
    path = entry.path[len("file://") :]
    data = _bytes(np.arange(ROWS), "a")
    Path(path).write_bytes(data)
    logged = dataclasses.replace(entry, size=len(data), mtime_ms=0)
    for rewrite, seed, positions in steps:
        if rewrite:
            data = _bytes(np.random.default_rng(seed).permutation(ROWS), f"r{seed % 7}")
            Path(path).write_bytes(data)
        want = pq.read_table(pa.BufferReader(data))
        got = read_file(source, snap, logged, positions=sorted(positions))
        assert got.to_pydict() == want.take(sorted(positions)).to_pydict()


def test_a_local_stat_tells_the_bytes_as_an_open_does(tmp_path: Path) -> None:
    """``stat_versioned`` (a warm hybrid scan's only call per appended file on a local disk)
    reports an open's size and token, and a rewrite in place changes them."""
    import os

    import pyarrow.fs as pafs

    from lakehouse_index.io.versioned import open_versioned, stat_versioned

    fs = pafs.LocalFileSystem()
    path = str(tmp_path / "f.parquet")
    Path(path).write_bytes(_bytes(np.arange(ROWS), "a"))
    opened = open_versioned(fs, path)
    opened.handle.close()
    assert stat_versioned(fs, path) == (opened.size, opened.version)
    before = stat_versioned(fs, path)
    Path(path).write_bytes(_bytes(np.random.default_rng(2).permutation(ROWS), "b"))
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000))  # a clock too coarse to tell
    assert stat_versioned(fs, path) != before
    with pytest.raises(FileNotFoundError):
        stat_versioned(fs, str(tmp_path / "absent.parquet"))
    assert stat_versioned(pafs.SubTreeFileSystem(str(tmp_path), fs), "f.parquet") is None
