"""The proof the erase issue asks for, end to end with ``purge=True``, on both formats.

Each subject's rows are spread over many files (partitioned and unpartitioned layouts,
1 and 100 subjects). Afterwards: every other row is unchanged (multiset, read by deltalake /
pyiceberg), the index and a plain scan find no subject, no file under the table holds a
subject (the residue scan, plus this test's own check: every Parquet file decoded with
pyarrow and every other file's bytes, decompressed where gzip/zstd), time travel to a purged
version is refused, and a purge the retention settings forbid is refused without ``force``.
"""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, write_deltalake

import lakehouse_index as li
from lakehouse_index.workflows.erasure.verify.residue import find_residue
from tests.workflows.erasure import test_erase_delta as d
from tests.workflows.erasure import test_erase_iceberg as ic


def _own_check(root: Path, subjects: list[str]) -> list[str]:
    """Files under ``root`` holding a subject: Parquet decoded, others as (decompressed) bytes."""
    wanted = pa.array(subjects, pa.string())
    needles = [s.encode() for s in subjects]
    found = []
    for p in root.rglob("*"):
        if not p.is_file():
            continue
        data = p.read_bytes()
        if data[:4] == b"PAR1":
            t = pq.read_table(p)
            for name, col in zip(t.column_names, t.columns, strict=True):
                text = pa.types.is_string(col.type) or pa.types.is_large_string(col.type)
                if text and pc.any(pc.is_in(col.cast(pa.string()), value_set=wanted)).as_py():
                    found.append(f"{p}:{name}")
            continue
        if data[:2] == b"\x1f\x8b":
            data = gzip.decompress(data)
        if any(n in data for n in needles) or any(s in str(p) for s in subjects):
            found.append(str(p))
    return found


def _check_delta(uri: str, before: Counter, subjects: list[str], result: Any) -> None:
    assert d._rows(uri) == Counter({r: c for r, c in before.items() if r[1] not in subjects})
    t = li.open_table(uri)
    assert not t.lookup("by_email", subjects).num_rows
    assert not t.scan(where="email IN (" + ", ".join(f"'{s}'" for s in subjects) + ")").num_rows
    assert result.verification is not None and result.verification["ok"]
    assert find_residue([uri], subjects).ok
    assert _own_check(Path(uri), subjects) == []


@pytest.mark.parametrize("partitioned", [False, True])
@pytest.mark.parametrize("n_subjects", [1, 100])
def test_delta_erase_with_purge_leaves_no_trace(tmp_path: Path, partitioned: bool, n_subjects: int) -> None:
    uri = d._table(tmp_path, partitioned)
    t = li.open_table(uri)
    t.create_index(li.SecondaryIndex("by_email", key="email"))
    t.create_index(li.CoveringIndex("cov", indexed="id", included=["email"], num_buckets=2))
    t.create_index(li.SkippingIndex("skip", columns=["email"]))
    dt = DeltaTable(uri)
    dt.delete("id % 97 = 0")  # deltalake's DELETE: the predicate in commitInfo, files rewritten
    dt.create_checkpoint()
    write_deltalake(
        uri, d._batch(99_000, 300), mode="append", partition_by=["country"] if partitioned else None
    )
    old = DeltaTable(uri).version()
    before = d._rows(uri)
    subjects = d.SUBJECTS[:n_subjects]
    assert _own_check(Path(uri), subjects)  # the check finds the subjects before the erase

    result = t.erase("by_email", subjects, purge=True)

    _check_delta(uri, before, subjects, result)
    with pytest.raises(li.errors.VersionPurgedError):
        li.open_table(uri).lookup("by_email", subjects, version_as_of=old)
    assert li.open_table(uri).verify_index("by_email", sample=30).ok


def test_delta_erase_with_purge_on_a_deletion_vector_table(tmp_path: Path) -> None:
    uri = d._peer(tmp_path, "table-with-dv-small")
    t = li.open_table(uri)
    t.create_index(li.SecondaryIndex("by_value", key="value"))
    before = Counter(t.scan()["value"].to_pylist())
    target = next(iter(before))
    result = t.erase("by_value", [target], purge=True)
    assert Counter(li.open_table(uri).scan()["value"].to_pylist()) == Counter(
        {v: c for v, c in before.items() if v != target}
    )
    assert result.verification is not None and result.verification["ok"]
    assert find_residue([uri], [target]).ok
    # the DV file of the removed file is gone with it
    assert not [p for p in Path(uri).rglob("deletion_vector_*.bin")]


