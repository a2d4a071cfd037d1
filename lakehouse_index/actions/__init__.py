"""The index lifecycle actions, one module per operation (after Hyperspace's ``actions/``).

Each action checks what it can before anything is written (validate), then runs the
lifecycle template of :mod:`lakehouse_index.log.lifecycle` (begin: the transient entry;
op: the body writing index data; end: the final entry), over an
:class:`~lakehouse_index.context.IndexContext`:

* :mod:`.create_index` — build from the latest table version (CREATING → ACTIVE);
* :mod:`.refresh_index` — full, incremental or quick (REFRESHING → ACTIVE);
* :mod:`.optimize_index` — quick or full compaction (OPTIMIZING → ACTIVE);
* :mod:`.delete_index` / :mod:`.restore_index` — soft delete and its undo;
* :mod:`.vacuum_index` — remove data no retained snapshot names (or all of a deleted index);
* :mod:`.cancel_index` — return an index stuck in a transient state to its last stable one.

The API facade, the writes, ``sync_indexes``, the watcher and the erase all call these;
none of them calls back into the facade.
"""
