"""The root index and the row-group bounds pick exactly the index files (row groups) whose key
bounds may hold a key, by searching the bounds among the sorted keys, and a key set cut to a
file's bounds keeps exactly the keys those bounds can hold: each equals testing every file
(group) against every key."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
from hypothesis import given, settings
from hypothesis import strategies as st

from lakehouse_index.kinds.keys import keys_table
from lakehouse_index.log.entry import IndexFile, Level
from lakehouse_index.query.index_reader import GroupBounds, KeySet, RootIndex, RowFilter, root_index

SCHEMA = pa.schema([("k", pa.int64()), ("s", pa.string()), ("f", pa.float64())])


def _keys(values: list[object], column: str = "k") -> KeySet:
    return KeySet.of(keys_table([(v,) for v in values], SCHEMA, [column]))


def _may_hold(lo: object, hi: object, nulls: int | None, all_null: bool, keys: list[object]) -> bool:
    """One group against every key, as the statistics allow (the oracle)."""
    if any(k != k for k in keys if isinstance(k, float)):  # NaN: statistics leave it out
        return True
    if lo is None or hi is None:
        return not all_null or None in keys
    if None in keys and (nulls is None or nulls > 0):
        return True
    return any(k is not None and lo <= k <= hi for k in keys)  # type: ignore[operator]


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
@given(files=snapshots(), keys=st.lists(st.one_of(st.none(), st.integers(-30, 60)), max_size=40))
def test_candidates_equal_testing_every_file(files: tuple[IndexFile, ...], keys: list[int | None]) -> None:
    root = RootIndex.of(files, pa.int64())
    expected = [
        i
        for i, f in enumerate(files)
        if _may_hold(
            f.min_key[0] if f.min_key else None, f.max_key[0] if f.max_key else None, None, False, keys
        )
    ]
    assert root.candidates(_keys(keys)) == expected
    assert root.candidates(RowFilter(pc.field("k") > 0)) == list(range(len(files)))


_VALUES = {
    "k": st.integers(-40, 40),
    "s": st.text(alphabet="abcé\x00z", max_size=3),
    "f": st.one_of(st.floats(-5, 5, allow_nan=False), st.just(float("nan")), st.just(-0.0)),
}


@st.composite
def groups_and_keys(draw: st.DrawFn) -> tuple[str, GroupBounds, list[object]]:
    """Row groups in any order (overlapping, without statistics, all-null, with nulls) and keys
    of one column type, with duplicates, nulls and (floats) NaN."""
    column = draw(st.sampled_from(sorted(_VALUES)))
    value = _VALUES[column].filter(lambda v: v == v)  # statistics never hold NaN
    mins, maxes, nulls, all_null = [], [], [], []
    for _ in range(draw(st.integers(0, 12))):
        if draw(st.integers(0, 5)) == 0:  # no min/max: all null, or statistics not written
            empty = draw(st.booleans())
            mins.append(None), maxes.append(None), nulls.append(3 if empty else None), all_null.append(empty)
            continue
        a, b = sorted(draw(st.lists(value, min_size=2, max_size=2)))
        (
            mins.append(a),
            maxes.append(b),
            nulls.append(draw(st.sampled_from([None, 0, 2]))),
            all_null.append(False),
        )
    keys = draw(st.lists(st.one_of(st.none(), _VALUES[column]), max_size=30))
    return column, GroupBounds(tuple(mins), tuple(maxes), tuple(nulls), tuple(all_null)), keys


@settings(max_examples=400, deadline=None)
@given(case=groups_and_keys())
def test_groups_equal_testing_every_group(case: tuple[str, GroupBounds, list[object]]) -> None:
    column, bounds, keys = case
    selection = _keys(keys, column)
    expected = [
        g
        for g in range(len(bounds.mins))
        if _may_hold(bounds.mins[g], bounds.maxes[g], bounds.null_counts[g], bounds.all_null[g], keys)
    ]
    assert selection.groups(bounds) == expected


@settings(max_examples=300, deadline=None)
@given(case=groups_and_keys(), data=st.data())
def test_keys_within_a_span_are_the_keys_it_can_hold(
    case: tuple[str, GroupBounds, list[object]], data: st.DataObject
) -> None:
    column, bounds, keys = case
    selection = _keys(keys, column)
    groups = data.draw(st.lists(st.integers(0, max(0, len(bounds.mins) - 1)), unique=True, max_size=4))
    groups = [g for g in groups if g < len(bounds.mins)]
    span = bounds.span(groups)
    cut = selection.within(span)
    kept = cut.table.column(column).to_pylist()
    if span is None:
        assert cut is selection
        return
    lo, hi = span
    expected = [k for k in keys if k is None or k != k or lo <= k <= hi]  # type: ignore[operator]
    # Equal as multisets (NaN compared by its repr), and still sorted the way lookups search them.
    assert sorted(map(repr, kept)) == sorted(map(repr, expected))
    assert list(cut.leading) == sorted(cut.leading)


def test_root_index_is_cached_per_file_tuple() -> None:
    files = tuple(IndexFile(f"b{i}", 1, 1, Level.BASE, (10 * i,), (10 * i + 10,)) for i in range(100))
    root = root_index(files, pa.int64())
    assert root_index(files, pa.int64()) is root
    # 20 is the upper bound of file 1 and the lower bound of file 2: both may hold it
    assert root.candidates(_keys([20, 555])) == [1, 2, 55]
