"""Page-by-page point reads (lakehouse_index.read.page_reads) against whole row-group reads.

The oracle is pyarrow itself: ``pf.read_row_group(g, columns).take(positions)`` on the
same file, which the page path must match exactly (values, types, field metadata).
Files are written by pyarrow (random types, nulls, encodings, codecs, page versions, tiny
pages), deltalake (arrow-rs) and Spark (parquet-mr).
"""

from __future__ import annotations

import decimal
import glob
import io
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import deltalake
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lakehouse_index_delta import DeltaSource

from lakehouse_index.config import ReadConfig
from lakehouse_index.io import Storage
from lakehouse_index.read import footers
from lakehouse_index.read.datafiles import read_file
from lakehouse_index.read.page_index import (
    UNINDEXED,
    PageIndex,
    PageIndexError,
    load_page_index,
    walk_page_headers,
)
from lakehouse_index.read.page_reads import read_group_rows
from lakehouse_index.read.thrift import MAX_THRIFT_DEPTH, ThriftDecodeError, decode_struct, encode_struct

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# --------------------------------------------------------------------------- helpers


def _open(data: bytes | str) -> tuple[pa.NativeFile, pq.ParquetFile, PageIndex]:
    handle = pa.BufferReader(data) if isinstance(data, bytes) else pa.OSFile(data)
    pf = pq.ParquetFile(data if isinstance(data, str) else pa.BufferReader(data))
    return handle, pf, load_page_index(handle, pf.metadata, pf.schema_arrow)


def _expected(pf: pq.ParquetFile, group: int, local: np.ndarray, columns: list[str]) -> pa.Table:
    """The whole row group, views as large types (pyarrow cannot take views), at ``local``."""
    data = pf.read_row_group(group, columns=columns)
    views = {pa.string_view(): pa.large_string(), pa.binary_view(): pa.large_binary()}
    fields = [f.with_type(views.get(f.type, f.type)) for f in data.schema]
    return data.cast(pa.schema(fields, data.schema.metadata)).take(pa.array(local))


def _chunk_bytes(pf: pq.ParquetFile, group: int, columns: list[str]) -> int:
    rg = pf.metadata.row_group(group)
    return sum(
        rg.column(i).total_compressed_size
        for i in range(rg.num_columns)
        if rg.column(i).path_in_schema in columns
    )


