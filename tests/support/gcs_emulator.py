"""``gcp-storage-emulator`` (PyPI) on loopback, for the object-store tests.

It serves GCS's JSON API (and XML uploads and downloads) in process, in memory. It ignores
``ifGenerationMatch`` preconditions, so the index log must refuse it.
"""

from __future__ import annotations

import json
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from tests.support.ports import free_port


@dataclass(frozen=True)
class GcsEmulator:
    """A running emulator: its URL and the storage_options that reach it (no OAuth, no metadata server)."""

    endpoint: str
    storage_options: dict[str, str]

    def upload(self, bucket: str, name: str, data: bytes, *, if_generation_match: int | None = None) -> int:
        """A JSON API media upload (optionally conditional); the HTTP status."""
        query = {"uploadType": "media", "name": name}
        if if_generation_match is not None:
            query["ifGenerationMatch"] = str(if_generation_match)
        url = f"{self.endpoint}/upload/storage/v1/b/{bucket}/o?{urllib.parse.urlencode(query)}"
        req = urllib.request.Request(url, data=data, method="POST")
        try:
            with urllib.request.urlopen(req) as r:
                return int(r.status)
        except urllib.error.HTTPError as e:
            return int(e.code)

    def names(self, bucket: str) -> list[str]:
        """Every object name in ``bucket`` (JSON API listing)."""
        with urllib.request.urlopen(f"{self.endpoint}/storage/v1/b/{bucket}/o") as r:
            return sorted(item["name"] for item in json.load(r).get("items", []))

    def download(self, bucket: str, name: str) -> bytes:
        """One object's bytes (JSON API media download)."""
        quoted = urllib.parse.quote(name, safe="")
        with urllib.request.urlopen(f"{self.endpoint}/storage/v1/b/{bucket}/o/{quoted}?alt=media") as r:
            return bytes(r.read())


@contextmanager
def gcs_emulator(bucket: str) -> Iterator[GcsEmulator]:
    """Start the emulator on 127.0.0.1 (a free port) with ``bucket``; stop it afterwards."""
    from gcp_storage_emulator.server import create_server

    port = free_port()
    server = create_server("127.0.0.1", port, in_memory=True, default_bucket=bucket)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    # object_store's emulator credentials: a service-account key that disables OAuth, so no
    # token is ever requested (and no metadata server is contacted).
    key = {
        "gcs_base_url": endpoint,
        "disable_oauth": True,
        "client_email": "",
        "private_key": "",
        "private_key_id": "",
    }
    try:
        # The emulator serves one connection at a time and stops only when idle kept-alive
        # connections are gone: close them soon.
        options = {
            "google_service_account_key": json.dumps(key),
            "allow_http": "true",
            "pool_idle_timeout": "1s",
        }
        yield GcsEmulator(endpoint, options)
    finally:
        server.stop()
