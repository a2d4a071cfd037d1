"""Azurite (the Azure Storage emulator, npm ``azurite``) on loopback, for the object-store tests.

``make setup`` installs it into ``tools/node`` (``tools/node/package.json``). The server runs
in its own process group, in memory, and is stopped by its pid.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import signal
import subprocess
import urllib.parse
import urllib.request
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from contextlib import contextmanager
from email.utils import formatdate

from tests.support.paths import REPO_ROOT
from tests.support.ports import free_port, wait_for_port

AZURITE = REPO_ROOT / "tools" / "node" / "node_modules" / ".bin" / "azurite-blob"
#: Azurite's documented development account (public, fixed by the emulator).
ACCOUNT = "devstoreaccount1"
ACCOUNT_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
API_VERSION = "2021-08-06"


def _signed_request(endpoint: str, method: str, path: str, query: dict[str, str]) -> urllib.request.Request:
    """A Shared Key signed request without a body (container operations)."""
    date = formatdate(usegmt=True)
    headers = {"x-ms-date": date, "x-ms-version": API_VERSION}
    canonical_headers = "".join(f"{k}:{v}\n" for k, v in sorted(headers.items()))
    # Path-style URLs (the emulator's) name the account twice: once here, once in the path.
    canonical_resource = f"/{ACCOUNT}/{ACCOUNT}{path}" + "".join(
        f"\n{k}:{v}" for k, v in sorted(query.items())
    )
    # VERB, then 11 standard headers (all empty here, Content-Length included), then ours.
    to_sign = method + "\n" * 12 + canonical_headers + canonical_resource
    mac = hmac.new(base64.b64decode(ACCOUNT_KEY), to_sign.encode(), hashlib.sha256).digest()
    headers["Authorization"] = f"SharedKey {ACCOUNT}:{base64.b64encode(mac).decode()}"
    # Characters the path may keep as they are (Hive partition folders: "p=0"), so the URL and
    # the signed resource spell it alike.
    url = f"{endpoint}{urllib.parse.quote(path, safe='/=')}?" + urllib.parse.urlencode(query)
    return urllib.request.Request(url, method=method, headers=headers)


def create_container(endpoint: str, name: str) -> None:
    """Create a blob container on the Azurite behind ``endpoint`` (``http://host:port/account``)."""
    with urllib.request.urlopen(_signed_request(endpoint, "PUT", f"/{name}", {"restype": "container"})) as r:
        assert r.status == 201, r.status


def list_blobs(endpoint: str, container: str, prefix: str) -> list[str]:
    """Names of the blobs under ``prefix`` (List Blobs, one page: the tests hold few)."""
    query = {"comp": "list", "prefix": prefix, "restype": "container"}
    with urllib.request.urlopen(_signed_request(endpoint, "GET", f"/{container}", query)) as r:
        root = ET.fromstring(r.read())
    assert root.findtext("NextMarker") in (None, ""), "more than one page of blobs"
    return [b.findtext("Name") or "" for b in root.iter("Blob")]


def get_blob(endpoint: str, container: str, name: str) -> bytes:
    """One blob's bytes (Get Blob)."""
    with urllib.request.urlopen(_signed_request(endpoint, "GET", f"/{container}/{name}", {})) as r:
        return bytes(r.read())


@contextmanager
def azurite(*containers: str) -> Iterator[dict[str, str]]:
    """Start Azurite's blob service on 127.0.0.1, create ``containers``; yield the storage_options."""
    if not AZURITE.exists():
        raise RuntimeError(f"{AZURITE} is missing: run `make setup` (npm ci in tools/node)")
    port = free_port()
    proc = subprocess.Popen(
        [
            str(AZURITE),
            "--blobHost",
            "127.0.0.1",
            "--blobPort",
            str(port),
            "--inMemoryPersistence",
            "--skipApiVersionCheck",
            "--silent",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        wait_for_port(port, proc)
        endpoint = f"http://127.0.0.1:{port}/{ACCOUNT}"
        for c in containers:
            create_container(endpoint, c)
        yield {
            "azure_storage_account_name": ACCOUNT,
            "azure_storage_account_key": ACCOUNT_KEY,
            "azure_storage_endpoint": endpoint,
            "allow_http": "true",
        }
    finally:
        # Killed outright: its blobs live in memory, and on SIGTERM it waits for every idle
        # keep-alive connection of the clients to close (30 s in a run of the vacuum tests).
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
