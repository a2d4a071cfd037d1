"""The skipping index kind: per data file statistics that prune files for a predicate.

One row per source data file with per-column min/max, null and NaN counts, and either
the exact list of distinct values or a bloom filter of them. The modules:

* :mod:`.schema`: the layout of skipping rows and the identity of indexed columns;
* :mod:`.hashing`: XXH64 over canonical value encodings (equal across type widening);
* :mod:`.bloom`: the split-block bloom filter of the Parquet format;
* :mod:`.stats`: building the rows of data files;
* :mod:`.files`: writing skipping files and loading the rows live in one version;
* :mod:`.prune`: which files may hold a row matching a predicate.

Example::

    from lakehouse_index.kinds import skipping

    rows = skipping.build_rows(source, snapshot, spec, [(entry, file_id), ...])
    index_file = skipping.write_skipping_file(rows, storage, index_dir, "data/<uuid>/skipping.parquet")
    data = skipping.load(storage, index_dir, log_entry.content.files, live_ids, snapshot)
    keep = skipping.prune(data, predicate, live_ids)   # file ids to scan
"""

from lakehouse_index.kinds.skipping.bloom import (
    MAX_BLOOM_BYTES,
    BloomSet,
    bloom_build,
    bloom_may_contain,
    bloom_num_blocks,
    bloom_probe,
    sbbf_fpp,
)
from lakehouse_index.kinds.skipping.files import SkippingData, build_files, load, write_skipping_file
from lakehouse_index.kinds.skipping.hashing import hash_values
from lakehouse_index.kinds.skipping.prune import prune
from lakehouse_index.kinds.skipping.schema import (
    FILE_ID,
    IDENTITY_KEY,
    RESERVED,
    ROWS,
    column_identity,
    rows_schema,
    validate_spec,
)
from lakehouse_index.kinds.skipping.stats import build_rows, stats_row

__all__ = [
    "FILE_ID",
    "IDENTITY_KEY",
    "MAX_BLOOM_BYTES",
    "RESERVED",
    "ROWS",
    "BloomSet",
    "SkippingData",
    "bloom_build",
    "bloom_may_contain",
    "bloom_num_blocks",
    "bloom_probe",
    "build_files",
    "build_rows",
    "column_identity",
    "hash_values",
    "load",
    "prune",
    "rows_schema",
    "sbbf_fpp",
    "stats_row",
    "validate_spec",
    "write_skipping_file",
]
