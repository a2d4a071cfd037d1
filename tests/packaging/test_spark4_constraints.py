"""The pyspark 4.x CI step (``make test-spark4``) pins what the main venv pins, pyspark aside."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
#: Pins that differ on purpose: pyspark's line.
DIFFERENT = {"pyspark"}


def _pins(name: str) -> dict[str, str]:
    lines = (REPO / name).read_text().splitlines()
    pairs = [line.split("==", 1) for line in lines if line.strip() and not line.startswith("#")]
    return {package.lower(): version for package, version in pairs}


def test_spark4_constraints_follow_the_main_pins() -> None:
    main, spark4 = _pins("constraints.txt"), _pins("constraints-spark4.txt")
    assert {k: v for k, v in main.items() if k not in DIFFERENT} == {
        k: v for k, v in spark4.items() if k not in DIFFERENT
    }
    assert main["pyspark"].startswith("3.5.")
    assert spark4["pyspark"].startswith("4.")
    # The formats' Spark runtimes come from Maven (tools/jvm/pom.xml), not from a wheel.
    assert "snowpark-connect-deps-iceberg" not in main and "snowpark-connect-deps-iceberg" not in spark4
