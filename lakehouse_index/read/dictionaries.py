"""Point reads through the dictionary: dictionary pages decoded once, indexes at the rows.

Most data pages of a column chunk are dictionary encoded: their values are indexes into the
chunk's dictionary page. For a column whose selected pages are all so, in a codec
decompressed here, :func:`read_by_dictionary` decodes only the indexes at the wanted rows
(the definition levels and the RLE / bit-packed runs up to the last wanted value) and looks
them up in the dictionary, decoded whole on first need (:func:`decode_dictionary`) and kept
in a :data:`DictionaryCache`: a warm read fetches and decompresses only the data pages. A
page that does not decode so leaves its column to the one-column file
(:mod:`lakehouse_index.read.page_decode`).
"""

from __future__ import annotations

import sys
from collections.abc import Hashable, Mapping, MutableMapping
from concurrent.futures import Future
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from lakehouse_index.read.byte_ranges import fetch_ranges
from lakehouse_index.read.page_decode import (
    Page,
    concat_buffers,
    decode_column,
    decode_pool,
    one_column_file,
    parse_page,
)
from lakehouse_index.read.page_index import ColumnPages, PageIndex, PagePlan
from lakehouse_index.read.thrift import (
    CMD_TYPE,
    DATA_PAGE,
    DICTIONARY_ENCODINGS,
    DICTIONARY_PAGE,
    I32,
    PH_COMPRESSED,
    PH_DATA_V1,
    PH_DATA_V2,
    PH_DICTIONARY,
    PH_TYPE,
    PH_UNCOMPRESSED,
    PLAIN,
    RLE,
    STRUCT,
    Bytes,
    Struct,
    encode_struct,
    field,
    put_varint,
)
from lakehouse_index.varint import read_uvarint

__all__ = [
    "Dictionary",
    "DictionaryCache",
    "decode_dictionary",
    "dictionary_page",
    "dictionary_pages",
    "load_dictionary",
    "read_by_dictionary",
]


#: Codecs decompressed here (pyarrow names); others (LZO, Hadoop LZ4) take the one-column path.
_CODECS = {1: "snappy", 2: "gzip", 4: "brotli", 6: "zstd", 7: "lz4_raw"}
#: (physical type, Arrow type) whose PLAIN values are the Arrow array's data buffer as they are
#: (little-endian, fixed width): a dictionary page of them is an array without decoding.
_PLAIN_WIDTHS = {
    (1, pa.int32()): 4,
    (1, pa.date32()): 4,
    (2, pa.int64()): 8,
    (4, pa.float32()): 4,
    (5, pa.float64()): 8,
}
if sys.byteorder != "little":
    _PLAIN_WIDTHS = {}


#: Where decoded dictionaries are kept: (file key, row group, column) → the dictionary's
#: values, as :func:`read_by_dictionary` decodes them.
DictionaryCache = MutableMapping[Hashable, pa.Array]


# --------------------------------------------------------------------------- dictionary pages


@dataclass(frozen=True)
class Dictionary:
    """A chunk's dictionary page as fetched and its values as decoded (None: not served)."""

    page: Page | None
    values: pa.Array | None


def decode_dictionary(index: PageIndex, chunk: ColumnPages, page: Page | None, t: pa.DataType) -> Dictionary:
    """The dictionary page ``page`` of ``chunk`` and its values (see :func:`_dictionary_values`)."""
    return Dictionary(page, _dictionary_values(index, chunk, page, t))


def load_dictionary(
    handle: pa.NativeFile, index: PageIndex, chunk: ColumnPages, t: pa.DataType
) -> Dictionary:
    """The dictionary page of ``chunk``, read from ``handle``, and its values."""
    return decode_dictionary(index, chunk, dictionary_pages(handle, [chunk], False, {})[0], t)


def dictionary_page(raw: Bytes) -> Page | None:
    """``raw`` as a dictionary page (None when it is not one)."""
    page = parse_page(raw)
    return page if page is not None and field(page.header, PH_TYPE) == DICTIONARY_PAGE else None


