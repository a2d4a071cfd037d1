"""The in-memory Avro decoder manifests are read with, against pyiceberg's pure-Python one."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lakehouse_index_iceberg.manifests import _BufferDecoder
from pyiceberg.avro.decoder import StreamingBinaryDecoder
from pyiceberg.avro.encoder import BinaryEncoder

#: (operation, argument) pairs the readers of manifests call.
_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("int"), st.none()),
        st.tuples(st.just("bytes"), st.none()),
        st.tuples(st.just("utf8"), st.none()),
        st.tuples(st.just("read"), st.integers(0, 20)),
        st.tuples(st.just("skip"), st.integers(0, 20)),
        st.tuples(st.just("skip_int"), st.none()),
        st.tuples(st.just("double"), st.none()),
        st.tuples(st.just("ints"), st.integers(0, 4)),
    ),
    max_size=30,
)


def _run(decoder: Any, ops: list[tuple[str, int | None]]) -> list[object]:
    """Per operation, (what it returns, the position after it), until the first error: its type."""
    out: list[object] = []
    for op, arg in ops:
        try:
            if op == "int":
                value = decoder.read_int()
            elif op == "bytes":
                value = decoder.read_bytes()
            elif op == "utf8":
                value = decoder.read_utf8()
            elif op == "read":
                value = decoder.read(arg)
            elif op == "skip":
                value = decoder.skip(arg)
            elif op == "skip_int":
                value = decoder.skip_int()
            elif op == "double":
                value = decoder.read_double()
            else:
                value = decoder.read_ints(arg)
        except (EOFError, UnicodeDecodeError) as e:
            out.append(type(e))
            break
        out.append((value, decoder.tell()))
    return out


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=80), ops=_OPS)
def test_decodes_as_pyiceberg_does(data: bytes, ops: list[tuple[str, int | None]]) -> None:
    """Any bytes, any calls: the same values and positions as pyiceberg's decoder, and the
    same error where that one hits the end of the buffer; a skip past the end fails at once
    (pyiceberg's seeks past it, and its next read fails)."""
    ours = _run(_BufferDecoder(data), ops)
    theirs = _run(StreamingBinaryDecoder(data), ops)
    failed = len(ours) - 1
    if ours[failed:] == [EOFError] and ops[failed][0] == "skip":
        assert ours[:failed] == theirs[:failed]
        assert theirs[failed:][:1] != [EOFError]
    else:
        assert ours == theirs


@given(values=st.lists(st.integers(-(2**63), 2**63 - 1), max_size=20))
def test_round_trips_longs(values: list[int]) -> None:
    class Sink:
        def __init__(self) -> None:
            self.data = bytearray()

        def write(self, b: bytes) -> None:
            self.data += b

    sink = Sink()
    encoder = BinaryEncoder(sink)  # type: ignore[arg-type]
    for v in values:
        encoder.write_int(v)
    decoder = _BufferDecoder(bytes(sink.data))
    assert [decoder.read_int() for _ in values] == values
    assert decoder.tell() == len(sink.data)
    with pytest.raises(EOFError):
        decoder.read_int()


def test_refuses_reads_past_the_end_and_backwards() -> None:
    decoder = _BufferDecoder(b"\x06abc\x80")
    assert decoder.read_bytes() == b"abc"
    with pytest.raises(EOFError):
        decoder.read_int()  # a varint whose last byte is missing
    with pytest.raises(EOFError):
        decoder.read(2)
    with pytest.raises(EOFError):
        decoder.skip(-1)
    assert _BufferDecoder(b"\x05xy").read_bytes() == b""  # a length of -3: none, as pyiceberg reads it
