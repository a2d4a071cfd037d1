"""Delta deletion vectors: descriptors, Z85, the DV file layout and RoaringBitmapArray.

A descriptor (``add.deletionVector``) says where the deleted row positions are:

* ``u``: in a file below the table root, ``<random prefix>/deletion_vector_<uuid>.bin``;
  ``pathOrInlineDv`` is the prefix followed by the Z85-encoded 16-byte UUID (20 chars).
* ``p``: in a file at an absolute URI (``pathOrInlineDv``).
* ``i``: inline, ``pathOrInlineDv`` is the Z85-encoded bitmap itself.

A DV file starts with a format version byte (1); at ``offset`` each DV is stored as a
big-endian 4-byte size, the serialized bitmap, and a big-endian CRC-32 of the bitmap.
The bitmap is a RoaringBitmapArray in the portable format: magic 1681511377 (little
endian int32), then exactly CRoaring's portable 64-bit layout, which
``pyroaring.BitMap64.deserialize`` reads.
"""

from __future__ import annotations

import struct
import uuid
import zlib
from collections.abc import Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any

from pyroaring import BitMap64

from lakehouse_index.source import FileIO, RowDeletes, TableFormatError, UnsupportedFeatureError
from lakehouse_index_delta.paths import resolve_path

PORTABLE_MAGIC = 1681511377
_DV_FILE_FORMAT_VERSION = 1

_Z85_ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
_Z85_INDEX = {c: i for i, c in enumerate(_Z85_ALPHABET)}


def z85_decode(text: str) -> bytes:
    """Decode Z85 text of any length that is a multiple of 5.

    Spark pads the data with zero bytes to a multiple of 4 (the caller truncates to the
    known size); the Rust ``z85`` crate instead encodes a short tail chunk with one
    leading ``#`` per missing byte. Both are accepted.
    """
    if len(text) % 5:
        raise ValueError(f"Z85 text length {len(text)} is not a multiple of 5")
    out = bytearray()
    for i in range(0, len(text), 5):
        chunk = text[i : i + 5]
        missing = 0
        if chunk.startswith("#"):
            if i + 5 != len(text):
                raise ValueError("Z85 '#' tail marker before the last chunk")
            missing = len(chunk) - len(chunk.lstrip("#"))
            if missing > 3:
                raise ValueError("Z85 tail chunk has more than 3 '#'")
            chunk = "0" * missing + chunk[missing:]
        value = 0
        for c in chunk:
            try:
                value = value * 85 + _Z85_INDEX[c]
            except KeyError as e:
                raise ValueError(f"invalid Z85 character {c!r}") from e
        if value > 0xFFFFFFFF or (missing and value >= 1 << (8 * (4 - missing))):
            raise ValueError(f"Z85 chunk {text[i : i + 5]!r} out of range")
        out += value.to_bytes(4, "big")[missing:]
    return bytes(out)


def z85_encode(data: bytes) -> str:
    """Z85 with Spark's convention: zero-pad to a multiple of 4 bytes."""
    padded = data + b"\x00" * (-len(data) % 4)
    out = []
    for i in range(0, len(padded), 4):
        value = int.from_bytes(padded[i : i + 4], "big")
        chunk = []
        for _ in range(5):
            value, r = divmod(value, 85)
            chunk.append(_Z85_ALPHABET[r])
        out.append("".join(reversed(chunk)))
    return "".join(out)


@dataclass(frozen=True)
class DeletionVectorDescriptor(RowDeletes):
    """A Delta deletion vector descriptor.

    ``id`` is the protocol's unique id: ``storageType + pathOrInlineDv`` plus
    ``"@" + offset`` when an offset is present. ``file_uri`` is the absolute URI of the
    DV file for ``u``/``p`` descriptors (None for inline ones).
    """

    storage_type: str
    path_or_inline_dv: str
    offset: int | None
    size_in_bytes: int
    max_row_index: int | None
    file_uri: str | None

    def files(self) -> tuple[str, ...]:
        """The DV file (none for an inline DV)."""
        return (self.file_uri,) if self.file_uri is not None else ()

    @classmethod
    def from_json(cls, d: Mapping[str, Any], table_root: str) -> DeletionVectorDescriptor:
        """From an ``add.deletionVector`` object (JSON or checkpoint row)."""
        st = str(d["storageType"])
        p = str(d["pathOrInlineDv"])
        offset = d.get("offset")
        offset = int(offset) if offset is not None else None
        uid = st + p + (f"@{offset}" if offset is not None else "")
        max_row = d.get("maxRowIndex")
        return cls(
            id=uid,
            cardinality=int(d["cardinality"]),
            storage_type=st,
            path_or_inline_dv=p,
            offset=offset,
            size_in_bytes=int(d["sizeInBytes"]),
            max_row_index=int(max_row) if max_row is not None else None,
            file_uri=_dv_file_uri(st, p, table_root),
        )


def descriptor_json(d: DeletionVectorDescriptor) -> dict[str, Any]:
    """The descriptor as the log holds it (``add.deletionVector`` / ``remove.deletionVector``)."""
    out: dict[str, Any] = {
        "storageType": d.storage_type,
        "pathOrInlineDv": d.path_or_inline_dv,
        "sizeInBytes": d.size_in_bytes,
        "cardinality": d.cardinality,
    }
    if d.offset is not None:
        out["offset"] = d.offset
    if d.max_row_index is not None:
        out["maxRowIndex"] = d.max_row_index
    return out


