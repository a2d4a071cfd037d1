"""The index log's *create if absent* on each emulated object store.

S3 (moto) and Azure (Azurite) honour conditional creates: of 8 writers racing for one log
slot exactly one wins, and the slot holds its bytes (read back without lakehouse-index).
The GCS emulator ignores ``ifGenerationMatch=0``: lakehouse-index refuses to write a log
there (``ConditionalWriteUnsupportedError``) and the slot stays empty.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator

import pytest

from lakehouse_index.io import ConditionalWriteUnsupportedError, ObjectExistsError, Storage
from tests.support.gcs_emulator import GcsEmulator, gcs_emulator
from tests.support.stores import StoreUnderTest

WRITERS = 8


def test_one_of_eight_writers_wins_a_slot(store: StoreUnderTest) -> None:
    slot = f"{store.root}/cc-{uuid.uuid4().hex}/_log/00000000000000000000.json"
    barrier = threading.Barrier(WRITERS)
    won: list[int] = []
    lost: list[int] = []

    def write(i: int) -> None:
        storage = Storage.for_uri(slot, store.storage_options)  # its own clients
        barrier.wait(timeout=60)
        try:
            storage.put_if_absent(slot, f"writer {i}".encode())
            won.append(i)
        except ObjectExistsError:
            lost.append(i)

    threads = [threading.Thread(target=write, args=(i,)) for i in range(WRITERS)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=120)
    assert len(won) == 1 and len(lost) == WRITERS - 1, (won, lost)
    assert store.read_key(store.key(slot)) == f"writer {won[0]}".encode()
    assert store.list_keys(store.key(slot)) == [store.key(slot)]


@pytest.fixture(scope="module")
def gcs() -> Iterator[GcsEmulator]:
    with gcs_emulator("lakehouse-gcs") as emulator:
        yield emulator


def test_gcs_emulator_ignores_if_generation_match(gcs: GcsEmulator) -> None:
    """Why the refusal below is right: a second conditional create overwrites the object."""
    assert gcs.upload("lakehouse-gcs", "probe/a", b"first", if_generation_match=0) == 200
    assert gcs.upload("lakehouse-gcs", "probe/a", b"second", if_generation_match=0) == 200
    assert gcs.download("lakehouse-gcs", "probe/a") == b"second"


def test_log_write_refused_on_a_store_without_conditional_creates(gcs: GcsEmulator) -> None:
    slot = f"gs://lakehouse-gcs/t-{uuid.uuid4().hex}/_lakehouse_index/by_k/_log/00000000000000000000.json"
    storage = Storage.for_uri(slot, gcs.storage_options)
    with pytest.raises(ConditionalWriteUnsupportedError, match=r"gs://lakehouse-gcs.*refuses to write"):
        storage.put_if_absent(slot, b"{}")
    names = gcs.names("lakehouse-gcs")
    assert not [n for n in names if "/_lakehouse_index/" in n], names
