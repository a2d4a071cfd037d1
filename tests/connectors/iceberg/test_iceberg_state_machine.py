"""Hypothesis state machine over pyiceberg writes (append, filtered overwrite, delete, upsert,
branch, tag, rollback, expire).

Invariants after every step, checked against pyiceberg's own scans:
* the connector's live rows (deletes applied) equal ``table.scan(snapshot_id=...)`` for every
  snapshot still in the metadata;
* ``diff`` between a random pair of snapshots equals the difference of their file sets, and
  applying it to the older live set yields the newer one;
* a long-lived tailer that follows ``changes`` (resyncing on HistoryTruncatedError) holds
  exactly the live file set of the main head.
"""

from __future__ import annotations

import itertools

import pyarrow as pa
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule
from iceberg_oracle import live_rows, open_path, pyiceberg_files, pyiceberg_rows
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.expressions import EqualTo, LessThan
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import LongType, NestedField, StringType

from lakehouse_index.source import HistoryTruncatedError

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=True),
    NestedField(2, "cat", StringType(), required=False),
    NestedField(3, "val", StringType(), required=False),
)
ARROW = pa.schema([pa.field("id", pa.int64(), False), ("cat", pa.string()), ("val", pa.string())])
NAMES = ["id", "cat", "val"]
_counter = itertools.count()


def rows(ids: list[int], tag: str) -> pa.Table:
    return pa.table(
        {"id": ids, "cat": [["a", "b"][i % 2] for i in ids], "val": [f"{tag}{i}" for i in ids]}, schema=ARROW
    )


ids_st = st.lists(st.integers(0, 30), min_size=1, max_size=6)


class IcebergHistory(RuleBasedStateMachine):
    @initialize(version=st.sampled_from([1, 2]), partitioned=st.booleans(), tmp=st.just(None))
    def setup(self, version, partitioned, tmp):
        import tempfile

        self.dir = tempfile.mkdtemp(prefix="ice-sm-")
        n = next(_counter)
        self.catalog = SqlCatalog("sm", uri=f"sqlite:///{self.dir}/c.db", warehouse=f"file://{self.dir}")
        self.catalog.create_namespace("db")
        spec = (
            PartitionSpec(PartitionField(2, 1000, IdentityTransform(), "cat"))
            if partitioned
            else PartitionSpec()
        )
        self.name = f"db.t{n}"
        self.table = self.catalog.create_table(
            self.name, SCHEMA, partition_spec=spec, properties={"format-version": str(version)}
        )
        self.table.append(rows([0, 1, 2, 3], "init"))
        self.reload()
        self.src = open_path(self.table.location())
        self.tailer = open_path(self.table.location())
        self.tail_pos = self.tailer.latest_version()
        self.tail_files = dict(self.tailer.snapshot(self.tail_pos).files)
        self.step = 0

    def reload(self):
        self.table = self.catalog.load_table(self.name)

    def tag(self) -> str:
        self.step += 1
        return f"s{self.step}"

    @rule(ids=ids_st)
    def append(self, ids):
        self.table.append(rows(ids, self.tag()))
        self.reload()

    @rule(ids=ids_st, cat=st.sampled_from(["a", "b"]))
    def overwrite(self, ids, cat):
        self.table.overwrite(
            rows([i for i in ids if ["a", "b"][i % 2] == cat] or [ids[0]], self.tag()),
            overwrite_filter=EqualTo("cat", cat),
        )
        self.reload()

    @rule(bound=st.integers(0, 30))
    def delete(self, bound):
        self.table.delete(LessThan("id", bound))
        self.reload()

    @rule(ids=ids_st)
    def upsert(self, ids):
        live = self.table.scan().to_arrow()["id"].to_pylist()
        if len(live) != len(set(live)):
            return  # appends can repeat ids; pyiceberg refuses to upsert into such a table
        self.table.upsert(rows(sorted(set(ids)), self.tag()), join_cols=["id"])
        self.reload()

    @rule(ids=ids_st)
    def branch_write(self, ids):
        name = f"br{self.step}"
        head = self.table.current_snapshot()
        if head is None:
            return
        self.table.manage_snapshots().create_branch(head.snapshot_id, name).commit()
        self.reload()
        self.table.append(rows(ids, self.tag()), branch=name)
        self.reload()

    @rule()
    def tag_head(self):
        head = self.table.current_snapshot()
        if head is not None:
            self.table.manage_snapshots().create_tag(head.snapshot_id, f"tag{self.step}").commit()
            self.reload()
            self.step += 1

    @precondition(lambda self: len(self.main_lineage()) > 1)
    @rule(data=st.data())
    def rollback(self, data):
        target = data.draw(st.sampled_from(self.main_lineage()[1:]))
        self.table.manage_snapshots().rollback_to_snapshot(target).commit()
        self.reload()

    @precondition(lambda self: len(self.table.snapshots()) > 2)
    @rule(data=st.data())
    def expire(self, data):
        protected = {r.snapshot_id for r in self.table.metadata.refs.values()}
        candidates = [s.snapshot_id for s in self.table.snapshots() if s.snapshot_id not in protected]
        if candidates:
            self.table.maintenance.expire_snapshots().by_id(data.draw(st.sampled_from(candidates))).commit()
            self.reload()

    def main_lineage(self) -> list[int]:
        out = []
        s = self.table.current_snapshot()
        ids = {x.snapshot_id: x for x in self.table.snapshots()}
        while s is not None:
            out.append(s.snapshot_id)
            s = ids.get(s.parent_snapshot_id) if s.parent_snapshot_id is not None else None
        return out

    @invariant()
    def snapshots_match_pyiceberg(self):
        if not hasattr(self, "src"):
            return
        ids = [s.snapshot_id for s in self.table.snapshots()]
        assert sorted(v.version for v in self.src.versions()) == sorted(ids)
        for sid in ids:
            snap = self.src.snapshot(sid)
            assert set(snap.files) == pyiceberg_files(self.table, sid)
            assert live_rows(self.src, snap) == pyiceberg_rows(self.table, sid, NAMES)
        for a, b in itertools.islice(itertools.permutations(ids[-4:], 2), 4):
            d = self.src.diff(a, b)
            fa, fb = dict(self.src.snapshot(a).files), dict(self.src.snapshot(b).files)
            assert {f.path for f in d.added} == set(fb) - set(fa)
            assert {f.path for f in d.removed} == set(fa) - set(fb)
        for name, ref in self.table.metadata.refs.items():
            assert self.src.resolve_version(name) == ref.snapshot_id

    @invariant()
    def tailer_follows_main(self):
        if not hasattr(self, "tailer"):
            return
        try:
            for ch in self.tailer.changes(self.tail_pos):
                for f in ch.removed:
                    del self.tail_files[f.path]
                for f in ch.added:
                    self.tail_files[f.path] = f
                self.tail_pos = ch.version
        except HistoryTruncatedError:
            self.tail_pos = self.tailer.latest_version()  # resync, as a real tailer does
            self.tail_files = dict(self.tailer.snapshot(self.tail_pos).files)
        head = self.table.current_snapshot().snapshot_id
        assert self.tail_pos == head
        assert set(self.tail_files) == pyiceberg_files(self.table, head)


IcebergHistory.TestCase.settings = settings(
    max_examples=6,
    stateful_step_count=8,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
TestIcebergHistory = IcebergHistory.TestCase
