"""Nested column mapping on Delta: every value, top-level and nested, equals the oracles.

Random nested schemas (structs in structs, structs in list elements and in map keys and
values, lists of maps of structs; a few primitive types) are written as Delta tables with
column mapping by hand (``tests/connectors/nested_schemas.py``): Parquet files under
physical names with field ids at every depth, ``_delta_log`` JSON with
``delta.columnMapping.physicalName`` / ``id`` (and ``nested.ids`` under
``icebergCompatV2``), in modes ``name`` and ``id``. Some histories evolve the schema
(a nested field renamed, added, dropped and re-added under the same name): old files
must read the added field as null and the renamed one by id / physical name.

Every row read by our pyarrow reader (``open_table(path).scan()``) and our Spark reader
(``read(spark)``) must equal the generator's own expectation and deltalake's
``DeltaTable(path).scan()``. In ``id`` mode some tables store their columns under names
that mean nothing (``scramble``): only field ids link them to the schema, as the protocol
demands of readers; deltalake resolves by name there, so only the generator is the
oracle for those.
"""

from __future__ import annotations

import contextlib
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import deltalake
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

import lakehouse_index as li
from lakehouse_index.config import PlannerConfig
from tests.connectors.nested_schemas import (
    DeltaWriter,
    Evolution,
    Ids,
    Type,
    canon_rows,
    every_shape,
    evolve,
    evolved_shape,
    project,
    rows,
    schemas,
    shape_rows,
)
from tests.support.paths import PEER_TABLES

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: Examples per property (the module runs in seconds without Spark).
EXAMPLES = 60
SPARK_EXAMPLES = 3


def slow(examples: int) -> settings:
    """Settings for properties whose examples write and read whole tables."""
    return settings(
        max_examples=examples,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )


# --------------------------------------------------------------------------- one table


def _event(what: str) -> None:
    """Count ``what`` in Hypothesis's statistics (outside a property: nothing)."""
    with contextlib.suppress(InvalidArgument):
        event(what)


def oracle_rows(path: Path, version: int) -> list[dict[str, Any]]:
    """deltalake's rows at ``version``."""
    reader = pa.RecordBatchReader.from_stream(deltalake.DeltaTable(str(path), version=version).scan())
    return reader.read_all().to_pylist()


class History:
    """A hand-written Delta table and, per version, its schema and the rows it must read as."""

    def __init__(self, root: Path, mode: str, compat: bool, scramble: bool) -> None:
        self.root = root
        self.writer = DeltaWriter(root, mode=mode, iceberg_compat=compat, scramble=scramble)
        self.schema: Type | None = None
        self.live: list[tuple[Type, list[dict[str, Any]]]] = []  # (schema written with, rows)
        self.versions: list[tuple[int, Type, list[dict[str, Any]]]] = []
        self.files_at: list[int] = []  # per version: how many of ``live`` it holds

    def commit(self, schema: Type, data: list[dict[str, Any]]) -> None:
        changed = schema != self.schema
        self.schema = schema
        version = self.writer.commit(schema if changed else None, data, schema)
        if data:
            self.live.append((schema, data))
        self.files_at.append(len(self.live))
        expected = [project(r, old, schema) for old, part in self.live for r in part]
        self.versions.append((version, schema, expected))

    def check_pyarrow(self, deltalake_oracle: bool, evolved_in_map: bool = False) -> None:
        """Our pyarrow reader equals the generator at every version, and so does deltalake.

        deltalake (delta-rs 1.x) mishandles old files whose struct inside a map value
        evolved: it refuses them ("Cannot cast struct field") or matches the struct's
        fields by position (a dropped and re-added field shows the old values). Where a
        history evolved such a struct (``evolved_in_map``), versions reading old files
        are judged by the generator alone; everywhere else deltalake must agree exactly.
        """
        table = li.open_table(str(self.root))
        for version, schema, expected in self.versions:
            want = canon_rows(expected, schema)
            got = table.scan(version_as_of=version)
            assert got.column_names == [f.name for f in schema.fields]
            assert canon_rows(got.to_pylist(), schema) == want, f"pyarrow reader at version {version}"
            if not deltalake_oracle:
                continue
            lenient = evolved_in_map and any(old != schema for old, _ in self.live_at(version))
            try:
                theirs = canon_rows(oracle_rows(self.root, version), schema)
            except pa.ArrowInvalid as e:
                assert lenient and "Cannot cast" in str(e), e
                _event("deltalake refuses an evolved map value struct")
                continue
            if lenient and theirs != want:
                _event("deltalake misreads an evolved map value struct")
                continue
            assert theirs == want, f"deltalake disagrees at version {version}"
            _event("deltalake agrees")

    def live_at(self, version: int) -> list[tuple[Type, list[dict[str, Any]]]]:
        """The (schema written with, rows) of the files live at ``version``."""
        return self.live[: self.files_at[version]]

    def check_spark(self, spark: SparkSession) -> None:
        table = li.open_table(str(self.root))
        for version, schema, expected in self.versions:
            got = table.read(spark, version_as_of=version).collect()
            assert canon_rows(got, schema) == canon_rows(expected, schema), f"Spark at version {version}"


