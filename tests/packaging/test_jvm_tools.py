"""tools/jvm/pom.xml pins, for each pyspark line the project tests, the jars of that line."""

from __future__ import annotations

import importlib.util
import re
import xml.etree.ElementTree as ET
from importlib.metadata import version
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
_NS = {"m": "http://maven.apache.org/POM/4.0.0"}
#: The Scala version of each Spark major (Spark 3.5 builds for 2.12 by default, Spark 4 only for 2.13).
SCALA = {"3": "2.12", "4": "2.13"}


def _profiles() -> dict[str, list[tuple[str, str, str]]]:
    root = ET.parse(REPO / "tools" / "jvm" / "pom.xml").getroot()
    out = {}
    for profile in root.iterfind("m:profiles/m:profile", _NS):
        deps = [
            tuple(d.findtext(f"m:{f}", namespaces=_NS) or "" for f in ("groupId", "artifactId", "version"))
            for d in profile.iterfind("m:dependencies/m:dependency", _NS)
        ]
        out[profile.findtext("m:id", namespaces=_NS) or ""] = deps
    return out


def _pyspark_line(constraints: str) -> str:
    pin = re.search(r"^pyspark==(\d+\.\d+)\.", (REPO / constraints).read_text(), re.M)
    assert pin, constraints
    return pin.group(1)


def test_a_profile_per_pinned_pyspark_line_and_the_makefile_fetches_it() -> None:
    lines = {_pyspark_line("constraints.txt"), _pyspark_line("constraints-spark4.txt")}
    assert set(_profiles()) == {f"spark-{line}" for line in lines}
    makefile = (REPO / "Makefile").read_text()
    assert f"SPARK_LINE := {_pyspark_line('constraints.txt')}\n" in makefile
    assert f"SPARK4_LINE := {_pyspark_line('constraints-spark4.txt')}\n" in makefile


def test_each_profile_has_the_runtimes_of_its_line() -> None:
    for profile, deps in _profiles().items():
        line = profile.removeprefix("spark-")
        scala = SCALA[line.split(".")[0]]
        artifacts = {artifact: version for _, artifact, version in deps}
        delta = [a for a in artifacts if a.startswith("delta-spark_")]
        # Delta 4.x names the Spark line in the artifact when it builds for several (delta-spark_4.1_2.13).
        assert delta and delta[0] in (f"delta-spark_{scala}", f"delta-spark_{line}_{scala}"), profile
        assert artifacts["delta-storage"] == artifacts[delta[0]], profile
        assert f"iceberg-spark-runtime-{line}_{scala}" in artifacts, profile
        assert "hadoop-aws" in artifacts, profile
        assert {"aws-java-sdk-bundle", "bundle"} & set(artifacts), f"{profile}: no AWS SDK for S3A"


def test_s3a_matches_the_hadoop_pyspark_ships() -> None:
    """hadoop-aws is the version of the Hadoop client in the installed pyspark's jars."""
    spec = importlib.util.find_spec("pyspark")  # finds the package without importing it
    assert spec is not None and spec.origin is not None
    shipped = [p.name for p in (Path(spec.origin).parent / "jars").glob("hadoop-client-api-*.jar")]
    assert len(shipped) == 1, shipped
    line = ".".join(version("pyspark").split(".")[:2])
    artifacts = {artifact: v for _, artifact, v in _profiles()[f"spark-{line}"]}
    assert f"hadoop-client-api-{artifacts['hadoop-aws']}.jar" == shipped[0]
