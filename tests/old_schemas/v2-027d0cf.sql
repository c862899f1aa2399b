-- The catalog tables as plone.pgcatalog 027d0cf (schema version 2) created them
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
    ) WITH (toast_tuple_target = 8160, fillfactor = 90,
            autovacuum_vacuum_scale_factor = 0.05,
            autovacuum_analyze_scale_factor = 0.02);

CREATE UNIQUE INDEX IF NOT EXISTS pgcatalog_entries_path
        ON pgcatalog_entries (cid, path);

CREATE INDEX IF NOT EXISTS pgcatalog_entries_parent
        ON pgcatalog_entries (cid, parent);

CREATE TABLE IF NOT EXISTS pgcatalog_meta (
        rid bigint PRIMARY KEY REFERENCES pgcatalog_entries ON DELETE CASCADE,
        meta json NOT NULL
    );

CREATE TABLE IF NOT EXISTS pgcatalog_text (
        rid bigint NOT NULL REFERENCES pgcatalog_entries ON DELETE CASCADE,
        cid integer NOT NULL,
        name text NOT NULL,
        tsv tsvector NOT NULL,
        dl integer,
        tf jsonb,
        PRIMARY KEY (rid, name)
    );

-- left by addIndex of an ExtendedPathIndex
CREATE INDEX IF NOT EXISTS pgcatalog_x_734097452ee6 ON pgcatalog_entries (cid, depth);

INSERT INTO pgcatalog_schema (version) VALUES (2);

-- a few rows in this layout
INSERT INTO pgcatalog_catalogs (key, counter) VALUES ('site-a', 7), ('site-b', 2);
INSERT INTO pgcatalog_entries (cid, path, parent, depth, idx) VALUES
  (1, '/plone', '', 1, '{"portal_type": "Plone Site"}'),
  (1, '/plone/doc', '/plone', 2, '{"portal_type": "Document", "Subject": ["a", "b"]}'),
  (2, '/other/doc', '/other', 2, '{"portal_type": "Document"}');
INSERT INTO pgcatalog_meta (rid, meta) SELECT rid, json_build_object('Title', path, 'n', json_build_array(1, 2))::json FROM pgcatalog_entries;
INSERT INTO pgcatalog_text (rid, cid, name, tsv, dl, tf) SELECT rid, cid, 'SearchableText', to_tsvector('simple', path), 1, '{"doc": 1}'::jsonb FROM pgcatalog_entries WHERE path LIKE '%/doc';
