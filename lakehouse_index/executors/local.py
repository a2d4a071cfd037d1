"""The in-process executor: index entries computed and written with pyarrow, no JVM."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from lakehouse_index.config import ExecutorConfig
from lakehouse_index.executors.writer import read_root_index, write_entries
from lakehouse_index.io import Storage, join_uri
from lakehouse_index.io.parallel import each_file
from lakehouse_index.kinds.base import IndexJob, InProcessExecutor, WriteTarget
from lakehouse_index.kinds.derived import IndexedColumns
from lakehouse_index.kinds.entries import FILE_ID, PUT, entry_table, in_file_ids, merge
from lakehouse_index.kinds.moves import MoveMap
from lakehouse_index.log.entry import IndexFile
from lakehouse_index.row_filter import filter_rows
from lakehouse_index.source import Snapshot, TableSource


class LocalExecutor(InProcessExecutor):
    """Computes entries in this process with pyarrow: for work of up to ``local_max_rows`` rows."""

    name = "local"

    def __init__(self, config: ExecutorConfig) -> None:
        self.config = config

    def entries(
        self, source: TableSource, snapshot: Snapshot, columns: IndexedColumns, jobs: Sequence[IndexJob]
    ) -> pa.Table:
        def of_file(job: IndexJob) -> pa.Table:
            rows = columns.read_file(source, snapshot, job.entry, columns.names, with_positions=True)
            return entry_table(rows, columns.names, job.file_id, job.ordinal, PUT)

        return pa.concat_tables(each_file(of_file, jobs))

    def map_batches(self, frame: pa.Table, fn: Callable[[pa.Table], pa.Table], schema: pa.Schema) -> pa.Table:
        """``fn`` of the whole table (in process it is one batch)."""
        return fn(frame)

    def sample(self, frame: pa.Table, columns: Sequence[str], fraction: float) -> pa.Table:
        """Rows kept with probability ``fraction`` by a fixed seed (the same rows every time)."""
        rows = frame.select(list(columns))
        if fraction >= 1.0:
            return rows
        return rows.filter(pa.array(np.random.default_rng(0).random(rows.num_rows) < fraction))

    def read_index(self, storage: Storage, index_dir: str, files: Sequence[IndexFile]) -> pa.Table:
        tables = []
        for f in files:
            fs, path = storage.arrow(join_uri(index_dir, f.path))
            tables.append(pq.read_table(path, filesystem=fs))
        return pa.concat_tables(tables)

    def compact(self, entries: pa.Table, moves: MoveMap, live_ids: Sequence[int]) -> pa.Table:
        live = merge(moves.translate(entries), None)
        keep = in_file_ids(live[FILE_ID].to_numpy(), live_ids)
        return filter_rows(live, keep)

    def write(self, entries: pa.Table, target: WriteTarget, rows: int = 0) -> tuple[IndexFile, ...]:
        write_entries(entries, target, self.config)
        return read_root_index(target)

    def filter_files(
        self,
        storage: Storage,
        index_dir: str,
        files: Sequence[IndexFile],
        first: Sequence[str],
        keep_of: Callable[[pa.Table], np.ndarray | None],
        target_of: Callable[[IndexFile], WriteTarget],
    ) -> list[tuple[IndexFile, ...] | None]:
        """The files concurrently, each column read once: the others only for a file that loses rows."""

        def one(f: IndexFile) -> tuple[IndexFile, ...] | None:
            fs, path = storage.arrow(join_uri(index_dir, f.path))
            with fs.open_input_file(path) as handle:
                pf = pq.ParquetFile(handle)
                head = pf.read(columns=list(first))
                keep = keep_of(head)
                if keep is None:
                    return None
                schema = pf.schema_arrow
                rest = pf.read(columns=[c for c in schema.names if c not in first])
            rows = pa.table([head[c] if c in first else rest[c] for c in schema.names], schema=schema)
            target = target_of(f)
            return read_root_index(target, write_entries(filter_rows(rows, keep), target, self.config))

        return each_file(one, files)
