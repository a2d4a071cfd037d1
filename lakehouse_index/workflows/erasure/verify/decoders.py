"""Decoders of the residue scan: a file's bytes, recognised by content, decoded and matched.

:func:`decode` picks the decoder by magic bytes (Parquet ``PAR1`` at both ends, Avro
``Obj\\x01``, ORC ``ORC`` in its header and postscript, Puffin ``PFA1`` at both ends,
gzip / zstd / lz4-frame / bzip2 / xz / framed snappy wrappers around anything), then JSON
or NDJSON, then UTF-8 text, else raw bytes. Everything decoded goes into a
:class:`Findings`, which matches it against the
:class:`~lakehouse_index.workflows.erasure.verify.needles.Needles` (free text and raw bytes
batched across files and matched columnar).

Where a number is bookkeeping. A table's own metadata is full of counts, sizes, offsets,
ids, versions and timestamps; an integer subject key equal to one of them is not residue.
In files of the **metadata** role (under ``_delta_log/``, an Iceberg ``metadata/`` folder,
the JSON log of ``_lakehouse_index/``, and Iceberg Avro manifests) numbers are not matched
below the members named in :data:`STRUCTURAL` (e.g. ``size``, ``numRecords``, ``nullCount``,
``operationMetrics``, ``snapshots``, ``record_count``), unless a member named in
:data:`DATA_MEMBERS` came first on the path (``minValues``, ``maxValues``,
``partitionValues``, ``partition``, ``minKey`` …: user column names live only below those).
In index data files (Parquet under ``_lakehouse_index/``) only the reserved columns
(``_file_id``, ``_row``, ``_version``, ``_op``, ``_rows``, a skipping column's
``nulls``/``nans``) are exempt. In any Parquet file, Iceberg's position and row-lineage
columns (by field id) are exempt, and so are numbers in key-value metadata (pandas ranges,
field ids). The erasure's own records (``_erasure/``: audit records with salted key hashes,
counts, timings; purge records) are checked for strings only. Data files are matched
whole. Strings, dates and bytes are matched everywhere, whatever the role. Bytes fields are
compared with the values' Iceberg bound serializations only in Iceberg manifests and
manifest lists.
"""

from __future__ import annotations

import base64
import bz2
import contextlib
import decimal
import gzip
import json
import lzma
import struct
import zlib
from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lakehouse_index.read.thrift import Bytes, decode_struct
from lakehouse_index.varint import read_uvarint
from lakehouse_index.workflows.erasure.verify import avro
from lakehouse_index.workflows.erasure.verify.needles import MIN_RAW_BYTES, Needles

__all__ = [
    "DATA",
    "DATA_MEMBERS",
    "DECODE_ERRORS",
    "ERASURE_RECORDS",
    "INDEX_DATA",
    "METADATA",
    "SIDECAR",
    "STRUCTURAL",
    "Findings",
    "decode",
]

#: File roles (see the module docstring); SIDECAR (under ``_lakehouse_index/``) is METADATA
#: for JSON and INDEX_DATA for Parquet; ERASURE_RECORDS (the erasure's own audit and purge
#: records) hold no number that is a key.
DATA, METADATA, INDEX_DATA, SIDECAR = "data", "metadata", "index-data", "sidecar"
ERASURE_RECORDS = "erasure-records"

