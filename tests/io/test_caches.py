"""Caches: cachetools LRUs sized by CacheConfig; a file rewritten in place is read anew."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator
from pathlib import Path

import deltalake
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from lakehouse_index_delta import DeltaSource

from lakehouse_index.config import CacheConfig, SizedCache, cache_config, configure_caches
from lakehouse_index.io import Storage
from lakehouse_index.kinds import moves
from lakehouse_index.query import index_reader
from lakehouse_index.read import footers
from lakehouse_index.read.datafiles import read_file
from lakehouse_index.read.footers import file_layout


@pytest.fixture(autouse=True)
def default_sizes() -> Iterator[None]:
    configure_caches()
    yield
    configure_caches()


def _rewrite(path: str, values: list[int]) -> None:
    """Overwrite a data file with other values, same schema and (uncompressed, plain) same size."""
    pq.write_table(
        pa.table({"x": pa.array(values, pa.int64())}),
        path,
        compression="NONE",
        use_dictionary=False,
        write_statistics=False,
    )


def test_a_file_rewritten_in_place_is_not_served_from_the_cache(tmp_path: Path) -> None:
    root = str(tmp_path / "t")
    deltalake.write_deltalake(root, pa.table({"x": pa.array([1, 2, 3], pa.int64())}))
    source = DeltaSource.open(root, Storage.for_uri(root))
    snap = source.snapshot()
    (entry,) = snap.files.values()
    path = entry.path[len("file://") :]

    _rewrite(path, [10, 20, 30])
    size = os.path.getsize(path)
    first = dataclasses.replace(entry, size=size, mtime_ms=1_000)
    footers.clear_footer_cache()
    assert read_file(source, snap, first, positions=[2])["x"].to_pylist() == [30]
    assert file_layout(source, first) is file_layout(source, first)  # cached while unchanged

    # Same path, same size, new bytes: the log's new mtime makes the cached footer miss.
    _rewrite(path, [7, 8, 9, 11])  # one more row
    grown_size = os.path.getsize(path)
    grown = dataclasses.replace(entry, size=grown_size, mtime_ms=2_000)
    assert read_file(source, snap, grown)["x"].to_pylist() == [7, 8, 9, 11]
    _rewrite(path, [4, 5, 6])
    assert os.path.getsize(path) == size
    same_size = dataclasses.replace(entry, size=size, mtime_ms=3_000)
    assert file_layout(source, same_size) is not file_layout(source, first)
    assert read_file(source, snap, same_size)["x"].to_pylist() == [4, 5, 6]
    assert read_file(source, snap, same_size, positions=[0, 2])["x"].to_pylist() == [4, 6]


def test_configure_caches_resizes_live_caches() -> None:
    cache: SizedCache[int, str] = SizedCache("move_map_entries")
    for i in range(10):
        cache[i] = str(i)
    assert len(cache) == 10 and cache.maxsize == CacheConfig().move_map_entries

    sizes = configure_caches(move_map_entries=3, footer_entries=5)
    assert sizes == cache_config() and sizes.move_map_entries == 3
    assert cache.maxsize == 3 and len(cache) == 0  # recreated empty at the new size
    for i in range(5):
        cache[i] = str(i)
    assert sorted(cache) == [2, 3, 4]  # least recently used went first
    assert cache.get(2) == "2"
    cache[5] = "5"
    assert sorted(cache) == [2, 4, 5]
    # The process-wide caches follow, and new caches start at the new sizes.
    assert footers.FOOTERS.maxsize == 5
    assert footers.PAGE_INDEXES.maxsize == CacheConfig().page_index_entries
    assert moves._CACHE.maxsize == 3
    assert SizedCache("move_map_entries").maxsize == 3

    configure_caches(cache_config(), index_file_entries=7)  # keep the others
    assert index_reader.FOOTERS._files.maxsize == 7 and footers.FOOTERS.maxsize == 5
    configure_caches()
    assert cache.maxsize == CacheConfig().move_map_entries
    assert footers.FOOTERS.maxsize == CacheConfig().footer_entries


def test_connector_caches_follow_the_configuration(tmp_path: Path) -> None:
    root = str(tmp_path / "t")
    deltalake.write_deltalake(root, pa.table({"x": [1]}))
    deltalake.write_deltalake(root, pa.table({"x": [2]}), mode="append")
    configure_caches(delta_commit_entries=1, delta_state_entries=1)
    source = DeltaSource.open(root, Storage.for_uri(root))
    assert source._log._commits.maxsize == 1 and source._snapshots.maxsize == 1
    assert [len(source.snapshot(v).files) for v in (0, 1, 0)] == [1, 2, 1]
    assert len(source._snapshots) == 1
    configure_caches(cache_config(), delta_state_entries=4)
    assert source._replay._states.maxsize == 4 and source._snapshots.maxsize == 4


def test_sized_cache_by_weight() -> None:
    configure_caches(delta_dv_bytes=10)
    cache: SizedCache[str, bytes] = SizedCache("delta_dv_bytes", getsizeof=len)
    cache["a"] = b"12345"
    cache["b"] = b"123456"  # 11 bytes in all: "a" goes
    assert list(cache) == ["b"]
    cache["c"] = b"x" * 11  # larger than the whole cache: not kept, nothing else lost
    assert list(cache) == ["b"] and "c" not in cache


def test_unknown_size_field() -> None:
    with pytest.raises(ValueError, match="not a CacheConfig field"):
        SizedCache("no_such_entries")
