"""The control plane imports neither pyspark nor pandas (the base install has neither).

A fresh interpreter in which pyspark and pandas (and deltalake and boto3, also extras)
cannot be imported, as in a base install (``pip install lakehouse-index``), opens a small
Delta table, creates a secondary index in process, looks keys up, locates them, explains a
predicate, lists the indexes and refreshes quickly. Every step must work, none of these
modules may end up in ``sys.modules``, and nothing may even try to import them (each
attempt is recorded with its stack, so a failure names the import). pyarrow's own optional
probes for pandas are not counted: it does without pandas when it is absent.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import deltalake
import pyarrow as pa

REPO = Path(__file__).resolve().parents[2]

#: Modules the control plane must not import: not in the base install (extras spark, delta, s3).
HEAVY = ("pyspark", "pandas", "deltalake", "boto3", "botocore")

_PRELUDE = textwrap.dedent(
    """
    import json, os, sys, traceback

    HEAVY = {heavy!r}
    OURS = tuple(os.path.join(p, "") for p in sys.argv[2:])
    tried = {{}}

    class Absent:
        # pyspark and pandas are not installed: record who tries, then fail the import.
        def find_spec(self, name, path=None, target=None):
            top = name.partition(".")[0]
            if top in HEAVY:
                frames = [f for f in traceback.extract_stack()[:-1] if not f.filename.startswith("<")]
                # pyarrow probes for pandas from compiled code: the innermost Python frame is
                # then the caller of a pyarrow function, not an import statement.
                line = (frames[-1].line or "") if frames else ""
                ours = bool(frames) and frames[-1].filename.startswith(OURS)
                if top != "pandas" or (ours and "import" in line and top in line):
                    tried.setdefault(top, "".join(traceback.format_list(frames[-12:])))
                raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
            return None

    sys.meta_path.insert(0, Absent())

    import lakehouse_index as li

    table = li.open_table(sys.argv[1])
    """
)

_EPILOGUE = textwrap.dedent(
    """
    print(json.dumps({"loaded": [m for m in HEAVY if m in sys.modules], "tried": tried}))
    """
)

_CREATE = """
table.create_index(li.SecondaryIndex("by_email", key="email", record_key="id"))
assert table.lookup("by_email", ["u7@example.com"])["id"].to_pylist() == [7]
assert table.locate("by_email", ["u7@example.com", "nobody"]).num_rows == 1
assert "by_email" in str(table.explain(where="email = 'u7@example.com'"))
assert [i.name for i in table.indexes()] == ["by_email"]
"""

_QUICK = """
table.refresh_index("by_email", mode="quick")
assert sorted(table.lookup("by_email", ["u7@example.com", "u123@example.com"])["id"].to_pylist()) == [7, 123]
assert table.locate("by_email", ["u123@example.com"], version_as_of=1).num_rows == 1
assert table.lookup("by_email", ["u7@example.com"], version_as_of=0)["id"].to_pylist() == [7]
assert "by_email" in str(table.explain(where="email IN ('u7@example.com', 'u123@example.com')"))
(info,) = table.indexes()
assert info.name == "by_email"
"""


def _rows(start: int, n: int) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table({"id": ids, "email": [f"u{i}@example.com" for i in ids], "n": [i % 7 for i in ids]})


def _run(path: Path, body: str) -> dict[str, object]:
    script = _PRELUDE.format(heavy=HEAVY) + body + _EPILOGUE
    # This checkout's packages first (not wherever the venv's editable install points).
    path_entries = [str(REPO), str(REPO / "connectors"), os.environ.get("PYTHONPATH", "")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in path_entries if p)}
    done = subprocess.run(
        [sys.executable, "-c", script, str(path), str(REPO / "lakehouse_index"), str(REPO / "connectors")],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _check(result: dict[str, object]) -> None:
    tried = result["tried"]
    assert isinstance(tried, dict)
    stacks = "\n".join(f"--- import of {m}:\n{stack}" for m, stack in tried.items())
    assert not tried, f"the control plane tried to import {sorted(tried)}:\n{stacks}"
    assert result["loaded"] == []


def test_control_plane_imports_neither_pyspark_nor_pandas(tmp_path: Path) -> None:
    path = tmp_path / "t"
    deltalake.write_deltalake(str(path), _rows(0, 100))
    _check(_run(path, _CREATE))  # open, create in process, lookup, locate, explain, list
    deltalake.write_deltalake(str(path), _rows(100, 50), mode="append")
    _check(_run(path, _QUICK))  # quick refresh of a new commit, time travel
