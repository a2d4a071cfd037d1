"""Write the Iceberg format-v3 fixture with deletion vectors that pyspark 4 tests read.

The data-source tests of ``make test-spark4`` read this frozen table (written when pyspark 4 had
no Iceberg runtime here; both Spark lines have one now, ``tools/jvm/pom.xml``, so it could be
written live). This script writes it once with Spark 3.5 and the Iceberg runtime (the main environment),
through a Hadoop catalog at the fixed path :data:`FIXTURE_ROOT` (Iceberg metadata records
absolute paths: the tests copy the fixture back to exactly that path), and stores beside it,
per snapshot, what Spark's Iceberg reader returns (the oracle) and the live data files.

History (merge-on-read, so every DELETE/UPDATE writes Puffin deletion vectors)::

    s1  INSERT ids 0..59            s4  INSERT ids 120..179
    s2  INSERT ids 60..119          s5  DELETE id % 5 = 0     (DVs merged with s3's)
    s3  DELETE id % 7 = 0           s6  UPDATE v WHERE id % 11 = 0 (DVs + new rows)

Run from the project root with the main environment::

    .venv/bin/python -m tests.support.make_iceberg_v3_dv
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

#: Where the table lives when written and when read (its metadata names this path).
FIXTURE_ROOT = Path("/tmp/lakehouse-index-fixtures/iceberg-v3-dv")
#: The table folder below the warehouse (Hadoop catalog: ``<warehouse>/<db>/<table>``).
TABLE = FIXTURE_ROOT / "db" / "t"
#: Where the project keeps the fixture.
STORED = Path(__file__).resolve().parents[1] / "data" / "iceberg-v3-dv"

MOR = (
    "'write.delete.mode'='merge-on-read', 'write.update.mode'='merge-on-read', "
    "'write.merge.mode'='merge-on-read'"
)


def _history(spark: Any) -> list[int]:
    t = "local.db.t"
    spark.sql(
        f"CREATE TABLE {t} (id bigint, k string, v string) USING iceberg "
        f"TBLPROPERTIES ('format-version'='3', {MOR})"
    )
    rows = (
        "SELECT id, CONCAT('k', CAST(id % 40 AS STRING)), CONCAT('v', CAST(id AS STRING)) "
        "FROM range({a}, {b}, 1, 2)"
    )
    steps = [
        f"INSERT INTO {t} " + rows.format(a=0, b=60),
        f"INSERT INTO {t} " + rows.format(a=60, b=120),
        f"DELETE FROM {t} WHERE id % 7 = 0",
        f"INSERT INTO {t} " + rows.format(a=120, b=180),
        f"DELETE FROM {t} WHERE id % 5 = 0",
        f"UPDATE {t} SET v = CONCAT(v, '-u') WHERE id % 11 = 0",
    ]
    snapshots = []
    for sql in steps:
        spark.sql(sql)
        snapshots.append(
            spark.sql(f"SELECT snapshot_id FROM {t}.snapshots ORDER BY committed_at DESC LIMIT 1").first()[0]
        )
    return snapshots


def _expected(spark: Any, snapshots: list[int]) -> dict[str, Any]:
    out = []
    for sid in snapshots:
        df = spark.read.format("iceberg").option("snapshot-id", sid).load("local.db.t")
        rows = sorted([r["id"], r["k"], r["v"]] for r in df.collect())
        files = spark.read.format("iceberg").option("snapshot-id", sid).load("local.db.t.files")
        data = sorted(r["file_path"] for r in files.where("content = 0").select("file_path").collect())
        dvs = files.where("content = 1").count()
        out.append({"snapshot": sid, "rows": rows, "dataFiles": data, "deleteFiles": dvs})
    return {"table": str(TABLE), "snapshots": out}


def main() -> None:
    """Write the table at :data:`FIXTURE_ROOT` and copy it, with ``expected.json``, to :data:`STORED`."""
    from tests.support.spark_iceberg import spark_session

    shutil.rmtree(FIXTURE_ROOT, ignore_errors=True)
    spark = spark_session(FIXTURE_ROOT)
    snapshots = _history(spark)
    expected = _expected(spark, snapshots)
    assert any(s["deleteFiles"] for s in expected["snapshots"]), "no deletion vectors were written"
    shutil.rmtree(STORED, ignore_errors=True)
    shutil.copytree(TABLE, STORED / "table", ignore=shutil.ignore_patterns("*.crc"))
    (STORED / "expected.json").write_text(json.dumps(expected, indent=1) + "\n")
    print(f"wrote {STORED}: snapshots {snapshots}")


if __name__ == "__main__":
    main()
