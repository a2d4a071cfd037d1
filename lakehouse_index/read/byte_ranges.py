"""Reading byte ranges of an open file: adjacent ranges in one read, the reads concurrent.

The page reads fetch many small ranges of a data file (offset indexes, page headers, pages);
on an object store each read is a request, so ranges that touch or overlap are merged into
one read, and the reads of one call are in flight together (:func:`fetch_ranges`). Bytes
read already (the end of the file, read with the footer) are not read again
(:class:`ByteSource`).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import pyarrow as pa

from lakehouse_index.io.parallel import shared_pool
from lakehouse_index.read.thrift import Bytes

__all__ = ["ByteSource", "fetch_ranges", "range_readers"]


@dataclass(frozen=True)
class ByteSource:
    """An open file, and the bytes of it already read (``head`` at ``offset``)."""

    handle: pa.NativeFile
    offset: int = 0
    head: Bytes = b""


def fetch_ranges(
    source: pa.NativeFile | ByteSource, ranges: list[tuple[int, int]], concurrent: bool = True
) -> list[memoryview]:
    """The bytes at each (offset, length): one read per run of adjacent or overlapping ranges,
    the runs read concurrently (one after the other unless ``concurrent``); ranges inside
    bytes already read are not read again.

    ValueError for a range outside the file (a corrupt footer or offset index names it).
    """
    src = source if isinstance(source, ByteSource) else ByteSource(source)
    size = src.handle.size()
    for offset, length in ranges:
        if offset < 0 or length < 0 or offset + length > size:
            raise ValueError(f"range ({offset}, {length}) lies outside the file of {size} bytes")
    order = sorted(range(len(ranges)), key=lambda i: ranges[i][0])
    runs: list[tuple[int, int, list[int]]] = []  # (start, end, range numbers)
    for k in order:
        offset, length = ranges[k]
        if runs and offset <= runs[-1][1]:
            start, end, members = runs[-1]
            runs[-1] = (start, max(end, offset + length), [*members, k])
        else:
            runs.append((offset, offset + length, [k]))
    head = memoryview(src.head)

    def read(run: tuple[int, int, list[int]]) -> memoryview:
        start, end, _ = run
        if src.offset <= start and end <= src.offset + len(head):
            return head[start - src.offset : end - src.offset]
        blob = memoryview(src.handle.read_at(end - start, start))
        if len(blob) != end - start:
            raise ValueError(f"short read at {start}: {len(blob)} of {end - start} bytes")
        return blob

    blobs = list(range_readers().map(read, runs)) if concurrent and len(runs) > 1 else [read(r) for r in runs]
    out = [memoryview(b"")] * len(ranges)
    for (start, _, members), blob in zip(runs, blobs, strict=True):
        for k in members:
            offset, length = ranges[k]
            out[k] = blob[offset - start : offset - start + length]
    return out


def range_readers() -> ThreadPoolExecutor:
    """Fetches the merged ranges of a read concurrently: waiting on storage, not on the CPU,
    as many requests in flight as an object store likes."""
    return shared_pool("parquet-ranges", 16)
