"""The engine race on S3: eight processes run real index operations on one index whose table
and index both live on a moto S3 server on loopback, while the table changes.

No JVM: the table is small, so builds and refreshes index in process (pyarrow on S3);
quick refreshes, delete and restore are metadata only. The parent appends files and runs
copy-on-write deletes (lineage remap) with deltalake on S3. Afterwards the log, listed
and parsed with boto3 and ``json``, shows contiguous slots each written once, every
operation a transient entry followed by its final entry by the same process, and the
index answers like deltalake's read of the S3 table.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from deltalake import DeltaTable, write_deltalake
from enginetest_helpers import INDEX, KEYS, batch, check_race_log, secondary
from enginetest_workers import attempt, collect_outcomes, start_racers

import lakehouse_index as li
from tests.support.moto import moto_s3, s3_client

BUCKET = "engine-race"
RACERS = ("local-refresh", "local-refresh", "quick", "quick", "quick", "delete", "delete", "incremental")


@pytest.fixture(scope="module")
def s3() -> Iterator[dict[str, str]]:
    with moto_s3(BUCKET) as options:
        yield options


def _writer_options(s3: dict[str, str]) -> dict[str, str]:
    # deltalake on moto: plain HTTP, and the parent is the table's only writer.
    return {**s3, "AWS_ALLOW_HTTP": "true", "AWS_S3_ALLOW_UNSAFE_RENAME": "true"}


def _oracle(uri: str, s3: dict[str, str]) -> Counter[tuple[Any, int]]:
    rows = DeltaTable(uri, storage_options=_writer_options(s3)).to_pyarrow_table(columns=["k", "id"])
    wanted = set(KEYS)
    return Counter((r["k"], r["id"]) for r in rows.to_pylist() if r["k"] in wanted)


def _answers(t: li.Table, uri: str, s3: dict[str, str]) -> None:
    want = _oracle(uri, s3)
    got = t.lookup(INDEX, list(KEYS), columns=["k", "id"])
    assert Counter(zip(got["k"].to_pylist(), got["id"].to_pylist(), strict=True)) == want
    loc = t.locate(INDEX, list(KEYS))
    assert Counter(zip(loc["k"].to_pylist(), loc["id"].to_pylist(), strict=True)) == want


def _log(s3: dict[str, str], prefix: str) -> dict[int, dict[str, Any]]:
    """Every log slot, from a raw S3 listing, parsed with json."""
    client: Any = s3_client(s3)
    pages = client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix)
    out = {}
    for page in pages:
        for obj in page.get("Contents", []):
            name = obj["Key"].rsplit("/", 1)[-1]
            assert name.endswith(".json") and len(name) == 25, f"stray object in the log: {obj['Key']}"
            body = client.get_object(Bucket=BUCKET, Key=obj["Key"])["Body"].read()
            out[int(name[:20])] = json.loads(body)
    return dict(sorted(out.items()))


def test_eight_processes_race_on_an_s3_index(s3: dict[str, str]) -> None:
    uri = f"s3://{BUCKET}/t"
    for b in range(4):
        write_deltalake(uri, batch(b), mode="append", storage_options=_writer_options(s3))
    t = li.open_table(uri, storage_options=s3)
    t.create_index(secondary())  # in process: no Spark, no Hadoop S3 jars
    _answers(t, uri, s3)

    procs, barrier, go_incremental, stop, results = start_racers(uri, RACERS, s3)
    barrier.wait(timeout=600)
    tally = {"busy": 0, "lost": 0, "deleted": 0}
    for b in (10, 11, 12):
        write_deltalake(uri, batch(b), mode="append", storage_options=_writer_options(s3))
        time.sleep(0.5)
    go_incremental.set()
    # Copy-on-write deletes of some rows of every file: refreshes remap the rewritten files.
    for cond in ("id % 5 = 1", "batch = 2", "id % 7 = 3"):
        DeltaTable(uri, storage_options=_writer_options(s3)).delete(cond)
        time.sleep(0.5)
    stop.set()

    outcomes, retries = collect_outcomes(procs, results)
    assert retries["busy"] + retries["lost"] > 0, f"no process ever lost a race: {retries}"
    # The log, listed and read from S3 with boto3: one writer per slot, well-formed operations.
    check_race_log(_log(s3, "t/_lakehouse_index/by_k/_log/"), {pid: done for _, pid, _, done, _ in outcomes})

    # The final index answers like deltalake, also after a last refresh.
    attempt(lambda: t.refresh_index(INDEX, "incremental"), tally, time.monotonic() + 120)
    [info] = t.indexes()
    assert info.state is li.IndexState.ACTIVE
    assert info.indexed_version == DeltaTable(uri, storage_options=_writer_options(s3)).version()
    _answers(t, uri, s3)
