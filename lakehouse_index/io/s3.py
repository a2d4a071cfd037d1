"""S3 and S3-compatible stores (``s3://``; ``s3a://`` and ``s3n://`` are aliases).

Reads and listings use pyarrow's S3 filesystem; *create if absent* is a conditional
``PUT`` with ``If-None-Match: *`` through boto3 (imported on first use), which AWS S3 and
recent S3-compatible stores (MinIO, moto) honour.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlparse

import pyarrow.fs as pafs

from lakehouse_index.io.base import ObjectExistsError, StorageBackend

__all__ = ["S3Backend"]


def _bucket_and_key(uri: str) -> tuple[str, str]:
    bucket, _, key = uri.split("://", 1)[-1].partition("/")
    return bucket, key


class S3Backend(StorageBackend):
    """S3 through pyarrow (reads, plain writes) and boto3 (conditional PUT)."""

    def _upper(self) -> dict[str, str]:
        return {k.upper(): v for k, v in self.options.items()}

    def filesystem(self) -> pafs.FileSystem:
        o = self._upper()
        kwargs: dict[str, Any] = {}
        if "AWS_ACCESS_KEY_ID" in o:
            kwargs["access_key"] = o["AWS_ACCESS_KEY_ID"]
            kwargs["secret_key"] = o.get("AWS_SECRET_ACCESS_KEY")
            if "AWS_SESSION_TOKEN" in o:
                kwargs["session_token"] = o["AWS_SESSION_TOKEN"]
        if "AWS_REGION" in o:
            kwargs["region"] = o["AWS_REGION"]
        endpoint = o.get("AWS_ENDPOINT_URL")
        if endpoint:
            ep = urlparse(endpoint)
            kwargs["endpoint_override"] = ep.netloc or endpoint
            kwargs["scheme"] = ep.scheme or "https"
        return pafs.S3FileSystem(**kwargs)

    def path(self, uri: str) -> str:
        bucket, key = _bucket_and_key(uri)
        return f"{bucket}/{key}" if key else bucket

    def _client(self) -> Any:
        client = self.__dict__.get("_s3")
        if client is None:
            import boto3

            o = self._upper()
            client = boto3.client(
                "s3",
                endpoint_url=o.get("AWS_ENDPOINT_URL"),
                aws_access_key_id=o.get("AWS_ACCESS_KEY_ID"),
                aws_secret_access_key=o.get("AWS_SECRET_ACCESS_KEY"),
                aws_session_token=o.get("AWS_SESSION_TOKEN"),
                region_name=o.get("AWS_REGION", "us-east-1"),
            )
            self.__dict__["_s3"] = client
        return client

    def put_if_absent(self, uri: str, data: bytes) -> None:
        from botocore.exceptions import ClientError

        bucket, key = _bucket_and_key(uri)
        try:
            self._client().put_object(Bucket=bucket, Key=key, Body=data, IfNoneMatch="*")
        except ClientError as e:
            code = e.response.get("Error", {}).get("Code", "")
            if code in ("PreconditionFailed", "ConditionalRequestConflict", "412"):
                raise ObjectExistsError(uri) from e
            raise
