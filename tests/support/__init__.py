"""Test support shared by several test folders (e.g. Spark with Iceberg)."""
