"""The write half of the Iceberg connector: :class:`~.writer.IcebergWriter` implements the core's
write contract (``lakehouse_index.sink.contract``), registered as the ``iceberg`` writer.

* :mod:`.pyiceberg_ops` — commits through pyiceberg (loaded through the table's catalog);
  deletes, updates and upserts find their rows with this project's reader and rewrite
  exactly those files (copy-on-write);
* :mod:`.new_files` — data files written by the distributed append's tasks, and their commit;
* :mod:`.spark_writes` — Spark DataFrames appended and upserted by Iceberg's Spark runtime,
  through the Spark catalog of the table's pyiceberg catalog's name;
* :mod:`.erase_commit` — the erase's overwrite snapshot (counts only in its summary);
* :mod:`.purge` and :mod:`.delete_manifests` — the purge of the table's history.
"""
