"""Typed storage access: one :class:`Storage` per URI scheme, pluggable implementations.

* :mod:`lakehouse_index.io.uri` -- :func:`canonical_uri`, the one spelling of every location.
* :class:`Storage` -- what the core and connectors use: the connector contract's
  :class:`~lakehouse_index.io.base.FileIO` plus what the index log needs, an atomic
  *create if absent* (:meth:`Storage.put_if_absent`; local: temp file + ``link(2)``; S3:
  ``PUT`` with ``If-None-Match: *``). Nothing here ever checks for existence and then renames.
* The scheme registry -- :func:`register_backend` maps a scheme to a
  :class:`~lakehouse_index.io.base.StorageBackend` (a class, or ``"module:Class"`` imported
  on first use). Built in: ``file`` (:mod:`lakehouse_index.io.local`), ``s3``
  (:mod:`lakehouse_index.io.s3`; ``s3a``/``s3n`` are aliases), and through obstore (the
  ``objectstores`` extra, :mod:`lakehouse_index.io.objstore`) ``gs`` (``gcs`` alias) and
  ``az``/``abfs``/``abfss``. Registering a scheme again
  replaces its implementation, so users can also swap a built-in one. An unregistered
  scheme is an :class:`~lakehouse_index.io.base.UnsupportedSchemeError` naming the
  supported ones.

``storage_options`` follow deltalake's names: ``AWS_ACCESS_KEY_ID``,
``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``, ``AWS_REGION``, ``AWS_ENDPOINT_URL``
(``AWS_ALLOW_HTTP`` is implied by an ``http://`` endpoint); on GCS and Azure
``object_store``'s (``google_service_account_key``, ``azure_storage_account_name``, ...).
A store that does not prove it refuses a second create is refused for the log
(:class:`~lakehouse_index.io.base.ConditionalWriteUnsupportedError`).
"""

from __future__ import annotations

import contextlib
import importlib
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import pyarrow.fs as pafs

from lakehouse_index.io.base import (
    ConditionalWriteUnsupportedError,
    FileIO,
    FileStatus,
    ObjectExistsError,
    StorageBackend,
    UnsupportedSchemeError,
)
from lakehouse_index.io.uri import SCHEME_ALIASES, canonical_uri, join_uri, uri_scheme

__all__ = [
    "ConditionalWriteUnsupportedError",
    "FileIO",
    "FileStatus",
    "ObjectExistsError",
    "Storage",
    "StorageBackend",
    "UnsupportedSchemeError",
    "backend_class",
    "canonical_uri",
    "join_uri",
    "normalize_uri",
    "register_backend",
    "supported_schemes",
]

#: Former name of :func:`canonical_uri` (user-given locations are canonicalized by it).
normalize_uri = canonical_uri

_BACKENDS: dict[str, type[StorageBackend] | str] = {
    "file": "lakehouse_index.io.local:LocalBackend",
    "s3": "lakehouse_index.io.s3:S3Backend",
    "gs": "lakehouse_index.io.objstore:GcsBackend",
    "az": "lakehouse_index.io.objstore:AzureBackend",
    "abfs": "lakehouse_index.io.objstore:AzureBackend",
    "abfss": "lakehouse_index.io.objstore:AzureBackend",
}
_REGISTRY_LOCK = threading.Lock()


def register_backend(scheme: str, backend: type[StorageBackend] | str) -> None:
    """Serve ``scheme`` with ``backend`` (a StorageBackend class or ``"module:Class"``).

    Applies to :class:`Storage` objects whose backend is created afterwards. The class is
    pickled by reference with a Storage, so Spark tasks import it from its module.
    """
    canonical = uri_scheme(scheme.rstrip(":/") + ":")
    with _REGISTRY_LOCK:
        _BACKENDS[canonical] = backend


def supported_schemes() -> list[str]:
    """Registered schemes and their aliases, sorted."""
    with _REGISTRY_LOCK:
        names = set(_BACKENDS)
    return sorted(names | {alias for alias, s in SCHEME_ALIASES.items() if s in names})