def _check_point_reads(path: str) -> None:
    """Every row group of a file with a page index: the page path equals the whole read.

    Reads one row, then three spread rows, of every column (all served page by page):
    without a dictionary cache, then with one, cold and warm (dictionary indexes decoded
    here and looked up in the cached dictionary).
    """
    handle, pf, index = _open(path)
    columns = pf.schema_arrow.names
    cache: dict[Any, pa.Array] = {}
    for g in range(pf.num_row_groups):
        n = pf.metadata.row_group(g).num_rows
        for local in (np.array([n // 2]), np.array(sorted({0, n // 3, n - 1}))):
            want = _expected(pf, g, local, columns)
            plain = read_group_rows(handle, index, pf.schema_arrow, g, local, columns)
            cold = read_group_rows(handle, index, pf.schema_arrow, g, local, columns, cache, path)
            warm = read_group_rows(handle, index, pf.schema_arrow, g, local, columns, cache, path)
            for got in (plain, cold, warm):
                assert got.table.schema.equals(want.schema, check_metadata=True)
                assert got.table.equals(want)
            assert warm.bytes_read <= plain.bytes_read
            if len(local) == 1 and any(len(index.chunks[(g, c)].page_offsets) > 1 for c in columns):
                assert plain.bytes_read < _chunk_bytes(pf, g, columns)


# --------------------------------------------------------------------------- random pyarrow files


def _from_ints(t: pa.DataType, lo: int, hi: int) -> tuple[pa.DataType, st.SearchStrategy[Any], Callable]:
    storage = pa.int32() if pa.types.is_date32(t) else pa.int64()
    return t, st.integers(lo, hi), lambda vals: pa.array(vals, storage).cast(t)


def _plain(
    t: pa.DataType, values: st.SearchStrategy[Any]
) -> tuple[pa.DataType, st.SearchStrategy[Any], Callable]:
    return t, values, lambda vals: pa.array(vals, t)


_INT = ["PLAIN", "DELTA_BINARY_PACKED", "BYTE_STREAM_SPLIT"]
_FLOAT = ["PLAIN", "BYTE_STREAM_SPLIT"]
_BYTES = ["PLAIN", "DELTA_LENGTH_BYTE_ARRAY", "DELTA_BYTE_ARRAY"]
_FIXED = ["PLAIN", "BYTE_STREAM_SPLIT", "DELTA_BYTE_ARRAY"]
_DEC = decimal.Decimal

#: name → ((arrow type, value strategy, array builder), encodings besides dictionary).
TYPES: dict[str, tuple[tuple[pa.DataType, st.SearchStrategy[Any], Callable], list[str]]] = {
    "i64": (_plain(pa.int64(), st.integers(-(2**63), 2**63 - 1)), _INT),
    "i32": (_plain(pa.int32(), st.integers(-(2**31), 2**31 - 1)), _INT),
    "i16": (_plain(pa.int16(), st.integers(-(2**15), 2**15 - 1)), _INT),
    "u32": (_plain(pa.uint32(), st.integers(0, 2**32 - 1)), _INT),
    "bool": (_plain(pa.bool_(), st.booleans()), ["PLAIN", "RLE"]),
    "f64": (_plain(pa.float64(), st.floats(allow_nan=False)), _FLOAT),
    "f32": (_plain(pa.float32(), st.floats(width=32, allow_nan=False)), _FLOAT),
    "str": (_plain(pa.string(), st.text(max_size=12)), _BYTES),
    "large_str": (_plain(pa.large_string(), st.text(max_size=12)), _BYTES),
    "str_view": (_plain(pa.string_view(), st.text(max_size=12)), _BYTES),
    "bin": (_plain(pa.binary(), st.binary(max_size=12)), _BYTES),
    "fixed": (_plain(pa.binary(3), st.binary(min_size=3, max_size=3)), _FIXED),
    "dec9": (
        _plain(pa.decimal128(9, 2), st.decimals(_DEC("-9999999.99"), _DEC("9999999.99"), places=2)),
        _FIXED,
    ),
    "dec30": (_plain(pa.decimal128(30, 4), st.decimals(_DEC("-1e25"), _DEC("1e25"), places=4)), _FIXED),
    "date": (_from_ints(pa.date32(), -(10**6), 10**6), _INT),
    "ts_utc": (_from_ints(pa.timestamp("us", "UTC"), -(2**60), 2**60), _INT),
    "ts_ms": (_from_ints(pa.timestamp("ms"), -(2**50), 2**50), _INT),
    "ts_ns_paris": (_from_ints(pa.timestamp("ns", "Europe/Paris"), -(2**62), 2**62), _INT),
    "time": (_from_ints(pa.time64("us"), 0, 86_400_000_000 - 1), _INT),
    "duration": (_from_ints(pa.duration("ms"), -(2**62), 2**62), _INT),
}


@st.composite
def parquet_files(draw: st.DrawFn) -> bytes:
    """A small Parquet file with a page index, many pages and several row groups."""
    n = draw(st.integers(1, 1500))
    names = draw(st.lists(st.sampled_from(sorted(TYPES)), min_size=1, max_size=5, unique=True))
    arrays, fields, dictionary, encodings = [], [], [], {}
    for name in names:
        (t, values, build), allowed = TYPES[name]
        null_share = draw(st.sampled_from([0.0, 0.0, 0.2, 0.9, 1.0]))
        seeds = draw(st.lists(values, min_size=1, max_size=40))
        rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
        picks = rng.integers(0, len(seeds), n)
        nulls = rng.random(n) < null_share
        arrays.append(build([None if nulls[i] else seeds[picks[i]] for i in range(n)]))
        fields.append(pa.field(name, t, nullable=bool(nulls.any()) or draw(st.booleans())))
        encoding = draw(st.sampled_from(["DICTIONARY", *allowed]))
        if encoding == "DICTIONARY":
            dictionary.append(name)
        elif encoding != "PLAIN":
            encodings[name] = encoding
    table = pa.Table.from_arrays(arrays, schema=pa.schema(fields))
    sink = io.BytesIO()
    pq.write_table(
        table,
        sink,
        row_group_size=draw(st.integers(50, 1500)),
        use_dictionary=dictionary,
        column_encoding=encodings or None,
        compression=draw(st.sampled_from(["NONE", "SNAPPY", "ZSTD", "GZIP", "LZ4"])),
        data_page_version=draw(st.sampled_from(["1.0", "2.0"])),
        data_page_size=draw(st.integers(16, 2048)),
        write_batch_size=draw(st.sampled_from([1, 7, 64, 1024])),
        dictionary_pagesize_limit=draw(st.sampled_from([32, 256, 1 << 20])),
        write_page_index=True,
    )
    return sink.getvalue()


@SETTINGS
@given(data=parquet_files(), st_data=st.data())
def test_page_reads_match_row_group_reads(data: bytes, st_data: st.DataObject) -> None:
    handle, pf, index = _open(data)
    assert index.chunks  # every column is flat, with an offset index
    g = st_data.draw(st.integers(0, pf.num_row_groups - 1))
    n = pf.metadata.row_group(g).num_rows
    local = np.array(sorted(set(st_data.draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=20)))))
    names = pf.schema_arrow.names
    columns = st_data.draw(st.permutations(names))[: st_data.draw(st.integers(1, len(names)))]
    want = _expected(pf, g, local, columns)

    got = read_group_rows(handle, index, pf.schema_arrow, g, local, columns)
    assert got.table.schema.equals(want.schema, check_metadata=True)
    assert got.table.equals(want)
    if len(local) == 1 and any(len(index.chunks[(g, c)].page_offsets) > 1 for c in columns):
        assert got.bytes_read < _chunk_bytes(pf, g, columns)


@SETTINGS
@given(data=parquet_files(), st_data=st.data())
def test_page_headers_give_what_the_offset_index_says(data: bytes, st_data: st.DataObject) -> None:
    """Walking a row group's page headers (files without offset indexes) finds every chunk's
    pages where the writer's offset index puts them, and reads the same rows."""
    handle, pf, index = _open(data)
    g = st_data.draw(st.integers(0, pf.num_row_groups - 1))
    concurrent = st_data.draw(st.booleans())
    walked = walk_page_headers(handle, pf.metadata, pf.schema_arrow, g, concurrent=concurrent)
    assert walked.chunks.keys() == {k for k in index.chunks if k[0] == g}
    for k, chunk in walked.chunks.items():
        want = index.chunks[k]
        assert chunk.dictionary == want.dictionary
        for field in ("page_offsets", "page_sizes", "page_rows"):
            assert np.array_equal(getattr(chunk, field), getattr(want, field)), field
    n = pf.metadata.row_group(g).num_rows
    local = np.array(sorted(set(st_data.draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=20)))))
    names = pf.schema_arrow.names
    assert read_group_rows(handle, walked, pf.schema_arrow, g, local, names).table.equals(
        _expected(pf, g, local, names)
    )


