"""Freeze the catalog tables of the current schema version into a fixture.

Run from the repository root when a release introduces a schema version
(``python3 tests/old_schemas/freeze.py``): it writes
``v<version>.sql`` here (unless it exists: a fixture is never rewritten),
holding the statements that made that version on an empty database, the
version row and a few rows in that layout.  tests/test_schema.py loads each
fixture into a fresh database, upgrades it with the steps after it, and
compares the result with a freshly created database: every released schema
version must upgrade to the current one and keep its rows.
"""
import os

from plone.pgcatalog import __version__
from plone.pgcatalog.schema import migrations

HERE = os.path.dirname(os.path.abspath(__file__))

#: a few rows of every kind, in the layout of the current version
ROWS = """\
INSERT INTO pgcatalog_catalogs (key, counter, stamp) VALUES
  ('site-a', 7, 5), ('site-b', 2, 1);
INSERT INTO pgcatalog_hot_names (cid, name, multi, code, kind) VALUES
  (1, 'portal_type', false, '1', 'keys'), (1, 'Subject', true, '2', 'keys'),
  (2, 'portal_type', false, '1', 'keys');
UPDATE pgcatalog_hot_names SET in_set = false WHERE name = 'Subject';
INSERT INTO pgcatalog_entries (cid, path, depth, idx) VALUES
  (1, '/plone', 1, '{"portal_type": "Plone Site"}'),
  (1, '/plone/doc', 2, '{"portal_type": "Document", "Subject": ["a", "b"]}'),
  (2, '/other/doc', 2, '{"portal_type": "Document"}');
INSERT INTO pgcatalog_meta (rid, meta) SELECT rid,
  json_build_array('L1', path) FROM pgcatalog_entries;
INSERT INTO pgcatalog_meta_layouts (digest, names) VALUES
  ('L1', '["Title"]');
INSERT INTO pgcatalog_text (rid, cid, name, tsv, dl, tf) SELECT rid, cid,
  'SearchableText', to_tsvector('simple', path), 1, '{"doc": 1}'::jsonb
  FROM pgcatalog_entries WHERE path LIKE '%/doc';
INSERT INTO pgcatalog_langtext (rid, cid, name, config, tsv) SELECT rid,
  cid, 'SearchableText', 'pgcatalog_english', to_tsvector('simple', path)
  FROM pgcatalog_entries WHERE path LIKE '%/doc';
INSERT INTO pgcatalog_commits (cid, delta) VALUES (1, 3), (1, 1);
INSERT INTO pgcatalog_indexes (cid, name, pg_index) VALUES
  (1, 'portal_type', 'pgcatalog_x_0123456789ab');
INSERT INTO pgcatalog_lists (digest, value) VALUES
  ('d1', '["x", "y"]');
"""


def main():
    version = migrations.SCHEMA_VERSION
    path = os.path.join(HERE, "v%d.sql" % version)
    if os.path.exists(path):
        print("%s exists (frozen)" % path)
        return
    lines = ["-- The catalog tables of schema version %d (pgcatalog-plone %s)"
             % (version, __version__),
             "-- in an empty database; frozen by freeze.py, do not edit.",
             ""]
    for step in [migrations.CREATE] + list(migrations.STEPS):
        lines.append("-- %d: %s" % (step.version, step.title))
        # each statement ended (a step's texts are single statements)
        lines += [text.rstrip().rstrip(";") + ";\n"
                  for text in step.sql("public")]
    # the oldest version running on it: that of its last breaking step
    compatible = max([migrations.BASELINE] + [
        step.version for step in migrations.STEPS if not step.compatible])
    lines.append("INSERT INTO pgcatalog_schema (version, compatible, release) "
                 "VALUES (%d, %d, '%s');\n" % (version, compatible,
                                                __version__))
    lines.append("-- a few rows in this layout")
    lines.append(ROWS)
    with open(path, "w") as out:
        out.write("\n".join(lines))
    print(path)


if __name__ == "__main__":
    main()