def dictionary_pages(
    handle: pa.NativeFile, chunks: list[ColumnPages], concurrent: bool, early: Mapping[str, Page | None]
) -> list[Page | None]:
    """The dictionary page of each chunk (None for a chunk without one): from ``early`` (by
    column) when fetched already, the others fetched now."""
    present = [c for c in chunks if c.dictionary[1] > 0 and c.name not in early]
    blobs = fetch_ranges(handle, [c.dictionary for c in present], concurrent)
    fetched = {c.name: dictionary_page(raw) for c, raw in zip(present, blobs, strict=True)}
    return [early[c.name] if c.name in early else fetched.get(c.name) for c in chunks]


def _dictionary_values(
    index: PageIndex, chunk: ColumnPages, page: Page | None, t: pa.DataType
) -> pa.Array | None:
    """The values of a chunk's dictionary page, decoded by pyarrow as type ``t`` (then
    :func:`plain_type`); None when the page or its codec does not serve.

    Fixed-width values whose Parquet layout is Arrow's (``_PLAIN_WIDTHS``) are taken as they
    are (4-10x faster than the decode below, measured on 400 KB pages). Otherwise pyarrow
    reads a one-column file of one PLAIN data page whose body is the dictionary page's,
    decompressed (a dictionary page is PLAIN-encoded values, and no nulls): about half the
    time of decoding the page as a dictionary and then every index 0, ..., n - 1 (1.2 ms
    against 2.6 ms for 35,000 strings).
    """
    if page is None:
        return None
    head = field(page.header, PH_DICTIONARY)
    n = int(field(head, 1, 0)) if head is not None else 0
    body = _decompress(chunk.codec, page.data[page.header_len :], int(field(page.header, PH_UNCOMPRESSED)))
    if n <= 0 or body is None:
        return None
    width = _PLAIN_WIDTHS.get((int(field(chunk.meta, CMD_TYPE)), t))
    if width is not None:  # PLAIN values of these types are Arrow's own buffer layout
        return pa.Array.from_buffers(t, n, [None, pa.py_buffer(body)]) if len(body) == n * width else None
    levels = b""
    if chunk.optional:  # one run of n definition levels of 1
        rle = bytearray()
        put_varint(rle, n << 1)
        rle.append(1)
        levels = len(rle).to_bytes(4, "little") + bytes(rle)
    size = len(levels) + len(body)
    v1: Struct = {1: (I32, n), 2: (I32, PLAIN), 3: (I32, RLE), 4: (I32, RLE)}
    data_header: Struct = {
        PH_TYPE: (I32, DATA_PAGE),
        PH_UNCOMPRESSED: (I32, size),
        PH_COMPRESSED: (I32, size),
        PH_DATA_V1: (STRUCT, v1),
    }
    encoded = encode_struct(data_header)
    data = Page(memoryview(concat_buffers([encoded, levels, body])).cast("B"), data_header, len(encoded))
    file = one_column_file(index, chunk, n, None, [data], codec=0)
    column = decode_column(file, t, None)
    return column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column


# --------------------------------------------------------------------------- indexes at the wanted rows


