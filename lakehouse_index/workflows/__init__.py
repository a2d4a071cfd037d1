"""Workflows over a table and its indexes: writes with index maintenance, sync, the watcher.

* :mod:`.writes`: ``append`` / ``overwrite`` / ``delete`` / ``update`` / ``upsert`` — input
  checks, the table commit (:mod:`.delta_commit` through deltalake, :mod:`.iceberg_commit`
  through pyiceberg), then each index's ``auto_refresh`` policy;
* :mod:`.sync`: applying every index's policy to the commits it has not seen;
* :mod:`.watch`: polling tables and syncing their indexes when they move;
* :mod:`.reports`: the typed results;
* :mod:`.data` (input data to Arrow, schema checks) and :mod:`.predicates` (``where`` for
  DataFusion SQL and pyiceberg expressions).
"""
