"""Hypothesis state machine: random deltalake operations (append, overwrite, delete, update,
merge, optimize, checkpoint, log compaction, vacuum). After every step a warm tailing connector,
a cold connector and ``diff`` between random versions all agree with deltalake."""

from __future__ import annotations

import random
import shutil
import tempfile
from pathlib import Path

import deltalake
import pyarrow as pa
from delta_helpers import open_source, oracle_files
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule
from lakehouse_index_delta import DeltaSource


class DeltaHistory(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="delta-sm-"))
        self.path = str(self.tmp / "t")
        self.next_id = 0
        self.expected: dict[int, set[str]] = {}
        self.tail_version = -1
        self.tail_files: set[str] = set()
        self.tailer: DeltaSource | None = None
        self.rng = random.Random(0)

    def _rows(self, n: int) -> pa.Table:
        ids = list(range(self.next_id, self.next_id + n))
        self.next_id += n
        return pa.table(
            {
                "id": pa.array(ids, pa.int64()),
                "k": pa.array([i % 4 for i in ids], pa.int64()),
                "v": pa.array([str(i) for i in ids]),
            }
        )

    def _dt(self) -> deltalake.DeltaTable:
        return deltalake.DeltaTable(self.path)

    def _record(self) -> None:
        latest = self._dt().version()
        for v in range(latest + 1):
            if v not in self.expected:
                self.expected[v] = oracle_files(self.path, v)

    @initialize(n=st.integers(1, 20), partitioned=st.booleans())
    def create(self, n: int, partitioned: bool) -> None:
        deltalake.write_deltalake(self.path, self._rows(n), partition_by=["k"] if partitioned else None)
        self.partition_by = ["k"] if partitioned else None
        self._record()
        self.tailer = open_source(self.path)

    @rule(n=st.integers(1, 20))
    def append(self, n: int) -> None:
        deltalake.write_deltalake(self.path, self._rows(n), mode="append", partition_by=self.partition_by)
        self._record()

    @rule(n=st.integers(1, 10))
    def overwrite(self, n: int) -> None:
        deltalake.write_deltalake(self.path, self._rows(n), mode="overwrite", partition_by=self.partition_by)
        self._record()

    @rule(m=st.integers(2, 5))
    def delete(self, m: int) -> None:
        self._dt().delete(f"id % {m} = 0")
        self._record()

    @rule(k=st.integers(0, 3))
    def update(self, k: int) -> None:
        self._dt().update(updates={"v": "'u'"}, predicate=f"k = {k}")
        self._record()

    @rule(n=st.integers(1, 10))
    def merge(self, n: int) -> None:
        lo = max(0, self.next_id - n)
        src = pa.table(
            {
                "id": pa.array(range(lo, lo + 2 * n), pa.int64()),
                "k": pa.array([i % 4 for i in range(lo, lo + 2 * n)], pa.int64()),
                "v": pa.array(["m"] * (2 * n)),
            }
        )
        self.next_id = max(self.next_id, lo + 2 * n)
        (
            self._dt()
            .merge(src, predicate="t.id = s.id", source_alias="s", target_alias="t")
            .when_matched_update_all()
            .when_not_matched_insert_all()
            .execute()
        )
        self._record()

    @rule()
    def optimize(self) -> None:
        self._dt().optimize.compact()
        self._record()

    @rule()
    def checkpoint(self) -> None:
        self._dt().create_checkpoint()
        self._record()

    @rule(back=st.integers(1, 4))
    def compact_logs(self, back: int) -> None:
        latest = self._dt().version()
        start = max(1, latest - back)
        if start < latest:
            self._dt().compact_logs(start, latest)
        self._record()

    @rule()
    def vacuum(self) -> None:
        # deltalake records VACUUM START / END commits.
        self._dt().vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
        self._record()

    @invariant()
    def warm_tail_agrees(self) -> None:
        if self.tailer is None:
            return
        after = None if self.tail_version < 0 else self.tail_version
        for ch in self.tailer.changes(after):
            removed = {f.path for f in ch.removed}
            assert removed <= self.tail_files
            assert not ({f.path for f in ch.added} & (self.tail_files - removed))
            self.tail_files = (self.tail_files - removed) | {f.path for f in ch.added}
            assert self.tail_files == self.expected[ch.version], ch.version
            self.tail_version = ch.version
        assert self.tail_version == max(self.expected)

    @invariant()
    def cold_snapshots_and_diffs_agree(self) -> None:
        if not self.expected:
            return
        src = open_source(self.path)
        latest = max(self.expected)
        assert src.latest_version() == latest
        assert set(src.snapshot(latest).files) == self.expected[latest]
        for _ in range(3):
            a, b = self.rng.randint(0, latest), self.rng.randint(0, latest)
            d = src.diff(a, b)
            assert {f.path for f in d.added} == self.expected[b] - self.expected[a]
            assert {f.path for f in d.removed} == self.expected[a] - self.expected[b]
        start = self.rng.randint(0, latest)
        live = set(self.expected[start])
        for ch in open_source(self.path).changes(start):
            live = (live - {f.path for f in ch.removed}) | {f.path for f in ch.added}
            assert live == self.expected[ch.version]

    def teardown(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)


DeltaHistory.TestCase.settings = settings(
    max_examples=10, stateful_step_count=10, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
test_delta_state_machine = DeltaHistory.TestCase
