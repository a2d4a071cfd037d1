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
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

import lakehouse_index as li
from lakehouse_index.workflows.reports import Action, WriteResult
from tests.workflows.helpers import KEYS, KEYS2, PARTS, check_all, create_indexes, rows

record = st.tuples(
    st.integers(0, 6),
    st.sampled_from(KEYS),
    st.sampled_from(KEYS2),
    st.integers(0, 99),
    st.sampled_from(PARTS),
)
records = st.lists(record, min_size=1, max_size=3)
unique_records = st.lists(record, min_size=1, max_size=3, unique_by=lambda r: r[0])


class DeltaWrites(RuleBasedStateMachine):
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

    def _api(self, result: WriteResult) -> None:
        latest = self.t.latest_version()
        assert result.table_version == latest
        self.versions.extend(range(self.versions[-1] + 1, latest + 1))
        by_name = {r.name: r for r in result.indexes}
        assert by_name["by_k"].action in (Action.INCREMENTAL, Action.NOTHING)
        assert by_name["by_k"].indexed_version == latest
        assert by_name["by_kk"].seen_version == latest and by_name["by_kk"].lag == 0
        assert by_name["cov"].action is Action.REPORTED
        info = {i.name: i for i in self.t.indexes()}
        assert info["by_k"].indexed_version == latest

    def _native(self) -> None:
        latest = DeltaTable(self.path).version()
        self.versions.extend(range(self.versions[-1] + 1, latest + 1))

    @rule(data=records)
    def api_append(self, data: list[tuple[int, str, int, int, str]]) -> None:
        self._api(self.t.append(rows(data)))

    @rule(k=st.sampled_from(KEYS), whole_partition=st.booleans(), p=st.sampled_from(PARTS))
    def api_delete(self, k: str, whole_partition: bool, p: str) -> None:
        self._api(self.t.delete(f"p = '{p}'" if whole_partition else f"k = '{k}'"))

    @rule(k2=st.sampled_from(KEYS2), k=st.sampled_from(KEYS), v=st.integers(0, 99))
    def api_update(self, k2: int, k: str, v: int) -> None:
        self._api(self.t.update(f"k2 = {k2}", set={"k": k, "v": v}))

    @rule(data=unique_records)
    def api_upsert(self, data: list[tuple[int, str, int, int, str]]) -> None:
        self._api(self.t.upsert(rows(data), on=["id"]))

    @rule(data=records, p=st.sampled_from([*PARTS, None]))
    def api_overwrite(self, data: list[tuple[int, str, int, int, str]], p: str | None) -> None:
        self._api(self.t.overwrite(rows(data), where=None if p is None else f"p = '{p}'"))

    @rule(data=records)
    def native_append(self, data: list[tuple[int, str, int, int, str]]) -> None:
        write_deltalake(self.path, rows(data), mode="append")
        self._native()

    @rule(k=st.sampled_from(KEYS))
    def native_delete(self, k: str) -> None:
        DeltaTable(self.path).delete(f"k = '{k}'")
        self._native()

    @rule(k=st.sampled_from(KEYS), v=st.integers(0, 99))
    def native_update(self, k: str, v: int) -> None:
        DeltaTable(self.path).update(new_values={"v": v}, predicate=f"k = '{k}'")
        self._native()

    @rule()
    def watch_once(self) -> None:
        li.watch([self.t], once=True, handle_signals=False)
        self._after_sync()

    def _after_sync(self) -> None:
        latest = self.t.latest_version()
        self.versions.extend(range(self.versions[-1] + 1, latest + 1))
        info = {i.name: i for i in self.t.indexes()}
        assert info["by_k"].indexed_version == latest and info["skip_v"].indexed_version == latest

    @rule()
    def sync(self) -> None:
        result = self.t.sync_indexes()
        latest = self.t.latest_version()
        assert {r.name: r.indexed_version for r in result.indexes}["by_k"] == latest
        off = {r.name: r for r in result.indexes}["cov"]
        assert off.lag == latest - off.indexed_version
        self._after_sync()

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
