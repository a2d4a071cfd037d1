"""A clone of the repository alone passes: the fixtures live in the project.

The repository's HEAD is cloned into a temporary folder with no ``shared/`` beside it, and a
fast subset that reads the peer tables runs there (this venv's interpreter, the clone's
code first on the path). It proves the fixtures come from the clone, not from a sibling
folder of the checkout.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]

#: The subset: the Delta connector on every peer table, and the stated minimum of oracle cases.
SUBSET = (
    "tests/connectors/delta",
    "tests/core/test_delta_tables.py::test_peer_oracle_cases_at_least_minimum",
)
#: Fewer passing tests than this means the subset shrank (or the fixtures did not load).
MIN_PASSED = 60


def test_a_clone_without_shared_passes(tmp_path: Path) -> None:
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True, timeout=300)
    assert not (clone.parent / "shared").exists()
    assert (clone / "tests" / "data" / "peer-tables" / "NOTICE").is_file()
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(clone), str(clone / "connectors")])
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-o", "addopts=",
         "-m", "not spark", *SUBSET],
        cwd=clone,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )  # fmt: skip
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-6000:]
    passed = re.search(r"(\d+) passed", out)
    assert passed and int(passed.group(1)) >= MIN_PASSED, out[-3000:]
