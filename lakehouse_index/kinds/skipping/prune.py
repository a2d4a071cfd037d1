"""Pruning: which files may hold a row matching a predicate, from their statistics.

:func:`prune` evaluates the predicate abstractly per file with the shared three-valued
evaluator (:mod:`lakehouse_index.expressions.evaluator`): for every file, which outcomes
(true, false, null) the predicate may take on *some* row of it, as three boolean numpy
arrays over all files at once; it keeps the files where true is possible. This module
is the evaluator's atom oracle: atoms use the exact value list where the file has one
(evaluated with pyarrow, the same kernels the pyarrow executor uses), else min/max and
the bloom filter (``=`` and ``IN`` only). Anything not understood (column-to-column
comparisons, columns not in the index, a pyarrow-expression predicate) may take any
outcome. Every step only ever adds outcomes, so a file holding a matching row is never
dropped.

NaN: pyarrow compares NaN as unequal and unordered, Spark as equal to itself and
greater than everything. Files with NaNs in a column therefore keep every outcome
either engine could give them (true for ``!=``, ``>``, ``>=``, ``NOT IN``,
``NOT BETWEEN``); min/max ignore NaNs. Signed zeros compare equal everywhere, ``IN``
included (:func:`~lakehouse_index.expressions.arrow.to_pyarrow` compares it by value).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lakehouse_index.expressions import Atom, Between, Col, Compare, In, IsNull, Like, Lit, Predicate
from lakehouse_index.expressions.arrow import to_pyarrow
from lakehouse_index.expressions.evaluator import AtomOracle, Outcomes, evaluate
from lakehouse_index.expressions.types import Family, LikePattern, family
from lakehouse_index.expressions.visitors import Visitor
from lakehouse_index.kinds.skipping.bloom import BloomSet
from lakehouse_index.kinds.skipping.files import SkippingData
from lakehouse_index.kinds.skipping.hashing import encoding, hash_values
from lakehouse_index.kinds.skipping.schema import ROWS, widens

#: Per file: may an atom be true, may it be false (on the file's non-null values).
_Pair = tuple[np.ndarray, np.ndarray]


def _bools(arr: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """A boolean result array as numpy, nulls as False."""
    return np.asarray(pc.fill_null(arr, False).to_numpy(zero_copy_only=False), dtype=bool)


@dataclass(frozen=True)
class _ColumnView:
    """The statistics of one indexed column over all files, cast to the predicate's column type."""

    name: str
    type: pa.DataType
    min: pa.Array
    max: pa.Array
    nulls: np.ndarray
    nans: np.ndarray
    rows: np.ndarray
    values: pa.ListArray
    has_values: np.ndarray
    blooms: BloomSet
    #: Whether the recorded bloom filters can be probed with hashes of ``type`` values.
    bloom_usable: bool

    @property
    def has_null(self) -> np.ndarray:
        return self.nulls > 0

    @property
    def has_range(self) -> np.ndarray:
        return np.asarray(self.min.is_valid().to_numpy(zero_copy_only=False), dtype=bool)


def _view(data: SkippingData, name: str, current: pa.DataType) -> _ColumnView:
    col = data.rows.column(name).combine_chunks()
    assert isinstance(col, pa.StructArray)
    stored = col.type.field("min").type
    if not widens(stored, current):
        raise pa.ArrowTypeError(f"{stored} does not widen to {current}")

    def conv(a: pa.Array) -> pa.Array:
        return a if a.type.equals(current) else a.cast(current, safe=True)

    values = col.field("values")
    assert isinstance(values, pa.ListArray)
    if not stored.equals(current):
        values = pa.ListArray.from_arrays(
            values.offsets, conv(values.values), type=pa.list_(current), mask=values.is_null()
        )
    return _ColumnView(
        name=name,
        type=current,
        min=conv(col.field("min")),
        max=conv(col.field("max")),
        nulls=np.asarray(col.field("nulls").to_numpy(zero_copy_only=False), dtype=np.int64),
        nans=np.asarray(col.field("nans").to_numpy(zero_copy_only=False), dtype=np.int64),
        rows=np.asarray(data.rows.column(ROWS).to_numpy(), dtype=np.int64),
        values=values,
        has_values=np.asarray(values.is_valid().to_numpy(zero_copy_only=False), dtype=bool),
        blooms=BloomSet.of(col.field("bloom")),
        bloom_usable=encoding(stored) == encoding(current),
    )


