"""The scheme registry: Storage picks its backend by URI scheme; users can add schemes."""

from __future__ import annotations

import pickle
import threading
from pathlib import Path
from typing import ClassVar

import pyarrow.fs as pafs
import pytest

import lakehouse_index.io as lio
from lakehouse_index.errors import LakehouseIndexError
from lakehouse_index.io import (
    ObjectExistsError,
    Storage,
    StorageBackend,
    UnsupportedSchemeError,
    register_backend,
    supported_schemes,
)
from lakehouse_index.io.local import LocalBackend
from lakehouse_index.io.objstore import AzureBackend, GcsBackend
from lakehouse_index.io.s3 import S3Backend

#: Root folder of the "mem" test store (set by the fixture; the backend is built by name).
_ROOTS: dict[str, str] = {}
_LOCK = threading.Lock()


class FolderBackend(StorageBackend):
    """A user-defined store: ``mem://bucket/key`` lives in a local folder (test only)."""

    def filesystem(self) -> pafs.FileSystem:
        return pafs.SubTreeFileSystem(_ROOTS["mem"], pafs.LocalFileSystem())

    def path(self, uri: str) -> str:
        return uri.split("://", 1)[1]

    def prepare_write(self, path: str) -> None:
        self.filesystem().create_dir(path.rsplit("/", 1)[0], recursive=True)

    def put_if_absent(self, uri: str, data: bytes) -> None:
        fs, path = self.filesystem(), self.path(uri)
        with _LOCK:
            if fs.get_file_info(path).type != pafs.FileType.NotFound:
                raise ObjectExistsError(uri)
            self.prepare_write(path)
            with fs.open_output_stream(path) as f:
                f.write(data)


@pytest.fixture
def registry(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A private copy of the registry (restored afterwards) and the mem store's folder."""
    monkeypatch.setattr(lio, "_BACKENDS", dict(lio._BACKENDS))
    monkeypatch.setitem(_ROOTS, "mem", str(tmp_path))
    return tmp_path


def test_built_in_schemes() -> None:
    assert {"file", "s3", "s3a", "s3n"} <= set(supported_schemes())
    assert isinstance(Storage.for_uri("/tmp/x").backend, LocalBackend)
    assert isinstance(Storage.for_uri("file:///tmp/x").backend, LocalBackend)
    for uri in ("s3://b/k", "s3a://b/k", "S3N://b/k"):
        storage = Storage.for_uri(uri, {"AWS_REGION": "eu-west-1"})
        assert storage.scheme == "s3" and isinstance(storage.backend, S3Backend)
    assert Storage("s3a").scheme == "s3"
    assert {"gs", "gcs", "az", "abfs", "abfss"} <= set(supported_schemes())
    assert isinstance(Storage.for_uri("gcs://b/k").backend, GcsBackend)
    for uri in ("az://c/k", "abfs://c/k", "abfss://c@account.dfs.core.windows.net/k"):
        assert isinstance(Storage.for_uri(uri).backend, AzureBackend)


@pytest.mark.parametrize("uri", ["hdfs://nn/t", "ftp://host/t"])
def test_unknown_scheme_names_it_and_the_supported_ones(uri: str) -> None:
    scheme = uri.split(":", 1)[0]
    with pytest.raises(UnsupportedSchemeError) as e:
        Storage.for_uri(uri)
    message = str(e.value)
    assert repr(scheme) in message
    assert "file" in message and "s3" in message and "register_backend" in message
    assert isinstance(e.value, LakehouseIndexError)


def test_a_path_of_another_scheme_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UnsupportedSchemeError, match="not a 'file' path"):
        Storage.for_uri(str(tmp_path)).read_bytes("s3://b/k")


def test_a_registered_backend_is_used(registry: Path) -> None:
    with pytest.raises(UnsupportedSchemeError):
        Storage.for_uri("mem://b/x")
    register_backend("mem", FolderBackend)
    assert "mem" in supported_schemes()
    storage = Storage.for_uri("mem://b/x")
    assert isinstance(storage.backend, FolderBackend)

    storage.write_bytes("mem://b/t/data/one", b"1")
    storage.put_if_absent("mem://b/t/_log/0.json", b"{}")
    with pytest.raises(ObjectExistsError):
        storage.put_if_absent("mem://b/t/_log/0.json", b"{}")
    assert (registry / "b" / "t" / "data" / "one").read_bytes() == b"1"
    assert storage.read_bytes("mem://b/t/_log/0.json") == b"{}"
    assert storage.read_range("mem://b/t/data/one", 0, 1) == b"1"
    assert [s.path for s in storage.list_dir("mem://b/t/_log")] == ["mem://b/t/_log/0.json"]
    assert sorted(s.path for s in storage.list_tree("mem://b/t")) == [
        "mem://b/t/_log/0.json",
        "mem://b/t/data/one",
    ]
    assert storage.stat("mem://b/t/data/one").size == 1
    storage.delete_tree("mem://b/t/data")
    assert not storage.exists("mem://b/t/data/one")

    # Pickled (Spark tasks), the Storage keeps its backend class, registered there or not.
    clone = pickle.loads(pickle.dumps(storage))
    assert isinstance(clone.backend, FolderBackend) and clone.read_bytes("mem://b/t/_log/0.json") == b"{}"


def test_a_backend_registered_by_name_is_imported_on_first_use(registry: Path) -> None:
    register_backend("mem://", f"{__name__}:FolderBackend")
    assert isinstance(Storage.for_uri("mem://b").backend, FolderBackend)
    register_backend("bad", "lakehouse_index.io.uri:join_uri")
    with pytest.raises(TypeError, match="not a StorageBackend"):
        Storage.for_uri("bad://x")


def test_a_registration_replaces_a_built_in_backend(registry: Path, tmp_path: Path) -> None:
    class Counting(LocalBackend):
        puts: ClassVar[list[str]] = []

        def put_if_absent(self, uri: str, data: bytes) -> None:
            self.puts.append(uri)
            super().put_if_absent(uri, data)

    register_backend("file", Counting)
    Storage.for_uri(str(tmp_path)).put_if_absent(f"{tmp_path}/x", b"1")
    assert Counting.puts == [f"{tmp_path}/x"] and (tmp_path / "x").read_bytes() == b"1"


def test_local_paths_are_not_decoded(tmp_path: Path) -> None:
    storage = Storage.for_uri(str(tmp_path))
    storage.write_bytes(f"file://{tmp_path}/a%20b/f", b"x")  # a canonical URI: literal
    assert (tmp_path / "a%20b" / "f").read_bytes() == b"x"
    storage.write_bytes(f"file://{tmp_path}/a b/g?#", b"y")
    assert (tmp_path / "a b" / "g?#").read_bytes() == b"y"
    assert storage.exists(f"{tmp_path}/a b/g?#")
