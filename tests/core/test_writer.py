"""FileWriter (the index file writer of both executors, inside Spark tasks too) on hand-made batches."""

from __future__ import annotations

import os
from pathlib import Path
from unittest import mock

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakehouse_index.config import ExecutorConfig
from lakehouse_index.executors import writer
from lakehouse_index.executors.writer import FileWriter, aligned_groups, in_order, sorted_batches
from lakehouse_index.io import Storage
from lakehouse_index.kinds.layout import bucket_from_path

ROW_GROUP_ROWS = ExecutorConfig().index_row_group_rows
SCHEMA = pa.schema([("k", pa.int64()), ("_row", pa.int64(), False)])


def batches(sizes: list[int], buckets: list[int] | None = None) -> list[pa.RecordBatch]:
    """Sorted rows k = 0, 1, ... cut into batches of ``sizes`` (int32 keys: the writer casts)."""
    out, start = [], 0
    for i, n in enumerate(sizes):
        cols = {"k": pa.array(range(start, start + n), pa.int32()), "_row": pa.array(range(n), pa.int64())}
        if buckets is not None:
            cols["bucket"] = pa.array([buckets[i]] * n, pa.int32())
        out.append(pa.RecordBatch.from_pydict(cols))
        start += n
    return out


def run(
    tmp_path: Path,
    data: list[pa.RecordBatch],
    bucket_column: str | None = None,
    config: ExecutorConfig = ExecutorConfig(),
    bucket_dirs: bool = False,
) -> list[str]:
    task = FileWriter(Storage("file"), "file://" + str(tmp_path), SCHEMA, config, bucket_column, bucket_dirs)
    (result,) = list(task(iter(data)))
    return [p[len("file://") :] for p in result.column("path").to_pylist()]


def group_sizes(path: str) -> list[int]:
    meta = pq.ParquetFile(path).metadata
    return [meta.row_group(i).num_rows for i in range(meta.num_row_groups)]


@pytest.mark.parametrize(
    "flush", [None, (1, 1 << 40), (1 << 40, 1)], ids=["default", "every-group", "by-bytes"]
)
def test_row_groups_are_whole_whatever_the_batches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, flush: tuple[int, int] | None
) -> None:
    """Whole row groups in order, whether rows are written as soon as a group is full, held up
    to the row bound, or flushed by the byte bound."""
    if flush is not None:
        monkeypatch.setattr(writer, "_FLUSH_ROWS", flush[0])
        monkeypatch.setattr(writer, "_FLUSH_BYTES", flush[1])
    sizes = [10_000, 3, 1, 5_000, ROW_GROUP_ROWS, 7_777]
    paths = run(tmp_path, batches(sizes))
    assert len(paths) == 1
    total = sum(sizes)
    full, rest = divmod(total, ROW_GROUP_ROWS)
    assert group_sizes(paths[0]) == [ROW_GROUP_ROWS] * full + [rest]
    table = pq.read_table(paths[0])
    assert table.schema == SCHEMA
    assert table.column("k").to_pylist() == list(range(total))


def test_files_split_at_rows_per_file_and_buckets(tmp_path: Path) -> None:
    config = ExecutorConfig(rows_per_index_file=9_000)
    sizes = [6_000, 6_000, 6_000, 2_000, 5_000]
    paths = run(tmp_path / "plain", batches(sizes), config=config)
    # a file holds rows_per_index_file rows at most, also when one batch would overfill it
    assert [pq.ParquetFile(p).metadata.num_rows for p in paths] == [9_000, 9_000, 7_000]
    for p in paths:
        sizes_in_file = group_sizes(p)
        assert (
            all(n == ROW_GROUP_ROWS for n in sizes_in_file[:-1]) and 0 < sizes_in_file[-1] <= ROW_GROUP_ROWS
        )
    keys = [k for p in paths for k in pq.read_table(p).column("k").to_pylist()]
    assert keys == list(range(sum(sizes)))

    bucketed = run(tmp_path / "cov", batches([5_000, 5_000, 300], buckets=[0, 0, 3]), "bucket", config)
    # Spark's bucket file names, flat in the directory (layout 2)
    assert [bucket_from_path(p) for p in bucketed] == [0, 0, 3]
    assert {os.path.dirname(p) for p in bucketed} == {str(tmp_path / "cov")}
    legacy = run(tmp_path / "v1", batches([5_000, 5_000, 300], buckets=[0, 0, 3]), "bucket", config, True)
    assert [os.path.basename(os.path.dirname(p)) for p in legacy] == ["bucket=0", "bucket=0", "bucket=3"]
    assert [group_sizes(p) for p in bucketed] == [
        [ROW_GROUP_ROWS, ROW_GROUP_ROWS, 9_000 - 2 * ROW_GROUP_ROWS],
        [1_000],
        [300],
    ]
    assert pq.read_table(bucketed[0]).schema == SCHEMA


