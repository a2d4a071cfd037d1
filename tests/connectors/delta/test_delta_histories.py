"""Random append/delete/overwrite/update histories written with deltalake: at every version the
connector's live files equal deltalake's, ``diff`` agrees in both directions, and ``changes``
replayed from any version reproduces the later snapshot."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import deltalake
import pyarrow as pa
from delta_helpers import open_source, oracle_files
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

OPS = st.one_of(
    st.tuples(st.just("append"), st.integers(1, 30), st.booleans()),
    st.tuples(st.just("overwrite"), st.integers(1, 20), st.booleans()),
    st.tuples(st.just("delete"), st.integers(0, 40), st.booleans()),
    st.tuples(st.just("update"), st.integers(0, 40), st.booleans()),
    st.tuples(st.just("checkpoint"), st.just(0), st.just(False)),
)


def _batch(n: int, start: int) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "part": pa.array([f"p{i % 3}" if i % 7 else "a b/ü%" for i in ids], pa.string()),
            "val": pa.array([float(i) for i in ids], pa.float64()),
        }
    )


def write_history(path: Path, ops: list[tuple[str, int, bool]], partitioned: bool) -> None:
    """Apply ``ops`` with deltalake, starting with one append."""
    part = ["part"] if partitioned else None
    deltalake.write_deltalake(str(path), _batch(10, 0), partition_by=part)
    next_id = 10
    for kind, n, flag in ops:
        dt = deltalake.DeltaTable(str(path))
        if kind == "append":
            deltalake.write_deltalake(str(path), _batch(n, next_id), mode="append", partition_by=part)
            next_id += n
        elif kind == "overwrite":
            deltalake.write_deltalake(str(path), _batch(n, next_id), mode="overwrite", partition_by=part)
            next_id += n
        elif kind == "delete":
            dt.delete(f"id < {n}" if flag else f"id % 5 = {n % 5}")
        elif kind == "update":
            dt.update(updates={"val": "val + 1"}, predicate=f"id > {n}")
        elif kind == "checkpoint":
            dt.create_checkpoint()


def check_table(path: Path) -> None:
    src = open_source(path)
    latest = src.latest_version()
    assert [i.version for i in src.versions()] == list(range(latest + 1))
    expected = {v: oracle_files(path, v) for v in range(latest + 1)}
    for v in range(latest + 1):
        assert set(src.snapshot(v).files) == expected[v], f"version {v}"
    # diff agrees with the oracle for every pair, forward and backward.
    for a in range(latest + 1):
        for b in range(latest + 1):
            d = src.diff(a, b)
            assert {f.path for f in d.added} == expected[b] - expected[a]
            assert {f.path for f in d.removed} == expected[a] - expected[b]
    # changes replayed from any version (on a cold connector) rebuild every later file set.
    for start in [None, *range(latest + 1)]:
        cold = open_source(path)
        live = set() if start is None else set(expected[start])
        for ch in cold.changes(start):
            live -= {f.path for f in ch.removed}
            live |= {f.path for f in ch.added}
            assert {dc.path for dc in ch.delete_changes} <= live
            assert live == expected[ch.version], f"changes from {start} at {ch.version}"


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(OPS, min_size=1, max_size=7), partitioned=st.booleans())
def test_random_histories_match_deltalake(ops: list[tuple[str, int, bool]], partitioned: bool) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="delta-hist-"))
    try:
        write_history(tmp / "t", ops, partitioned)
        check_table(tmp / "t")
    finally:
        shutil.rmtree(tmp)