def read_by_dictionary(
    handle: pa.NativeFile,
    index: PageIndex,
    schema: pa.Schema,
    group: int,
    plans: list[PagePlan],
    pages: list[list[tuple[int, Page]] | None],
    cache: DictionaryCache,
    file_key: Hashable,
    concurrent: bool,
    pending: Mapping[str, Future[Dictionary]],
) -> tuple[dict[str, pa.Array], int]:
    """The wanted rows of the columns whose selected pages are all dictionary encoded, in a
    codec decompressed here, looked up in their dictionary; and the bytes of pages fetched
    for them. A column that does not decode so is left out.

    The pages' dictionary indexes at the wanted rows are decoded first; a dictionary not
    cached is fetched, decoded whole and cached: a warm read fetches and decodes none.

    ``pending``: dictionaries being fetched and decoded already, by column (those of the
    columns whose selected pages the chunk's encoding statistics count as dictionary
    encoded), cached here too. (Decoding only the values up to the largest index wanted made
    a later read of another row of the file fetch and decode the page again: a warm lookup
    of a key whose file had been read for another key took 17 ms instead of 3.6, and no
    cold lookup was faster.)
    """
    # (plan, indexes, not null, dictionary values the indexes reach)
    wanted: list[tuple[PagePlan, np.ndarray, np.ndarray, int]] = []
    for plan, mine in zip(plans, pages, strict=True):
        if (
            mine is not None
            and all(e in DICTIONARY_ENCODINGS for e, _ in mine)
            and (plan.chunk.codec == 0 or plan.chunk.codec in _CODECS)
            and plan.chunk.dictionary[1] > 0
        ):
            found = _indexes_at(plan, [page for _, page in mine])
            if found is not None:
                indexes, valid = found
                wanted.append((plan, indexes, valid, int(indexes[valid].max(initial=0)) + 1))
    dictionaries = {plan.chunk.name: cache.get((file_key, group, plan.chunk.name)) for plan, *_ in wanted}
    missing = [
        plan.chunk
        for plan, *_ in wanted
        if dictionaries[plan.chunk.name] is None and plan.chunk.name not in pending
    ]
    loaded: list[tuple[str, Future[Dictionary] | Dictionary]] = list(pending.items())
    if missing:
        raw = dictionary_pages(handle, missing, concurrent, {})
        types = [schema.field(c.name).type for c in missing]
        decoded = decode_pool().map(decode_dictionary, [index] * len(missing), missing, raw, types)
        loaded += zip([c.name for c in missing], decoded, strict=True)
    read = 0
    for name, each in loaded:
        done = each.result() if isinstance(each, Future) else each
        read += len(done.page.data) if done.page is not None else 0
        if done.values is not None:
            dictionaries[name] = done.values
            cache[(file_key, group, name)] = done.values
    out: dict[str, pa.Array] = {}
    for plan, indexes, valid, need in wanted:
        dictionary = dictionaries[plan.chunk.name]
        if dictionary is not None and need <= len(dictionary):  # else an index past it: not as written
            out[plan.chunk.name] = dictionary.take(pa.array(indexes, mask=~valid))
            read += plan.data_bytes
    return out, read


def _indexes_at(plan: PagePlan, pages: list[Page]) -> tuple[np.ndarray, np.ndarray] | None:
    """(dictionary index, not null) of the plan's rows, from its dictionary-encoded ``pages``
    (None when a page does not decode so)."""
    chunk = plan.chunk
    indexes = np.zeros(len(plan.positions), dtype=np.int64)
    valid = np.ones(len(plan.positions), dtype=bool)
    base = 0
    for page, rows in zip(pages, plan.rows.tolist(), strict=True):
        lo, hi = np.searchsorted(plan.positions, [base, base + rows])
        if hi > lo:
            found = _page_indices(page, chunk, rows, plan.positions[lo:hi] - base)
            if found is None:
                return None
            indexes[lo:hi], valid[lo:hi] = found
        base += rows
    return indexes, valid


def _page_indices(
    page: Page, chunk: ColumnPages, rows: int, want: np.ndarray
) -> tuple[np.ndarray, np.ndarray] | None:
    """(dictionary index, not null) of the rows ``want`` of one dictionary-encoded data page."""
    header = page.header
    body = page.data[page.header_len :]
    size = int(field(header, PH_UNCOMPRESSED))
    if field(header, PH_TYPE) == DATA_PAGE:
        raw: Bytes | None = _decompress(chunk.codec, body, size)
        if raw is None:
            return None
        pos = 0
        levels = None
        if chunk.optional:
            length = int.from_bytes(raw[:4], "little")
            levels = _levels(raw, 4, 4 + length, rows)
            pos = 4 + length
    else:  # v2: levels uncompressed before the (maybe compressed) values
        v2 = field(header, PH_DATA_V2)
        def_len, rep_len = int(field(v2, 5)), int(field(v2, 6))
        if rep_len:
            return None
        values = body[def_len:]
        raw_values: Bytes | None = (
            _decompress(chunk.codec, values, size - def_len) if field(v2, 7, True) else values
        )
        if raw_values is None:
            return None
        levels = _levels(body[:def_len], 0, def_len, rows) if chunk.optional and field(v2, 2) else None
        raw, pos = raw_values, 0
    valid = levels[want] if levels is not None else np.ones(len(want), dtype=bool)
    value_at = want if levels is None else np.cumsum(levels)[want] - 1
    width = raw[pos]
    if width > 32:
        return None
    indices = np.zeros(len(want), dtype=np.int64)
    if valid.any():
        indices[valid] = _hybrid_at(raw, pos + 1, len(raw), width, value_at[valid])
    return indices, valid


