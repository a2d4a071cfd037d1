"""The write half of the Delta connector: :class:`~.writer.DeltaWriter` implements the core's
write contract (``lakehouse_index.sink.contract``), registered as the ``delta`` writer.

* :mod:`.deltalake_ops` — commits through deltalake (delta-rs) and the checks before them;
* :mod:`.log_commit` — this package's own commits (index-planned writes, erases): exactly the
  rows found, removed from exactly their files, by rewrites or by :mod:`.marks` (deletion
  vectors), with :mod:`.stats` for the files it writes;
* :mod:`.new_files` — data files written by the distributed append's tasks, and their commit;
* :mod:`.spark_writes` — Spark DataFrames written by delta-spark itself;
* :mod:`.purge` — the purge of the table's history.

Which writer features each honours is one table, in :mod:`lakehouse_index_delta.features`.
"""
