"""Storage: one object store API over local files and S3-compatible stores.

:class:`Storage` implements the connector contract's :class:`~lakehouse_index.source.FileIO`
and adds what the index log needs: an atomic *create if absent* (local: ``O_EXCL``;
S3: conditional ``PUT`` with ``If-None-Match: *``). Nothing here ever checks for
existence and then renames.

``storage_options`` follow deltalake's names: ``AWS_ACCESS_KEY_ID``,
``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``, ``AWS_REGION``, ``AWS_ENDPOINT_URL``
(``AWS_ALLOW_HTTP`` is implied by an ``http://`` endpoint).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlparse

import pyarrow.fs as pafs

from lakehouse_index.errors import LakehouseIndexError
from lakehouse_index.source import FileStatus


class ObjectExistsError(LakehouseIndexError):
    """``put_if_absent`` found an object already at the path."""


def normalize_uri(uri: str) -> str:
    """A canonical absolute URI: local paths become ``file:///abs/path`` (no trailing ``/``)."""
    parsed = urlparse(uri)
    if parsed.scheme in ("", "file"):
        path = unquote(parsed.path) if parsed.scheme == "file" else uri
        return "file://" + os.path.abspath(os.path.expanduser(path)).rstrip("/")
    return uri.rstrip("/")


def join_uri(base: str, *parts: str) -> str:
    """``base`` joined with relative ``parts`` by ``/``."""
    out = base.rstrip("/")
    for p in parts:
        out += "/" + p.strip("/")
    return out


