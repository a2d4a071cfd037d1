"""Hypothesis strategies of ``where`` texts shared by the predicate oracle tests."""

from __future__ import annotations

from hypothesis import strategies as st


def combinations(atoms: st.SearchStrategy[str], max_leaves: int) -> st.SearchStrategy[str]:
    """``where`` texts combining ``atoms`` with NOT, AND and OR, up to ``max_leaves`` atoms."""
    return st.recursive(
        atoms,
        lambda inner: st.one_of(
            inner.map("NOT ({})".format),
            st.builds("({}) AND ({})".format, inner, inner),
            st.builds("({}) OR ({})".format, inner, inner),
        ),
        max_leaves=max_leaves,
    )
