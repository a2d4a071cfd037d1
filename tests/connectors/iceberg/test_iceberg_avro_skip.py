"""Skipping Avro values by writer schema (avro_skip), against pyiceberg's Avro writer.

pyiceberg encodes random values of random Iceberg types (nested structs, lists, maps,
optional fields, fixed, decimals, uuids); its schema conversion gives the Avro JSON. A
compiled skip must land exactly where the writer stopped, and any cut of the bytes must
fail as EOFError rather than land somewhere. Avro shapes pyiceberg does not write (string
maps, blocks with byte sizes, enums, named references) are encoded by hand.
Whole manifests of a table partitioned by typed columns read as pyiceberg's reader reads them.
"""

from __future__ import annotations

import datetime as dt
import decimal
import io
import itertools
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lakehouse_index_iceberg.avro_skip import RecordSkips, compile_skip
from pyiceberg.avro.encoder import BinaryEncoder
from pyiceberg.avro.resolver import construct_writer
from pyiceberg.schema import Schema
from pyiceberg.typedef import Record
from pyiceberg.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FixedType,
    FloatType,
    IcebergType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    NestedField,
    StringType,
    StructType,
    TimestampType,
    UUIDType,
)
from pyiceberg.utils.schema_conversion import AvroSchemaConversion

_INT32 = st.integers(-(2**31), 2**31 - 1)
_INT64 = st.integers(-(2**63), 2**63 - 1)

#: (type factory, values) of the primitives; a factory gets nothing, a fixed its length.
_PRIMITIVES: list[tuple[Callable[[], IcebergType], st.SearchStrategy[Any]]] = [
    (BooleanType, st.booleans()),
    (IntegerType, _INT32),
    (LongType, _INT64),
    (FloatType, st.floats(width=32, allow_nan=False)),
    (DoubleType, st.floats(allow_nan=False)),
    (StringType, st.text(max_size=12)),
    (BinaryType, st.binary(max_size=12)),
    (DateType, _INT32),  # days, as pyiceberg's writer takes them
    (TimestampType, _INT64),  # microseconds
    (UUIDType, st.uuids()),
    (lambda: FixedType(3), st.binary(min_size=3, max_size=3)),
    (lambda: DecimalType(9, 2), st.decimals(-(10**6), 10**6, places=2).map(decimal.Decimal)),
]

#: A type's shape: ("p", primitive index), ("struct", [(optional, shape)]), ("list", shape),
#: ("map", key primitive index, value shape).
_SHAPES = st.recursive(
    st.tuples(st.just("p"), st.integers(0, len(_PRIMITIVES) - 1)),
    lambda inner: st.one_of(
        st.tuples(st.just("struct"), st.lists(st.tuples(st.booleans(), inner), max_size=3)),
        st.tuples(st.just("list"), inner),
        st.tuples(st.just("map"), st.sampled_from([1, 2, 5]), inner),
    ),
    max_leaves=6,
)


def _build(shape: Any, ids: Callable[[], int]) -> tuple[IcebergType, st.SearchStrategy[Any]]:
    """The Iceberg type of ``shape`` (fresh field ids from ``ids``) and a strategy of its values, as
    pyiceberg's writer takes them."""
    if shape[0] == "p":
        make, values = _PRIMITIVES[shape[1]]
        return make(), values
    if shape[0] == "struct":
        fields, strategies = [], []
        for optional, sub in shape[1]:
            t, values = _build(sub, ids)
            fields.append(NestedField(ids(), f"f{len(fields)}", t, required=not optional))
            strategies.append(st.none() | values if optional else values)
        return StructType(*fields), st.tuples(*strategies).map(lambda vs: Record(*vs))
    if shape[0] == "list":
        element, values = _build(shape[1], ids)
        # By keyword: pyiceberg takes an empty struct given by position for a missing element.
        return ListType(element_id=ids(), element_type=element), st.lists(values, max_size=4)
    key_make, keys = _PRIMITIVES[shape[1]]
    value, values = _build(shape[2], ids)
    # pyiceberg's schema conversion does not make optional map values nullable: required only.
    t = MapType(key_id=ids(), key_type=key_make(), value_id=ids(), value_type=value, value_required=True)
    return t, st.dictionaries(keys, values, max_size=4)


def _encode(schema: Schema, rows: list[Record]) -> bytes:
    out = io.BytesIO()
    encoder = BinaryEncoder(out)
    writer = construct_writer(schema)
    for row in rows:
        writer.write(encoder, row)
    return out.getvalue()


