"""A long-lived source follows the table's current metadata: branches and tags that moved,
"main" by name, and snapshots that expired, compared with pyiceberg on freshly loaded tables."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from iceberg_oracle import live_rows, pyiceberg_rows
from lakehouse_index_iceberg import IcebergSource
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField, StringType

import lakehouse_index as li
from lakehouse_index.io import Storage
from lakehouse_index.source import VersionNotFoundError

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "k", StringType(), required=False),
)
ARROW = pa.schema([("id", pa.int64()), ("k", pa.string())])
NAMES = ["id", "k"]


def rows(ids: list[int], k: str = "a") -> pa.Table:
    return pa.table({"id": ids, "k": [k] * len(ids)}, schema=ARROW)


def open_catalog_source(catalog: Any) -> IcebergSource:
    table = catalog.load_table("db.t")
    return IcebergSource.open("db.t", Storage.for_uri(table.location()), catalog=catalog)


def check_ref(catalog: Any, src: IcebergSource, ref: str) -> None:
    """``ref`` resolves where a freshly loaded pyiceberg table says, with pyiceberg's rows."""
    fresh = catalog.load_table("db.t")
    want = fresh.metadata.refs[ref].snapshot_id
    assert src.resolve_version(ref) == want, ref
    assert live_rows(src, src.snapshot(want)) == pyiceberg_rows(fresh, want, NAMES), ref


def test_moved_branch_tag_and_main_resolve_from_the_current_metadata(catalog: Any) -> None:
    table = catalog.create_table("db.t", SCHEMA)
    table.append(rows([1, 2]))
    s1 = catalog.load_table("db.t").current_snapshot().snapshot_id
    catalog.load_table("db.t").manage_snapshots().create_branch(s1, "br").create_tag(s1, "tg").commit()
    src = open_catalog_source(catalog)
    for ref in ("br", "tg", "main"):
        assert src.resolve_version(ref) == s1
        src.snapshot(s1)  # cached, as a long-lived source has it

    # Another writer advances the branch, moves the tag, then commits to main.
    catalog.load_table("db.t").append(rows([3]), branch="br")
    br_head = catalog.load_table("db.t").metadata.refs["br"].snapshot_id
    catalog.load_table("db.t").manage_snapshots().remove_tag("tg").commit()
    catalog.load_table("db.t").manage_snapshots().create_tag(br_head, "tg").commit()
    for ref in ("br", "tg", "main"):
        check_ref(catalog, src, ref)
    catalog.load_table("db.t").append(rows([4]))
    main_head = catalog.load_table("db.t").current_snapshot().snapshot_id
    assert main_head != s1
    for ref in ("main", "br", "tg"):
        check_ref(catalog, src, ref)
    assert src.resolve_version("main") == src.resolve_version(None) == main_head

    # The metadata file is parsed again only when the catalog names another one.
    parsed = src.reads["metadata"]
    for ref in ("br", "tg", "main", None, s1, str(s1)):
        src.resolve_version(ref)
    assert src.reads["metadata"] == parsed


def test_moved_branch_through_the_table_api(catalog: Any) -> None:
    catalog.create_table("db.t", SCHEMA).append(rows([1, 2]))
    s1 = catalog.load_table("db.t").current_snapshot().snapshot_id
    catalog.load_table("db.t").manage_snapshots().create_branch(s1, "br").create_tag(s1, "tg").commit()
    t = li.open_table("db.t", catalog=catalog)
    t.create_index(li.SecondaryIndex("by_k", key="k"))
    assert sorted(t.lookup("by_k", ["a"], version_as_of="br")["id"].to_pylist()) == [1, 2]

    catalog.load_table("db.t").append(rows([3]), branch="br")
    br_head = catalog.load_table("db.t").metadata.refs["br"].snapshot_id
    catalog.load_table("db.t").manage_snapshots().remove_tag("tg").commit()
    catalog.load_table("db.t").manage_snapshots().create_tag(br_head, "tg").commit()
    t.lookup("by_k", ["a"], version_as_of="main")
    catalog.load_table("db.t").append(rows([4]))
    fresh = catalog.load_table("db.t")
    for ref in ("br", "tg", "main"):
        want = sorted(
            fresh.scan(snapshot_id=fresh.metadata.refs[ref].snapshot_id).to_arrow()["id"].to_pylist()
        )
        assert t.resolve_version(ref) == fresh.metadata.refs[ref].snapshot_id, ref
        assert sorted(t.lookup("by_k", ["a"], version_as_of=ref)["id"].to_pylist()) == want, ref
        assert sorted(t.scan(version_as_of=ref, where="k = 'a'")["id"].to_pylist()) == want, ref
    assert sorted(t.lookup("by_k", ["a"])["id"].to_pylist()) == [1, 2, 4]
    assert sorted(t.lookup("by_k", ["a"], version_as_of="br")["id"].to_pylist()) == [1, 2, 3]


def test_expired_snapshot_is_refused_as_by_a_fresh_source(catalog: Any) -> None:
    catalog.create_table("db.t", SCHEMA).append(rows([1]))
    s1 = catalog.load_table("db.t").current_snapshot().snapshot_id
    catalog.load_table("db.t").append(rows([2]))
    s2 = catalog.load_table("db.t").current_snapshot().snapshot_id
    src = open_catalog_source(catalog)
    assert src.resolve_version(s1) == s1
    src.snapshot(s1)  # cached
    t = li.open_table("db.t", catalog=catalog)
    t.create_index(li.SecondaryIndex("by_k", key="k"))
    assert sorted(t.lookup("by_k", ["a"], version_as_of=s1)["id"].to_pylist()) == [1]

    catalog.load_table("db.t").maintenance.expire_snapshots().by_id(s1).commit()
    fresh = catalog.load_table("db.t")
    assert s1 not in {s.snapshot_id for s in fresh.metadata.snapshots}
    with pytest.raises(VersionNotFoundError):
        open_catalog_source(catalog).resolve_version(s1)  # what a fresh source says
    for ref in (s1, str(s1)):
        with pytest.raises(VersionNotFoundError, match="does not exist"):
            src.resolve_version(ref)
    with pytest.raises(VersionNotFoundError):
        t.lookup("by_k", ["a"], version_as_of=s1)
    # The snapshot that is left still reads as pyiceberg reads it.
    assert src.resolve_version(s2) == s2
    assert live_rows(src, src.snapshot(s2)) == pyiceberg_rows(fresh, s2, NAMES)
    assert sorted(t.lookup("by_k", ["a"], version_as_of=s2)["id"].to_pylist()) == [1, 2]
