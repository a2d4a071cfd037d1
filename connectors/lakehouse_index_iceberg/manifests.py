"""Manifest lists and manifests, read with the schema each Avro file was written with.

pyiceberg 0.12 reads manifests with its v2 read schema and so drops the v3 fields
(``first_row_id``, ``referenced_data_file``, ``content_offset``,
``content_size_in_bytes``). Here every file is decoded with its *own* writer schema
(projected to the fields we use, so column statistics are skipped) and fields are
picked by Iceberg field id, which is stable across format versions. Fields absent
from older files (sequence numbers in v1) take their spec defaults, and the values
a v2+ writer leaves null for inheritance are filled in from the manifest list.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from pyiceberg.avro.decoder import BinaryDecoder
from pyiceberg.avro.file import META_SCHEMA, SYNC_SIZE, AvroFileHeader
from pyiceberg.avro.reader import Reader, StructReader
from pyiceberg.avro.resolver import construct_reader, resolve_reader
from pyiceberg.schema import Schema
from pyiceberg.types import ListType, MapType, NestedField, StructType

from lakehouse_index.source import FileIO, TableFormatError
from lakehouse_index_iceberg.avro_skip import RecordSkips, Skip, read_long

#: The first bytes of an Avro object container file.
_MAGIC = b"Obj\x01"

# Field ids of the manifest list (spec: "Manifest Lists").
_ML_PATH, _ML_LENGTH, _ML_SPEC_ID, _ML_CONTENT = 500, 501, 502, 517
_ML_SEQ, _ML_MIN_SEQ, _ML_ADDED_SNAPSHOT, _ML_FIRST_ROW_ID = 515, 516, 503, 520
_ML_COUNTS = (504, 505, 506)  # added / existing / deleted files count
_MANIFEST_LIST_IDS = {
    _ML_PATH,
    _ML_LENGTH,
    _ML_SPEC_ID,
    _ML_CONTENT,
    _ML_SEQ,
    _ML_MIN_SEQ,
    _ML_ADDED_SNAPSHOT,
    _ML_FIRST_ROW_ID,
    *_ML_COUNTS,
}

# Field ids of manifest entries and their data_file struct (spec: "Manifests").
_E_STATUS, _E_SNAPSHOT, _E_SEQ, _E_FILE_SEQ, _E_DATA_FILE = 0, 1, 3, 4, 2
_ENTRY_IDS = {_E_STATUS, _E_SNAPSHOT, _E_SEQ, _E_FILE_SEQ, _E_DATA_FILE}
_F_CONTENT, _F_PATH, _F_FORMAT, _F_PARTITION, _F_RECORDS, _F_SIZE = 134, 100, 101, 102, 103, 104
_F_EQ_IDS, _F_FIRST_ROW_ID, _F_REF_FILE, _F_OFFSET, _F_CONTENT_SIZE = 135, 142, 143, 144, 145
_DATA_FILE_IDS = {
    _F_CONTENT,
    _F_PATH,
    _F_FORMAT,
    _F_PARTITION,
    _F_RECORDS,
    _F_SIZE,
    _F_EQ_IDS,
    _F_FIRST_ROW_ID,
    _F_REF_FILE,
    _F_OFFSET,
    _F_CONTENT_SIZE,
}


class ManifestContent(IntEnum):
    """What a manifest tracks."""

    DATA = 0
    DELETES = 1


class FileContent(IntEnum):
    """What a content file holds."""

    DATA = 0
    POSITION_DELETES = 1
    EQUALITY_DELETES = 2


class EntryStatus(IntEnum):
    """Manifest entry status: what the snapshot that wrote the manifest did to the file."""

    EXISTING = 0
    ADDED = 1
    DELETED = 2


@dataclass(frozen=True)
class ManifestFile:
    """One row of a manifest list."""

    path: str
    length: int
    spec_id: int
    content: ManifestContent
    sequence_number: int
    min_sequence_number: int
    added_snapshot_id: int
    first_row_id: int | None
    added_files: int | None
    existing_files: int | None
    deleted_files: int | None


@dataclass(frozen=True)
class ContentFile:
    """A data file, position-delete file / deletion vector, or equality-delete file.

    ``path`` is exactly as written in the manifest (delete files reference data files
    by this string). ``partition`` holds the partition tuple in spec field order.
    """

    content: FileContent
    path: str
    file_format: str
    spec_id: int
    partition: tuple[Any, ...]
    record_count: int
    size: int
    equality_ids: tuple[int, ...] = ()
    first_row_id: int | None = None
    referenced_data_file: str | None = None
    content_offset: int | None = None
    content_size: int | None = None

    @property
    def is_deletion_vector(self) -> bool:
        """A v3 deletion vector: a blob inside a Puffin file."""
        return self.content == FileContent.POSITION_DELETES and self.file_format.upper() == "PUFFIN"


@dataclass(frozen=True)
class ManifestEntry:
    """One manifest entry with inherited values resolved.

    ``sequence_number`` is the *data* sequence number (what delete matching uses).
    """

    status: EntryStatus
    snapshot_id: int
    sequence_number: int
    file_sequence_number: int
    file: ContentFile


class _BufferDecoder(BinaryDecoder):
    """pyiceberg's Avro decoder interface over bytes in memory.

    What pyiceberg's pure-Python ``StreamingBinaryDecoder`` does, without a stream call per
    byte of every varint (a manifest decodes about 3x faster). Every read is checked against
    the end of the buffer (EOFError), which pyiceberg's Cython decoder does not do: a
    corrupt length must fail the read, not read past the buffer.
    """

    __slots__ = ("_data", "_pos")

    def __init__(self, data: bytes) -> None:
        self._data = data
        self._pos = 0

    def tell(self) -> int:
        """The position in the buffer."""
        return self._pos

    def read(self, n: int) -> bytes:
        """The next ``n`` bytes."""
        end = self._pos + n
        if n < 0 or end > len(self._data):
            raise EOFError(f"cannot read {n} bytes at {self._pos} of {len(self._data)}")
        out = self._data[self._pos : end]
        self._pos = end
        return out

    def skip(self, n: int) -> None:
        """Skip ``n`` bytes."""
        self.read(n)

    def read_int(self) -> int:
        """A zigzag varint (Avro int and long)."""
        value, self._pos = read_long(self._data, self._pos)
        return value

    def skip_int(self) -> None:
        """Skip a varint."""
        self.read_int()

    def advance(self, skip: Skip) -> None:
        """Step over one value with a compiled skip (:mod:`.avro_skip`)."""
        self._pos = skip(self._data, self._pos)


@functools.cache
def _header_reader() -> Reader:
    """Reads an Avro object container file's header (built once: it is the same for every file)."""
    return construct_reader(META_SCHEMA, {-1: AvroFileHeader})


