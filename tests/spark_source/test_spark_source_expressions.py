"""The ``lakehouse_index`` data source under a DataFrame ``where`` holding expressions.

Spark pushes only the column-against-literal conjuncts to the source (``id = 8``); it evaluates
the expressions itself. The rows equal ``Table.scan`` of the same text (this library's
evaluator), with an index answering the pushed key and without.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from deltalake import write_deltalake

import lakehouse_index as li
from tests.api.test_where_expressions import WHERES, _batch


@pytest.mark.spark
def test_expression_filters_equal_scan(source_spark: Any, tmp_path: Path) -> None:
    """One DataFrame of the source queried with every WHERE in turn (Spark reuses a relation's
    planned read across its queries) and the same WHEREs as the where option: the rows of
    ``Table.scan``."""
    path = str(tmp_path / "t")
    for lo in (0, 30):
        write_deltalake(path, _batch(lo, lo + 30), mode="append")
    t = li.open_table(path)
    t.create_index(li.SecondaryIndex("by_id", key="id"))
    frame = source_spark.read.format("lakehouse_index").load(path)
    for where in WHERES:
        want = sorted(t.scan(where=where).column("id").to_pylist())
        got = sorted(r["id"] for r in frame.where(where).select("id").collect())
        assert got == want, where
        planned = source_spark.read.format("lakehouse_index").option("where", where).load(path)
        assert sorted(r["id"] for r in planned.select("id").collect()) == want, where
        assert planned.count() == len(want), where  # a second query of the same frame
    assert frame.count() == 60


@pytest.mark.spark
def test_pushed_filters_of_one_query_do_not_leak_into_the_next(source_spark: Any, tmp_path: Path) -> None:
    """Spark 4.1-4.3 hand a later query of a DataFrame the read planned with an earlier query's
    pushed filters when the later one pushes none: by default the source plans with none, so
    the counts stay exact."""
    path = str(tmp_path / "t")
    rows = _batch(0, 30)
    write_deltalake(path, rows, mode="append")
    li.open_table(path).create_index(li.SecondaryIndex("by_id", key="id"))
    frame = source_spark.read.format("lakehouse_index").option("forceIndex", "true").load(path)
    assert frame.where("id = 8").count() == 1
    assert frame.count() == 30
    assert frame.where("coalesce(n, -100) = -100").count() == rows["n"].null_count  # no n is -100
