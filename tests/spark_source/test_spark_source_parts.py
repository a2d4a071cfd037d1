"""A planned partition carries everything its task needs: reading it opens no table.

Proof without Spark (the classes are plain Python): plan a read, pickle the parts and the
read's shape as Spark does, then take the table's log (or catalog metadata) away and read
each part. The rows must equal the format's own reader at that version: deletion vectors
(delta-rs's peer table) and Iceberg equality deletes are applied from what the part carries.
"""

from __future__ import annotations

import pickle
import shutil
from collections import Counter
from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable
from source_support import COLS, batch

import lakehouse_index as li
from lakehouse_index.expressions import Predicate
from lakehouse_index.spark_source.options import SourceOptions, parse_options
from lakehouse_index.spark_source.planning import (
    FilePart,
    plan_source_read,
    read_part,
    read_shape,
    resolve_version,
)

PEER_DV = Path(__file__).resolve().parents[1] / "data/peer-tables/delta-rs/cdf-table-with-cdc-and-dvs"


def carried_read(
    opts: SourceOptions, where: str | None, columns: list[str], hide: Path
) -> tuple[list[FilePart], Counter[tuple[object, ...]]]:
    """Plan through the source's own functions, pickle the parts and the shape as Spark does,
    then read every part while ``hide`` (the table's log or metadata) is moved away."""
    version = resolve_version(opts)
    shape = read_shape(opts, version)
    predicate = Predicate.parse(where, shape.snapshot.schema) if where else None
    planned = plan_source_read(opts, version, predicate, columns).parts
    parts, carried = pickle.loads(pickle.dumps((planned, shape)))
    assert all(isinstance(p, FilePart) for p in parts)
    aside = hide.with_name(hide.name + "-hidden")
    hide.rename(aside)
    try:
        got = pa.concat_tables([read_part(carried, predicate, columns, p) for p in parts])
    finally:
        aside.rename(hide)
    return list(parts), Counter(tuple(r[c] for c in columns) for r in got.to_pylist())


def test_deletion_vectors_travel_with_the_part(tmp_path: Path) -> None:
    path = str(tmp_path / "dv")
    shutil.copytree(PEER_DV, path)
    li.open_table(path).create_index(li.SecondaryIndex("by_id", key="id"))
    latest = DeltaTable(path).version()
    for version in (latest // 2, latest):
        live = pa.RecordBatchReader.from_stream(DeltaTable(path, version=version).scan()).read_all()
        want = Counter(zip(live["id"].to_pylist(), live["comment"].to_pylist(), strict=True))
        opts = parse_options({"path": path, "versionAsOf": str(version)})
        parts, got = carried_read(opts, None, ["id", "comment"], Path(path) / "_delta_log")
        assert any(p.deleted is not None and len(p.deleted) for p in parts)  # DVs are carried
        assert got == want


def test_equality_deletes_travel_with_the_part(tmp_path: Path) -> None:
    from tests.api.iceberg_index_support import commit_equality_delete, sql_catalog

    catalog = sql_catalog(str(tmp_path))
    ice = catalog.create_table("db.eq", schema=batch(0, 1).schema)
    for i in range(3):
        ice.append(batch(i * 30, 30))
    li.open_table("db.eq", catalog=catalog).create_index(li.SecondaryIndex("by_k", key="k", record_key="id"))
    before = catalog.load_table("db.eq").scan().to_arrow()
    deleted = ("v37", "v38", "v61")
    commit_equality_delete(catalog.load_table("db.eq"), "v", list(deleted), pa.string())
    location = catalog.load_table("db.eq").metadata.location
    live = [r for r in before.to_pylist() if r["v"] not in deleted]
    checks = {"k = 'k12'": lambda r: r["k"] == "k12", "g = 3": lambda r: r["g"] == 3, None: lambda r: True}
    for where, holds in checks.items():
        opts = parse_options({"path": location})
        parts, got = carried_read(opts, where, COLS, Path(location.removeprefix("file://")) / "metadata")
        assert any(p.equality_rows for p in parts)  # the delete rows are carried
        assert got == Counter(tuple(r[c] for c in COLS) for r in live if holds(r))