@settings(max_examples=200, deadline=None)
@given(shape=_SHAPES, optional=st.booleans(), data=st.data())
def test_a_skip_ends_where_pyiceberg_stopped_writing(shape: Any, optional: bool, data: st.DataObject) -> None:
    t, values = _build(shape, itertools.count(101).__next__)
    schema = Schema(
        NestedField(1, "value", t, required=not optional),
        NestedField(2, "sentinel", LongType(), required=True),
    )
    rows = data.draw(
        st.lists(
            st.tuples(st.none() | values if optional else values, _INT64).map(lambda r: Record(*r)),
            max_size=4,
        )
    )
    avro = AvroSchemaConversion().iceberg_to_avro(schema, schema_name="row")
    encoded = _encode(schema, rows)

    # Whole rows, one after the other: the last ends at the end of the bytes.
    skip_row = compile_skip(avro)
    pos = 0
    for _ in rows:
        pos = skip_row(encoded, pos)
    assert pos == len(encoded)

    # The value field alone: each row's sentinel starts where its skip ends.
    skip_value = RecordSkips(avro).fields(avro)[0]
    pos = 0
    for row in rows:
        pos = skip_value(encoded, pos)
        sentinel = _encode(Schema(NestedField(2, "sentinel", LongType(), required=True)), [Record(row[1])])
        assert encoded[pos : pos + len(sentinel)] == sentinel
        pos += len(sentinel)
    assert pos == len(encoded)

    # Every cut of one row fails: a skip never lands inside bytes that hold less than a row.
    if rows:
        one = _encode(schema, rows[:1])
        for cut in range(len(one)):
            with pytest.raises(EOFError):
                skip_row(one[:cut], 0)


def _long(n: int) -> bytes:
    """Avro's zigzag varint, by pyiceberg's encoder."""
    out = io.BytesIO()
    BinaryEncoder(out).write_int(n)
    return out.getvalue()


def _str(s: str) -> bytes:
    """An Avro string (length, UTF-8 bytes), by pyiceberg's encoder."""
    out = io.BytesIO()
    BinaryEncoder(out).write_utf8(s)
    return out.getvalue()


def test_string_maps_blocks_with_sizes_enums_and_named_references() -> None:
    schema = {
        "type": "record",
        "name": "outer",
        "namespace": "ns",
        "fields": [
            {"name": "m", "type": {"type": "map", "values": "long"}},
            {"name": "e", "type": {"type": "enum", "name": "color", "symbols": ["R", "G"]}},
            {"name": "again", "type": "color"},
            {
                "name": "items",
                "type": {"type": "array", "items": {"type": "fixed", "name": "two", "size": 2}},
            },
            {"name": "more", "type": {"type": "array", "items": "ns.two"}},
            {"name": "tail", "type": "string"},
        ],
    }
    block = _str("b") + _long(7) + _str("c") + _long(-300)
    data = (
        _long(1) + _str("a") + _long(5)  # a block of one entry
        + _long(-2) + _long(len(block)) + block  # a block of two, with its byte size
        + _long(0)
        + _long(1) + _long(0)  # the enums
        + _long(2) + b"xyyz" + _long(0)
        + _long(-1) + _long(2) + b"zz" + _long(0)
        + _str("end")
    )  # fmt: skip
    assert compile_skip(schema)(data, 0) == len(data)
    assert compile_skip(schema)(data + b"rest", 0) == len(data)


def test_recursive_records_by_name() -> None:
    node = {
        "type": "record",
        "name": "node",
        "fields": [{"name": "v", "type": "int"}, {"name": "next", "type": ["null", "node"]}],
    }
    data = _long(1) + _long(1) + _long(2) + _long(1) + _long(3) + _long(0)  # 1 -> 2 -> 3
    assert compile_skip(node)(data, 0) == len(data)


