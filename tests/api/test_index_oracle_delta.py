"""The central oracle on Delta: random histories interleaved with every index operation.

After every step, ``lookup`` and ``locate`` at the latest version — and at a past
version — equal deltalake's own read of that version, filtered in Python. Histories mix
appends, overwrites, deletes, updates, merges and table compaction written with
deltalake, with index refreshes of every mode, optimizes of both modes,
delete/restore and vacuum.
"""

from __future__ import annotations

import shutil
import tempfile
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

import lakehouse_index as li
from tests.support.oracle import SMALL_FILES, rows_multiset

pytestmark = pytest.mark.spark

POOL = ["a", "b", "c", "ü", "", None, "日本"]
SCHEMA = pa.schema([("id", pa.int64()), ("k", pa.string()), ("g", pa.int32()), ("part", pa.string())])
keys = st.sampled_from(POOL)


def oracle(path: str, version: int, probe: list[Any], key: tuple[str, ...]) -> pa.Table:
    """deltalake's read of ``version`` filtered by key equality (None matches null)."""
    full = DeltaTable(path, version=version).to_pyarrow_table()
    wanted = set(probe)
    cols = [full[c].to_pylist() for c in key]
    mask = [(t if len(key) > 1 else t[0]) in wanted for t in zip(*cols, strict=True)]
    return full.filter(pa.array(mask, pa.bool_()))