def test_lookups_walk_the_page_headers_of_files_without_offset_indexes(tmp_path: Path) -> None:
    """pyiceberg (pyarrow's default) writes no page index: point reads still go page by page,
    the pages found from their headers one row group at a time, and answer like pyiceberg."""
    from pyiceberg.catalog.sql import SqlCatalog

    import lakehouse_index as li

    n = ReadConfig().page_read_min_rows + 20_000
    ids = np.random.default_rng(3).permutation(n)
    table = pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "s": pa.array([f"value-{i}" for i in ids]),
            "f": pa.array(ids / 3),
        }
    )
    catalog = SqlCatalog("c", uri=f"sqlite:///{tmp_path}/c.db", warehouse=f"file://{tmp_path}/wh")
    catalog.create_namespace("db")
    native = catalog.create_table("db.t", schema=table.schema)
    native.append(table)
    t = li.open_table("db.t", catalog=catalog)
    t.create_index(li.SecondaryIndex("by_s", key="s"))
    footers.clear_footer_cache()
    keys = [f"value-{i}" for i in (0, 7, n // 2, n - 1)]
    got = t.lookup("by_s", keys).sort_by("id")
    rows = catalog.load_table("db.t").scan().to_arrow()
    want = rows.filter(pc.is_in(rows["s"], pa.array(keys))).sort_by("id")
    assert got.select(want.column_names).equals(want)
    unindexed = [k for k, v in footers.PAGE_INDEXES.items() if v is UNINDEXED]
    assert unindexed  # the file has no offset index...
    walked = [v for k, v in footers.PAGE_INDEXES.items() if isinstance(k, tuple) and k[0] in unindexed]
    assert walked and all(v.chunks for v in walked)  # ...and was read page by page


@SETTINGS
@given(data=parquet_files())
def test_thrift_codec_round_trips_footers(data: bytes) -> None:
    pf = pq.ParquetFile(pa.BufferReader(data))
    size = pf.metadata.serialized_size
    footer = data[-8 - size : -8]
    decoded, end = decode_struct(footer)
    assert end == size
    assert encode_struct(decoded) == footer


# --------------------------------------------------------------------------- other writers


def _delta_table(root: str, rows: int, **props: Any) -> str:
    rng = np.random.default_rng(7)
    ids = rng.permutation(rows)
    table = pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "email": pa.array([f"user{i}@example.com" if i % 11 else None for i in ids]),
            "ts": pa.array(ids * 1_000_000, pa.int64()).cast(pa.timestamp("us", "UTC")),
            "country": pa.array([["fr", "de", "us", None][i % 4] for i in ids]),
            "amount": pa.array(ids * 0.25),
            "status": pa.array(ids % 5, pa.int32()),
            "flag": pa.array(ids % 3 == 0),
            "price": pa.array([decimal.Decimal(int(i)).scaleb(-2) for i in ids], pa.decimal128(12, 2)),
        }
    )
    path = f"{root}/t"
    deltalake.write_deltalake(path, table, writer_properties=deltalake.WriterProperties(**props))
    return path


