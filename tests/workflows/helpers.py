"""Shared pieces of the workflow tests: the table shape, indexes and the oracle check."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

import lakehouse_index as li

SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64()),
        pa.field("k", pa.string()),
        pa.field("k2", pa.int64()),
        pa.field("v", pa.int64()),
        pa.field("p", pa.string()),
    ]
)
KEYS = ["a", "b", "c"]
KEYS2 = [0, 1, 2]
PARTS = ["x", "y"]
WHERE = "k2 = 1 OR k = 'a'"


def rows(records: list[tuple[int, str, int, int, str]]) -> pa.Table:
    """A table of (id, k, k2, v, p) tuples in SCHEMA."""
    cols = list(zip(*records, strict=True)) if records else [[] for _ in SCHEMA]
    return pa.table([pa.array(list(c), f.type) for c, f in zip(cols, SCHEMA, strict=True)], schema=SCHEMA)


def create_indexes(t: li.Table) -> None:
    """A secondary index (incremental), a composite one (quick) and a covering one (off)."""
    t.create_index(li.SecondaryIndex("by_k", key="k"))
    t.create_index(li.SecondaryIndex("by_kk", key=["k", "k2"], auto_refresh="quick"))
    t.create_index(li.CoveringIndex("cov", indexed="k2", included=["v"], num_buckets=2, auto_refresh="off"))


def multiset(table: pa.Table, columns: list[str]) -> Counter[tuple[Any, ...]]:
    """The rows of ``columns`` as a multiset of tuples."""
    return (
        Counter(zip(*(table[c].to_pylist() for c in columns), strict=True)) if table.num_rows else Counter()
    )


def check_version(t: li.Table, version: Any, oracle: pa.Table) -> None:
    """lookup, locate and scan(where) at ``version`` equal the oracle's rows (multisets)."""
    cols = SCHEMA.names
    oracle = oracle.select(cols)
    for k in KEYS:
        want = oracle.filter(pc.equal(oracle["k"], k))
        got = t.lookup("by_k", [k], version_as_of=version)
        assert multiset(got, cols) == multiset(want, cols), (version, "by_k", k)
    probe = [(k, k2) for k in KEYS[:2] for k2 in KEYS2[:2]]
    wanted = oracle.filter(
        pc.is_in(
            pc.binary_join_element_wise(
                pc.cast(oracle["k"], pa.string()), pc.cast(oracle["k2"], pa.string()), "|"
            ),
            pa.array([f"{k}|{k2}" for k, k2 in probe]),
        )
    )
    located = t.locate("by_kk", probe, version_as_of=version)
    assert multiset(located, ["k", "k2"]) == multiset(wanted, ["k", "k2"]), (version, "by_kk")
    got_rows = t.lookup("by_kk", probe, version_as_of=version)
    assert multiset(got_rows, cols) == multiset(wanted, cols), (version, "by_kk rows")
    for k2 in KEYS2[1:]:
        want = oracle.filter(pc.equal(oracle["k2"], k2))
        got = t.lookup("cov", [k2], version_as_of=version, columns=["k2", "v"])
        assert multiset(got, ["k2", "v"]) == multiset(want, ["k2", "v"]), (version, "cov", k2)
    scanned = t.scan(version_as_of=version, where=WHERE)
    want = oracle.filter(pc.or_kleene(pc.equal(oracle["k2"], 1), pc.equal(oracle["k"], "a")))  # SQL OR
    assert multiset(scanned, cols) == multiset(want, cols), (version, "scan")
    scanned = t.scan(version_as_of=version, where="v < 40")  # a skipping index may prune
    want = oracle.filter(pc.less(oracle["v"], 40))
    assert multiset(scanned, cols) == multiset(want, cols), (version, "scan v")


def check_all(t: li.Table, versions: list[Any], read: Callable[[Any], pa.Table]) -> None:
    """Every version so far answers like the native reader."""
    for v in versions:
        check_version(t, v, read(v))


def index_state(t: li.Table) -> dict[str, tuple[int, Any]]:
    """Per index: newest log entry id and indexed version (to prove nothing changed)."""
    return {i.name: (i.log_entry, i.indexed_version) for i in t.indexes()}
