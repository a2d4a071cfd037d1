"""Where the pages of a Parquet file are: its footer, offset indexes and page headers.

A file with a page index has, per column chunk, an ``OffsetIndex``: where each data page
starts and the first row it holds. pyarrow can neither be pointed at single pages nor tell
where the offset index is, so the footer and the offset indexes are decoded here
(:mod:`lakehouse_index.read.thrift`) into a :class:`PageIndex`: per (row group, column), the
pages of the chunk (:class:`ColumnPages`). A file without offset indexes (pyarrow's default,
so pyiceberg's) has the pages of a row group found by reading each page header of its chunks
in turn (:func:`walk_page_headers`). :func:`plan_pages` says which pages hold the wanted rows.

Indexed: top-level primitive columns that are not repeated and not INT96, in files with a
plaintext footer and no encrypted columns, whose Arrow type is not a dictionary; the other
columns are left out of the index (the page reads leave them to the caller). Bytes that do
not decode (a corrupt or hostile footer, offset index or page header) raise
:class:`PageIndexError`, never anything else: the caller then reads the row group the
ordinary way, which needs none of these structures.
"""

from __future__ import annotations

import base64
import contextlib
import struct
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from lakehouse_index.errors import LakehouseIndexError
from lakehouse_index.read.byte_ranges import ByteSource, fetch_ranges, range_readers
from lakehouse_index.read.thrift import (
    CC_CRYPTO,
    CC_ENCRYPTED_META,
    CC_FILE_PATH,
    CC_META,
    CC_OI_LENGTH,
    CC_OI_OFFSET,
    CMD_CODEC,
    CMD_COMPRESSED,
    CMD_DATA_PAGE_OFFSET,
    CMD_DICTIONARY_PAGE_OFFSET,
    CMD_ENCODING_STATS,
    DATA_PAGE,
    DATA_PAGE_V2,
    DICTIONARY_ENCODINGS,
    DICTIONARY_PAGE,
    FMD_CREATED_BY,
    FMD_ENCRYPTION,
    FMD_KV,
    FMD_ROW_GROUPS,
    FMD_SCHEMA,
    FMD_VERSION,
    I32,
    INT96,
    OI_PAGE_LOCATIONS,
    OPTIONAL,
    PES_COUNT,
    PES_ENCODING,
    PES_PAGE_TYPE,
    PH_COMPRESSED,
    PH_DATA_V1,
    PH_DATA_V2,
    PH_TYPE,
    PL_FIRST_ROW,
    PL_OFFSET,
    PL_SIZE,
    REPEATED,
    RG_COLUMNS,
    RG_NUM_ROWS,
    SE_NAME,
    SE_NUM_CHILDREN,
    SE_REPETITION,
    SE_TYPE,
    STRUCT,
    Bytes,
    Struct,
    decode_struct,
    encode_struct,
    field,
)

__all__ = [
    "ARROW_SCHEMA",
    "MAGIC",
    "NO_PAGE_INDEX",
    "UNINDEXED",
    "ColumnPages",
    "PageIndex",
    "PageIndexError",
    "PagePlan",
    "decoding",
    "load_page_index",
    "plan_pages",
    "read_tail",
    "walk_page_headers",
]


class PageIndexError(LakehouseIndexError):
    """A Parquet file's footer, offset index or page headers do not decode as expected.

    Raised instead of any lower-level error; readers fall back to a whole row-group read.
    """


#: The bytes a Parquet file starts and ends with.
MAGIC = b"PAR1"
#: The footer key-value key of the Arrow schema a writer embeds.
ARROW_SCHEMA = b"ARROW:schema"
#: ColumnMetaData fields copied into the one-column file: type, encodings, path, codec.
_CMD_KEPT = (1, 2, 3, 4)