#: Members below which numbers are bookkeeping in metadata files (Delta log, Iceberg metadata
#: and manifests, the lakehouse-index log).
STRUCTURAL = frozenset(
    {
        # Delta
        "size", "modificationTime", "numRecords", "nullCount", "tightBounds", "deletionTimestamp",
        "deletionVector", "baseRowId", "defaultRowCommitVersion", "timestamp", "readVersion",
        "operationMetrics", "protocol", "createdTime", "version", "inCommitTimestamp",
        "sizeInBytes", "numOfAddFiles", "parts", "tableSizeBytes", "numFiles", "numMetadata",
        "numProtocol", "fileSizeHistogram", "deletedRecordCountsHistogramOpt", "lastUpdated",
        "numDeletedRecordsOpt", "numDeletionVectorsOpt", "delta.columnMapping.id",
        "delta.columnMapping.maxColumnId", "fields", "type", "configuration", "histogramOpt",
        "inCommitTimestampOpt",
        # Iceberg table metadata and Puffin footers
        "format-version", "last-sequence-number", "last-updated-ms", "last-column-id",
        "current-schema-id", "schemas", "partition-specs", "default-spec-id", "last-partition-id",
        "sort-orders", "default-sort-order-id", "current-snapshot-id", "snapshots", "snapshot-log",
        "metadata-log", "refs", "statistics", "partition-statistics", "next-row-id",
        "encryption-keys", "schema-id", "spec-id", "field-id", "source-id", "source-ids",
        "order-id", "snapshot-id", "parent-snapshot-id", "sequence-number", "timestamp-ms",
        "summary", "first-row-id", "added-rows", "file-size-in-bytes", "blobs", "blob-metadata",
        "properties", "partition-spec-id",
        # Iceberg manifests and manifest lists
        "status", "content", "record_count", "file_size_in_bytes", "column_sizes", "value_counts",
        "null_value_counts", "nan_value_counts", "split_offsets",
        "equality_ids", "sort_order_id", "snapshot_id", "sequence_number", "data_sequence_number",
        "file_sequence_number", "min_sequence_number", "added_snapshot_id", "manifest_length",
        "partition_spec_id", "added_files_count", "existing_files_count", "deleted_files_count",
        "added_data_files_count", "existing_data_files_count", "deleted_data_files_count",
        "added_rows_count", "existing_rows_count", "deleted_rows_count", "first_row_id",
        "content_offset", "content_size_in_bytes",
        # lakehouse-index log
        "formatVersion", "id", "spec", "mtimeMs", "deletesId", "deletedCount", "addedOrdinal",
        "removedOrdinal", "moves", "nextFileId", "rows", "level", "minOrdinal", "maxOrdinal",
        "bucket", "timestampMs", "baseId", "ordinal", "baseOrdinal", "removed", "fieldId",
        # lakehouse-index erase commits (operationParameters: the number of subjects)
        "subjects",
    }
)  # fmt: skip
#: Members below which user columns' values live (numbers matched again).
DATA_MEMBERS = frozenset(
    {"minValues", "maxValues", "partitionValues", "partitionValues_parsed", "partition", "minKey", "maxKey"}
)
#: Columns of index data files that hold addresses and counts, not keys.
INDEX_RESERVED = frozenset({"_file_id", "_row", "_version", "_op", "_rows"})
#: Queued free text and raw bytes are matched once more than this many bytes are queued.
FLUSH_BYTES = 64 << 20
#: Iceberg's reserved field ids (metadata columns such as a position delete's ``pos``) start here.
ICEBERG_RESERVED_IDS = 2**31 - 1 - 200
#: Iceberg metadata columns holding positions and row lineage, not values: ``pos`` of a
#: position delete file, ``_row_id``, ``_last_updated_sequence_number``.
ICEBERG_ADDRESS_IDS = frozenset({2**31 - 1 - 102, 2**31 - 1 - 107, 2**31 - 1 - 108})

# Walk states: numbers matched (data), not matched (bookkeeping), undecided (metadata so far).
_DATA, _STRUCT, _NEUTRAL = 0, 1, 2

#: What a broken or hostile file raises while being decoded.
DECODE_ERRORS = (
    pa.ArrowException,
    ValueError,
    KeyError,
    IndexError,
    TypeError,
    OSError,
    EOFError,
    RecursionError,
    struct.error,
    zlib.error,
    lzma.LZMAError,
)


def _child(state: int, name: str) -> int:
    if state != _NEUTRAL:
        return state
    if name in DATA_MEMBERS:
        return _DATA
    return _STRUCT if name in STRUCTURAL else _NEUTRAL


