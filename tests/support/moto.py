"""A moto S3 server on loopback for the tests that claim S3 (log store, connectors, engine)."""

from __future__ import annotations

import socketserver
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


def s3_client(options: dict[str, str]) -> Any:
    """A boto3 S3 client for the server behind ``options``."""
    return boto3.client(
        "s3",
        endpoint_url=options["AWS_ENDPOINT_URL"],
        aws_access_key_id=options["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=options["AWS_SECRET_ACCESS_KEY"],
        region_name=options["AWS_REGION"],
    )