@pytest.mark.parametrize(
    "props",
    [
        {"data_page_row_count_limit": 300, "write_batch_size": 100},
        {"data_page_row_count_limit": 500, "compression": "ZSTD", "dictionary_page_size_limit": 2048},
        {"data_page_size_limit": 512, "compression": "GZIP", "max_row_group_size": 1500},
    ],
)
def test_deltalake_files(tmp_path: Path, props: dict[str, Any]) -> None:
    path = _delta_table(str(tmp_path), 4000, **props)
    (f,) = glob.glob(f"{path}/*.parquet")
    _check_point_reads(f)


def test_read_file_reads_pages(tmp_path: Path) -> None:
    rows = ReadConfig().page_read_min_rows + 5_000  # page reads serve large row groups only
    path = _delta_table(str(tmp_path), rows, data_page_row_count_limit=1000)
    source = DeltaSource.open(path, Storage.for_uri(path))
    snap = source.snapshot()
    footers.clear_footer_cache()
    for entry in snap.files.values():
        whole = read_file(source, snap, entry, with_positions=True)
        positions = [0, 7777, whole.num_rows - 1]
        got = read_file(source, snap, entry, positions=positions, with_positions=True)
        assert got.equals(whole.take(positions))
        index = footers.PAGE_INDEXES.get(footers.file_key(source, entry)[0])
        assert index is not None and index.chunks  # the point read went page by page
        assert read_file(source, snap, entry, ["email"], positions=[3]).equals(
            whole.select(["email"]).take([3])
        )


@pytest.mark.spark
def test_spark_files(spark: SparkSession, tmp_path: Path) -> None:
    n = 6000
    df = spark.range(0, n).selectExpr(
        "id",
        "cast(id % 100 as string) as s",
        "case when id % 7 = 0 then null else id * 1.5 end as d",
        "cast(id % 100 as decimal(20, 3)) as dec",
        "timestamp_micros(id * 1000000) as ts",
    )
    out = str(tmp_path / "spark")
    df.coalesce(1).write.option("parquet.page.row.count.limit", 500).parquet(out)
    (f,) = glob.glob(f"{out}/*.parquet")
    handle, pf, index = _open(f)
    # Spark writes timestamps as INT96 by default: that column is left to the whole read.
    assert pf.schema.column(4).physical_type == "INT96"
    assert "ts" not in {c for _, c in index.chunks}
    got = read_group_rows(handle, index, pf.schema_arrow, 0, np.array([5]), ["ts", "id"])
    assert got.table.equals(_expected(pf, 0, np.array([5]), ["id"]))
    flat = pf.schema_arrow.names[:4]
    assert all(len(index.chunks[(0, c)].page_offsets) > 1 for c in flat)
    for local in (np.array([4321]), np.array([0, 1, 500, n - 1])):
        got = read_group_rows(handle, index, pf.schema_arrow, 0, local, flat)
        assert got.table.equals(_expected(pf, 0, local, flat))


# --------------------------------------------------------------------------- fallbacks


def _write(table: pa.Table, **options: Any) -> bytes:
    sink = io.BytesIO()
    pq.write_table(table, sink, data_page_size=64, write_batch_size=16, **options)
    return sink.getvalue()


