"""Point reads of a Parquet row group that fetch and decode only the pages holding the rows.

pyarrow 26 decodes whole column chunks: one row of a 50,000-row group costs decoding all
50,000. A file with a page index has, per column chunk, an ``OffsetIndex``: where each
data page starts and the first row it holds. With it the reader can fetch only the data
pages holding the wanted rows (plus the dictionary page when those pages are dictionary
encoded) and leave the other pages alone.

pyarrow can neither be pointed at single pages nor tell where the offset index is. So
this module reads the footer itself (a small Thrift compact-protocol codec), and for each
wanted column assembles a tiny Parquet file in memory: ``PAR1``, the fetched pages byte
for byte, and a footer for one row group of that one column (schema pruned to the root
and the leaf; value counts, sizes and offsets of the copied pages; statistics, encoding
stats, bloom filter and index locations dropped; ``created_by`` kept, as readers apply
writer-specific fixes by it; the file's ``ARROW:schema`` pruned to the column). pyarrow
decodes that file as it decodes the original chunk, so the values and Arrow types are
those of a whole row-group read.

Served: top-level primitive columns that are not repeated and not INT96, in files with
a plaintext footer and no encrypted columns, whose Arrow type is not a dictionary. A file
without offset indexes (pyarrow's default, so pyiceberg's) has its pages found by reading
each page header of the row group's chunks in turn (:func:`walk_page_headers`). Data page
v1 and v2, every encoding and codec pyarrow reads. A column the page path cannot serve is
left out of :func:`read_group_rows`' answer, and the caller reads that column of the row
group as usual; the other columns still go page by page.

Bytes that do not decode (a corrupt or hostile footer, offset index or page header) raise
:class:`PageIndexError` from :func:`load_page_index` and :func:`read_group_rows`, never
anything else: the caller then reads the row group the ordinary way, which needs none of
these structures. The Thrift decoder nests at most :data:`MAX_THRIFT_DEPTH` containers
deep (real footers nest about 6), so a deeply nested input cannot exhaust the stack.
"""

from __future__ import annotations

import base64
import contextlib
import struct
import sys
from collections.abc import Hashable, Iterator, Mapping, MutableMapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from lakehouse_index.errors import LakehouseIndexError, TableFormatError
from lakehouse_index.io.parallel import DECODE_THREADS, shared_pool
from lakehouse_index.varint import read_uvarint, unzigzag

__all__ = [
    "MAX_THRIFT_DEPTH",
    "NO_PAGE_INDEX",
    "ColumnPages",
    "DictionaryCache",
    "PageIndex",
    "PageIndexError",
    "PageRead",
    "UNINDEXED",
    "ThriftDecodeError",
    "decode_struct",
    "encode_struct",
    "load_page_index",
    "plain_type",
    "read_group_rows",
    "read_tail",
    "walk_page_headers",
]

# --------------------------------------------------------------------------- Thrift compact protocol

# Compact-protocol type codes. A bool struct field carries its value in the type code
# (TRUE/FALSE); a bool list element is one byte.
_TRUE, _FALSE, _I8, _I16, _I32, _I64, _DOUBLE, _BINARY, _LIST, _SET, _MAP, _STRUCT = range(1, 13)
_INTS = frozenset((_I16, _I32, _I64))

#: A decoded Thrift struct: field id → (compact type code, value). A value is a bool, int,
#: float, bytes, a nested Struct, or for a list or set (element type code, [values]).
#: For encoding, a struct value may also be given already encoded, as bytes.
Struct = dict[int, tuple[int, Any]]
#: Bytes as read: slices of a larger read are memoryviews (no copy).
Bytes = bytes | memoryview

#: Deepest nesting of structs, lists and sets the decoder accepts.
MAX_THRIFT_DEPTH = 64


class ThriftDecodeError(ValueError):
    """Bytes that are not a compact-protocol struct this decoder accepts."""


class PageIndexError(LakehouseIndexError):
    """A Parquet file's footer, offset index or page headers do not decode as expected.

    Raised instead of any lower-level error; readers fall back to a whole row-group read.
    """


