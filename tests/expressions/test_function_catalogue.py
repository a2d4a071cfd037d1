"""The function catalogue, its evaluator and the guide name the same functions."""

from __future__ import annotations

import re

import pyarrow as pa
import pytest

from lakehouse_index.errors import QueryError
from lakehouse_index.expressions import Predicate
from lakehouse_index.expressions.functions import _CATALOGUE, ALIASES, SUPPORTED
from lakehouse_index.expressions.kernels import kernel_names
from tests.support.paths import REPO_ROOT

SCHEMA = pa.schema([("id", pa.int64()), ("s", pa.string()), ("t", pa.timestamp("us", tz="UTC"))])


def test_every_function_has_a_kernel_and_aliases_name_functions() -> None:
    assert set(_CATALOGUE) | {"cast"} == set(kernel_names())
    assert set(ALIASES.values()) <= set(_CATALOGUE)


def test_the_guide_lists_exactly_the_supported_functions() -> None:
    page = (REPO_ROOT / "docs" / "guide" / "expressions.md").read_text()
    table = page.split("## Supported functions", 1)[1].split("\n\n", 2)[1]
    listed = set(re.findall(r"`([a-z_]+)`", table))
    assert set(SUPPORTED) <= listed
    assert listed - set(SUPPORTED) <= {"negative"} | set(_CATALOGUE)


@pytest.mark.parametrize("name", sorted(SUPPORTED))
def test_every_supported_name_binds(name: str) -> None:
    # Each name reaches the catalogue: a call with no arguments fails on its arity, not as unknown.
    with pytest.raises(QueryError) as info:
        Predicate.parse(f"{name}() IS NULL", SCHEMA)
    assert "unknown function" not in str(info.value), str(info.value)
