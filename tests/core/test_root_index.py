"""The root index picks exactly the index files whose key bounds may hold a key, whether it
bisects (base files of ranges that do not overlap) or tests files one by one."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
from hypothesis import given, settings
from hypothesis import strategies as st

from lakehouse_index.log.entry import IndexFile, Level
from lakehouse_index.query.index_reader import KeySet, RootIndex, RowFilter, root_index

SCHEMA = pa.schema([("k", pa.int64())])


@st.composite
def snapshots(draw: st.DrawFn) -> tuple[IndexFile, ...]:
    """Base files over adjacent ranges (a bound may be shared), sometimes overlapping ones,
    delta files anywhere, files without bounds, bucketed files; in any order."""
    files = []
    lo = draw(st.integers(-20, 20))
    for n in range(draw(st.integers(0, 8))):
        hi = lo + draw(st.integers(0, 6))
        files.append(IndexFile(f"b{n}", 1, 1, Level.BASE, (lo,), (hi,)))
        lo = hi + draw(st.integers(-1 if draw(st.booleans()) else 0, 3))  # -1: overlapping
    for n in range(draw(st.integers(0, 3))):
        a, b = sorted(draw(st.lists(st.integers(-25, 50), min_size=2, max_size=2)))
        files.append(IndexFile(f"d{n}", 1, 1, Level.DELTA, (a,), (b,)))
    if draw(st.booleans()):
        files.append(IndexFile("unbounded", 1, 1, Level.BASE))
    if draw(st.booleans()):
        files.append(IndexFile("bucketed", 1, 1, Level.BASE, (0,), (9,), bucket=1))
    return tuple(draw(st.permutations(files)))


@settings(max_examples=300, deadline=None)
@given(files=snapshots(), keys=st.lists(st.one_of(st.none(), st.integers(-30, 60)), max_size=6))
def test_candidates_equal_testing_every_file(files: tuple[IndexFile, ...], keys: list[int | None]) -> None:
    root = RootIndex.of(files, pa.int64())
    selection = KeySet.build([(k,) for k in keys], SCHEMA, ["k"])
    expected = [
        i
        for i, f in enumerate(files)
        if selection.may_hit(f.min_key[0] if f.min_key else None, f.max_key[0] if f.max_key else None, None)
    ]
    assert root.candidates(selection) == expected
    assert root.candidates(RowFilter(pc.field("k") > 0)) == list(range(len(files)))


def test_base_files_of_adjacent_ranges_are_bisected_and_cached() -> None:
    files = tuple(IndexFile(f"b{i}", 1, 1, Level.BASE, (10 * i,), (10 * i + 10,)) for i in range(100))
    root = root_index(files, pa.int64())
    assert len(root.base) == 100 and root.bounds.ordered and root.others == ()
    assert root_index(files, pa.int64()) is root
    # 20 is the upper bound of file 1 and the lower bound of file 2: both may hold it
    assert root.candidates(KeySet.build([(20,), (555,)], SCHEMA, ["k"])) == [1, 2, 55]
