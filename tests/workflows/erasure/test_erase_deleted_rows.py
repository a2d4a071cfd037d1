"""Rows removed by row-level deletes are still in their data files: the erase takes the subjects
out of those files too, and the scoped verification (the default) looks there as the deep one does.

Tables: Delta with deletion vectors and Iceberg v2 asking for merge-on-read, whose deletes by
this project mark rows instead of rewriting files. Oracles: deltalake's / pyiceberg's reads and
the deep residue scan (every file decoded whole), independent of the scoped check.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from lakehouse_index.io import canonical_uri
from lakehouse_index.workflows.erasure.verification import KEY_CHECK, verify
from lakehouse_index.workflows.erasure.verify.residue import find_residue
from tests.workflows import test_merge_on_read_writes as mor


@pytest.fixture(params=["delta", "iceberg"])
def table(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    made = mor.Delta(tmp_path) if request.param == "delta" else mor.Iceberg(tmp_path)
    made.t.create_index(mor.li.SecondaryIndex("by_name", key="name"))
    return made


def _roots(table: Any) -> list[str]:
    location = table.path if isinstance(table, mor.Delta) else table.catalog.load_table("db.t").location()
    return [location, table.t.context.index_root]


def _names(table: Any) -> Counter[str]:
    return Counter(table.read(table.t.snapshot().version)["name"].to_pylist())


def test_a_subject_only_in_deleted_rows_is_found_by_both_depths(table: Any) -> None:
    deleted = table.t.delete(where="name = 'n3'")
    assert deleted.mode == "merge-on-read" and not deleted.files_rewritten  # the row stays in its file
    ctx = table.t.context
    scoped = verify(ctx, ["name"], ["n3"], [], lambda _m: None)
    assert not scoped["ok"] and scoped["depth"] == "scoped"
    # The row under the delete; with no purge yet, also the index's entries of the row (its PUT
    # and the DEL of the delete) and the delete's own record of its predicate in the log.
    keyed = [h for h in scoped["hits"] if h["decoder"] == KEY_CHECK]
    live = {canonical_uri(f.path) for f in table.t.snapshot().files.values()}
    in_data = [h for h in keyed if h["path"] in live]
    assert len(in_data) == 1 and in_data[0]["subjectNumber"] == 0
    assert {h["location"].split(" [")[0] for h in keyed} == {"rows (deletes not applied)", "index entries"}
    assert not find_residue(_roots(table), ["n3"]).ok  # the deep scan agrees
    # a subject nowhere in the table is found by neither
    assert verify(ctx, ["name"], ["nobody"], [], lambda _m: None)["ok"]
    assert find_residue(_roots(table), ["nobody"]).ok


def test_the_erase_takes_subjects_out_of_deleted_rows_too(table: Any) -> None:
    table.t.delete(where="name IN ('n3', 'n150')")
    before = _names(table)
    subjects = ["n3", "n150", "n250"]
    result = table.t.erase("by_name", subjects, purge=True, force=True)
    assert result.rows_erased == 1  # n250 was the only live subject row
    assert result.verification is not None and result.verification["ok"]
    assert result.verification["depth"] == "scoped" and result.verification["filesSkipped"] > 0
    assert _names(table) == Counter({n: c for n, c in before.items() if n not in subjects})
    assert find_residue(_roots(table), subjects).ok
    assert not table.t.lookup("by_name", subjects).num_rows


def test_deep_verification_decodes_every_file(table: Any) -> None:
    result = table.t.erase("by_name", ["n7"], purge=True, force=True, deep_verify=True)
    v = result.verification
    assert v is not None and v["ok"] and v["depth"] == "deep" and v["filesSkipped"] == 0
    assert "dataFilesKeyChecked" not in v
    assert find_residue(_roots(table), ["n7"]).ok
