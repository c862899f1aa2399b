-- The catalog tables as plone.pgcatalog 7dcac27 (schema version 20) created them
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

ALTER TABLE pgcatalog_catalogs ADD COLUMN IF NOT EXISTS stamp bigint NOT NULL DEFAULT 0;

ALTER TABLE pgcatalog_meta ALTER COLUMN meta TYPE json USING meta::text::json;

ALTER TABLE pgcatalog_text SET (toast_tuple_target = 8160);

CREATE INDEX IF NOT EXISTS pgcatalog_entries_depth
        ON pgcatalog_entries (cid, depth);

CREATE TABLE IF NOT EXISTS pgcatalog_commits (
        id bigserial PRIMARY KEY,
        cid integer NOT NULL REFERENCES pgcatalog_catalogs ON DELETE CASCADE,
        delta bigint NOT NULL
    );

CREATE INDEX IF NOT EXISTS pgcatalog_commits_cid
        ON pgcatalog_commits (cid);

CREATE TABLE IF NOT EXISTS pgcatalog_indexes (
        cid integer NOT NULL REFERENCES pgcatalog_catalogs ON DELETE CASCADE,
        name text NOT NULL,
        pg_index text NOT NULL,
        PRIMARY KEY (cid, name, pg_index)
    );

DROP INDEX IF EXISTS "pgcatalog_x_734097452ee6";

ALTER TABLE pgcatalog_catalogs ADD COLUMN IF NOT EXISTS stamp bigint NOT NULL DEFAULT 0;

ALTER TABLE pgcatalog_entries SET (toast_tuple_target = 8160, fillfactor = 90, autovacuum_vacuum_scale_factor = 0.05, autovacuum_analyze_scale_factor = 0.02);

ALTER TABLE pgcatalog_text ADD COLUMN IF NOT EXISTS cid integer;

UPDATE pgcatalog_text t SET cid = e.cid FROM pgcatalog_entries e WHERE t.cid IS NULL AND e.rid = t.rid;

ALTER TABLE pgcatalog_text ALTER COLUMN cid SET NOT NULL;

ALTER TABLE pgcatalog_text ADD COLUMN IF NOT EXISTS dl integer;

ALTER TABLE pgcatalog_text ADD COLUMN IF NOT EXISTS tf jsonb;

CREATE TABLE IF NOT EXISTS pgcatalog_lists (
        digest text COLLATE "C" PRIMARY KEY,
        value jsonb NOT NULL
    );

CREATE INDEX IF NOT EXISTS pgcatalog_lists_value
        ON pgcatalog_lists USING gin (value);

CREATE TABLE IF NOT EXISTS pgcatalog_hot_names (
        cid integer NOT NULL REFERENCES pgcatalog_catalogs ON DELETE CASCADE,
        name text NOT NULL,
        multi boolean NOT NULL,
        PRIMARY KEY (cid, name)
    );

CREATE TABLE IF NOT EXISTS pgcatalog_hot (
        rid bigint PRIMARY KEY,
        cid integer NOT NULL,
        keys text[] COLLATE "C" NOT NULL
    ) WITH (fillfactor = 90, autovacuum_vacuum_scale_factor = 0.05,
            autovacuum_analyze_scale_factor = 0.02);

CREATE INDEX IF NOT EXISTS pgcatalog_hot_keys
        ON pgcatalog_hot USING gin (keys);


