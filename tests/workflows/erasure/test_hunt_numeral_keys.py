"""Subjects whose string key is spelled as a number ("0", "1", "00001"): string ids are common.

The residue scan matched such a string as a word, at any token boundary, also where numbers
are bookkeeping. So the erase's own commit (``operationMetrics`` counts and the number of
subjects, kept as text as Delta does; the engine version ``0.1.0``), deltalake's checkpoint
statistics (``"nullCount":{"id":0}``) and pyiceberg's file names (``00000-0-<uuid>.parquet``)
were reported as traces of the subjects: a clean erase with purge raised
ErasureVerificationError after its commit, every time. A string spelled as a number is now
matched as a number is; where it really remains it is still found.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField, StringType

import lakehouse_index as li
from lakehouse_index.workflows.erasure.verify.residue import find_residue
from tests.api.iceberg_index_support import sql_catalog


def _ids(part: int, subject: str) -> list[str]:
    return [str(i) for i in range(part * 10 + 100, part * 10 + 110)] + ([subject] if part == 0 else [])


@pytest.mark.parametrize("subject", ["0", "1", "4", "00001"])
def test_delta_erase_with_purge_of_a_numeral_string_key(tmp_path: Path, subject: str) -> None:
    uri = str(tmp_path / "t")
    for part in range(3):
        ids = _ids(part, subject)
        write_deltalake(uri, pa.table({"id": ids, "v": [f"v{x}" for x in ids]}), mode="append")
    before = sorted(DeltaTable(uri).to_pyarrow_table()["id"].to_pylist())
    t = li.open_table(uri)
    t.create_index(li.SecondaryIndex("by_id", key="id"))

    result = t.erase("by_id", [subject], purge=True)

    assert result.verification is not None and result.verification["ok"], result.verification
    assert sorted(DeltaTable(uri).to_pyarrow_table()["id"].to_pylist()) == [i for i in before if i != subject]


@pytest.mark.parametrize("subject", ["0", "1"])
def test_iceberg_erase_with_purge_of_a_numeral_string_key(tmp_path: Path, subject: str) -> None:
    catalog = sql_catalog(str(tmp_path))
    schema = Schema(
        NestedField(1, "id", StringType(), required=False), NestedField(2, "n", LongType(), required=False)
    )
    tbl = catalog.create_table("db.t", schema=schema)
    for part in range(3):
        ids = _ids(part, subject)
        tbl.append(pa.table({"id": pa.array(ids), "n": pa.array(range(len(ids)), pa.int64())}))
    t = li.open_table("db.t", catalog=catalog)
    t.create_index(li.SecondaryIndex("by_id", key="id"))

    result = t.erase("by_id", [subject], purge=True)

    assert result.verification is not None and result.verification["ok"], result.verification
    left = catalog.load_table("db.t").scan().to_arrow()["id"].to_pylist()
    assert subject not in left and len(left) == 30


def test_a_numeral_string_key_that_remains_is_still_found(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    rows = pa.table({"id": ["12", "13"], "ref": ["12", "x"], "note": ["x", "call 00012 back"]})
    write_deltalake(uri, rows, partition_by=["id"])
    DeltaTable(uri).delete("id = '13'")  # the predicate, with '13', is in the commit
    report = find_residue([uri], ["12", "13", "00012"])
    places = {(h.value_number, h.decoder, h.location.split(": ")[-1]) for h in report.hits}
    assert (0, "path", "name") in places  # the partition folder id=12
    assert (0, "parquet", "row group 0 column ref") in places  # a data value
    assert (0, "ndjson", "$.add.partitionValues.id") in places
    assert (1, "ndjson", "$.commitInfo.operationParameters.predicate") in places
    assert any(n == 2 and "column note pages" in loc for n, _, loc in places)  # inside a longer text