@dataclass(frozen=True)
class ColumnPages:
    """Where the pages of one flat column chunk are (footer + offset index)."""

    #: Name of the top-level column.
    name: str
    #: The leaf SchemaElement, encoded.
    leaf: bytes
    #: The ColumnMetaData fields kept in the one-column file (see ``_CMD_KEPT``).
    meta: Struct
    #: Offset and length of what precedes the first data page: the dictionary page, if any.
    dictionary: tuple[int, int]
    #: Offset and size (header included) of each data page.
    page_offsets: np.ndarray
    page_sizes: np.ndarray
    #: First row of each data page, plus the row group's row count at the end.
    page_rows: np.ndarray
    #: ``ARROW:schema`` value for the one-column file (None: the file carries none).
    arrow_schema: bytes | None
    #: Whether the column is OPTIONAL (its pages carry definition levels).
    optional: bool = True
    #: How many data pages, first ones, are dictionary encoded by the chunk's page encoding
    #: statistics (0 without them): a writer falls back from dictionary to plain pages when
    #: the dictionary is full, never back.
    dictionary_encoded_pages: int = 0

    @property
    def codec(self) -> int:
        """The chunk's compression codec (parquet.thrift ``CompressionCodec``)."""
        return int(field(self.meta, CMD_CODEC))


@dataclass(frozen=True)
class PageIndex:
    """Page facts of one Parquet file, for the columns the page path can read."""

    version: int
    #: The root SchemaElement with one child, encoded.
    root: bytes
    created_by: bytes | None
    #: (row group, top-level column name) → its pages.
    chunks: dict[tuple[int, str], ColumnPages]


#: The index of a file the page path cannot serve (an offset index or page header that does
#: not decode, an encrypted footer).
NO_PAGE_INDEX = PageIndex(1, b"", None, {})
#: The index of a file without any offset index: its row groups' pages are found by
#: :func:`walk_page_headers`.
UNINDEXED = PageIndex(1, b"", None, {})


# --------------------------------------------------------------------------- footer and page locations


@contextlib.contextmanager
def decoding(what: str) -> Iterator[None]:
    """Turns what decoding malformed structures can raise (a field missing or of an unexpected
    type, a truncated buffer) into PageIndexError: the page reads' one error."""
    try:
        yield
    except (ValueError, IndexError, KeyError, TypeError, AttributeError, struct.error, OverflowError) as e:
        raise PageIndexError(f"{what} does not decode: {e}") from e


def load_page_index(
    handle: pa.NativeFile, metadata: pq.FileMetaData, schema: pa.Schema, tail: Bytes | None = None
) -> PageIndex:
    """Read the footer and the offset indexes of an open Parquet file.

    ``metadata`` and ``schema`` are the file's footer and Arrow schema as pyarrow reads
    them. ``tail`` is the end of the file when the caller already read it (see
    :func:`read_tail`): the footer, and offset indexes lying in it, are then taken from it
    instead of read again. A file without any offset index is not read: the answer is
    :data:`UNINDEXED` (its pages can be found by :func:`walk_page_headers`). Columns the
    page path cannot serve are left out. :class:`PageIndexError` when the footer or an
    offset index does not decode.
    """
    if not any(
        metadata.row_group(g).column(c).has_offset_index
        for g in range(metadata.num_row_groups)
        for c in range(metadata.num_columns)
    ):
        return UNINDEXED
    found = _footer(handle, metadata, tail)
    if found is None:
        return NO_PAGE_INDEX
    src, footer = found
    with decoding("the page index"):  # not the footer or offset index we expect
        return _page_index(src, decode_struct(footer)[0], schema)


def walk_page_headers(
    handle: pa.NativeFile,
    metadata: pq.FileMetaData,
    schema: pa.Schema,
    group: int,
    tail: Bytes | None = None,
    concurrent: bool = True,
) -> PageIndex:
    """The pages of row group ``group`` of a file without offset indexes (:data:`UNINDEXED`),
    found by reading each page header of its column chunks in turn.

    What an offset index would say, at the cost of one small read per page (the chunks'
    headers are read one after the other, the chunks of several columns concurrently
    unless ``concurrent`` is false). pyarrow and pyiceberg write no offset index by
    default; without one a point read would decode the whole row group. The index holds
    only that row group's chunks. :class:`PageIndexError` when the footer or a page header
    does not decode, or the pages do not fill their chunk exactly.
    """
    found = _footer(handle, metadata, tail)
    if found is None:
        return NO_PAGE_INDEX
    src, footer = found
    with decoding(f"the page headers of row group {group}"):
        return _page_index(src, decode_struct(footer)[0], schema, walk=(group, concurrent))


