"""PostgreSQL access: statements as fragments, the pool, the transaction's
session, the store of one catalog's rows, the writer and the process-wide facts
about them."""
