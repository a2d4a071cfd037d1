"""Merge-on-read removal of rows: a data file stays, a new deletion vector marks its removed rows.

A file's new deletion vector holds the positions its current one marks plus the newly
removed ones (a logical file has one DV). The commit removes the old logical file
(path, old DV) and adds the same path with the new DV and statistics read from its Parquet
footer (:func:`~.stats.footer_stats`; :func:`~.log_commit.commit_changes`); a file whose
every row is then marked is removed instead. The bitmaps are computed once on the write's
snapshot; the DV file holding them is written by each commit attempt, so a lost race deletes
it with the attempt's other files and a rerun writes its own.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pyroaring import BitMap64

from lakehouse_index.io import Storage
from lakehouse_index.sink.rewrite import read_physical
from lakehouse_index.source import FileEntry, TableSource
from lakehouse_index_delta.deletion_vectors import (
    DeletionVectorDescriptor,
    deletion_vector_file,
    relative_descriptor,
    serialize_roaring_bitmap_array,
)
from lakehouse_index_delta.write.stats import footer_stats


@dataclass(frozen=True)
class FileMark:
    """A data file whose removed rows a new deletion vector marks.

    ``num_records``: the rows the file holds physically; ``stats``: the ``add``'s statistics
    (:func:`~.stats.footer_stats`);
    ``bitmap``: the new DV (RoaringBitmapArray, portable format) holding ``cardinality``
    positions; ``replaces``: the id of the DV it replaces (None: the file had none);
    ``removed``: how many live rows it newly marks; ``erased``: those rows in the file's
    physical schema (for the change data feed; None when the feed is off), written with
    ``compression`` and INT96 timestamps when ``int96``.
    """

    entry: FileEntry
    num_records: int
    stats: str
    bitmap: bytes
    cardinality: int
    replaces: str | None
    removed: int
    erased: pa.Table | None = None
    compression: str = "snappy"
    int96: bool = False

    @property
    def removes_file(self) -> bool:
        """Whether every row of the file is marked: the file is then removed, not given a DV
        (as Delta's own writers do)."""
        return self.cardinality >= self.num_records


def plan_mark(
    source: TableSource, entry: FileEntry, positions: np.ndarray, config: Mapping[str, str], *, cdf: bool
) -> FileMark:
    """The mark of ``entry``'s live rows at ``positions`` (physical row positions) on top of its DV
    (``config``: the table's properties, naming the statistics columns; ``cdf``: the change data
    feed is on)."""
    before = source.deleted_positions(entry)
    marked = before | BitMap64(positions.astype(np.uint64))
    replaces = entry.deletes.id if entry.deletes is not None else None
    fs, path = source.io.arrow(entry.path)
    with fs.open_input_file(path) as f:
        meta = pq.read_metadata(f)
    bitmap = serialize_roaring_bitmap_array(marked)
    stats = footer_stats(meta, config)
    mark = FileMark(entry, meta.num_rows, stats, bitmap, len(marked), replaces, len(marked) - len(before))
    if not cdf:
        return mark
    physical, compression, int96 = read_physical(source, entry)
    erased = physical.take(pa.array(np.sort(positions), pa.int64()))
    return replace(mark, erased=erased, compression=compression, int96=int96)


def write_deletion_vectors(
    storage: Storage, table_root: str, marks: Sequence[FileMark]
) -> tuple[str, list[DeletionVectorDescriptor]]:
    """One DV file in the table root holding every mark's bitmap; its URI and each mark's descriptor."""
    file_id = uuid.uuid4()
    data, offsets = deletion_vector_file([m.bitmap for m in marks])
    out = [
        relative_descriptor(file_id, off, m.bitmap, m.cardinality, table_root)
        for m, off in zip(marks, offsets, strict=True)
    ]
    uri = out[0].file_uri
    assert uri is not None
    storage.put_if_absent(uri, data)
    return uri, out
