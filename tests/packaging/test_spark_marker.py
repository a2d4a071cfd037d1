"""The ``spark`` marker is true: in a run that selects no ``spark`` test, a JVM launch fails
the test that made it (``tests/conftest.py``), even when the code under test swallows the
failed start (say, by falling back to pyarrow)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from tests.support.paths import REPO_ROOT, code_env

_UNMARKED = textwrap.dedent(
    """
    import contextlib

    from lakehouse_index.spark import get_spark


    def test_quietly_starts_spark():
        with contextlib.suppress(Exception):  # a fallback hides the failed start
            get_spark(master="local[1]")


    def test_no_spark():
        assert True
    """
)


def test_an_unmarked_jvm_launch_fails_a_not_spark_run(tmp_path: Path) -> None:
    (tmp_path / "test_unmarked.py").write_text(_UNMARKED)
    env = code_env()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "tests.conftest",
            "-c",
            str(REPO_ROOT / "pyproject.toml"),
            "--rootdir",
            str(REPO_ROOT),
            "-o",
            "addopts=",
            "-m",
            "not spark",
            str(tmp_path / "test_unmarked.py"),
        ],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    out = done.stdout + done.stderr
    assert done.returncode == 1, out
    assert "a JVM was launched by a test not marked @pytest.mark.spark" in out, out
    assert "test test_quietly_starts_spark (call)" in out.replace("::", ""), out
    assert "2 passed, 1 error" in out, out  # the error: at teardown of the test that launched
