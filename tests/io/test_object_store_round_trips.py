"""Sequential round trips of reads on an object store (moto S3 behind a proxy that delays and
records every request; requests in flight together count once): what each costs in latency.

* A Delta table opened cold reads its commits since the last checkpoint together, not one
  after the other.
* Probing for a new commit when there is none is one request.
* A lookup in a data file read for the first time fetches the dictionary pages it needs in
  the same round trip as the data pages.

Every answer is also checked against a plain scan of the table.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from deltalake import DeltaTable, write_deltalake

import lakehouse_index as li
from integration.bench.latency import DelayProxy, RequestLog, rounds
from lakehouse_index.config import Config
from lakehouse_index.io import Storage
from lakehouse_index.read.footers import clear_footer_cache
from tests.support.moto import moto_s3, s3_client

BUCKET = "round-trips"
COMMITS = 12
#: More rows per file than ReadConfig.page_read_min_rows: read page by page.
ROWS = 10_000
#: Long enough that requests issued together always overlap, however the machine is loaded.
DELAY = 0.1


@dataclass(frozen=True)
class Served:
    """The table on S3 (through the proxy), the proxy's request log, and the local original."""

    uri: str
    options: dict[str, str]
    log: RequestLog
    local: Path


def _rows(i: int) -> pa.Table:
    ids = list(range(i * ROWS, (i + 1) * ROWS))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "email": [f"user{n:07d}@example.com" for n in ids],
            "payload": [f"payload-{n % 37}" for n in ids],
        }
    )


@pytest.fixture(scope="module")
def moto() -> Iterator[tuple[dict[str, str], RequestLog, str]]:
    """moto (its direct options), and the delaying proxy in front of it (its log and url)."""
    with moto_s3(BUCKET) as direct:
        log = RequestLog(DELAY)
        proxy = DelayProxy(int(direct["AWS_ENDPOINT_URL"].rsplit(":", 1)[1]), log)
        try:
            yield direct, log, proxy.url
        finally:
            proxy.close()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, moto: tuple[dict[str, str], RequestLog, str]) -> Served:
    """A Delta table of ``COMMITS`` appends (no checkpoint) with a secondary index, on S3."""
    direct, log, url = moto
    local = tmp_path_factory.mktemp("rt") / "t"
    for i in range(COMMITS):
        write_deltalake(str(local), _rows(i), mode="append")
    assert not list((local / "_delta_log").glob("*.checkpoint.parquet"))
    li.open_table(str(local)).create_index(li.SecondaryIndex("by_email", key="email", record_key="id"))
    client = s3_client(direct)
    for f in sorted(Path(local).rglob("*")):
        if f.is_file():
            client.upload_file(str(f), BUCKET, f"t/{f.relative_to(local).as_posix()}")
    return Served(f"s3://{BUCKET}/t", {**direct, "AWS_ENDPOINT_URL": url}, log, local)


def _config() -> Config:
    cfg = Config()
    return replace(cfg, planner=replace(cfg.planner, force_index=True))


def _kind(log: RequestLog, kind: str) -> list[tuple[float, float, str]]:
    return [r for r in log.requests if r[2] == kind]


def _truth(local: Path, email: str) -> list[int]:
    """A plain scan of the local original (deltalake reads it)."""
    rows = DeltaTable(str(local)).to_pyarrow_table()
    return sorted(rows.filter(pc.equal(rows["email"], email))["id"].to_pylist())


def test_read_many_keeps_order_marks_missing_and_reads_together(tmp_path: Path, served: Served) -> None:
    remote = Storage.for_uri(served.uri, served.options)
    names = [f"{served.uri}/_delta_log/{v:020d}.json" for v in (3, 0, COMMITS + 5, 1)]
    # The client's connections are opened by a first call: what is measured is how read_many
    # issues its reads, not how fast the proxy and the in-process emulator accept new
    # connections (under load, a run saw only 2 of the 4 first requests go out together, then
    # the rest one after another, with read_many's 4 threads running).
    remote.read_many(names)
    served.log.clear()
    got = remote.read_many(names)
    # A HEAD and a GET per object present, a HEAD for the absent one: 7 round trips one after
    # the other. Together: the HEADs overlap, then the GETs (which pyarrow's S3 client
    # sometimes issues one after another): 2 to 4.
    # On failure: the requests, and this process's threads by name.
    threads = sorted(t.name.rsplit("_", 1)[0] for t in threading.enumerate())
    assert len(served.log.requests) == 7 and rounds(served.log.requests) <= 4, (served.log.requests, threads)
    assert [g is None for g in got] == [False, False, True, False]
    for name, data in zip(names, got, strict=True):
        if data is not None:
            assert data == (served.local / "_delta_log" / name.rsplit("/", 1)[1]).read_bytes()
    (tmp_path / "a").write_bytes(b"x")
    local = Storage.for_uri(str(tmp_path))
    assert local.read_many([str(tmp_path / "b"), str(tmp_path / "a")]) == [None, b"x"]