class _Decoder:
    """Reads compact-protocol values from a buffer, advancing ``pos``.

    Integer fields (most of a footer or an offset index) are decoded directly in
    :meth:`struct`, not through :meth:`value` (a benchmark data file's page index: 1.3 ms
    against 1.5).
    """

    __slots__ = ("buf", "depth", "pos")

    def __init__(self, buf: Bytes, pos: int) -> None:
        self.buf = buf
        self.pos = pos
        self.depth = 0

    def _enter(self) -> None:
        self.depth += 1
        if self.depth > MAX_THRIFT_DEPTH:
            raise ThriftDecodeError(f"Thrift values nested deeper than {MAX_THRIFT_DEPTH} at byte {self.pos}")

    def varint(self) -> int:
        result, self.pos = read_uvarint(self.buf, self.pos)
        return result

    def zigzag(self) -> int:
        return unzigzag(self.varint())

    def value(self, ctype: int) -> Any:
        if ctype in _INTS:
            return self.zigzag()
        if ctype == _STRUCT:
            return self.struct()
        if ctype == _BINARY:
            n = self.varint()
            start = self.pos
            self.pos += n
            if self.pos > len(self.buf):
                raise ThriftDecodeError("a binary value runs past the buffer")
            return bytes(self.buf[start : self.pos])
        if ctype in (_LIST, _SET):
            self._enter()
            head = self.buf[self.pos]
            self.pos += 1
            size = self.varint() if head >> 4 == 15 else head >> 4
            elem = head & 0x0F
            items = [self.value(elem) for _ in range(size)]
            self.depth -= 1
            return (elem, items)
        if ctype in (_TRUE, _FALSE):
            self.pos += 1
            return self.buf[self.pos - 1] == _TRUE
        if ctype == _I8:
            self.pos += 1
            return struct.unpack_from("<b", self.buf, self.pos - 1)[0]
        if ctype == _DOUBLE:
            self.pos += 8
            return struct.unpack_from("<d", self.buf, self.pos - 8)[0]
        raise ThriftDecodeError(f"unsupported Thrift compact type {ctype}")

    def struct(self) -> Struct:
        self._enter()
        buf = self.buf
        pos = self.pos
        out: Struct = {}
        last = 0
        while True:
            head = buf[pos]
            pos += 1
            if head == 0:
                self.pos = pos
                self.depth -= 1
                return out
            ctype = head & 0x0F
            if head >> 4:
                fid = last + (head >> 4)
            else:
                self.pos = pos
                fid = self.zigzag()
                pos = self.pos
            if ctype in _INTS:  # a zigzag varint
                n, pos = read_uvarint(buf, pos)
                out[fid] = (ctype, unzigzag(n))
            elif ctype in (_TRUE, _FALSE):  # a bool field's value is its type code
                out[fid] = (_TRUE, ctype == _TRUE)
            else:
                self.pos = pos
                out[fid] = (ctype, self.value(ctype))
                pos = self.pos
            last = fid


def decode_struct(buf: Bytes, pos: int = 0) -> tuple[Struct, int]:
    """Decode one compact-protocol struct at ``pos``: (struct, position after it).

    Raises :class:`ThriftDecodeError` (a ValueError) on input it cannot decode: truncated,
    an unknown type code, or containers nested deeper than :data:`MAX_THRIFT_DEPTH`.
    """
    dec = _Decoder(buf, pos)
    try:
        return dec.struct(), dec.pos
    except (IndexError, struct.error) as e:
        raise ThriftDecodeError(f"truncated Thrift struct at byte {dec.pos}: {e}") from e


def _put_varint(out: bytearray, n: int) -> None:
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


def _put_zigzag(out: bytearray, n: int) -> None:
    _put_varint(out, (n << 1) ^ (n >> 63))


def _put_value(out: bytearray, ctype: int, value: Any) -> None:
    if ctype in (_I16, _I32, _I64):
        _put_zigzag(out, value)
    elif ctype == _STRUCT:
        if isinstance(value, bytes):
            out += value
        else:
            _put_struct(out, value)
    elif ctype == _BINARY:
        _put_varint(out, len(value))
        out += value
    elif ctype in (_LIST, _SET):
        elem, items = value
        if len(items) < 15:
            out.append(len(items) << 4 | elem)
        else:
            out.append(0xF0 | elem)
            _put_varint(out, len(items))
        for item in items:
            _put_value(out, elem, item)
    elif ctype in (_TRUE, _FALSE):
        out.append(_TRUE if value else _FALSE)
    elif ctype == _I8:
        out += struct.pack("<b", value)
    elif ctype == _DOUBLE:
        out += struct.pack("<d", value)
    else:
        raise ValueError(f"unsupported Thrift compact type {ctype}")


def _put_struct(out: bytearray, s: Struct) -> None:
    last = 0
    for fid in sorted(s):
        ctype, value = s[fid]
        if ctype in (_TRUE, _FALSE):
            ctype = _TRUE if value else _FALSE
        delta = fid - last
        if 0 < delta <= 15:
            out.append(delta << 4 | ctype)
        else:
            out.append(ctype)
            _put_zigzag(out, fid)
        if ctype not in (_TRUE, _FALSE):
            _put_value(out, ctype, value)
        last = fid
    out.append(0)


def encode_struct(s: Struct) -> bytes:
    """Encode a struct (as :func:`decode_struct` returns it) in the compact protocol."""
    out = bytearray()
    _put_struct(out, s)
    return bytes(out)


def _get(s: Struct, fid: int, default: Any = None) -> Any:
    field = s.get(fid)
    return default if field is None else field[1]


# --------------------------------------------------------------------------- footer and offset index

