"""Erase on a Delta table whose data files store timestamps as INT96 (Spark's default encoding).

The rewrite of a file used to read INT96 as nanoseconds, which wraps every timestamp outside
1677-2262 around silently (9999-12-31 became 1816-03-29 in the kept rows), and wrote the
kept rows back as INT64 nanosecond timestamps, which Spark 3 cannot read.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import time
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
from deltalake import DeltaTable

import lakehouse_index as li

UTC = dt.timezone.utc
#: Spark writes Delta data files with INT96 timestamps and no Arrow schema.
STAMPS = [
    dt.datetime(2022, 1, 1, tzinfo=UTC),
    dt.datetime(9999, 12, 31, tzinfo=UTC),
    dt.datetime(1, 1, 1, tzinfo=UTC),
    None,
]


def _int96_table(uri: str) -> None:
    rows = pa.table(
        {
            "id": pa.array([1, 2, 3, 4], pa.int64()),
            "email": ["a@x", "b@x", "c@x", "d@x"],
            "ts": pa.array(STAMPS, pa.timestamp("us", tz="UTC")),
        }
    )
    os.makedirs(f"{uri}/_delta_log")
    name = f"part-00000-{uuid.uuid4()}-c000.snappy.parquet"
    pq.write_table(rows, f"{uri}/{name}", use_deprecated_int96_timestamps=True, store_schema=False)
    now = int(time.time() * 1000)
    fields = [
        {"name": "id", "type": "long", "nullable": True, "metadata": {}},
        {"name": "email", "type": "string", "nullable": True, "metadata": {}},
        {"name": "ts", "type": "timestamp", "nullable": True, "metadata": {}},
    ]
    actions = [
        {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
        {
            "metaData": {
                "id": str(uuid.uuid4()),
                "format": {"provider": "parquet", "options": {}},
                "schemaString": json.dumps({"type": "struct", "fields": fields}),
                "partitionColumns": [],
                "configuration": {},
                "createdTime": now,
            }
        },
        {
            "add": {
                "path": name,
                "partitionValues": {},
                "size": os.path.getsize(f"{uri}/{name}"),
                "modificationTime": now,
                "dataChange": True,
                "stats": json.dumps({"numRecords": 4}),
            }
        },
        {"commitInfo": {"timestamp": now, "operation": "WRITE"}},
    ]
    Path(uri, "_delta_log", f"{0:020d}.json").write_text("\n".join(json.dumps(a) for a in actions) + "\n")


def _reader_rows(uri: str) -> list[tuple]:
    # deltalake reads INT96 as nanoseconds by default and fails on 9999-12-31: ask for microseconds.
    opts = ds.ParquetReadOptions(coerce_int96_timestamp_unit="us")
    t = DeltaTable(uri).to_pyarrow_dataset(parquet_read_options=opts).to_table()
    return sorted(zip(*(t[c].to_pylist() for c in ("id", "email", "ts")), strict=True))


def test_erase_keeps_int96_timestamps_of_the_kept_rows(tmp_path: Path) -> None:
    uri = str(tmp_path / "int96")
    _int96_table(uri)
    before = _reader_rows(uri)
    assert [r[2] for r in before] == STAMPS
    t = li.open_table(uri)
    t.create_index(li.SecondaryIndex("by_email", key="email"))

    result = t.erase("by_email", ["a@x"], purge=True)

    assert result.rows_erased == 1 and result.verification is not None and result.verification["ok"]
    assert _reader_rows(uri) == [r for r in before if r[1] != "a@x"]
    assert t.lookup("by_email", ["b@x"])["ts"].to_pylist() == [STAMPS[1]]
    (new_file,) = [f for f in DeltaTable(uri).file_uris()]
    schema = pq.ParquetFile(new_file).schema
    assert schema.column(2).physical_type == "INT96"  # still readable by Spark 3
