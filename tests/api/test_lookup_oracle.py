"""Oracle: an index lookup at the latest version returns exactly the rows a plain read returns.

Tables are written with deltalake in several shapes (partitioned or not, null keys,
duplicate keys, unicode keys); the oracle is deltalake's own reader, filtered in Python.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

import lakehouse_index as li
from tests.support.oracle import SMALL_FILES
from tests.support.oracle import rows_multiset as multiset

pytestmark = pytest.mark.spark

KEYS = st.one_of(
    st.none(),
    st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=6),
    st.sampled_from(["a", "b", "ü", "日本", "", "x y"]),
)


@st.composite
def tables(draw: st.DrawFn) -> dict[str, Any]:
    """A random history of appends (and maybe a delete) with a string key column."""
    n_batches = draw(st.integers(1, 4))
    pool = draw(st.lists(KEYS, min_size=1, max_size=12))
    batches = []
    next_id = 0
    for _ in range(n_batches):
        n = draw(st.integers(0, 25))
        keys = [draw(st.sampled_from(pool)) for _ in range(n)]
        parts = [draw(st.sampled_from(["p1", "p2", "p3"])) for _ in range(n)]
        batches.append({"id": list(range(next_id, next_id + n)), "k": keys, "part": parts})
        next_id += n
    return {
        "batches": batches,
        "partitioned": draw(st.booleans()),
        "delete_below": draw(st.one_of(st.none(), st.integers(0, max(next_id, 1)))),
        "pool": pool,
        "probe": draw(st.lists(st.one_of(st.sampled_from(pool), KEYS), min_size=1, max_size=6)),
        "small_files": draw(st.booleans()),
    }


SCHEMA = pa.schema([("id", pa.int64()), ("k", pa.string()), ("part", pa.string())])


def write_history(path: str, spec: dict[str, Any]) -> None:
    """Write the batches with deltalake; an empty first batch still creates the table."""
    for batch in spec["batches"]:
        write_deltalake(
            path,
            pa.table(batch, schema=SCHEMA),
            mode="append",
            partition_by=["part"] if spec["partitioned"] else None,
        )
    if spec["delete_below"] is not None:
        DeltaTable(path).delete(f"id < {spec['delete_below']}")


def oracle_rows(path: str, keys: list[Any]) -> pa.Table:
    """deltalake's read of the latest version, filtered by key equality (None matches null)."""
    full = DeltaTable(path).to_pyarrow_table()
    wanted = set(keys)
    mask = [v in wanted for v in full["k"].to_pylist()]
    return full.filter(pa.array(mask, pa.bool_()))


@settings(
    max_examples=10,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
    phases=(Phase.explicit, Phase.reuse, Phase.generate),  # each example builds on Spark: no slow shrinking
)
@given(spec=tables())
def test_lookup_and_locate_equal_a_plain_read(spark: Any, spec: dict[str, Any]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "t")
        write_history(path, spec)
        t = li.open_table(path, config=SMALL_FILES if spec["small_files"] else None)
        info = t.create_index(li.SecondaryIndex("by_k", key="k", record_key="id"), spark=spark)
        assert info.state is li.IndexState.ACTIVE
        assert info.indexed_version == DeltaTable(path).version()
        if spec["small_files"]:
            per_file = SMALL_FILES.executor.rows_per_index_file
            assert info.files == -(-info.rows // per_file)  # full files, the last fewer

        expected = oracle_rows(path, spec["probe"])
        got = t.lookup("by_k", spec["probe"])
        cols = ["id", "k", "part"]
        assert multiset(got, cols) == multiset(expected, cols)

        located = t.locate("by_k", spec["probe"])
        assert multiset(located, ["k", "id"]) == multiset(expected, ["k", "id"])
        live_files = set(DeltaTable(path).file_uris())
        assert {p.removeprefix("file://") for p in located["_file"].to_pylist()} <= live_files


def test_lookup_returns_requested_columns_and_nothing_for_missing_keys(spark: Any, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    write_deltalake(
        path, pa.table({"id": [1, 2, 3], "k": ["a", "b", "a"], "part": ["x", "y", "x"]}, schema=SCHEMA)
    )
    t = li.open_table(path)
    t.create_index(li.SecondaryIndex("by_k", key="k", record_key="id"), spark=spark)
    got = t.lookup("by_k", ["a"], columns=["id"])
    assert got.column_names == ["id"]
    assert sorted(got["id"].to_pylist()) == [1, 3]
    assert t.lookup("by_k", ["zzz"]).num_rows == 0
    assert t.locate("by_k", ["zzz"]).num_rows == 0
