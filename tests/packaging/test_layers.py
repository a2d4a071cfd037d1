"""Dependencies point one way: no module imports a higher layer, and packages form no cycle.

Every module of ``lakehouse_index/`` and ``connectors/`` is parsed with :mod:`ast`; every
import counts, including those inside functions and under ``TYPE_CHECKING`` (a lazy import
is still a dependency). ``LAYERS`` is the one table of layers; a module may import its own
layer or a lower one. A connector's read half may import only the connector contract
(``lakehouse_index.source``) and ``lakehouse_index.errors`` of the core; its write half
(``<connector>.write``) may import the core at or below the write contract's layer
(``lakehouse_index.sink``: io, source, expressions, read, sink). The core never imports a
connector (it finds them through entry points). A module missing from the table fails too:
place it in a layer.

Violations known today are listed in ``KNOWN_VIOLATIONS``; each is a strict xfail of its
own, so removing one makes its case pass (XPASS fails the run: then drop it from the list)
and any new violation fails ``test_no_upward_imports``.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CORE = "lakehouse_index"
CONNECTORS = ("lakehouse_index_delta", "lakehouse_index_iceberg")

#: Layers of the core, lowest first: a module may import its own layer or a lower one.
#: Entries name a module or a package (and then everything in it); ``lakehouse_index``
#: itself is the package ``__init__`` only.
LAYERS: tuple[tuple[str, ...], ...] = (
    (
        "lakehouse_index.errors",
        "lakehouse_index.config",
        "lakehouse_index.spec",
        "lakehouse_index.kind_registry",
        "lakehouse_index.faults",
        "lakehouse_index.varint",
        "lakehouse_index.row_filter",
    ),
    ("lakehouse_index.io",),
    ("lakehouse_index.source", "lakehouse_index.registry"),
    ("lakehouse_index.expressions",),
    ("lakehouse_index.read",),
    ("lakehouse_index.sink",),
    ("lakehouse_index.log",),
    ("lakehouse_index.context",),
    ("lakehouse_index.kinds",),
    ("lakehouse_index.executors", "lakehouse_index.spark"),
    ("lakehouse_index.maintenance",),
    ("lakehouse_index.query",),
    ("lakehouse_index.actions",),
    ("lakehouse_index.workflows",),
    ("lakehouse_index.api",),
    (
        "lakehouse_index.cli",
        "lakehouse_index.demo",
        "lakehouse_index.progress",
        "lakehouse_index.lag_display",
        "lakehouse_index.spark_source",
        "lakehouse_index",
    ),
)

#: What a connector's read half may import of the core.
CONNECTOR_MAY_IMPORT = ("lakehouse_index.source", "lakehouse_index.errors")
#: A connector's write half may import the core at or below this module's layer.
WRITE_CONTRACT = "lakehouse_index.sink"

#: Upward imports that exist today (importer module, imported module) → why it is listed.
#: Being removed (issue 11); do not add to this list.
KNOWN_VIOLATIONS: dict[tuple[str, str], str] = {}


@dataclass(frozen=True)
class Import:
    path: Path
    line: int
    importer: str
    imported: str


@dataclass(frozen=True)
class Violation:
    imp: Import
    why: str

    @property
    def key(self) -> tuple[str, str]:
        return (self.imp.importer, self.imp.imported)

    def __str__(self) -> str:
        rel = self.imp.path.relative_to(REPO)
        return f"{rel}:{self.imp.line}: {self.imp.importer} imports {self.imp.imported} ({self.why})"


def _module_files() -> Iterator[tuple[str, Path]]:
    roots = [(REPO, CORE)] + [(REPO / "connectors", name) for name in CONNECTORS]
    for base, top in roots:
        for path in sorted((base / top).rglob("*.py")):
            parts = list(path.relative_to(base).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            yield ".".join(parts), path


@cache
def _modules() -> dict[str, Path]:
    return dict(_module_files())


def _is_package(module: str) -> bool:
    return _modules()[module].name == "__init__.py"


def _resolve(importer: str, node: ast.ImportFrom) -> list[str]:
    """The modules a ``from … import …`` names (a name that is a submodule counts as one)."""
    if node.level:
        package = importer if _is_package(importer) else importer.rpartition(".")[0]
        for _ in range(node.level - 1):
            package = package.rpartition(".")[0]
        base = f"{package}.{node.module}" if node.module else package
    else:
        base = node.module or ""
    out = []
    for alias in node.names:
        sub = f"{base}.{alias.name}"
        out.append(sub if sub in _modules() else base)
    return out


def _imports(module: str, path: Path) -> Iterator[Import]:
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):  # every import: module level, in functions, under TYPE_CHECKING
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = _resolve(module, node)
        else:
            continue
        for name in names:
            if name.partition(".")[0] in (CORE, *CONNECTORS):
                yield Import(path, node.lineno, module, name)


@cache
def _all_imports() -> tuple[Import, ...]:
    return tuple(i for module, path in _modules().items() for i in _imports(module, path))


def _entry(module: str) -> tuple[str, int] | None:
    """The ``LAYERS`` entry that holds ``module`` (the longest match), and its layer."""
    best: tuple[str, int] | None = None
    for layer, entries in enumerate(LAYERS):
        for entry in entries:
            inside = module == entry or (entry != CORE and module.startswith(entry + "."))
            if inside and (best is None or len(entry) > len(best[0])):
                best = (entry, layer)
    return best


def _connector(module: str) -> str | None:
    top = module.partition(".")[0]
    return top if top in CONNECTORS else None


def _is_write_half(module: str) -> bool:
    """Whether a connector module is in its write half (``<connector>.write``)."""
    top, _, rest = module.partition(".")
    return top in CONNECTORS and (rest == "write" or rest.startswith("write."))


def _violation(imp: Import) -> str | None:
    src, dst = _connector(imp.importer), _connector(imp.imported)
    if src is not None:
        if dst is not None:
            return None if dst == src else "a connector imports another connector"
        if any(imp.imported == m or imp.imported.startswith(m + ".") for m in CONNECTOR_MAY_IMPORT):
            return None
        if _is_write_half(imp.importer):
            there, contract = _entry(imp.imported), _entry(WRITE_CONTRACT)
            assert contract is not None
            if there is not None and there[1] <= contract[1]:
                return None
            return f"a connector's write half may import the core only at or below {WRITE_CONTRACT}'s layer"
        return f"a connector's read half may import only {', '.join(CONNECTOR_MAY_IMPORT)} of the core"
    if dst is not None:
        return "the core imports a connector (connectors are found through entry points)"
    here, there = _entry(imp.importer), _entry(imp.imported)
    if here is None or there is None:
        return None  # reported by test_every_module_has_a_layer
    if there[1] > here[1]:
        return f"layer {here[1]} ({here[0]}) imports layer {there[1]} ({there[0]})"
    return None


@cache
def violations() -> tuple[Violation, ...]:
    out = []
    for imp in _all_imports():
        why = _violation(imp)
        if why is not None:
            out.append(Violation(imp, why))
    return tuple(out)


def _unit(module: str) -> str:
    """The package a module belongs to, for the cycle check: ``lakehouse_index.<first>``."""
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == CORE else parts[0]


def _cycles() -> list[list[str]]:
    """Strongly connected components (more than one package) of the package import graph."""
    graph: dict[str, set[str]] = defaultdict(set)
    for imp in _all_imports():
        a, b = _unit(imp.importer), _unit(imp.imported)
        if a != b and b != CORE:  # `from lakehouse_index import x` of a package __init__
            graph[a].add(b)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def _edges_between(component: list[str]) -> list[str]:
    """One import (file:line) per pair of packages in the cycle."""
    members = set(component)
    first: dict[tuple[str, str], Import] = {}
    for imp in _all_imports():
        pair = (_unit(imp.importer), _unit(imp.imported))
        if pair[0] != pair[1] and set(pair) <= members:
            first.setdefault(pair, imp)
    return [
        f"{a} -> {b}: {imp.path.relative_to(REPO)}:{imp.line}: {imp.importer} imports {imp.imported}"
        for (a, b), imp in sorted(first.items())
    ]


def test_modules_found() -> None:
    """The walk sees the packages (a moved root would make every other check vacuous)."""
    modules = _modules()
    assert CORE in modules and all(c in modules for c in CONNECTORS), sorted(modules)
    assert len(modules) >= 50, len(modules)
    assert len(_all_imports()) >= 200, len(_all_imports())


def test_every_module_has_a_layer() -> None:
    missing = sorted(m for m in _modules() if _connector(m) is None and _entry(m) is None)
    assert not missing, f"modules in no layer (add them to LAYERS in {Path(__file__).name}): {missing}"


def test_no_upward_imports() -> None:
    new = [v for v in violations() if v.key not in KNOWN_VIOLATIONS]
    assert not new, "imports against the layers:\n" + "\n".join(str(v) for v in new)


if KNOWN_VIOLATIONS:  # (an empty parameter set would be reported as a skip)

    @pytest.mark.parametrize(
        "key",
        [
            pytest.param(key, id=f"{key[0]}->{key[1]}", marks=pytest.mark.xfail(strict=True, reason=why))
            for key, why in KNOWN_VIOLATIONS.items()
        ],
    )
    def test_known_violation_is_gone(key: tuple[str, str]) -> None:
        """Fails (xfail) while the listed violation exists; once removed, drop it from the list."""
        found = [str(v) for v in violations() if v.key == key]
        assert not found, "\n".join(found)


def test_no_import_cycle_between_packages() -> None:
    cycles = _cycles()
    report = [f"cycle {' <-> '.join(c)}:\n  " + "\n  ".join(_edges_between(c)) for c in cycles]
    assert not cycles, "\n".join(report)