def test_fallbacks() -> None:
    n = 2000
    table = pa.table(
        {
            "id": pa.array(np.arange(n)),
            "nested": pa.array([{"a": i, "b": [i, i]} for i in range(n)]),
            "tags": pa.array([[str(i)] for i in range(n)]),
            "cat": pa.array([str(i % 3) for i in range(n)]).dictionary_encode(),
            "legacy": pa.array(np.arange(n) * 1_000_000, pa.int64()).cast(pa.timestamp("us")),
        }
    )
    local = np.array([1234])

    # No page index: nothing is read beyond pyarrow's footer, every column falls back.
    handle, pf, index = _open(_write(table))
    assert index.chunks == {}
    got = read_group_rows(handle, index, pf.schema_arrow, 0, local, ["id"])
    assert got.table.num_columns == 0 and got.bytes_read == 0

    # Nested, dictionary-typed and INT96 columns fall back; flat columns of the same file do not.
    handle, pf, index = _open(_write(table, write_page_index=True, use_deprecated_int96_timestamps=True))
    assert {c for _, c in index.chunks} == {"id"}
    for other in ("nested", "tags", "cat", "legacy"):
        got = read_group_rows(handle, index, pf.schema_arrow, 0, local, [other, "id"])
        assert got.table.column_names == ["id"]
        assert got.table.equals(_expected(pf, 0, local, ["id"]))


def test_read_file_mixes_page_and_row_group_reads(tmp_path: Path) -> None:
    """Columns the page path cannot serve are read with the row group; the others still by page."""
    n = ReadConfig().page_read_min_rows + 3_000
    table = pa.table(
        {
            "id": pa.array(np.arange(n)),
            "tags": pa.array([[str(i)] for i in range(n)]),
            "name": pa.array([f"n{i % 977}" for i in range(n)]),
        }
    )
    props = deltalake.WriterProperties(data_page_row_count_limit=1000, write_batch_size=500)
    deltalake.write_deltalake(str(tmp_path / "d"), table, writer_properties=props)
    source = DeltaSource.open(str(tmp_path / "d"), Storage.for_uri(str(tmp_path / "d")))
    snap = source.snapshot()
    (entry,) = snap.files.values()
    footers.clear_footer_cache()
    positions = [0, 4097, n - 1]
    got = read_file(source, snap, entry, ["tags", "id", "name"], positions=positions, with_positions=True)
    whole = read_file(source, snap, entry, ["tags", "id", "name"], with_positions=True)
    assert got.equals(whole.take(positions))
    index = footers.PAGE_INDEXES.get(footers.file_key(source, entry)[0])
    assert index is not None and {c for _, c in index.chunks} == {"id", "name"}


# --------------------------------------------------------------------------- corrupt page indexes


def test_thrift_decoder_bounds_nesting_and_truncation() -> None:
    nested = b"\x1c" * (MAX_THRIFT_DEPTH + 1)  # field 1 of type struct, again and again
    with pytest.raises(ThriftDecodeError, match="nested deeper"):
        decode_struct(nested + b"\x00" * (MAX_THRIFT_DEPTH + 1))
    lists = b"\x19" + b"\x19" * (MAX_THRIFT_DEPTH + 1)  # field 1: a list of one list of ...
    with pytest.raises(ThriftDecodeError):
        decode_struct(lists)
    ok = b"\x1c" * (MAX_THRIFT_DEPTH - 1) + b"\x00" * MAX_THRIFT_DEPTH
    assert decode_struct(ok)[1] == len(ok)
    with pytest.raises(ThriftDecodeError, match="truncated"):
        decode_struct(b"\x15\x80")  # an i32 whose varint never ends


def _offset_index_ranges(path: str) -> list[tuple[int, int]]:
    """(offset, length) of every column chunk's offset index, from the footer."""
    data = Path(path).read_bytes()
    size = int.from_bytes(data[-8:-4], "little")
    fmd, _ = decode_struct(data[-8 - size : -8])
    out = []
    for rg in fmd[4][1][1]:  # FileMetaData.row_groups → RowGroup.columns → ColumnChunk
        for cc in rg[1][1][1]:
            if 4 in cc and 5 in cc:
                out.append((cc[4][1], cc[5][1]))
    return out


