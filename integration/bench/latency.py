"""Object-store latency: an HTTP proxy that delays every request and records it.

:class:`DelayProxy` sits between any S3 client (pyarrow's S3 filesystem, Lance's object
store) and an S3 emulator on loopback. Every request it forwards costs ``delay`` seconds and
is recorded in a :class:`RequestLog` with its start (the client's first bytes), its end (the
server's first bytes back) and the I/O category of the object it names. :func:`rounds` turns
the records into the number of *sequential* round trips: the longest chain of requests each
issued after the one before it was answered (requests in flight together count once).
Used by ``bench_lookup_paths`` and the round-trip tests (``tests/io``).
"""

from __future__ import annotations

import contextlib
import threading
import time
import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from integration.bench.common import classify


@dataclass
class RequestLog:
    """Recorded requests: (start, end, category) in ``time.perf_counter`` seconds."""

    delay: float
    requests: list[tuple[float, float, str]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, start: float, end: float, path: str) -> None:
        """One request on ``path`` from ``start`` to ``end``."""
        with self._lock:
            self.requests.append((start, end, classify(path)))

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
    """Sequential round trips: the most requests of which each starts after the one before
    has ended (the longest chain of waits; requests in flight together count once)."""
    count = 0
    end = float("-inf")
    for start, stop, _ in sorted(requests, key=lambda r: r[1]):
        if start >= end:
            count += 1
            end = stop
    return count


class _Connection:
    """One client connection's request in flight: (start, object path), or None once answered."""

    def __init__(self) -> None:
        self.pending: tuple[float, str] | None = None


def _request_path(data: bytes) -> str:
    """The object path named by an HTTP request's first line (``GET /bucket/key?... HTTP/1.1``);
    for a listing (``GET /bucket?prefix=p...``), ``/bucket/p``."""
    parts = data.split(b"\r\n", 1)[0].split(b" ")
    target = urllib.parse.urlsplit(parts[1].decode("latin-1") if len(parts) > 1 else "")
    path = urllib.parse.unquote(target.path)
    prefix = urllib.parse.parse_qs(target.query).get("prefix")
    return f"{path.rstrip('/')}/{prefix[0]}" if prefix else path


class DelayProxy:
    """A TCP proxy on loopback that adds ``log.delay`` seconds to every HTTP request it forwards.

    Put in front of an S3 emulator (moto), it gives any client (pyarrow's S3 filesystem,
    Lance's object store) the same round-trip time. A request starts when the client sends
    bytes after the server last answered on that connection (HTTP/1.1 without pipelining,
    which every client here uses); its bytes go on after the delay. Each request is
    recorded in ``log`` when the server's answer starts.
    """

    def __init__(self, upstream_port: int, log: RequestLog) -> None:
        import socket

        self.upstream_port, self.log = upstream_port, log
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
            conn = _Connection()
            threading.Thread(target=self._pipe, args=(client, upstream, conn, True), daemon=True).start()
            threading.Thread(target=self._pipe, args=(upstream, client, conn, False), daemon=True).start()

    def _pipe(self, src: Any, dst: Any, conn: _Connection, to_server: bool) -> None:
        try:
            while True:
                data = src.recv(1 << 16)
                if not data:
                    break
                if to_server and conn.pending is None:
                    conn.pending = (time.perf_counter(), _request_path(data))
                    time.sleep(self.log.delay)
                elif not to_server and conn.pending is not None:
                    start, path = conn.pending
                    conn.pending = None
                    self.log.record(start, time.perf_counter(), path)
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