@settings(max_examples=60, deadline=None)
@given(
    keys=st.lists(st.tuples(st.text(max_size=3), st.binary(max_size=3), st.integers(-3, 3)), max_size=40),
    slice_rows=st.integers(1, 50),
    chunks=st.integers(1, 4),
    descending=st.booleans(),
    wide=st.booleans(),
)
def test_sorted_batches_equal_sort_by(
    keys: list[tuple[str, bytes, int]], slice_rows: int, chunks: int, descending: bool, wide: bool
) -> None:
    """The writer's sort gives exactly ``Table.sort_by``'s rows and types, also on the path
    taken when a string or binary column is too large for one array (``sort_by`` fails there:
    forced here with ``max_array_bytes=0``), gathering a slice of the order at a time."""
    table = pa.table(
        {
            "k": pa.array([k for k, _, _ in keys], pa.string()),
            "b": pa.array([b for _, b, _ in keys], pa.binary()),
            "v": pa.array([v for _, _, v in keys], pa.int64()),
            "_row": pa.array(range(len(keys)), pa.int64()),
        }
    )
    step = max(1, -(-len(keys) // chunks))
    chunked = pa.concat_tables([table.slice(i, step) for i in range(0, len(keys), step)] or [table])
    order = [("k", "descending" if descending else "ascending"), ("v", "ascending"), ("_row", "ascending")]
    limits = {"max_array_bytes": 0, "slice_rows": slice_rows} if wide else {}
    got = pa.Table.from_batches(list(sorted_batches(chunked, order, **limits)), schema=table.schema)
    assert got.equals(table.sort_by(order))


@settings(max_examples=150, deadline=None)
@given(
    keys=st.lists(
        st.tuples(
            st.one_of(st.none(), st.text("ab", max_size=2)), st.floats(allow_nan=True) | st.integers(0, 2)
        ),
        min_size=0,
        max_size=12_000,
    ),
    presorted=st.booleans(),
    swap=st.integers(0, 12_000),
    descending=st.booleans(),
    sample_from=st.sampled_from([writer._ORDER_SAMPLE_FROM, 8]),
)
def test_in_order_is_exactly_sortedness(
    keys: list[tuple[str | None, float]], presorted: bool, swap: int, descending: bool, sample_from: int
) -> None:
    """``in_order`` says True only for rows already in the order (so the writer may skip the
    sort), and says it for sorted rows without nulls or NaNs, on any chunking; also when a
    sample is compared first (``sample_from`` rows and more; 8: on these small tables too)."""
    table = pa.table(
        {
            "k": pa.array([k for k, _ in keys], pa.string()),
            "v": pa.array([float(v) for _, v in keys], pa.float64()),
            "_row": pa.array(range(len(keys)), pa.int64()),
        }
    )
    order = [("k", "descending" if descending else "ascending"), ("v", "ascending")]
    if presorted:
        table = table.sort_by(order)
        if keys and swap % 3 == 0:  # one pair of rows out of place
            i = swap % len(keys)
            j = (i + 1) % len(keys)
            idx = list(range(len(keys)))
            idx[i], idx[j] = idx[j], idx[i]
            table = table.take(pa.array(idx))
    chunked = pa.concat_tables([table.slice(0, len(keys) // 3), table.slice(len(keys) // 3)])
    with mock.patch.object(writer, "_ORDER_SAMPLE_FROM", sample_from):
        got = in_order(chunked, order)
    # a stable sort leaves sorted rows where they are, and moves some row of unsorted ones
    sorted_already = pc.sort_indices(table, sort_keys=order).to_pylist() == list(range(len(keys)))
    clean = not table["k"].null_count and not pc.any(pc.is_nan(table["v"])).as_py()
    if got:
        assert sorted_already
    elif clean:
        assert not sorted_already


@pytest.mark.parametrize("swap_at", [None, 0, 7_777, 19_998])
def test_in_order_on_large_tables_checks_every_row(swap_at: int | None) -> None:
    """Past the sampled pre-check, one pair out of place anywhere is still seen."""
    keys = [f"{i:06d}" for i in range(writer._ORDER_SAMPLE_FROM + 20_000)]
    if swap_at is not None:
        keys[swap_at], keys[swap_at + 1] = keys[swap_at + 1], keys[swap_at]
    table = pa.table({"k": pa.array(keys, pa.string()), "r": pa.array([0] * len(keys), pa.int64())})
    assert in_order(table, [("k", "ascending"), ("r", "ascending")]) is (swap_at is None)
    assert not in_order(table, [("k", "descending")])


@settings(max_examples=200, deadline=None)
@given(
    keys=st.lists(st.integers(0, 2**53 - 1), max_size=300).map(sorted),
    most=st.integers(1, 40),
    final=st.booleans(),
)
def test_aligned_groups_end_at_the_most_significant_change(keys: list[int], most: int, final: bool) -> None:
    """Each group of at most ``most`` rows (at least a third of it, bar the last) ends at the
    highest changing bit among the ends its window allows, the largest group among equals."""
    sizes = aligned_groups(np.array(keys, dtype=np.int64), most, final)
    least = max(1, most // 3)

    def level(p: int) -> int:  # the highest bit changing before row p
        return (keys[p - 1] ^ keys[p]).bit_length() - 1

    start = 0
    for i, size in enumerate(sizes):
        last = i == len(sizes) - 1
        assert 0 < size <= most
        if not (final and last):
            assert size >= least
            ends = range(start + least, start + most + 1)
            best = max(level(p) for p in ends)
            assert level(start + size) == best
            assert all(level(p) < best for p in ends if p > start + size)
        start += size
    assert (start == len(keys)) if final else (len(keys) - start <= most)


@pytest.mark.parametrize("flush", [None, (1, 1 << 40)], ids=["default", "every-group"])
def test_aligned_row_groups_do_not_depend_on_the_batches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, flush: tuple[int, int] | None
) -> None:
    """Row groups cut at the aligned column's changes are those of the whole file at once,
    however the rows arrive and whenever they are flushed."""
    if flush is not None:
        monkeypatch.setattr(writer, "_FLUSH_ROWS", flush[0])
        monkeypatch.setattr(writer, "_FLUSH_BYTES", flush[1])
    rng = np.random.default_rng(5)
    keys = np.sort(rng.integers(0, 2**40, 20_000))
    cuts = np.cumsum([0, 3, 4_000, 1, 9_000])
    data = [
        pa.RecordBatch.from_pydict({"k": keys[a:b], "_row": np.arange(a, b)})
        for a, b in zip(cuts, [*cuts[1:], len(keys)], strict=True)
    ]
    config = ExecutorConfig(index_row_group_rows=100)
    task = FileWriter(Storage("file"), "file://" + str(tmp_path), SCHEMA, config, aligned="k")
    (result,) = list(task(iter(data)))
    (path,) = [p[len("file://") :] for p in result.column("path").to_pylist()]
    assert group_sizes(path) == aligned_groups(keys, 100, True)
    assert pq.read_table(path).column("k").to_pylist() == keys.tolist()


def test_index_files_are_delta_packed_with_lz4_pages(tmp_path: Path) -> None:
    """Integer, date and timestamp columns DELTA_BINARY_PACKED, the stamps dictionary-encoded, every
    chunk LZ4_RAW (pyarrow's per-chunk zstd setup outweighs small row groups); values read back."""
    schema = pa.schema(
        [
            ("k", pa.int64()),
            ("d", pa.date32()),
            ("ts", pa.timestamp("us", tz="UTC")),
            ("x", pa.float64()),
            ("s", pa.string()),
            ("_file_id", pa.int64(), False),
            ("_row", pa.int64(), False),
            ("_version", pa.int64(), False),
            ("_op", pa.int8(), False),
        ]
    )
    n = 3 * ROW_GROUP_ROWS + 5
    rows = pa.table(
        {
            "k": np.arange(n) * 7,
            "d": pa.array(np.arange(n, dtype=np.int32) % 3000, pa.int32()).cast(pa.date32()),
            "ts": pa.array(np.arange(n) * 1_000_003, pa.int64()).cast(pa.timestamp("us", tz="UTC")),
            "x": np.linspace(0, 1, n),
            "s": [f"v{i % 97}" for i in range(n)],
            "_file_id": np.repeat([1, 2], [n // 2, n - n // 2]),
            "_row": np.arange(n),
            "_version": np.full(n, 4),
            "_op": pa.array(np.zeros(n, dtype=np.int8)),
        },
        schema=schema,
    )
    task = FileWriter(Storage("file"), "file://" + str(tmp_path), schema, ExecutorConfig())
    (result,) = list(task(iter(rows.to_batches(max_chunksize=1000))))
    (path,) = [p[len("file://") :] for p in result.column("path").to_pylist()]
    pf = pq.ParquetFile(path)
    assert pf.read().equals(rows)
    meta = pf.metadata
    for g in range(meta.num_row_groups):
        for i, name in enumerate(schema.names):
            chunk = meta.row_group(g).column(i)
            assert chunk.compression == "LZ4", (name, chunk.compression)  # pyarrow's name of LZ4_RAW
            packed = "DELTA_BINARY_PACKED" in chunk.encodings
            assert packed == (name in {"k", "d", "ts", "_file_id", "_row"}), (name, chunk.encodings)
            if name in {"_version", "_op"}:
                assert chunk.has_dictionary_page, name