@pytest.mark.parametrize("garbage", ["nested", "random"])
def test_corrupt_offset_index_falls_back_to_row_group_reads(tmp_path: Path, garbage: str) -> None:
    """An offset index that does not decode (deeply nested, or noise) must not fail a read pyarrow does."""
    rows = ReadConfig().page_read_min_rows + 12_000
    path = _delta_table(str(tmp_path), rows, data_page_row_count_limit=50, max_row_group_size=rows)
    (f,) = glob.glob(f"{path}/*.parquet")
    ranges = _offset_index_ranges(f)
    assert ranges and max(n for _, n in ranges) > 2_000  # deep enough to exhaust the stack unbounded
    with open(f, "r+b") as out:  # same size: the log's entry still describes the file
        for offset, length in ranges:
            out.seek(offset)
            noise = np.random.default_rng(offset).integers(0, 256, length, dtype=np.uint8).tobytes()
            out.write(b"\x1c" * length if garbage == "nested" else noise)
    handle = pa.OSFile(f)
    pf = pq.ParquetFile(f)
    if garbage == "nested":
        with pytest.raises(PageIndexError):
            load_page_index(handle, pf.metadata, pf.schema_arrow)

    source = DeltaSource.open(path, Storage.for_uri(path))
    snap = source.snapshot()
    (entry,) = snap.files.values()
    footers.clear_footer_cache()
    want = pq.read_table(f)
    for positions in ([0], [5, 9_000, rows - 1], [rows // 2]):
        got = read_file(source, snap, entry, positions=positions)
        assert got.num_rows == len(positions)
        for name in want.column_names:
            assert got.column(name).to_pylist() == want.column(name).take(positions).to_pylist(), name
    # the failure is remembered
    assert footers.PAGE_INDEXES.get(footers.file_key(source, entry)[0]) is not None


@SETTINGS
@given(data=parquet_files(), st_data=st.data())
def test_reads_through_a_dictionary_cache_match_row_group_reads(data: bytes, st_data: st.DataObject) -> None:
    """Reads of one row group after another through one dictionary cache: the first decodes
    each dictionary up to the largest index it wants, a later one wanting more decodes all of
    it, the others take cached values; every read equals pyarrow's."""
    handle, pf, index = _open(data)
    cache: dict[Any, pa.Array] = {}
    names = pf.schema_arrow.names
    for _ in range(4):
        g = st_data.draw(st.integers(0, pf.num_row_groups - 1))
        n = pf.metadata.row_group(g).num_rows
        local = np.array(sorted(set(st_data.draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=8)))))
        columns = st_data.draw(st.permutations(names))[: st_data.draw(st.integers(1, len(names)))]
        want = _expected(pf, g, local, columns)
        got = read_group_rows(handle, index, pf.schema_arrow, g, local, columns, cache, "file")
        assert got.table.schema.equals(want.schema, check_metadata=True)
        assert got.table.equals(want)


def _distinct_values(n: int) -> pa.Table:
    """One row per distinct value (so dictionary index = row, but for the nulls), of types
    decoded by pyarrow (strings, binary, timestamps, decimals, fixed-length) and of a type
    taken as it is (int64)."""
    i = np.arange(n)
    nulls = pa.array(i % 10 == 3)
    return pa.table(
        {
            "s": pc.if_else(nulls, None, pa.array([f"value-{k}" * (1 + k % 3) for k in i])),
            "b": pa.array([k.to_bytes(4, "little") + b"x" * (k % 5) for k in i.tolist()], pa.binary()),
            "ts": pc.if_else(
                nulls, None, pa.array(i * 1_000_003, pa.int64()).cast(pa.timestamp("us", "UTC"))
            ),
            "dec": pa.array([_DEC(k).scaleb(-2) for k in i.tolist()], pa.decimal128(12, 2)),
            "fixed": pa.array([k.to_bytes(5, "big") for k in i.tolist()], pa.binary(5)),
            "i64": pa.array(i * 7, pa.int64()),
        }
    )


