"""Merge-on-read removal of rows in an Iceberg v2 table: position-delete files, no data file rewritten.

Each data file holding removed rows gets one position-delete file (the spec's schema:
``file_path`` and ``pos``, field ids 2147483546 and 2147483545, sorted by position) in
its folder and partition, with bounds on ``file_path`` equal to the data file's path, so
readers match it to exactly that file. One snapshot (``delete``, or ``overwrite`` when
rows are added) lists a manifest of the new delete files, a manifest of the added rows'
data files and every manifest of its parent; it is committed through the catalog with
the assertion that ``main`` did not move (pyiceberg 0.12 has no row-delta commit, so it
is built here from pyiceberg's manifest, manifest-list and summary writers). A file's
earlier delete files stay: v2 readers apply every one whose sequence number is not
older than the data file's. Format v3 tables take deletion vectors instead (refused by
the writer).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from functools import partial
from typing import Any

import numpy as np
import pyarrow as pa

from lakehouse_index.io import Storage
from lakehouse_index.io.uri import canonical_uri
from lakehouse_index.sink.rewrite import delete_quietly, write_parquet
from lakehouse_index.source import TableSource

#: The position-delete file's columns and their reserved field ids (Iceberg spec, "Position Delete Files").
PATH_FIELD_ID, POS_FIELD_ID = 2147483546, 2147483545
_SCHEMA = pa.schema(
    [
        pa.field(
            "file_path", pa.string(), nullable=False, metadata={b"PARQUET:field_id": str(PATH_FIELD_ID)}
        ),
        pa.field("pos", pa.int64(), nullable=False, metadata={b"PARQUET:field_id": str(POS_FIELD_ID)}),
    ]
)


def _delete_file(source: TableSource, data: Any, positions: np.ndarray, written: list[str]) -> Any:
    """The position-delete file of ``positions`` of ``data`` (pyiceberg's ``DataFile``), written."""
    from pyiceberg.conversions import to_bytes
    from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
    from pyiceberg.types import LongType, StringType

    raw = f"{data.file_path.rsplit('/', 1)[0]}/{uuid.uuid4()}-deletes.parquet"
    uri = canonical_uri(raw, decoded=True)
    pos = np.sort(positions).astype(np.int64)
    rows = pa.table([pa.array([data.file_path] * len(pos), pa.string()), pa.array(pos)], schema=_SCHEMA)
    written.append(uri)
    size = write_parquet(source, uri, rows, "zstd")
    path = to_bytes(StringType(), data.file_path)
    out = DataFile.from_args(
        content=DataFileContent.POSITION_DELETES,
        file_path=raw,
        file_format=FileFormat.PARQUET,
        partition=data.partition,
        record_count=len(pos),
        file_size_in_bytes=size,
        value_counts={PATH_FIELD_ID: len(pos), POS_FIELD_ID: len(pos)},
        null_value_counts={PATH_FIELD_ID: 0, POS_FIELD_ID: 0},
        lower_bounds={PATH_FIELD_ID: path, POS_FIELD_ID: to_bytes(LongType(), int(pos[0]))},
        upper_bounds={PATH_FIELD_ID: path, POS_FIELD_ID: to_bytes(LongType(), int(pos[-1]))},
    )
    out.spec_id = data.spec_id  # not an argument of from_args
    return out


def commit_position_deletes(
    t: Any,
    source: TableSource,
    storage: Storage,
    originals: Mapping[str, Any],
    positions: Mapping[str, np.ndarray],
    added: pa.Table | None,
) -> tuple[int, tuple[str, ...]]:
    """One snapshot on the head of ``t`` marking ``positions`` of each data file (``originals``:
    its pyiceberg ``DataFile``, by path) deleted and adding ``added`` (rows in the table schema);
    the new snapshot's id and the URIs of the files holding ``added``. A commit that loses the
    race raises pyiceberg's ``CommitFailedException`` after its files are deleted."""
    from pyiceberg.io.pyarrow import _dataframe_to_data_files
    from pyiceberg.manifest import ManifestEntry, ManifestEntryStatus, write_manifest, write_manifest_list
    from pyiceberg.table import TableProperties, snapshots

    from lakehouse_index_iceberg.write.delete_manifests import DeleteManifestWriter
    from lakehouse_index_iceberg.write.snapshot_commit import commit_on_main

    # pyiceberg's metadata classes are pydantic models with aliased fields, which mypy reads badly.
    sn: Any = snapshots
    meta, io, head = t.metadata, t.io, t.current_snapshot()
    snapshot_id, commit = meta.new_snapshot_id(), uuid.uuid4()
    compression = meta.properties.get(
        TableProperties.WRITE_AVRO_COMPRESSION, TableProperties.WRITE_AVRO_COMPRESSION_DEFAULT
    )
    locations = t.location_provider()
    written: list[str] = []  # deleted when the commit fails

    def manifest(writer_class: Any, spec_id: int, files: list[Any], n: int) -> Any:
        path = locations.new_metadata_location(f"{commit}-m{n}.avro")
        written.append(canonical_uri(path, decoded=True))
        args = (meta.specs()[spec_id], meta.schema(), io.new_output(path), snapshot_id, compression)
        with writer_class(*args) as w:
            for f in files:
                w.add(
                    ManifestEntry.from_args(
                        status=ManifestEntryStatus.ADDED, snapshot_id=snapshot_id, data_file=f
                    )
                )
        return w.to_manifest_file()

    try:
        deletes = [_delete_file(source, originals[p], pos, written) for p, pos in sorted(positions.items())]
        data = []
        if added is not None and added.num_rows:
            data = list(_dataframe_to_data_files(table_metadata=meta, df=added, io=io, write_uuid=commit))
            written += [canonical_uri(f.file_path, decoded=True) for f in data]
        manifests = []
        if data:
            manifests.append(manifest(partial(write_manifest, 2), meta.default_spec_id, data, 0))
        for i, spec_id in enumerate(sorted({d.spec_id for d in deletes}), start=1):
            manifests.append(
                manifest(DeleteManifestWriter, spec_id, [d for d in deletes if d.spec_id == spec_id], i)
            )
        sequence = meta.next_sequence_number()
        list_path = locations.new_metadata_location(f"snap-{snapshot_id}-0-{commit}.avro")
        written.append(canonical_uri(list_path, decoded=True))
        with write_manifest_list(
            2, io.new_output(list_path), snapshot_id, head.snapshot_id, sequence, compression
        ) as w:
            w.add_manifests([*manifests, *head.manifests(io)])
        collector = sn.SnapshotSummaryCollector()
        for f, spec in [*((d, meta.spec()) for d in data), *((d, meta.specs()[d.spec_id]) for d in deletes)]:
            collector.add_file(f, schema=meta.schema(), partition_spec=spec)
        operation = sn.Operation.OVERWRITE if data else sn.Operation.DELETE
        summary = sn.update_snapshot_summaries(sn.Summary(operation, **collector.build()), head.summary)
        snapshot = sn.Snapshot(
            snapshot_id=snapshot_id,
            parent_snapshot_id=head.snapshot_id,
            sequence_number=sequence,
            timestamp_ms=max(int(time.time() * 1000), head.timestamp_ms + 1),
            manifest_list=list_path,
            summary=summary,
            schema_id=meta.current_schema_id,
        )
        commit_on_main(t, head.snapshot_id, snapshot)
    except BaseException:
        delete_quietly(storage, written)
        raise
    return snapshot_id, tuple(canonical_uri(f.file_path, decoded=True) for f in data)
