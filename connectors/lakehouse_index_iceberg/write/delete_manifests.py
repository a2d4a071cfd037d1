"""pyiceberg's v2 manifest writer for delete files (pyiceberg 0.12 writes data manifests only).

Imports pyiceberg: import this module only where pyiceberg is needed.
"""

from __future__ import annotations

from pyiceberg.manifest import ManifestContent, ManifestWriterV2


class DeleteManifestWriter(ManifestWriterV2):
    """pyiceberg's v2 manifest writer, declaring delete content."""

    def content(self) -> ManifestContent:
        return ManifestContent.DELETES

    @property
    def _meta(self) -> dict[str, str]:
        return {**super()._meta, "content": "deletes"}
