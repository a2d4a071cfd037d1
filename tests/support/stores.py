"""The object stores the tests run on, each behind an emulator on loopback started once per session.

A :class:`StoreUnderTest` carries what a test needs besides the code under test: the options
of lakehouse-index (``storage_options``), of deltalake and of pyiceberg for the same store,
and an independent view of its objects (boto3 on S3, Azurite's REST API on Azure) to check
what the library wrote.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from tests.support.azurite import ACCOUNT, ACCOUNT_KEY, azurite, get_blob, list_blobs
from tests.support.moto import moto_s3, s3_client

BUCKET = "lakehouse-stores"


@dataclass(frozen=True)
class StoreUnderTest:
    """One emulated object store: URIs, options per library, an independent object listing."""

    name: str
    #: ``<scheme>://<bucket>``: tests put their tables below it.
    root: str
    storage_options: dict[str, str]
    #: deltalake's options (the tests' Delta writer).
    delta_options: dict[str, str]
    #: pyiceberg catalog properties (the tests' Iceberg writer).
    iceberg_properties: dict[str, str]
    #: Keys below a prefix of the bucket, listed without lakehouse-index.
    list_keys: Callable[[str], list[str]]
    #: One object's bytes, read without lakehouse-index.
    read_key: Callable[[str], bytes]

    def key(self, uri: str) -> str:
        """The key of ``uri`` inside this store's bucket."""
        assert uri.startswith(self.root + "/"), uri
        return uri[len(self.root) + 1 :]


def _s3() -> Iterator[StoreUnderTest]:
    with moto_s3(BUCKET) as options:
        client: Any = s3_client(options)

        def list_keys(prefix: str) -> list[str]:
            pages = client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix)
            return [o["Key"] for page in pages for o in page.get("Contents", [])]

        yield StoreUnderTest(
            "s3",
            f"s3://{BUCKET}",
            options,
            # Delta commits are conditional creates too (moto honours If-None-Match), so
            # concurrent deltalake writers need no locking provider.
            {**options, "AWS_ALLOW_HTTP": "true", "AWS_CONDITIONAL_PUT": "etag"},
            {
                "s3.endpoint": options["AWS_ENDPOINT_URL"],
                "s3.access-key-id": options["AWS_ACCESS_KEY_ID"],
                "s3.secret-access-key": options["AWS_SECRET_ACCESS_KEY"],
                "s3.region": options["AWS_REGION"],
                "py-io-impl": "pyiceberg.io.pyarrow.PyArrowFileIO",
            },
            list_keys,
            lambda key: bytes(client.get_object(Bucket=BUCKET, Key=key)["Body"].read()),
        )


def _azure() -> Iterator[StoreUnderTest]:
    with azurite(BUCKET) as options:
        endpoint = options["azure_storage_endpoint"]
        authority = endpoint.split("://", 1)[1].split("/", 1)[0]
        yield StoreUnderTest(
            "azure",
            # abfs:// is the spelling pyiceberg writes; lakehouse-index serves az:// the same way.
            f"abfs://{BUCKET}",
            options,
            options,
            {
                "py-io-impl": "pyiceberg.io.pyarrow.PyArrowFileIO",
                "adls.account-name": ACCOUNT,
                "adls.account-key": ACCOUNT_KEY,
                "adls.blob-storage-authority": authority,
                "adls.blob-storage-scheme": "http",
                "adls.dfs-storage-authority": authority,
                "adls.dfs-storage-scheme": "http",
            },
            lambda prefix: list_blobs(endpoint, BUCKET, prefix),
            lambda key: get_blob(endpoint, BUCKET, key),
        )


@pytest.fixture(scope="session")
def s3_store() -> Iterator[StoreUnderTest]:
    """S3 on a moto server (one per test session)."""
    yield from _s3()


@pytest.fixture(scope="session")
def azure_store() -> Iterator[StoreUnderTest]:
    """Azure Blob Storage on Azurite (one per test session)."""
    yield from _azure()


#: The stores with conditional creates, by name (the GCS emulator has none: see test_conditional_create).
STORES = ("s3", "azure")


@pytest.fixture(params=STORES)
def store(request: pytest.FixtureRequest) -> StoreUnderTest:
    """Each store with conditional creates in turn."""
    found: StoreUnderTest = request.getfixturevalue(f"{request.param}_store")
    return found