class Findings:
    """What the files of one scan hold of the values: hits as (file, location, value number).

    :meth:`begin` starts a file (its URI and role). Typed values and Arrow columns are matched
    at once; free text and raw bytes are queued across files and matched in batches (one
    regular-expression pass per batch, not per file): :meth:`begin` flushes once more than
    :data:`FLUSH_BYTES` are queued, and the scan flushes at its end.
    """

    def __init__(self, needles: Needles) -> None:
        self.needles = needles
        self.file = ""
        self.role = DATA
        #: Bytes fields are Iceberg bounds (set for Iceberg manifests and manifest lists).
        self.iceberg_bounds = False
        self.hits: set[tuple[str, str, int]] = set()
        #: (numbers, free text) → ([(file, location)], [text]).
        self._texts: dict[tuple[bool, bool], tuple[list[tuple[str, str]], list[str]]] = {}
        #: Queued raw bytes: where each came from (file, location, base offset), and all of
        #: them back to back with their end offsets (one copy, handed to Arrow as is).
        self._spots: list[tuple[str, str, int]] = []
        self._blob_data = bytearray()
        self._blob_ends: list[int] = []
        self._queued = 0

    def begin(self, file: str, role: str) -> None:
        """Start collecting what ``file`` (of ``role``) holds."""
        if self._queued > FLUSH_BYTES:
            self.flush()
        self.file, self.role, self.iceberg_bounds = file, role, False

    def root_state(self) -> int:
        """Walk state at the top of a document of this file."""
        if self.role == ERASURE_RECORDS:
            return _STRUCT
        return _NEUTRAL if self.role in (METADATA, SIDECAR) else _DATA

    def column_state(self, path: tuple[str, ...], field_id: int | None = None) -> int:
        """Walk state of the column at ``path`` (with Parquet field id ``field_id``) of a
        Parquet file of this role."""
        if field_id in ICEBERG_ADDRESS_IDS:
            return _STRUCT
        if self.role == INDEX_DATA:
            reserved = path[0] in INDEX_RESERVED or (len(path) == 2 and path[1] in ("nulls", "nans"))
            return _STRUCT if reserved else _DATA
        state = self.root_state()
        for name in path:
            state = _child(state, name)
        return state

    def add(self, location: str, number: int) -> None:
        """A hit in the current file."""
        self.hits.add((self.file, location, number))

    def text(self, location: str, text: str, *, numbers: bool, typed: bool = False) -> None:
        """Queue free text (numbers matched as numeric tokens when ``numbers``), or with
        ``typed`` a typed string value (equal to a value's text form)."""
        places, texts = self._texts.setdefault((numbers, not typed), ([], []))
        places.append((self.file, location))
        texts.append(text)
        self._queued += len(text)

    def blob(self, location: str, *parts: Bytes, base: int = 0) -> None:
        """Queue raw bytes, given as consecutive ``parts`` (found at ``base`` of ``location``)."""
        size = sum(len(p) for p in parts)
        if self.needles.has_raw and size >= MIN_RAW_BYTES:
            self._spots.append((self.file, location, base))
            for part in parts:
                self._blob_data += part
            self._blob_ends.append(len(self._blob_data))
            self._queued += size

    def arrow(self, location: str, array: pa.Array, state: int) -> None:
        """Match a flat Arrow array now. In metadata files its strings are free text, and
        those holding JSON (a Delta checkpoint's ``stats``) are parsed and walked."""
        t = array.type
        free_text = self.role == METADATA
        if free_text and (pa.types.is_string(t) or pa.types.is_large_string(t)):
            is_json = pc.fill_null(pc.match_substring_regex(array, r"^\s*[\[{]"), False)
            for text in array.filter(is_json).to_pylist():
                self.string(location, text, state)
            array = array.filter(pc.invert(is_json))
        for number in self.needles.arrow_numbers(array, numbers=state != _STRUCT, free_text=free_text):
            self.add(location, number)

    def binary(self, location: str, data: bytes, *, numbers: bool) -> None:
        """A decoded bytes value: the value itself, raw text, or in Iceberg metadata (where bytes
        are bounds) a value's Iceberg single-value serialization."""
        if self.iceberg_bounds:
            for number, note in self.needles.bound_numbers(data, numbers=numbers):
                self.add(location + note, number)
        else:
            for number in self.needles.numbers_of(data):
                self.add(location, number)
        self.blob(location, data)

    def walk(self, location: str, node: Any, state: int) -> None:
        """Every leaf and member name of a decoded document (JSON, Avro record, Puffin footer)."""
        if isinstance(node, dict):
            if node.keys() == {"key", "value"} and _is_int(node["key"]):
                # An Avro map with int keys (Iceberg bounds, sizes, counts): keys are field ids.
                reserved = node["key"] >= ICEBERG_RESERVED_IDS
                self.walk(f"{location}.value", node["value"], _STRUCT if reserved else state)
                return
            for name, child in node.items():
                name = str(name)
                self.text(f"{location}.{name} (name)", name, numbers=True)
                self.walk(f"{location}.{name}", child, _child(state, name))
        elif isinstance(node, (list, tuple)):
            for i, child in enumerate(node):
                self.walk(f"{location}[{i}]", child, state)
        elif isinstance(node, str):
            self.string(location, node, state)
        elif isinstance(node, bytes):
            self.binary(location, node, numbers=state != _STRUCT)
        else:
            for number in self.needles.numbers_of(node, numbers=state != _STRUCT):
                self.add(location, number)

    def string(self, location: str, text: str, state: int) -> None:
        """A decoded string: parsed when it holds JSON (Delta ``stats``), else free text."""
        head = text.lstrip()[:1]
        if head in ("{", "["):
            try:
                doc = _json(text)
            except ValueError:
                pass
            else:
                self.walk(f"{location} (json)", doc, state)
                return
        self.text(location, text, numbers=state != _STRUCT)

    def flush(self) -> None:
        """Match the queued free text and raw bytes."""
        for (numbers, free_text), (places, texts) in self._texts.items():
            if texts:
                strings = pa.array(texts, pa.large_string())
                for row, number in self.needles.text_hits(strings, numbers=numbers, free_text=free_text):
                    self.hits.add((*places[row], number))
            places.clear()
            texts.clear()
        if self._spots:
            offsets = pa.array([0, *self._blob_ends], pa.int64()).buffers()[1]
            data = pa.py_buffer(self._blob_data)
            blobs = pa.Array.from_buffers(pa.large_binary(), len(self._spots), [None, offsets, data])
            for row, number, offset in self.needles.raw_hits(blobs):
                file, where, base = self._spots[row]
                self.hits.add((file, f"{where} at byte {base + offset}", number))
            del blobs, data
        self._spots = []
        self._blob_data = bytearray()
        self._blob_ends = []
        self._queued = 0


