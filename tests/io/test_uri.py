"""Canonical URIs (lakehouse_index.io.uri): one spelling per location, decoded exactly once."""

from __future__ import annotations

import os
from pathlib import Path

import deltalake
import pyarrow as pa
import pytest
from lakehouse_index_delta.paths import canonical_root, resolve_path
from lakehouse_index_iceberg.catalog import table_uri
from lakehouse_index_iceberg.deletes import normalize_path

from lakehouse_index.io import Storage, canonical_uri, join_uri
from lakehouse_index.io.uri import local_path, uri_scheme
from lakehouse_index.registry import open_source


@pytest.mark.parametrize(
    ("location", "expected"),
    [
        # file: URIs in every spelling, percent-decoded exactly once
        ("file:///data/a%20b", "file:///data/a b"),
        ("file:/data/a%20b", "file:///data/a b"),
        ("file://localhost/data/a%20b", "file:///data/a b"),
        ("file:///data/a%2520b", "file:///data/a%20b"),
        ("file:///data/a+b", "file:///data/a+b"),
        ("file:///data/%C3%BC", "file:///data/ü"),
        ("FILE:///data/x", "file:///data/x"),
        # plain paths are filesystem paths: taken literally, never decoded
        ("/data/a%20b", "file:///data/a%20b"),
        ("/data/a b", "file:///data/a b"),
        ("/data/./x/../y", "file:///data/y"),
        # no trailing slash (the local root keeps its own)
        ("/data/t/", "file:///data/t"),
        ("file:///data/t///", "file:///data/t"),
        ("s3://bucket/t/", "s3://bucket/t"),
        ("s3://bucket/", "s3://bucket"),
        ("/", "file:///"),
        ("file:///", "file:///"),
        # Hadoop's S3 schemes are S3
        ("s3a://bucket/t/f.parquet", "s3://bucket/t/f.parquet"),
        ("s3n://bucket/t", "s3://bucket/t"),
        ("S3A://bucket/t", "s3://bucket/t"),
        ("s3://bucket/t/f%3Ag%20h.parquet", "s3://bucket/t/f:g h.parquet"),
        # Google and Azure schemes are recognised
        ("gs://bucket/t/", "gs://bucket/t"),
        ("gcs://bucket/t", "gs://bucket/t"),
        ("az://container/t/", "az://container/t"),
        ("abfs://c@account.dfs.core.windows.net/t/", "abfs://c@account.dfs.core.windows.net/t"),
        ("abfss://c@account.dfs.core.windows.net/a%20b", "abfss://c@account.dfs.core.windows.net/a b"),
    ],
)
def test_canonical_uri(location: str, expected: str) -> None:
    assert canonical_uri(location) == expected
    # Canonical URIs are fixed points of the decoded form: re-canonicalizing decodes nothing.
    assert canonical_uri(expected, decoded=True) == expected


def test_relative_and_home_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert canonical_uri("t/x/") == f"file://{tmp_path}/t/x"
    assert canonical_uri("./t/../u") == f"file://{tmp_path}/u"
    assert canonical_uri("file:t") == f"file://{tmp_path}/t"
    monkeypatch.setenv("HOME", str(tmp_path))
    assert canonical_uri("~/t") == f"file://{tmp_path}/t"


def test_decoded_form_keeps_percent_signs() -> None:
    assert canonical_uri("file:///data/a%20b", decoded=True) == "file:///data/a%20b"
    assert canonical_uri("s3a://b/a%20b/", decoded=True) == "s3://b/a%20b"
    assert canonical_uri("file:/x/y", decoded=True) == "file:///x/y"


def test_schemes_and_helpers() -> None:
    assert uri_scheme("/x") == "file"
    assert uri_scheme("s3a://b/k") == "s3"
    assert uri_scheme("GS://b") == "gs"
    assert local_path("file:///data/a b") == "/data/a b"
    assert local_path("/data/x/") == "/data/x"
    with pytest.raises(ValueError, match="not a local path"):
        local_path("s3://b/k")
    assert join_uri("file:///", "x", "/y/") == "file:///x/y"
    assert join_uri("s3://b/t/", "data") == "s3://b/t/data"


def test_the_three_canonicalizers_agree() -> None:
    """Core, Delta and Iceberg spell the same location the same way."""
    for given in ("file:///data/a%20b", "/data/a%20b/", "s3a://bucket/t/", "file:/data/x"):
        core = canonical_uri(given)
        assert canonical_root(core) == core  # the Delta connector gets the core's canonical URI
        assert table_uri(core) == core  # and so does the Iceberg one: neither decodes again
    # Paths written in table metadata: Delta's are URI references (decoded once), Iceberg's are not.
    assert resolve_path("file:///t", "file:///data/a%20b/f.parquet") == "file:///data/a b/f.parquet"
    assert resolve_path("file:///t", "s3a://b/a%20b/f") == "s3://b/a b/f"
    assert normalize_path("file:/data/a%20b/f.parquet") == "file:///data/a%20b/f.parquet"
    assert normalize_path("/data/a b/f.parquet") == "file:///data/a b/f.parquet"
    assert normalize_path("s3a://b/f.parquet") == "s3://b/f.parquet"


def test_a_table_in_a_folder_named_with_a_percent_sign(tmp_path: Path) -> None:
    """``file:///…/a%2520b`` names the folder ``a%20b``: decoded once, not twice."""
    deltalake.write_deltalake(str(tmp_path / "t"), pa.table({"x": [1, 2]}))
    os.rename(tmp_path / "t", tmp_path / "a%20b")
    expected = f"file://{tmp_path}/a%20b"
    for given in (f"file://{tmp_path}/a%2520b", f"{tmp_path}/a%20b", f"{tmp_path}/a%20b/"):
        source = open_source(given)
        assert source.uri == expected
        (path,) = source.snapshot().files
        assert path.startswith(expected + "/")
        assert Storage.for_uri(path).exists(path)


def test_a_table_in_a_folder_named_with_a_space(tmp_path: Path) -> None:
    deltalake.write_deltalake(str(tmp_path / "t"), pa.table({"x": [1, 2]}))
    os.rename(tmp_path / "t", tmp_path / "a b")
    for given in (f"file://{tmp_path}/a%20b", f"{tmp_path}/a b"):
        source = open_source(given)
        assert source.uri == f"file://{tmp_path}/a b"
        (path,) = source.snapshot().files
        assert Storage.for_uri(path).read_range(path, 0, 4) == b"PAR1"
