"""A moto S3 server on loopback for the tests that claim S3 (log store, connectors, engine)."""

from __future__ import annotations

import socketserver
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import boto3


@contextmanager
def moto_s3(*buckets: str) -> Iterator[dict[str, str]]:
    """Start moto on 127.0.0.1 (a free port), create ``buckets``; yield the storage_options."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0)
    server.start()
    # Stopping joins the threads serving open connections, and a client's idle keep-alive
    # connection (a cached filesystem or deltalake table of another test) holds one until
    # the client times it out: 12-19 s in full runs. The threads are daemons: do not wait.
    inner = server._server  # moto exposes no option for it
    assert isinstance(inner, socketserver.ThreadingMixIn)
    inner.block_on_close = False
    _atomic_conditional_writes(inner)
    host, port = server.get_host_and_port()
    options = {
        "AWS_ENDPOINT_URL": f"http://{host}:{port}",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_REGION": "us-east-1",
    }
    client = s3_client(options)
    for b in buckets:
        client.create_bucket(Bucket=b)
    try:
        yield options
    finally:
        server.stop()


def _atomic_conditional_writes(server: Any) -> None:
    """Serialise conditional PUTs (``If-None-Match`` / ``If-Match``) through moto's WSGI app.

    S3 decides conditional writes atomically: of concurrent creates of one key, exactly one
    succeeds. moto 5.2 checks the condition, then writes, in each request's own thread
    (``S3Response.put_object``), so two racing creates can both succeed. The tests claim
    S3's semantics, so the emulator gets them: the check and the write of a conditional
    request run under one lock (other requests run concurrently as before).
    """
    app = server.app
    lock = threading.Lock()

    def serialised(environ: dict[str, Any], start_response: Any) -> Any:
        conditional = "HTTP_IF_NONE_MATCH" in environ or "HTTP_IF_MATCH" in environ
        if environ.get("REQUEST_METHOD") != "PUT" or not conditional:
            return app(environ, start_response)
        with lock:
            return list(app(environ, start_response))  # the whole response: the write is done

    server.app = serialised


def s3_client(options: dict[str, str]) -> Any:
    """A boto3 S3 client for the server behind ``options``."""
    return boto3.client(
        "s3",
        endpoint_url=options["AWS_ENDPOINT_URL"],
        aws_access_key_id=options["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=options["AWS_SECRET_ACCESS_KEY"],
        region_name=options["AWS_REGION"],
    )
