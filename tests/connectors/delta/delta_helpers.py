"""Helpers for the Delta connector tests (deltalake is the independent oracle).

A uniquely named module rather than conftest.py, so test modules can import it without
clashing with other test folders' conftest modules."""

from __future__ import annotations

import collections
import os
from collections.abc import Sequence
from typing import Any

import deltalake
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from lakehouse_index_delta import DeltaSource

from lakehouse_index.io import Storage
from lakehouse_index.source import Column, FileEntry, Snapshot
from tests.support.paths import PEER_TABLES  # noqa: F401  (re-exported for the test modules)


class RecordingIO:
    """Real local storage that records which files were read."""

    def __init__(self, uri: str) -> None:
        self.inner = Storage.for_uri(uri)
        self.reads: list[str] = []

    def read_bytes(self, path: str) -> bytes:
        self.reads.append(path)
        return self.inner.read_bytes(path)

    def read_many(self, paths: Sequence[str]) -> list[bytes | None]:
        self.reads.extend(paths)
        return self.inner.read_many(paths)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def open_source(path: str | os.PathLike[str]) -> DeltaSource:
    """A fresh (cold) connector on a local table."""
    p = str(path)
    return DeltaSource.open(p, Storage.for_uri(p))


def canonical(uri: str) -> str:
    """deltalake's file URI (a local path, decoded once) in the connector's canonical form."""
    if uri.startswith("/"):
        return "file://" + uri
    if uri.startswith("file:///"):
        return uri
    if uri.startswith("file:/"):
        return "file://" + uri[len("file:") :]
    return uri


def oracle_files(path: str | os.PathLike[str], version: int) -> set[str]:
    """deltalake's live data files at ``version``."""
    dt = deltalake.DeltaTable(str(path), version=version)
    return {canonical(u) for u in dt.file_uris()}


# --------------------------------------------------------------------------- reading rows
# The connector does not read data files (the core does); these helpers read them the way
# the contract tells a reader to, so that the connector's metadata can be checked row by row.


def local_path(uri: str) -> str:
    """The local path of a canonical ``file://`` URI (already decoded: do not unquote again)."""
    assert uri.startswith("file://"), uri
    return uri[len("file://") :]


def conform(arr: pa.Array | pa.ChunkedArray, typ: pa.DataType) -> pa.Array:
    """``arr`` (physical names, maybe narrower types) as the logical type ``typ``.

    Struct children are matched by position: column mapping renames nested fields but
    keeps their order. When the child names already match (in any order), they are
    matched by name.
    """
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if pa.types.is_struct(typ) and pa.types.is_struct(arr.type):
        names = [arr.type.field(i).name for i in range(arr.type.num_fields)]
        by_name = sorted(names) == sorted(f.name for f in typ)
        children = []
        for i in range(typ.num_fields):
            child = arr.field(typ.field(i).name) if by_name else arr.field(i)
            children.append(conform(child, typ.field(i).type))
        return pa.StructArray.from_arrays(children, fields=list(typ), mask=arr.is_null())
    if pa.types.is_list(typ) and (pa.types.is_list(arr.type) or pa.types.is_large_list(arr.type)):
        values = conform(arr.values, typ.value_type)
        return pa.ListArray.from_arrays(arr.offsets, values, type=typ, mask=arr.is_null())
    return arr.cast(typ)


def _field_index(schema: pa.Schema, col: Column) -> int | None:
    if col.field_id is not None:
        for i, f in enumerate(schema):
            if f.metadata and f.metadata.get(b"PARQUET:field_id") == str(col.field_id).encode():
                return i
    i = schema.get_field_index(col.stored_name)
    return i if i >= 0 else None


def read_file_rows(src: Any, snap: Snapshot, entry: FileEntry) -> pa.Table:
    """Live rows of one data file: logical names, partition values, deletion vector applied."""
    table = pq.read_table(local_path(entry.path), coerce_int96_timestamp_unit="us")
    n = table.num_rows
    parts = entry.partition_dict
    arrays = []
    for col in snap.columns:
        if not col.in_data_files:
            arrays.append(pa.array([parts.get(col.name)] * n, col.type))
            continue
        i = _field_index(table.schema, col)
        if i is None:  # column added after this file was written
            arrays.append(pa.nulls(n, col.type))
        else:
            arrays.append(conform(table.column(i), col.type))
    out = pa.table(arrays, schema=snap.schema)
    deleted = src.deleted_positions(entry)
    if len(deleted):
        keep = np.ones(n, dtype=bool)
        keep[np.fromiter(deleted, dtype=np.int64)] = False
        out = out.filter(pa.array(keep))
    return out


def read_snapshot_rows(src: Any, snap: Snapshot) -> pa.Table:
    """Every live row of a snapshot."""
    parts = [read_file_rows(src, snap, f) for f in snap.files.values()]
    if not parts:
        return snap.schema.empty_table()
    return pa.concat_tables(parts)


def oracle_rows(path: str | os.PathLike[str], version: int) -> pa.Table:
    """deltalake's rows at ``version`` through ``scan()`` (applies DVs and column mapping)."""
    dt = deltalake.DeltaTable(str(path), version=version)
    return pa.RecordBatchReader.from_stream(dt.scan()).read_all()


def multiset(table: pa.Table, schema: pa.Schema) -> collections.Counter[str]:
    """Rows as a multiset of canonical strings, after casting to ``schema``."""
    cols = []
    for f in schema:
        arr = table.column(f.name).combine_chunks()
        cols.append(conform(arr, f.type).to_pylist())
    return collections.Counter(repr(row) for row in zip(*cols, strict=True))