def _project(struct: StructType, keep: set[int], nested: dict[int, set[int]]) -> list[NestedField]:
    """The fields of ``struct`` whose id is in ``keep`` (sub-structs projected per ``nested``)."""
    out = []
    for f in struct.fields:
        # pyiceberg's resolver cannot leave out a list or map: kept, then stepped over (_skipping).
        if f.field_id not in keep and not isinstance(f.field_type, (ListType, MapType)):
            continue
        if f.field_id in nested and isinstance(f.field_type, StructType):
            sub = StructType(*_project(f.field_type, nested[f.field_id], {}))
            f = NestedField(f.field_id, f.name, sub, required=f.required)
        out.append(f)
    return out


# Resolved readers by (writer schema JSON, projection): every manifest of one spec and
# writer shares a schema, and building pyiceberg's reader tree costs more than decoding.
_READERS: dict[tuple[str, str], tuple[list[NestedField], Any]] = {}


class _SkipReader(Reader):
    """Steps over a value the projection leaves out, by its writer schema (:mod:`.avro_skip`)."""

    __slots__ = ("_skip",)

    def __init__(self, skip: Skip) -> None:
        self._skip = skip

    def read(self, decoder: BinaryDecoder) -> None:
        assert isinstance(decoder, _BufferDecoder)
        decoder.advance(self._skip)

    def skip(self, decoder: BinaryDecoder) -> None:
        self.read(decoder)