class _StatsOracle(AtomOracle[np.ndarray]):
    """Atoms answered from the statistics of all loaded files (one mask entry per file)."""

    def __init__(self, data: SkippingData, predicate: Predicate) -> None:
        self.data = data
        self.schema = predicate.schema
        self.n = len(data.file_ids)

    def fixed(self, true: bool, false: bool, null: bool) -> Outcomes[np.ndarray]:
        return Outcomes(np.full(self.n, true), np.full(self.n, false), np.full(self.n, null))

    def view(self, name: str) -> _ColumnView | None:
        """The statistics of column ``name`` as the predicate's schema types it (None: not usable)."""
        if name not in self.data.columns or name not in self.schema.names:
            return None
        current = self.schema.field(name).type
        key = (name, str(current))
        cache = self.data._views
        if key not in cache:
            try:
                cache[key] = _view(self.data, name, current)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
                cache[key] = None  # recorded type no longer converts: the column prunes nothing
        return cache[key]

    def atom(self, node: Atom) -> Outcomes[np.ndarray]:
        if isinstance(node, IsNull):
            v = self.view(node.column.name)
            if v is None:
                return self.unknown()
            out = Outcomes(v.nulls > 0, v.nulls < v.rows, np.zeros(self.n, dtype=bool))
            return out.negate() if node.negated else out
        column = _atom_column(node)
        v = None if column is None else self.view(column)
        if v is None:
            return self.unknown()
        try:
            return self.column_atom(node, v)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, OverflowError):
            return self.unknown()

    # ------------------------------------------------------------------ atoms

    def column_atom(self, node: Atom, v: _ColumnView) -> Outcomes[np.ndarray]:
        """A null-propagating single-column atom (comparison with a literal, IN, BETWEEN, LIKE)."""
        lits = _literals(node)
        if any(isinstance(x.value, float) and math.isnan(x.value) for x in lits):
            return self.unknown()
        rt, rf = self.by_range(node, v)
        vt, vf = self.by_values(node, v)
        t = np.where(v.has_values, vt, rt)
        f = np.where(v.has_values, vf, rf)
        has_nan = v.nans > 0
        if has_nan.any():
            f = f | has_nan
            if _nan_may_match(node):
                t = t | has_nan
        return Outcomes(t, f, v.has_null.copy())

    def by_values(self, node: Atom, v: _ColumnView) -> _Pair:
        """Exact outcomes over the value lists (evaluated with the pyarrow executor's kernels)."""
        t = np.zeros(self.n, dtype=bool)
        f = np.zeros(self.n, dtype=bool)
        if not v.has_values.any():
            return t, f
        flat = v.values.flatten()
        if len(flat) == 0:
            return t, f
        parents = np.asarray(pc.list_parent_indices(v.values).to_numpy(), dtype=np.int64)
        table = pa.table({v.name: flat})
        expr = to_pyarrow(node)
        result = _evaluate(table, expr)
        t[parents[_bools(result)]] = True
        f[parents[_bools(pc.invert(result))]] = True
        return t, f

    def by_range(self, node: Atom, v: _ColumnView) -> _Pair:
        """Possible outcomes over the non-null values from min/max (and bloom filters for = / IN)."""
        return _ByRange(self, v).visit_atom(node)

    def bloom(self, v: _ColumnView, lit: Lit) -> np.ndarray:
        """Per file: whether a value equal to ``lit`` may be in it per its bloom filter."""
        if not v.bloom_usable or not lit.type.equals(v.type):
            return np.ones(self.n, dtype=bool)  # no exact hash for this literal: only min/max prune
        return v.blooms.may_contain_any(hash_values(pa.array([lit.value], type=v.type)))


def _swap(pair: _Pair, negated: bool) -> _Pair:
    return (pair[1], pair[0]) if negated else pair


