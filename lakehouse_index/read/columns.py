"""Where a logical column comes from in one data file, and how its values become logical.

Column resolution (the same rules the Spark reader uses, see :func:`resolve_columns`):

* a column with a field id is found by the Parquet field id (``PARQUET:field_id``)
  when the file carries field ids; a file with field ids but without that id does
  not hold the column (it was added later, or a column of the same name was dropped
  and re-added: matching by name would return the old column's values);
* otherwise by :attr:`Column.stored_name` (Delta column mapping physical name, or
  the logical name);
* a column the file does not hold reads as nulls (schema evolution);
* the same rules hold at every depth (:func:`conversion_of`): fields of structs,
  including structs in list elements and in map keys and values, are found by the
  field ids and stored names of the column's :attr:`~lakehouse_index.source.Column.subfields`,
  never by position; a nested field the file does not hold reads as nulls;
* values are cast to the snapshot's Arrow type (type widening int → long, ...)
  (:func:`convert_column`);
* partition columns (``in_data_files=False``) are constants from
  :attr:`FileEntry.partition_values` (:func:`constant_column`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from lakehouse_index.errors import TableFormatError
from lakehouse_index.read.footers import FIELD_ID_KEY, FileLayout
from lakehouse_index.source import Column, FileEntry, Snapshot, Subfield

__all__ = [
    "Conversion",
    "Resolved",
    "cast_column",
    "constant_column",
    "conversion_of",
    "convert_column",
    "resolve_columns",
]


@dataclass(frozen=True)
class Conversion:
    """How one file's stored values become values of a logical type, at every depth.

    ``stored`` is the file's Arrow type (None: the file does not hold the field, which
    reads as nulls). A struct lists, per logical child in order, the name of the stored
    child it is read from (``sources``, None: absent) and that child's conversion; a list
    converts its element, a map its key and value (``children``); anything else is cast.
    """

    target: pa.DataType
    stored: pa.DataType | None
    sources: tuple[str | None, ...] = ()
    children: tuple[Conversion, ...] = ()

    @property
    def identity(self) -> bool:
        """Whether the stored values already are the logical ones (no renaming, no cast)."""
        if self.stored is None:
            return False
        if pa.types.is_struct(self.target):
            assert isinstance(self.target, pa.StructType) and isinstance(self.stored, pa.StructType)
            names = tuple(f.name for f in self.target)
            stored = tuple(f.name for f in self.stored)
            if self.sources != names or stored != names:
                return False
        elif self.children and type(self.stored) is not type(self.target):
            return False  # list vs large list
        if self.children:
            return all(c.identity for c in self.children)
        return bool(self.stored.equals(self.target))


@dataclass(frozen=True)
class Resolved:
    """Where a logical column comes from in one data file.

    Exactly one of: ``stored`` (name of the top-level Parquet column, whose Arrow type
    is ``stored_type`` and whose values become the column's through ``conversion``),
    ``constant`` (a partition column), or neither (absent: nulls).
    """

    column: Column
    stored: str | None = None
    stored_type: pa.DataType | None = None
    is_constant: bool = False
    constant: object = None
    conversion: Conversion | None = None


def resolve_columns(
    snapshot: Snapshot, entry: FileEntry, layout: FileLayout, columns: Sequence[str]
) -> list[Resolved]:
    """Resolve logical ``columns`` in one file (rules in the module docstring)."""
    partition = entry.partition_dict
    out = []
    for name in columns:
        col = snapshot.column(name)
        if not col.in_data_files:
            if name not in partition:
                raise TableFormatError(f"partition column {name!r} has no value for data file {entry.path}")
            out.append(Resolved(col, is_constant=True, constant=partition[name]))
            continue
        stored: str | None
        if col.field_id is not None and layout.by_field_id:
            stored = layout.by_field_id.get(col.field_id)
        else:
            stored = next((n for n in col.file_names or (col.stored_name,) if n in layout.names), None)
        if stored is None:
            out.append(Resolved(col))
        else:
            field = layout.schema.field(stored)
            conversion = conversion_of(col.type, col.fields, field.type, f"column {name!r} of {entry.path}")
            out.append(Resolved(col, stored=stored, stored_type=field.type, conversion=conversion))
    return out


def conversion_of(
    target: pa.DataType, fields: Sequence[Subfield], stored: pa.DataType, where: str
) -> Conversion:
    """How values stored as ``stored`` are read as ``target``, whose subfields are ``fields``.

    A struct's children are found in the stored struct by field id when the logical child
    has one and the stored children carry field ids (a child whose id is not among them is
    absent, even if a child of the same name is there), else by stored name; absent
    children read as nulls. Lists, maps and their nested fields follow the same rule at
    every depth; a stored value of another shape is a TableFormatError naming ``where``.
    """
    if pa.types.is_struct(target):
        assert isinstance(target, pa.StructType)
        if not pa.types.is_struct(stored):
            raise TableFormatError(f"{where} is stored as {stored}, not as a struct")
        assert isinstance(stored, pa.StructType)
        by_id = {i: f for f in stored if (i := _field_id(f)) is not None}
        by_name = {f.name: f for f in stored}
        sources: list[str | None] = []
        children = []
        for logical, sub in zip(target, fields, strict=True):
            if sub.field_id is not None and by_id:
                found = by_id.get(sub.field_id)
            else:
                found = next((by_name[n] for n in sub.file_names or (sub.stored_name,) if n in by_name), None)
            inner = f"{where}, field {logical.name!r}"
            sources.append(found.name if found is not None else None)
            children.append(
                conversion_of(logical.type, sub.children, found.type, inner)
                if found is not None
                else Conversion(logical.type, None)
            )
        return Conversion(target, stored, tuple(sources), tuple(children))
    if _is_list(target):
        if not _is_list(stored):
            raise TableFormatError(f"{where} is stored as {stored}, not as a list")
        element = conversion_of(target.value_type, fields[0].children, stored.value_type, f"{where} element")
        return Conversion(target, stored, children=(element,))
    if pa.types.is_map(target):
        assert isinstance(target, pa.MapType)
        if not pa.types.is_map(stored):
            raise TableFormatError(f"{where} is stored as {stored}, not as a map")
        assert isinstance(stored, pa.MapType)
        key = conversion_of(target.key_type, fields[0].children, stored.key_type, f"{where} key")
        value = conversion_of(target.item_type, fields[1].children, stored.item_type, f"{where} value")
        return Conversion(target, stored, children=(key, value))
    if pa.types.is_nested(stored):
        raise TableFormatError(f"{where} is stored as {stored}, not as {target}")
    return Conversion(target, stored)


def _field_id(field: pa.Field) -> int | None:
    raw = (field.metadata or {}).get(FIELD_ID_KEY)
    return int(raw) if raw is not None else None


def _is_list(t: pa.DataType) -> bool:
    return pa.types.is_list(t) or pa.types.is_large_list(t)


# --------------------------------------------------------------------------- converting the values


def constant_column(value: object, t: pa.DataType, n: int, path: str, name: str) -> pa.Array:
    """``n`` rows of the partition value ``value`` as type ``t`` (of column ``name`` of ``path``)."""
    if value is None:
        return pa.nulls(n, t)
    try:
        one = pa.array([value], type=t)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as e:
        raise TableFormatError(f"partition value {value!r} of {name!r} in {path} is not a {t}: {e}") from e
    return one.take(pa.array(np.zeros(n, dtype=np.int32)))


def cast_column(arr: pa.ChunkedArray, t: pa.DataType, path: str, name: str) -> pa.ChunkedArray | pa.Array:
    """A stored primitive column as type ``t``."""
    return convert_column(arr, conversion_of(t, (), arr.type, f"column {name!r} of {path}"), path, name)


def convert_column(
    arr: pa.ChunkedArray, conversion: Conversion, path: str, name: str
) -> pa.ChunkedArray | pa.Array:
    """A stored column (``name`` of ``path``) as its logical type, by ``conversion``."""
    if conversion.identity and arr.type.equals(conversion.target):
        return arr
    try:
        return _conform(arr.combine_chunks(), conversion)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, ValueError) as e:
        raise TableFormatError(
            f"column {name!r} of {path} is stored as {arr.type}, which does not convert to "
            f"{conversion.target}: {e}"
        ) from e


def _conform(arr: pa.Array, conversion: Conversion) -> pa.Array:
    """``arr`` (of the stored type) as the logical type, by ``conversion`` at every depth.

    Structs, lists and maps are rebuilt around their converted children (zero-copy where
    nothing changes below), keeping the parent's validity; absent struct children are
    nulls; primitives are cast safely.
    """
    t = conversion.target
    if conversion.stored is None:
        return pa.nulls(len(arr), t)
    if conversion.identity and arr.type.equals(t):
        return arr
    if pa.types.is_struct(t):
        assert isinstance(arr, pa.StructArray)
        children = [
            _conform(arr.field(source), c) if source is not None else pa.nulls(len(arr), c.target)
            for source, c in zip(conversion.sources, conversion.children, strict=True)
        ]
        return pa.StructArray.from_arrays(children, fields=list(t), mask=arr.is_null())
    if _is_list(t) or pa.types.is_map(t):
        if arr.offset:  # from_arrays refuses sliced offsets with a null mask: copy
            arr = pa.concat_arrays([arr])
        mask = arr.is_null()
        if pa.types.is_map(t):
            assert isinstance(arr, pa.MapArray)
            key, value = conversion.children
            keys, items = _conform(arr.keys, key), _conform(arr.items, value)
            return pa.MapArray.from_arrays(arr.offsets, keys, items, type=t, mask=mask)
        assert isinstance(arr, (pa.ListArray, pa.LargeListArray))
        values = _conform(arr.values, conversion.children[0])
        if pa.types.is_large_list(t):
            return pa.LargeListArray.from_arrays(arr.offsets.cast(pa.int64()), values, type=t, mask=mask)
        return pa.ListArray.from_arrays(arr.offsets.cast(pa.int32()), values, type=t, mask=mask)
    return arr.cast(t, safe=True)
