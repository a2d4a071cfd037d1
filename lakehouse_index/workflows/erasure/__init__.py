"""GDPR erasure of data subjects: locate, targeted delete, refresh, purge, verify, audit.

Side-car state lives under ``<index_root>/_erasure/`` (a folder without an index ``_log``,
so the index catalog ignores it).
"""
