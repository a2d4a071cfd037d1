"""Skipping Avro values by their writer schema, without decoding them.

A manifest entry carries column statistics (six maps of column id to a count or a bound,
one entry per column) that a reader of the table's files does not use, and they are most
of each entry's bytes. pyiceberg's readers decode them into dictionaries, and its schema
resolver cannot skip a map or list it does not read; decoding them took about half of a
cold Iceberg locate on the benchmark table (100 one-file manifests). Here a field's writer
schema (the Avro JSON in the file's header) is compiled once into a function
``skip(data, pos) -> pos`` that walks over one value: varints are stepped over byte by
byte, lengths and counts are read, and a run of items made only of varints (the count maps)
is stepped over in one loop.

Every skip checks the buffer's end (``EOFError``) and refuses negative lengths, counts of
negative size and union branches out of range (``ValueError``), so a corrupt file fails
its read instead of looping or reading past the buffer: each item of a repeated value
consumes at least one byte, and items that take none are not looped over.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["RecordSkips", "Skip", "compile_skip", "read_long"]

#: Steps over one value of ``data`` starting at ``pos``; returns the position after it.
Skip = Callable[[bytes, int], int]

#: Bytes of the fixed-width primitives.
_WIDTHS = {"null": 0, "boolean": 1, "float": 4, "double": 8}
_VARINTS = frozenset({"int", "long", "enum"})


def compile_skip(schema: Any) -> Skip:
    """The skip function of the Avro type ``schema`` (parsed JSON: a name, a union list or a
    complex type's object)."""
    return _Compiler().skip(schema)


class RecordSkips:
    """The skip function of each field of every record in one writer schema, compiled once
    (named types defined in one field resolve in the later ones, in their namespaces)."""

    def __init__(self, schema: dict[str, Any]) -> None:
        compiler = _Compiler()
        compiler.skip(schema)
        self._schema = schema  # keeps the records alive: they are known by identity
        self._fields = compiler.fields

    def fields(self, record: dict[str, Any]) -> list[Skip]:
        """The skips of the fields of ``record``, one of the schema's record objects, in order."""
        return self._fields[id(record)]


class _Compiler:
    """Compiles the types of one schema."""

    def __init__(self) -> None:
        self.names: dict[str, Skip] = {}
        #: The field skips of each record compiled, by the identity of its schema object.
        self.fields: dict[int, list[Skip]] = {}
        #: The enclosing namespace: names defined or referred to without a dot are in it.
        self.namespace = ""
        #: Varints per value, of the named types made only of varints (enums, such records).
        self.varint_names: dict[str, int] = {}

    def varints(self, schema: Any) -> int | None:
        """How many varints one value of ``schema`` is, when it is only varints (else None)."""
        if isinstance(schema, str):
            return 1 if schema in ("int", "long") else self.varint_names.get(self._full(schema))
        if isinstance(schema, dict):
            t = schema.get("type")
            if t in _VARINTS:
                return 1
            if t in ("record", "error"):
                counts = [self.varints(f["type"]) for f in schema["fields"]]
                return sum(c for c in counts if c is not None) if all(c is not None for c in counts) else None
        return None

    def skip(self, schema: Any) -> Skip:
        """The skip function of ``schema``."""
        if isinstance(schema, list):
            return _union([self.skip(branch) for branch in schema])
        if isinstance(schema, str):
            if schema in _WIDTHS:
                return _width(_WIDTHS[schema])
            if schema in ("int", "long"):
                return _varint
            if schema in ("bytes", "string"):
                return _bytes
            named = self.names.get(self._full(schema))
            if named is None:
                named = self.names.get(schema)
            if named is not None:
                return named
            raise ValueError(f"unknown Avro type {schema!r}")
        if not isinstance(schema, dict):
            raise ValueError(f"not an Avro type: {schema!r}")
        t = schema.get("type")
        if t in ("record", "error"):
            return self._record(schema)
        if t == "enum":
            self._name(schema, _varint, varints=1)
            return _varint
        if t == "fixed":
            size = int(schema["size"])
            if size < 0:
                raise ValueError(f"a fixed type of size {size}")
            return self._name(schema, _width(size))
        if t == "array":
            return self._repeated(schema["items"], key=False)
        if t == "map":
            return self._repeated(schema["values"], key=True)
        return self.skip(t)  # a primitive, possibly with a logical type

    def _full(self, name: str, namespace: str | None = None) -> str:
        """``name`` with the namespace it is in (Avro "Names")."""
        ns = self.namespace if namespace is None else namespace
        return name if "." in name or not ns else f"{ns}.{name}"

    def _name(self, schema: dict[str, Any], skip: Skip, varints: int | None = None) -> Skip:
        name = schema.get("name")
        if name:
            full = self._full(name, schema.get("namespace"))
            self.names[full] = skip
            if varints is not None:
                self.varint_names[full] = varints
        return skip

    def _record(self, schema: dict[str, Any]) -> Skip:
        fields: list[Skip] = []
        self.fields[id(schema)] = fields

        def record(data: bytes, pos: int) -> int:
            for f in fields:
                pos = f(data, pos)
            return pos

        count = self.varints(schema)
        self._name(schema, record, varints=count)  # before the fields: they may refer to it
        outer = self.namespace
        full = self._full(schema.get("name") or "", schema.get("namespace"))
        self.namespace = full.rpartition(".")[0]  # the record's fields are in its namespace
        try:
            fields.extend(self.skip(f["type"]) for f in schema["fields"])
        finally:
            self.namespace = outer
        return record

    def _repeated(self, items: Any, *, key: bool) -> Skip:
        """Arrays (``key`` false) and maps (string keys): blocks of a count and that many
        items, until a zero count; a negative count is followed by the block's byte size."""
        per_item: int | None = None
        step: Skip
        if key:
            value = self.skip(items)

            def entry(data: bytes, pos: int) -> int:
                return value(data, _bytes(data, pos))

            step = entry
        else:
            step = self.skip(items)
            per_item = self.varints(items)

        def repeated(data: bytes, pos: int) -> int:
            while True:
                n, pos = read_long(data, pos)
                if n == 0:
                    return pos
                if n < 0:
                    size, pos = read_long(data, pos)
                    if size < 0:
                        raise ValueError(f"a block of {size} bytes")
                    pos = _checked(data, pos + size)
                elif per_item:
                    pos = _skip_varints(data, pos, n * per_item)
                else:
                    for _ in range(n):
                        before, pos = pos, step(data, pos)
                        if pos == before:  # items of no bytes (nulls, empty records): all are
                            break

        return repeated


def read_long(data: bytes, pos: int) -> tuple[int, int]:
    """A zigzag varint (Avro ``int`` and ``long``) and the position after it; ``EOFError`` when
    it runs past the end of ``data``. (The core's ``lakehouse_index.varint`` is out of a
    connector's reach: connectors import only the connector contract.)"""
    n = shift = 0
    try:
        while True:
            b = data[pos]
            pos += 1
            n |= (b & 0x7F) << shift
            if b < 0x80:
                return (n >> 1) ^ -(n & 1), pos
            shift += 7
    except IndexError:
        raise EOFError(f"a varint runs past the end of {len(data)} bytes") from None


def _varint(data: bytes, pos: int) -> int:
    try:
        while data[pos] >= 0x80:
            pos += 1
    except IndexError:
        raise EOFError(f"a varint runs past the end of {len(data)} bytes") from None
    return pos + 1


def _skip_varints(data: bytes, pos: int, n: int) -> int:
    try:
        while n:
            if data[pos] < 0x80:
                n -= 1
            pos += 1
    except IndexError:
        raise EOFError(f"varints run past the end of {len(data)} bytes") from None
    return pos


def _bytes(data: bytes, pos: int) -> int:
    size, pos = read_long(data, pos)
    if size < 0:
        raise ValueError(f"a byte string of length {size}")
    return _checked(data, pos + size)


def _width(size: int) -> Skip:
    def fixed(data: bytes, pos: int) -> int:
        return _checked(data, pos + size)

    return fixed


def _union(branches: list[Skip]) -> Skip:
    def union(data: bytes, pos: int) -> int:
        i, pos = read_long(data, pos)
        if not 0 <= i < len(branches):
            raise ValueError(f"union branch {i} of {len(branches)}")
        return branches[i](data, pos)

    return union


def _checked(data: bytes, pos: int) -> int:
    if pos > len(data):
        raise EOFError(f"a value runs past the end of {len(data)} bytes")
    return pos