def _json(text: str | bytes) -> Any:
    """Parsed JSON with fractional numbers as exact Decimals (``0.10`` equals ``Decimal("0.1")``)."""
    return json.loads(text, parse_float=decimal.Decimal)


def _field_id(field: pa.Field) -> int | None:
    """The Parquet field id of an Arrow field read from Parquet (None without one)."""
    raw = (field.metadata or {}).get(b"PARQUET:field_id")
    return int(raw) if raw is not None else None


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# --------------------------------------------------------------------------- Parquet


def _leaves(path: tuple[str, ...], array: pa.Array) -> Iterator[tuple[tuple[str, ...], pa.Array]]:
    """Every flat leaf array of a (possibly nested) column, with its path."""
    t = array.type
    if isinstance(t, pa.ExtensionType):
        yield from _leaves(path, array.storage)
    elif pa.types.is_struct(t):
        for field, child in zip(t, array.flatten(), strict=False):
            yield from _leaves((*path, field.name), child)
    elif pa.types.is_map(t):
        yield from _leaves((*path, "key"), array.keys)
        yield from _leaves((*path, "value"), array.items)
    elif pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        yield from _leaves(path, array.flatten())
    elif pa.types.is_list_view(t) or pa.types.is_large_list_view(t):
        yield from _leaves(path, array.values)
    elif pa.types.is_union(t):
        for i, field in enumerate(t):
            yield from _leaves((*path, field.name), array.field(i))
    else:
        yield path, array


