"""Subject keys the erase accepted up to its table commit, then failed on after it.

* a composite key given as a list (``["de", 4]``, as JSON gives it) located and erased the
  rows, then the audit record (and with ``purge`` the verification, after the purge) raised
  TypeError: the table had changed, no audit record was written;
* a NaN key of a double column: the same, with ValueError.

Such keys are now taken as tuples, or refused before anything changes.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

import lakehouse_index as li


def _table(tmp_path: Path) -> str:
    uri = str(tmp_path / "t")
    ids = list(range(40))
    write_deltalake(
        uri,
        pa.table(
            {
                "id": pa.array(ids, pa.int64()),
                "c": [["de", "fr"][i % 2] for i in ids],
                "f": [float("nan") if i % 5 == 0 else i / 2 for i in ids],
            }
        ),
    )
    return uri


def test_a_composite_key_given_as_a_list_is_erased_and_audited(tmp_path: Path) -> None:
    uri = _table(tmp_path)
    t = li.open_table(uri)
    t.create_index(li.SecondaryIndex("by_ci", key=["c", "id"]))

    result = t.erase("by_ci", [["de", 4], ["fr", 5], ["fr", 4]])  # the last one is nobody

    assert result.rows_erased == 2 and result.audit_uri is not None
    left = DeltaTable(uri).to_pyarrow_table()["id"].to_pylist()
    assert sorted(left) == [i for i in range(40) if i not in (4, 5)]
    assert len(t.erasures()) == 1 and len(t.erasures()[0].subjects) == 3


@pytest.mark.parametrize("keys", [[("de",)], [("de", 4, 5)], ["de"], [("de", None)]])
def test_a_composite_key_of_the_wrong_shape_is_refused(tmp_path: Path, keys: list) -> None:
    uri = _table(tmp_path)
    t = li.open_table(uri)
    t.create_index(li.SecondaryIndex("by_ci", key=["c", "id"]))
    with pytest.raises(li.errors.EraseRefusedError):
        t.erase("by_ci", keys)
    assert DeltaTable(uri).version() == 0 and t.erasures() == []


def test_a_nan_key_is_refused_before_the_commit(tmp_path: Path) -> None:
    uri = _table(tmp_path)
    t = li.open_table(uri)
    t.create_index(li.SecondaryIndex("by_f", key="f"))
    with pytest.raises(li.errors.EraseRefusedError, match="NaN"):
        t.erase("by_f", [float("nan")])
    assert DeltaTable(uri).version() == 0 and t.erasures() == []
    assert t.erase("by_f", [1.5], purge=True).rows_erased == 1


def test_purge_of_a_composite_key_whose_part_other_rows_share(tmp_path: Path) -> None:
    """A part other rows keep (the country "de" of (country, id)) is other people's data, not a
    trace: it was searched for on its own and always reported, so an erase with purge of a
    composite key always raised ErasureVerificationError after purging. The combination is
    now checked row by row at the latest version and only parts no remaining row holds are
    searched for."""
    uri = _table(tmp_path)
    t = li.open_table(uri)
    t.create_index(li.SecondaryIndex("by_ci", key=["c", "id"]))

    result = t.erase("by_ci", [("fr", 31), ("fr", 33)], purge=True)  # no other column holds 31 or 33

    v = result.verification
    assert v is not None and v["ok"] and v["hits"] == [] and v["filesChecked"] > 0
    assert (v["liveCombinations"], v["sharedParts"], v["searched"]) == (0, [0, 2], [1, 3])
    kept = sorted(DeltaTable(uri).to_pyarrow_table()["id"].to_pylist())
    assert kept == [i for i in range(40) if i not in (31, 33)]


def test_purge_of_a_composite_key_whose_every_part_other_rows_share(tmp_path: Path) -> None:
    """Both parts held by other rows (id 4 also in "fr"): only the combination is checked."""
    uri = str(tmp_path / "t")
    write_deltalake(uri, pa.table({"id": pa.array([4, 4, 7], pa.int64()), "c": ["de", "fr", "de"]}))
    t = li.open_table(uri)
    t.create_index(li.SecondaryIndex("by_ci", key=["c", "id"]))

    v = t.erase("by_ci", [("de", 4)], purge=True).verification

    assert v is not None and v["ok"] and (v["liveCombinations"], v["searched"]) == (0, [])
    assert DeltaTable(uri).to_pyarrow_table().sort_by("id").to_pylist() == [
        {"id": 4, "c": "fr"},
        {"id": 7, "c": "de"},
    ]
