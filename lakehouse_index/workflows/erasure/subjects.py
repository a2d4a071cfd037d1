"""The subjects of an erase as rows, and where a data file physically holds them.

A row removed by a row-level delete (a deletion vector, position or equality deletes) is still
in its data file: the table no longer shows it, the file's bytes do. So the erase rewrites
every file that physically holds a subject, live or not, and the verification checks the same.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from lakehouse_index.read.datafiles import read_file
from lakehouse_index.source import FileEntry, Snapshot, TableSource

#: The column of a subject's number (its position among the keys) in :func:`matches`.
SUBJECT = "_subject"
#: The column of a row's position in its file in :func:`matches`.
POSITION = "_pos"


def key_values(keys: Sequence[Any]) -> list[Any]:
    """The single values of the keys (a composite key's columns one by one)."""
    return [v for k in keys for v in (k if isinstance(k, tuple) else (k,))]


def subject_rows(key_columns: Sequence[str], keys: Sequence[Any], snapshot: Snapshot) -> pa.Table:
    """The keys as a table of the key columns, typed as in ``snapshot`` (one row per subject)."""
    width = len(key_columns)
    return pa.table(
        {
            c: pa.array([k[i] if width > 1 else k for k in keys], snapshot.schema.field(c).type)
            for i, c in enumerate(key_columns)
        }
    )


def matches(rows: pa.Table, subjects: pa.Table) -> pa.Table:
    """The rows of ``rows`` (the key columns and :data:`POSITION`) holding a subject's key, with
    the subject's number (:data:`SUBJECT`)."""
    keys = list(subjects.column_names)
    numbered = subjects.append_column(SUBJECT, pa.array(range(subjects.num_rows), pa.int64()))
    return rows.select([*keys, POSITION]).join(numbered, keys=keys, join_type="inner")


def physical_matches(
    source: TableSource, snapshot: Snapshot, entry: FileEntry, subjects: pa.Table
) -> pa.Table:
    """The rows of ``entry``'s file, deleted ones included, holding a subject's key
    (:func:`matches`): only the key columns are read."""
    rows = read_file(source, snapshot, entry, columns=list(subjects.column_names), apply_deletes=False)
    return matches(rows.append_column(POSITION, pa.array(np.arange(rows.num_rows))), subjects)
