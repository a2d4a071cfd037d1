"""The index operation log: typed entries, the put-if-absent store, the lifecycle."""
