"""The connector on S3 (moto server on 127.0.0.1): same files, DVs and tailing as on local disk."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from delta_helpers import PEER_TABLES, oracle_files
from lakehouse_index_delta import DeltaSource

from lakehouse_index.io import Storage
from tests.support.moto import moto_s3, s3_client


@pytest.fixture(scope="module")
def s3() -> Iterator[dict[str, str]]:
    with moto_s3() as options:
        yield options


def _upload(options: dict[str, str], bucket: str, local: Path, prefix: str) -> None:
    client: Any = s3_client(options)
    client.create_bucket(Bucket=bucket)
    for f in local.rglob("*"):
        if f.is_file():
            client.upload_file(str(f), bucket, f"{prefix}/{f.relative_to(local).as_posix()}")


@pytest.mark.parametrize("name", ["table-with-dv-small", "checkpoint-v2-table", "table_with_deletion_logs"])
def test_s3_table_matches_local(s3: dict[str, str], name: str) -> None:
    bucket = "lake-" + name.replace("_", "-").lower()[:40]
    local = PEER_TABLES / name
    _upload(s3, bucket, local, "t")
    uri = f"s3://{bucket}/t"
    io = Storage.for_uri(uri, s3)
    assert DeltaSource.detect(uri, io)
    src = DeltaSource.open(uri, io)
    assert src.uri == uri
    local_src = DeltaSource.open(str(local), Storage.for_uri(str(local)))
    assert [v.version for v in src.versions()] == [v.version for v in local_src.versions()]
    for info in src.versions():
        v = info.version
        remote = src.snapshot(v)
        expected = {p.replace(f"file://{local}", uri) for p in oracle_files(local, v)}
        assert set(remote.files) == expected, v
        local_snap = local_src.snapshot(v)
        for path, entry in remote.files.items():
            twin = local_snap.files[path.replace(uri, f"file://{local}")]
            assert src.deleted_positions(entry) == local_src.deleted_positions(twin)
    changes = list(src.changes(None))
    assert [c.version for c in changes] == [v.version for v in local_src.versions()]