_MAGIC = b"PAR1"
# Field ids and enum values of parquet-format's parquet.thrift.
_FMD_VERSION, _FMD_SCHEMA, _FMD_NUM_ROWS, _FMD_ROW_GROUPS, _FMD_KV, _FMD_CREATED_BY = 1, 2, 3, 4, 5, 6
_FMD_ENCRYPTION = 8
_SE_TYPE, _SE_REPETITION, _SE_NAME, _SE_NUM_CHILDREN = 1, 3, 4, 5
_RG_COLUMNS, _RG_TOTAL_BYTE_SIZE, _RG_NUM_ROWS = 1, 2, 3
_CC_FILE_PATH, _CC_FILE_OFFSET, _CC_META, _CC_OI_OFFSET, _CC_OI_LENGTH = 1, 2, 3, 4, 5
_CC_CRYPTO, _CC_ENCRYPTED_META = 8, 9
_CMD_NUM_VALUES, _CMD_UNCOMPRESSED, _CMD_COMPRESSED = 5, 6, 7
_CMD_DATA_PAGE_OFFSET, _CMD_DICTIONARY_PAGE_OFFSET = 9, 11
#: ColumnMetaData fields copied into the one-column file: type, encodings, path, codec.
_CMD_KEPT = (1, 2, 3, 4)
_CMD_TYPE, _CMD_CODEC = 1, 4
_CMD_ENCODING_STATS = 13
_PES_PAGE_TYPE, _PES_ENCODING, _PES_COUNT = 1, 2, 3
_OI_PAGE_LOCATIONS = 1
_PL_OFFSET, _PL_SIZE, _PL_FIRST_ROW = 1, 2, 3
_PH_TYPE, _PH_UNCOMPRESSED, _PH_COMPRESSED = 1, 2, 3
_PH_CRC, _PH_DATA_V1, _PH_DICTIONARY, _PH_DATA_V2 = 4, 5, 7, 8
_DATA_PAGE, _DICTIONARY_PAGE, _DATA_PAGE_V2 = 0, 2, 3
_OPTIONAL, _REPEATED, _INT96 = 1, 2, 3
_PLAIN, _RLE = 0, 3
#: Codecs decompressed here (pyarrow names); others (LZO, Hadoop LZ4) take the one-column path.
_CODECS = {1: "snappy", 2: "gzip", 4: "brotli", 6: "zstd", 7: "lz4_raw"}
_DICTIONARY_ENCODINGS = (2, 8)  # PLAIN_DICTIONARY, RLE_DICTIONARY
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
_ARROW_SCHEMA = b"ARROW:schema"


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
        return int(_get(self.meta, _CMD_CODEC))


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


@contextlib.contextmanager
def _decoding(what: str) -> Iterator[None]:
    """Turns what decoding malformed structures can raise (a field missing or of an unexpected
    type, a truncated buffer) into PageIndexError: this module's one error."""
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
    with _decoding("the page index"):  # not the footer or offset index we expect
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
    with _decoding(f"the page headers of row group {group}"):
        return _page_index(src, decode_struct(footer)[0], schema, walk=(group, concurrent))


def _footer(
    handle: pa.NativeFile, metadata: pq.FileMetaData, tail: Bytes | None
) -> tuple[_Source, memoryview] | None:
    """The file as a :class:`_Source` holding its end, and its footer's bytes (None when the
    end of the file is not the footer pyarrow read)."""
    footer_len = metadata.serialized_size
    size = handle.size()
    if tail is None or len(tail) < footer_len + 8:
        tail = handle.read_at(footer_len + 8, size - footer_len - 8)
    if tail[-4:] != _MAGIC or int.from_bytes(tail[-8:-4], "little") != footer_len:
        return None
    return _Source(handle, size - len(tail), tail), memoryview(tail)[len(tail) - footer_len - 8 :]


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
    if tail[-4:] != _MAGIC:
        raise pa.ArrowInvalid("the file does not end with the Parquet magic bytes")
    footer_len = int.from_bytes(tail[-8:-4], "little")
    if footer_len + 8 > size - 4:
        raise pa.ArrowInvalid(f"the footer length {footer_len} exceeds the file")
    if footer_len + 8 > len(tail):
        start = size - footer_len - 8
        tail = bytes(handle.read_at(size - start, start))
    footer = tail[len(tail) - footer_len - 8 :]
    return pq.read_metadata(pa.BufferReader(_MAGIC + footer)), tail


@dataclass(frozen=True)
class _Source:
    """An open file, and the bytes of it already read (``head`` at ``offset``)."""

    handle: pa.NativeFile
    offset: int = 0
    head: Bytes = b""


