"""Writing index entries with pyarrow (small outputs: row-level delete entries, tests)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq

from lakehouse_index.kinds import secondary as sec
from lakehouse_index.spec import IndexSpec
from lakehouse_index.storage import Storage

#: Rows per row group of index files: small groups keep a point read to a few KB.
ROW_GROUP_ROWS = 16_384


def write_entries(entries: pa.Table, spec: IndexSpec, storage: Storage, path: str) -> None:
    """Sort ``entries`` like Spark-built index files and write them as one Parquet file at ``path``."""
    ordered = entries.sort_by([(c, "ascending") for c in sec.sort_columns(spec)])
    fs, inner = storage.arrow(path)
    fs.create_dir(inner.rsplit("/", 1)[0], recursive=True)
    pq.write_table(
        ordered,
        inner,
        filesystem=fs,
        row_group_size=ROW_GROUP_ROWS,
        compression="zstd",
        write_page_index=True,
    )
