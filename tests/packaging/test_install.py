"""``pip install`` of the project's wheel into a fresh venv.

The wheel is built from the project's files without network (``--no-build-isolation``: the
venv's setuptools), and installed with ``--no-deps --no-index`` into a new venv. Then:

* site-packages holds ``lakehouse_index``, ``lakehouse_index_delta`` and
  ``lakehouse_index_iceberg``, and no top-level ``connectors`` (it would collide with any
  other distribution shipping one);
* the ``lakehouse_index.connectors`` entry points (and the console script) name modules of
  the installed wheel, and resolve there to the connector classes;
* every ``.py`` under ``lakehouse_index/`` and ``connectors/`` is in the wheel, so the package
  list cannot silently drop a subpackage (one without ``__init__.py``, say).
"""

from __future__ import annotations

import configparser
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import textwrap
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
CONNECTORS = ("lakehouse_index_delta", "lakehouse_index_iceberg")
#: The build's inputs (besides the packages): what pyproject.toml refers to.
PROJECT_FILES = ("pyproject.toml", "README.md")


def _run(*args: str | Path, cwd: Path | None = None) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}  # the venv alone
    done = subprocess.run(
        [str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, f"{' '.join(map(str, args))}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


def _sources() -> dict[str, Path]:
    """Every module file of the project, by its path inside an installed wheel."""
    out = {}
    for path in sorted((REPO / "lakehouse_index").rglob("*.py")):
        out[path.relative_to(REPO).as_posix()] = path
    for path in sorted((REPO / "connectors").rglob("*.py")):  # each connector: its own import name
        out[path.relative_to(REPO / "connectors").as_posix()] = path
    return out


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The project's wheel, built from a copy of its files (the checkout stays untouched)."""
    src = tmp_path_factory.mktemp("src")
    for name in PROJECT_FILES:
        shutil.copy2(REPO / name, src / name)
    for path in REPO.glob("LICEN[CS]E*"):
        shutil.copy2(path, src / path.name)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(REPO / "lakehouse_index", src / "lakehouse_index", ignore=ignore)
    shutil.copytree(REPO / "connectors", src / "connectors", ignore=ignore)
    out = tmp_path_factory.mktemp("wheels")
    _run(
        sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
        "-q", "-w", out, src,
    )  # fmt: skip
    (built,) = out.glob("lakehouse_index-*.whl")
    return built


@pytest.fixture(scope="module")
def site(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(python, site-packages) of a fresh venv with only the wheel installed (no dependencies)."""
    venv = tmp_path_factory.mktemp("venv")
    _run(sys.executable, "-m", "venv", "--without-pip", venv)
    python = venv / "bin" / "python"
    _run(sys.executable, "-m", "pip", "--python", python, "install", "-q", "--no-deps", "--no-index", wheel)
    purelib = _run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").strip()
    return python, Path(purelib)


def test_wheel_holds_every_module(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
    missing = sorted(set(_sources()) - names)
    assert not missing, f"modules left out of the wheel: {missing}"
    assert not [n for n in names if n.startswith("connectors/")]


#: Heavy dependencies: only in extras, never in the base install.
HEAVY = {"pyspark", "pandas", "deltalake", "boto3", "delta-spark"}
#: Extras a user picks (``lakehouse-index[spark,delta,iceberg,s3]``, ``[all]``) and what they bring.
EXTRAS = {
    "spark": {"pyspark", "pandas"},
    "delta": {"deltalake"},
    "iceberg": {"pyiceberg"},
    "s3": {"boto3"},
    "all": {"lakehouse-index"},
}


def _requirement_name(spec: str) -> str:
    return re.split(r"[\s\[<>=!~;(]", spec.strip(), maxsplit=1)[0].lower()


def test_heavy_dependencies_are_extras(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as z:
        (meta,) = [n for n in z.namelist() if n.endswith(".dist-info/METADATA")]
        metadata = z.read(meta).decode()
    base: set[str] = set()
    extras: dict[str, set[str]] = {}
    for line in metadata.splitlines():
        if not line.startswith("Requires-Dist:"):
            continue
        spec = line.removeprefix("Requires-Dist:").strip()
        extra = re.search(r"extra\s*==\s*[\"']([^\"']+)[\"']", spec)
        if extra:
            extras.setdefault(extra.group(1), set()).add(_requirement_name(spec))
        else:
            base.add(_requirement_name(spec))
    assert not base & HEAVY, f"heavy dependencies in the base install: {sorted(base & HEAVY)}"
    assert "pyarrow" in base and "cachetools" in base, sorted(base)
    for extra, wanted in EXTRAS.items():
        assert wanted <= extras.get(extra, set()), (extra, extras.get(extra))
    all_line = next(line for line in metadata.splitlines() if 'extra == "all"' in line)
    assert all(name in all_line for name in ("spark", "delta", "iceberg", "s3")), all_line


def test_site_packages_has_no_top_level_connectors(site: tuple[Path, Path]) -> None:
    _, purelib = site
    tops = {p.name for p in purelib.iterdir() if not p.name.endswith(".dist-info")}
    assert {"lakehouse_index", *CONNECTORS} <= tops, sorted(tops)
    assert "connectors" not in tops and "connectors.py" not in tops, sorted(tops)
    (dist,) = purelib.glob("lakehouse_index-*.dist-info")
    record = (dist / "RECORD").read_text().splitlines()
    assert not [r for r in record if r.startswith("connectors/")]
    assert all((purelib / rel).is_file() for rel in _sources())


class _CaseSensitive(configparser.ConfigParser):
    def optionxform(self, optionstr: str) -> str:
        return optionstr


def test_entry_points_resolve_to_the_installed_connectors(site: tuple[Path, Path]) -> None:
    python, purelib = site
    (dist,) = purelib.glob("lakehouse_index-*.dist-info")
    parser = _CaseSensitive()
    parser.read(dist / "entry_points.txt")
    connectors = dict(parser["lakehouse_index.connectors"])
    assert connectors == {
        "delta": "lakehouse_index_delta:DeltaSource",
        "iceberg": "lakehouse_index_iceberg:IcebergSource",
    }
    assert parser["console_scripts"]["lakehouse-index"] == "lakehouse_index.cli:main"
    # Load them in the new venv: the wheel's modules, with the dependencies of this venv.
    deps = Path(sysconfig.get_paths()["purelib"])
    (purelib / "_test_deps.pth").write_text(f"{deps}\n")
    code = textwrap.dedent(
        """
        import importlib, json, sys
        out = {}
        for name, value in json.loads(sys.argv[1]).items():
            module, _, attr = value.partition(":")
            obj = getattr(importlib.import_module(module), attr)
            from lakehouse_index.source import TableSource
            assert isinstance(obj, type) and issubclass(obj, TableSource), (name, obj)
            out[name] = sys.modules[module].__file__
        print(json.dumps(out))
        """
    )
    files = json.loads(_run(python, "-c", code, json.dumps(connectors)).strip().splitlines()[-1])
    for name, file in files.items():
        module = connectors[name].partition(":")[0]
        assert Path(file) == purelib / module / "__init__.py", (name, file)
