"""Delta protocol versions and table features this connector can honour when reading."""

from __future__ import annotations

from lakehouse_index.source import UnsupportedFeatureError
from lakehouse_index_delta.actions import Protocol

#: Reader features whose semantics are implemented (or do not affect which rows are live).
SUPPORTED_READER_FEATURES = frozenset(
    {
        "columnMapping",  # physical names / field ids exposed on Column
        "deletionVectors",  # u / i / p descriptors read in deletion_vectors.py
        "timestampNtz",  # timestamp_ntz type
        "v2Checkpoint",  # UUID-named checkpoints and sidecars
        "vacuumProtocolCheck",  # only constrains VACUUM writers
        "typeWidening",  # readers cast narrower file types to the schema type
        "typeWidening-preview",
        "variantType",  # variant columns read as struct<value, metadata>
        "variantType-preview",
    }
)
MAX_READER_VERSION = 3


def check_protocol(p: Protocol, source: str) -> None:
    """Raise UnsupportedFeatureError naming every reader feature (or version) not supported.

    Unknown *writer* features are tolerated: they constrain writers only.
    """
    if p.reader_features is not None:
        unknown = sorted(set(p.reader_features) - SUPPORTED_READER_FEATURES)
        if unknown:
            raise UnsupportedFeatureError(
                f"{source}: the table requires reader features {unknown} which this connector does "
                f"not support (minReaderVersion {p.min_reader_version})"
            )
    if p.min_reader_version > MAX_READER_VERSION:
        raise UnsupportedFeatureError(
            f"{source}: minReaderVersion {p.min_reader_version} is not supported (max {MAX_READER_VERSION})"
        )
