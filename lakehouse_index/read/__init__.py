"""The read path: data files of a table version, by pyarrow (point reads, scans) or Spark."""