#: Parquet codec names (as pyarrow's column metadata spells them) → pyarrow codecs.
_PARQUET_CODECS = {
    "SNAPPY": "snappy",
    "GZIP": "gzip",
    "ZSTD": "zstd",
    "LZ4_RAW": "lz4_raw",
    "BROTLI": "brotli",
}
# PageHeader and DataPageHeaderV2 field ids (parquet.thrift).
_PH_UNCOMPRESSED, _PH_COMPRESSED, _PH_DATA_V2 = 2, 3, 8
_V2_DEF_LEN, _V2_REP_LEN, _V2_COMPRESSED = 5, 6, 7


def _uncompress(codec: str, body: Bytes, size: int) -> list[Bytes]:
    """A page body uncompressed (as parts to be read back to back)."""
    if codec != "LZ4":
        return [pa.decompress(body, decompressed_size=size, codec=_PARQUET_CODECS[codec])]
    # pyarrow names both LZ4_RAW and the deprecated LZ4 "LZ4"; the latter is Hadoop-framed
    # (blocks of uncompressed size, compressed size, lz4 raw) or, from old writers, an lz4 frame.
    with contextlib.suppress(pa.ArrowException):
        return [pa.decompress(body, decompressed_size=size, codec="lz4_raw")]
    with contextlib.suppress(pa.ArrowException, struct.error):
        out, pos = [], 0
        while pos < len(body):
            usize, csize = struct.unpack_from(">II", body, pos)
            out.append(
                pa.decompress(body[pos + 8 : pos + 8 + csize], decompressed_size=usize, codec="lz4_raw")
            )
            pos += 8 + csize
        return out
    return [_lz4_frame(body)]


def _chunk_pages(data: bytes, start: int, length: int, codec: str) -> list[Bytes]:
    """A column chunk's pages with their bodies uncompressed (headers kept), as parts."""
    view = memoryview(data)
    parts: list[Bytes] = []
    pos, end = start, start + length
    while pos < end:
        header, body_start = decode_struct(data, pos)
        compressed = int(header[_PH_COMPRESSED][1])
        size = int(header[_PH_UNCOMPRESSED][1])
        body = view[body_start : body_start + compressed]
        levels, is_compressed = 0, True
        if _PH_DATA_V2 in header:
            v2 = header[_PH_DATA_V2][1]
            levels = int(v2[_V2_DEF_LEN][1]) + int(v2[_V2_REP_LEN][1])
            is_compressed = bool(v2.get(_V2_COMPRESSED, (0, True))[1])
        parts += [view[pos:body_start], body[:levels]]
        values = body[levels:]
        parts += _uncompress(codec, values, size - levels) if is_compressed and len(values) else [values]
        pos = body_start + compressed
    return parts


