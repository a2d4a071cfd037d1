"""GDPR erase with purge of a table and its index on each emulated object store.

The table is written on the store (S3 on moto, Azure Blob on Azurite) by deltalake, or by
pyiceberg through a SQLite catalog, indexed, changed by the format library's own DELETE
(deltalake's predicate, with a subject, lands in ``commitInfo``), then erased with
``purge=True``. Afterwards: the other rows equal the format library's read before the
erase minus the subjects; the index and a plain scan find no subject; no object under the table's
prefix, listed and read without lakehouse-index, holds a subject's bytes (the residue scan
decodes the Parquet files too); time travel to a purged version is refused.
"""

from __future__ import annotations

import gzip
import uuid
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

import lakehouse_index as li
from lakehouse_index.workflows.erasure.verify.residue import find_residue
from tests.support.oracle import rows_multiset
from tests.support.stores import StoreUnderTest

SUBJECTS = ["subject-7f3a@example.org", "subject-91c2@example.org"]


def _batch(first: int, n: int) -> pa.Table:
    ids = list(range(first, first + n))
    emails = [SUBJECTS[i % 2] if i % 9 == 4 else f"user{i}@example.com" for i in ids]
    return pa.table({"id": pa.array(ids, pa.int64()), "email": emails, "p": [i % 2 for i in ids]})


def test_delta_erase_with_purge_on_the_store(store: StoreUnderTest) -> None:
    uri = f"{store.root}/erase-{uuid.uuid4().hex}"
    opts = store.delta_options
    for b in range(3):
        write_deltalake(uri, _batch(b * 100, 100), mode="append", partition_by=["p"], storage_options=opts)
    t = li.open_table(uri, storage_options=store.storage_options)
    t.create_index(li.SecondaryIndex("by_email", key="email"))
    DeltaTable(uri, storage_options=opts).delete(f"email = '{SUBJECTS[0]}' AND id < 50")
    old = DeltaTable(uri, storage_options=opts).version()
    before = rows_multiset(DeltaTable(uri, storage_options=opts).to_pyarrow_table(), ["id", "email"])
    assert any(e in SUBJECTS for _, e in before)

    result = t.erase("by_email", SUBJECTS, purge=True)

    assert result.verification is not None and result.verification["ok"]
    after = DeltaTable(uri, storage_options=opts).to_pyarrow_table()
    want = Counter({r: c for r, c in before.items() if r[1] not in SUBJECTS})
    assert rows_multiset(after, ["id", "email"]) == want
    t = li.open_table(uri, storage_options=store.storage_options)
    assert t.lookup("by_email", SUBJECTS).num_rows == 0
    assert t.scan(where=f"email IN ('{SUBJECTS[0]}', '{SUBJECTS[1]}')").num_rows == 0
    assert rows_multiset(t.lookup("by_email", ["user1@example.com"]), ["id", "email"]) == Counter(
        {(1, "user1@example.com"): 1}
    )
    with pytest.raises(li.VersionPurgedError):
        t.lookup("by_email", ["user1@example.com"], version_as_of=old)

    _no_subject_bytes(store, t, uri)


def _no_subject_bytes(store: StoreUnderTest, t: li.Table, root: str) -> None:
    """The residue scan finds nothing under ``root``, nor do raw reads of every object there
    (listed and read without lakehouse-index; gzip bodies decompressed)."""
    assert find_residue([root], SUBJECTS, storage=t.storage).ok
    for key in store.list_keys(store.key(root) + "/"):
        data = store.read_key(key)
        if data[:2] == b"\x1f\x8b":
            data = gzip.decompress(data)
        assert not any(s.encode() in data or s in key for s in SUBJECTS), key


def test_iceberg_erase_with_purge_on_the_store(store: StoreUnderTest, tmp_path: Path) -> None:
    from pyiceberg.catalog.sql import SqlCatalog

    warehouse = f"{store.root}/iceberg-erase-{uuid.uuid4().hex}"
    catalog = SqlCatalog(
        "stores", uri=f"sqlite:///{tmp_path}/catalog.db", warehouse=warehouse, **store.iceberg_properties
    )
    catalog.create_namespace("db")
    ice = catalog.create_table("db.t", schema=_batch(0, 1).schema)
    for b in range(3):
        ice.append(_batch(b * 100, 100))
    ice.delete("id < 20")  # pyiceberg's copy-on-write delete: a snapshot still holding subjects
    ice = catalog.load_table("db.t")
    old = ice.current_snapshot().snapshot_id
    before = rows_multiset(ice.scan().to_arrow(), ["id", "email"])
    t = li.open_table("db.t", catalog=catalog, storage_options=store.storage_options)
    t.create_index(li.SecondaryIndex("by_email", key="email"))

    result = t.erase("by_email", SUBJECTS, purge=True)

    assert result.verification is not None and result.verification["ok"]
    after = catalog.load_table("db.t").scan().to_arrow()
    want = Counter({r: c for r, c in before.items() if r[1] not in SUBJECTS})
    assert rows_multiset(after, ["id", "email"]) == want
    assert t.lookup("by_email", SUBJECTS).num_rows == 0
    assert t.scan(where=f"email IN ('{SUBJECTS[0]}', '{SUBJECTS[1]}')").num_rows == 0
    with pytest.raises(li.VersionPurgedError):
        t.lookup("by_email", ["user1@example.com"], version_as_of=old)
    _no_subject_bytes(store, t, warehouse)
