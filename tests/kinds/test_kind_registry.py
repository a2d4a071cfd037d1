"""The one kind registry: the entry-point group ``lakehouse_index.kinds``.

* The registry finds the three built-in kinds through their entry points and refuses a spec
  whose kind is not installed, naming the installed ones.
* A third party's kind, installed by an entry point only (a ``dist-info`` on the path), is
  used for both: a fresh process that never imports the plug-in's module parses the index
  log's spec into the plug-in's spec class and maintains and looks up the index through its
  plug-in; lookups are checked against deltalake's own read of the table.
* A broken entry point fails only its own kind, with an error naming the entry point.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import pyarrow.compute as pc
import pytest
from deltalake import DeltaTable

import lakehouse_index as li
from lakehouse_index.errors import InvalidIndexSpecError
from lakehouse_index.kind_registry import spec_from_json
from lakehouse_index.kinds.base import kind_of, kinds
from lakehouse_index.spec import IndexSpec, spec_to_json
from tests.support.paths import code_env


def test_the_built_in_kinds_are_plug_ins() -> None:
    assert sorted(kinds()) == ["covering", "multicolumn", "secondary", "skipping"]
    for spec in (
        li.SecondaryIndex("a", key="k"),
        li.CoveringIndex("b", indexed="k"),
        li.SkippingIndex("c", columns="k"),
        li.MultiColumnIndex("d", columns=["k", "v"]),
    ):
        found = kind_of(spec)
        assert found.name == spec.kind and isinstance(spec, found.spec_type)
        assert spec_from_json(spec_to_json(spec)) == spec


@dataclass(frozen=True)
class _Unknown(IndexSpec):
    kind: ClassVar[str] = "no-such-kind"
    name: str = "x"


def test_a_spec_of_a_kind_not_installed_is_refused() -> None:
    with pytest.raises(InvalidIndexSpecError, match="no index kind 'no-such-kind' is installed"):
        kind_of(_Unknown())
    with pytest.raises(InvalidIndexSpecError) as refused:  # as the log parses a spec
        spec_from_json({"kind": "no-such-kind", "name": "x"})
    assert str(refused.value) == (
        "no index kind 'no-such-kind' is installed "
        "(installed: ['covering', 'multicolumn', 'secondary', 'skipping'])"
    )


#: A third party's kind: its own spec class (not a built-in one) and a plug-in on the
#: secondary index's entries; ``NotAKind`` and ``make_kind`` are broken registrations.
_PLUGIN = """
from dataclasses import dataclass
from typing import ClassVar

from lakehouse_index.kinds.secondary import SecondaryKind
from lakehouse_index.spec import AutoRefresh, IndexSpec


@dataclass(frozen=True)
class TagIndex(IndexSpec):
    kind: ClassVar[str] = "tag"
    name: str
    tag: str
    auto_refresh: AutoRefresh = AutoRefresh.INCREMENTAL

    def __post_init__(self) -> None:
        object.__setattr__(self, "auto_refresh", AutoRefresh(self.auto_refresh))

    @property
    def key(self):
        return (self.tag,)

    @property
    def columns(self):
        return (self.tag,)


class TagKind(SecondaryKind):
    name = "tag"
    spec_type = TagIndex


@dataclass(frozen=True)
class OddIndex(TagIndex):
    kind: ClassVar[str] = "odd"


class NotAKind:
    name = "odd"
    spec_type = OddIndex


def make_kind():
    return TagKind()
"""

_ENTRY_POINTS = """\
[lakehouse_index.kinds]
tag = tag_plugin:TagKind
odd = tag_plugin:NotAKind
broken = tag_plugin:make_kind
"""


@pytest.fixture
def plugin_path(tmp_path: Path) -> dict[str, str]:
    """The environment of a process in which the plug-in is installed (by its metadata alone)."""
    site = tmp_path / "site"
    dist = site / "tag_plugin-1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: tag-plugin\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(_ENTRY_POINTS)
    (site / "tag_plugin.py").write_text(_PLUGIN)
    env = code_env()
    return {**env, "PYTHONPATH": os.pathsep.join([env["PYTHONPATH"], str(site)])}


def _run(code: str, env: dict[str, str], *args: str) -> list[str]:
    run = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args], capture_output=True, text=True, env=env
    )
    assert run.returncode == 0, run.stderr
    return run.stdout.splitlines()


_CREATE = """
import sys
import pyarrow as pa
from deltalake import write_deltalake
import lakehouse_index as li
from tag_plugin import TagIndex

path = sys.argv[1]
for f in (0, 1):
    ids = list(range(f * 200, (f + 1) * 200))
    write_deltalake(path, pa.table({"id": ids, "t": [f"t{i % 13}" for i in ids]}), mode="append")
    if f == 0:
        li.open_table(path).create_index(TagIndex("ix", tag="t"))
"""

_USE = """
import json, sys
import lakehouse_index as li

t = li.open_table(sys.argv[1])
(listed,) = t.indexes()  # the log's spec parsed before anything else asks for the kind
spec = type(listed.spec)
t.refresh_index("ix", "incremental")
(info,) = t.indexes()
ids = t.lookup("ix", ["t3", "t12", "nope"])["id"].to_pylist()
print(json.dumps([spec.__module__, spec.__name__, info.kind, info.indexed_version, ids]))
"""


def test_a_third_party_kind_is_found_by_its_entry_point(tmp_path: Path, plugin_path: dict[str, str]) -> None:
    path = str(tmp_path / "t")
    _run(_CREATE, plugin_path, path)
    *_, last = _run(_USE, plugin_path, path)  # a fresh process: only the log names the kind
    module, cls, kind, version, ids = json.loads(last)
    assert (module, cls, kind, version) == ("tag_plugin", "TagIndex", "tag", 1)
    table = DeltaTable(path).to_pyarrow_table()
    want = table.filter(pc.is_in(table["t"], value_set=pc.cast(["t3", "t12", "nope"], table["t"].type)))
    assert want.num_rows and Counter(ids) == Counter(want["id"].to_pylist())


_BROKEN = """
from lakehouse_index.errors import InvalidIndexSpecError
from lakehouse_index.kind_registry import spec_from_json
from lakehouse_index.kinds.base import kind_of
from tag_plugin import OddIndex

for attempt in (lambda: spec_from_json({"kind": "broken", "name": "x"}), lambda: kind_of(OddIndex("x", "t"))):
    try:
        attempt()
    except InvalidIndexSpecError as e:
        print(e)
"""


def test_a_broken_entry_point_is_refused_by_name(plugin_path: dict[str, str]) -> None:
    broken, odd = _run(_BROKEN, plugin_path)
    assert broken == (
        "entry point 'tag_plugin:make_kind' in lakehouse_index.kinds is not an index kind named 'broken' "
        "with a spec_type of kind 'broken'"
    )
    assert odd == "entry point 'odd' in lakehouse_index.kinds is not an IndexKind: NotAKind"