def _skipping(
    reader: Any,
    avro: dict[str, Any],
    file_struct: StructType,
    keep: set[int],
    nested: dict[int, set[int]],
    skips: RecordSkips,
) -> Any:
    """The resolved record ``reader`` with the fields of ``avro`` (the record's writer schema,
    ``file_struct`` as pyiceberg converted it) outside ``keep`` stepped over by
    :class:`_SkipReader` (pyiceberg decodes the maps and lists it keeps, and cannot leave them
    out); records in ``nested`` likewise, with their ids. Unchanged when the two do not list
    the same fields in the same order (nothing to pair the readers with)."""
    ids = [f.get("field-id") for f in avro.get("fields", ())]
    if (
        not isinstance(reader, StructReader)
        or avro.get("type") != "record"
        or ids != [f.field_id for f in file_struct.fields]
    ):
        return reader
    # The resolver puts the file's fields first, in order; fields only read get defaults after.
    readers = list(reader.field_readers)
    fields = zip(avro["fields"], file_struct.fields, skips.fields(avro), strict=True)
    for i, (f, field, skip) in enumerate(fields):
        pos, r = readers[i]
        fid, t = field.field_id, field.field_type
        if fid not in keep:
            readers[i] = (pos, _SkipReader(skip))  # a slot of the read schema reads None
        elif fid in nested and isinstance(t, StructType) and isinstance(f["type"], dict):
            readers[i] = (pos, _skipping(r, f["type"], t, nested[fid], {}, skips))
    return StructReader(tuple(readers), reader.create_struct, reader.struct)


def _reader_for(
    header: AvroFileHeader, keep: set[int], nested: dict[int, set[int]]
) -> tuple[list[NestedField], Any]:
    key = (header.meta.get("avro.schema", ""), repr((sorted(keep), sorted(nested.items()))))
    hit = _READERS.get(key)
    if hit is None:
        file_schema = header.get_schema()
        read_schema = Schema(*_project(file_schema.as_struct(), keep, nested))
        reader = resolve_reader(file_schema, read_schema, {}, {})
        avro = json.loads(key[0])
        reader = _skipping(reader, avro, file_schema.as_struct(), keep, nested, RecordSkips(avro))
        hit = (list(read_schema.as_struct().fields), reader)
        if len(_READERS) < 256:
            _READERS[key] = hit
    return hit


def _read_avro(
    io_: FileIO, path: str, keep: set[int], nested: dict[int, set[int]], what: str
) -> tuple[dict[str, str], list[dict[int, Any]]]:
    """Records of an Avro file as ``{field id: value}`` (nested structs likewise), and its metadata."""
    try:
        data = io_.read_bytes(path)
    except FileNotFoundError as e:
        raise TableFormatError(f"{what} {path} is missing (referenced by the table metadata)") from e
    return _decode_avro(data, path, keep, nested, what)


def _decode_avro(
    data: bytes, path: str, keep: set[int], nested: dict[int, set[int]], what: str
) -> tuple[dict[str, str], list[dict[int, Any]]]:
    """:func:`_read_avro` of the bytes ``data`` of ``path``."""
    try:
        # pyiceberg's AvroFile re-derives and re-resolves the schema for every file; the
        # header and blocks are read here, with the resolved reader cached. Decoding checks
        # lengths against the buffer (_BufferDecoder).
        decoder = _BufferDecoder(data)
        header = _header_reader().read(decoder)
        if header.magic != _MAGIC:
            raise ValueError(f"not an Avro object container file (magic {header.magic!r})")
        fields, reader = _reader_for(header, keep, nested)
        meta = dict(header.meta)
        rows = [_to_dict(rec, fields) for rec in _records(header, decoder, reader, len(data))]
    except TableFormatError:
        raise
    except Exception as e:  # any decoding failure means a corrupt file
        raise TableFormatError(f"cannot decode {what} {path}: {e}") from e
    return meta, rows


