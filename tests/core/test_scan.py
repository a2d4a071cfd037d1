"""scan_snapshot against DuckDB evaluating the same SQL on independently computed live rows."""

from __future__ import annotations

import tempfile

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from core_helpers import CaseSpec, FileSpec, build_case, case_specs, duckdb_filter, rows_of, where_clauses
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lakehouse_index.errors import QueryError
from lakehouse_index.read.scan import scan_files, scan_snapshot

SETTINGS = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def live(expected: pa.Table) -> pa.Table:
    return expected.filter(pc.invert(expected["_deleted"]))


@SETTINGS
@given(spec=case_specs(), data=st.data())
def test_scan_with_where_matches_duckdb(spec: CaseSpec, data: st.DataObject) -> None:
    where = data.draw(st.one_of(st.none(), where_clauses(spec.partitioned)))
    with tempfile.TemporaryDirectory() as root:
        source, expected = build_case(root, spec)
        snap = source.snapshot()
        names = snap.schema.names
        got = scan_snapshot(source, snap, where=where)
        assert got.schema == snap.schema
        want = duckdb_filter(live(expected).select(names), where)
        assert rows_of(got) == rows_of(want, names)
        # a projection that leaves out the predicate's columns
        cols = data.draw(st.lists(st.sampled_from(names), min_size=1, max_size=3, unique=True))
        got_cols = scan_snapshot(source, snap, columns=cols, where=where)
        assert got_cols.column_names == cols
        assert rows_of(got_cols) == rows_of(want, cols)


@SETTINGS
@given(spec=case_specs())
def test_scan_files_lineage(spec: CaseSpec) -> None:
    with tempfile.TemporaryDirectory() as root:
        source, expected = build_case(root, spec)
        snap = source.snapshot()
        got = scan_files(source, snap, snap.files.values(), ["id", "k"], with_lineage=True)
        assert got.column_names == ["id", "k", "_file_path", "_row"]
        assert rows_of(got) == rows_of(live(expected), ["id", "k", "_file_path", "_row"])


def test_partition_pruning_skips_files(tmp_path: object) -> None:
    """Files whose partition value rules the predicate out are not even opened."""
    spec = CaseSpec(
        "name",
        True,
        [FileSpec(rows=[(1, "a", 1.0)], part="a"), FileSpec(rows=[(2, "b", 2.0)], part="b")],
    )
    source, _ = build_case(str(tmp_path), spec)
    snap = source.snapshot()
    # delete the file of partition b: a scan that prunes it must not notice
    import os

    b = next(e for e in snap.files.values() if e.partition_dict["p"] == "b")
    os.remove(b.path[len("file://") :])
    assert scan_snapshot(source, snap, where="p = 'a' AND k > 0").to_pydict()["id"] == [0]
    assert scan_snapshot(source, snap, where="p IN ('a') OR p IS NULL").to_pydict()["id"] == [0]
    with pytest.raises(Exception, match="missing"):
        scan_snapshot(source, snap, where="k > 0")


def test_scan_empty_snapshot_and_errors(tmp_path: object) -> None:
    source, _ = build_case(str(tmp_path), CaseSpec("id", False, []))
    snap = source.snapshot()
    assert scan_snapshot(source, snap).schema == snap.schema
    assert scan_snapshot(source, snap, columns=["s"], where="k = 1").num_rows == 0
    with pytest.raises(QueryError, match="unknown column"):
        scan_snapshot(source, snap, columns=["nope"])
    with pytest.raises(QueryError, match="unknown column 'zz'"):
        scan_snapshot(source, snap, where="zz = 1")


def test_scan_accepts_pyarrow_expression(tmp_path: object) -> None:
    spec = CaseSpec("id", False, [FileSpec(rows=[(1, "a", 1.0), (2, None, 2.0), (None, "c", None)])])
    source, _ = build_case(str(tmp_path), spec)
    snap = source.snapshot()
    got = scan_snapshot(source, snap, columns=["id"], where=pc.field("k") >= 2)
    assert got.to_pydict() == {"id": [1]}
