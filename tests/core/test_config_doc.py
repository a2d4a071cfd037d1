"""docs/CONFIG.md documents every option of Config and CacheConfig, with the code's default."""

from __future__ import annotations

import ast
import dataclasses
import operator
import re
from pathlib import Path
from typing import Any

import pytest

from lakehouse_index.config import CacheConfig, Config

DOC = Path(__file__).resolve().parents[2] / "docs" / "CONFIG.md"

#: Documented section heading → the dataclass it documents.
SECTIONS: dict[str, type] = {
    **{
        f"`{f.name}`: {type(getattr(Config(), f.name)).__name__}": type(getattr(Config(), f.name))
        for f in dataclasses.fields(Config)
    },
    "CacheConfig": CacheConfig,
}

_OPS: dict[type, Any] = {
    ast.Mult: operator.mul,
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.LShift: operator.lshift,
    ast.Pow: operator.pow,
}


def _value(text: str) -> Any:
    """A documented default: a Python literal, or arithmetic on literals (``64 << 20``)."""

    def ev(node: ast.AST) -> Any:
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](ev(node.left), ev(node.right))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -ev(node.operand)
        raise ValueError(f"not a literal default: {text!r}")

    return ev(ast.parse(text, mode="eval").body)


def _documented() -> dict[str, dict[str, str]]:
    """Section heading → {option: default text}, from the tables of CONFIG.md."""
    out: dict[str, dict[str, str]] = {}
    section: dict[str, str] | None = None
    for line in DOC.read_text().splitlines():
        if line.startswith("## "):
            title = line[3:].strip()
            match = next((s for s in SECTIONS if title.startswith(s)), None)
            section = out.setdefault(match, {}) if match else None
            continue
        row = re.match(r"^\|\s*`([a-z_0-9]+)`\s*\|\s*`([^`]+)`\s*\|\s*(.+?)\s*\|\s*$", line)
        if row and section is not None:
            assert row.group(1) not in section, f"{row.group(1)} documented twice"
            assert row.group(3), f"{row.group(1)} has no description"
            section[row.group(1)] = row.group(2)
    return out


def test_every_section_is_documented() -> None:
    assert set(_documented()) == set(SECTIONS)


@pytest.mark.parametrize("heading", list(SECTIONS))
def test_options_and_defaults_match_the_code(heading: str) -> None:
    cls = SECTIONS[heading]
    documented = _documented()[heading]
    fields = {f.name: f for f in dataclasses.fields(cls)}
    missing = sorted(set(fields) - set(documented))
    stale = sorted(set(documented) - set(fields))
    assert not missing, f"{cls.__name__} options missing from docs/CONFIG.md: {missing}"
    assert not stale, f"docs/CONFIG.md documents options {cls.__name__} does not have: {stale}"
    for name, f in fields.items():
        value = _value(documented[name])
        assert type(value) is type(f.default) and value == f.default, (
            f"{cls.__name__}.{name}: docs/CONFIG.md says {documented[name]}, the code {f.default!r}"
        )