def _footer(
    handle: pa.NativeFile, metadata: pq.FileMetaData, tail: Bytes | None
) -> tuple[ByteSource, memoryview] | None:
    """The file as a :class:`ByteSource` holding its end, and its footer's bytes (None when the
    end of the file is not the footer pyarrow read)."""
    footer_len = metadata.serialized_size
    size = handle.size()
    if tail is None or len(tail) < footer_len + 8:
        tail = handle.read_at(footer_len + 8, size - footer_len - 8)
    if tail[-4:] != MAGIC or int.from_bytes(tail[-8:-4], "little") != footer_len:
        return None
    return ByteSource(handle, size - len(tail), tail), memoryview(tail)[len(tail) - footer_len - 8 :]


def read_tail(handle: pa.NativeFile, length: int) -> tuple[pq.FileMetaData, bytes]:
    """The footer of an open Parquet file, from one read of its last ``length`` bytes.

    Returns the parsed footer and the bytes read (the end of the file: footer, and usually
    the page index before it), for :func:`load_page_index`. A second read only when the
    footer is longer than ``length``. ``OSError``/``ArrowInvalid`` when the file is not
    Parquet.
    """
    size = handle.size()
    if size < 12:
        raise pa.ArrowInvalid(f"a Parquet file has at least 12 bytes, this one {size}")
    start = max(0, size - max(length, 8))
    tail = bytes(handle.read_at(size - start, start))
    if tail[-4:] != MAGIC:
        raise pa.ArrowInvalid("the file does not end with the Parquet magic bytes")
    footer_len = int.from_bytes(tail[-8:-4], "little")
    if footer_len + 8 > size - 4:
        raise pa.ArrowInvalid(f"the footer length {footer_len} exceeds the file")
    if footer_len + 8 > len(tail):
        start = size - footer_len - 8
        tail = bytes(handle.read_at(size - start, start))
    footer = tail[len(tail) - footer_len - 8 :]
    return pq.read_metadata(pa.BufferReader(MAGIC + footer)), tail


def _page_index(
    handle: ByteSource, fmd: Struct, schema: pa.Schema, walk: tuple[int, bool] | None = None
) -> PageIndex:
    """The pages of every served chunk with an offset index; with ``walk`` (row group,
    concurrently), those of every served chunk of that row group, from its page headers."""
    if FMD_ENCRYPTION in fmd:
        return NO_PAGE_INDEX
    elements = field(fmd, FMD_SCHEMA)[1]
    kv = {field(item, 1): field(item, 2) for item in field(fmd, FMD_KV, (STRUCT, []))[1]}
    served = {}  # name → (leaf index, leaf, ARROW:schema for the one-column file)
    optional: dict[str, bool] = {}
    for name, (leaf, el) in _flat_columns(elements).items():
        optional[name] = field(el, SE_REPETITION) == OPTIONAL
        if name in schema.names and not pa.types.is_dictionary(schema.field(name).type):
            one = pa.schema([schema.field(name)]).serialize().to_pybytes()
            served[name] = (leaf, encode_struct(el), base64.b64encode(one) if ARROW_SCHEMA in kv else None)
    needed = set() if walk is not None else {CC_OI_OFFSET, CC_OI_LENGTH}
    found: list[tuple[int, str, Struct, int]] = []  # (row group, name, ColumnChunk, rows)
    for g, rg in enumerate(field(fmd, FMD_ROW_GROUPS)[1]):
        if walk is not None and g != walk[0]:
            continue
        columns = field(rg, RG_COLUMNS)[1]
        for name, (leaf, _, _) in served.items():
            cc = columns[leaf]
            if {CC_META, *needed} <= cc.keys() and not {
                CC_FILE_PATH,
                CC_CRYPTO,
                CC_ENCRYPTED_META,
            } & cc.keys():
                found.append((g, name, cc, field(rg, RG_NUM_ROWS)))
    if not found:
        return NO_PAGE_INDEX
    locations: list[tuple[np.ndarray, np.ndarray, np.ndarray] | None]
    if walk is None:
        offset_indexes = fetch_ranges(
            handle, [(field(cc, CC_OI_OFFSET), field(cc, CC_OI_LENGTH)) for _, _, cc, _ in found]
        )
        locations = [
            _offset_index(raw, rows) for (_, _, _, rows), raw in zip(found, offset_indexes, strict=True)
        ]
    else:
        metas = [field(cc, CC_META) for _, _, cc, _ in found]
        rows = [r for _, _, _, r in found]
        walked = (
            range_readers().map(_walk_chunk, [handle] * len(metas), metas)
            if walk[1]
            else map(_walk_chunk, [handle] * len(metas), metas)
        )
        locations = [None if w is None or w[2][-1] != r else w for w, r in zip(walked, rows, strict=True)]
    chunks = {}
    for (g, name, cc, _), where in zip(found, locations, strict=True):
        _, encoded_leaf, arrow_schema = served[name]
        pages = (
            None
            if where is None
            else _column_pages(name, encoded_leaf, field(cc, CC_META), *where, arrow_schema, optional[name])
        )
        if pages is not None:
            chunks[(g, name)] = pages
    root = encode_struct({**elements[0], SE_NUM_CHILDREN: (I32, 1)})
    return PageIndex(field(fmd, FMD_VERSION), root, field(fmd, FMD_CREATED_BY), chunks)