def _page_index(
    handle: _Source, fmd: Struct, schema: pa.Schema, walk: tuple[int, bool] | None = None
) -> PageIndex:
    """The pages of every served chunk with an offset index; with ``walk`` (row group,
    concurrently), those of every served chunk of that row group, from its page headers."""
    if _FMD_ENCRYPTION in fmd:
        return NO_PAGE_INDEX
    elements = _get(fmd, _FMD_SCHEMA)[1]
    kv = {_get(item, 1): _get(item, 2) for item in _get(fmd, _FMD_KV, (_STRUCT, []))[1]}
    served = {}  # name → (leaf index, leaf, ARROW:schema for the one-column file)
    optional: dict[str, bool] = {}
    for name, (leaf, el) in _flat_columns(elements).items():
        optional[name] = _get(el, _SE_REPETITION) == _OPTIONAL
        if name in schema.names and not pa.types.is_dictionary(schema.field(name).type):
            one = pa.schema([schema.field(name)]).serialize().to_pybytes()
            served[name] = (leaf, encode_struct(el), base64.b64encode(one) if _ARROW_SCHEMA in kv else None)
    needed = set() if walk is not None else {_CC_OI_OFFSET, _CC_OI_LENGTH}
    found: list[tuple[int, str, Struct, int]] = []  # (row group, name, ColumnChunk, rows)
    for g, rg in enumerate(_get(fmd, _FMD_ROW_GROUPS)[1]):
        if walk is not None and g != walk[0]:
            continue
        columns = _get(rg, _RG_COLUMNS)[1]
        for name, (leaf, _, _) in served.items():
            cc = columns[leaf]
            if {_CC_META, *needed} <= cc.keys() and not {
                _CC_FILE_PATH,
                _CC_CRYPTO,
                _CC_ENCRYPTED_META,
            } & cc.keys():
                found.append((g, name, cc, _get(rg, _RG_NUM_ROWS)))
    if not found:
        return NO_PAGE_INDEX
    locations: list[tuple[np.ndarray, np.ndarray, np.ndarray] | None]
    if walk is None:
        offset_indexes = _fetch(
            handle, [(_get(cc, _CC_OI_OFFSET), _get(cc, _CC_OI_LENGTH)) for _, _, cc, _ in found]
        )
        locations = [
            _offset_index(raw, rows) for (_, _, _, rows), raw in zip(found, offset_indexes, strict=True)
        ]
    else:
        metas = [_get(cc, _CC_META) for _, _, cc, _ in found]
        rows = [r for _, _, _, r in found]
        walked = (
            _readers().map(_walk_chunk, [handle] * len(metas), metas)
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
            else _column_pages(name, encoded_leaf, _get(cc, _CC_META), *where, arrow_schema, optional[name])
        )
        if pages is not None:
            chunks[(g, name)] = pages
    root = encode_struct({**elements[0], _SE_NUM_CHILDREN: (_I32, 1)})
    return PageIndex(_get(fmd, _FMD_VERSION), root, _get(fmd, _FMD_CREATED_BY), chunks)


def _flat_columns(elements: list[Struct]) -> dict[str, tuple[int, Struct]]:
    """Top-level primitive, non-repeated, non-INT96 columns: name → (leaf index, SchemaElement).

    A name that occurs twice at the top level is left out.
    """
    out: dict[str, tuple[int, Struct]] = {}
    seen: set[str] = set()
    pos, leaf = 1, 0
    for _ in range(_get(elements[0], _SE_NUM_CHILDREN, 0)):
        el = elements[pos]
        name = _get(el, _SE_NAME).decode()
        end, leaves = _subtree(elements, pos)
        if name in seen:
            out.pop(name, None)
        elif (
            _SE_NUM_CHILDREN not in el
            and _get(el, _SE_REPETITION) != _REPEATED
            and _get(el, _SE_TYPE) != _INT96
        ):
            out[name] = (leaf, el)
        seen.add(name)
        pos, leaf = end, leaf + leaves
    return out


def _subtree(elements: list[Struct], pos: int) -> tuple[int, int]:
    """(position after the schema subtree at ``pos``, leaves in it); iterative, any depth."""
    leaves, pending = 0, 1  # elements of the subtree still to visit
    while pending:
        children = _get(elements[pos], _SE_NUM_CHILDREN)
        pos, pending = pos + 1, pending - 1
        if children is None:
            leaves += 1
        else:
            pending += children
    return pos, leaves