def _dv_file_uri(storage_type: str, p: str, table_root: str) -> str | None:
    if storage_type == "u":
        if len(p) < 20:
            raise ValueError(f"relative DV path {p!r} is shorter than a Z85 UUID")
        prefix, encoded = p[:-20], p[-20:]
        file_id = uuid.UUID(bytes=z85_decode(encoded))
        name = f"deletion_vector_{file_id}.bin"
        return table_root + "/" + (f"{prefix}/{name}" if prefix else name)
    if storage_type == "p":
        return resolve_path(table_root, p)
    if storage_type == "i":
        return None
    raise UnsupportedFeatureError(f"deletion vector storage type {storage_type!r} is not supported")


def parse_roaring_bitmap_array(data: bytes, source: str) -> BitMap64:
    """A RoaringBitmapArray (portable format) as a BitMap64."""
    if len(data) < 12:
        raise TableFormatError(f"{source}: deletion vector bitmap is truncated ({len(data)} bytes)")
    (magic,) = struct.unpack_from("<i", data, 0)
    if magic != PORTABLE_MAGIC:
        raise TableFormatError(
            f"{source}: deletion vector bitmap has magic {magic}, expected {PORTABLE_MAGIC} (portable format)"
        )
    try:
        return BitMap64.deserialize(data[4:])
    except Exception as e:  # pyroaring raises ValueError on malformed input
        raise TableFormatError(f"{source}: deletion vector bitmap is corrupt: {e}") from e


def serialize_roaring_bitmap_array(bitmap: BitMap64) -> bytes:
    """``bitmap`` as a portable RoaringBitmapArray (what :func:`parse_roaring_bitmap_array` reads)."""
    return struct.pack("<i", PORTABLE_MAGIC) + bitmap.serialize()


def deletion_vector_file(bitmaps: Sequence[bytes]) -> tuple[bytes, list[int]]:
    """A DV file holding the serialized ``bitmaps``, and the offset of each (its descriptor's ``offset``)."""
    out = bytearray([_DV_FILE_FORMAT_VERSION])
    offsets = []
    for b in bitmaps:
        offsets.append(len(out))
        out += struct.pack(">i", len(b)) + b + struct.pack(">I", zlib.crc32(b))
    return bytes(out), offsets


def relative_descriptor(
    file_id: uuid.UUID, offset: int, bitmap: bytes, cardinality: int, table_root: str
) -> DeletionVectorDescriptor:
    """The ``u`` descriptor of a DV at ``offset`` of ``deletion_vector_<file_id>.bin`` in the table root."""
    d = {
        "storageType": "u",
        "pathOrInlineDv": z85_encode(file_id.bytes),
        "offset": offset,
        "sizeInBytes": len(bitmap),
        "cardinality": cardinality,
    }
    return DeletionVectorDescriptor.from_json(d, table_root)


def read_deletion_vector(
    d: DeletionVectorDescriptor, io: FileIO, cache: MutableMapping[str, bytes] | None = None
) -> BitMap64:
    """The deleted row positions of ``d``, checked against its size, CRC and cardinality."""
    if d.storage_type == "i":
        source = f"inline deletion vector {d.path_or_inline_dv[:32]!r}"
        try:
            raw = z85_decode(d.path_or_inline_dv)
        except ValueError as e:
            raise TableFormatError(f"{source}: {e}") from e
        if len(raw) < d.size_in_bytes:
            raise TableFormatError(f"{source}: {len(raw)} bytes, descriptor says {d.size_in_bytes}")
        bitmap = parse_roaring_bitmap_array(raw[: d.size_in_bytes], source)
    else:
        assert d.file_uri is not None
        source = f"deletion vector file {d.file_uri}"
        data = cache.get(d.file_uri) if cache is not None else None
        if data is None:
            try:
                data = io.read_bytes(d.file_uri)
            except FileNotFoundError as e:
                raise TableFormatError(f"{source} is missing") from e
            if cache is not None:
                cache[d.file_uri] = data
        if not data or data[0] != _DV_FILE_FORMAT_VERSION:
            got = data[0] if data else "nothing"
            raise TableFormatError(f"{source}: unknown format version {got}")
        off = d.offset if d.offset is not None else 1
        end = off + 4 + d.size_in_bytes + 4
        if end > len(data):
            raise TableFormatError(f"{source}: DV at offset {off} runs past the end of the file")
        (size,) = struct.unpack_from(">i", data, off)
        if size != d.size_in_bytes:
            raise TableFormatError(
                f"{source}: DV at offset {off} has size {size}, expected {d.size_in_bytes}"
            )
        payload = data[off + 4 : off + 4 + size]
        (crc,) = struct.unpack_from(">I", data, off + 4 + size)
        if zlib.crc32(payload) != crc:
            raise TableFormatError(f"{source}: CRC-32 mismatch for the DV at offset {off}")
        bitmap = parse_roaring_bitmap_array(payload, f"{source} (offset {off})")
    if len(bitmap) != d.cardinality:
        raise TableFormatError(
            f"{source}: bitmap holds {len(bitmap)} positions, descriptor cardinality is {d.cardinality}"
        )
    return bitmap
