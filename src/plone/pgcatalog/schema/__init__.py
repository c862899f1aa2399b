"""The catalog's schema: its tables by name, the indexes behind the catalog's
indexes, planner statistics, migrations."""
