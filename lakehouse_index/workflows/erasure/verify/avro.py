"""A schema-driven reader of Avro object container files, for the residue scan.

Reads any Avro 1.x container (Iceberg manifests and manifest lists among them) with any
writer schema: records, enums, arrays, maps, unions, fixed and every primitive, logical
types (``date``, ``time-*``, ``timestamp-*``, ``local-timestamp-*``, ``decimal``, ``uuid``)
converted to Python values, and the codecs ``null``, ``deflate``, ``snappy``, ``zstandard``,
``bzip2`` and ``xz``. Records come back as dicts, so the scan can walk them field by field.
"""

from __future__ import annotations

import bz2
import datetime as dt
import decimal
import json
import lzma
import struct
import uuid
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from lakehouse_index.varint import read_uvarint, unzigzag

__all__ = ["MAGIC", "AvroContainer", "AvroError", "read_container"]

MAGIC = b"Obj\x01"
_EPOCH = dt.datetime(1970, 1, 1)
_EPOCH_DAY = dt.date(1970, 1, 1)


class AvroError(ValueError):
    """Bytes that are not an Avro container this reader decodes."""


class _Cursor:
    __slots__ = ("data", "pos")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def long(self) -> int:
        n, self.pos = read_uvarint(self.data, self.pos)
        return unzigzag(n)

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise AvroError("a value runs past the end of its block")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out


Reader = Callable[[_Cursor], Any]


