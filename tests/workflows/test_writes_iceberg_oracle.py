"""Stateful oracle on Iceberg: API writes, native pyiceberg writes and syncs, interleaved.

After every step, lookups, locates and scans at every snapshot of main so far equal
pyiceberg's rows at that snapshot; an incremental index is at the head after an API write.
"""

from __future__ import annotations

import shutil
import tempfile
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

import lakehouse_index as li
from lakehouse_index.workflows.reports import Action, WriteResult
from tests.api.iceberg_index_support import main_lineage, sql_catalog
from tests.workflows.helpers import KEYS, KEYS2, PARTS, SCHEMA, check_all, create_indexes, rows

record = st.tuples(
    st.integers(0, 6),
    st.sampled_from(KEYS),
    st.sampled_from(KEYS2),
    st.integers(0, 99),
    st.sampled_from(PARTS),
)
records = st.lists(record, min_size=1, max_size=3)
unique_records = st.lists(record, min_size=1, max_size=3, unique_by=lambda r: r[0])


def iceberg_table(directory: str, first: list[tuple[int, str, int, int, str]]) -> tuple[Any, Any]:
    """A catalog and a table partitioned by identity(p) holding ``first``."""
    catalog = sql_catalog(directory)
    tbl = catalog.create_table("db.t", schema=SCHEMA)
    with tbl.update_spec() as spec:
        spec.add_identity("p")
    tbl.append(rows(first))
    return catalog, tbl


class IcebergWrites(RuleBasedStateMachine):
    @initialize(first=records)
    def setup(self, first: list[tuple[int, str, int, int, str]]) -> None:
        self.dir = tempfile.mkdtemp(prefix="li-ice-writes-")
        self.catalog, _ = iceberg_table(self.dir, first)
        self.t = li.open_table("db.t", catalog=self.catalog)
        create_indexes(self.t)
        self.t.create_index(li.SkippingIndex("skip_v", columns=["v"]))

    def teardown(self) -> None:
        shutil.rmtree(getattr(self, "dir", ""), ignore_errors=True)

    def _native(self) -> Any:
        return self.catalog.load_table("db.t")

    def _api(self, result: WriteResult) -> None:
        head = self.t.latest_version()
        assert result.table_version == head
        by_name = {r.name: r for r in result.indexes}
        assert by_name["by_k"].action in (Action.INCREMENTAL, Action.NOTHING)
        assert by_name["by_k"].indexed_version == head
        assert by_name["by_kk"].seen_version == head and by_name["by_kk"].lag == 0
        assert {i.name: i.indexed_version for i in self.t.indexes()}["by_k"] == head

    @rule(data=records)
    def api_append(self, data: list[tuple[int, str, int, int, str]]) -> None:
        self._api(self.t.append(rows(data)))

    @rule(k=st.sampled_from(KEYS), whole_partition=st.booleans(), p=st.sampled_from(PARTS))
    def api_delete(self, k: str, whole_partition: bool, p: str) -> None:
        self._api(self.t.delete(f"p = '{p}'" if whole_partition else f"NOT (k != '{k}')"))

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
        self._native().append(rows(data))

    @rule(k=st.sampled_from(KEYS))
    def native_delete(self, k: str) -> None:
        self._native().delete(f"k = '{k}'")

    @rule()
    def watch_once(self) -> None:
        li.watch([self.t], once=True, handle_signals=False)
        self._after_sync()

    def _after_sync(self) -> None:
        head = self.t.latest_version()
        info = {i.name: i for i in self.t.indexes()}
        assert info["by_k"].indexed_version == head and info["skip_v"].indexed_version == head

    @rule()
    def sync(self) -> None:
        result = self.t.sync_indexes()
        head = self.t.latest_version()
        assert {r.name: r.indexed_version for r in result.indexes}["by_k"] == head
        self._after_sync()

    @invariant()
    def answers_equal_pyiceberg(self) -> None:
        if not hasattr(self, "t"):
            return
        native = self._native()
        check_all(self.t, main_lineage(native), lambda v: native.scan(snapshot_id=v).to_arrow())


IcebergWrites.TestCase.settings = settings(
    max_examples=10,
    stateful_step_count=7,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
TestIcebergWrites = IcebergWrites.TestCase
