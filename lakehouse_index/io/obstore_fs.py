"""A pyarrow filesystem over obstore stores, for the readers and writers that take one.

Paths are ``bucket/key``; each bucket's store comes from a callable (the backend caches them).
Directories are implied by keys (object stores have none): creating one does nothing,
deleting one deletes every object below it. Objects are written whole on close (index data
files are written once, under fresh directories).
"""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs

__all__ = ["ObstoreHandler"]


def _split(path: str) -> tuple[str, str]:
    bucket, _, key = path.strip("/").partition("/")
    return bucket, key


def _file_info(bucket: str, meta: Any) -> pafs.FileInfo:
    return pafs.FileInfo(
        f"{bucket}/{meta['path']}", pafs.FileType.File, mtime=meta["last_modified"], size=meta["size"]
    )


class _PutOnClose(io.BytesIO):
    """A writable buffer stored as one object when closed."""

    def __init__(self, store: Any, key: str) -> None:
        super().__init__()
        self._store, self._key = store, key

    def close(self) -> None:
        if not self.closed:
            import obstore

            obstore.put(self._store, self._key, self.getvalue())
        super().close()


class _RangeReader(io.RawIOBase):
    """A seekable read-only object: each read is one ranged GET."""

    def __init__(self, store: Any, key: str, size: int) -> None:
        super().__init__()
        self._store, self._key, self._size, self._pos = store, key, size, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._size}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def readinto(self, buffer: Any) -> int:
        import obstore

        n = min(len(buffer), self._size - self._pos)
        if n <= 0:
            return 0
        data = obstore.get_range(self._store, self._key, start=self._pos, length=n)
        memoryview(buffer)[:n] = memoryview(data)
        self._pos += n
        return n


class ObstoreHandler(pafs.FileSystemHandler):
    """``pyarrow.fs.PyFileSystem(ObstoreHandler(...))``: pyarrow's view of obstore stores."""

    def __init__(self, type_name: str, store_of: Callable[[str], Any]) -> None:
        self._type_name = type_name
        self._store_of = store_of

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ObstoreHandler) and other._store_of == self._store_of

    def __hash__(self) -> int:
        return hash(self._type_name)

    def equals(self, other: object) -> bool:
        return self == other

    def get_type_name(self) -> str:
        return self._type_name

    def normalize_path(self, path: str) -> str:
        return path.strip("/")

    # ------------------------------------------------------------------ metadata

    def _info(self, path: str) -> pafs.FileInfo:
        import obstore
        from obstore.exceptions import NotFoundError

        bucket, key = _split(path)
        if not key:
            return pafs.FileInfo(bucket, pafs.FileType.Directory)
        store = self._store_of(bucket)
        try:
            return _file_info(bucket, obstore.head(store, key))
        except (NotFoundError, FileNotFoundError):
            pass
        below = obstore.list_with_delimiter(store, key + "/")
        if below["objects"] or below["common_prefixes"]:
            return pafs.FileInfo(f"{bucket}/{key}", pafs.FileType.Directory)
        return pafs.FileInfo(f"{bucket}/{key}", pafs.FileType.NotFound)

    def get_file_info(self, paths: list[str]) -> list[pafs.FileInfo]:
        return [self._info(p) for p in paths]

    def get_file_info_selector(self, selector: pafs.FileSelector) -> list[pafs.FileInfo]:
        import obstore

        bucket, key = _split(selector.base_dir)
        store = self._store_of(bucket)
        prefix = key + "/" if key else None
        out: list[pafs.FileInfo] = []
        if selector.recursive:
            for chunk in obstore.list(store, prefix):
                out.extend(_file_info(bucket, m) for m in chunk)
        else:
            below = obstore.list_with_delimiter(store, prefix)
            out.extend(_file_info(bucket, m) for m in below["objects"])
            out.extend(
                pafs.FileInfo(f"{bucket}/{p.rstrip('/')}", pafs.FileType.Directory)
                for p in below["common_prefixes"]
            )
        if not out and not selector.allow_not_found and key:
            raise FileNotFoundError(selector.base_dir)
        return out

    # ------------------------------------------------------------------ changes

    def create_dir(self, path: str, recursive: bool) -> None:
        """Nothing to do: directories are implied by keys."""

    def _delete_below(self, path: str) -> None:
        import obstore

        bucket, key = _split(path)
        store = self._store_of(bucket)
        keys = [m["path"] for chunk in obstore.list(store, key + "/" if key else None) for m in chunk]
        if keys:
            obstore.delete(store, keys)

    def delete_dir(self, path: str) -> None:
        self._delete_below(path)

    def delete_dir_contents(self, path: str, missing_dir_ok: bool = False) -> None:
        self._delete_below(path)

    def delete_root_dir_contents(self) -> None:
        raise OSError("refusing to delete every object of a store")

    def delete_file(self, path: str) -> None:
        import obstore
        from obstore.exceptions import NotFoundError

        bucket, key = _split(path)
        try:
            obstore.head(self._store_of(bucket), key)
        except (NotFoundError, FileNotFoundError) as e:
            raise FileNotFoundError(path) from e
        obstore.delete(self._store_of(bucket), key)

    def move(self, src: str, dest: str) -> None:
        import obstore

        (sb, sk), (db, dk) = _split(src), _split(dest)
        if sb != db:
            raise OSError(f"cannot move {src} to another bucket ({dest})")
        obstore.rename(self._store_of(sb), sk, dk)

    def copy_file(self, src: str, dest: str) -> None:
        import obstore

        (sb, sk), (db, dk) = _split(src), _split(dest)
        if sb != db:
            raise OSError(f"cannot copy {src} to another bucket ({dest})")
        obstore.copy(self._store_of(sb), sk, dk)

    # ------------------------------------------------------------------ streams

    def _reader(self, path: str) -> pa.PythonFile:
        import obstore
        from obstore.exceptions import NotFoundError

        bucket, key = _split(path)
        store = self._store_of(bucket)
        try:
            size = obstore.head(store, key)["size"]
        except (NotFoundError, FileNotFoundError) as e:
            raise FileNotFoundError(path) from e
        return pa.PythonFile(_RangeReader(store, key, size), mode="r")

    def open_input_stream(self, path: str) -> pa.PythonFile:
        return self._reader(path)

    def open_input_file(self, path: str) -> pa.PythonFile:
        return self._reader(path)

    def open_output_stream(self, path: str, metadata: Any) -> pa.PythonFile:
        bucket, key = _split(path)
        return pa.PythonFile(_PutOnClose(self._store_of(bucket), key), mode="w")

    def open_append_stream(self, path: str, metadata: Any) -> pa.PythonFile:
        raise OSError("object stores cannot append")