def _offset_index(raw: Bytes, rows: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(offsets, sizes, first rows plus ``rows`` at the end) of a chunk's offset index."""
    locations = _get(decode_struct(raw)[0], _OI_PAGE_LOCATIONS)[1]
    offsets = np.array([_get(p, _PL_OFFSET) for p in locations], dtype=np.int64)
    sizes = np.array([_get(p, _PL_SIZE) for p in locations], dtype=np.int64)
    first_rows = np.array([*(_get(p, _PL_FIRST_ROW) for p in locations), rows], dtype=np.int64)
    return offsets, sizes, first_rows


#: Bytes read for a page header first (twice as many each time it turns out longer: page
#: statistics of long strings).
_HEADER_READ = 256


def _walk_chunk(source: _Source, meta: Struct) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(offsets, sizes, first rows plus the chunk's row count) of a chunk's data pages, read
    from its page headers one after the other; None when the pages do not fill the chunk."""
    dictionary = _get(meta, _CMD_DICTIONARY_PAGE_OFFSET, 0)
    data = _get(meta, _CMD_DATA_PAGE_OFFSET)
    pos = dictionary if 0 < dictionary < data else data
    end = pos + _get(meta, _CMD_COMPRESSED)
    if end > source.handle.size():
        raise ValueError(f"a column chunk ends at {end}, past the end of the file")
    offsets: list[int] = []
    sizes: list[int] = []
    first_rows = [0]
    while pos < end:
        want = min(_HEADER_READ, end - pos)
        while True:
            raw = _fetch(source, [(pos, want)], concurrent=False)[0]
            try:
                header, length = decode_struct(raw)
                break
            except (ValueError, IndexError):
                if want == end - pos:
                    raise
                want = min(2 * want, end - pos)
        size = length + _get(header, _PH_COMPRESSED)
        kind = _get(header, _PH_TYPE)
        if kind == _DATA_PAGE:
            rows = _get(_get(header, _PH_DATA_V1), 1)  # a flat column: one value or null per row
        elif kind == _DATA_PAGE_V2:
            rows = _get(_get(header, _PH_DATA_V2), 3)
        elif kind == _DICTIONARY_PAGE and not offsets:
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
    dictionary = _get(meta, _CMD_DICTIONARY_PAGE_OFFSET, 0)
    start = dictionary if 0 < dictionary < first else min(first, _get(meta, _CMD_DATA_PAGE_OFFSET))
    ends = offsets + sizes
    fits = (
        first_rows[0] == 0
        and bool(np.all(np.diff(first_rows) > 0))
        and bool(np.all(sizes > 0))
        and bool(np.all(ends[:-1] <= offsets[1:]))
        and int(ends[-1]) <= start + _get(meta, _CMD_COMPRESSED)
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
    stats = _get(meta, _CMD_ENCODING_STATS)
    if stats is None:
        return 0
    return sum(
        int(_get(s, _PES_COUNT, 0))
        for s in stats[1]
        if _get(s, _PES_PAGE_TYPE) in (_DATA_PAGE, _DATA_PAGE_V2)
        and _get(s, _PES_ENCODING) in _DICTIONARY_ENCODINGS
    )


def _fetch(
    source: pa.NativeFile | _Source, ranges: list[tuple[int, int]], concurrent: bool = True
) -> list[memoryview]:
    """The bytes at each (offset, length): one read per run of adjacent or overlapping ranges,
    the runs read concurrently (one after the other unless ``concurrent``); ranges inside
    bytes already read are not read again.

    ValueError for a range outside the file (a corrupt footer or offset index names it).
    """
    src = source if isinstance(source, _Source) else _Source(source)
    size = src.handle.size()
    for offset, length in ranges:
        if offset < 0 or length < 0 or offset + length > size:
            raise ValueError(f"range ({offset}, {length}) lies outside the file of {size} bytes")
    order = sorted(range(len(ranges)), key=lambda i: ranges[i][0])
    runs: list[tuple[int, int, list[int]]] = []  # (start, end, range numbers)
    for k in order:
        offset, length = ranges[k]
        if runs and offset <= runs[-1][1]:
            start, end, members = runs[-1]
            runs[-1] = (start, max(end, offset + length), [*members, k])
        else:
            runs.append((offset, offset + length, [k]))
    head = memoryview(src.head)

    def read(run: tuple[int, int, list[int]]) -> memoryview:
        start, end, _ = run
        if src.offset <= start and end <= src.offset + len(head):
            return head[start - src.offset : end - src.offset]
        blob = memoryview(src.handle.read_at(end - start, start))
        if len(blob) != end - start:
            raise ValueError(f"short read at {start}: {len(blob)} of {end - start} bytes")
        return blob

    blobs = list(_readers().map(read, runs)) if concurrent and len(runs) > 1 else [read(r) for r in runs]
    out = [memoryview(b"")] * len(ranges)
    for (start, _, members), blob in zip(runs, blobs, strict=True):
        for k in members:
            offset, length = ranges[k]
            out[k] = blob[offset - start : offset - start + length]
    return out


# --------------------------------------------------------------------------- reading rows


@dataclass(frozen=True)
class PageRead:
    """Rows read page by page, and how many bytes of pages were fetched for them.

    ``table`` holds the columns the page path served, in the order asked; a column it
    could not serve is absent (the caller reads it with the row group).
    """

    table: pa.Table
    bytes_read: int


def _has_view(t: pa.DataType) -> bool:
    """Whether ``t`` is or holds (at any depth) a string_view/binary_view type."""
    if pa.types.is_string_view(t) or pa.types.is_binary_view(t):
        return True
    return any(_has_view(t.field(i).type) for i in range(t.num_fields))


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


@dataclass(frozen=True)
class _Plan:
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


def _plan(chunk: ColumnPages, local: np.ndarray) -> _Plan:
    page_of = np.searchsorted(chunk.page_rows, local, side="right") - 1
    pages = np.unique(page_of)
    rows = chunk.page_rows[pages + 1] - chunk.page_rows[pages]
    base = np.cumsum(rows) - rows
    positions = base[np.searchsorted(pages, page_of)] + local - chunk.page_rows[page_of]
    return _Plan(chunk, pages, rows, positions)


@dataclass(frozen=True)
class _Page:
    """One fetched page: its bytes (header included) and its decoded header."""

    data: Bytes
    header: Struct
    header_len: int

    @property
    def uncompressed_size(self) -> int:
        """Size of the page with its body uncompressed, header included."""
        return self.header_len + int(_get(self.header, _PH_UNCOMPRESSED))


def _page(data: Bytes) -> _Page | None:
    """The page in ``data`` (None when its header does not decode or does not span it)."""
    try:
        header, n = decode_struct(data)
    except (ValueError, IndexError):
        return None
    if _PH_UNCOMPRESSED not in header or n + _get(header, _PH_COMPRESSED, -1) != len(data):
        return None
    return _Page(data, header, n)


def _data_encoding(page: _Page | None, rows: int) -> int | None:
    """Encoding of a data page holding ``rows`` rows (None when it is not such a page)."""
    if page is None:
        return None
    kind = _get(page.header, _PH_TYPE)
    # A flat column has one value (or null) per row.
    if kind == _DATA_PAGE and _PH_DATA_V1 in page.header:
        v1 = _get(page.header, _PH_DATA_V1)
        return _get(v1, 2) if _get(v1, 1) == rows else None
    if kind == _DATA_PAGE_V2 and _PH_DATA_V2 in page.header:
        v2 = _get(page.header, _PH_DATA_V2)
        return _get(v2, 4) if _get(v2, 1) == rows and _get(v2, 3) == rows else None
    return None


#: Where decoded dictionaries are kept: (file key, row group, column) → the dictionary's
#: values, as :func:`read_group_rows` decodes them.
DictionaryCache = MutableMapping[Hashable, pa.Array]


def read_group_rows(
    handle: pa.NativeFile,
    index: PageIndex,
    schema: pa.Schema,
    group: int,
    local: np.ndarray,
    columns: list[str],
    dictionaries: DictionaryCache | None = None,
    file_key: Hashable = None,
    concurrent: bool = True,
) -> PageRead:
    """Rows ``local`` (sorted, distinct positions in row group ``group``) of ``columns``.

    ``handle`` is the open file, ``index`` its :func:`load_page_index`, ``schema`` its
    Arrow schema. For each column the page path serves (see the module docstring), the
    table holds what ``pf.read_row_group(group, [column])`` holds at those rows (values,
    types, field metadata), with string/binary views as large string/binary
    (:func:`plain_type`); the other columns are left out. The page path never reads more
    than the whole chunk would (the same dictionary page, a subset of the data pages).

    With ``dictionaries`` (a cache; ``file_key`` names the file's current bytes in it),
    the pages' dictionary indexes at the wanted rows of a column whose selected pages are
    all dictionary encoded are decoded here, and looked up in its dictionary, decoded whole
    on first need and kept there: a warm read fetches and decompresses only the data pages.
    ``concurrent``: the merged ranges are fetched in parallel (for an object store; on a
    local disk a read from the page cache costs less than handing it to a thread).
    :class:`PageIndexError` when the index or a fetched page does not decode as expected.
    """
    with _decoding(f"pages of row group {group}"):
        plans = [
            _plan(c, local) for c in (index.chunks.get((group, name)) for name in columns) if c is not None
        ]
        if not plans or len(local) == 0:
            return PageRead(pa.table({}), 0)
        # The dictionaries that will be needed (the chunk's encoding statistics count the
        # selected pages among its dictionary-encoded ones) and are not cached yet: on an
        # object store their pages come with the data pages (one round trip). With a cache,
        # they are decoded while the data pages are fetched and their indexes decoded (a
        # cold read), on a local disk read by the decoder thread too.
        unknown = sorted(
            (
                p.chunk
                for p in plans
                if int(p.pages.max()) < p.chunk.dictionary_encoded_pages
                and (dictionaries is None or (file_key, group, p.chunk.name) not in dictionaries)
            ),
            key=lambda c: -c.dictionary[1],  # the largest first: the decoder threads end together
        )
        pending: dict[str, Future[_Dictionary]] = {}
        if dictionaries is not None and not concurrent:
            pending = {
                c.name: _decoders().submit(_load_dictionary, handle, index, c, schema.field(c.name).type)
                for c in unknown
            }
        pages, early = _data_pages(handle, plans, concurrent, unknown if concurrent else [])
        if dictionaries is not None:  # the early pages are all of unknown chunks: decode them now
            by_name = {c.name: c for c in unknown}
            pending.update(
                (name, _decoders().submit(_dictionary, index, by_name[name], page, schema.field(name).type))
                for name, page in early.items()
            )
            early = {}
        decoded: dict[str, pa.Array | pa.ChunkedArray | None] = {}
        read = 0
        if dictionaries is not None:
            by_index, read = _read_by_dictionary(
                handle, index, schema, group, plans, pages, dictionaries, file_key, concurrent, pending
            )
            decoded.update(by_index)
        rest = [
            (plan, mine) for plan, mine in zip(plans, pages, strict=True) if plan.chunk.name not in decoded
        ]
        # The dictionary page is needed only when a selected page is dictionary encoded
        # (writers fall back to plain pages when the dictionary grows too large).
        needs = [mine is not None and any(e in _DICTIONARY_ENCODINGS for e, _ in mine) for _, mine in rest]
        fetched = iter(
            _dictionary_pages(
                handle,
                [p.chunk for (p, _), need in zip(rest, needs, strict=True) if need],
                concurrent,
                {**early, **{name: done.result().page for name, done in pending.items()}},
            )
        )
        work = []  # (plan, one-column file) of every column whose pages were fetched as indexed
        for (plan, mine), need in zip(rest, needs, strict=True):
            dictionary = next(fetched) if need else None
            if mine is None or (need and dictionary is None):
                continue
            file = _one_column_file(index, plan.chunk, int(plan.rows.sum()), dictionary, [p for _, p in mine])
            work.append((plan, file))
            read += plan.data_bytes
            if dictionary is not None and plan.chunk.name not in pending:  # else counted already
                read += len(dictionary.data)
        types = [schema.field(plan.chunk.name).type for plan, _ in work]
        # pyarrow decodes without the GIL: columns in parallel, as a whole row-group read does.
        args = ([data for _, data in work], types, [plan.positions for plan, _ in work])
        decoded.update(
            zip(
                [plan.chunk.name for plan, _ in work],
                _decoders().map(_decode, *args) if len(work) > 1 else map(_decode, *args),
                strict=True,
            )
        )
        served = [c for c in columns if decoded.get(c) is not None]
        fields = [schema.field(c) for c in served]
        out = pa.schema([f.with_type(plain_type(f.type)) for f in fields], schema.metadata)
        return PageRead(pa.Table.from_arrays([decoded[c] for c in served], schema=out), read)


def _read_by_dictionary(
    handle: pa.NativeFile,
    index: PageIndex,
    schema: pa.Schema,
    group: int,
    plans: list[_Plan],
    pages: list[list[tuple[int, _Page]] | None],
    cache: DictionaryCache,
    file_key: Hashable,
    concurrent: bool,
    pending: Mapping[str, Future[_Dictionary]],
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
    wanted: list[tuple[_Plan, np.ndarray, np.ndarray, int]] = []
    for plan, mine in zip(plans, pages, strict=True):
        if (
            mine is not None
            and all(e in _DICTIONARY_ENCODINGS for e, _ in mine)
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
    loaded: list[tuple[str, Future[_Dictionary] | _Dictionary]] = list(pending.items())
    if missing:
        raw = _dictionary_pages(handle, missing, concurrent, {})
        types = [schema.field(c.name).type for c in missing]
        decoded = _decoders().map(_dictionary, [index] * len(missing), missing, raw, types)
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


def _concat(parts: Sequence[Bytes]) -> pa.Buffer:
    """``parts`` one after the other, in one buffer of pyarrow's memory pool (see
    :func:`_decompress`)."""
    out = pa.allocate_buffer(sum(len(p) for p in parts))
    view = memoryview(out).cast("B")
    at = 0
    for part in parts:
        view[at : at + len(part)] = part
        at += len(part)
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


def _indexes_at(plan: _Plan, pages: list[_Page]) -> tuple[np.ndarray, np.ndarray] | None:
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
    page: _Page, chunk: ColumnPages, rows: int, want: np.ndarray
) -> tuple[np.ndarray, np.ndarray] | None:
    """(dictionary index, not null) of the rows ``want`` of one dictionary-encoded data page."""
    header = page.header
    body = page.data[page.header_len :]
    size = int(_get(header, _PH_UNCOMPRESSED))
    if _get(header, _PH_TYPE) == _DATA_PAGE:
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
        v2 = _get(header, _PH_DATA_V2)
        def_len, rep_len = int(_get(v2, 5)), int(_get(v2, 6))
        if rep_len:
            return None
        values = body[def_len:]
        raw_values: Bytes | None = (
            _decompress(chunk.codec, values, size - def_len) if _get(v2, 7, True) else values
        )
        if raw_values is None:
            return None
        levels = _levels(body[:def_len], 0, def_len, rows) if chunk.optional and _get(v2, 2) else None
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


@dataclass(frozen=True)
class _Dictionary:
    """A chunk's dictionary page as fetched and its values as decoded (None: not served)."""

    page: _Page | None
    values: pa.Array | None


def _dictionary(index: PageIndex, chunk: ColumnPages, page: _Page | None, t: pa.DataType) -> _Dictionary:
    """The dictionary page ``page`` of ``chunk`` and its values (see :func:`_dictionary_values`)."""
    return _Dictionary(page, _dictionary_values(index, chunk, page, t))


def _load_dictionary(
    handle: pa.NativeFile, index: PageIndex, chunk: ColumnPages, t: pa.DataType
) -> _Dictionary:
    """The dictionary page of ``chunk``, read from ``handle``, and its values."""
    return _dictionary(index, chunk, _dictionary_pages(handle, [chunk], False, {})[0], t)


def _dictionary_values(
    index: PageIndex, chunk: ColumnPages, page: _Page | None, t: pa.DataType
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
    head = _get(page.header, _PH_DICTIONARY)
    n = int(_get(head, 1, 0)) if head is not None else 0
    body = _decompress(chunk.codec, page.data[page.header_len :], int(_get(page.header, _PH_UNCOMPRESSED)))
    if n <= 0 or body is None:
        return None
    width = _PLAIN_WIDTHS.get((int(_get(chunk.meta, _CMD_TYPE)), t))
    if width is not None:  # PLAIN values of these types are Arrow's own buffer layout
        return pa.Array.from_buffers(t, n, [None, pa.py_buffer(body)]) if len(body) == n * width else None
    levels = b""
    if chunk.optional:  # one run of n definition levels of 1
        rle = bytearray()
        _put_varint(rle, n << 1)
        rle.append(1)
        levels = len(rle).to_bytes(4, "little") + bytes(rle)
    size = len(levels) + len(body)
    v1: Struct = {1: (_I32, n), 2: (_I32, _PLAIN), 3: (_I32, _RLE), 4: (_I32, _RLE)}
    data_header: Struct = {
        _PH_TYPE: (_I32, _DATA_PAGE),
        _PH_UNCOMPRESSED: (_I32, size),
        _PH_COMPRESSED: (_I32, size),
        _PH_DATA_V1: (_STRUCT, v1),
    }
    encoded = encode_struct(data_header)
    data = _Page(memoryview(_concat([encoded, levels, body])).cast("B"), data_header, len(encoded))
    file = _one_column_file(index, chunk, n, None, [data], codec=0)
    column = _decode(file, t, None)
    return column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column


def _data_pages(
    handle: pa.NativeFile, plans: list[_Plan], concurrent: bool, dictionaries: Sequence[ColumnPages] = ()
) -> tuple[list[list[tuple[int, _Page]] | None], dict[str, _Page | None]]:
    """The selected data pages of each plan with their encodings (None: not as indexed), and
    the dictionary pages of ``dictionaries`` by column, fetched with them (one round trip)."""
    ranges = [(int(p.chunk.page_offsets[i]), int(p.chunk.page_sizes[i])) for p in plans for i in p.pages]
    present = [c for c in dictionaries if c.dictionary[1] > 0]
    blobs = _fetch(handle, ranges + [c.dictionary for c in present], concurrent)
    early = {c.name: _dictionary_page(raw) for c, raw in zip(present, blobs[len(ranges) :], strict=True)}
    fetched = iter(blobs[: len(ranges)])
    out: list[list[tuple[int, _Page]] | None] = []
    for plan in plans:
        mine: list[tuple[int, _Page]] | None = []
        for rows in plan.rows:
            page = _page(next(fetched))
            encoding = _data_encoding(page, int(rows))
            if mine is not None and page is not None and encoding is not None:
                mine.append((encoding, page))
            else:
                mine = None
        out.append(mine)
    return out, early


def _dictionary_page(raw: Bytes) -> _Page | None:
    """``raw`` as a dictionary page (None when it is not one)."""
    page = _page(raw)
    return page if page is not None and _get(page.header, _PH_TYPE) == _DICTIONARY_PAGE else None


def _dictionary_pages(
    handle: pa.NativeFile, chunks: list[ColumnPages], concurrent: bool, early: Mapping[str, _Page | None]
) -> list[_Page | None]:
    """The dictionary page of each chunk (None for a chunk without one): from ``early`` (by
    column) when fetched already, the others fetched now."""
    present = [c for c in chunks if c.dictionary[1] > 0 and c.name not in early]
    blobs = _fetch(handle, [c.dictionary for c in present], concurrent)
    fetched = {c.name: _dictionary_page(raw) for c, raw in zip(present, blobs, strict=True)}
    return [early[c.name] if c.name in early else fetched.get(c.name) for c in chunks]


def _decoders() -> ThreadPoolExecutor:
    """Decodes the one-column files of a read in parallel (pyarrow decodes without the GIL)."""
    return shared_pool("parquet-pages", DECODE_THREADS)


def _readers() -> ThreadPoolExecutor:
    """Fetches the merged ranges of a read concurrently: waiting on storage, not on the CPU,
    as many requests in flight as an object store likes."""
    return shared_pool("parquet-ranges", 16)


def _decode(data: Bytes | pa.Buffer, t: pa.DataType, positions: np.ndarray | None) -> pa.ChunkedArray | None:
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


def _one_column_file(
    index: PageIndex,
    chunk: ColumnPages,
    num_rows: int,
    dictionary: _Page | None,
    pages: list[_Page],
    codec: int | None = None,
) -> pa.Buffer:
    """A Parquet file holding one row group of ``num_rows`` rows of one column: ``dictionary``
    and ``pages``, compressed with ``codec`` (default: the chunk's)."""
    every = pages if dictionary is None else [dictionary, *pages]
    uncompressed = sum(p.uncompressed_size for p in every)
    meta: Struct = {
        **chunk.meta,
        _CMD_NUM_VALUES: (_I64, num_rows),
        _CMD_UNCOMPRESSED: (_I64, uncompressed),
        _CMD_COMPRESSED: (_I64, sum(len(p.data) for p in every)),
        _CMD_DATA_PAGE_OFFSET: (_I64, len(_MAGIC) + (0 if dictionary is None else len(dictionary.data))),
    }
    if codec is not None:
        meta[_CMD_CODEC] = (_I32, codec)
    if dictionary is not None:
        meta[_CMD_DICTIONARY_PAGE_OFFSET] = (_I64, len(_MAGIC))
    column_chunk: Struct = {_CC_FILE_OFFSET: (_I64, 0), _CC_META: (_STRUCT, meta)}
    row_group: Struct = {
        _RG_COLUMNS: (_LIST, (_STRUCT, [column_chunk])),
        _RG_TOTAL_BYTE_SIZE: (_I64, uncompressed),
        _RG_NUM_ROWS: (_I64, num_rows),
    }
    fmd: Struct = {
        _FMD_VERSION: (_I32, index.version),
        _FMD_SCHEMA: (_LIST, (_STRUCT, [index.root, chunk.leaf])),
        _FMD_NUM_ROWS: (_I64, num_rows),
        _FMD_ROW_GROUPS: (_LIST, (_STRUCT, [row_group])),
    }
    if chunk.arrow_schema is not None:
        kv: Struct = {1: (_BINARY, _ARROW_SCHEMA), 2: (_BINARY, chunk.arrow_schema)}
        fmd[_FMD_KV] = (_LIST, (_STRUCT, [kv]))
    if index.created_by is not None:
        fmd[_FMD_CREATED_BY] = (_BINARY, index.created_by)
    footer = encode_struct(fmd)
    return _concat([_MAGIC, *(p.data for p in every), footer, len(footer).to_bytes(4, "little"), _MAGIC])
