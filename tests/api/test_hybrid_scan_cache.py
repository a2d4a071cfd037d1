"""Hybrid lookups with the scan-key cache equal a plain read, over random histories.

After the index is built, files are appended without a refresh (the lookup scans them and
keeps their key columns between lookups), rows are deleted, and an appended file is
rewritten in place by an external tool (same path, new rows). Every lookup and locate is
compared with pyarrow reading the version's files directly.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from deltalake import DeltaTable, write_deltalake
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

import lakehouse_index as li
from lakehouse_index.query import lookup as lookup_module
from lakehouse_index.read import footers
from tests.support.oracle import rows_multiset as multiset

SCHEMA = pa.schema([("id", pa.int64()), ("k", pa.int64()), ("v", pa.string())])


def _batch(first: int, keys: list[int]) -> pa.Table:
    ids = list(range(first, first + len(keys)))
    return pa.table({"id": ids, "k": keys, "v": [f"v{i}" for i in ids]}, schema=SCHEMA)


def _oracle(path: str, keys: list[int]) -> pa.Table:
    """The latest version's rows with the keys, read from its files by pyarrow."""
    parts = [
        pq.read_table(u.removeprefix("file://")).select(SCHEMA.names) for u in DeltaTable(path).file_uris()
    ]
    full = pa.concat_tables([p.cast(SCHEMA) for p in parts]) if parts else SCHEMA.empty_table()
    return full.filter(pc.is_in(full["k"], pa.array(keys, pa.int64())))


OPS = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.lists(st.integers(0, 30), min_size=1, max_size=40)),
        st.tuples(st.just("delete"), st.integers(0, 30)),
        st.tuples(st.just("rewrite"), st.integers(0, 2**16)),
        st.tuples(st.just("lookup"), st.lists(st.integers(0, 31), min_size=1, max_size=5)),
    ),
    min_size=2,
    max_size=8,
)


@settings(
    max_examples=6,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    phases=(Phase.explicit, Phase.reuse, Phase.generate),
)
@given(first=st.lists(st.integers(0, 30), min_size=1, max_size=60), ops=OPS)
@example(  # the cached key columns of an appended file, then that file rewritten in place
    first=[1, 2, 3],
    ops=[
        ("append", [5, 6, 7, 8, 9]),
        ("lookup", [5, 6, 30]),
        ("rewrite", 3),
        ("lookup", list(range(10, 31))),
    ],
)
def test_hybrid_lookups_through_caches_equal_a_plain_read(
    first: list[int], ops: list[tuple[str, Any]]
) -> None:
    footers.clear_footer_cache()
    lookup_module.clear_scan_cache()
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "t")
        write_deltalake(path, _batch(0, first))
        next_id = len(first)
        t = li.open_table(path, config=li.Config().replace(planner={"force_index": True}))
        t.create_index(li.SecondaryIndex("by_k", key="k", record_key="id"))
        indexed = set(DeltaTable(path).file_uris())
        rewritten = False
        for op, arg in ops:
            if op == "append":
                write_deltalake(path, _batch(next_id, arg), mode="append")
                next_id += len(arg)
            elif op == "delete":
                if not rewritten:  # deltalake cannot delete from a file that changed behind its log
                    DeltaTable(path).delete(f"k = {arg}")
            elif op == "rewrite":
                appended = sorted(set(DeltaTable(path).file_uris()) - indexed)
                if not appended:
                    continue
                target = appended[arg % len(appended)].removeprefix("file://")
                old = pq.read_table(target).select(SCHEMA.names).cast(SCHEMA)
                rng = np.random.default_rng(arg)
                order = rng.permutation(old.num_rows)
                new_keys = rng.integers(0, 31, size=old.num_rows)
                rewritten_rows = old.take(pa.array(order)).set_column(1, "k", pa.array(new_keys, pa.int64()))
                pq.write_table(rewritten_rows, target)
                rewritten = True
            else:
                expected = _oracle(path, arg)
                for _ in range(2):  # cold, then through the caches
                    got = t.lookup("by_k", arg)
                    assert multiset(got, SCHEMA.names) == multiset(expected, SCHEMA.names)
                    located = t.locate("by_k", arg)
                    assert multiset(located, ["k", "id"]) == multiset(expected, ["k", "id"])
        final = list(range(32))
        got = t.lookup("by_k", final)
        assert multiset(got, SCHEMA.names) == multiset(_oracle(path, final), SCHEMA.names)