def _parquet(f: Findings, data: bytes) -> None:
    if f.role == SIDECAR:
        f.role = INDEX_DATA
    pf = pq.ParquetFile(pa.BufferReader(data))
    md = pf.metadata
    compressed: list[tuple[int, int]] = []
    for i in range(md.num_row_groups):
        table = pf.read_row_group(i)
        for field, column in zip(table.schema, table.columns, strict=True):
            state = f.column_state((field.name,), _field_id(field))
            for chunk in column.chunks:
                for path, leaf in _leaves((field.name,), chunk):
                    where = f"row group {i} column {'.'.join(path)}"
                    f.arrow(where, leaf, _STRUCT if state == _STRUCT else f.column_state(path))
        for j in range(md.num_columns):
            cc = md.row_group(i).column(j)
            path = tuple(cc.path_in_schema.split("."))
            where = f"row group {i} column {cc.path_in_schema}"
            top = pf.schema_arrow.field(path[0]) if path[0] in pf.schema_arrow.names else None
            stats = cc.statistics
            if stats is not None and stats.has_min_max:
                for which, value in (("min", stats.min), ("max", stats.max)):
                    at = f"{where} statistics {which}"
                    state = f.column_state(path, None if top is None else _field_id(top))
                    if isinstance(value, str) and f.role == METADATA:
                        # Bounds of e.g. a checkpoint's stats JSON, often truncated (so not
                        # JSON): its numbers are bookkeeping, and every value the column
                        # holds was matched above.
                        f.text(at, value, numbers=False)
                    elif isinstance(value, str):  # a typed string, like the column's values
                        f.text(at, value, numbers=state != _STRUCT, typed=True)
                    else:
                        f.walk(at, value, state)
            if f.needles.has_raw and cc.compression != "UNCOMPRESSED":
                # Some writers record a dictionary page offset of 0 for none: the chunk starts
                # at its first page, whichever that is.
                start = min(o for o in (cc.dictionary_page_offset, cc.data_page_offset) if o)
                compressed.append((start, start + cc.total_compressed_size))
                if cc.physical_type in ("BYTE_ARRAY", "FIXED_LEN_BYTE_ARRAY"):  # pages that hold text
                    pages = _chunk_pages(data, start, cc.total_compressed_size, cc.compression)
                    f.blob(f"{where} pages (uncompressed)", *pages)
    for key, value in (md.metadata or {}).items():
        name = key.decode("utf-8", errors="replace")
        f.text("key-value metadata (name)", name, numbers=True)
        if key == b"ARROW:schema":
            f.blob("key-value metadata ARROW:schema", base64.b64decode(value))
        else:
            # Numbers here describe the file (pandas ranges, field ids), strings may be values.
            f.string(f"key-value metadata {name}", value.decode("utf-8", errors="replace"), _STRUCT)
    # The rest of the file as it is (footer, page indexes, bloom filters, uncompressed
    # chunks): compressed pages were searched decompressed above.
    pos = 0
    for start, end in sorted(compressed):
        if start > pos:
            f.blob("file bytes", memoryview(data)[pos:start], base=pos)
        pos = max(pos, end)
    f.blob("file bytes", memoryview(data)[pos:], base=pos)


def _orc(f: Findings, data: bytes) -> None:
    """Every column of every stripe of an ORC file, typed (its compressed streams are not
    searched raw), and its user metadata."""
    import pyarrow.orc

    if f.role == SIDECAR:
        f.role = INDEX_DATA
    orc = pyarrow.orc.ORCFile(pa.BufferReader(data))
    for i in range(orc.nstripes):
        stripe = orc.read_stripe(i)
        for field, column in zip(stripe.schema, stripe.columns, strict=True):
            state = f.column_state((field.name,))
            for path, leaf in _leaves((field.name,), column):
                f.arrow(
                    f"stripe {i} column {'.'.join(path)}",
                    leaf,
                    _STRUCT if state == _STRUCT else f.column_state(path),
                )
    for key, value in (orc.metadata or {}).items():
        name = key.decode("utf-8", errors="replace")
        f.text("user metadata (name)", name, numbers=True)
        f.string(f"user metadata {name}", value.decode("utf-8", errors="replace"), _STRUCT)


# --------------------------------------------------------------------------- Avro, Puffin


def _avro(f: Findings, data: bytes) -> None:
    container = avro.read_container(data)
    if any(
        k.startswith("iceberg") or k in ("format-version", "partition-spec", "schema")
        for k in container.metadata
    ):
        f.role = METADATA
        f.iceberg_bounds = True
    for key, value in container.metadata.items():
        f.text("header (name)", key, numbers=True)
        try:
            f.string(f"header {key}", value.decode("utf-8"), _child(f.root_state(), key))
        except UnicodeDecodeError:
            f.blob(f"header {key}", value)
    for n, record in enumerate(container.records()):
        f.walk(f"record {n}: $", record, f.root_state())


_PUFFIN = b"PFA1"


def _lz4_frame(data: Bytes) -> bytes:
    return bytes(pa.input_stream(pa.BufferReader(data), compression="lz4").read())


def _zstd(data: Bytes) -> bytes:
    return bytes(pa.input_stream(pa.BufferReader(data), compression="zstd").read())


_BLOB_CODECS: dict[str | None, Callable[[bytes], bytes]] = {
    None: lambda b: b,
    "lz4": _lz4_frame,
    "zstd": _zstd,
}