class DeltaIndexMachine(RuleBasedStateMachine):
    """A Delta table with a secondary index (k → id) and a composite one ((k, g) → id)."""

    spark: Any = None

    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="li-oracle-")
        self.path = f"{self.dir}/t"
        self.next_id = 0
        self.table: li.Table | None = None
        self.partitioned = False
        self.deleted = False

    def teardown(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)

    def _batch(self, ks: list[Any]) -> pa.Table:
        ids = list(range(self.next_id, self.next_id + len(ks)))
        self.next_id += len(ks)
        return pa.table(
            {"id": ids, "k": ks, "g": [i % 3 for i in ids], "part": [f"p{i % 2}" for i in ids]}, schema=SCHEMA
        )

    @initialize(
        ks=st.lists(keys, min_size=1, max_size=20),
        partitioned=st.booleans(),
        on_spark=st.booleans(),
        small_files=st.booleans(),
    )
    def create(self, ks: list[Any], partitioned: bool, on_spark: bool, small_files: bool) -> None:
        self.partitioned = partitioned
        write_deltalake(self.path, self._batch(ks), partition_by=["part"] if partitioned else None)
        # small_files: index files of a few rows in groups of fewer, so that a key's entries
        # span row groups and files.
        self.table = li.open_table(self.path, config=SMALL_FILES if small_files else None)
        # Built in process (small tables) or forced onto Spark: both build paths are checked.
        local = {"local_max_rows": 0} if on_spark else {}
        # The tables are tiny, so the cost model would often prefer a plain scan: force the
        # index path, which is what this oracle is about.
        self.table.planner_config = li.PlannerConfig(force_index=True)
        self.table.create_index(
            li.SecondaryIndex("by_k", key="k", record_key="id"), spark=self.spark, **local
        )
        self.table.create_index(
            li.SecondaryIndex("by_kg", key=["k", "g"], record_key="id"), spark=self.spark, **local
        )
        self.table.create_index(
            li.CoveringIndex("by_cov", indexed="k", included=["id", "g"], num_buckets=3),
            spark=self.spark,
            **local,
        )
        self.table.create_index(li.SkippingIndex("skip", columns=["k", "g"], max_values=2))

    # ------------------------------------------------------------------ table writes

    @rule(ks=st.lists(keys, min_size=1, max_size=15))
    def append(self, ks: list[Any]) -> None:
        write_deltalake(self.path, self._batch(ks), mode="append")

    @rule(ks=st.lists(keys, max_size=10))
    def overwrite(self, ks: list[Any]) -> None:
        write_deltalake(self.path, self._batch(ks), mode="overwrite")

    @rule(m=st.integers(2, 5), r=st.integers(0, 4))
    def delete(self, m: int, r: int) -> None:
        DeltaTable(self.path).delete(f"id % {m} = {r % m}")

    @rule(new=keys, below=st.integers(0, 60))
    def update(self, new: Any, below: int) -> None:
        value = "NULL" if new is None else "'" + new + "'"
        DeltaTable(self.path).update(predicate=f"id < {below}", updates={"k": value})

    @rule(ks=st.lists(keys, min_size=1, max_size=6), overlap=st.integers(0, 6))
    def merge(self, ks: list[Any], overlap: int) -> None:
        start = max(0, self.next_id - overlap)
        ids = list(range(start, start + len(ks)))
        self.next_id = max(self.next_id, ids[-1] + 1)
        src = pa.table(
            {"id": ids, "k": ks, "g": [i % 3 for i in ids], "part": [f"p{i % 2}" for i in ids]}, schema=SCHEMA
        )
        (
            DeltaTable(self.path)
            .merge(src, predicate="t.id = s.id", source_alias="s", target_alias="t")
            .when_matched_update_all()
            .when_not_matched_insert_all()
            .execute()
        )

    @rule()
    def compact_table(self) -> None:
        DeltaTable(self.path).optimize.compact()

    # ------------------------------------------------------------------ index operations

    @precondition(lambda self: not self.deleted)
    @rule(
        mode=st.sampled_from(["full", "incremental", "quick", "incremental"]),
        name=st.sampled_from(["by_k", "by_kg", "by_cov", "skip"]),
        remap=st.booleans(),
        on_spark=st.booleans(),
    )
    def refresh(self, mode: str, name: str, remap: bool, on_spark: bool) -> None:
        assert self.table is not None
        # Appended rows are indexed in-process unless forced onto Spark: both paths are checked.
        local = 0 if on_spark else 1_000_000
        info = self.table.refresh_index(name, mode=mode, spark=self.spark, remap=remap, local_max_rows=local)
        assert info.state is li.IndexState.ACTIVE

    @precondition(lambda self: not self.deleted)
    @rule(mode=st.sampled_from(["quick", "full"]), name=st.sampled_from(["by_k", "by_kg", "by_cov", "skip"]))
    def optimize(self, mode: str, name: str) -> None:
        assert self.table is not None
        self.table.optimize_index(name, mode=mode, spark=self.spark)

    @precondition(lambda self: not self.deleted)
    @rule()
    def delete_index(self) -> None:
        assert self.table is not None
        self.table.delete_index("by_k")
        self.deleted = True
        with pytest.raises(li.IllegalIndexStateError):
            self.table.lookup("by_k", ["a"])

    @precondition(lambda self: self.deleted)
    @rule()
    def restore_index(self) -> None:
        assert self.table is not None
        self.table.restore_index("by_k")
        self.deleted = False

    @precondition(lambda self: not self.deleted)
    @rule(name=st.sampled_from(["by_k", "by_kg", "by_cov", "skip"]))
    def vacuum(self, name: str) -> None:
        assert self.table is not None
        self.table.vacuum_index(name, retention_hours=0)

    # ------------------------------------------------------------------ the oracle

    def _check(self, version: int, probe_k: list[Any]) -> None:
        assert self.table is not None
        if not self.deleted:
            got = self.table.lookup("by_k", probe_k, version_as_of=version)
            want = oracle(self.path, version, probe_k, ("k",))
            assert rows_multiset(got, ["id", "k", "g", "part"]) == rows_multiset(
                want, ["id", "k", "g", "part"]
            )
            loc = self.table.locate("by_k", probe_k, version_as_of=version)
            assert rows_multiset(loc, ["k", "id"]) == rows_multiset(want, ["k", "id"])
        probe_kg = [(k, g) for k in probe_k for g in (0, 1, 2)]
        got2 = self.table.lookup("by_kg", probe_kg, version_as_of=version, columns=["id", "k", "g"])
        want2 = oracle(self.path, version, probe_kg, ("k", "g"))
        assert rows_multiset(got2, ["id", "k", "g"]) == rows_multiset(want2, ["id", "k", "g"])
        # Covering index: index-only when the columns are covered, row fetch otherwise.
        want3 = oracle(self.path, version, probe_k, ("k",))
        got3 = self.table.lookup("by_cov", probe_k, version_as_of=version, columns=["k", "id", "g"])
        assert rows_multiset(got3, ["id", "k", "g"]) == rows_multiset(want3, ["id", "k", "g"])
        got4 = self.table.lookup("by_cov", probe_k, version_as_of=version)
        assert rows_multiset(got4, ["id", "k", "part"]) == rows_multiset(want3, ["id", "k", "part"])
        # Spark executor: the index narrows the files, Spark re-checks the predicate.
        sql_keys = [k for k in probe_k if k is not None]
        where = "k IN (" + ", ".join("'" + k + "'" for k in sql_keys) + ")"
        collected = self.table.read(self.spark, version_as_of=version, where=where).collect()
        got5 = pa.Table.from_pylist([r.asDict() for r in collected], schema=SCHEMA)
        want5 = oracle(self.path, version, sql_keys, ("k",))
        assert rows_multiset(got5, ["id", "k", "g", "part"]) == rows_multiset(want5, ["id", "k", "g", "part"])
        # Plain scan pruned by the skipping index.
        got6 = self.table.scan(version_as_of=version, where="k = 'ü' OR g = 2")
        full = DeltaTable(self.path, version=version).to_pyarrow_table()
        want6 = full.filter(
            pa.array(
                [
                    k == "ü" or g == 2
                    for k, g in zip(full["k"].to_pylist(), full["g"].to_pylist(), strict=True)
                ],
                pa.bool_(),
            )
        )
        assert rows_multiset(got6, ["id", "k", "g", "part"]) == rows_multiset(want6, ["id", "k", "g", "part"])

    @invariant()
    def answers_equal_a_plain_read(self) -> None:
        if self.table is None:
            return
        latest = DeltaTable(self.path).version()
        self._check(latest, ["a", None, "ü", "missing"])
        # A past version: the middle of the history (time travel through every repair path).
        self._check(latest // 2, ["b", "", "日本", None])


@pytest.fixture
def machine(spark: Any) -> type[DeltaIndexMachine]:
    DeltaIndexMachine.spark = spark
    return DeltaIndexMachine


def test_delta_index_oracle(machine: type[DeltaIndexMachine]) -> None:
    from hypothesis.stateful import run_state_machine_as_test

    run_state_machine_as_test(
        machine,
        settings=settings(
            max_examples=6,
            stateful_step_count=12,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            phases=(Phase.explicit, Phase.reuse, Phase.generate),
        ),
    )