def _records(header: AvroFileHeader, decoder: BinaryDecoder, reader: Any, size: int) -> Iterator[Any]:
    """The records of an Avro object container file after its header (read by ``decoder``):
    blocks of (record count, byte length, bytes, sync marker), each block's bytes
    decompressed by the codec. A count larger than its block's bytes is refused (every
    manifest record takes a byte), so no block makes the decoder loop without consuming input."""
    codec = header.compression_codec()
    while decoder.tell() < size:
        count = decoder.read_int()
        block = decoder.read_bytes()
        if decoder.read(SYNC_SIZE) != header.sync:
            raise ValueError(f"block ending before byte {decoder.tell()} lacks the file's sync marker")
        if codec is not None:
            block = codec.decompress(block)
        if not 0 <= count <= len(block):
            raise ValueError(f"a block of {len(block)} bytes claims {count} records")
        records = _BufferDecoder(block)
        for _ in range(count):
            yield reader.read(records)


def _to_dict(rec: Any, fields: list[NestedField]) -> dict[int, Any]:
    out: dict[int, Any] = {}
    for i, f in enumerate(fields):
        v = rec[i]
        if v is not None and isinstance(f.field_type, StructType) and f.field_id != _F_PARTITION:
            v = _to_dict(v, list(f.field_type.fields))
        elif v is not None and f.field_id == _F_PARTITION:
            v = tuple(v[j] for j in range(len(f.field_type.fields)))  # type: ignore[attr-defined]
        elif v is not None and isinstance(f.field_type, ListType):
            v = list(v)
        out[f.field_id] = v
    return out


def read_manifest_list(io_: FileIO, path: str) -> tuple[ManifestFile, ...]:
    """Every manifest of a snapshot, in manifest-list order."""
    _, rows = _read_avro(io_, path, _MANIFEST_LIST_IDS, {}, "manifest list")
    try:
        return tuple(_manifest_file(r, path) for r in rows)
    except (KeyError, TypeError, ValueError) as e:  # an enum or number out of range
        raise TableFormatError(f"manifest list {path} holds a malformed entry: {e!r}") from e


def _manifest_file(r: dict[int, Any], path: str) -> ManifestFile:
    """One manifest-list row."""
    if r.get(_ML_PATH) is None or r.get(_ML_ADDED_SNAPSHOT) is None:
        raise TableFormatError(f"manifest list {path} has an entry without path or added_snapshot_id")
    return ManifestFile(
        path=r[_ML_PATH],
        length=r.get(_ML_LENGTH) or 0,
        spec_id=r.get(_ML_SPEC_ID) or 0,
        # v1 manifest lists have no content / sequence numbers: data, sequence 0.
        content=ManifestContent(r.get(_ML_CONTENT) or 0),
        sequence_number=r.get(_ML_SEQ) or 0,
        min_sequence_number=r.get(_ML_MIN_SEQ) or 0,
        added_snapshot_id=r[_ML_ADDED_SNAPSHOT],
        first_row_id=r.get(_ML_FIRST_ROW_ID),
        added_files=r.get(_ML_COUNTS[0]),
        existing_files=r.get(_ML_COUNTS[1]),
        deleted_files=r.get(_ML_COUNTS[2]),
    )