def test_cold_open_reads_commits_together(served: Served) -> None:
    served.log.clear()
    t = li.open_table(served.uri, storage_options=served.options, config=_config())
    assert t.latest_version() == COMMITS - 1
    commits = _kind(served.log, "table-log")
    # Each commit costs a HEAD and a GET: one after the other that would be 2 x COMMITS + 3
    # round trips (27); read together, about 6 (the listing, the HEADs, the GETs, the probe),
    # a few more when pyarrow's S3 client issues some GETs one after another.
    assert len(commits) >= 2 * COMMITS
    assert rounds(commits) <= 12, sorted(commits)


def test_probe_for_a_new_commit_is_one_request(served: Served) -> None:
    t = li.open_table(served.uri, storage_options=served.options, config=_config())
    t.lookup("by_email", ["user0000001@example.com"])
    served.log.clear()
    email = "user0000002@example.com"
    assert t.lookup("by_email", [email])["id"].to_pylist() == _truth(served.local, email)
    assert len(_kind(served.log, "table-log")) == 1


@pytest.mark.parametrize("n", [5, 3 * ROWS + 7, COMMITS * ROWS - 1])
def test_first_read_of_a_file_fetches_dictionaries_with_its_pages(served: Served, n: int) -> None:
    email = f"user{n:07d}@example.com"
    clear_footer_cache()
    t = li.open_table(served.uri, storage_options=served.options, config=_config())
    t.locate("by_email", [email])  # the index's footers: the round trips below are the data file's
    served.log.clear()
    got = t.lookup("by_email", [email])
    assert sorted(got["id"].to_pylist()) == _truth(served.local, email) == [n]
    assert got.column_names == ["id", "email", "payload"]
    data = _kind(served.log, "table-data")
    # The file's size (HEAD), its footer, then every page the row needs: data and dictionary
    # pages in one round trip (before: a fourth, for the dictionaries).
    assert rounds(data) == 3, sorted(data)


def test_iceberg_snapshot_reads_its_manifests_together(
    tmp_path: Path, moto: tuple[dict[str, str], RequestLog, str]
) -> None:
    from pyiceberg.catalog.sql import SqlCatalog

    direct, log, url = moto
    warehouse = f"s3://{BUCKET}/iceberg"
    catalog = SqlCatalog(
        "rt",
        uri=f"sqlite:///{tmp_path}/catalog.db",
        warehouse=warehouse,
        **{
            "s3.endpoint": direct["AWS_ENDPOINT_URL"],
            "s3.access-key-id": direct["AWS_ACCESS_KEY_ID"],
            "s3.secret-access-key": direct["AWS_SECRET_ACCESS_KEY"],
            "s3.region": direct["AWS_REGION"],
        },
    )
    catalog.create_namespace("db")
    ice = catalog.create_table("db.t", schema=_rows(0).schema)
    appends = 2 * COMMITS
    for i in range(appends):
        ice.append(_rows(i % COMMITS).slice(0, 50))  # one manifest each
    location = catalog.load_table("db.t").metadata_location.rsplit("/metadata/", 1)[0]
    log.clear()
    t = li.open_table(location, storage_options={**direct, "AWS_ENDPOINT_URL": url}, config=_config())
    snap = t.snapshot()
    expected = ice.scan().to_arrow()
    assert len(snap.files) == appends
    assert sum(f.num_records or 0 for f in snap.files.values()) == expected.num_rows
    metadata = _kind(log, "table-log")
    # Each manifest costs a HEAD and a GET: one after the other that would be 2 x appends
    # round trips. Read together, two, after the 11 of finding the table (format detection,
    # the version hint, the listing of metadata/, the metadata JSON, the latest-version check)
    # and of the manifest list.
    assert len(metadata) >= 2 * appends
    assert rounds(metadata) <= 16, sorted(metadata)
