"""Hand-made Iceberg delete manifests for tests (pyiceberg 0.12 writes no merge-on-read deletes):
the library's writer, which the erasure purge uses for the delete manifests it rewrites."""

from __future__ import annotations

from lakehouse_index_iceberg.write.delete_manifests import DeleteManifestWriter

__all__ = ["DeleteManifestWriter"]