def backend_class(scheme: str) -> type[StorageBackend]:
    """The implementation registered for ``scheme``; UnsupportedSchemeError when none is."""
    canonical = uri_scheme(scheme + ":")
    with _REGISTRY_LOCK:
        found = _BACKENDS.get(canonical)
    if found is None:
        raise UnsupportedSchemeError(
            f"no storage is registered for URI scheme {scheme!r}; supported: "
            f"{', '.join(supported_schemes())} (add one with lakehouse_index.io.register_backend)"
        )
    if isinstance(found, str):
        module, _, name = found.partition(":")
        found = getattr(importlib.import_module(module), name)
        if not (isinstance(found, type) and issubclass(found, StorageBackend)):
            raise TypeError(f"{module}:{name} registered for {canonical!r} is not a StorageBackend")
        with _REGISTRY_LOCK:
            _BACKENDS[canonical] = found
    return found


def _mtime_ms(info: pafs.FileInfo) -> int:
    """A listed object's modification time in whole milliseconds (0 when unknown).

    From the integer nanoseconds (as delta-rs and Spark truncate them), not through a
    ``datetime``: that rounds to microseconds first, and costs a third of listing a log.
    """
    ns = info.mtime_ns
    return ns // 1_000_000 if ns is not None else 0


#: Listings tried before a vanishing entry's FileNotFoundError is raised (see ``Storage._infos``).
_LIST_ATTEMPTS = 5

#: Whole-object reads in flight at once in ``Storage.read_many`` (on an object store).
_MANY_READS = 16