CREATE OR REPLACE FUNCTION pgcatalog_hot_keys(p_cid integer, p_idx jsonb)
RETURNS text[] LANGUAGE sql STABLE AS $$
    SELECT coalesce(array_agg(DISTINCT n.name || chr(31) || (v.x #>> '{}')),
                    '{}'::text[])
    FROM pgcatalog_hot_names n
    CROSS JOIN LATERAL jsonb_array_elements(CASE
        WHEN NOT n.multi THEN jsonb_build_array(p_idx -> n.name)
        WHEN jsonb_typeof(p_idx -> n.name) = 'array' THEN p_idx -> n.name
        WHEN jsonb_typeof(p_idx -> n.name) = 'string' THEN (
            SELECT l.value FROM pgcatalog_lists l
            WHERE l.digest = (p_idx ->> n.name))
        END) AS v(x)
    WHERE n.cid = p_cid AND jsonb_typeof(v.x) = 'string'
      AND length(v.x #>> '{}') <= 400
$$;


CREATE OR REPLACE FUNCTION pgcatalog_hot_sync() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    found text[];
BEGIN
    IF TG_OP = 'DELETE' THEN
        DELETE FROM pgcatalog_hot WHERE rid = OLD.rid;
        RETURN NULL;
    END IF;
    found := pgcatalog_hot_keys(NEW.cid, NEW.idx);
    IF cardinality(found) = 0 THEN
        IF TG_OP = 'UPDATE' THEN
            DELETE FROM pgcatalog_hot WHERE rid = NEW.rid;
        END IF;
    ELSE
        INSERT INTO pgcatalog_hot (rid, cid, keys)
        VALUES (NEW.rid, NEW.cid, found)
        ON CONFLICT (rid) DO UPDATE SET keys = EXCLUDED.keys
        WHERE pgcatalog_hot.keys IS DISTINCT FROM EXCLUDED.keys;
    END IF;
    RETURN NULL;
END
$$;

DROP TRIGGER IF EXISTS pgcatalog_entries_hot ON pgcatalog_entries;

DROP TRIGGER IF EXISTS pgcatalog_entries_hot_update ON pgcatalog_entries;

CREATE TRIGGER pgcatalog_entries_hot
        AFTER INSERT OR DELETE ON pgcatalog_entries
        FOR EACH ROW EXECUTE FUNCTION pgcatalog_hot_sync();

CREATE TRIGGER pgcatalog_entries_hot_update
        AFTER UPDATE OF idx ON pgcatalog_entries FOR EACH ROW
        WHEN (OLD.idx IS DISTINCT FROM NEW.idx)
        EXECUTE FUNCTION pgcatalog_hot_sync();

CREATE TABLE IF NOT EXISTS pgcatalog_meta_layouts (
        digest text COLLATE "C" PRIMARY KEY,
        names jsonb NOT NULL
    );

DELETE FROM pgcatalog_hot;

DELETE FROM pgcatalog_hot_names;

ALTER TABLE pgcatalog_hot_names ADD COLUMN IF NOT EXISTS code text NOT NULL;

ALTER TABLE pgcatalog_hot_names ADD COLUMN IF NOT EXISTS kind text NOT NULL DEFAULT 'keys';

ALTER TABLE pgcatalog_hot ADD COLUMN IF NOT EXISTS lo bigint;

ALTER TABLE pgcatalog_hot ADD COLUMN IF NOT EXISTS hi bigint;

ALTER TABLE pgcatalog_hot ADD COLUMN IF NOT EXISTS rng jsonb;


CREATE OR REPLACE FUNCTION pgcatalog_hot_keys(p_cid integer, p_idx jsonb)
RETURNS text[] LANGUAGE sql STABLE AS $$
    SELECT coalesce(array_agg(DISTINCT s.k), '{}'::text[]) FROM (
        SELECT n.code || chr(31) || (v.x #>> '{}') AS k
        FROM pgcatalog_hot_names n
        CROSS JOIN LATERAL jsonb_array_elements(CASE
            WHEN NOT n.multi THEN jsonb_build_array(p_idx -> n.name)
            WHEN jsonb_typeof(p_idx -> n.name) = 'array' THEN p_idx -> n.name
            WHEN jsonb_typeof(p_idx -> n.name) = 'string' THEN (
                SELECT l.value FROM pgcatalog_lists l
                WHERE l.digest = (p_idx ->> n.name))
            END) AS v(x)
        WHERE n.cid = p_cid AND n.kind = 'keys'
          AND jsonb_typeof(v.x) = 'string' AND length(v.x #>> '{}') <= 400
        UNION ALL
        SELECT n.code || chr(30) || (p_idx ->> n.name)
        FROM pgcatalog_hot_names n
        WHERE n.cid = p_cid AND n.kind = 'bool'
          AND jsonb_typeof(p_idx -> n.name) = 'boolean'
    ) s
$$;


CREATE OR REPLACE FUNCTION pgcatalog_hot_range(p_cid integer, p_idx jsonb)
RETURNS jsonb LANGUAGE sql STABLE AS $$
    SELECT p_idx -> n.name FROM pgcatalog_hot_names n
    WHERE n.cid = p_cid AND n.kind = 'range' ORDER BY n.name LIMIT 1
$$;


CREATE OR REPLACE FUNCTION pgcatalog_hot_bounds(
    p_cid integer, p_idx jsonb, OUT lo bigint, OUT hi bigint, OUT rng jsonb)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v jsonb;
    a jsonb;
    b jsonb;
BEGIN
    v := pgcatalog_hot_range(p_cid, p_idx);
    IF v IS NULL THEN
        RETURN;
    END IF;
    IF jsonb_typeof(v) = 'array' THEN
        IF jsonb_array_length(v) = 2 THEN
            a := v -> 0;
            b := v -> 1;
            IF (jsonb_typeof(a) = 'null' OR (jsonb_typeof(a) = 'number'
                    AND (a #>> '{}') ~ '^-?[0-9]{1,18}$'))
               AND (jsonb_typeof(b) = 'null' OR (jsonb_typeof(b) = 'number'
                    AND (b #>> '{}') ~ '^-?[0-9]{1,18}$')) THEN
                lo := coalesce((a #>> '{}')::bigint, -9223372036854775808);
                hi := coalesce((b #>> '{}')::bigint, 9223372036854775807);
                RETURN;
            END IF;
        END IF;
    END IF;
    rng := v;
END
$$;


CREATE OR REPLACE FUNCTION pgcatalog_hot_sync() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    found text[];
    b record;
BEGIN
    IF TG_OP = 'DELETE' THEN
        DELETE FROM pgcatalog_hot WHERE rid = OLD.rid;
        RETURN NULL;
    END IF;
    found := pgcatalog_hot_keys(NEW.cid, NEW.idx);
    IF cardinality(found) = 0 THEN
        IF TG_OP = 'UPDATE' THEN
            DELETE FROM pgcatalog_hot WHERE rid = NEW.rid;
        END IF;
    ELSE
        SELECT * INTO b FROM pgcatalog_hot_bounds(NEW.cid, NEW.idx);
        INSERT INTO pgcatalog_hot (rid, cid, keys, lo, hi, rng)
        VALUES (NEW.rid, NEW.cid, found, b.lo, b.hi, b.rng)
        ON CONFLICT (rid) DO UPDATE SET keys = EXCLUDED.keys,
            lo = EXCLUDED.lo, hi = EXCLUDED.hi, rng = EXCLUDED.rng
        WHERE (pgcatalog_hot.keys, pgcatalog_hot.lo, pgcatalog_hot.hi,
               pgcatalog_hot.rng) IS DISTINCT FROM
            (EXCLUDED.keys, EXCLUDED.lo, EXCLUDED.hi, EXCLUDED.rng);
    END IF;
    RETURN NULL;
END
$$;

CREATE TABLE IF NOT EXISTS pgcatalog_hot_sets (
        sid integer GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
        cid integer NOT NULL REFERENCES pgcatalog_catalogs ON DELETE CASCADE,
        digest text COLLATE "C" NOT NULL,
        keys text[] COLLATE "C" NOT NULL,
        UNIQUE (cid, digest)
    );

CREATE INDEX IF NOT EXISTS pgcatalog_hot_sets_keys
        ON pgcatalog_hot_sets USING gin (keys);

ALTER TABLE pgcatalog_hot_names ADD COLUMN IF NOT EXISTS in_set boolean NOT NULL DEFAULT true;

UPDATE pgcatalog_hot_names SET in_set = false WHERE name = 'Subject';

ALTER TABLE pgcatalog_hot ADD COLUMN IF NOT EXISTS sid integer;


CREATE OR REPLACE FUNCTION pgcatalog_hot_set_keys(p_cid integer,
                                                  p_keys text[])
RETURNS text[] LANGUAGE sql STABLE AS $$
    SELECT coalesce(array_agg(k.k ORDER BY k.k), '{}'::text[])
    FROM unnest(p_keys) AS k(k)
    WHERE NOT EXISTS (
        SELECT 1 FROM pgcatalog_hot_names n
        WHERE n.cid = p_cid AND NOT n.in_set
          AND left(k.k, length(n.code) + 1) IN (n.code || chr(31),
                                                n.code || chr(30)))
$$;


CREATE OR REPLACE FUNCTION pgcatalog_hot_set(p_cid integer, p_keys text[])
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    s text[];
    d text;
    r integer;
BEGIN
    s := pgcatalog_hot_set_keys(p_cid, p_keys);
    d := md5(array_to_string(s, chr(29)));
    SELECT sid INTO r FROM pgcatalog_hot_sets WHERE cid = p_cid
        AND digest = d;
    IF r IS NULL THEN
        INSERT INTO pgcatalog_hot_sets (cid, digest, keys)
        VALUES (p_cid, d, s) ON CONFLICT (cid, digest) DO NOTHING
        RETURNING sid INTO r;
        IF r IS NULL THEN
            SELECT sid INTO r FROM pgcatalog_hot_sets WHERE cid = p_cid
                AND digest = d;
        END IF;
    END IF;
    RETURN r;
END
$$;


CREATE OR REPLACE FUNCTION pgcatalog_hot_sync() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    found text[];
    b record;
BEGIN
    IF TG_OP = 'DELETE' THEN
        DELETE FROM pgcatalog_hot WHERE rid = OLD.rid;
        RETURN NULL;
    END IF;
    found := pgcatalog_hot_keys(NEW.cid, NEW.idx);
    IF cardinality(found) = 0 THEN
        IF TG_OP = 'UPDATE' THEN
            DELETE FROM pgcatalog_hot WHERE rid = NEW.rid;
        END IF;
    ELSE
        SELECT * INTO b FROM pgcatalog_hot_bounds(NEW.cid, NEW.idx);
        INSERT INTO pgcatalog_hot (rid, cid, keys, lo, hi, rng, sid)
        VALUES (NEW.rid, NEW.cid, found, b.lo, b.hi, b.rng,
                pgcatalog_hot_set(NEW.cid, found))
        ON CONFLICT (rid) DO UPDATE SET keys = EXCLUDED.keys,
            lo = EXCLUDED.lo, hi = EXCLUDED.hi, rng = EXCLUDED.rng,
            sid = EXCLUDED.sid
        WHERE (pgcatalog_hot.keys, pgcatalog_hot.lo, pgcatalog_hot.hi,
               pgcatalog_hot.rng, pgcatalog_hot.sid) IS DISTINCT FROM
            (EXCLUDED.keys, EXCLUDED.lo, EXCLUDED.hi, EXCLUDED.rng,
             EXCLUDED.sid);
    END IF;
    RETURN NULL;
END
$$;

UPDATE pgcatalog_hot SET sid = pgcatalog_hot_set(cid, keys);

CREATE INDEX IF NOT EXISTS pgcatalog_hot_sid
        ON pgcatalog_hot (sid, lo, hi, rid) INCLUDE (rng);

CREATE TABLE IF NOT EXISTS pgcatalog_hot_counts (
        cid integer NOT NULL,
        sid integer NOT NULL,
        cls smallint NOT NULL,
        n bigint NOT NULL,
        first bigint NOT NULL
    ) WITH (autovacuum_vacuum_scale_factor = 0.05,
            autovacuum_analyze_scale_factor = 0.05);

CREATE INDEX IF NOT EXISTS pgcatalog_hot_counts_sid
        ON pgcatalog_hot_counts (sid, cls) INCLUDE (n, first);


CREATE OR REPLACE FUNCTION pgcatalog_hot_class(p_lo bigint, p_hi bigint,
                                               p_rng jsonb)
RETURNS smallint LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT (CASE WHEN p_rng IS NOT NULL THEN 2 WHEN p_lo IS NULL THEN 0
                 WHEN p_hi = 9223372036854775807 THEN 1 ELSE 2 END)::smallint
$$;


CREATE OR REPLACE FUNCTION pgcatalog_hot_count() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP <> 'INSERT' AND OLD.sid IS NOT NULL THEN
        INSERT INTO pgcatalog_hot_counts (cid, sid, cls, n, first)
        VALUES (OLD.cid, OLD.sid,
                pgcatalog_hot_class(OLD.lo, OLD.hi, OLD.rng), -1, OLD.rid);
    END IF;
    IF TG_OP <> 'DELETE' AND NEW.sid IS NOT NULL THEN
        INSERT INTO pgcatalog_hot_counts (cid, sid, cls, n, first)
        VALUES (NEW.cid, NEW.sid,
                pgcatalog_hot_class(NEW.lo, NEW.hi, NEW.rng), 1, NEW.rid);
    END IF;
    RETURN NULL;
END
$$;

INSERT INTO pgcatalog_hot_counts (cid, sid, cls, n,
        first) SELECT cid, sid, pgcatalog_hot_class(lo, hi, rng), count(*),
        min(rid) FROM pgcatalog_hot WHERE sid IS NOT NULL
        GROUP BY 1, 2, 3;

DROP TRIGGER IF EXISTS pgcatalog_hot_count_insert ON pgcatalog_hot;

DROP TRIGGER IF EXISTS pgcatalog_hot_count_delete ON pgcatalog_hot;

DROP TRIGGER IF EXISTS pgcatalog_hot_count_update ON pgcatalog_hot;

CREATE TRIGGER pgcatalog_hot_count_insert
        AFTER INSERT ON pgcatalog_hot FOR EACH ROW
        EXECUTE FUNCTION pgcatalog_hot_count();

CREATE TRIGGER pgcatalog_hot_count_delete
        AFTER DELETE ON pgcatalog_hot FOR EACH ROW
        EXECUTE FUNCTION pgcatalog_hot_count();

CREATE TRIGGER pgcatalog_hot_count_update
        AFTER UPDATE ON pgcatalog_hot FOR EACH ROW
        WHEN (OLD.sid IS DISTINCT FROM NEW.sid
              OR pgcatalog_hot_class(OLD.lo, OLD.hi, OLD.rng) IS DISTINCT
                 FROM pgcatalog_hot_class(NEW.lo, NEW.hi, NEW.rng))
        EXECUTE FUNCTION pgcatalog_hot_count();

CREATE INDEX IF NOT EXISTS pgcatalog_hot_closed
        ON pgcatalog_hot (sid, lo, hi) INCLUDE (rng)
        WHERE hi <> 9223372036854775807 OR rng IS NOT NULL;

CREATE TABLE IF NOT EXISTS pgcatalog_words (
        word text COLLATE "C" NOT NULL
    );

INSERT INTO pgcatalog_words (word)
        SELECT DISTINCT u.word FROM pgcatalog_text x
        CROSS JOIN LATERAL unnest(tsvector_to_array(x.tsv)) AS u(word)
        WHERE u.word <> chr(3);

CREATE INDEX IF NOT EXISTS pgcatalog_words_word
        ON pgcatalog_words (word);


CREATE OR REPLACE FUNCTION pgcatalog_words_add() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO pgcatalog_words (word)
    SELECT d.word FROM (
        SELECT DISTINCT u.word FROM pgcatalog_text_written n
        CROSS JOIN LATERAL unnest(tsvector_to_array(n.tsv)) AS u(word)
        WHERE u.word <> chr(3)) d
    WHERE NOT EXISTS (SELECT 1 FROM pgcatalog_words w
                      WHERE w.word = d.word);
    RETURN NULL;
END
$$;

DROP TRIGGER IF EXISTS pgcatalog_text_words_insert ON pgcatalog_text;

CREATE TRIGGER pgcatalog_text_words_insert
            AFTER INSERT ON pgcatalog_text
            REFERENCING NEW TABLE AS pgcatalog_text_written
            FOR EACH STATEMENT EXECUTE FUNCTION pgcatalog_words_add();

DROP TRIGGER IF EXISTS pgcatalog_text_words_update ON pgcatalog_text;

CREATE TRIGGER pgcatalog_text_words_update
            AFTER UPDATE ON pgcatalog_text
            REFERENCING NEW TABLE AS pgcatalog_text_written
            FOR EACH STATEMENT EXECUTE FUNCTION pgcatalog_words_add();

DROP INDEX IF EXISTS pgcatalog_entries_path_v12;

CREATE UNIQUE INDEX pgcatalog_entries_path_v12 ON pgcatalog_entries (cid, path) INCLUDE (depth, rid);

DROP INDEX IF EXISTS pgcatalog_entries_path;

ALTER INDEX pgcatalog_entries_path_v12 RENAME TO pgcatalog_entries_path;

ALTER TABLE pgcatalog_hot ADD COLUMN IF NOT EXISTS path text COLLATE "C";


CREATE OR REPLACE FUNCTION pgcatalog_hot_sync() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    found text[];
    b record;
BEGIN
    IF TG_OP = 'DELETE' THEN
        DELETE FROM pgcatalog_hot WHERE rid = OLD.rid;
        RETURN NULL;
    END IF;
    found := pgcatalog_hot_keys(NEW.cid, NEW.idx);
    IF cardinality(found) = 0 THEN
        IF TG_OP = 'UPDATE' THEN
            DELETE FROM pgcatalog_hot WHERE rid = NEW.rid;
        END IF;
    ELSE
        SELECT * INTO b FROM pgcatalog_hot_bounds(NEW.cid, NEW.idx);
        INSERT INTO pgcatalog_hot (rid, cid, keys, lo, hi, rng, sid, path)
        VALUES (NEW.rid, NEW.cid, found, b.lo, b.hi, b.rng,
                pgcatalog_hot_set(NEW.cid, found), NEW.path)
        ON CONFLICT (rid) DO UPDATE SET keys = EXCLUDED.keys,
            lo = EXCLUDED.lo, hi = EXCLUDED.hi, rng = EXCLUDED.rng,
            sid = EXCLUDED.sid, path = EXCLUDED.path
        WHERE (pgcatalog_hot.keys, pgcatalog_hot.lo, pgcatalog_hot.hi,
               pgcatalog_hot.rng, pgcatalog_hot.sid, pgcatalog_hot.path)
            IS DISTINCT FROM
            (EXCLUDED.keys, EXCLUDED.lo, EXCLUDED.hi, EXCLUDED.rng,
             EXCLUDED.sid, EXCLUDED.path);
    END IF;
    RETURN NULL;
END
$$;

DROP TRIGGER IF EXISTS pgcatalog_entries_hot_update ON pgcatalog_entries;

CREATE TRIGGER pgcatalog_entries_hot_update
        AFTER UPDATE OF idx, path ON pgcatalog_entries FOR EACH ROW
        WHEN (OLD.idx IS DISTINCT FROM NEW.idx
              OR OLD.path IS DISTINCT FROM NEW.path)
        EXECUTE FUNCTION pgcatalog_hot_sync();

UPDATE pgcatalog_hot h SET path = e.path FROM pgcatalog_entries e WHERE e.rid = h.rid;

CREATE INDEX IF NOT EXISTS pgcatalog_hot_path
        ON pgcatalog_hot (path) INCLUDE (sid, lo, hi, rid, rng);

ANALYZE pgcatalog_hot;

ALTER TABLE pgcatalog_entries SET (fillfactor = 100);

ALTER TABLE pgcatalog_hot SET (fillfactor = 100);

DROP INDEX IF EXISTS pgcatalog_entries_parent_v16;

CREATE INDEX pgcatalog_entries_parent_v16 ON pgcatalog_entries (cid, ((CASE WHEN strpos(path, '/') > 0 AND length(path) - strpos(reverse(path), '/') > 0 THEN left(path, length(path) - strpos(reverse(path), '/')) ELSE '' END)));

DROP INDEX IF EXISTS pgcatalog_entries_parent;

ALTER INDEX pgcatalog_entries_parent_v16 RENAME TO pgcatalog_entries_parent;

ALTER TABLE pgcatalog_entries DROP COLUMN IF EXISTS parent;

ANALYZE pgcatalog_entries;


CREATE OR REPLACE FUNCTION pgcatalog_json_key(v jsonb) RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
DECLARE
    t text := jsonb_typeof(v);
    n numeric;
    s text;
    i text;
    f text;
    e integer;
    d text;
    r text;
    k text;
    x jsonb;
BEGIN
    IF t = 'null' THEN
        RETURN 'B';
    ELSIF t = 'string' THEN
        RETURN 'C' || replace(v #>> '{}', chr(1), chr(1) || chr(2))
            || chr(1) || chr(1);
    ELSIF t = 'boolean' THEN
        RETURN CASE WHEN v = 'true'::jsonb THEN 'Et' ELSE 'Ef' END;
    ELSIF t = 'number' THEN
        n := v::numeric;
        IF n = 0 THEN
            RETURN 'D2';
        END IF;
        s := abs(n)::text;
        i := split_part(s, '.', 1);
        f := split_part(s, '.', 2);
        IF i <> '0' THEN
            e := length(i) - 1;
            d := rtrim(i || f, '0');
        ELSE
            e := length(ltrim(f, '0')) - length(f) - 1;
            d := rtrim(ltrim(f, '0'), '0');
        END IF;
        IF n > 0 THEN
            RETURN 'D3' || lpad((e + 500000)::text, 7, '0') || d || '!';
        END IF;
        RETURN 'D1' || lpad((500000 - e)::text, 7, '0')
            || translate(d, '0123456789', '9876543210') || '~';
    ELSIF t = 'array' THEN
        r := 'F';
        FOR x IN SELECT a.value FROM jsonb_array_elements(v)
                 WITH ORDINALITY AS a(value, n) ORDER BY a.n LOOP
            r := r || public.pgcatalog_json_key(x);
        END LOOP;
        RETURN r || 'A';
    END IF;
    r := 'G';
    FOR k, x IN SELECT o.key, o.value FROM jsonb_each(v) AS o LOOP
        r := r || 'C' || replace(k, chr(1), chr(1) || chr(2))
            || chr(1) || chr(1) || public.pgcatalog_json_key(x);
    END LOOP;
    RETURN r || 'A';
END
$$;

ALTER TABLE pgcatalog_hot ADD COLUMN IF NOT EXISTS kid integer;


CREATE OR REPLACE FUNCTION pgcatalog_hot_free_keys(p_cid integer,
                                                   p_keys text[])
RETURNS text[] LANGUAGE sql STABLE AS $$
    SELECT coalesce(array_agg(k.k ORDER BY k.k), '{}'::text[])
    FROM unnest(p_keys) AS k(k)
    WHERE EXISTS (
        SELECT 1 FROM pgcatalog_hot_names n
        WHERE n.cid = p_cid AND NOT n.in_set
          AND left(k.k, length(n.code) + 1) IN (n.code || chr(31),
                                                n.code || chr(30)))
$$;


CREATE OR REPLACE FUNCTION pgcatalog_hot_set_id(p_cid integer, s text[])
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    d text;
    r integer;
BEGIN
    d := md5(array_to_string(s, chr(29)));
    SELECT sid INTO r FROM pgcatalog_hot_sets WHERE cid = p_cid
        AND digest = d;
    IF r IS NULL THEN
        INSERT INTO pgcatalog_hot_sets (cid, digest, keys)
        VALUES (p_cid, d, s) ON CONFLICT (cid, digest) DO NOTHING
        RETURNING sid INTO r;
        IF r IS NULL THEN
            SELECT sid INTO r FROM pgcatalog_hot_sets WHERE cid = p_cid
                AND digest = d;
        END IF;
    END IF;
    RETURN r;
END
$$;


CREATE OR REPLACE FUNCTION pgcatalog_hot_free_set(p_cid integer,
                                                  p_keys text[])
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    f text[];
BEGIN
    f := pgcatalog_hot_free_keys(p_cid, p_keys);
    IF cardinality(f) = 0 THEN
        RETURN NULL;
    END IF;
    RETURN pgcatalog_hot_set_id(p_cid, f);
END
$$;


CREATE OR REPLACE FUNCTION pgcatalog_hot_sync() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    found text[];
    b record;
BEGIN
    IF TG_OP = 'DELETE' THEN
        DELETE FROM pgcatalog_hot WHERE rid = OLD.rid;
        RETURN NULL;
    END IF;
    found := pgcatalog_hot_keys(NEW.cid, NEW.idx);
    IF cardinality(found) = 0 THEN
        IF TG_OP = 'UPDATE' THEN
            DELETE FROM pgcatalog_hot WHERE rid = NEW.rid;
        END IF;
    ELSE
        SELECT * INTO b FROM pgcatalog_hot_bounds(NEW.cid, NEW.idx);
        INSERT INTO pgcatalog_hot (rid, cid, keys, lo, hi, rng, sid, path,
                                   kid)
        VALUES (NEW.rid, NEW.cid, found, b.lo, b.hi, b.rng,
                pgcatalog_hot_set(NEW.cid, found), NEW.path,
                pgcatalog_hot_free_set(NEW.cid, found))
        ON CONFLICT (rid) DO UPDATE SET keys = EXCLUDED.keys,
            lo = EXCLUDED.lo, hi = EXCLUDED.hi, rng = EXCLUDED.rng,
            sid = EXCLUDED.sid, path = EXCLUDED.path, kid = EXCLUDED.kid
        WHERE (pgcatalog_hot.keys, pgcatalog_hot.lo, pgcatalog_hot.hi,
               pgcatalog_hot.rng, pgcatalog_hot.sid, pgcatalog_hot.path,
               pgcatalog_hot.kid)
            IS DISTINCT FROM
            (EXCLUDED.keys, EXCLUDED.lo, EXCLUDED.hi, EXCLUDED.rng,
             EXCLUDED.sid, EXCLUDED.path, EXCLUDED.kid);
    END IF;
    RETURN NULL;
END
$$;

UPDATE pgcatalog_hot SET kid = pgcatalog_hot_free_set(cid, keys) WHERE kid IS DISTINCT FROM pgcatalog_hot_free_set(cid, keys);

CREATE INDEX IF NOT EXISTS pgcatalog_hot_kid
        ON pgcatalog_hot (kid, rid) WHERE kid IS NOT NULL;

ANALYZE pgcatalog_hot;

CREATE TABLE IF NOT EXISTS pgcatalog_hot_free_sets (
        kid integer GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
        cid integer NOT NULL REFERENCES pgcatalog_catalogs ON DELETE CASCADE,
        digest text COLLATE "C" NOT NULL,
        keys text[] COLLATE "C" NOT NULL,
        UNIQUE (cid, digest)
    );

INSERT INTO pgcatalog_hot_free_sets (kid, cid, digest,
        keys) SELECT s.sid, s.cid, s.digest, s.keys FROM pgcatalog_hot_sets s
        WHERE s.sid IN (SELECT h.kid FROM pgcatalog_hot h WHERE h.kid IS NOT
        NULL) ORDER BY s.sid ON CONFLICT DO NOTHING;

DELETE FROM pgcatalog_hot_sets s USING
        pgcatalog_hot_free_sets f WHERE f.kid = s.sid;

CREATE INDEX IF NOT EXISTS pgcatalog_hot_free_sets_keys
        ON pgcatalog_hot_free_sets USING gin (keys);


CREATE OR REPLACE FUNCTION pgcatalog_hot_free_set_id(p_cid integer,
                                                     s text[])
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    d text;
    r integer;
BEGIN
    d := md5(array_to_string(s, chr(29)));
    SELECT kid INTO r FROM pgcatalog_hot_free_sets WHERE cid = p_cid
        AND digest = d;
    IF r IS NULL THEN
        INSERT INTO pgcatalog_hot_free_sets (cid, digest, keys)
        VALUES (p_cid, d, s) ON CONFLICT (cid, digest) DO NOTHING
        RETURNING kid INTO r;
        IF r IS NULL THEN
            SELECT kid INTO r FROM pgcatalog_hot_free_sets WHERE cid = p_cid
                AND digest = d;
        END IF;
    END IF;
    RETURN r;
END
$$;


CREATE OR REPLACE FUNCTION pgcatalog_hot_free_set(p_cid integer,
                                                  p_keys text[])
RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    f text[];
BEGIN
    f := pgcatalog_hot_free_keys(p_cid, p_keys);
    IF cardinality(f) = 0 THEN
        RETURN NULL;
    END IF;
    RETURN pgcatalog_hot_free_set_id(p_cid, f);
END
$$;

ANALYZE pgcatalog_hot_sets;

ANALYZE pgcatalog_hot_free_sets;


CREATE OR REPLACE FUNCTION pgcatalog_json_key(v jsonb) RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
DECLARE
    t text := jsonb_typeof(v);
    n numeric;
    s text;
    i text;
    f text;
    e integer;
    d text;
    r text;
    k text;
    x jsonb;
BEGIN
    IF t = 'null' THEN
        RETURN 'B';
    ELSIF t = 'string' THEN
        RETURN 'C' || replace(v #>> '{}', chr(1), chr(1) || chr(2))
            || chr(1) || chr(1);
    ELSIF t = 'boolean' THEN
        RETURN CASE WHEN v = 'true'::jsonb THEN 'Et' ELSE 'Ef' END;
    ELSIF t = 'number' THEN
        n := v::numeric;
        IF n = 0 THEN
            RETURN 'D2';
        END IF;
        s := abs(n)::text;
        i := split_part(s, '.', 1);
        f := split_part(s, '.', 2);
        IF i <> '0' THEN
            e := length(i) - 1;
            d := rtrim(i || f, '0');
        ELSE
            e := length(ltrim(f, '0')) - length(f) - 1;
            d := rtrim(ltrim(f, '0'), '0');
        END IF;
        IF n > 0 THEN
            RETURN 'D3' || lpad((e + 500000)::text, 7, '0') || d || '!';
        END IF;
        RETURN 'D1' || lpad((500000 - e)::text, 7, '0')
            || translate(d, '0123456789', '9876543210') || '~';
    ELSIF t = 'array' THEN
        r := 'F';
        FOR x IN SELECT a.value FROM jsonb_array_elements(v)
                 WITH ORDINALITY AS a(value, n) ORDER BY a.n LOOP
            r := r || public.pgcatalog_json_key(x);
            EXIT WHEN length(r) > 1000;
        END LOOP;
        RETURN r || 'A';
    END IF;
    r := 'G';
    FOR k, x IN SELECT o.key, o.value FROM jsonb_each(v) AS o LOOP
        r := r || 'C' || replace(k, chr(1), chr(1) || chr(2))
            || chr(1) || chr(1) || public.pgcatalog_json_key(x);
        EXIT WHEN length(r) > 1000;
    END LOOP;
    RETURN r || 'A';
END
$$;

INSERT INTO pgcatalog_schema (version) VALUES (20);

-- a few rows in this layout
INSERT INTO pgcatalog_catalogs (key, counter, stamp) VALUES ('site-a', 7, 5), ('site-b', 2, 1);
INSERT INTO pgcatalog_hot_names (cid, name, multi, code, kind) VALUES (1, 'portal_type', false, '1', 'keys'), (1, 'Subject', true, '2', 'keys'), (2, 'portal_type', false, '1', 'keys');
INSERT INTO pgcatalog_entries (cid, path, depth, idx) VALUES
  (1, '/plone', 1, '{"portal_type": "Plone Site"}'),
  (1, '/plone/doc', 2, '{"portal_type": "Document", "Subject": ["a", "b"]}'),
  (2, '/other/doc', 2, '{"portal_type": "Document"}');
INSERT INTO pgcatalog_meta (rid, meta) SELECT rid, json_build_object('Title', path, 'n', json_build_array(1, 2))::json FROM pgcatalog_entries;
INSERT INTO pgcatalog_text (rid, cid, name, tsv, dl, tf) SELECT rid, cid, 'SearchableText', to_tsvector('simple', path), 1, '{"doc": 1}'::jsonb FROM pgcatalog_entries WHERE path LIKE '%/doc';
INSERT INTO pgcatalog_commits (cid, delta) VALUES (1, 3), (1, 1);
INSERT INTO pgcatalog_indexes (cid, name, pg_index) VALUES (1, 'portal_type', 'pgcatalog_x_0123456789ab');
