"""Test double of the connector contract for the core reader tests.

:class:`MemSource` is a double of the connector *contract* (not of the code under test):
the tests write real Parquet files with pyarrow and describe them as a Snapshot by hand,
with row-level deletes held in memory as BitMap64 and equality deletes as Arrow tables.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import pyarrow as pa
from pyroaring import BitMap64

from lakehouse_index.io import Storage
from lakehouse_index.source import (
    Change,
    Column,
    EqualityDeletes,
    FileEntry,
    FileIO,
    Snapshot,
    TableSource,
    VersionInfo,
)


@dataclass
class MemSource(TableSource):
    """A one-version table over hand-written Parquet files."""

    root: str
    snap: Snapshot
    position_deletes: dict[str, BitMap64] = field(default_factory=dict)
    equality_tables: dict[str, pa.Table] = field(default_factory=dict)
    format_name: ClassVar[str] = "memory"

    @classmethod
    def detect(cls, uri: str, io: FileIO, **options: Any) -> bool:
        return False

    @classmethod
    def open(cls, uri: str, io: FileIO, **options: Any) -> TableSource:
        raise NotImplementedError

    @property
    def uri(self) -> str:
        return self.root

    def latest_version(self) -> int:
        return self.snap.version

    def versions(self) -> list[VersionInfo]:
        return [self.version_info(self.snap.version)]

    def version_info(self, version: int) -> VersionInfo:
        return VersionInfo(self.snap.version, self.snap.ordinal, self.snap.timestamp_ms)

    def version_at(self, timestamp_ms: int) -> int:
        return self.snap.version

    def snapshot(self, version: int | None = None) -> Snapshot:
        return self.snap

    def changes(self, after: int | None, upto: int | None = None) -> Iterator[Change]:
        return iter(())

    def deleted_positions(self, entry: FileEntry) -> BitMap64:
        if entry.deletes is None:
            return BitMap64()
        return self.position_deletes[entry.deletes.id]

    def equality_delete_rows(self, deletes: EqualityDeletes, columns: Sequence[Column]) -> pa.Table:
        table = self.equality_tables[deletes.path]
        return table.select([c.name for c in columns])

    @property
    def io(self) -> FileIO:
        return Storage.for_uri(self.root)


# --------------------------------------------------------------------------- generated tables


LOGICAL = pa.schema([("id", pa.int64()), ("k", pa.int64()), ("s", pa.string()), ("x", pa.float64())])


@dataclass
class FileSpec:
    """One data file: its rows (k, s, x), partition value, layout and deleted positions."""

    rows: list[tuple[int | None, str | None, float | None]]
    part: str | None = None
    old: bool = False  # written before column x existed
    row_group_size: int = 1000
    deleted: set[int] = field(default_factory=set)
    equality: bool = False  # the equality delete applies to this file
    name: str = ""


@dataclass
class CaseSpec:
    """A generated one-version table."""

    mode: str  # "name": physical names, no field ids; "id": field ids, renamed stored columns
    partitioned: bool
    files: list[FileSpec]
    equality_keys: list[int | None] = field(default_factory=list)


def snapshot_columns(spec: CaseSpec) -> tuple[Column, ...]:
    """The logical columns of a case, as a connector would describe them."""
    if spec.mode == "name":
        cols = [
            Column("id", pa.int64(), physical_name="col-id"),
            Column("k", pa.int64()),
            Column("s", pa.string(), physical_name="col-s"),
            Column("x", pa.float64()),
        ]
    else:
        cols = [
            Column("id", pa.int64(), field_id=1),
            Column("k", pa.int64(), field_id=2),
            Column("s", pa.string(), field_id=3),
            Column("x", pa.float64(), field_id=4),
        ]
    if spec.partitioned:
        cols.append(Column("p", pa.string(), in_data_files=False))
    return tuple(cols)


def _fid(n: int) -> dict[bytes, bytes]:
    return {b"PARQUET:field_id": str(n).encode()}


def _physical_table(spec: CaseSpec, f: FileSpec, ids: list[int]) -> pa.Table:
    ks = pa.array([r[0] for r in f.rows], pa.int32())  # stored narrower: type widening on read
    ss = pa.array([r[1] for r in f.rows], pa.string())
    xs = pa.array([r[2] for r in f.rows], pa.float64())
    idv = pa.array(ids, pa.int64())
    if spec.mode == "name":
        arrays = [idv, ks, ss]
        fields = [pa.field("col-id", pa.int64()), pa.field("k", pa.int32()), pa.field("col-s", pa.string())]
        if not f.old:
            arrays.append(xs)
            fields.append(pa.field("x", pa.float64()))
        return pa.Table.from_arrays(arrays, schema=pa.schema(fields))
    # Field-id files store the columns under other names (renamed later in the table),
    # and old files hold a column named "x" with another field id (dropped, then re-added).
    arrays = [ks, idv, ss]
    fields = [
        pa.field("k_before", pa.int32(), metadata=_fid(2)),
        pa.field("ident", pa.int64(), metadata=_fid(1)),
        pa.field("s_old", pa.string(), metadata=_fid(3)),
    ]
    if f.old:
        arrays.append(pa.array([999.0] * len(f.rows), pa.float64()))
        fields.append(pa.field("x", pa.float64(), metadata=_fid(99)))
    else:
        arrays.append(xs)
        fields.append(pa.field("x_new", pa.float64(), metadata=_fid(4)))
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


def build_case(root: str, spec: CaseSpec) -> tuple[MemSource, pa.Table]:
    """Write the case's files under ``root``; the source and the expected logical rows.

    The expected table holds every row of every file with ``_file_path``, ``_row`` and
    ``_deleted`` (by position or equality delete), computed from the spec alone.
    """
    import os

    import pyarrow.parquet as pq

    from lakehouse_index.source import RowDeletes

    columns = snapshot_columns(spec)
    files: dict[str, FileEntry] = {}
    position_deletes: dict[str, BitMap64] = {}
    eq = EqualityDeletes("memory://eq-deletes/0", ("k",), len(spec.equality_keys))
    eq_table = pa.table({"k": pa.array(spec.equality_keys, pa.int64())})
    expected: dict[str, list[Any]] = {n: [] for n in [*LOGICAL.names, "p", "_file_path", "_row", "_deleted"]}
    next_id = 0
    for i, f in enumerate(spec.files):
        sub = os.path.join(root, f"p={f.part}") if spec.partitioned else root
        os.makedirs(sub, exist_ok=True)
        local = os.path.join(sub, f.name or f"part-{i:03d}.parquet")
        ids = list(range(next_id, next_id + len(f.rows)))
        next_id += len(f.rows)
        pq.write_table(_physical_table(spec, f, ids), local, row_group_size=max(1, f.row_group_size))
        uri = "file://" + local
        deletes = None
        if f.deleted:
            deletes = RowDeletes(id=f"dv-{i}", cardinality=len(f.deleted))
            position_deletes[deletes.id] = BitMap64(f.deleted)
        entry = FileEntry(
            path=uri,
            size=os.path.getsize(local),
            num_records=len(f.rows),
            partition_values=(("p", f.part),) if spec.partitioned else (),
            deletes=deletes,
            equality_deletes=(eq,) if f.equality and spec.equality_keys else (),
        )
        files[uri] = entry
        for pos, (k, s, x) in enumerate(f.rows):
            eq_hit = bool(entry.equality_deletes) and k in spec.equality_keys  # None matches None
            expected["id"].append(ids[pos])
            expected["k"].append(k)
            expected["s"].append(s)
            expected["x"].append(None if f.old else x)
            expected["p"].append(f.part)
            expected["_file_path"].append(uri)
            expected["_row"].append(pos)
            expected["_deleted"].append(pos in f.deleted or eq_hit)
    snap = Snapshot(
        version=0,
        ordinal=0,
        timestamp_ms=0,
        columns=columns,
        files=files,
        partition_columns=("p",) if spec.partitioned else (),
    )
    source = MemSource("file://" + root, snap, position_deletes, {eq.path: eq_table})
    lineage = [("_file_path", pa.string()), ("_row", pa.int64()), ("_deleted", pa.bool_())]
    schema = pa.schema([*snap.schema, *lineage])
    if not spec.partitioned:
        del expected["p"]
    return source, pa.table(expected, schema=schema)


def rows_of(table: pa.Table, columns: Sequence[str] | None = None) -> list[tuple[Any, ...]]:
    """Rows as sorted tuples (a multiset), for order-insensitive comparison."""
    cols = list(columns) if columns is not None else table.column_names
    data = [table.column(c).to_pylist() for c in cols]
    return sorted(zip(*data, strict=True), key=repr) if data else []


# --------------------------------------------------------------------------- strategies

from hypothesis import strategies as st  # noqa: E402

K_VALUES = st.one_of(st.none(), st.integers(-3, 3))
S_VALUES = st.one_of(st.none(), st.sampled_from(["a", "b", "ab", "ü", "x'y", ""]))
X_VALUES = st.one_of(st.none(), st.sampled_from([0.0, 0.5, -1.25, 2.0]))
PARTS = ["a", "b", "c d"]


@st.composite
def file_specs(draw: st.DrawFn, part: str | None) -> FileSpec:
    n = draw(st.integers(0, 25))
    rows = [(draw(K_VALUES), draw(S_VALUES), draw(X_VALUES)) for _ in range(n)]
    deleted = set(draw(st.lists(st.integers(0, n - 1), max_size=n))) if n else set()
    return FileSpec(
        rows=rows,
        part=part,
        old=draw(st.booleans()),
        row_group_size=draw(st.sampled_from([1, 3, 7, 1000])),
        deleted=deleted,
        equality=draw(st.booleans()),
    )


@st.composite
def case_specs(draw: st.DrawFn, max_files: int = 4) -> CaseSpec:
    partitioned = draw(st.booleans())
    n_files = draw(st.integers(0, max_files))
    files = [draw(file_specs(draw(st.sampled_from(PARTS)) if partitioned else None)) for _ in range(n_files)]
    return CaseSpec(
        mode=draw(st.sampled_from(["name", "id"])),
        partitioned=partitioned,
        files=files,
        equality_keys=draw(st.lists(K_VALUES, max_size=3, unique=True)),
    )


def _sql_str(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"  # portable between DuckDB and Spark


@st.composite
def atoms(draw: st.DrawFn, partitioned: bool) -> str:
    kinds = ["k_cmp", "k_in", "k_between", "s_cmp", "s_null", "x_cmp", "s_like", "id_cmp", "k_null"]
    if partitioned:
        kinds += ["p_cmp", "p_in"]
    kind = draw(st.sampled_from(kinds))
    op = draw(st.sampled_from(["=", "!=", "<>", "<", "<=", ">", ">="]))
    not_ = draw(st.sampled_from(["", "NOT "]))
    if kind == "k_cmp":
        return f"k {op} {draw(st.integers(-3, 3))}"
    if kind == "k_in":
        vals = draw(st.lists(st.integers(-3, 3), min_size=1, max_size=3))
        return f"k {not_}IN ({', '.join(map(str, vals))})"
    if kind == "k_between":
        return f"k {not_}BETWEEN {draw(st.integers(-3, 3))} AND {draw(st.integers(-3, 3))}"
    if kind == "s_cmp":
        return f"s {op} {_sql_str(draw(st.sampled_from(['a', 'b', 'ab', 'ü', ''])))}"
    if kind == "s_null":
        return f"s IS {not_}NULL"
    if kind == "k_null":
        return f"k IS {not_}NULL"
    if kind == "x_cmp":
        return f"x {op} {draw(st.sampled_from(['0.5', '0', '-1.25', '1e0']))}"
    if kind == "s_like":
        return f"s {not_}LIKE {_sql_str(draw(st.sampled_from(['a%', '%b', '_', '%'])))}"
    if kind == "id_cmp":
        return f"id {op} {draw(st.integers(0, 60))}"
    if kind == "p_cmp":
        return f"p {op} {_sql_str(draw(st.sampled_from(PARTS)))}"
    vals = draw(st.lists(st.sampled_from(PARTS), min_size=1, max_size=2))
    return f"p {not_}IN ({', '.join(map(_sql_str, vals))})"


@st.composite
def where_clauses(draw: st.DrawFn, partitioned: bool, depth: int = 2) -> str:
    if depth == 0 or draw(st.booleans()):
        return draw(atoms(partitioned))
    op = draw(st.sampled_from(["AND", "OR", "NOT"]))
    a = draw(where_clauses(partitioned, depth - 1))
    if op == "NOT":
        return f"NOT ({a})"
    b = draw(where_clauses(partitioned, depth - 1))
    return f"({a}) {op} ({b})"


def duckdb_filter(table: pa.Table, where: str | None) -> pa.Table:
    """The independent oracle for SQL predicates: DuckDB evaluating ``where`` on ``table``."""
    import duckdb

    con = duckdb.connect()
    con.register("t", table)
    sql = "SELECT * FROM t" + (f" WHERE {where}" if where else "")
    out = con.sql(sql).to_arrow_table()
    con.close()
    return out