def _flat_columns(elements: list[Struct]) -> dict[str, tuple[int, Struct]]:
    """Top-level primitive, non-repeated, non-INT96 columns: name → (leaf index, SchemaElement).

    A name that occurs twice at the top level is left out.
    """
    out: dict[str, tuple[int, Struct]] = {}
    seen: set[str] = set()
    pos, leaf = 1, 0
    for _ in range(field(elements[0], SE_NUM_CHILDREN, 0)):
        el = elements[pos]
        name = field(el, SE_NAME).decode()
        end, leaves = _subtree(elements, pos)
        if name in seen:
            out.pop(name, None)
        elif (
            SE_NUM_CHILDREN not in el and field(el, SE_REPETITION) != REPEATED and field(el, SE_TYPE) != INT96
        ):
            out[name] = (leaf, el)
        seen.add(name)
        pos, leaf = end, leaf + leaves
    return out


def _subtree(elements: list[Struct], pos: int) -> tuple[int, int]:
    """(position after the schema subtree at ``pos``, leaves in it); iterative, any depth."""
    leaves, pending = 0, 1  # elements of the subtree still to visit
    while pending:
        children = field(elements[pos], SE_NUM_CHILDREN)
        pos, pending = pos + 1, pending - 1
        if children is None:
            leaves += 1
        else:
            pending += children
    return pos, leaves