@st.composite
def histories(draw: st.DrawFn, max_rows: int = 4) -> tuple[dict[str, Any], list[Any]]:
    """Table options and a list of (schema, rows) commits, maybe with one schema evolution."""
    mode = draw(st.sampled_from(["name", "id"]))
    options = {
        "mode": mode,
        "compat": draw(st.booleans()),
        "scramble": mode == "id" and draw(st.booleans()),
    }
    schema, ids = draw(schemas())
    commits: list[tuple[Type, list[dict[str, Any]], Evolution | None]] = []
    commits.append((schema, draw(rows(schema, 0, max_rows)), None))
    if draw(st.integers(0, 3)) > 0:  # most histories evolve
        evolved, what = draw(evolve(schema, ids))
        commits.append((evolved, draw(rows(evolved, 100, max_rows)), what))
        for kind in ("renamed", "added", "dropped"):
            if getattr(what, kind):
                _event(f"nested field {kind}")
    event(
        f"mode {mode}"
        + (" icebergCompatV2" if options["compat"] else "")
        + (" scrambled" if options["scramble"] else "")
    )
    return options, commits


def _write(root: Path, options: dict[str, Any], commits: list[Any]) -> History:
    history = History(root, options["mode"], options["compat"], options["scramble"])
    for schema, data, _ in commits:
        history.commit(schema, data)
    return history


def _evolved_in_map(commits: list[Any]) -> bool:
    return any(what is not None and what.in_map for _, _, what in commits)


# --------------------------------------------------------------------------- the properties


@slow(EXAMPLES)
@given(case=histories())
def test_random_nested_schemas_read_as_the_oracles(case: tuple[dict[str, Any], list[Any]]) -> None:
    options, commits = case
    with tempfile.TemporaryDirectory() as root:
        history = _write(Path(root), options, commits)
        history.check_pyarrow(not options["scramble"], _evolved_in_map(commits))


@pytest.mark.spark
@slow(SPARK_EXAMPLES)
@given(case=histories(max_rows=3))
def test_random_nested_schemas_on_spark(spark: SparkSession, case: tuple[dict[str, Any], list[Any]]) -> None:
    options, commits = case
    with tempfile.TemporaryDirectory() as root:
        history = _write(Path(root), options, commits)
        history.check_spark(spark)


# --------------------------------------------------------------------------- every shape, fixed


def _every_shape_history(root: Path, mode: str, compat: bool, scramble: bool) -> History:
    schema, ids = every_shape()
    history = History(root, mode, compat, scramble)
    history.commit(schema, shape_rows(0, 4))
    evolved = evolved_shape(schema, ids)
    history.commit(evolved, [])
    history.commit(evolved, shape_rows(10, 3, evolved=True))
    return history


MODES = [("name", False, False), ("id", False, False), ("name", True, False), ("id", True, True)]