def _puffin(f: Findings, data: bytes) -> None:
    size, flags = struct.unpack_from("<ii", data, len(data) - 12)
    start = len(data) - 12 - size
    if size < 0 or start < 8 or data[start - 4 : start] != _PUFFIN:
        raise ValueError("malformed Puffin footer")
    payload = data[start : start + size]
    footer = _json(_lz4_frame(payload) if flags & 1 else payload)
    f.walk("footer $", footer, _NEUTRAL)
    for i, blob in enumerate(footer.get("blobs", [])):
        body = data[int(blob["offset"]) : int(blob["offset"]) + int(blob["length"])]
        codec = blob.get("compression-codec")
        if codec not in _BLOB_CODECS:
            raise ValueError(f"unsupported Puffin blob codec {codec!r}")
        f.blob(f"blob {i} ({blob.get('type')})", _BLOB_CODECS[codec](body))
    f.blob("file bytes", data)


# --------------------------------------------------------------------------- wrappers, text, raw


def _snappy_framed(data: bytes) -> bytes:
    out, pos = bytearray(), 0
    while pos < len(data):
        kind = data[pos]
        length = int.from_bytes(data[pos + 1 : pos + 4], "little")
        chunk = data[pos + 4 : pos + 4 + length]
        if kind == 0x00:  # compressed: CRC, then raw snappy prefixed by its uncompressed length
            body = chunk[4:]
            size, _ = read_uvarint(body, 0)
            out += pa.decompress(body, decompressed_size=size, codec="snappy", asbytes=True)
        elif kind == 0x01:  # uncompressed, after a CRC
            out += chunk[4:]
        pos += 4 + length
    return bytes(out)


#: Compression wrappers by magic bytes: (magic, name, decompress).
WRAPPERS: tuple[tuple[bytes, str, Callable[[bytes], bytes]], ...] = (
    (b"\x1f\x8b\x08", "gzip", gzip.decompress),
    (b"\x28\xb5\x2f\xfd", "zstd", _zstd),
    (b"\x04\x22\x4d\x18", "lz4", _lz4_frame),
    *((b"BZh" + bytes([level]) + b"1AY&SY", "bzip2", bz2.decompress) for level in b"123456789"),
    (b"\xfd7zXZ\x00", "xz", lzma.decompress),
    (b"\xff\x06\x00\x00sNaPpY", "snappy", _snappy_framed),
)
_MAX_WRAPPING = 4


def _text(f: Findings, data: bytes) -> str:
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        f.blob("bytes", data)
        return "raw"
    if text.lstrip()[:1] in ("{", "["):
        try:
            doc = _json(text)
        except ValueError:
            pass
        else:
            f.walk("$", doc, f.root_state())
            return "json"
    lines = [(n, line) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
    if lines and all(line.lstrip()[:1] in ("{", "[") for _, line in lines):
        try:
            docs = [(n, _json(line)) for n, line in lines]
        except ValueError:
            pass
        else:
            for n, doc in docs:
                f.walk(f"line {n}: $", doc, f.root_state())
            return "ndjson"
    if "\x00" in text:
        f.blob("bytes", data)
        return "raw"
    f.text("text", text, numbers=f.root_state() == _DATA)
    return "text"


def decode(f: Findings, data: bytes, depth: int = 0) -> str:
    """Decode ``data`` into ``f`` by its content; the decoder's name (``gzip/json`` for JSON
    inside gzip). Raises one of :data:`DECODE_ERRORS` on bytes its magic promised but that
    do not decode."""
    if len(data) >= 12 and data[:4] == b"PAR1" and data[-4:] == b"PAR1":
        _parquet(f, data)
        return "parquet"
    if data.startswith(avro.MAGIC):
        _avro(f, data)
        return "avro"
    if len(data) >= 8 and data[:3] == b"ORC" and data[-4:-1] == b"ORC":  # header, postscript
        _orc(f, data)
        return "orc"
    if len(data) >= 16 and data[:4] == _PUFFIN and data[-4:] == _PUFFIN:
        _puffin(f, data)
        return "puffin"
    for magic, name, decompress in WRAPPERS:
        if data.startswith(magic) and depth < _MAX_WRAPPING:
            return f"{name}/{decode(f, decompress(data), depth + 1)}"
    return _text(f, data)
