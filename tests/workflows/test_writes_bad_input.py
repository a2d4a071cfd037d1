"""Bad input: a clear error, and the table version and index logs unchanged."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

import lakehouse_index as li
from lakehouse_index.errors import (
    DuplicateKeyError,
    QueryError,
    ReadOnlyTableError,
    SchemaMismatchError,
    UnsupportedWriterFeatureError,
    WriteRefusedError,
)
from tests.workflows.helpers import create_indexes, index_state, rows

FIRST = [(1, "a", 0, 1, "x"), (2, "b", 1, 2, "y")]


@pytest.fixture
def table(tmp_path: Path) -> li.Table:
    path = str(tmp_path / "t")
    write_deltalake(path, rows(FIRST), partition_by=["p"])
    t = li.open_table(path)
    create_indexes(t)
    return t


def _unchanged(t: li.Table, call: Any, error: type[Exception], match: str) -> None:
    version, state = t.latest_version(), index_state(t)
    with pytest.raises(error, match=match):
        call()
    assert t.latest_version() == version
    assert index_state(t) == state


def test_schema_mismatch(table: li.Table) -> None:
    extra = rows([(3, "c", 0, 1, "x")]).append_column("zzz", pa.array([1]))
    _unchanged(table, lambda: table.append(extra), SchemaMismatchError, "columns not in the table.*zzz")
    missing = rows([(3, "c", 0, 1, "x")]).drop_columns(["v"])
    _unchanged(table, lambda: table.append(missing), SchemaMismatchError, r"missing columns \['v'\]")
    wrong = rows([(3, "c", 0, 1, "x")]).set_column(1, "k", pa.array([7]))
    _unchanged(table, lambda: table.upsert(wrong, on=["id"]), SchemaMismatchError, "column 'k' is int64")
    _unchanged(table, lambda: table.overwrite(wrong), SchemaMismatchError, "column 'k'")


def test_where_naming_a_missing_column(table: li.Table) -> None:
    _unchanged(table, lambda: table.delete("nope = 1"), QueryError, "nope")
    _unchanged(table, lambda: table.update("nope = 1", set={"v": 3}), QueryError, "nope")
    _unchanged(table, lambda: table.update("k = 'a'", set={"nope": 3}), WriteRefusedError, "nope")
    _unchanged(table, lambda: table.overwrite(rows(FIRST), where="nope = 'x'"), QueryError, "nope")


def test_upsert_keys_not_unique(table: li.Table) -> None:
    dup = rows([(5, "a", 0, 1, "x"), (5, "b", 0, 2, "y")])
    _unchanged(table, lambda: table.upsert(dup, on=["id"]), DuplicateKeyError, "not unique")
    null_key = rows([(5, "a", 0, 1, "x")]).set_column(0, "id", pa.array([None], pa.int64()))
    _unchanged(table, lambda: table.upsert(null_key, on=["id"]), DuplicateKeyError, "null")
    _unchanged(table, lambda: table.upsert(rows(FIRST), on=["nope"]), WriteRefusedError, "nope")


def test_read_only_table_with_separate_index_root(tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    write_deltalake(path, rows(FIRST), partition_by=["p"])
    t = li.open_table(path, index_root=str(tmp_path / "elsewhere"))
    create_indexes(t)
    _unchanged(t, lambda: t.append(rows(FIRST)), ReadOnlyTableError, "read-only")
    _unchanged(t, lambda: t.delete("k = 'a'"), ReadOnlyTableError, "read-only")
    # watch (and sync) still maintain the indexes of a read-only table
    write_deltalake(path, rows([(9, "c", 2, 9, "x")]), mode="append")
    events = li.watch([t], once=True, handle_signals=False)
    assert {e.report.name for e in events if e.report} == {"by_k", "by_kk", "cov"}
    assert {i.name: i.indexed_version for i in t.indexes()}["by_k"] == 1


def _declare(path: str, protocol: dict[str, Any], metadata: dict[str, Any] | None = None) -> None:
    """Commit a protocol (and optionally metaData) action by hand as the next version."""
    version = DeltaTable(path).version() + 1
    lines = [{"protocol": protocol}]
    if metadata is not None:
        lines.append({"metaData": metadata})
    log = Path(path) / "_delta_log" / f"{version:020d}.json"
    log.write_text("\n".join(json.dumps(x) for x in lines) + "\n")


def _metadata(path: str) -> dict[str, Any]:
    for line in (Path(path) / "_delta_log" / f"{0:020d}.json").read_text().splitlines():
        action = json.loads(line)
        if "metaData" in action:
            return dict(action["metaData"])
    raise AssertionError("no metaData")


@pytest.mark.parametrize(
    "feature", ["deletionVectors", "rowTracking", "inCommitTimestamp", "domainMetadata", "someFutureFeature"]
)
def test_unsupported_writer_feature_is_named(tmp_path: Path, feature: str) -> None:
    path = str(tmp_path / "t")
    write_deltalake(path, rows(FIRST), partition_by=["p"])
    protocol: dict[str, Any] = {"minReaderVersion": 1, "minWriterVersion": 7}
    if feature == "deletionVectors":  # a reader-writer feature
        protocol = {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": [feature]}
    _declare(path, {**protocol, "writerFeatures": [feature, "appendOnly"]})
    t = li.open_table(path)
    t.create_index(li.SecondaryIndex("by_k", key="k"))
    _unchanged(t, lambda: t.append(rows(FIRST)), UnsupportedWriterFeatureError, feature)


@pytest.mark.parametrize(
    ("feature", "field_meta", "config"),
    [
        ("invariants", {"delta.invariants": '{"expression": {"expression": "v > 0"}}'}, {}),
        ("checkConstraints", {}, {"delta.constraints.positive": "v > 0"}),
        ("generatedColumns", {"delta.generationExpression": "id * 2"}, {}),
        ("identityColumns", {"delta.identity.start": 1, "delta.identity.step": 1}, {}),
        ("columnMapping", {}, {"delta.columnMapping.mode": "name"}),
    ],
)
def test_writer_feature_in_use_is_refused(
    tmp_path: Path, feature: str, field_meta: dict[str, Any], config: dict[str, str]
) -> None:
    path = str(tmp_path / "t")
    write_deltalake(path, rows(FIRST), partition_by=["p"])
    meta = _metadata(path)
    schema = json.loads(meta["schemaString"])
    for f in schema["fields"]:
        if f["name"] == "v":
            f["metadata"] = {**f.get("metadata", {}), **field_meta}
    if feature == "columnMapping":  # physical names of existing files are the logical ones
        for i, f in enumerate(schema["fields"]):
            f["metadata"] = {"delta.columnMapping.id": i + 1, "delta.columnMapping.physicalName": f["name"]}
        config = {**config, "delta.columnMapping.maxColumnId": str(len(schema["fields"]))}
    meta["schemaString"] = json.dumps(schema)
    meta["configuration"] = {**meta.get("configuration", {}), **config}
    features = ["appendOnly", "invariants", feature]
    reader = {"minReaderVersion": 2} if feature == "columnMapping" else {"minReaderVersion": 1}
    _declare(path, {**reader, "minWriterVersion": 7, "writerFeatures": sorted(set(features))}, meta)
    t = li.open_table(path)
    t.create_index(li.SecondaryIndex("by_k", key="k"))
    _unchanged(t, lambda: t.append(rows(FIRST)), UnsupportedWriterFeatureError, feature)


def test_listed_but_unused_features_are_fine(table: li.Table) -> None:
    # delta-rs lists appendOnly and invariants on the tables it upgrades; unused, they allow writes
    path = table.uri.removeprefix("file://")
    _declare(
        path, {"minReaderVersion": 1, "minWriterVersion": 7, "writerFeatures": ["appendOnly", "invariants"]}
    )
    result = table.append(rows([(3, "c", 2, 3, "x")]))
    assert result.table_version == 2 and result.ok


def test_append_only_table_refuses_deletes(tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    write_deltalake(path, rows(FIRST), configuration={"delta.appendOnly": "true"})
    t = li.open_table(path)
    t.create_index(li.SecondaryIndex("by_k", key="k"))
    _unchanged(t, lambda: t.delete("k = 'a'"), WriteRefusedError, "append-only")
    assert t.append(rows([(3, "c", 2, 3, "x")])).ok