@pytest.mark.parametrize(("mode", "compat", "scramble"), MODES)
def test_every_shape_with_evolution(tmp_path: Path, mode: str, compat: bool, scramble: bool) -> None:
    history = _every_shape_history(tmp_path, mode, compat, scramble)
    history.check_pyarrow(not scramble, evolved_in_map=True)


@pytest.mark.spark
@pytest.mark.parametrize(("mode", "compat", "scramble"), [MODES[0], MODES[3]])
def test_every_shape_with_evolution_on_spark(
    tmp_path: Path, spark: SparkSession, mode: str, compat: bool, scramble: bool
) -> None:
    history = _every_shape_history(tmp_path, mode, compat, scramble)
    history.check_spark(spark)


def test_the_issue_example(tmp_path: Path) -> None:
    """``map<int, struct<ab: long>>`` read ``{2: {ab: null}}`` before; Spark and delta-rs read 20."""
    ids = Ids()
    value = Type("struct", (ids.field("ab", Type("long")),))
    column = Type("map", children=(Type("integer"), value), slot_ids=(ids.take(), ids.take()))
    schema = Type("struct", (ids.field("id", Type("long")), ids.field("m", column)))
    for mode in ("name", "id"):
        root = tmp_path / mode
        DeltaWriter(root, mode=mode).commit(schema, [{"id": 1, "m": [(2, {"ab": 20})]}], schema)
        assert li.open_table(str(root)).scan().to_pylist() == [{"id": 1, "m": [(2, {"ab": 20})]}]


# --------------------------------------------------------------------------- indexes


def test_index_lookup_returns_nested_rows(tmp_path: Path) -> None:
    """A secondary index on ``id`` of a nested-mapped, evolved table: ``lookup`` returns every
    column, nested map included, equal to the oracle at each version (time travel too)."""
    history = _every_shape_history(tmp_path, "name", True, False)
    table = li.open_table(str(tmp_path))
    table.planner_config = PlannerConfig(force_index=True)
    table.create_index(li.SecondaryIndex("by_id", key="id"))
    for version, schema, expected in history.versions:
        by_id = {r["id"]: r for r in expected}
        probes = [[0], [3, 11], [12], [99]]
        for keys in probes:
            got = table.lookup("by_id", keys, version_as_of=version)
            want = [by_id[k] for k in keys if k in by_id]
            assert canon_rows(got.to_pylist(), schema) == canon_rows(want, schema), (version, keys)
            if version == 0:  # before the evolution deltalake reads it too
                theirs = [r for r in oracle_rows(tmp_path, version) if r["id"] in keys]
                assert canon_rows(theirs, schema) == canon_rows(want, schema)


# --------------------------------------------------------------------------- the peer table


PEER = PEER_TABLES / "table_with_column_mapping"


def test_peer_table_with_column_mapping_at_every_version() -> None:
    table = li.open_table(str(PEER))
    versions = [v.version for v in table.source.versions()]
    assert versions  # the fixture's whole history
    for version in versions:
        snap = table.snapshot(version)
        assert all(c.physical_name and c.physical_name.startswith("col-") for c in snap.columns)
        mine = table.scan(version_as_of=version)
        theirs = pa.RecordBatchReader.from_stream(deltalake.DeltaTable(str(PEER), version=version).scan())
        want = sorted(map(repr, theirs.read_all().select(mine.column_names).cast(mine.schema).to_pylist()))
        assert sorted(map(repr, mine.to_pylist())) == want
        assert mine.num_rows == 5


@pytest.mark.spark
def test_peer_table_with_column_mapping_on_spark(spark: SparkSession) -> None:
    table = li.open_table(str(PEER))
    for version in [v.version for v in table.source.versions()]:
        mine = sorted(map(repr, (tuple(r) for r in table.read(spark, version_as_of=version).collect())))
        want = sorted(map(repr, (tuple(r.values()) for r in table.scan(version_as_of=version).to_pylist())))
        assert mine == want
