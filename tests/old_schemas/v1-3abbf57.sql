-- The catalog tables as plone.pgcatalog 3abbf57 (schema version 1) created them
-- in an empty database; frozen by freeze.py, do not edit.

CREATE TABLE IF NOT EXISTS pgcatalog_schema (
        version integer NOT NULL
    );

CREATE TABLE IF NOT EXISTS pgcatalog_catalogs (
        cid serial PRIMARY KEY,
        key text NOT NULL UNIQUE,
        counter bigint NOT NULL DEFAULT 0,
        created timestamptz NOT NULL DEFAULT now()
    );

CREATE SEQUENCE IF NOT EXISTS pgcatalog_rid_seq;

CREATE TABLE IF NOT EXISTS pgcatalog_entries (
        rid bigint PRIMARY KEY DEFAULT nextval('pgcatalog_rid_seq'),
        cid integer NOT NULL REFERENCES pgcatalog_catalogs ON DELETE CASCADE,
        path text COLLATE "C" NOT NULL,
        parent text COLLATE "C" NOT NULL,
        depth integer NOT NULL,
        idx jsonb NOT NULL DEFAULT '{}'::jsonb
    );

CREATE UNIQUE INDEX IF NOT EXISTS pgcatalog_entries_path
        ON pgcatalog_entries (cid, path);

CREATE INDEX IF NOT EXISTS pgcatalog_entries_parent
        ON pgcatalog_entries (cid, parent);

CREATE TABLE IF NOT EXISTS pgcatalog_meta (
        rid bigint PRIMARY KEY REFERENCES pgcatalog_entries ON DELETE CASCADE,
        meta jsonb NOT NULL
    );

CREATE TABLE IF NOT EXISTS pgcatalog_text (
        rid bigint NOT NULL REFERENCES pgcatalog_entries ON DELETE CASCADE,
        name text NOT NULL,
        tsv tsvector NOT NULL,
        PRIMARY KEY (rid, name)
    );

INSERT INTO pgcatalog_schema (version) VALUES (1);

-- a few rows in this layout
INSERT INTO pgcatalog_catalogs (key, counter) VALUES ('site-a', 7), ('site-b', 2);
INSERT INTO pgcatalog_entries (cid, path, parent, depth, idx) VALUES
  (1, '/plone', '', 1, '{"portal_type": "Plone Site"}'),
  (1, '/plone/doc', '/plone', 2, '{"portal_type": "Document", "Subject": ["a", "b"]}'),
  (2, '/other/doc', '/other', 2, '{"portal_type": "Document"}');
INSERT INTO pgcatalog_meta (rid, meta) SELECT rid, json_build_object('Title', path, 'n', json_build_array(1, 2))::jsonb FROM pgcatalog_entries;
INSERT INTO pgcatalog_text (rid, name, tsv) SELECT rid, 'SearchableText', to_tsvector('simple', path) FROM pgcatalog_entries WHERE path LIKE '%/doc';
