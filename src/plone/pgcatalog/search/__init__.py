"""Search: a ZCatalog query read, planned, answered in SQL, and its result
sequence, brains and result cache."""