def read_manifest(io_: FileIO, manifest: ManifestFile) -> tuple[ManifestEntry, ...]:
    """Every entry of a manifest (DELETED ones included), with inheritance applied.

    Inheritance (spec "Sequence Number Inheritance", "First Row ID Inheritance"): a null
    snapshot id or sequence number of an ADDED entry comes from the manifest list row; a
    null ``first_row_id`` of a live data file is the manifest's ``first_row_id`` plus the
    record counts of the preceding live data files that also had none.
    """
    return read_manifests(io_, [manifest])[0]


def read_manifests(io_: FileIO, manifests: Sequence[ManifestFile]) -> list[tuple[ManifestEntry, ...]]:
    """:func:`read_manifest` of each manifest, their files read together (``FileIO.read_many``:
    concurrently on an object store, where one after the other costs a round trip each)."""
    out = []
    for m, data in zip(manifests, io_.read_many([m.path for m in manifests]), strict=True):
        if data is None:
            raise TableFormatError(f"manifest {m.path} is missing (referenced by the table metadata)")
        meta, rows = _decode_avro(data, m.path, _ENTRY_IDS, {_E_DATA_FILE: _DATA_FILE_IDS}, "manifest")
        try:
            out.append(_manifest_entries(m, meta, rows))
        except (KeyError, TypeError, ValueError) as e:  # an enum or number out of range
            raise TableFormatError(f"manifest {m.path} holds a malformed entry: {e!r}") from e
    return out


def _manifest_entries(
    manifest: ManifestFile, meta: dict[str, str], rows: list[dict[int, Any]]
) -> tuple[ManifestEntry, ...]:
    spec_id = int(meta.get("partition-spec-id", manifest.spec_id))
    next_row_id = manifest.first_row_id
    out = []
    for r in rows:
        status = EntryStatus(r[_E_STATUS])
        f = r.get(_E_DATA_FILE)
        if f is None or f.get(_F_PATH) is None:
            raise TableFormatError(f"manifest {manifest.path} has an entry without a data file path")
        snapshot_id = r.get(_E_SNAPSHOT)
        seq = r.get(_E_SEQ)
        file_seq = r.get(_E_FILE_SEQ)
        if snapshot_id is None:
            snapshot_id = manifest.added_snapshot_id
        if seq is None:
            if status != EntryStatus.ADDED and manifest.sequence_number != 0:
                raise TableFormatError(
                    f"manifest {manifest.path}: non-ADDED entry for {f[_F_PATH]} has no sequence number"
                )
            seq = manifest.sequence_number
        if file_seq is None:
            file_seq = manifest.sequence_number if status == EntryStatus.ADDED else seq
        content = FileContent(f.get(_F_CONTENT) or 0)
        first_row_id = f.get(_F_FIRST_ROW_ID)
        if (
            content == FileContent.DATA
            and status != EntryStatus.DELETED
            and first_row_id is None
            and next_row_id is not None
        ):
            first_row_id = next_row_id
            next_row_id += f[_F_RECORDS]
        out.append(
            ManifestEntry(
                status=status,
                snapshot_id=snapshot_id,
                sequence_number=seq,
                file_sequence_number=file_seq,
                file=ContentFile(
                    content=content,
                    path=f[_F_PATH],
                    file_format=str(f.get(_F_FORMAT) or "PARQUET"),
                    spec_id=spec_id,
                    partition=tuple(f.get(_F_PARTITION) or ()),
                    record_count=f[_F_RECORDS],
                    size=f[_F_SIZE],
                    equality_ids=tuple(f.get(_F_EQ_IDS) or ()),
                    first_row_id=first_row_id,
                    referenced_data_file=f.get(_F_REF_FILE),
                    content_offset=f.get(_F_OFFSET),
                    content_size=f.get(_F_CONTENT_SIZE),
                ),
            )
        )
    return tuple(out)


def live(entries: tuple[ManifestEntry, ...]) -> Iterator[ManifestEntry]:
    """Entries whose file is live in a snapshot listing the manifest (ADDED or EXISTING)."""
    return (e for e in entries if e.status != EntryStatus.DELETED)
