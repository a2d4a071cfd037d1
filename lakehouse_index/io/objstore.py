"""Google Cloud Storage and Azure Blob Storage (``gs://``, ``az://``, ``abfs[s]://``) through obstore.

`obstore <https://pypi.org/project/obstore/>`_ (the Rust ``object_store`` crate that
deltalake uses too) serves reads, listings and plain writes (as a pyarrow filesystem,
:mod:`lakehouse_index.io.obstore_fs`) and the index log's *create if absent*: ``put(..., mode="create")``, a
``PUT`` with ``x-goog-if-generation-match: 0`` on GCS and ``If-None-Match: *`` on Azure.

A store that ignores those preconditions (an emulator, a gateway) would let two writers both
"win" one log slot, a lost update. So before its first log write a process proves, once per
bucket, that the store refuses a second create of one probe object; where it cannot prove it,
:class:`~lakehouse_index.io.base.ConditionalWriteUnsupportedError` refuses the write and
nothing is written to the log.

``storage_options`` use deltalake's (``object_store``'s) names, e.g.
``google_service_account_key``, ``azure_storage_account_name``,
``azure_storage_account_key``, ``azure_storage_endpoint``; the HTTP client's
``allow_http``, ``timeout`` and similar keys are recognised as such.
"""

from __future__ import annotations

import contextlib
import threading
import uuid
from collections.abc import Mapping
from typing import Any, ClassVar

import pyarrow.fs as pafs

from lakehouse_index.io.base import ConditionalWriteUnsupportedError, ObjectExistsError, StorageBackend
from lakehouse_index.io.obstore_fs import ObstoreHandler

__all__ = ["AzureBackend", "GcsBackend", "ObjectStoreBackend", "bucket_and_key"]

#: ``object_store`` HTTP client options (the rest of ``storage_options`` configures the store).
_CLIENT_KEYS = frozenset(
    {
        "allow_http",
        "allow_invalid_certificates",
        "connect_timeout",
        "default_content_type",
        "http1_only",
        "http2_only",
        "pool_idle_timeout",
        "pool_max_idle_per_host",
        "proxy_url",
        "timeout",
        "user_agent",
    }
)
#: Prefix of the probe objects (removed after the probe).
PROBE_PREFIX = "_lakehouse_index_probe"
#: Buckets whose conditional creates this process has proven, by (scheme, bucket, options).
_PROVEN: set[tuple[str, str, tuple[tuple[str, str], ...]]] = set()
_PROVEN_LOCK = threading.Lock()


def bucket_and_key(uri: str) -> tuple[str, str]:
    """(bucket or container, key) of ``gs://b/k``, ``az://c/k`` or ``abfss://c@account.host/k``."""
    authority, _, key = uri.split("://", 1)[-1].partition("/")
    return authority.split("@", 1)[0], key


def _split_options(options: Mapping[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    config: dict[str, str] = {}
    client: dict[str, str] = {}
    for k, v in options.items():
        (client if k.lower() in _CLIENT_KEYS else config)[k.lower() if k.lower() in _CLIENT_KEYS else k] = v
    return config, client


class ObjectStoreBackend(StorageBackend):
    """A store reached through obstore (imported on first use); subclasses name its protocol."""

    #: obstore's name of the store (``gs``, ``az``); URIs of alias schemes map to it.
    protocol: ClassVar[str]

    def _store(self, uri: str) -> Any:
        """The obstore store of ``uri``'s bucket (cached per bucket)."""
        from obstore.store import from_url

        bucket, _ = bucket_and_key(uri)
        stores: dict[str, Any] = self.__dict__.setdefault("_stores", {})
        key = f"{self.protocol}://{bucket}"
        found = stores.get(key)
        if found is None:
            config, client = _split_options(self.options)
            found = from_url(key, config=config, client_options=client)  # type: ignore[call-overload]
            stores[key] = found
        return found

    def filesystem(self) -> pafs.FileSystem:
        return pafs.PyFileSystem(ObstoreHandler(self.protocol, self._bucket_store))

    def _bucket_store(self, bucket: str) -> Any:
        return self._store(f"{self.protocol}://{bucket}")

    def path(self, uri: str) -> str:
        bucket, key = bucket_and_key(uri)
        return f"{bucket}/{key}" if key else bucket

    def _prove_conditional_create(self, uri: str) -> None:
        """Refuse (ConditionalWriteUnsupportedError) unless the store rejects a second create."""
        import obstore
        from obstore.exceptions import AlreadyExistsError, PreconditionError

        bucket, _ = bucket_and_key(uri)
        proven_key = (self.protocol, bucket, tuple(sorted(self.options.items())))
        with _PROVEN_LOCK:
            if proven_key in _PROVEN:
                return
        store = self._store(uri)
        probe = f"{PROBE_PREFIX}/{uuid.uuid4().hex}"
        where = f"{self.protocol}://{bucket}"
        try:
            obstore.put(store, probe, b"1", mode="create")
            try:
                obstore.put(store, probe, b"2", mode="create")
            except (AlreadyExistsError, PreconditionError):
                pass
            else:
                raise ConditionalWriteUnsupportedError(
                    f"the store at {where} accepted a second create of one object (it ignores "
                    "x-goog-if-generation-match: 0 / If-None-Match: *); two writers could both take "
                    "one index log slot, so lakehouse-index refuses to write its log there"
                )
        except ConditionalWriteUnsupportedError:
            raise
        except Exception as e:  # any failure leaves the guarantee unproven
            raise ConditionalWriteUnsupportedError(
                f"could not verify that the store at {where} honours conditional creates "
                f"({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}); "
                "lakehouse-index refuses to write its index log there"
            ) from e
        finally:
            with contextlib.suppress(Exception):  # the probe may not exist
                obstore.delete(store, probe)
        with _PROVEN_LOCK:
            _PROVEN.add(proven_key)

    def put_if_absent(self, uri: str, data: bytes) -> None:
        import obstore
        from obstore.exceptions import AlreadyExistsError, PreconditionError

        self._prove_conditional_create(uri)
        _, key = bucket_and_key(uri)
        try:
            obstore.put(self._store(uri), key, data, mode="create")
        except (AlreadyExistsError, PreconditionError) as e:
            raise ObjectExistsError(uri) from e


class GcsBackend(ObjectStoreBackend):
    """Google Cloud Storage (``gs://``; ``gcs://`` is an alias)."""

    protocol = "gs"


class AzureBackend(ObjectStoreBackend):
    """Azure Blob Storage / ADLS Gen2 (``az://``, ``abfs://``, ``abfss://``).

    The container is the URI's authority (``abfss://container@account.dfs.core.windows.net``:
    the part before ``@``); the account comes from ``azure_storage_account_name``.
    """

    protocol = "az"
