"""Table-format connectors, registered under the ``lakehouse_index.connectors`` entry points."""
