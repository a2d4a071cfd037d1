"""``import lakehouse_index`` is lazy (PEP 562): each public name imports its module on first use.

A connector imports ``lakehouse_index.source`` (and so the package): with an eager
``__init__`` every process reading a table paid for the whole API (~16 MB, sqlglot, the
planner, the workflows) before reading a byte.
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys

import pytest

import lakehouse_index as li
from tests.support.paths import REPO_ROOT, code_env

#: Modules that only the API needs, not the connector contract.
API_ONLY = ("lakehouse_index.api", "lakehouse_index.query", "lakehouse_index.maintenance", "sqlglot")


def _fresh_modules(code: str) -> list[str]:
    """The modules a fresh interpreter has loaded after running ``code``."""
    out = subprocess.run(
        [sys.executable, "-c", code + "\nimport json, sys; print(json.dumps(sorted(sys.modules)))"],
        check=True,
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        env=code_env(),
    )
    return list(json.loads(out.stdout.strip().splitlines()[-1]))


@pytest.mark.parametrize(
    "code",
    [
        "import lakehouse_index",
        "import lakehouse_index.source",
        "from lakehouse_index.io import Storage",
        "from lakehouse_index_delta import DeltaSource",
    ],
)
def test_the_package_and_the_connector_contract_load_no_api(code: str) -> None:
    loaded = _fresh_modules(code)
    assert not [m for m in loaded if m.startswith(API_ONLY)], code


def test_a_public_name_loads_its_module() -> None:
    loaded = _fresh_modules("import lakehouse_index as li\nli.open_table")
    assert "lakehouse_index.api" in loaded


def test_every_public_name_is_its_definition() -> None:
    assert len(li.__all__) == len(set(li.__all__))
    defined_in = {name: getattr(li, name).__module__ for name in li.__all__}
    for name, module in defined_in.items():
        assert getattr(importlib.import_module(module), name) is getattr(li, name), name
    assert set(li.__all__) <= set(dir(li))
    star: dict[str, object] = {}
    exec("from lakehouse_index import *", star)
    assert set(li.__all__) <= set(star)


def test_subpackages_and_unknown_names() -> None:
    assert li.api is importlib.import_module("lakehouse_index.api")
    with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
        li.no_such_name  # noqa: B018


def test_opening_a_delta_table_loads_only_its_connector() -> None:
    """Connectors load one at a time until one recognises the table: a Delta read (a Spark
    task's worker, say) does not pay for importing pyiceberg (1.6 s on a loaded machine)."""
    table = REPO_ROOT / "tests/data/peer-tables/delta-rs/cdf-table-with-cdc-and-dvs"
    loaded = _fresh_modules(f"import lakehouse_index as li\nli.open_table({str(table)!r}).snapshot()")
    assert "lakehouse_index_delta" in loaded
    assert not [m for m in loaded if m.startswith(("pyiceberg", "lakehouse_index_iceberg"))]
