"""Random nested schemas with column mapping, their values, and Delta tables written by hand.

A schema is a tree of :class:`Type` (primitives, structs, lists, maps with primitive or
struct keys) whose struct fields carry a logical name, a physical name and a field id, and
whose list elements and map keys and values carry ids of their own (Delta's
``delta.columnMapping.nested.ids``, Iceberg's element/key/value ids). From it:

* :func:`delta_schema_json` — the ``schemaString`` with column-mapping metadata;
* :func:`physical_arrow` — the Parquet schema: physical names, ``PARQUET:field_id`` at
  every depth (optionally under scrambled names, for ``id`` mode);
* :func:`physical_value` — a logical value (dicts keyed by logical names) as stored;
* :func:`evolve` — a schema-evolution step (rename, add, drop a nested field) and
  :func:`project`, the value an old row must read as under the new schema;
* :func:`canon` — one comparable form of a value from pyarrow, deltalake or Spark.

:class:`DeltaWriter` writes the data files through pyarrow and the ``_delta_log`` JSON by
hand (protocol 2/5, or 3/7 with ``icebergCompatV2``).
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import strategies as st

PRIMITIVES: dict[str, pa.DataType] = {
    "long": pa.int64(),
    "integer": pa.int32(),
    "string": pa.string(),
    "double": pa.float64(),
    "boolean": pa.bool_(),
}
KEY_PRIMITIVES = ("integer", "string", "long")
NAMES = ("ab", "cd", "x", "y", "zz", "q1", "w", "n_2")


@dataclass(frozen=True)
class Field:
    """A struct field: logical name, physical name, field id, type."""

    name: str
    physical: str
    fid: int
    type: Type


@dataclass(frozen=True)
class Type:
    """A type: ``kind`` is a primitive name or ``struct`` / ``array`` / ``map``."""

    kind: str
    fields: tuple[Field, ...] = ()
    #: array: (element,); map: (key, value)
    children: tuple[Type, ...] = ()
    #: ids of the array element / map key and value
    slot_ids: tuple[int, ...] = ()


# --------------------------------------------------------------------------- shapes


@dataclass
class Ids:
    """Allocates field ids and physical names (monotonic, as Delta's maxColumnId)."""

    next_id: int = 1

    def take(self) -> int:
        self.next_id += 1
        return self.next_id - 1

    def field(self, name: str, t: Type) -> Field:
        fid = self.take()
        return Field(name, f"col-{fid:03d}-{name}", fid, t)


def _primitive(kinds: tuple[str, ...] = tuple(PRIMITIVES)) -> st.SearchStrategy[Any]:
    return st.sampled_from(kinds).map(lambda k: ("p", k))


def _shape(depth: int) -> st.SearchStrategy[Any]:
    """A nested shape without ids (tuples), at most ``depth`` levels of nesting."""
    if depth == 0:
        return _primitive()
    return st.one_of(_primitive(), _nested(depth))


def _nested(depth: int) -> st.SearchStrategy[Any]:
    """A struct, list or map shape (structs and maps of structs drawn most often)."""
    inner = st.deferred(lambda: _shape(depth - 1))
    key = st.one_of(_primitive(KEY_PRIMITIVES), st.lists(_primitive(KEY_PRIMITIVES), min_size=1, max_size=2))
    struct = st.lists(inner, min_size=1, max_size=3).map(lambda cs: ("struct", cs))
    return st.one_of(
        struct,
        st.tuples(key, struct).map(lambda kv: ("map", kv)),
        st.one_of(struct, inner).map(lambda e: ("array", e)),
        st.tuples(key, inner).map(lambda kv: ("map", kv)),
    )


def _build(shape: Any, ids: Ids) -> Type:
    kind, arg = shape
    if kind == "p":
        return Type(arg)
    if kind == "struct":
        return Type("struct", tuple(ids.field(NAMES[i], _build(c, ids)) for i, c in enumerate(arg)))
    if kind == "array":
        return Type("array", children=(_build(arg, ids),), slot_ids=(ids.take(),))
    key_shape, value_shape = arg
    if isinstance(key_shape, list):  # a struct key of primitives
        key_shape = ("struct", key_shape)
    key = _build(key_shape, ids)
    value = _build(value_shape, ids)
    return Type("map", children=(key, value), slot_ids=(ids.take(), ids.take()))


@st.composite
def schemas(draw: st.DrawFn, max_columns: int = 3, depth: int = 3) -> tuple[Type, Ids]:
    """A top-level struct: ``id`` (long) then 1..``max_columns`` nested columns; and its id allocator."""
    ids = Ids()
    cols = draw(st.lists(_nested(depth), min_size=1, max_size=max_columns))
    fields = [ids.field("id", Type("long"))]
    fields += [ids.field(f"c{i}", _build(c, ids)) for i, c in enumerate(cols)]
    return Type("struct", tuple(fields)), ids


# --------------------------------------------------------------------------- values


def values(t: Type, nullable: bool = True) -> st.SearchStrategy[Any]:
    """Logical values of ``t``: dicts keyed by logical names, lists, lists of (key, value)."""
    if t.kind in PRIMITIVES:
        base: st.SearchStrategy[Any] = {
            "long": st.integers(-(2**63), 2**63 - 1),
            "integer": st.integers(-(2**31), 2**31 - 1),
            "string": st.text(alphabet="aé z", max_size=4),
            "double": st.floats(allow_nan=False, width=64),
            "boolean": st.booleans(),
        }[t.kind]
    elif t.kind == "struct":
        base = st.fixed_dictionaries({f.name: values(f.type) for f in t.fields})
    elif t.kind == "array":
        base = st.lists(values(t.children[0]), max_size=3)
    else:
        key, value = t.children
        base = st.lists(
            st.tuples(values(key, nullable=False), values(value)),
            max_size=3,
            unique_by=lambda kv: canon(kv[0], key),
        )
    return st.one_of(st.none(), base) if nullable else base


def rows(schema: Type, start: int, max_rows: int = 4) -> st.SearchStrategy[list[dict[str, Any]]]:
    """Rows of ``schema`` with ids ``start, start + 1, ...``."""
    body = st.fixed_dictionaries({f.name: values(f.type) for f in schema.fields[1:]})
    return st.lists(body, max_size=max_rows).map(
        lambda rs: [{"id": start + i, **r} for i, r in enumerate(rs)]
    )


def physical_value(v: Any, t: Type, scramble: bool = False) -> Any:
    """A logical value as written to the data file (struct keys renamed to stored names)."""
    if v is None:
        return None
    if t.kind == "struct":
        return {stored_name(f, scramble): physical_value(v[f.name], f.type, scramble) for f in t.fields}
    if t.kind == "array":
        return [physical_value(x, t.children[0], scramble) for x in v]
    if t.kind == "map":
        key, value = t.children
        return [(physical_value(k, key, scramble), physical_value(x, value, scramble)) for k, x in v]
    return v


def stored_name(f: Field, scramble: bool) -> str:
    """A field's name in data files: its physical name, or one only its id links to it."""
    return f"s{f.fid}" if scramble else f.physical


# --------------------------------------------------------------------------- Arrow


def _fid(fid: int) -> dict[bytes, bytes]:
    return {b"PARQUET:field_id": str(fid).encode()}


def physical_arrow(t: Type, scramble: bool = False, slot_ids: bool = True) -> pa.DataType:
    """The stored Arrow type: physical names (or meaningless ones), field ids at every depth."""
    if t.kind in PRIMITIVES:
        return PRIMITIVES[t.kind]
    if t.kind == "struct":
        return pa.struct(
            [
                pa.field(
                    stored_name(f, scramble),
                    physical_arrow(f.type, scramble, slot_ids),
                    metadata=_fid(f.fid),
                )
                for f in t.fields
            ]
        )
    meta = [_fid(i) if slot_ids else None for i in t.slot_ids]
    if t.kind == "array":
        return pa.list_(
            pa.field("element", physical_arrow(t.children[0], scramble, slot_ids), metadata=meta[0])
        )
    key, value = t.children
    return pa.map_(
        pa.field("key", physical_arrow(key, scramble, slot_ids), False, metadata=meta[0]),
        pa.field("value", physical_arrow(value, scramble, slot_ids), metadata=meta[1]),
    )


def physical_table(schema: Type, data: list[dict[str, Any]], scramble: bool, slot_ids: bool) -> pa.Table:
    """The data file's table: one column per top-level field, stored names and ids."""
    columns = []
    fields = []
    for f in schema.fields:
        t = physical_arrow(f.type, scramble, slot_ids)
        fields.append(pa.field(stored_name(f, scramble), t, metadata=_fid(f.fid)))
        columns.append(pa.array([physical_value(r[f.name], f.type, scramble) for r in data], type=t))
    return pa.Table.from_arrays(columns, schema=pa.schema(fields))


# --------------------------------------------------------------------------- Delta schema


def delta_type(t: Type, path: str, nested: dict[str, int]) -> Any:
    """The Delta type JSON of ``t``; list/map slot ids go to ``nested`` keyed under ``path``."""
    if t.kind in PRIMITIVES:
        return t.kind
    if t.kind == "struct":
        return {"type": "struct", "fields": [delta_field(f) for f in t.fields]}
    if t.kind == "array":
        nested[f"{path}.element"] = t.slot_ids[0]
        element = delta_type(t.children[0], f"{path}.element", nested)
        return {"type": "array", "elementType": element, "containsNull": True}
    key, value = t.children
    nested[f"{path}.key"] = t.slot_ids[0]
    nested[f"{path}.value"] = t.slot_ids[1]
    return {
        "type": "map",
        "keyType": delta_type(key, f"{path}.key", nested),
        "valueType": delta_type(value, f"{path}.value", nested),
        "valueContainsNull": True,
    }


def delta_field(f: Field) -> dict[str, Any]:
    """A Delta StructField with its column-mapping metadata (and nested ids, if any)."""
    nested: dict[str, int] = {}
    t = delta_type(f.type, f.physical, nested)
    meta: dict[str, Any] = {"delta.columnMapping.id": f.fid, "delta.columnMapping.physicalName": f.physical}
    if nested:
        meta["delta.columnMapping.nested.ids"] = nested
    return {"name": f.name, "type": t, "nullable": True, "metadata": meta}


def delta_schema_json(schema: Type) -> str:
    """The ``schemaString`` of a top-level struct."""
    return json.dumps({"type": "struct", "fields": [delta_field(f) for f in schema.fields]})


def max_id(t: Type) -> int:
    """The highest field id in ``t``."""
    ids = [*t.slot_ids, *(f.fid for f in t.fields)]
    ids += [max_id(f.type) for f in t.fields] + [max_id(c) for c in t.children]
    return max(ids, default=0)


# --------------------------------------------------------------------------- schema evolution


def _paths(t: Type, prefix: tuple[int, ...] = ()) -> Iterator[tuple[tuple[int, ...], Type]]:
    """(path, node) of every struct below the top level; a path indexes fields then children."""
    for i, f in enumerate(t.fields):
        yield from _paths_of(f.type, (*prefix, i))
    for i, c in enumerate(t.children):
        yield from _paths_of(c, (*prefix, len(t.fields) + i))


def _paths_of(t: Type, path: tuple[int, ...]) -> Iterator[tuple[tuple[int, ...], Type]]:
    if t.kind == "struct":
        yield path, t
    yield from _paths(t, path)


def _replace_at(t: Type, path: tuple[int, ...], new: Type) -> Type:
    if not path:
        return new
    i, rest = path[0], path[1:]
    if i < len(t.fields):
        fields = list(t.fields)
        fields[i] = replace(fields[i], type=_replace_at(fields[i].type, rest, new))
        return replace(t, fields=tuple(fields))
    children = list(t.children)
    j = i - len(t.fields)
    children[j] = _replace_at(children[j], rest, new)
    return replace(t, children=tuple(children))


@dataclass(frozen=True)
class Evolution:
    """What :func:`evolve` did, for test messages."""

    renamed: tuple[str, str] | None = None
    added: str | None = None
    dropped: str | None = None
    #: whether the evolved struct lies inside a map's value
    in_map: bool = False


@st.composite
def evolve(draw: st.DrawFn, schema: Type, ids: Ids) -> tuple[Type, Evolution]:
    """The schema after renaming, adding and/or dropping fields of nested structs.

    Dropping a field and adding one under the same logical name (new id and physical
    name) is among the cases: old files' values of the dropped field must not show.
    A struct used as a map key is left alone (key types cannot change).
    """
    structs = [(p, t) for p, t in _paths(schema) if not _in_map_key(schema, p)]
    if not structs:
        return schema, Evolution()
    path, struct = draw(st.sampled_from(structs))
    fields = list(struct.fields)
    ops = draw(st.sampled_from(["rename", "add", "drop", "rename add", "drop add", "drop rename add"]))
    ev: dict[str, Any] = {"in_map": _in_map(schema, path)}
    if "drop" in ops and len(fields) > 1:
        gone = fields.pop(draw(st.integers(0, len(fields) - 1)))
        ev["dropped"] = gone.name
    if "rename" in ops:
        i = draw(st.integers(0, len(fields) - 1))
        taken = {f.name for f in fields} | {ev.get("dropped")}
        new_name = draw(st.sampled_from([n for n in (*NAMES, "renamed") if n not in taken]))
        ev["renamed"] = (fields[i].name, new_name)
        fields[i] = replace(fields[i], name=new_name)
    if "add" in ops or len(ev) == 1:
        taken = {f.name for f in fields}
        dropped = ev.get("dropped")
        name = dropped if dropped is not None and dropped not in taken else None
        name = name or next(n for n in (*NAMES, "added", "added2") if n not in taken)
        kind = draw(st.sampled_from(tuple(PRIMITIVES)))
        fields.append(ids.field(name, Type(kind)))
        ev["added"] = name
    return _replace_at(schema, path, replace(struct, fields=tuple(fields))), Evolution(**ev)


def _in_map(t: Type, path: tuple[int, ...]) -> bool:
    node = t
    for i in path:
        if i < len(node.fields):
            node = node.fields[i].type
        else:
            if node.kind == "map":
                return True
            node = node.children[i - len(node.fields)]
    return False


def _in_map_key(t: Type, path: tuple[int, ...]) -> bool:
    node = t
    for i in path:
        if i < len(node.fields):
            node = node.fields[i].type
        else:
            j = i - len(node.fields)
            if node.kind == "map" and j == 0:
                return True
            node = node.children[j]
    return False


def project(v: Any, old: Type, new: Type) -> Any:
    """The value stored under ``old`` as a reader of ``new`` must return it (fields by id)."""
    if v is None:
        return None
    if new.kind == "struct":
        by_id = {f.fid: f for f in old.fields}
        out = {}
        for f in new.fields:
            before = by_id.get(f.fid)
            out[f.name] = project(v[before.name], before.type, f.type) if before else None
        return out
    if new.kind == "array":
        return [project(x, old.children[0], new.children[0]) for x in v]
    if new.kind == "map":
        (ok, ov), (nk, nv) = old.children, new.children
        return [(project(k, ok, nk), project(x, ov, nv)) for k, x in v]
    return v


# --------------------------------------------------------------------------- every shape, fixed


def every_shape() -> tuple[Type, Ids]:
    """One schema with each nesting the issue names, and the id allocator it came from."""
    ids = Ids()

    def leaf() -> Type:
        return Type("struct", (ids.field("ab", Type("long")), ids.field("cd", Type("string"))))

    def array(t: Type) -> Type:
        return Type("array", children=(t,), slot_ids=(ids.take(),))

    def map_(k: Type, v: Type) -> Type:
        return Type("map", children=(k, v), slot_ids=(ids.take(), ids.take()))

    key = Type("struct", (ids.field("k1", Type("integer")), ids.field("k2", Type("string"))))
    fields = (
        ids.field("id", Type("long")),
        ids.field("m", map_(Type("integer"), leaf())),  # the map<int, struct<ab: long>>
        ids.field("s", Type("struct", (ids.field("inner", leaf()), ids.field("n", Type("integer"))))),
        ids.field("a", array(leaf())),
        ids.field("mk", map_(key, Type("long"))),
        ids.field("am", array(map_(Type("string"), leaf()))),
        ids.field("mm", map_(Type("integer"), map_(Type("integer"), array(leaf())))),
    )
    return Type("struct", fields), ids


def _leaf(i: int, evolved: bool) -> dict[str, Any]:
    if evolved:
        return {"ab2": 10 * i, "cd": f"v{i}", "added": i / 4}
    return {"ab": 10 * i, "cd": f"v{i}"}


def shape_rows(start: int, n: int, evolved: bool = False) -> list[dict[str, Any]]:
    """Rows of :func:`every_shape` (or :func:`evolved_shape`) with nulls at every depth."""
    out = []
    for i in range(start, start + n):

        def leaf(j: int) -> dict[str, Any]:
            return _leaf(j, evolved)

        out.append(
            {
                "id": i,
                "m": [(2, leaf(i)), (3, None)] if i % 3 else None,
                "s": {"inner": leaf(i) if i % 2 else None, "n": i},
                "a": [leaf(i), None, leaf(i + 1)],
                "mk": [({"k1": i, "k2": "x"}, i), ({"k1": i, "k2": None}, None)],
                "am": [[("p", leaf(i))], None, []],
                "mm": [(1, [(7, [leaf(i)]), (8, None)])] if i % 2 else None,
            }
        )
    return out


def evolved_shape(schema: Type, ids: Ids) -> Type:
    """In every ``{ab, cd}`` struct: ``ab`` renamed to ``ab2``, a field ``added`` appended."""

    def walk(t: Type) -> Type:
        if t.kind == "struct" and [f.name for f in t.fields] == ["ab", "cd"]:
            added = ids.field("added", Type("double"))
            return replace(t, fields=(replace(t.fields[0], name="ab2"), t.fields[1], added))
        fields = tuple(replace(f, type=walk(f.type)) for f in t.fields)
        return replace(t, fields=fields, children=tuple(walk(c) for c in t.children))

    return walk(schema)


# --------------------------------------------------------------------------- comparing


def canon(v: Any, t: Type) -> Any:
    """One hashable form of a value of ``t`` from any reader.

    Structs may be dicts or Spark Rows; maps lists of pairs (pyarrow) or dicts (Spark),
    compared as sets of entries; floats by their exact value (-0.0 is 0.0).
    """
    if v is None:
        return None
    if t.kind == "struct":
        get = v.__getitem__
        return tuple((f.name, canon(get(f.name), f.type)) for f in t.fields)
    if t.kind == "array":
        return tuple(canon(x, t.children[0]) for x in v)
    if t.kind == "map":
        key, value = t.children
        items = v.items() if isinstance(v, Mapping) else v
        return tuple(sorted(((canon(k, key), canon(x, value)) for k, x in items), key=repr))
    if t.kind == "double":
        return float(v) if not math.isnan(v) else "nan"
    return v


def canon_rows(table_rows: list[Any], schema: Type) -> list[Any]:
    """Rows (dicts or Spark Rows) in canonical form, sorted by ``id``."""
    out = [tuple(canon(r[f.name], f.type) for f in schema.fields) for r in table_rows]
    return sorted(out, key=lambda r: r[0])


# --------------------------------------------------------------------------- Delta tables


@dataclass
class DeltaWriter:
    """A Delta table with column mapping, written by hand: pyarrow data files, JSON commits.

    ``mode`` is ``name`` or ``id``; ``iceberg_compat`` writes the ``icebergCompatV2``
    protocol (3/7) with nested ids; in ``id`` mode ``scramble`` stores columns under
    meaningless names, so only field ids link them to the schema (as the protocol
    allows: readers must resolve by id).
    """

    root: Path
    mode: str = "name"
    iceberg_compat: bool = False
    scramble: bool = False
    version: int = -1
    _files: itertools.count[int] = field(default_factory=itertools.count)

    def commit(self, schema: Type | None, data: list[dict[str, Any]], current: Type) -> int:
        """One commit: a new schema (if given) and one data file of ``data`` under ``current``."""
        self.root.mkdir(parents=True, exist_ok=True)
        self.version += 1
        actions: list[dict[str, Any]] = [{"commitInfo": {"timestamp": 1_700_000_000_000 + self.version}}]
        if self.version == 0:
            actions.append({"protocol": self._protocol()})
        if schema is not None:
            actions.append({"metaData": self._metadata(schema)})
        if data:
            name = f"part-{next(self._files):05d}.parquet"
            table = physical_table(current, data, self.scramble, slot_ids=self.iceberg_compat)
            pq.write_table(table, self.root / name)
            stats = json.dumps({"numRecords": len(data)})
            size = (self.root / name).stat().st_size
            add = {"path": name, "partitionValues": {}, "size": size, "modificationTime": 0}
            actions.append({"add": {**add, "dataChange": True, "stats": stats}})
        log = self.root / "_delta_log"
        log.mkdir(parents=True, exist_ok=True)
        text = "\n".join(json.dumps(a) for a in actions) + "\n"
        (log / f"{self.version:020d}.json").write_text(text)
        return self.version

    def _protocol(self) -> dict[str, Any]:
        if not self.iceberg_compat:
            return {"minReaderVersion": 2, "minWriterVersion": 5}
        return {
            "minReaderVersion": 3,
            "minWriterVersion": 7,
            "readerFeatures": ["columnMapping"],
            "writerFeatures": ["columnMapping", "icebergCompatV2"],
        }

    def _metadata(self, schema: Type) -> dict[str, Any]:
        config = {
            "delta.columnMapping.mode": self.mode,
            "delta.columnMapping.maxColumnId": str(max_id(schema)),
        }
        if self.iceberg_compat:
            config["delta.enableIcebergCompatV2"] = "true"
        return {
            "id": "nested-mapping",
            "format": {"provider": "parquet", "options": {}},
            "schemaString": delta_schema_json(schema),
            "partitionColumns": [],
            "configuration": config,
            "createdTime": 1_700_000_000_000,
        }