class _ByRange(Visitor[_Pair]):
    """Outcomes of one atom from the min/max of every file (and bloom filters for = / IN)."""

    def __init__(self, oracle: _StatsOracle, v: _ColumnView) -> None:
        self.oracle, self.v = oracle, v
        self.lo, self.hi = v.min, v.max

    def inside(self, s: pa.Scalar) -> np.ndarray:
        """Per file: min <= s <= max."""
        return _bools(pc.less_equal(self.lo, s)) & _bools(pc.greater_equal(self.hi, s))

    def visit_compare(self, node: Compare) -> _Pair:
        assert isinstance(node.right, Lit)
        lit = _scalar(node.right)
        lo, hi, op = self.lo, self.hi, node.op
        if op in ("=", "!="):
            maybe_eq = self.inside(lit) & self.oracle.bloom(self.v, node.right)
            all_eq = _bools(pc.equal(lo, lit)) & _bools(pc.equal(hi, lit))
            return _swap((maybe_eq, self.v.has_range & ~all_eq), op == "!=")
        if op == "<":
            return _bools(pc.less(lo, lit)), _bools(pc.greater_equal(hi, lit))
        if op == "<=":
            return _bools(pc.less_equal(lo, lit)), _bools(pc.greater(hi, lit))
        if op == ">":
            return _bools(pc.greater(hi, lit)), _bools(pc.less_equal(lo, lit))
        assert op == ">=", op
        return _bools(pc.greater_equal(hi, lit)), _bools(pc.less(lo, lit))

    def visit_in(self, node: In) -> _Pair:
        any_in = np.zeros(self.oracle.n, dtype=bool)
        single = _bools(pc.equal(self.lo, self.hi))
        pinned = np.zeros(self.oracle.n, dtype=bool)  # min == max == one of the values
        for x in node.values:
            s = _scalar(x)
            any_in |= self.inside(s) & self.oracle.bloom(self.v, x)
            pinned |= single & _bools(pc.equal(self.lo, s))
        return _swap((any_in, self.v.has_range & ~pinned), node.negated)

    def visit_between(self, node: Between) -> _Pair:
        low, high = _scalar(node.low), _scalar(node.high)
        bt = _bools(pc.greater_equal(self.hi, low)) & _bools(pc.less_equal(self.lo, high))
        bf = _bools(pc.less(self.lo, low)) | _bools(pc.greater(self.hi, high))
        return _swap((bt, bf), node.negated)

    def visit_like(self, node: Like) -> _Pair:
        lt = self.v.has_range.copy()
        prefix = LikePattern.of(node.pattern).prefix
        if prefix and family(self.v.type) is Family.STRING:
            p = pa.scalar(prefix, pa.string())
            head = pc.utf8_slice_codeunits(self.lo.cast(pa.string()), 0, len(prefix))
            # A value starting with p is >= p, and truncating min keeps it <= p.
            lt = _bools(pc.greater_equal(self.hi.cast(pa.string()), p)) & _bools(pc.less_equal(head, p))
        return _swap((lt, self.v.has_range.copy()), node.negated)


def _evaluate(table: pa.Table, expr: pc.Expression) -> pa.ChunkedArray:
    """``expr`` (boolean) evaluated on every row of ``table``."""
    import pyarrow.dataset as ds

    out = ds.dataset(table).to_table(columns={"r": expr})
    return out.column("r")


def _scalar(lit: Lit) -> pa.Scalar:
    return pa.scalar(lit.value, type=lit.type)


def _atom_column(node: Atom) -> str | None:
    """The column of a single-column atom against literals; None for anything else."""
    if isinstance(node, Compare):
        if isinstance(node.left, Col) and isinstance(node.right, Lit):
            return node.left.name
        return None  # column-to-column comparisons: not summarised
    if isinstance(node, (In, Between, Like)):
        return node.column.name
    return None


def _literals(node: Atom) -> list[Lit]:
    if isinstance(node, Compare):
        return [o for o in (node.left, node.right) if isinstance(o, Lit)]
    if isinstance(node, In):
        return list(node.values)
    if isinstance(node, Between):
        return [node.low, node.high]
    return []


def _nan_may_match(node: Atom) -> bool:
    """Whether a NaN value may satisfy the atom in pyarrow (NaN unordered) or Spark (NaN largest)."""
    if isinstance(node, Compare):
        return node.op in ("!=", ">", ">=")
    if isinstance(node, (In, Between, Like)):
        return node.negated
    return True


def prune(data: SkippingData, predicate: Predicate | None, file_ids: Iterable[int]) -> set[int]:
    """The ids among ``file_ids`` whose files may hold a row matching ``predicate``.

    Files without a skipping row (not covered by the index) are always kept, as is
    everything for a predicate given as a pyarrow Expression (no AST to reason about).
    Never drops a file that holds a matching row (see the module docstring).
    """
    ids = np.unique(np.fromiter(file_ids, dtype=np.int64))
    if predicate is None or predicate.node is None or data.file_ids.size == 0 or ids.size == 0:
        return {int(i) for i in ids}
    pos = np.searchsorted(data.file_ids, ids)
    pos_c = np.minimum(pos, data.file_ids.size - 1)
    covered = data.file_ids[pos_c] == ids
    keep = ~covered | may_match(data, predicate)[pos_c]
    return {int(i) for i in ids[keep]}


def may_match(data: SkippingData, predicate: Predicate) -> np.ndarray:
    """Per skipping row of ``data`` (in ``data.file_ids`` order), whether its file may hold a
    row matching ``predicate`` (always, for a predicate without an AST)."""
    if predicate.node is None:
        return np.ones(data.file_ids.size, dtype=bool)
    return np.asarray(evaluate(predicate.node, _StatsOracle(data, predicate)).true, dtype=bool)