def _offset_index(raw: Bytes, rows: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(offsets, sizes, first rows plus ``rows`` at the end) of a chunk's offset index."""
    locations = field(decode_struct(raw)[0], OI_PAGE_LOCATIONS)[1]
    offsets = np.array([field(p, PL_OFFSET) for p in locations], dtype=np.int64)
    sizes = np.array([field(p, PL_SIZE) for p in locations], dtype=np.int64)
    first_rows = np.array([*(field(p, PL_FIRST_ROW) for p in locations), rows], dtype=np.int64)
    return offsets, sizes, first_rows


#: Bytes read for a page header first (twice as many each time it turns out longer: page
#: statistics of long strings).
_HEADER_READ = 256


def _walk_chunk(source: ByteSource, meta: Struct) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(offsets, sizes, first rows plus the chunk's row count) of a chunk's data pages, read
    from its page headers one after the other; None when the pages do not fill the chunk."""
    dictionary = field(meta, CMD_DICTIONARY_PAGE_OFFSET, 0)
    data = field(meta, CMD_DATA_PAGE_OFFSET)
    pos = dictionary if 0 < dictionary < data else data
    end = pos + field(meta, CMD_COMPRESSED)
    if end > source.handle.size():
        raise ValueError(f"a column chunk ends at {end}, past the end of the file")
    offsets: list[int] = []
    sizes: list[int] = []
    first_rows = [0]
    while pos < end:
        want = min(_HEADER_READ, end - pos)
        while True:
            raw = fetch_ranges(source, [(pos, want)], concurrent=False)[0]
            try:
                header, length = decode_struct(raw)
                break
            except (ValueError, IndexError):
                if want == end - pos:
                    raise
                want = min(2 * want, end - pos)
        size = length + field(header, PH_COMPRESSED)
        kind = field(header, PH_TYPE)
        if kind == DATA_PAGE:
            rows = field(field(header, PH_DATA_V1), 1)  # a flat column: one value or null per row
        elif kind == DATA_PAGE_V2:
            rows = field(field(header, PH_DATA_V2), 3)
        elif kind == DICTIONARY_PAGE and not offsets:
            pos += size
            continue
        else:  # an index page, or a dictionary page after data pages
            return None
        offsets.append(pos)
        sizes.append(size)
        first_rows.append(first_rows[-1] + rows)
        pos += size
    if pos != end:
        return None
    return np.array(offsets, np.int64), np.array(sizes, np.int64), np.array(first_rows, np.int64)


def _column_pages(
    name: str,
    leaf: bytes,
    meta: Struct,
    offsets: np.ndarray,
    sizes: np.ndarray,
    first_rows: np.ndarray,
    arrow_schema: bytes | None,
    optional: bool,
) -> ColumnPages | None:
    """The chunk's pages (None when the page locations do not fit the chunk)."""
    if not len(offsets):
        return None
    # The chunk starts at its dictionary page when it has one (some writers set the
    # dictionary page offset to 0 for none).
    first = int(offsets[0])
    dictionary = field(meta, CMD_DICTIONARY_PAGE_OFFSET, 0)
    start = dictionary if 0 < dictionary < first else min(first, field(meta, CMD_DATA_PAGE_OFFSET))
    ends = offsets + sizes
    fits = (
        first_rows[0] == 0
        and bool(np.all(np.diff(first_rows) > 0))
        and bool(np.all(sizes > 0))
        and bool(np.all(ends[:-1] <= offsets[1:]))
        and int(ends[-1]) <= start + field(meta, CMD_COMPRESSED)
    )
    if not fits:
        return None
    return ColumnPages(
        name=name,
        leaf=leaf,
        meta={fid: meta[fid] for fid in _CMD_KEPT},
        dictionary=(start, first - start),
        page_offsets=offsets,
        page_sizes=sizes,
        page_rows=first_rows,
        arrow_schema=arrow_schema,
        optional=optional,
        dictionary_encoded_pages=_dictionary_encoded_pages(meta),
    )


def _dictionary_encoded_pages(meta: Struct) -> int:
    """Data pages a chunk's page encoding statistics count as dictionary encoded."""
    stats = field(meta, CMD_ENCODING_STATS)
    if stats is None:
        return 0
    return sum(
        int(field(s, PES_COUNT, 0))
        for s in stats[1]
        if field(s, PES_PAGE_TYPE) in (DATA_PAGE, DATA_PAGE_V2)
        and field(s, PES_ENCODING) in DICTIONARY_ENCODINGS
    )


# --------------------------------------------------------------------------- which pages hold which rows


@dataclass(frozen=True)
class PagePlan:
    """The data pages of one column chunk that hold the wanted rows."""

    chunk: ColumnPages
    pages: np.ndarray
    #: Rows in each selected page.
    rows: np.ndarray
    #: Positions of the wanted rows among the rows of the selected pages.
    positions: np.ndarray

    @property
    def data_bytes(self) -> int:
        """Bytes of the selected pages."""
        return int(self.chunk.page_sizes[self.pages].sum())


def plan_pages(chunk: ColumnPages, local: np.ndarray) -> PagePlan:
    """The data pages of ``chunk`` holding the rows ``local`` (sorted, distinct positions in
    its row group), and where those rows are among the pages' rows."""
    page_of = np.searchsorted(chunk.page_rows, local, side="right") - 1
    pages = np.unique(page_of)
    rows = chunk.page_rows[pages + 1] - chunk.page_rows[pages]
    base = np.cumsum(rows) - rows
    positions = base[np.searchsorted(pages, page_of)] + local - chunk.page_rows[page_of]
    return PagePlan(chunk, pages, rows, positions)
