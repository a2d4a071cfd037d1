"""Workflows over a table and its indexes: writes with index maintenance, sync, the watcher, verify, erase.

* :mod:`.writes`: ``append`` / ``overwrite`` / ``delete`` / ``update`` / ``upsert`` — input
  checks, one transaction of the table format's writer (the write contract,
  :mod:`lakehouse_index.sink.contract`), then each index's ``auto_refresh`` policy;
  :mod:`.direct_append` and :mod:`.spark_append` write data files and index entries in one job;
* :mod:`.sync`: applying every index's policy to the commits it has not seen;
* :mod:`.watch`: polling tables and syncing their indexes when they move;
* :mod:`.verify`: sampled index answers against a plain scan;
* :mod:`.versions`: which version a time-travel query reads (purged versions say so);
* :mod:`.erasure`: the GDPR erase;
* :mod:`.reports`: the typed results; :mod:`.data`: input data to Arrow, schema checks.

Every workflow takes the table's :class:`~lakehouse_index.context.IndexContext` and runs the
index lifecycle through :mod:`lakehouse_index.actions`; none calls back into the facade.
"""
