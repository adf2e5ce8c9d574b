"""One module per schema revision, named after the schema version it brings the ledger to."""
