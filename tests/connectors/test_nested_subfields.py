"""The connectors hand readers the physical name and field id of every nested field.

Delta: ``delta.columnMapping.physicalName`` / ``id`` on struct fields at every depth and
``delta.columnMapping.nested.ids`` (icebergCompatV2) for list elements and map keys and
values, keyed by the nearest struct field's physical name; ids only in ``id`` mode, as
the protocol says. Iceberg: field ids of struct fields, elements, keys and values. The
contract refuses subfields that do not follow the column's type.
"""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa
import pytest
from lakehouse_index_delta.schema import table_schema
from lakehouse_index_iceberg.schema import columns as iceberg_columns
from pyiceberg.schema import Schema
from pyiceberg.types import IntegerType, ListType, LongType, MapType, NestedField, StringType, StructType

from lakehouse_index.source import Column, Subfield, TableFormatError, default_subfields


def _mapped(name: str, t: Any, fid: int, nested: dict[str, int] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"delta.columnMapping.id": fid, "delta.columnMapping.physicalName": f"col-{fid}"}
    if nested:
        meta["delta.columnMapping.nested.ids"] = nested
    return {"name": name, "type": t, "nullable": True, "metadata": meta}


def _struct(*fields: dict[str, Any]) -> dict[str, Any]:
    return {"type": "struct", "fields": list(fields)}


# col3: map<int, struct<subcol1: array<int>>>, col1: array<array<int>>, as in the protocol's example
SCHEMA = _struct(
    _mapped(
        "col3",
        {
            "type": "map",
            "keyType": "integer",
            "valueType": _struct(
                _mapped("subcol1", {"type": "array", "elementType": "integer"}, 4, {"col-4.element": 107})
            ),
            "valueContainsNull": True,
        },
        3,
        {"col-3.key": 105, "col-3.value": 106},
    ),
    _mapped(
        "col1",
        {"type": "array", "elementType": {"type": "array", "elementType": "integer"}},
        1,
        {"col-1.element": 100, "col-1.element.element": 101},
    ),
)


def _delta_columns(mode: str) -> tuple[Column, ...]:
    config = {"delta.columnMapping.mode": mode}
    return table_schema(json.dumps(SCHEMA), [], config, "test").columns


def test_delta_id_mode_carries_ids_at_every_depth() -> None:
    col3, col1 = _delta_columns("id")
    assert (col3.physical_name, col3.field_id) == ("col-3", 3)
    assert col3.subfields == (
        Subfield("key", field_id=105),
        Subfield(
            "value",
            field_id=106,
            children=(
                Subfield(
                    "subcol1",
                    physical_name="col-4",
                    field_id=4,
                    children=(Subfield("element", field_id=107),),
                ),
            ),
        ),
    )
    assert col1.subfields == (
        Subfield("element", field_id=100, children=(Subfield("element", field_id=101),)),
    )


def test_delta_name_mode_carries_physical_names_only() -> None:
    col3, col1 = _delta_columns("name")
    assert col3.field_id is None
    (_, value) = col3.subfields
    (subcol1,) = value.children
    assert (subcol1.physical_name, subcol1.field_id, value.field_id) == ("col-4", None, None)
    assert col1.subfields == (Subfield("element", children=(Subfield("element"),)),)


def test_delta_without_mapping_uses_logical_names() -> None:
    col3, _ = _delta_columns("none")
    assert col3.subfields == () and col3.physical_name is None
    assert col3.fields == default_subfields(col3.type)


def test_delta_nested_field_without_physical_name_is_refused() -> None:
    schema = _struct(_mapped("s", _struct({"name": "inner", "type": "long", "nullable": True}), 1))
    with pytest.raises(TableFormatError, match="'inner' has no physical name"):
        table_schema(json.dumps(schema), [], {"delta.columnMapping.mode": "name"}, "test")


def test_delta_malformed_nested_ids_are_refused() -> None:
    bad = _struct(_mapped("a", {"type": "array", "elementType": "long"}, 1))
    bad["fields"][0]["metadata"]["delta.columnMapping.nested.ids"] = "not an object"
    with pytest.raises(TableFormatError, match=r"nested\.ids"):
        table_schema(json.dumps(bad), [], {"delta.columnMapping.mode": "id"}, "test")


def test_iceberg_ids_of_elements_keys_and_values() -> None:
    schema = Schema(
        NestedField(1, "id", LongType()),
        NestedField(
            2,
            "m",
            MapType(
                3,
                StructType(NestedField(4, "k", IntegerType())),
                5,
                ListType(6, StructType(NestedField(7, "ab", LongType())), element_required=False),
                value_required=False,
            ),
        ),
        NestedField(8, "s", StructType(NestedField(9, "name", StringType()))),
    )
    ident, m, s = iceberg_columns(schema, {})
    assert ident.subfields == ()
    assert m.subfields == (
        Subfield("key", field_id=3, children=(Subfield("k", field_id=4),)),
        Subfield(
            "value",
            field_id=5,
            children=(Subfield("element", field_id=6, children=(Subfield("ab", field_id=7),)),),
        ),
    )
    assert s.subfields == (Subfield("name", field_id=9),)
    # The name mapping's names reach the columns and nested fields they map.
    mapped = iceberg_columns(schema, {1: ("id", "ident"), 9: ("name", "nm")})
    assert mapped[0].file_names == ("id", "ident") and mapped[1].file_names == ()
    assert mapped[2].subfields == (Subfield("name", field_id=9, file_names=("name", "nm")),)


@pytest.mark.parametrize(
    ("typ", "subfields"),
    [
        (pa.struct([("a", pa.int64())]), (Subfield("b"),)),
        (pa.list_(pa.int64()), (Subfield("key"),)),
        (pa.map_(pa.int32(), pa.int64()), (Subfield("key"),)),
        (pa.int64(), (Subfield("x"),)),
        (pa.struct([("a", pa.struct([("b", pa.int64())]))]), (Subfield("a", children=(Subfield("c"),)),)),
    ],
)
def test_subfields_must_follow_the_type(typ: pa.DataType, subfields: tuple[Subfield, ...]) -> None:
    with pytest.raises(TableFormatError, match="column 'c'"):
        Column("c", typ, subfields=subfields)