@dataclass(frozen=True)
class Storage:
    """Object access for one URI scheme, configured by ``storage_options``.

    Implements :class:`~lakehouse_index.io.base.FileIO`. Picklable (Spark tasks): the
    backend class travels by reference, clients are rebuilt after unpickling.
    """

    scheme: str
    options: Mapping[str, str] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "scheme", uri_scheme(self.scheme + ":"))
        backend_class(self.scheme)  # fail early, naming the supported schemes

    def __getstate__(self) -> dict[str, Any]:
        # Cached clients (boto3, pyarrow filesystem) belong to one process; rebuilt after unpickling.
        return {"scheme": self.scheme, "options": dict(self.options), "backend": type(self.backend)}

    def __setstate__(self, state: dict[str, Any]) -> None:
        object.__setattr__(self, "scheme", state["scheme"])
        object.__setattr__(self, "options", state["options"])
        if state.get("backend") is not None:
            object.__setattr__(self, "_backend", state["backend"](state["options"]))

    @classmethod
    def for_uri(cls, uri: str, storage_options: Mapping[str, str] | None = None) -> Storage:
        """The storage that serves ``uri`` (UnsupportedSchemeError for an unknown scheme)."""
        return cls(uri_scheme(uri), dict(storage_options or {}))

    def serving(self, uri: str) -> Storage:
        """This storage when it serves ``uri``'s scheme, else one for that scheme with the same options."""
        return self if uri_scheme(uri) == self.scheme else Storage.for_uri(uri, self.options)

    # ------------------------------------------------------------------ paths

    @property
    def backend(self) -> StorageBackend:
        """The scheme's implementation (created on first use)."""
        found = self.__dict__.get("_backend")
        if found is None:
            found = backend_class(self.scheme)(self.options)
            object.__setattr__(self, "_backend", found)
        return found

    @property
    def mtime_slack_ms(self) -> int:
        """How far a listed modification time may lie before the write (listing resolution and
        clock skew of the store: :attr:`StorageBackend.mtime_slack_ms`)."""
        return self.backend.mtime_slack_ms

    @property
    def concurrent_reads(self) -> bool:
        """Whether several small reads are worth issuing at once
        (:attr:`StorageBackend.concurrent_reads`)."""
        return self.backend.concurrent_reads

    def _split(self, path: str) -> str:
        """The path inside this storage's pyarrow filesystem."""
        scheme = uri_scheme(path)
        if scheme != self.scheme:
            raise UnsupportedSchemeError(f"{path!r} is not a {self.scheme!r} path")
        return self.backend.path(path)

    @property
    def filesystem(self) -> pafs.FileSystem:
        """The pyarrow filesystem (cached per instance)."""
        fs = self.__dict__.get("_fs")
        if fs is None:
            fs = self.backend.filesystem()
            object.__setattr__(self, "_fs", fs)
        return fs

    def arrow(self, path: str) -> tuple[pafs.FileSystem, str]:
        """A pyarrow filesystem and the path within it."""
        return self.filesystem, self._split(path)

    # ------------------------------------------------------------------ reads

    def read_bytes(self, path: str) -> bytes:
        """Whole object; ``FileNotFoundError`` if absent."""
        with self.filesystem.open_input_stream(self._split(path)) as f:
            return bytes(f.read())

    def read_many(self, paths: Sequence[str]) -> list[bytes | None]:
        """Whole objects, in order; None for one that does not exist.

        On an object store (:attr:`concurrent_reads`) up to ``_MANY_READS`` are in flight at
        once, so a reader of many small objects (a Delta log's commits since its checkpoint)
        waits about one round trip per ``_MANY_READS`` objects instead of one per object.
        The threads are this call's own: reads hung on one store (a server gone, retrying)
        cannot hold up the reads of another, as a process-wide pool's busy threads would.
        """

        def one(path: str) -> bytes | None:
            try:
                return self.read_bytes(path)
            except FileNotFoundError:
                return None

        if len(paths) > 1 and self.concurrent_reads:
            with ThreadPoolExecutor(min(len(paths), _MANY_READS), "storage-read-many") as pool:
                return list(pool.map(one, paths))
        return [one(p) for p in paths]

    def read_range(self, path: str, offset: int, length: int) -> bytes:
        """``length`` bytes from ``offset``."""
        with self.filesystem.open_input_file(self._split(path)) as f:
            return bytes(f.read_at(length, offset))

    def _infos(self, sel: pafs.FileSelector) -> list[pafs.FileInfo]:
        """``get_file_info(sel)``, listed again when an entry vanished while it was listed.

        A local listing reads the directory, then stats each entry: a file deleted in
        between (another process's put-if-absent temp file, unlinked right after its link)
        fails the whole listing with FileNotFoundError, although the directory is there.
        """
        for _ in range(_LIST_ATTEMPTS - 1):
            try:
                return list(self.filesystem.get_file_info(sel))
            except FileNotFoundError:
                continue
        return list(self.filesystem.get_file_info(sel))

    def list_dir(self, path: str) -> list[FileStatus]:
        """Objects directly below ``path``; empty when the directory does not exist."""
        sel = pafs.FileSelector(self._split(path), allow_not_found=True, recursive=False)
        base = path.rstrip("/")
        return [
            FileStatus(base + "/" + info.base_name, info.size or 0, _mtime_ms(info))
            for info in self._infos(sel)
            if info.type == pafs.FileType.File
        ]

    def list_tree(self, path: str) -> list[FileStatus]:
        """Every object below ``path`` (recursive); empty when absent."""
        root = self._split(path).rstrip("/")
        sel = pafs.FileSelector(root, allow_not_found=True, recursive=True)
        base = path.rstrip("/")
        return [
            FileStatus(base + "/" + info.path[len(root) :].lstrip("/"), info.size or 0, _mtime_ms(info))
            for info in self._infos(sel)
            if info.type == pafs.FileType.File
        ]

    def exists(self, path: str) -> bool:
        """Whether a file or directory exists at ``path``."""
        info = self.filesystem.get_file_info(self._split(path))
        return bool(info.type != pafs.FileType.NotFound)

    def stat(self, path: str) -> FileStatus:
        """Size and mtime of one object; ``FileNotFoundError`` if absent."""
        info = self.filesystem.get_file_info(self._split(path))
        if info.type != pafs.FileType.File:
            raise FileNotFoundError(path)
        return FileStatus(path, info.size or 0, _mtime_ms(info))

    # ------------------------------------------------------------------ writes

    def put_if_absent(self, path: str, data: bytes) -> None:
        """Create the object atomically; ``ObjectExistsError`` if it already exists."""
        self._split(path)  # the scheme check
        self.backend.put_if_absent(path, data)

    def write_bytes(self, path: str, data: bytes) -> None:
        """Write (or overwrite) an object: only for data under a fresh, unique directory."""
        p = self._split(path)
        self.backend.prepare_write(p)
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
