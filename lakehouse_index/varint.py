"""Unsigned LEB128 varints (Avro's longs zigzag-encode them; snappy frames prefix a length)."""

from __future__ import annotations

__all__ = ["read_uvarint", "unzigzag"]


def read_uvarint(data: bytes | memoryview, pos: int) -> tuple[int, int]:
    """The varint starting at ``pos`` of ``data``, and the position after it.

    ``IndexError`` when it runs past the end of ``data``.
    """
    value = shift = 0
    while True:
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7


def unzigzag(n: int) -> int:
    """The signed integer a zigzag-encoded ``n`` stands for (Avro ``int`` and ``long``)."""
    return (n >> 1) ^ -(n & 1)