@pytest.mark.parametrize("concurrent", [True, False])
@pytest.mark.parametrize(
    ("version", "codec"), [("1.0", "SNAPPY"), ("2.0", "ZSTD"), ("1.0", "NONE"), ("2.0", "GZIP")]
)
def test_a_dictionary_is_fetched_and_decoded_once(version: str, codec: str, concurrent: bool) -> None:
    """A read through an empty cache decodes each dictionary whole and caches it, counting each
    page fetched once; a later read of other rows (indexes far past the first ones) fetches no
    dictionary page and decodes none. Both fetch paths: dictionary pages fetched with the data
    pages (object store), or read and decoded by a decoder thread meanwhile (local disk)."""
    n = 3000
    table = _distinct_values(n)
    sink = io.BytesIO()
    pq.write_table(
        table, sink, compression=codec, data_page_version=version, data_page_size=4096, write_page_index=True
    )
    handle, pf, index = _open(sink.getvalue())
    names = pf.schema_arrow.names
    cache: dict[Any, pa.Array] = {}

    def read(rows: list[int]) -> int:
        local = np.array(rows)
        got = read_group_rows(
            handle, index, pf.schema_arrow, 0, local, names, cache, "file", concurrent=concurrent
        )
        assert got.table.equals(_expected(pf, 0, local, names))
        return got.bytes_read

    pages = [index.chunks[(0, c)] for c in names]
    first = sum(int(c.page_sizes[np.searchsorted(c.page_rows, 5, side="right") - 1]) for c in pages)
    assert read([5, 20]) == first + sum(c.dictionary[1] for c in pages)  # rows 5 and 20 share a page
    assert {name: len(cache[("file", 0, name)]) for name in names} == {
        "s": n - n // 10,
        "b": n,
        "ts": n - n // 10,
        "dec": n,
        "fixed": n,
        "i64": n,
    }
    whole = dict(cache)
    last = sum(int(c.page_sizes[np.searchsorted(c.page_rows, n - 1, side="right") - 1]) for c in pages)
    assert read([n - 1]) == last  # the data pages alone: no dictionary page fetched
    assert all(cache[k] is whole[k] for k in whole)


class _CountingFile:
    """A random-access file recording each read's (offset, length)."""

    def __init__(self, data: bytes) -> None:
        self.inner = io.BytesIO(data)
        self.reads: list[tuple[int, int]] = []

    def read(self, n: int = -1) -> bytes:
        at = self.inner.tell()
        out = self.inner.read(n)
        self.reads.append((at, len(out)))
        return out

    def seek(self, pos: int, whence: int = 0) -> int:
        return self.inner.seek(pos, whence)

    def tell(self) -> int:
        return self.inner.tell()

    def seekable(self) -> bool:
        return True

    def readable(self) -> bool:
        return True

    def writable(self) -> bool:
        return False

    def close(self) -> None:
        self.inner.close()

    @property
    def closed(self) -> bool:
        return self.inner.closed


def test_object_store_reads_fetch_with_the_data_pages_only_the_dictionaries_they_use() -> None:
    """On an object store a dictionary page not cached comes with the data pages, but only
    when the selected page is dictionary encoded (a row past the writer's fallback to plain
    pages needs none; the chunk's page encoding statistics say which pages those are)."""
    n = 20_000
    table = pa.table({"k": [f"{i:06d}-" + "x" * 100 for i in range(n)], "c": [i % 5 for i in range(n)]})
    sink = io.BytesIO()
    pq.write_table(
        table, sink, dictionary_pagesize_limit=64 << 10, data_page_size=16 << 10, write_page_index=True
    )
    data = sink.getvalue()
    _, pf, index = _open(data)
    k, c = index.chunks[(0, "k")], index.chunks[(0, "c")]
    assert 0 < k.dictionary_encoded_pages < len(k.page_offsets)  # k fell back to plain pages
    assert c.dictionary_encoded_pages == len(c.page_offsets)
    plain_row, dictionary_row = int(k.page_rows[k.dictionary_encoded_pages]) + 3, 5

    def fetched(chunk: Any, reads: list[tuple[int, int]]) -> bool:
        start, length = chunk.dictionary
        return any(at < start + length and start < at + size for at, size in reads)

    for row, needs_k_dictionary in ((plain_row, False), (dictionary_row, True)):
        counting = _CountingFile(data)
        handle = pa.PythonFile(counting, mode="r")
        got = read_group_rows(
            handle, index, pf.schema_arrow, 0, np.array([row]), ["k", "c"], {}, "file", concurrent=True
        )
        assert got.table.to_pylist() == table.slice(row, 1).to_pylist()
        assert fetched(k, counting.reads) == needs_k_dictionary
        assert fetched(c, counting.reads)
        # The data pages and the dictionaries they use: a read each at most (merged when adjacent).
        assert len(counting.reads) <= 4, counting.reads
