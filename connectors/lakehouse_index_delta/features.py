"""Delta protocol versions and table features: which this connector honours when reading, and
which each of the project's writers honours (deltalake's commits, the erase's own commit).

The one table of both sides; the writers (``write/``) refuse a table through
:func:`refused_by_deltalake` and :func:`refused_by_erase` before anything is written.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

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


MAX_WRITER_VERSION = 7
#: Legacy writer versions (before table features) and the features each one implies.
LEGACY_WRITER_FEATURES = {
    2: ("appendOnly", "invariants"),
    3: ("checkConstraints",),
    4: ("changeDataFeed", "generatedColumns"),
    5: ("columnMapping",),
    6: ("identityColumns",),
}

#: Writer features a deltalake commit honours whatever the table holds (appendOnly is
#: enforced by the writer: only appends are allowed when ``delta.appendOnly`` is true).
DELTALAKE_HONOURED = frozenset(
    {
        "appendOnly",
        "changeDataFeed",
        "timestampNtz",
        "variantType",
        "variantType-preview",
        "vacuumProtocolCheck",
    }
)
#: Writer features that only constrain writers while the table uses them (schema or
#: configuration); a deltalake commit is refused when one is in use, not when merely listed.
METADATA_FEATURES = ("invariants", "checkConstraints", "generatedColumns", "identityColumns", "columnMapping")

#: Writer features an erase commit honours: it only removes rows, keeps every column of
#: the rows it keeps as it was (constraints, generated and identity values stay valid)
#: and copies the physical schema (column mapping).
ERASE_HONOURED = frozenset(
    {
        "appendOnly",  # refused by the erase when delta.appendOnly is on
        "invariants",
        "checkConstraints",
        "generatedColumns",
        "identityColumns",
        "columnMapping",
        "deletionVectors",
        "changeDataFeed",
        "inCommitTimestamp",
        "timestampNtz",
        "variantType",
        "variantType-preview",
        "vacuumProtocolCheck",
        "domainMetadata",
        "clustering",
        "typeWidening",
        "typeWidening-preview",
        "allowColumnDefaults",
        "v2Checkpoint",
        "rowTracking",
    }
)


def declared_writer_features(min_writer_version: int, writer_features: Sequence[str] | None) -> list[str]:
    """The writer features a protocol declares: listed (writer version 7) or implied by a legacy version."""
    if min_writer_version >= 7:
        return list(writer_features or ())
    return [f for v, fs in LEGACY_WRITER_FEATURES.items() if v <= min_writer_version for f in fs]


def _fields(schema: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    """Every field of a Delta schema JSON, nested ones included."""
    for f in schema.get("fields", ()):
        yield f
        yield from _nested(f.get("type"))


def _nested(t: Any) -> Iterator[Mapping[str, Any]]:
    if not isinstance(t, Mapping):
        return
    if t.get("type") == "struct":
        yield from _fields(t)
    elif t.get("type") == "array":
        yield from _nested(t.get("elementType"))
    elif t.get("type") == "map":
        yield from _nested(t.get("keyType"))
        yield from _nested(t.get("valueType"))


def _in_use(feature: str, schema: Mapping[str, Any], config: Mapping[str, str]) -> bool:
    """Whether a metadata-driven writer feature is in use by this table version."""
    metas = [f.get("metadata") or {} for f in _fields(schema)]
    if feature == "invariants":
        return any("delta.invariants" in m for m in metas)
    if feature == "checkConstraints":
        return any(k.startswith("delta.constraints.") for k in config)
    if feature == "generatedColumns":
        return any("delta.generationExpression" in m for m in metas)
    if feature == "identityColumns":
        return any(any(k.startswith("delta.identity.") for k in m) for m in metas)
    if feature == "columnMapping":
        return config.get("delta.columnMapping.mode", "none").lower() != "none"
    raise AssertionError(feature)


def refused_by_deltalake(
    min_writer_version: int,
    writer_features: Sequence[str] | None,
    schema: Mapping[str, Any],
    config: Mapping[str, str],
) -> list[str]:
    """The writer features (or version) of a table a deltalake commit cannot honour."""
    if min_writer_version > MAX_WRITER_VERSION:
        return [f"minWriterVersion {min_writer_version}"]
    return [
        f
        for f in declared_writer_features(min_writer_version, writer_features)
        if f not in DELTALAKE_HONOURED and not (f in METADATA_FEATURES and not _in_use(f, schema, config))
    ]


def refused_by_erase(min_writer_version: int, writer_features: Sequence[str] | None) -> list[str]:
    """The writer features (or version) of a table an erase commit cannot honour."""
    if min_writer_version > MAX_WRITER_VERSION:
        return [f"minWriterVersion {min_writer_version}"]
    declared = declared_writer_features(min_writer_version, writer_features)
    return [f for f in declared if f not in ERASE_HONOURED]


def refused_by_row_changes(
    min_writer_version: int,
    writer_features: Sequence[str] | None,
    schema: Mapping[str, Any],
    config: Mapping[str, str],
    *,
    adds_rows: bool,
) -> list[str]:
    """The writer features (or version) of a table the project's own row-change commit cannot honour.

    Removing rows honours what an erase commit honours. Adding rows also writes new values:
    constraints, invariants, generation and identity rules would have to hold for them and
    column mapping would need the physical schema, so those are refused while in use, as is
    the change data feed when on (its update pre- and post-images are not written here).
    """
    refused = refused_by_erase(min_writer_version, writer_features)
    if not adds_rows or refused:
        return refused
    declared = declared_writer_features(min_writer_version, writer_features)
    in_use = [f for f in METADATA_FEATURES if f in declared and _in_use(f, schema, config)]
    cdf_on = str(config.get("delta.enableChangeDataFeed", "false")).lower() == "true"
    return in_use + (["changeDataFeed"] if cdf_on else [])