def _logical(schema: dict[str, Any], base: Reader) -> Reader:
    """Wrap ``base`` with the conversion of the schema's logical type (values that do not
    convert, e.g. timestamps past year 9999, stay as decoded)."""
    logical = schema.get("logicalType")
    convert: Callable[[Any], Any] | None = None
    if logical == "date":
        convert = lambda v: _EPOCH_DAY + dt.timedelta(days=v)  # noqa: E731
    elif logical in ("timestamp-millis", "local-timestamp-millis"):
        convert = lambda v: _EPOCH + dt.timedelta(milliseconds=v)  # noqa: E731
    elif logical in ("timestamp-micros", "local-timestamp-micros"):
        convert = lambda v: _EPOCH + dt.timedelta(microseconds=v)  # noqa: E731
    elif logical in ("timestamp-nanos", "local-timestamp-nanos"):
        convert = lambda v: _EPOCH + dt.timedelta(microseconds=v // 1000) if v % 1000 == 0 else v  # noqa: E731
    elif logical == "time-millis":
        convert = lambda v: (dt.datetime.min + dt.timedelta(milliseconds=v)).time()  # noqa: E731
    elif logical == "time-micros":
        convert = lambda v: (dt.datetime.min + dt.timedelta(microseconds=v)).time()  # noqa: E731
    elif logical == "decimal":
        scale = int(schema.get("scale", 0))
        convert = lambda v: decimal.Decimal(int.from_bytes(v, "big", signed=True)).scaleb(-scale)  # noqa: E731
    elif logical == "uuid" and schema.get("type") == "fixed":
        convert = lambda v: uuid.UUID(bytes=v)  # noqa: E731
    if convert is None:
        return base
    conv = convert

    def read(c: _Cursor) -> Any:
        v = base(c)
        try:
            return conv(v)
        except (OverflowError, ValueError):
            return v

    return read


def _string(c: _Cursor) -> Any:
    raw = c.take(c.long())
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw


_PRIMITIVES: dict[str, Reader] = {
    "null": lambda c: None,
    "boolean": lambda c: c.take(1) != b"\x00",
    "int": _Cursor.long,
    "long": _Cursor.long,
    "float": lambda c: struct.unpack("<f", c.take(4))[0],
    "double": lambda c: struct.unpack("<d", c.take(8))[0],
    "bytes": lambda c: c.take(c.long()),
    "string": _string,
}


def _blocks(item: Reader) -> Callable[[_Cursor], list[Any]]:
    """Arrays and maps: blocks of items until a zero count (a negative count has a size)."""

    def read(c: _Cursor) -> list[Any]:
        out: list[Any] = []
        while True:
            n = c.long()
            if n == 0:
                return out
            if n < 0:
                n = -n
                c.long()
            out += [item(c) for _ in range(n)]

    return read


def _compile(schema: Any, named: dict[str, Reader], namespace: str = "") -> Reader:
    """A reader of one value of ``schema`` (a parsed Avro schema)."""
    if isinstance(schema, list):
        branches = [_compile(s, named, namespace) for s in schema]
        return lambda c: branches[c.long()](c)
    if isinstance(schema, str):
        if schema in _PRIMITIVES:
            return _PRIMITIVES[schema]
        full = schema if "." in schema or not namespace else f"{namespace}.{schema}"
        if full in named or schema in named:
            return lambda c: (named.get(full) or named[schema])(c)
        raise AvroError(f"unknown Avro type {schema!r}")
    if not isinstance(schema, dict):
        raise AvroError(f"malformed Avro schema node {type(schema).__name__}")
    kind = schema.get("type")
    if isinstance(kind, (dict, list)):
        return _compile(kind, named, namespace)
    name = schema.get("name", "")
    ns = schema.get("namespace", namespace)
    full = name if "." in name or not ns else f"{ns}.{name}"
    if kind == "record" or kind == "error":
        fields: list[tuple[str, Reader]] = []
        named[full] = named[name] = lambda c: {n: r(c) for n, r in fields}
        fields += [(f["name"], _compile(f["type"], named, ns)) for f in schema.get("fields", [])]
        return named[full]
    if kind == "enum":
        symbols = list(schema.get("symbols", []))
        named[full] = named[name] = lambda c: symbols[c.long()]
        return named[full]
    if kind == "fixed":
        size = int(schema["size"])
        named[full] = named[name] = _logical(schema, lambda c: c.take(size))
        return named[full]
    if kind == "array":
        return _blocks(_compile(schema["items"], named, ns))
    if kind == "map":
        value = _compile(schema["values"], named, ns)
        pairs = _blocks(lambda c: (_string(c), value(c)))
        return lambda c: dict(pairs(c))
    if kind in _PRIMITIVES:
        return _logical(schema, _PRIMITIVES[kind])
    raise AvroError(f"unknown Avro type {kind!r}")


def _snappy(block: bytes) -> bytes:
    body = block[:-4]  # a CRC32 of the uncompressed data follows
    size, _ = read_uvarint(body, 0)
    return bytes(pa.decompress(body, decompressed_size=size, codec="snappy", asbytes=True))


def _zstd(block: bytes) -> bytes:
    return bytes(pa.input_stream(pa.BufferReader(block), compression="zstd").read())


_CODECS: dict[str, Callable[[bytes], bytes]] = {
    "null": lambda b: b,
    "deflate": lambda b: zlib.decompress(b, -15),
    "snappy": _snappy,
    "zstandard": _zstd,
    "bzip2": bz2.decompress,
    "xz": lzma.decompress,
}


@dataclass(frozen=True)
class AvroContainer:
    """A container file's header: metadata (``avro.schema``, ``avro.codec``, the writer's own
    keys) and the parsed writer schema; :meth:`records` decodes the data blocks."""

    metadata: dict[str, bytes]
    schema: Any
    codec: str
    data: bytes
    start: int

    def records(self) -> Iterator[Any]:
        """Every record of every block, in order."""
        read = _compile(self.schema, {})
        decompress = _CODECS[self.codec]
        c = _Cursor(self.data)
        c.pos = self.start
        sync = self.data[self.start - 16 : self.start]
        while c.pos < len(self.data):
            count = c.long()
            block = _Cursor(decompress(c.take(c.long())))
            for _ in range(count):
                yield read(block)
            if c.take(16) != sync:
                raise AvroError("a data block does not end with the file's sync marker")


def read_container(data: bytes) -> AvroContainer:
    """The header of an Avro container file (``AvroError`` when ``data`` is not one)."""
    if not data.startswith(MAGIC):
        raise AvroError("not an Avro object container file")
    c = _Cursor(data)
    c.pos = len(MAGIC)
    try:
        metadata = {str(k): bytes(v) for k, v in _blocks(lambda c: (_string(c), c.take(c.long())))(c)}
        c.take(16)
        schema = json.loads(metadata["avro.schema"])
    except (IndexError, KeyError, ValueError) as e:
        raise AvroError(f"unreadable Avro header: {e}") from e
    codec = metadata.get("avro.codec", b"null").decode()
    if codec not in _CODECS:
        raise AvroError(f"unsupported Avro codec {codec!r}")
    return AvroContainer(metadata, schema, codec, data, c.pos)
