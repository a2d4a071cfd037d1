"""The write half of the Delta connector: :class:`~.writer.DeltaWriter` implements the core's
write contract (``lakehouse_index.sink.contract``), registered as the ``delta`` writer.

* :mod:`.deltalake_ops` — commits through deltalake (delta-rs) and the checks before them;
* :mod:`.new_files` — data files written by the distributed append's tasks, and their commit;
* :mod:`.erase_commit` — the erase's own commit (removes and rewrites, no predicate recorded);
* :mod:`.purge` — the purge of the table's history.

Which writer features each honours is one table, in :mod:`lakehouse_index_delta.features`.
"""
