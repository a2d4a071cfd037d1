"""The core names no table format: formats are chosen once, through entry points.

Connectors (read: ``lakehouse_index.connectors``) and writers (``lakehouse_index.writers``)
are looked up by the table's format name; nothing in ``lakehouse_index/`` compares a format
name, so adding a format is one package implementing both contracts. Every module stays
small enough to read (at most :data:`MAX_LINES` lines).
"""

from __future__ import annotations

import ast
from pathlib import Path

CORE = Path(__file__).resolve().parents[2] / "lakehouse_index"
FORMATS = {"delta", "iceberg", "hudi", "paimon"}
MAX_LINES = 700


def _format_comparisons(path: Path) -> list[str]:
    """Every comparison in ``path`` with a format name as one operand (``==``, ``in``, ...)."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            named = [o.value for o in operands if isinstance(o, ast.Constant) and o.value in FORMATS]
            if named:
                out.append(f"{path}:{node.lineno}: compares with {named[0]!r}")
    return out


def test_no_format_name_branch_in_the_core() -> None:
    found = [hit for path in sorted(CORE.rglob("*.py")) for hit in _format_comparisons(path)]
    assert not found, "\n".join(found)


def test_a_format_comparison_is_found(tmp_path: Path) -> None:
    """The check above sees a branch where one is written (it would pass vacuously otherwise)."""
    probe = tmp_path / "branch.py"
    probe.write_text('def f(fmt):\n    return fmt == "delta"\n')
    assert len(_format_comparisons(probe)) == 1


def test_no_module_over_the_size_limit() -> None:
    roots = [CORE, CORE.parent / "connectors"]
    long = [
        f"{p.relative_to(CORE.parent)}: {n} lines"
        for root in roots
        for p in sorted(root.rglob("*.py"))
        if (n := len(p.read_text().splitlines())) > MAX_LINES
    ]
    assert not long, "\n".join(long)
