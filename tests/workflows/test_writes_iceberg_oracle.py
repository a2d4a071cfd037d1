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
from hypothesis.stateful import initialize, invariant, rule

import lakehouse_index as li
from tests.api.iceberg_index_support import main_lineage, sql_catalog
from tests.workflows.helpers import KEYS, SCHEMA, check_all, create_indexes, rows
from tests.workflows.writes_machine import ApiWrites, records


def iceberg_table(directory: str, first: list[tuple[int, str, int, int, str]]) -> tuple[Any, Any]:
    """A catalog and a table partitioned by identity(p) holding ``first``."""
    catalog = sql_catalog(directory)
    tbl = catalog.create_table("db.t", schema=SCHEMA)
    with tbl.update_spec() as spec:
        spec.add_identity("p")
    tbl.append(rows(first))
    return catalog, tbl


class IcebergWrites(ApiWrites):
    KEY_DELETE = "NOT (k != '{k}')"  # the != translation (nulls never match)

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

    @rule(data=records)
    def native_append(self, data: list[tuple[int, str, int, int, str]]) -> None:
        self._native().append(rows(data))

    @rule(k=st.sampled_from(KEYS))
    def native_delete(self, k: str) -> None:
        self._native().delete(f"k = '{k}'")

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
