"""Decoding fetched pages with pyarrow: the one-column file.

pyarrow decodes whole column chunks and cannot be handed single pages. So for each wanted
column the page reads assemble a tiny Parquet file in memory (:func:`one_column_file`):
``PAR1``, the fetched pages byte for byte, and a footer for one row group of that one column
(schema pruned to the root and the leaf; value counts, sizes and offsets of the copied
pages; statistics, encoding stats, bloom filter and index locations dropped; ``created_by``
kept, as readers apply writer-specific fixes by it; the file's ``ARROW:schema`` pruned to
the column). pyarrow decodes that file as it decodes the original chunk
(:func:`decode_column`), so the values and Arrow types are those of a whole row-group read,
with string/binary views as large string/binary (:func:`plain_type`).
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from lakehouse_index.errors import TableFormatError
from lakehouse_index.io.parallel import DECODE_THREADS, shared_pool
from lakehouse_index.read.page_index import ARROW_SCHEMA, MAGIC, ColumnPages, PageIndex
from lakehouse_index.read.thrift import (
    BINARY,
    CC_FILE_OFFSET,
    CC_META,
    CMD_CODEC,
    CMD_COMPRESSED,
    CMD_DATA_PAGE_OFFSET,
    CMD_DICTIONARY_PAGE_OFFSET,
    CMD_NUM_VALUES,
    CMD_UNCOMPRESSED,
    FMD_CREATED_BY,
    FMD_KV,
    FMD_NUM_ROWS,
    FMD_ROW_GROUPS,
    FMD_SCHEMA,
    FMD_VERSION,
    I32,
    I64,
    LIST,
    PH_COMPRESSED,
    PH_UNCOMPRESSED,
    RG_COLUMNS,
    RG_NUM_ROWS,
    RG_TOTAL_BYTE_SIZE,
    STRUCT,
    Bytes,
    Struct,
    decode_struct,
    encode_struct,
    field,
)

__all__ = [
    "Page",
    "concat_buffers",
    "decode_column",
    "decode_pool",
    "one_column_file",
    "parse_page",
    "plain_type",
]


@dataclass(frozen=True)
class Page:
    """One fetched page: its bytes (header included) and its decoded header."""

    data: Bytes
    header: Struct
    header_len: int

    @property
    def uncompressed_size(self) -> int:
        """Size of the page with its body uncompressed, header included."""
        return self.header_len + int(field(self.header, PH_UNCOMPRESSED))


def parse_page(data: Bytes) -> Page | None:
    """The page in ``data`` (None when its header does not decode or does not span it)."""
    try:
        header, n = decode_struct(data)
    except (ValueError, IndexError):
        return None
    if PH_UNCOMPRESSED not in header or n + field(header, PH_COMPRESSED, -1) != len(data):
        return None
    return Page(data, header, n)


def one_column_file(
    index: PageIndex,
    chunk: ColumnPages,
    num_rows: int,
    dictionary: Page | None,
    pages: list[Page],
    codec: int | None = None,
) -> pa.Buffer:
    """A Parquet file holding one row group of ``num_rows`` rows of one column: ``dictionary``
    and ``pages``, compressed with ``codec`` (default: the chunk's)."""
    every = pages if dictionary is None else [dictionary, *pages]
    uncompressed = sum(p.uncompressed_size for p in every)
    meta: Struct = {
        **chunk.meta,
        CMD_NUM_VALUES: (I64, num_rows),
        CMD_UNCOMPRESSED: (I64, uncompressed),
        CMD_COMPRESSED: (I64, sum(len(p.data) for p in every)),
        CMD_DATA_PAGE_OFFSET: (I64, len(MAGIC) + (0 if dictionary is None else len(dictionary.data))),
    }
    if codec is not None:
        meta[CMD_CODEC] = (I32, codec)
    if dictionary is not None:
        meta[CMD_DICTIONARY_PAGE_OFFSET] = (I64, len(MAGIC))
    column_chunk: Struct = {CC_FILE_OFFSET: (I64, 0), CC_META: (STRUCT, meta)}
    row_group: Struct = {
        RG_COLUMNS: (LIST, (STRUCT, [column_chunk])),
        RG_TOTAL_BYTE_SIZE: (I64, uncompressed),
        RG_NUM_ROWS: (I64, num_rows),
    }
    fmd: Struct = {
        FMD_VERSION: (I32, index.version),
        FMD_SCHEMA: (LIST, (STRUCT, [index.root, chunk.leaf])),
        FMD_NUM_ROWS: (I64, num_rows),
        FMD_ROW_GROUPS: (LIST, (STRUCT, [row_group])),
    }
    if chunk.arrow_schema is not None:
        kv: Struct = {1: (BINARY, ARROW_SCHEMA), 2: (BINARY, chunk.arrow_schema)}
        fmd[FMD_KV] = (LIST, (STRUCT, [kv]))
    if index.created_by is not None:
        fmd[FMD_CREATED_BY] = (BINARY, index.created_by)
    footer = encode_struct(fmd)
    return concat_buffers([MAGIC, *(p.data for p in every), footer, len(footer).to_bytes(4, "little"), MAGIC])


def decode_column(
    data: Bytes | pa.Buffer, t: pa.DataType, positions: np.ndarray | None
) -> pa.ChunkedArray | None:
    """Rows ``positions`` (None: all) of the one-column file ``data``, whose column must decode
    as type ``t``."""
    try:
        reader = pq.ParquetFile(pa.BufferReader(data), pre_buffer=False)
        column = reader.read_row_group(0, use_threads=False).column(0)
    except (pa.ArrowException, OSError):
        return None
    if not column.type.equals(t):  # not decoded as in the file: let the caller read it
        return None
    if plain_type(t) != t:
        column = column.cast(plain_type(t))
    return column if positions is None else column.take(pa.array(positions))


def decode_pool() -> ThreadPoolExecutor:
    """Decodes the one-column files of a read in parallel (pyarrow decodes without the GIL)."""
    return shared_pool("parquet-pages", DECODE_THREADS)


def concat_buffers(parts: Sequence[Bytes]) -> pa.Buffer:
    """``parts`` one after the other, in one buffer of pyarrow's memory pool (which reuses
    freed pages; a large Python ``bytes`` is fresh pages, each faulted in on first write)."""
    out = pa.allocate_buffer(sum(len(p) for p in parts))
    view = memoryview(out).cast("B")
    at = 0
    for part in parts:
        view[at : at + len(part)] = part
        at += len(part)
    return out


def plain_type(t: pa.DataType) -> pa.DataType:
    """``t`` with every string_view/binary_view, at any depth, as large_string/large_binary.

    pyarrow has no take kernel for the view types, which delta-rs writes into the Arrow
    schema it embeds in Parquet files, nested ones included (its rewrites store
    ``struct<list<string_view>>``); their Parquet storage is the same. Nested fields keep
    their names and metadata (field ids, physical names).
    """
    if not _has_view(t):
        return t
    if pa.types.is_string_view(t):
        return pa.large_string()
    if pa.types.is_binary_view(t):
        return pa.large_binary()
    if pa.types.is_struct(t):
        return pa.struct([f.with_type(plain_type(f.type)) for f in t])
    if pa.types.is_map(t):
        return pa.map_(
            t.key_field.with_type(plain_type(t.key_type)),
            t.item_field.with_type(plain_type(t.item_type)),
            keys_sorted=t.keys_sorted,
        )
    if pa.types.is_fixed_size_list(t):
        return pa.list_(t.value_field.with_type(plain_type(t.value_type)), t.list_size)
    if pa.types.is_large_list(t):
        return pa.large_list(t.value_field.with_type(plain_type(t.value_type)))
    if pa.types.is_list(t):
        return pa.list_(t.value_field.with_type(plain_type(t.value_type)))
    raise TableFormatError(f"cannot read a column of type {t} (string or binary views inside)")


def _has_view(t: pa.DataType) -> bool:
    """Whether ``t`` is or holds (at any depth) a string_view/binary_view type."""
    if pa.types.is_string_view(t) or pa.types.is_binary_view(t):
        return True
    return any(_has_view(t.field(i).type) for i in range(t.num_fields))