@pytest.mark.parametrize(
    ("schema", "data", "error"),
    [
        # A block claiming 2**62 varints in 3 bytes: fails at the end, without looping that long.
        ({"type": "array", "items": "long"}, _long(2**62) + b"\x01\x02\x03", EOFError),
        ({"type": "array", "items": "string"}, _long(2**62) + b"\x00\x00", EOFError),
        # Items of no bytes: any count is over at once; then the zero count.
        ({"type": "array", "items": "null"}, _long(2**62) + _long(0), None),
        ({"type": "array", "items": "long"}, _long(-1) + _long(-5), ValueError),
        ({"type": "array", "items": "long"}, _long(-1) + _long(50) + b"\x00", EOFError),
        ("bytes", _long(-3), ValueError),
        ("bytes", _long(9) + b"abc", EOFError),
        (["null", "long"], _long(2) + b"\x00", ValueError),
        ({"type": "fixed", "name": "f", "size": 4}, b"abc", EOFError),
        ("long", b"\x80\x80", EOFError),
    ],
)
def test_corrupt_values_fail_their_read(schema: Any, data: bytes, error: type[Exception] | None) -> None:
    skip = compile_skip(schema)
    if error is None:
        assert skip(data, 0) == len(data)
    else:
        with pytest.raises(error):
            skip(data, 0)


def test_unknown_types_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown Avro type"):
        compile_skip({"type": "record", "name": "r", "fields": [{"name": "x", "type": "undefined_name"}]})


def test_uuids_are_sixteen_bytes() -> None:
    # A spot check of one logical type against the writer, beside the random ones above.
    schema = Schema(NestedField(1, "u", UUIDType(), required=True))
    data = _encode(schema, [Record(uuid.UUID(int=5))])
    avro = AvroSchemaConversion().iceberg_to_avro(schema, schema_name="row")
    assert compile_skip(avro)(data, 0) == len(data) == 16


def test_manifests_read_as_pyiceberg_reads_them(catalog: Any) -> None:
    """Every manifest of a table partitioned by typed columns (its entries carry column
    statistics, which are stepped over) reads as pyiceberg's own manifest reader reads it."""
    import pyarrow as pa
    from lakehouse_index_iceberg.manifests import (
        ManifestContent,
        ManifestFile,
        read_manifest,
        read_manifest_list,
    )
    from pyiceberg.expressions import EqualTo
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.transforms import IdentityTransform

    from lakehouse_index.io import Storage

    schema = Schema(
        NestedField(1, "id", LongType(), required=True),
        NestedField(2, "day", DateType(), required=False),
        NestedField(3, "amount", DecimalType(9, 2), required=False),
        NestedField(4, "name", StringType(), required=False),
        NestedField(5, "flag", BooleanType(), required=False),
    )
    spec = PartitionSpec(
        *(
            PartitionField(i, 1000 + i, IdentityTransform(), n)
            for i, n in ((2, "day"), (3, "amount"), (5, "flag"))
        )
    )
    table = catalog.create_table("db.typed", schema, partition_spec=spec, properties={"format-version": "2"})

    def rows(ids: range) -> pa.Table:
        return pa.table(
            {
                "id": pa.array(list(ids), pa.int64()),
                "day": pa.array([dt.date(2024, 1, 1 + i % 3) for i in ids], pa.date32()),
                "amount": pa.array([decimal.Decimal(f"{i % 2}.25") for i in ids], pa.decimal128(9, 2)),
                "name": [f"n{i}" for i in ids],
                "flag": [i % 2 == 0 for i in ids],
            },
            schema=table.schema().as_arrow(),
        )

    table.append(rows(range(0, 12)))
    table.append(rows(range(12, 20)))
    table.delete(EqualTo("id", 3))
    table = catalog.load_table("db.typed")
    io = Storage.for_uri(table.location())
    checked = 0
    for snap in table.snapshots():
        ours = read_manifest_list(io, snap.manifest_list)
        theirs = snap.manifests(table.io)
        assert [m.path for m in ours] == [m.manifest_path for m in theirs]
        for m, p in zip(ours, theirs, strict=True):
            assert isinstance(m, ManifestFile) and m.content == ManifestContent(int(p.content))
            assert (m.sequence_number, m.added_snapshot_id) == (p.sequence_number, p.added_snapshot_id)
            entries = read_manifest(io, m)
            expected = p.fetch_manifest_entry(table.io, discard_deleted=False)
            assert len(entries) == len(expected) > 0
            for e, x in zip(entries, expected, strict=True):
                f, g = e.file, x.data_file
                assert (int(e.status), e.snapshot_id, e.sequence_number) == (
                    int(x.status),
                    x.snapshot_id,
                    x.sequence_number,
                )
                assert (f.path, f.record_count, f.size, int(f.content)) == (
                    g.file_path,
                    g.record_count,
                    g.file_size_in_bytes,
                    int(g.content),
                )
                assert f.partition == tuple(g.partition[i] for i in range(len(g.partition)))
                assert g.lower_bounds  # the statistics stepped over were there
                checked += 1
    assert checked >= 5
