"""Object-store latency on local disk: a pyarrow filesystem wrapper that delays and records requests.

Every request an object store would serve costs ``delay`` seconds and is recorded with its
start and end: a listing, a metadata lookup per path (HEAD), opening a stream (one GET),
opening a random-access file (one HEAD, as pyarrow's S3 filesystem does) and every read on
it (one ranged GET). :func:`rounds` turns the records into the number of *sequential*
round trips: requests that overlap in time (issued concurrently) count once.

:func:`delayed_local_storage` installs the wrapper for every local :class:`Storage` created
inside it (the table's and the indexes'), so a cold ``open_table`` + lookup is measured
whole. Used by ``bench_lookup_paths`` only; never while timing without latency.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs

from integration.bench.common import classify


@dataclass
class RequestLog:
    """Recorded requests: (start, end, category) in ``time.perf_counter`` seconds."""

    delay: float
    requests: list[tuple[float, float, str]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def request(self, path: str) -> None:
        """Serve one request on ``path``: wait ``delay`` and record it."""
        start = time.perf_counter()
        if self.delay:
            time.sleep(self.delay)
        with self._lock:
            self.requests.append((start, time.perf_counter(), classify(path)))

    def clear(self) -> None:
        """Forget every record."""
        with self._lock:
            self.requests.clear()

    def by_category(self) -> dict[str, int]:
        """Requests per I/O category (index-log, index-data, table-log, table-data)."""
        out: dict[str, int] = {}
        for _, _, cat in self.requests:
            out[cat] = out.get(cat, 0) + 1
        return out


def rounds(requests: Sequence[tuple[float, float, str]]) -> int:
    """Sequential round trips: requests grouped while they overlap in time."""
    count = 0
    end = float("-inf")
    for start, stop, _ in sorted(requests):
        if start >= end:
            count += 1
            end = stop
        else:
            end = max(end, stop)
    return count


class _DelayedFile:
    """A random-access file whose every read is one ranged GET."""

    def __init__(self, inner: pa.NativeFile, path: str, log: RequestLog) -> None:
        self._inner, self._path, self._log = inner, path, log

    def read(self, nbytes: int = -1) -> bytes:
        self._log.request(self._path)
        return bytes(self._inner.read() if nbytes is None or nbytes < 0 else self._inner.read(nbytes))

    def seek(self, pos: int, whence: int = 0) -> int:
        return int(self._inner.seek(pos, whence))

    def tell(self) -> int:
        return int(self._inner.tell())

    def size(self) -> int:
        return int(self._inner.size())

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def writable(self) -> bool:
        return False

    @property
    def closed(self) -> bool:
        return bool(self._inner.closed)

    def close(self) -> None:
        self._inner.close()


class DelayedHandler(pafs.FileSystemHandler):
    """Delegates to ``inner``, serving reads as object-store requests (see the module docs)."""

    def __init__(self, inner: pafs.FileSystem, log: RequestLog) -> None:
        self.inner, self.log = inner, log

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DelayedHandler) and other.inner == self.inner

    def __ne__(self, other: object) -> bool:
        return not self == other

    def get_type_name(self) -> str:
        return "delayed-" + self.inner.type_name

    def normalize_path(self, path: str) -> str:
        return str(self.inner.normalize_path(path))

    def get_file_info(self, paths: Sequence[str]) -> list[pafs.FileInfo]:
        for p in paths:
            self.log.request(p)
        return list(self.inner.get_file_info(list(paths)))

    def get_file_info_selector(self, selector: pafs.FileSelector) -> list[pafs.FileInfo]:
        self.log.request(selector.base_dir + "/")
        return list(self.inner.get_file_info(selector))

    def create_dir(self, path: str, recursive: bool) -> None:
        self.inner.create_dir(path, recursive=recursive)

    def delete_dir(self, path: str) -> None:
        self.inner.delete_dir(path)

    def delete_dir_contents(self, path: str, missing_dir_ok: bool = False) -> None:
        self.inner.delete_dir_contents(path, missing_dir_ok=missing_dir_ok)

    def delete_root_dir_contents(self) -> None:
        self.inner.delete_dir_contents("/", accept_root_dir=True)

    def delete_file(self, path: str) -> None:
        self.inner.delete_file(path)

    def move(self, src: str, dest: str) -> None:
        self.inner.move(src, dest)

    def copy_file(self, src: str, dest: str) -> None:
        self.inner.copy_file(src, dest)

    def open_input_stream(self, path: str) -> pa.NativeFile:
        self.log.request(path)  # one GET of the whole object
        return self.inner.open_input_stream(path)

    def open_input_file(self, path: str) -> pa.PythonFile:
        self.log.request(path)  # HEAD: the size
        return pa.PythonFile(_DelayedFile(self.inner.open_input_file(path), path, self.log), mode="r")

    def open_output_stream(self, path: str, metadata: Any) -> pa.NativeFile:
        return self.inner.open_output_stream(path, metadata=metadata)

    def open_append_stream(self, path: str, metadata: Any) -> pa.NativeFile:
        return self.inner.open_append_stream(path, metadata=metadata)


@contextlib.contextmanager
def delayed_local_storage(log: RequestLog) -> Iterator[RequestLog]:
    """Every local Storage whose filesystem is created inside serves reads through ``log``."""
    from lakehouse_index.io.local import LocalBackend

    original = LocalBackend.filesystem

    def delayed(self: LocalBackend) -> pafs.FileSystem:
        return pafs.PyFileSystem(DelayedHandler(original(self), log))

    LocalBackend.filesystem = delayed  # type: ignore[method-assign]
    try:
        yield log
    finally:
        LocalBackend.filesystem = original  # type: ignore[method-assign]


class DelayProxy:
    """A TCP proxy on loopback that adds ``delay`` seconds to every HTTP request it forwards.

    Put in front of an S3 emulator (moto), it gives any client (pyarrow's S3 filesystem,
    Lance's object store) the same round-trip time. A request starts when the client sends
    bytes after the server last answered on that connection (HTTP/1.1 without pipelining,
    which every client here uses); its bytes go on after the delay. ``requests`` counts them.
    """

    def __init__(self, upstream_port: int, delay: float) -> None:
        import socket

        self.upstream_port, self.delay = upstream_port, delay
        self.requests = 0
        self._lock = threading.Lock()
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._server.getsockname()[1])
        self._stopped = False
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        """The endpoint clients use."""
        return f"http://127.0.0.1:{self.port}"

    def _accept(self) -> None:
        import socket

        while not self._stopped:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
            answered = threading.Event()
            answered.set()  # the first bytes a client sends start a request
            threading.Thread(target=self._pipe, args=(client, upstream, answered, True), daemon=True).start()
            threading.Thread(target=self._pipe, args=(upstream, client, answered, False), daemon=True).start()

    def _pipe(self, src: Any, dst: Any, answered: threading.Event, to_server: bool) -> None:
        try:
            while True:
                data = src.recv(1 << 16)
                if not data:
                    break
                if to_server and answered.is_set():
                    answered.clear()
                    with self._lock:
                        self.requests += 1
                    time.sleep(self.delay)
                elif not to_server:
                    answered.set()
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.close()

    def close(self) -> None:
        """Stop accepting connections."""
        self._stopped = True
        self._server.close()