def test_purge_refused_by_retention_settings_unless_forced(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    write_deltalake(uri, d._batch(0, 200), configuration={"delta.logRetentionDuration": "interval 30 days"})
    t = li.open_table(uri)
    t.create_index(li.SecondaryIndex("by_email", key="email"))
    v = DeltaTable(uri).version()
    with pytest.raises(li.errors.EraseRefusedError, match="logRetentionDuration"):
        t.erase("by_email", d.SUBJECTS[:1], purge=True)
    assert DeltaTable(uri).version() == v
    before = d._rows(uri)
    result = t.erase("by_email", d.SUBJECTS[:1], purge=True, force=True)
    _check_delta(uri, before, d.SUBJECTS[:1], result)


@pytest.mark.parametrize("partitioned", [False, True])
@pytest.mark.parametrize("n_subjects", [1, 100])
def test_iceberg_erase_with_purge_leaves_no_trace(tmp_path: Path, partitioned: bool, n_subjects: int) -> None:
    catalog, _ = ic._table(tmp_path, partitioned)
    t = li.open_table("db.t", catalog=catalog)
    t.create_index(li.SecondaryIndex("by_email", key="email"))
    t.create_index(li.CoveringIndex("cov", indexed="id", included=["email"], num_buckets=2))
    native = catalog.load_table("db.t")
    native.delete("id < 50")  # a pyiceberg delete: files rewritten, older snapshots keep them
    catalog.load_table("db.t").append(ic._batch(99_000, 300))
    old = catalog.load_table("db.t").current_snapshot().snapshot_id
    before = ic._rows(catalog)
    subjects = ic.SUBJECTS[:n_subjects]
    location = Path(catalog.load_table("db.t").location().removeprefix("file://"))
    assert _own_check(location, subjects)

    result = t.erase("by_email", subjects, purge=True)

    assert ic._rows(catalog) == Counter({r: c for r, c in before.items() if r[1] not in subjects})
    t = li.open_table("db.t", catalog=catalog)
    assert not t.lookup("by_email", subjects).num_rows
    assert result.verification is not None and result.verification["ok"]
    assert find_residue([location.as_uri()], subjects).ok
    assert _own_check(location, [s[:16] for s in subjects]) == []  # not even a truncated bound
    with pytest.raises(li.errors.VersionPurgedError):
        t.lookup("by_email", subjects, version_as_of=old)


@pytest.mark.spark
@pytest.mark.iceberg_spark
@pytest.mark.integration
def test_iceberg_erase_with_purge_on_a_spark_table_with_position_deletes(spark_wh: Any) -> None:
    catalog, t = ic._spark_table(spark_wh, "purged", 2)
    t.create_index(li.SecondaryIndex("by_email", key="email"))
    before = catalog.load_table("db.t").scan().to_arrow()
    subjects = ["subject-7", "subject-13"]
    result = t.erase("by_email", subjects, purge=True)
    after = catalog.load_table("db.t").scan().to_arrow()
    keep = Counter(
        r
        for r in zip(before["id"].to_pylist(), before["email"].to_pylist(), strict=True)
        if r[1] not in subjects
    )
    assert Counter(zip(after["id"].to_pylist(), after["email"].to_pylist(), strict=True)) == keep
    assert result.verification is not None and result.verification["ok"]
    location = catalog.load_table("db.t").location()
    assert find_residue([location], subjects).ok


def test_a_trace_left_is_an_error_with_the_audit_record_written(tmp_path: Path) -> None:
    """A subject's key left in a file the purge does not own (a stray copy under the table) is
    found by the verification: the erase raises, after recording the failed verification."""
    uri = d._table(tmp_path, False, files=3, rows=100)
    t = li.open_table(uri)
    t.create_index(li.SecondaryIndex("by_email", key="email"))
    Path(uri, "_notes").mkdir()
    Path(uri, "_notes", "export.json").write_text(json.dumps({"customer": d.SUBJECTS[0]}))
    with pytest.raises(li.errors.ErasureVerificationError, match=r"_notes/export\.json") as err:
        t.erase("by_email", d.SUBJECTS[:1], purge=True)
    assert err.value.report is not None and not err.value.report["ok"]
    records = t.erasures()
    assert len(records) == 1 and records[0].verification is not None and not records[0].verification["ok"]
    assert d.SUBJECTS[0] not in json.dumps(records[0].to_json())


def test_partitioned_by_the_subject_column_leaves_no_trace_not_even_in_the_audit(tmp_path: Path) -> None:
    uri = str(tmp_path / "by_subject")
    for f in range(4):
        write_deltalake(uri, d._batch(f * 50, 50), mode="append", partition_by=["email"])
    t = li.open_table(uri)
    t.create_index(li.SecondaryIndex("by_email", key="email"))
    subjects = d.SUBJECTS[:3]
    before = d._rows(uri)
    result = t.erase("by_email", subjects, purge=True)
    _check_delta(uri, before, subjects, result)
    assert not [p for p in Path(uri).rglob("*") if any(s in str(p) for s in subjects)]
    record = json.dumps(t.erasures()[-1].to_json())
    assert all(s not in record for s in subjects) and "<value #0>" in record
