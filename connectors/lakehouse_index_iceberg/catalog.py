"""Where a table's current metadata file is: asked of a pyiceberg catalog, or found by path.

A :data:`~lakehouse_index_iceberg.table_metadata.MetadataLocator` is called on every
refresh, so it must be cheap: by path it reads ``version-hint.text`` (or lists
``metadata/``); through a SQL catalog it queries the table's row alone; through any
other catalog it is the catalog's ``load_table``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from lakehouse_index.source import FileIO, NotATableError, canonical_uri
from lakehouse_index_iceberg.table_metadata import MetadataLocator, find_metadata_file


def table_uri(uri: str) -> str:
    """A table folder as a canonical URI (the core hands it over decoded: not decoded again)."""
    return canonical_uri(uri, decoded=True)


def path_locator(io: FileIO, root: str) -> MetadataLocator:
    """The newest metadata file of the table folder ``root`` (see :func:`find_metadata_file`)."""

    def locate() -> str:
        return find_metadata_file(io, root)

    return locate


def catalog_table(catalog: Any, identifier: str) -> Any:
    """The pyiceberg Table ``identifier``, freshly loaded (``catalog``: a name or a Catalog)."""
    from pyiceberg.catalog import load_catalog

    cat = load_catalog(catalog) if isinstance(catalog, str) else catalog
    return cat.load_table(identifier)


def catalog_locator(catalog: Any, identifier: str) -> MetadataLocator:
    """The current metadata file of ``identifier`` as the catalog (a name or a Catalog) knows it."""
    from pyiceberg.catalog import Catalog, load_catalog
    from pyiceberg.exceptions import NoSuchTableError

    cat = load_catalog(catalog) if isinstance(catalog, str) else catalog
    if not isinstance(cat, Catalog):
        raise TypeError(
            f"catalog must be a catalog name or a pyiceberg Catalog, got {type(catalog).__name__}"
        )

    row = _sql_metadata_location(cat, identifier)

    def locate() -> str:
        try:
            location = row() if row is not None else None
            return location if location is not None else str(cat.load_table(identifier).metadata_location)
        except NoSuchTableError as e:
            raise NotATableError(f"catalog {cat.name!r} has no Iceberg table {identifier!r}") from e

    return locate


def _sql_metadata_location(cat: Any, identifier: str) -> Callable[[], str | None] | None:
    """For a pyiceberg ``SqlCatalog``: a query of the table's current metadata location alone.

    ``load_table`` reads and parses the whole metadata file on every call, only for the source
    to learn whether it changed; the catalog's table row names it. None for other catalogs
    (their ``load_table`` is the only portable way); the query returns None when the row is
    missing or has no location (``load_table`` then raises the catalog's own error).
    """
    try:
        from pyiceberg.catalog.sql import IcebergTables, SqlCatalog
        from sqlalchemy import select
    except ImportError:  # the SQL catalog's dependencies are optional
        return None
    if not isinstance(cat, SqlCatalog):
        return None
    from pyiceberg.catalog import Catalog

    namespace = Catalog.namespace_to_string(Catalog.namespace_from(identifier))
    stmt = select(IcebergTables.metadata_location).where(
        IcebergTables.catalog_name == cat.name,
        IcebergTables.table_namespace == namespace,
        IcebergTables.table_name == Catalog.table_name_from(identifier),
    )
    # Rows of views share the table; the filter is None on catalogs of the old schema.
    type_filter = getattr(cat, "_iceberg_type_filter", lambda: None)()
    if type_filter is not None:
        stmt = stmt.where(type_filter)

    def query() -> str | None:
        with cat.engine.connect() as conn:  # Core, not an ORM session: a third of the cost
            return conn.execute(stmt).scalar()

    return query
