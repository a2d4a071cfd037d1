"""The rules both write oracles share: API writes, ``sync_indexes`` and ``watch --once``.

A format's oracle subclasses :class:`ApiWrites` with its table set-up, its native writes
(deltalake / pyiceberg), ``_track`` (record the versions written so far) and an invariant
checking every version against the format's reader.
"""

from __future__ import annotations

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, rule

import lakehouse_index as li
from lakehouse_index.workflows.reports import Action, SyncResult, WritePath, WriteResult
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
#: Records unique on ``k``, the key of the ``by_k`` index (an upsert on it is planned by the index).
unique_keys = st.lists(record, min_size=1, max_size=3, unique_by=lambda r: r[1])


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

    @rule(k=st.sampled_from(KEYS), partition=st.booleans(), p=st.sampled_from(PARTS), via_index=st.booleans())
    def api_delete(self, k: str, partition: bool, p: str, via_index: bool) -> None:
        where = f"p = '{p}'" if partition else self.KEY_DELETE.format(k=k)
        result = self.t.delete(where, use_indexes=via_index)
        if not via_index or partition:  # no index is keyed on p
            assert result.path is WritePath.FORMAT_LIBRARY, (where, result.path)
        self._api(result)

    @rule(data=unique_keys, via_index=st.booleans())
    def api_upsert_on_the_index_key(self, data: list[Record], via_index: bool) -> None:
        result = self.t.upsert(rows(data), on=["k"], use_indexes=via_index)
        assert (result.path is WritePath.INDEX) is via_index, (result.path, result.note)
        self._api(result)

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