def _levels(buf: Bytes, pos: int, end: int, count: int) -> np.ndarray | None:
    """The first ``count`` 1-bit definition levels of the hybrid runs at ``buf[pos:end]``, as
    bools; None when one run says all of them are 1 (no nulls, the common case)."""
    if pos < end:
        header, after = read_uvarint(buf, pos)
        if not header & 1 and header >> 1 >= count and after < end and buf[after] == 1:
            return None
    out = np.zeros(count, dtype=bool)
    n = 0
    while n < count:
        if pos >= end:
            raise ValueError("the definition levels end early")
        header, pos = read_uvarint(buf, pos)
        if header & 1:
            nbytes = header >> 1
            bits = np.unpackbits(np.frombuffer(buf, np.uint8, nbytes, pos), bitorder="little")
            take = min(len(bits), count - n)
            out[n : n + take] = bits[:take].astype(bool)
            pos += nbytes
        else:
            take = min(header >> 1, count - n)
            out[n : n + take] = bool(buf[pos])
            pos += 1
        n += take
    return out


def _hybrid_at(buf: Bytes, pos: int, end: int, width: int, want: np.ndarray) -> np.ndarray:
    """Values at positions ``want`` (sorted) of the RLE / bit-packed hybrid run sequence at
    ``buf[pos:end]`` of ``width``-bit values; runs after the last wanted value are not read."""
    out = np.zeros(len(want), dtype=np.int64)
    data = np.frombuffer(buf, dtype=np.uint8)
    mask = (1 << width) - 1
    vbytes = (width + 7) // 8
    span = (width + 7 + 7) // 8  # bytes one value can touch at any bit offset
    first = k = 0
    nxt = int(want[0]) if len(want) else 0  # the next wanted position
    while k < len(want):
        if pos >= end:
            raise ValueError("the RLE runs end before the wanted values")
        header, pos = read_uvarint(buf, pos)
        if header & 1:  # bit-packed groups of 8 values
            count, nbytes = (header >> 1) * 8, (header >> 1) * width
            if pos + nbytes > end:
                raise ValueError("a bit-packed run runs past its page")
            if first + count <= nxt:  # no wanted value in this run: skipped without numpy
                pos += nbytes
                first += count
                continue
            j = int(np.searchsorted(want, first + count))
            if j > k and width:
                bits = (want[k:j] - first) * width
                at = pos + (bits >> 3)
                word = np.zeros(j - k, dtype=np.uint64)
                for b in range(span):
                    byte = data[np.minimum(at + b, len(data) - 1)].astype(np.uint64)
                    word |= byte << np.uint64(8 * b)
                out[k:j] = ((word >> (bits & 7).astype(np.uint64)) & np.uint64(mask)).astype(np.int64)
            pos += nbytes
        else:  # a run of one repeated value
            count = header >> 1
            if first + count <= nxt:
                pos += vbytes
                first += count
                continue
            j = int(np.searchsorted(want, first + count))
            out[k:j] = int.from_bytes(buf[pos : pos + vbytes], "little")
            pos += vbytes
        first += count
        k = j
        if k < len(want):
            nxt = int(want[k])
    return out


def _decompress(codec: int, data: Bytes, size: int) -> memoryview | None:
    """``data`` in ``codec`` decompressed to ``size`` bytes (None when that fails).

    The bytes live in pyarrow's memory pool, which keeps freed pages for reuse; a large
    Python ``bytes`` is fresh pages from the kernel, each faulted in on first write. (The
    seven dictionary pages of a benchmark data file, 2.1 MB compressed, decoded in 9.4 ms
    through Python bytes and in 6.0 ms through the pool.)
    """
    if codec == 0:
        return memoryview(data).cast("B") if len(data) == size else None
    try:
        out = pa.Codec(_CODECS[codec]).decompress(data, decompressed_size=size)
    except (pa.ArrowException, OSError, KeyError, ValueError):
        return None
    return memoryview(out).cast("B") if out.size == size else None
