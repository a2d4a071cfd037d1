"""The purge of an erase rewrites only the index files holding entries of rows no longer live.

Indexes of many small files (``rows_per_index_file``); a subject's rows are 80 consecutive ids:
its entries sit in the one or two files of the secondary index whose key range holds its key,
and in one or two files of each bucket of the covering index on ``id``; a multi-column index on
``(id, v)`` holds them in the files of its blocks. Afterwards the deep residue
scan finds nothing, every index answers as deltalake's read of the same version, and the files
without such entries are the very files of before.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable, write_deltalake

import lakehouse_index as li
from lakehouse_index.workflows.erasure.verify.residue import find_residue

FILES, ROWS = 8, 500
PER_SUBJECT = 80  # consecutive ids


def _table(root: Path) -> str:
    uri = str(root / "t")
    for f in range(FILES):
        ids = list(range(f * ROWS, (f + 1) * ROWS))
        write_deltalake(
            uri,
            pa.table(
                {"id": ids, "email": [f"s{i // PER_SUBJECT:03d}@x" for i in ids], "v": [3 * i for i in ids]}
            ),
            mode="append",
        )
    return uri


def _index_files(t: li.Table, name: str) -> set[str]:
    entry = t.context.log(name).latest_stable()
    assert entry is not None
    return {f.path for f in entry.content.files}


def test_the_purge_rewrites_only_the_index_files_holding_the_subjects(tmp_path: Path) -> None:
    uri = _table(tmp_path)
    config = li.Config(executor=li.ExecutorConfig(rows_per_index_file=400, index_row_group_rows=100))
    t = li.open_table(uri, config=config)
    t.create_index(li.SecondaryIndex("by_email", key="email"))
    t.create_index(li.CoveringIndex("cov", indexed="id", included=["email", "v"], num_buckets=4))
    t.create_index(li.MultiColumnIndex("mc", columns=["id", "v"], included=["email"], block_rows=64))
    before = {name: _index_files(t, name) for name in ("by_email", "cov", "mc")}
    subject = "s007@x"

    result = t.erase("by_email", [subject], purge=True)

    assert result.verification is not None and result.verification["ok"]
    assert find_residue([uri, t.context.index_root], [subject]).ok
    after = {name: _index_files(t, name) for name in ("by_email", "cov", "mc")}
    # by_email: 4,000 entries sorted by email in files of 400: the subject's 80 in one or two;
    # cov: 4 buckets of 1,000 entries sorted by id in files of 400: its ids in one or two each.
    assert len(before["by_email"] - after["by_email"]) in (1, 2) and len(before["by_email"]) == 10
    assert 0 < len(before["cov"] - after["cov"]) < len(before["cov"])
    assert len(before["mc"] - after["mc"]) > 0
    purged = {i["name"]: i for i in result.purge_report["indexes"]["indexes"]}
    assert purged["by_email"]["state"] == "ACTIVE"
    # every index answers as deltalake reads the latest version
    plain = DeltaTable(uri).to_pyarrow_dataset().to_table()
    emails = sorted(set(plain["email"].to_pylist()))
    assert subject not in emails and len(emails) == FILES * ROWS // PER_SUBJECT - 1
    got = t.lookup("by_email", emails, columns=["id"])
    assert sorted(got["id"].to_pylist()) == sorted(plain["id"].to_pylist())
    ids = plain["id"].to_pylist()
    rows = t.lookup("cov", [*ids, 565, 600], columns=["id", "email", "v"]).sort_by("id")
    assert rows.equals(plain.select(["id", "email", "v"]).sort_by("id").cast(rows.schema))
    assert not pc.any(pc.equal(rows["email"], subject)).as_py()
    # the multi-column index's blocks: a sample (the same rows as the scan's, by the same
    # weights), a range on its second column
    assert "mc" in t.explain(sample=0.25).summary
    sampled = t.sample(0.25, columns=["id", "email", "v"]).sort_by("id")
    scanned = t.sample(0.25, columns=["id", "email", "v"], use_indexes=False).sort_by("id")
    assert sampled.num_rows > 0 and sampled.equals(scanned)
    ranged = t.scan(where="v BETWEEN 1500 AND 1800", columns=["id", "email"]).sort_by("id")
    want = plain.filter(pc.and_(pc.greater_equal(plain["v"], 1500), pc.less_equal(plain["v"], 1800)))
    assert ranged.equals(want.select(["id", "email"]).sort_by("id").cast(ranged.schema))
