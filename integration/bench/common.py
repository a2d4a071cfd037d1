"""Helpers shared by the index and query benchmarks: timing, I/O counting, formatting.

Timing: every figure is the median of several repetitions (``timed``); the first call of
each method is an untimed warm-up unless the measurement is explicitly cold.

I/O counting: :func:`count_io` swaps the pyarrow filesystem of a :class:`Storage` for a
counting wrapper (``pyarrow.fs.PyFileSystem``), so every open, read call, listing and
stat the engine makes is attributed to a category by path: index log, index data,
table log, table data. The wrapper adds Python overhead per call, so it is used only
for separate counting passes, never while timing.
"""

from __future__ import annotations

import contextlib
import statistics
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.fs as pafs

T = TypeVar("T")

SCALES = ("tiny", "small", "full")


# --------------------------------------------------------------------------- timing


@dataclass
class Timing:
    """Repeated measurements of one method, in seconds."""

    samples: list[float] = field(default_factory=list)

    @property
    def median(self) -> float:
        """The median sample (NaN when nothing was measured)."""
        return statistics.median(self.samples) if self.samples else float("nan")

    @property
    def ms(self) -> float:
        """The median in milliseconds."""
        return self.median * 1000.0

    def to_json(self) -> dict[str, Any]:
        """``{"median_s": ..., "samples_s": [...]}`` for the JSON results."""
        return {"median_s": self.median, "samples_s": list(self.samples)}


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    """(seconds, result) of one call."""
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def fmt_ms(seconds: float) -> str:
    """A duration for a table cell, in ms below 10 s, else in s."""
    if seconds != seconds:  # NaN: not measured
        return "n/a"
    if seconds < 0.01:
        return f"{seconds * 1000:.2f} ms"
    if seconds < 10:
        return f"{seconds * 1000:.0f} ms"
    return f"{seconds:.1f} s"


def verdict(value: float, goal: float, *, higher_is_better: bool) -> str:
    """'met' / 'NOT met' for a ratio against its goal (n/a when not measured)."""
    if value != value:
        return "n/a"
    ok = value >= goal if higher_is_better else value <= goal
    return "met" if ok else "**NOT met**"


def ratio(a: float, b: float) -> float:
    """a / b, NaN when either is missing or b is zero."""
    if a != a or b != b or b == 0:
        return float("nan")
    return a / b


def fmt_ratio(x: float) -> str:
    """A ratio for a table cell."""
    return "n/a" if x != x else (f"{x:.1f}x" if x >= 10 else f"{x:.2f}x")


def settle(spark: Any, seconds: float = 10.0) -> None:
    """Let the JVM finish the work a Spark job leaves behind (GC, shuffle cleanup) before timing.

    On a 2-core machine that background work competes with whatever is timed next; every
    method measured after this call gets the same quiet start.
    """
    spark.sparkContext._jvm.System.gc()
    time.sleep(seconds)


def load_average() -> float:
    """The 1-minute load average (0 where unavailable)."""
    try:
        import os

        return os.getloadavg()[0]
    except OSError:
        return 0.0


# --------------------------------------------------------------------------- I/O counting


def classify(path: str, index_marker: str = "/_lakehouse_index/") -> str:
    """The I/O category of a path: index-log, index-data, table-log or table-data."""
    if index_marker in path:
        return "index-log" if "/_log/" in path else "index-data"
    if "/_delta_log/" in path or "/metadata/" in path:
        return "table-log"
    return "table-data"


@dataclass
class IOCounters:
    """Per category: files opened, read calls, bytes read, listings, stats."""

    opens: Counter[str] = field(default_factory=Counter)
    reads: Counter[str] = field(default_factory=Counter)
    bytes: Counter[str] = field(default_factory=Counter)
    lists: Counter[str] = field(default_factory=Counter)
    stats: Counter[str] = field(default_factory=Counter)

    def reset(self) -> None:
        """Zero every counter."""
        for c in (self.opens, self.reads, self.bytes, self.lists, self.stats):
            c.clear()

    def object_reads(self, category: str) -> int:
        """Storage requests that fetch bytes of ``category`` objects (each read call is one GET on S3)."""
        return self.reads[category]


class _CountingReader:
    """A file object for ``pa.PythonFile`` that counts reads of the wrapped native file."""

    def __init__(self, inner: pa.NativeFile, category: str, counters: IOCounters) -> None:
        self._inner = inner
        self._category = category
        self._counters = counters
        self.closed = False

    def _count(self, n: int) -> None:
        self._counters.reads[self._category] += 1
        self._counters.bytes[self._category] += n

    def read(self, nbytes: int = -1) -> bytes:
        data = self._inner.read() if nbytes is None or nbytes < 0 else self._inner.read(nbytes)
        self._count(len(data))
        return data

    def read_buffer(self, nbytes: int = -1) -> pa.Buffer:
        buf = self._inner.read_buffer() if nbytes is None or nbytes < 0 else self._inner.read_buffer(nbytes)
        self._count(buf.size)
        return buf

    def seek(self, pos: int, whence: int = 0) -> int:
        return int(self._inner.seek(pos, whence))

    def tell(self) -> int:
        return int(self._inner.tell())

    def size(self) -> int:
        return int(self._inner.size())

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return bool(self._inner.seekable())

    def writable(self) -> bool:
        return False

    def close(self) -> None:
        self.closed = True
        self._inner.close()


