"""Stateful oracle on Delta: API writes, native deltalake writes and syncs, interleaved.

After every step, lookups, locates and scans at every version so far equal deltalake's
rows at that version; an incremental index is at the latest version after an API write.
"""

from __future__ import annotations

import shutil
import tempfile

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import initialize, invariant, rule

import lakehouse_index as li
from lakehouse_index.workflows.reports import SyncResult
from tests.workflows.helpers import KEYS, check_all, create_indexes, rows
from tests.workflows.writes_machine import ApiWrites, records


class DeltaWrites(ApiWrites):
    @initialize(first=records)
    def setup(self, first: list[tuple[int, str, int, int, str]]) -> None:
        self.dir = tempfile.mkdtemp(prefix="li-writes-")
        self.path = f"{self.dir}/t"
        write_deltalake(self.path, rows(first), partition_by=["p"])
        self.t = li.open_table(self.path)
        create_indexes(self.t)
        self.t.create_index(li.SkippingIndex("skip_v", columns=["v"]))
        self.versions = [0]

    def teardown(self) -> None:
        shutil.rmtree(getattr(self, "dir", ""), ignore_errors=True)

    def _track(self) -> None:
        latest = DeltaTable(self.path).version()
        self.versions.extend(range(self.versions[-1] + 1, latest + 1))

    def _check_sync(self, result: SyncResult, head: int) -> None:
        off = {r.name: r for r in result.indexes}["cov"]
        assert off.lag == head - off.indexed_version

    @rule(data=records)
    def native_append(self, data: list[tuple[int, str, int, int, str]]) -> None:
        write_deltalake(self.path, rows(data), mode="append")
        self._track()

    @rule(k=st.sampled_from(KEYS))
    def native_delete(self, k: str) -> None:
        DeltaTable(self.path).delete(f"k = '{k}'")
        self._track()

    @rule(k=st.sampled_from(KEYS), v=st.integers(0, 99))
    def native_update(self, k: str, v: int) -> None:
        DeltaTable(self.path).update(new_values={"v": v}, predicate=f"k = '{k}'")
        self._track()

    @invariant()
    def answers_equal_deltalake(self) -> None:
        if hasattr(self, "t"):
            check_all(self.t, self.versions, lambda v: DeltaTable(self.path, version=v).to_pyarrow_table())


DeltaWrites.TestCase.settings = settings(
    max_examples=12,
    stateful_step_count=8,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
TestDeltaWrites = DeltaWrites.TestCase


def test_rows_helper() -> None:
    assert rows([(1, "a", 0, 5, "x")]).num_rows == 1
    assert pa.types.is_int64(rows([]).schema.field("id").type)
