"""lakehouse-index: side-car secondary and covering indexes for Delta Lake and Iceberg tables."""
