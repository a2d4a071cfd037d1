"""Local files (``file:`` URIs and plain paths)."""

from __future__ import annotations

import os

import pyarrow.fs as pafs

from lakehouse_index.io.base import ObjectExistsError, StorageBackend
from lakehouse_index.io.uri import local_path

__all__ = ["LocalBackend"]


class LocalBackend(StorageBackend):
    """The local filesystem; *create if absent* is a temp file hard-linked into place."""

    #: Nanosecond modification times from this machine's own clock.
    mtime_slack_ms = 0
    #: Reads served by the OS page cache: one after the other.
    concurrent_reads = False

    def filesystem(self) -> pafs.FileSystem:
        return pafs.LocalFileSystem()

    def path(self, uri: str) -> str:
        # Canonical URIs are already percent-decoded: never decode twice.
        return local_path(uri)

    def prepare_write(self, path: str) -> None:
        os.makedirs(os.path.dirname(path), exist_ok=True)

    def put_if_absent(self, uri: str, data: bytes) -> None:
        # Write a private temp file completely, then hard-link it into place: link(2)
        # fails with EEXIST if the name is taken, so readers never see a partial entry.
        path = self.path(uri)
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
                raise ObjectExistsError(uri) from e
        finally:
            os.unlink(tmp)
        # Make the new name durable: a committed log entry must survive a power loss.
        dir_fd = os.open(os.path.dirname(path), os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