@dataclass(frozen=True)
class Storage:
    """Object access for one URI scheme, configured by ``storage_options``."""

    scheme: str
    options: Mapping[str, str] = field(default_factory=dict, hash=False)

    def __getstate__(self) -> dict[str, Any]:
        # Cached clients (boto3, pyarrow filesystem) belong to one process; rebuilt after unpickling.
        return {"scheme": self.scheme, "options": dict(self.options)}

    def __setstate__(self, state: dict[str, Any]) -> None:
        object.__setattr__(self, "scheme", state["scheme"])
        object.__setattr__(self, "options", state["options"])

    @classmethod
    def for_uri(cls, uri: str, storage_options: Mapping[str, str] | None = None) -> Storage:
        """The storage that serves ``uri``."""
        scheme = urlparse(uri).scheme or "file"
        if scheme == "s3a":
            scheme = "s3"
        if scheme not in ("file", "s3"):
            raise LakehouseIndexError(f"unsupported storage scheme {scheme!r} in {uri!r}")
        return cls(scheme, dict(storage_options or {}))

    # ------------------------------------------------------------------ paths

    def _split(self, path: str) -> str:
        """The path inside this storage's pyarrow filesystem."""
        parsed = urlparse(path)
        if self.scheme == "file":
            if parsed.scheme not in ("", "file"):
                raise LakehouseIndexError(f"{path!r} is not a local path")
            # Paths from connectors are already percent-decoded: never decode twice.
            return (
                "/" + path[len("file:") :].lstrip("/") if parsed.scheme == "file" else os.path.abspath(path)
            )
        return parsed.netloc + parsed.path

    @property
    def filesystem(self) -> pafs.FileSystem:
        """The pyarrow filesystem (cached per instance)."""
        fs = self.__dict__.get("_fs")
        if fs is None:
            fs = self._make_filesystem()
            object.__setattr__(self, "_fs", fs)
        return fs

    def _make_filesystem(self) -> pafs.FileSystem:
        if self.scheme == "file":
            return pafs.LocalFileSystem()
        o = {k.upper(): v for k, v in self.options.items()}
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

    def arrow(self, path: str) -> tuple[pafs.FileSystem, str]:
        """A pyarrow filesystem and the path within it."""
        return self.filesystem, self._split(path)

    # ------------------------------------------------------------------ reads

    def read_bytes(self, path: str) -> bytes:
        """Whole object; ``FileNotFoundError`` if absent."""
        with self.filesystem.open_input_stream(self._split(path)) as f:
            return bytes(f.read())

    def read_range(self, path: str, offset: int, length: int) -> bytes:
        """``length`` bytes from ``offset``."""
        with self.filesystem.open_input_file(self._split(path)) as f:
            return bytes(f.read_at(length, offset))

    def list_dir(self, path: str) -> list[FileStatus]:
        """Objects directly below ``path``; empty when the directory does not exist."""
        sel = pafs.FileSelector(self._split(path), allow_not_found=True, recursive=False)
        base = path.rstrip("/")
        out = []
        for info in self.filesystem.get_file_info(sel):
            if info.type == pafs.FileType.File:
                mtime = int(info.mtime.timestamp() * 1000) if info.mtime else 0
                out.append(FileStatus(base + "/" + info.base_name, info.size or 0, mtime))
        return out

    def list_tree(self, path: str) -> list[FileStatus]:
        """Every object below ``path`` (recursive); empty when absent."""
        root = self._split(path).rstrip("/")
        sel = pafs.FileSelector(root, allow_not_found=True, recursive=True)
        base = path.rstrip("/")
        out = []
        for info in self.filesystem.get_file_info(sel):
            if info.type == pafs.FileType.File:
                rel = info.path[len(root) :].lstrip("/")
                mtime = int(info.mtime.timestamp() * 1000) if info.mtime else 0
                out.append(FileStatus(base + "/" + rel, info.size or 0, mtime))
        return out

    def exists(self, path: str) -> bool:
        """Whether a file or directory exists at ``path``."""
        info = self.filesystem.get_file_info(self._split(path))
        return bool(info.type != pafs.FileType.NotFound)

    def stat(self, path: str) -> FileStatus:
        """Size and mtime of one object; ``FileNotFoundError`` if absent."""
        info = self.filesystem.get_file_info(self._split(path))
        if info.type != pafs.FileType.File:
            raise FileNotFoundError(path)
        mtime = int(info.mtime.timestamp() * 1000) if info.mtime else 0
        return FileStatus(path, info.size or 0, mtime)

    # ------------------------------------------------------------------ writes

    def put_if_absent(self, path: str, data: bytes) -> None:
        """Create the object atomically; ``ObjectExistsError`` if it already exists."""
        if self.scheme == "file":
            self._put_if_absent_local(self._split(path), data)
        else:
            self._put_if_absent_s3(path, data)

    @staticmethod
    def _put_if_absent_local(path: str, data: bytes) -> None:
        # Write a private temp file completely, then hard-link it into place: link(2)
        # fails with EEXIST if the name is taken, so readers never see a partial entry.
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{path}.{os.getpid()}.{os.urandom(6).hex()}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            try:
                os.link(tmp, path)
            except FileExistsError as e:
                raise ObjectExistsError(path) from e
        finally:
            os.unlink(tmp)
        # Make the new name durable: a committed log entry must survive a power loss.
        dir_fd = os.open(os.path.dirname(path), os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)

    def _s3_client(self) -> Any:
        client = self.__dict__.get("_s3")
        if client is None:
            import boto3

            o = {k.upper(): v for k, v in self.options.items()}
            client = boto3.client(
                "s3",
                endpoint_url=o.get("AWS_ENDPOINT_URL"),
                aws_access_key_id=o.get("AWS_ACCESS_KEY_ID"),
                aws_secret_access_key=o.get("AWS_SECRET_ACCESS_KEY"),
                aws_session_token=o.get("AWS_SESSION_TOKEN"),
                region_name=o.get("AWS_REGION", "us-east-1"),
            )
            object.__setattr__(self, "_s3", client)
        return client

    def _put_if_absent_s3(self, path: str, data: bytes) -> None:
        from botocore.exceptions import ClientError

        parsed = urlparse(path)
        try:
            self._s3_client().put_object(
                Bucket=parsed.netloc, Key=parsed.path.lstrip("/"), Body=data, IfNoneMatch="*"
            )
        except ClientError as e:
            code = e.response.get("Error", {}).get("Code", "")
            if code in ("PreconditionFailed", "ConditionalRequestConflict", "412"):
                raise ObjectExistsError(path) from e
            raise

    def write_bytes(self, path: str, data: bytes) -> None:
        """Write (or overwrite) an object: only for data under a fresh, unique directory."""
        p = self._split(path)
        if self.scheme == "file":
            os.makedirs(os.path.dirname(p), exist_ok=True)
        with self.filesystem.open_output_stream(p) as f:
            f.write(data)

    def delete(self, path: str) -> None:
        """Remove one object (missing is fine)."""
        with contextlib.suppress(FileNotFoundError):
            self.filesystem.delete_file(self._split(path))

    def delete_tree(self, path: str) -> None:
        """Remove a directory and everything below it (missing is fine)."""
        p = self._split(path)
        if self.filesystem.get_file_info(p).type != pafs.FileType.NotFound:
            self.filesystem.delete_dir(p)
