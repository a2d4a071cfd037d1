"""The multi-column index kind: ranges on any subset of its columns, and uniform samples.

A covering side-car (indexed + included columns and each row's address, the row-address
entry format of :mod:`lakehouse_index.kinds.entries`) laid out so that per-row-group
Parquet statistics prune on *every* indexed column, after Qbeast's OTree without
rewriting the table:

* :mod:`.spec` — :class:`MultiColumnIndex`, what users declare;
* :mod:`.weights` — each row's sampling weight, a hash of its identity;
* :mod:`.curve` — the sort key ``_cell``: the weight's tier, then a Z-order curve of the
  indexed columns' quantised ranks;
* :mod:`.kind` — the plug-in (the secondary index's build, row-level maintenance,
  optimize and lineage, with these two extra columns).

Queries read it through :mod:`lakehouse_index.query.index_scan`.
"""
