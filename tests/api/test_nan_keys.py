"""NaN lookup keys: a NaN key matches NaN rows (the documented rule), whichever plan answers.

Parquet statistics (and so index file and row-group bounds) leave NaN out, so a NaN key must
never be pruned by them: the index, the hybrid scan of files appended since, the plain scan
and composite keys led by NaN all find the rows deltalake's reader holds.
"""

from __future__ import annotations

import math
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

import lakehouse_index as li

NAN = float("nan")


def _expected(path: str, leading: str, keys: list[tuple[object, ...]]) -> list[int]:
    rows = DeltaTable(path).to_pyarrow_table().to_pylist()

    def same(a: object, b: object) -> bool:
        return (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b)) or a == b

    cols = ["g", "k"] if leading == "g" else ["k", "g"]

    def hit(r: dict[str, object], key: tuple[object, ...]) -> bool:
        return all(same(r[c], v) for c, v in zip(cols[: len(key)], key, strict=True))

    return sorted(r["id"] for r in rows if any(hit(r, key) for key in keys))


@pytest.mark.parametrize("force_index", [False, True], ids=["planner", "forced"])
def test_nan_keys_match_nan_rows_on_every_path(tmp_path: Path, force_index: bool) -> None:
    path = str(tmp_path / "t")
    batches = [
        {"id": [1, 2], "g": [NAN, 1.5], "k": ["x", "y"]},
        {"id": [3, 5], "g": [NAN, -2.0], "k": ["y", "x"]},  # NaN beside numbers below and above
        {"id": [6, 7], "g": [3.0, 4.0], "k": ["x", "x"]},
    ]
    for b in batches:
        write_deltalake(path, pa.table(b), mode="append")
    t = li.open_table(path)
    t.planner_config = li.PlannerConfig(force_index=force_index)
    t.create_index(li.SecondaryIndex("by_g", key="g", auto_refresh="off"))
    t.create_index(li.CoveringIndex("cov_g", indexed="g", included=["id"], auto_refresh="off"))
    t.create_index(li.SecondaryIndex("by_gk", key=["g", "k"], auto_refresh="off"))
    t.create_index(li.SecondaryIndex("by_kg", key=["k", "g"], auto_refresh="off"))

    def check() -> None:
        for index in ("by_g", "cov_g"):
            want = _expected(path, "g", [(NAN,), (1.5,)])
            assert sorted(t.lookup(index, [NAN, 1.5])["id"].to_pylist()) == want
            assert t.locate(index, [NAN, 1.5]).num_rows == len(want)
        assert sorted(t.lookup("by_gk", [(NAN, "x")])["id"].to_pylist()) == _expected(path, "g", [(NAN, "x")])
        assert sorted(t.lookup("by_kg", [("y", NAN)])["id"].to_pylist()) == _expected(path, "k", [("y", NAN)])

    check()
    write_deltalake(path, pa.table({"id": [8], "g": [NAN], "k": ["x"]}), mode="append")
    check()  # the appended file is scanned (hybrid, or plain)
    for name in ("by_g", "cov_g", "by_gk", "by_kg"):
        t.refresh_index(name)
    check()
