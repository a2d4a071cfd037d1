"""Opening a file together with a token of its current content, for caches keyed by content.

A data file's path is immutable in a lakehouse table, but an external tool can rewrite a
table in place (same path, new bytes), and a table's log may not record what identifies
the bytes (Iceberg records no modification time). Caches of what was read from a file
(footers, page indexes, dictionaries, key columns) are therefore keyed by what the store
says about the object when it is opened: its size and a version token.

* Object stores: the ``ETag`` (else ``Last-Modified``) of the ``HEAD`` request pyarrow makes
  when it opens the object, so the token costs no extra request.
* Local files (and stores whose handles carry no metadata): the modification time in
  nanoseconds from one ``stat``.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
import pyarrow.fs as pafs

__all__ = ["Opened", "open_versioned", "stat_versioned"]

_TOKEN_KEYS = (b"ETag", "ETag", b"Last-Modified", "Last-Modified")


@dataclass(frozen=True)
class Opened:
    """An open file, its size, and the token of the bytes it holds."""

    handle: pa.NativeFile
    size: int
    version: str


def open_versioned(fs: pafs.FileSystem, path: str) -> Opened:
    """Open ``path`` of ``fs`` for random access and tell which bytes it holds.

    ``FileNotFoundError`` if absent. Two opens return the same ``(size, version)`` only when
    the store reports the same size and ETag / modification time for both.
    """
    handle = fs.open_input_file(path)
    try:
        size = handle.size()
        meta = handle.metadata() or {}
        token = next((meta[k] for k in _TOKEN_KEYS if k in meta), None)
        if token is None:
            version = _mtime_token(fs.get_file_info(path))
        else:
            version = token.decode() if isinstance(token, bytes) else str(token)
    except BaseException:
        handle.close()
        raise
    return Opened(handle, size, version)


def stat_versioned(fs: pafs.FileSystem, path: str) -> tuple[int, str] | None:
    """``(size, version)`` as :func:`open_versioned` would report them, from one ``stat``,
    for a local file; None for other stores (their token comes with an open).

    ``FileNotFoundError`` if absent.
    """
    if not isinstance(fs, pafs.LocalFileSystem):
        return None
    info = fs.get_file_info(path)
    if info.type is pafs.FileType.NotFound:
        raise FileNotFoundError(path)
    return int(info.size or 0), _mtime_token(info)


def _mtime_token(info: pafs.FileInfo) -> str:
    """The version token of a store without ETags: the modification time in nanoseconds."""
    return str(info.mtime_ns) if info.mtime_ns is not None else ""