class CountingHandler(pafs.FileSystemHandler):
    """Delegates to a pyarrow filesystem and counts what the engine asks of it."""

    def __init__(self, inner: pafs.FileSystem, counters: IOCounters) -> None:
        self.inner = inner
        self.counters = counters

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CountingHandler) and other.inner.equals(self.inner)

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def get_type_name(self) -> str:
        return "counting+" + self.inner.type_name

    def normalize_path(self, path: str) -> str:
        return str(self.inner.normalize_path(path))

    def get_file_info(self, paths: Sequence[str]) -> list[pafs.FileInfo]:
        for p in paths:
            self.counters.stats[classify(p)] += 1
        return list(self.inner.get_file_info(list(paths)))

    def get_file_info_selector(self, selector: pafs.FileSelector) -> list[pafs.FileInfo]:
        self.counters.lists[classify(selector.base_dir + "/")] += 1
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

    def _open(self, path: str, native: pa.NativeFile) -> pa.PythonFile:
        category = classify(path)
        self.counters.opens[category] += 1
        return pa.PythonFile(_CountingReader(native, category, self.counters), mode="r")

    def open_input_stream(self, path: str) -> pa.PythonFile:
        return self._open(path, self.inner.open_input_stream(path))

    def open_input_file(self, path: str) -> pa.PythonFile:
        return self._open(path, self.inner.open_input_file(path))

    def open_output_stream(self, path: str, metadata: Any) -> pa.NativeFile:
        return self.inner.open_output_stream(path, metadata=metadata)

    def open_append_stream(self, path: str, metadata: Any) -> pa.NativeFile:
        return self.inner.open_append_stream(path, metadata=metadata)


@contextlib.contextmanager
def count_io(*storages: Any) -> Iterator[IOCounters]:
    """Count the I/O of the given :class:`~lakehouse_index.io.Storage` objects while inside.

    Storage caches its pyarrow filesystem in ``_fs``; the wrapper is installed there and the
    original restored on exit. Callers must drop handles opened inside (footer caches) after.
    """
    counters = IOCounters()
    saved = []
    seen: set[int] = set()
    for st in storages:
        if id(st) in seen:
            continue
        seen.add(id(st))
        original = st.filesystem
        saved.append((st, original))
        object.__setattr__(st, "_fs", pafs.PyFileSystem(CountingHandler(original, counters)))
    try:
        yield counters
    finally:
        for st, original in saved:
            object.__setattr__(st, "_fs", original)


def clear_engine_caches() -> None:
    """Forget the engine's in-process caches of Parquet footers (data files and index files)."""
    from lakehouse_index.query import index_reader
    from lakehouse_index.query.lookup import clear_scan_cache
    from lakehouse_index.read.footers import clear_footer_cache

    clear_footer_cache()
    clear_scan_cache()
    index_reader.FOOTERS.clear()


def not_available(fn: Callable[[], Any]) -> tuple[bool, Any]:
    """(True, result) or (False, message) when the engine raises NotImplementedError."""
    try:
        return True, fn()
    except NotImplementedError as e:
        return False, f"not yet available ({e})"


def bench_main(
    argv: list[str] | None,
    *,
    description: str,
    scales: Sequence[str],
    run: Callable[[str], T],
    render: Callable[[T], str],
    section: tuple[str, str, str] | Callable[[str], tuple[str, str, str]],
    results: Callable[[T], Mapping[str, Any]],
) -> T:
    """The command line every benchmark shares: run at ``--scale``, print, write its section and JSON.

    ``section`` is (name, title, script) for ``report.write_section``, or a function of the
    scale giving it (a scale whose results stand beside the others' in a section of its
    own); ``results`` gives the run's machine-readable results for ``report.write_results``
    (both skipped with ``--no-report``).
    """
    import argparse

    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--scale", choices=sorted(scales), default="small")
    ap.add_argument("--no-report", action="store_true", help="print only; do not write the benchmarks file")
    ap.add_argument("--report-path", default=None, help="write to this file instead of docs/BENCHMARKS.md")
    args = ap.parse_args(argv)
    res = run(args.scale)
    body = render(res)
    print(body)
    if not args.no_report:
        from integration.bench.report import write_results, write_section

        name, title, script = section(args.scale) if callable(section) else section
        write_section(name, title, script, body, path=args.report_path)
        write_results(name, results(res), path=args.report_path)
    return res
