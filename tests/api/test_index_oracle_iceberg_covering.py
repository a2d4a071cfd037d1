"""The Iceberg index oracle, extended with what issue 6 asks of both formats and the base
machine does not check on Iceberg: a covering index (index-only and row-fetching lookups)
and the Spark executor (``read(spark, version_as_of=..., where=...)``).

Same random pyiceberg histories as ``test_index_oracle_iceberg.py`` (append, filtered
overwrite, copy-on-write delete, upsert, add column, rename of a non-key column),
interleaved with refreshes of every mode, optimizes of both modes and vacuum of the
covering index too; after every step, at the current snapshot and an earlier one of the
main lineage, the covering index's lookups and Spark's read equal pyiceberg's scan.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import initialize, invariant, precondition, rule, run_state_machine_as_test
from iceberg_index_support import key_filter, main_lineage
from test_index_oracle_iceberg import POOL, IcebergIndexMachine

import lakehouse_index as li
from tests.support.oracle import rows_multiset

pytestmark = [
    pytest.mark.spark,
    pytest.mark.filterwarnings("ignore:Delete operation did not match any records"),
]

CORE = ["id", "k", "g"]


class IcebergCoveringMachine(IcebergIndexMachine):
    """The base machine plus ``by_cov`` (indexed k, included id and g, 3 buckets)."""

    @initialize(
        ks=st.lists(st.sampled_from(POOL), min_size=1, max_size=20),
        partitioned=st.booleans(),
        by_catalog=st.booleans(),
        on_spark=st.booleans(),
        small_files=st.booleans(),
    )
    def create(
        self, ks: list[Any], partitioned: bool, by_catalog: bool, on_spark: bool, small_files: bool
    ) -> None:
        super().create(ks, partitioned, by_catalog, on_spark, small_files)
        assert self.table is not None
        local = {"local_max_rows": 0} if on_spark else {}
        self.table.create_index(
            li.CoveringIndex("by_cov", indexed="k", included=["id", "g"], num_buckets=3),
            spark=self.spark,
            **local,
        )

    @rule(mode=st.sampled_from(["full", "incremental", "quick"]), remap=st.booleans())
    def refresh_covering(self, mode: str, remap: bool) -> None:
        assert self.table is not None
        self.table.refresh_index("by_cov", mode=mode, spark=self.spark, remap=remap)

    @rule(mode=st.sampled_from(["quick", "full"]))
    def optimize_covering(self, mode: str) -> None:
        assert self.table is not None
        self.table.optimize_index("by_cov", mode=mode, spark=self.spark)

    @rule()
    def vacuum_covering(self) -> None:
        assert self.table is not None
        self.table.vacuum_index("by_cov", retention_hours=0)

    @precondition(lambda self: self.table is not None and self.other is not None)
    @invariant()
    def covering_and_spark_equal_pyiceberg(self) -> None:
        lineage = main_lineage(self.pyice)
        for table, sid, probe in (
            (self.table, lineage[-1], ["a", None, "ü", "missing"]),
            (self.other, lineage[len(lineage) // 2], ["b", "", "日本", None]),
        ):
            assert table is not None
            full = self.pyice.scan(snapshot_id=sid).to_arrow()
            want = key_filter(full, probe, ("k",))
            only = table.lookup("by_cov", probe, version_as_of=sid, columns=["k", "id", "g"])
            assert rows_multiset(only, CORE) == rows_multiset(want, CORE), ("index-only", sid)
            rows = table.lookup("by_cov", probe, version_as_of=sid)
            assert rows_multiset(rows, want.column_names) == rows_multiset(want, want.column_names), sid
            # Spark executor: the planner's snapshot narrows the files, Spark re-checks the predicate.
            keys = [k for k in probe if k is not None]
            where = "k IS NULL OR k IN (" + ", ".join("'" + k + "'" for k in keys) + ")"
            df = table.read(self.spark, version_as_of=sid, where=where, columns=CORE)
            got = pa.Table.from_pylist([r.asDict() for r in df.collect()], schema=full.select(CORE).schema)
            assert rows_multiset(got, CORE) == rows_multiset(want, CORE), ("read", sid)
            narrowed = table.read(self.spark, version_as_of=sid, where=f"k IN ('{keys[0]}')", columns=CORE)
            got2 = pa.Table.from_pylist(
                [r.asDict() for r in narrowed.collect()], schema=full.select(CORE).schema
            )
            want2 = key_filter(full, [keys[0]], ("k",))
            assert rows_multiset(got2, CORE) == rows_multiset(want2, CORE), ("read narrowed", sid)


@pytest.fixture
def machine(spark: Any) -> type[IcebergCoveringMachine]:
    IcebergCoveringMachine.spark = spark
    return IcebergCoveringMachine


def test_iceberg_covering_and_spark_oracle(machine: type[IcebergCoveringMachine]) -> None:
    run_state_machine_as_test(
        machine,
        settings=settings(
            max_examples=4,
            stateful_step_count=10,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            phases=(Phase.explicit, Phase.reuse, Phase.generate),
        ),
    )
