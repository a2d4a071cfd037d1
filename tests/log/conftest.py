"""Fixtures for the index log tests: local and S3 (moto server on 127.0.0.1) backends."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from lakehouse_index.io import Storage
from tests.support.moto import moto_s3

BUCKET = "lakehouse-index-log-tests"


@dataclass(frozen=True)
class Backend:
    """Where an index lives in a test: the storage, its options and the index directory."""

    kind: str
    storage: Storage
    options: dict[str, str]
    index_dir: str

    @property
    def root(self) -> str:
        return self.index_dir.rsplit("/", 1)[0]


@pytest.fixture(scope="session")
def s3_options() -> Iterator[dict[str, str]]:
    """A moto S3 server on loopback with one bucket; the storage_options to reach it."""
    with moto_s3(BUCKET) as options:
        yield options


def make_backend(kind: str, tmp_path, s3_options: dict[str, str] | None, name: str = "idx") -> Backend:
    if kind == "local":
        root = "file://" + str(tmp_path / "table" / "_lakehouse_index")
        return Backend(kind, Storage.for_uri(root), {}, f"{root}/{name}")
    assert s3_options is not None
    root = f"s3://{BUCKET}/{uuid.uuid4().hex}/_lakehouse_index"
    return Backend(kind, Storage.for_uri(root, s3_options), dict(s3_options), f"{root}/{name}")


@pytest.fixture(params=["local", "s3"])
def backend(request, tmp_path) -> Backend:
    """An empty index directory on local disk, then on moto S3."""
    s3 = request.getfixturevalue("s3_options") if request.param == "s3" else None
    return make_backend(request.param, tmp_path, s3)


@pytest.fixture
def local(tmp_path) -> Backend:
    """An empty index directory on local disk."""
    return make_backend("local", tmp_path, None)
