"""Writes through the API on an object store: append, overwrite, delete, update and upsert of a
Delta table and an Iceberg table on a moto S3 server on loopback, opened with ``storage_options``.

After every write each index follows its policy (incremental, quick, off), and every version
so far answers lookups, locates and scans like the format library's own reader of the S3
table (deltalake / pyiceberg), read independently of this project.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

import lakehouse_index as li
from lakehouse_index.workflows.reports import Action
from tests.support.moto import moto_s3, s3_client
from tests.workflows.helpers import check_all, create_indexes, rows

BUCKET = "writes-s3"
FIRST = [(i, "abc"[i % 3], i % 3, 10 * i, "xy"[i % 2]) for i in range(12)]


@pytest.fixture(scope="module")
def s3() -> Iterator[dict[str, str]]:
    with moto_s3(BUCKET) as options:
        yield options


def _writes(t: li.Table) -> list[Callable[[], li.WriteResult]]:
    """The five operations, each touching keys the indexes hold."""
    return [
        lambda: t.append(rows([(100, "a", 1, 5, "x"), (101, "c", 2, 55, "y")])),
        lambda: t.overwrite(rows([(102, "b", 1, 7, "y")]), where="k2 = 2"),
        lambda: t.delete("k = 'a' AND v > 50"),
        lambda: t.update("k2 = 1", set={"v": 33}),
        lambda: t.upsert(rows([(0, "a", 0, 1, "x"), (103, "b", 2, 9, "x")]), on=["id"]),
    ]


def _run(t: li.Table, read: Callable[[Any], pa.Table]) -> None:
    create_indexes(t)
    versions = [t.latest_version()]
    check_all(t, versions, read)
    for write in _writes(t):
        result = write()
        assert result.table_version == t.latest_version() != versions[-1]
        by_name = {r.name: r for r in result.indexes}
        assert by_name["by_k"].action in (Action.INCREMENTAL, Action.WRITE_JOB)
        assert by_name["by_k"].indexed_version == result.table_version  # incremental: caught up
        assert by_name["by_kk"].action is Action.QUICK and by_name["cov"].action is Action.REPORTED
        versions.append(result.table_version)
        check_all(t, versions, read)


def _objects(s3: dict[str, str], prefix: str) -> list[str]:
    client: Any = s3_client(s3)
    pages = client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix)
    return [o["Key"] for page in pages for o in page.get("Contents", [])]


def test_delta_writes_on_s3(s3: dict[str, str]) -> None:
    uri = f"s3://{BUCKET}/delta"
    native = {**s3, "AWS_ALLOW_HTTP": "true"}
    write_deltalake(uri, rows(FIRST), partition_by=["p"], storage_options=native)
    t = li.open_table(uri, storage_options=s3)

    def read(version: Any) -> pa.Table:
        return DeltaTable(uri, version=version, storage_options=native).to_pyarrow_table()

    _run(t, read)
    keys = _objects(s3, "delta/")
    assert any(k.startswith("delta/_lakehouse_index/by_k/_log/") for k in keys)  # the index lives on S3


def test_iceberg_writes_on_s3(s3: dict[str, str], tmp_path: Any) -> None:
    from pyiceberg.catalog.sql import SqlCatalog

    catalog = SqlCatalog(
        "s3cat",
        uri=f"sqlite:///{tmp_path}/catalog.db",
        warehouse=f"s3://{BUCKET}/warehouse",
        **{
            "s3.endpoint": s3["AWS_ENDPOINT_URL"],
            "s3.access-key-id": s3["AWS_ACCESS_KEY_ID"],
            "s3.secret-access-key": s3["AWS_SECRET_ACCESS_KEY"],
            "s3.region": s3["AWS_REGION"],
        },
    )
    catalog.create_namespace("db")
    tbl = catalog.create_table("db.t", schema=rows(FIRST).schema)
    with tbl.update_spec() as spec:
        spec.add_identity("p")
    tbl.append(rows(FIRST))
    t = li.open_table("db.t", catalog=catalog, storage_options=s3)

    def read(version: Any) -> pa.Table:
        return catalog.load_table("db.t").scan(snapshot_id=version).to_arrow()

    _run(t, read)
    assert tbl.location().startswith(f"s3://{BUCKET}/")
    assert any("/_lakehouse_index/by_k/_log/" in k for k in _objects(s3, "warehouse/"))
