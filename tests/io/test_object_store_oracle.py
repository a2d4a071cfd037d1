"""The oracle smoke subset on each emulated object store, both formats, no JVM.

Table and index both live on the store (S3 on moto, Azure Blob on Azurite). A Delta table
written by deltalake and an Iceberg table written by pyiceberg (SQLite catalog, warehouse on
the store) get a secondary index; the table changes (append, delete), the index is refreshed
incrementally; ``lookup``, ``locate`` and the index-narrowed ``scan`` equal the table
library's own read of the same version, filtered in Python. The log slots on the store,
listed without lakehouse-index, are the ones the index reports.
"""

from __future__ import annotations

import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

import lakehouse_index as li
from tests.support.oracle import rows_multiset
from tests.support.stores import StoreUnderTest

KEYS = ["k0", "k3", "rare", "absent"]


def batch(b: int, n: int = 30) -> pa.Table:
    """Rows of batch ``b``: repeated keys, one ``rare`` key in batch 0; ids unique."""
    keys = [f"k{i % 5}" for i in range(n)]
    if b == 0:
        keys[3] = "rare"
    return pa.table({"id": pa.array([b * 1000 + i for i in range(n)], pa.int64()), "k": keys})


def expected(rows: pa.Table) -> Counter[tuple[Any, ...]]:
    """(k, id) of the rows whose key is one of KEYS."""
    return Counter(r for r in rows_multiset(rows, ["k", "id"]) if r[0] in KEYS)


def check(t: li.Table, truth: pa.Table, store: StoreUnderTest) -> None:
    want = expected(truth)
    assert rows_multiset(t.lookup("by_k", KEYS, columns=["k", "id"]), ["k", "id"]) == want
    assert rows_multiset(t.locate("by_k", KEYS), ["k", "id"]) == want
    narrowed = t.scan(where="k IN ('k0', 'k3', 'rare', 'absent')", columns=["k", "id"])
    assert rows_multiset(narrowed, ["k", "id"]) == want
    assert rows_multiset(t.scan(columns=["k", "id"], use_indexes=False), ["k", "id"]) == rows_multiset(
        truth, ["k", "id"]
    )
    # The log, listed without lakehouse-index: one object per entry the index reports.
    [info] = t.indexes()
    log = store.list_keys(store.key(f"{t.index_root}/by_k/_log/"))
    assert [int(k.rsplit("/", 1)[1][:20]) for k in sorted(log)] == list(range(info.log_entry + 1))


def test_delta_table_and_index_on_the_store(store: StoreUnderTest) -> None:
    uri = f"{store.root}/delta-{uuid.uuid4().hex}"
    for b in range(3):
        write_deltalake(uri, batch(b), mode="append", storage_options=store.delta_options)
    t = li.open_table(uri, storage_options=store.storage_options)
    t.create_index(li.SecondaryIndex("by_k", key="k", record_key="id"))
    check(t, DeltaTable(uri, storage_options=store.delta_options).to_pyarrow_table(), store)

    write_deltalake(uri, batch(3), mode="append", storage_options=store.delta_options)
    DeltaTable(uri, storage_options=store.delta_options).delete("id % 4 = 1")
    t.refresh_index("by_k", "incremental")
    dt = DeltaTable(uri, storage_options=store.delta_options)
    assert t.indexes()[0].indexed_version == dt.version()
    check(t, dt.to_pyarrow_table(), store)


def test_iceberg_table_and_index_on_the_store(store: StoreUnderTest, tmp_path: Path) -> None:
    from pyiceberg.catalog.sql import SqlCatalog

    warehouse = f"{store.root}/iceberg-{uuid.uuid4().hex}"
    catalog = SqlCatalog(
        "stores", uri=f"sqlite:///{tmp_path}/catalog.db", warehouse=warehouse, **store.iceberg_properties
    )
    catalog.create_namespace("db")
    ice = catalog.create_table("db.t", schema=batch(0).schema)
    for b in range(3):
        ice.append(batch(b))
    t = li.open_table(f"{warehouse}/db/t", storage_options=store.storage_options)
    t.create_index(li.SecondaryIndex("by_k", key="k", record_key="id"))
    check(t, ice.scan().to_arrow(), store)

    ice.append(batch(3))
    ice.delete("id >= 1000 and id < 1010")  # copy-on-write (pyiceberg's only delete)
    ice = catalog.load_table("db.t")
    t.refresh_index("by_k", "incremental")
    assert t.indexes()[0].indexed_version == ice.current_snapshot().snapshot_id
    check(t, ice.scan().to_arrow(), store)
