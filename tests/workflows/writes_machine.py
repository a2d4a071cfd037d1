"""The rules both write oracles share: API writes, ``sync_indexes`` and ``watch --once``.

A format's oracle subclasses :class:`ApiWrites` with its table set-up, its native writes
(deltalake / pyiceberg), ``_track`` (record the versions written so far) and an invariant
checking every version against the format's reader.
"""

from __future__ import annotations

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, rule

import lakehouse_index as li
from lakehouse_index.workflows.reports import Action, SyncResult, WriteResult
from tests.workflows.helpers import KEYS, KEYS2, PARTS, rows

Record = tuple[int, str, int, int, str]
record = st.tuples(
    st.integers(0, 6),
    st.sampled_from(KEYS),
    st.sampled_from(KEYS2),
    st.integers(0, 99),
    st.sampled_from(PARTS),
)
records = st.lists(record, min_size=1, max_size=3)
unique_records = st.lists(record, min_size=1, max_size=3, unique_by=lambda r: r[0])


class ApiWrites(RuleBasedStateMachine):
    """Writes through the API and syncs; ``t`` is the table (set by the subclass's initialize)."""

    t: li.Table
    #: The ``where`` of a key delete (formats test different SQL translations).
    KEY_DELETE = "k = '{k}'"

    def _track(self) -> None:
        """Record the table versions committed so far (for the invariant)."""

    def _check_sync(self, result: SyncResult, head: int) -> None:
        """Format-specific checks of a sync result."""

    def _api(self, result: WriteResult) -> None:
        head = self.t.latest_version()
        assert result.table_version == head
        self._track()
        by_name = {r.name: r for r in result.indexes}
        assert by_name["by_k"].action in (Action.INCREMENTAL, Action.NOTHING)
        assert by_name["by_k"].indexed_version == head
        assert by_name["by_kk"].seen_version == head and by_name["by_kk"].lag == 0
        assert by_name["cov"].action is Action.REPORTED
        assert {i.name: i.indexed_version for i in self.t.indexes()}["by_k"] == head

    def _after_sync(self) -> None:
        head = self.t.latest_version()
        self._track()
        info = {i.name: i for i in self.t.indexes()}
        assert info["by_k"].indexed_version == head and info["skip_v"].indexed_version == head

    @rule(data=records)
    def api_append(self, data: list[Record]) -> None:
        self._api(self.t.append(rows(data)))

    @rule(k=st.sampled_from(KEYS), whole_partition=st.booleans(), p=st.sampled_from(PARTS))
    def api_delete(self, k: str, whole_partition: bool, p: str) -> None:
        self._api(self.t.delete(f"p = '{p}'" if whole_partition else self.KEY_DELETE.format(k=k)))

    @rule(k2=st.sampled_from(KEYS2), k=st.sampled_from(KEYS), v=st.integers(0, 99))
    def api_update(self, k2: int, k: str, v: int) -> None:
        self._api(self.t.update(f"k2 = {k2}", set={"k": k, "v": v}))

    @rule(data=unique_records)
    def api_upsert(self, data: list[Record]) -> None:
        self._api(self.t.upsert(rows(data), on=["id"]))

    @rule(data=records, p=st.sampled_from([*PARTS, None]))
    def api_overwrite(self, data: list[Record], p: str | None) -> None:
        self._api(self.t.overwrite(rows(data), where=None if p is None else f"p = '{p}'"))

    @rule()
    def watch_once(self) -> None:
        li.watch([self.t], once=True, handle_signals=False)
        self._after_sync()

    @rule()
    def sync(self) -> None:
        result = self.t.sync_indexes()
        head = self.t.latest_version()
        assert {r.name: r.indexed_version for r in result.indexes}["by_k"] == head
        self._check_sync(result, head)
        self._after_sync()
