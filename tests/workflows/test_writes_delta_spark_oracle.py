"""Oracle: tables written by this project's API read in delta-spark as deltalake and this project read them.

Each example creates a partitioned table through delta-spark, with deletion vectors on or
off and row tracking on or off, indexes it (a secondary index on ``k`` refreshed by every
write, a composite one refreshed quick, a covering one never refreshed) and runs a random
history of API writes: deletes, updates and upserts an index plans (merge-on-read with
deletion vectors when the table takes them, else copy-on-write; the project's own commit),
and, on a table whose writer features deltalake honours, appends, deletes and upserts
through deltalake; delta-spark appends and ``sync_indexes`` in between. After every step,
at the latest version and an earlier one: delta-spark's read (``versionAsOf``, all rows and
with a key filter, which Spark prunes with the statistics the commits wrote) equals
deltalake's, and every index answer (lookups, locates, scans) equals delta-spark's rows.

Two examples of eight steps by default; ``LAKEHOUSE_INDEX_LONG=1`` runs ten of twelve.
"""

from __future__ import annotations

import os
import random
import shutil
import tempfile
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from deltalake import DeltaTable
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

import lakehouse_index as li
from lakehouse_index.workflows.reports import WritePath, WriteResult
from tests.reliability.write_race import spread
from tests.workflows.helpers import KEYS, KEYS2, SCHEMA, check_version, create_indexes, multiset, rows
from tests.workflows.writes_machine import Record, records, unique_keys, unique_records

pytestmark = pytest.mark.spark

LONG = os.environ.get("LAKEHOUSE_INDEX_LONG") == "1"
COLS = SCHEMA.names


class ApiWritesReadBySpark(RuleBasedStateMachine):
    """One delta-spark table, written through this project's API."""

    def __init__(self, spark: Any) -> None:
        super().__init__()
        self.spark = spark
        self.dir = tempfile.mkdtemp(prefix="li-writes-spark-")
        self.path = f"{self.dir}/t"
        self.oracle: dict[int, pa.Table] = {}
        self.rng = random.Random(0)

    @initialize(first=records, dvs=st.booleans(), tracking=st.booleans())
    def create(self, first: list[Record], dvs: bool, tracking: bool) -> None:
        props = f"'delta.enableDeletionVectors' = '{str(dvs).lower()}'"
        if tracking:
            props += ", 'delta.enableRowTracking' = 'true'"
        self.spark.sql(
            f"CREATE TABLE delta.`{self.path}` (id BIGINT, k STRING, k2 BIGINT, v BIGINT, p STRING) "
            f"USING delta PARTITIONED BY (p) TBLPROPERTIES ({props})"
        ).collect()
        #: deltalake honours the table's writer features: the API's deltalake writes are allowed.
        self.plain = not dvs and not tracking
        self.dvs = dvs
        self.spark_append(first)
        self.t = li.open_table(self.path)
        create_indexes(self.t)

    def teardown(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)

    def _api(self, result: WriteResult, through_index: bool) -> None:
        assert result.table_version == self.t.latest_version()
        if through_index:
            assert result.path is WritePath.INDEX, (result.path, result.note)
            assert result.mode == ("merge-on-read" if self.dvs else "copy-on-write"), result.mode
        by_name = {r.name: r for r in result.indexes}
        assert by_name["by_k"].indexed_version == result.table_version

    # ------------------------------------------------------------------ writes an index plans

    @rule(k=st.sampled_from(KEYS))
    def indexed_delete(self, k: str) -> None:
        self._api(self.t.delete(f"k = '{k}'"), through_index=True)

    @rule(data=unique_keys)
    def indexed_upsert(self, data: list[Record]) -> None:
        self._api(self.t.upsert(rows(data), on=["k"]), through_index=True)

    @rule(k=st.sampled_from(KEYS), v=st.integers(0, 99), k2=st.sampled_from(KEYS2))
    def indexed_update(self, k: str, v: int, k2: int) -> None:
        self._api(self.t.update(f"k = '{k}'", set={"v": v, "k2": k2}), through_index=True)

    # ------------------------------------------------------------------ writes through deltalake

    @precondition(lambda self: self.plain)
    @rule(data=records)
    def deltalake_append(self, data: list[Record]) -> None:
        self._api(self.t.append(rows(data)), through_index=False)

    @precondition(lambda self: self.plain)
    @rule(k2=st.sampled_from(KEYS2))
    def deltalake_delete(self, k2: int) -> None:
        self._api(self.t.delete(f"k2 = {k2}"), through_index=False)

    @precondition(lambda self: self.plain)
    @rule(data=unique_records)
    def deltalake_upsert(self, data: list[Record]) -> None:
        self._api(self.t.upsert(rows(data), on=["id"]), through_index=False)

    # ------------------------------------------------------------------ foreign commits

    @rule(data=records)
    def spark_append(self, data: list[Record]) -> None:
        frame = self.spark.createDataFrame(rows(data).to_pandas(), schema=list(COLS))
        frame.write.format("delta").mode("append").save(self.path)

    @rule()
    def sync(self) -> None:
        self.t.sync_indexes()

    # ------------------------------------------------------------------ the oracle

    def _spark(self, version: int, where: str | None = None) -> pa.Table:
        """delta-spark's rows of ``version`` (filtered by ``where`` in Spark)."""
        df = self.spark.read.format("delta").option("versionAsOf", version).load(self.path)
        got = (df if where is None else df.where(where)).select(*COLS).collect()
        return pa.table({c: pa.array([r[c] for r in got], SCHEMA.field(c).type) for c in COLS}, schema=SCHEMA)

    @invariant()
    def delta_spark_reads_what_deltalake_and_the_indexes_read(self) -> None:
        if not hasattr(self, "t"):
            return
        latest = self.t.latest_version()
        for v in sorted({*spread(list(range(latest + 1)), 2), self.rng.randint(0, latest)}):
            if v not in self.oracle:
                self.oracle[v] = self._spark(v)
            want = self.oracle[v]
            lake = pa.RecordBatchReader.from_stream(DeltaTable(self.path, version=v).scan()).read_all()
            assert multiset(lake.select(COLS), COLS) == multiset(want, COLS), (v, "deltalake")
            check_version(self.t, v, want)
            k = self.rng.choice(KEYS)
            pruned = self._spark(v, f"k = '{k}'")
            kept = want.filter(pc.equal(want["k"], k))
            assert multiset(pruned, COLS) == multiset(kept, COLS), (v, "pruned", k)


def test_api_writes_read_by_delta_spark(spark: Any) -> None:
    before = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", "2")
    try:
        _run(spark)
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", before)


def _run(spark: Any) -> None:
    run_state_machine_as_test(
        lambda: ApiWritesReadBySpark(spark),
        settings=settings(
            max_examples=10 if LONG else 2,
            stateful_step_count=12 if LONG else 8,
            deadline=None,
            phases=[Phase.explicit, Phase.reuse, Phase.generate],  # no shrinking: a step costs seconds
            suppress_health_check=list(HealthCheck),
        ),
    )
