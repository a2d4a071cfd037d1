"""What every storage implementation provides, and the read contract handed to connectors.

:class:`FileIO` is the byte-level access a connector gets (re-exported by
:mod:`lakehouse_index.source`); :class:`FileStatus` one object of a listing.
:class:`StorageBackend` is the scheme-specific part of a
:class:`~lakehouse_index.io.Storage`: a pyarrow filesystem, how a URI maps to a path in it,
and the one operation pyarrow lacks, an atomic *create if absent*.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import pyarrow.fs as pafs

from lakehouse_index.errors import LakehouseIndexError

__all__ = [
    "ConditionalWriteUnsupportedError",
    "FileIO",
    "FileStatus",
    "ObjectExistsError",
    "StorageBackend",
    "UnsupportedSchemeError",
]


class ObjectExistsError(LakehouseIndexError):
    """``put_if_absent`` found an object already at the path."""


class ConditionalWriteUnsupportedError(LakehouseIndexError):
    """The store does not prove that it refuses a second create of one object.

    Writing the index log there could lose an update (two writers in one slot), so the write
    is refused and nothing is written.
    """


class UnsupportedSchemeError(LakehouseIndexError, ValueError):
    """No storage implementation is registered for a URI scheme."""


@dataclass(frozen=True)
class FileStatus:
    """One object in a listing: full URI, size in bytes, modification time (ms, truncated)."""

    path: str
    size: int
    mtime_ms: int


class FileIO(Protocol):
    """Byte-level access to the table's storage, handed to a connector by the core.

    Paths are absolute URIs (``file:///...``, ``s3://bucket/...``) or plain local paths.
    """

    def read_bytes(self, path: str) -> bytes:
        """Whole object; raises ``FileNotFoundError`` if absent."""
        ...

    def read_many(self, paths: Sequence[str]) -> list[bytes | None]:
        """Whole objects, in order, None for one that is absent; concurrently where that
        saves round trips (an object store)."""
        ...

    def read_range(self, path: str, offset: int, length: int) -> bytes:
        """``length`` bytes from ``offset``; raises ``FileNotFoundError`` if absent."""
        ...

    def list_dir(self, path: str) -> list[FileStatus]:
        """Objects directly below ``path`` (not recursive); empty if none."""
        ...

    def exists(self, path: str) -> bool:
        """Whether an object (or directory) exists at ``path``."""
        ...

    def stat(self, path: str) -> FileStatus:
        """Size and modification time of one object; ``FileNotFoundError`` if absent."""
        ...

    def arrow(self, path: str) -> tuple[pafs.FileSystem, str]:
        """A pyarrow filesystem and the path within it, for Parquet readers."""
        ...

    def serving(self, uri: str) -> FileIO:
        """Access to ``uri`` with the same storage options: this one when it serves ``uri``'s
        scheme (a catalog's table may live on another store than the catalog was opened with)."""
        ...


class StorageBackend(abc.ABC):
    """The scheme-specific part of a :class:`~lakehouse_index.io.Storage`.

    Built from the storage options (deltalake's names, see :mod:`lakehouse_index.io`).
    Reads, listings and plain writes go through :meth:`filesystem`, so any store pyarrow
    can reach (natively, or through ``pyarrow.fs.PyFileSystem(FSSpecHandler(...))``) only
    needs :meth:`path` and :meth:`put_if_absent`. Paths given to a backend are canonical
    URIs (decoded) of its scheme, or plain local paths for the local backend.
    """

    #: How far a listed modification time may lie before the moment of the write, by this
    #: process's clock: object stores list whole seconds, and their clock is not ours. Vacuum
    #: treats data of unknown origin modified within this margin of its start as written after
    #: it (by an operation that began once the vacuum was cancelled).
    mtime_slack_ms: int = 10_000
    #: Whether a request waits on the network: several small reads are then worth sending at
    #: once. A local read costs less than handing it to a thread.
    concurrent_reads: bool = True

    def __init__(self, options: Mapping[str, str]) -> None:
        self.options = dict(options)

    @abc.abstractmethod
    def filesystem(self) -> pafs.FileSystem:
        """A new pyarrow filesystem for this store (the caller caches it)."""

    @abc.abstractmethod
    def path(self, uri: str) -> str:
        """The path of ``uri`` inside :meth:`filesystem`."""

    @abc.abstractmethod
    def put_if_absent(self, uri: str, data: bytes) -> None:
        """Create the object atomically; :class:`ObjectExistsError` if it exists already."""

    def prepare_write(self, path: str) -> None:  # noqa: B027 - optional hook
        """Called before a plain write of ``path`` (a filesystem path): e.g. create its directory."""
