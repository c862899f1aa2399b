-- The catalog tables of schema version 9 (pgcatalog-plone 1.0.0a1)
-- in an empty database; frozen by freeze.py, do not edit.

-- 1: create the catalog tables (baseline)
-- plone.pgcatalog: the catalog tables, schema version 1 (the baseline).
--
-- Run by `pgcatalog-migrate --apply` (or by a process allowed to create
-- the schema, `schema-migration`, docs/upgrade.md) on a database without
-- the catalog tables, in one transaction, in the connection's current
-- schema.  The function an index expression calls (pgcatalog_json_key)
-- names itself by that schema's name, filled in when the file runs: an
-- index build runs with only pg_catalog on the search path.
--
-- Frozen once released: a later schema version is a step of its own in
-- this package (see __init__.py), never an edit of this file.
--
-- Every row is scoped by its catalog (`cid`): several Plone sites may share
-- one database.  Per-index PostgreSQL indexes (pgcatalog_x_*) are not here:
-- the index kinds describe them and the catalog builds them as indexes are
-- added (plone.pgcatalog.ddl, registered in pgcatalog_indexes).


-- == bookkeeping ==========================================================

-- One row: the schema version, and the oldest version whose processes can
-- still work on this database (an additive step leaves it; a breaking one
-- raises it: docs/upgrade.md, rolling deploys).
CREATE TABLE pgcatalog_schema (
    version integer NOT NULL,
    compatible integer NOT NULL,
    release text NOT NULL,
    updated timestamptz NOT NULL DEFAULT now()
);

-- One row per catalog (a Plone site's portal_catalog), keyed by the random
-- key its tool got at creation; its change counter and stamp (the commit
-- log below folded in).
CREATE TABLE pgcatalog_catalogs (
    cid serial PRIMARY KEY,
    key text NOT NULL UNIQUE,
    counter bigint NOT NULL DEFAULT 0,
    stamp bigint NOT NULL DEFAULT 0,
    created timestamptz NOT NULL DEFAULT now()
);

-- One row per committed writing transaction of a catalog (its change
-- count): insert-only, so concurrent writers never conflict on a counter
-- row; folded into pgcatalog_catalogs from time to time.
CREATE TABLE pgcatalog_commits (
    id bigserial PRIMARY KEY,
    cid integer NOT NULL REFERENCES pgcatalog_catalogs ON DELETE CASCADE,
    delta bigint NOT NULL
);
CREATE INDEX pgcatalog_commits_cid ON pgcatalog_commits (cid);

-- Which PostgreSQL indexes each catalog's index uses (delIndex drops what
-- addIndex built; a shared one when its last user goes).
CREATE TABLE pgcatalog_indexes (
    cid integer NOT NULL REFERENCES pgcatalog_catalogs ON DELETE CASCADE,
    name text NOT NULL,
    pg_index text NOT NULL,
    PRIMARY KEY (cid, name, pg_index)
);


-- == entries ==============================================================

CREATE SEQUENCE pgcatalog_rid_seq;

-- An entry: its physical path (COLLATE "C": ranges and order by code
-- point, as ZCatalog compares), its depth, and every index value in one
-- JSONB document.  Its parent's path is computed from the path (the
-- B-tree below).
CREATE TABLE pgcatalog_entries (
    rid bigint PRIMARY KEY DEFAULT nextval('pgcatalog_rid_seq'),
    cid integer NOT NULL REFERENCES pgcatalog_catalogs ON DELETE CASCADE,
    path text COLLATE "C" NOT NULL,
    depth integer NOT NULL,
    idx jsonb NOT NULL DEFAULT '{}'::jsonb
) WITH (toast_tuple_target = 8160, fillfactor = 100,
        autovacuum_vacuum_scale_factor = 0.05,
        autovacuum_analyze_scale_factor = 0.02);
CREATE UNIQUE INDEX pgcatalog_entries_path
    ON pgcatalog_entries (cid, path) INCLUDE (depth, rid);
CREATE INDEX pgcatalog_entries_depth ON pgcatalog_entries (cid, depth);
-- the parent's path: everything before the last "/", or '' when that is
-- the first character or there is none (plone.pgcatalog.schema.parent_sql)
CREATE INDEX pgcatalog_entries_parent ON pgcatalog_entries (cid, (
    (CASE WHEN strpos(path, '/') > 0
               AND length(path) - strpos(reverse(path), '/') > 0
          THEN left(path, length(path) - strpos(reverse(path), '/'))
          ELSE '' END)));

-- The brains' metadata (typed codec), read lazily by rid batches: each
-- record an array of values naming its layout (the column names, stored
-- once per layout).  json, not jsonb: sent back whole, never queried.
CREATE TABLE pgcatalog_meta (
    rid bigint PRIMARY KEY REFERENCES pgcatalog_entries ON DELETE CASCADE,
    meta json NOT NULL
);
CREATE TABLE pgcatalog_meta_layouts (
    digest text COLLATE "C" PRIMARY KEY,
    names jsonb NOT NULL
);

-- Long keyword lists stored once, by digest (an entry's idx holds the
-- digest), shared by the catalogs, never updated.
CREATE TABLE pgcatalog_lists (
    digest text COLLATE "C" PRIMARY KEY,
    value jsonb NOT NULL
);
CREATE INDEX pgcatalog_lists_value ON pgcatalog_lists USING gin (value);


-- == full text ============================================================

-- One tsvector row per (entry, text index); dl / tf (word count, term
-- frequencies) feed the Okapi score; rows up to 8 KB stay uncompressed.
CREATE TABLE pgcatalog_text (
    rid bigint NOT NULL REFERENCES pgcatalog_entries ON DELETE CASCADE,
    cid integer NOT NULL,
    name text NOT NULL,
    tsv tsvector NOT NULL,
    dl integer,
    tf jsonb,
    PRIMARY KEY (rid, name)
) WITH (toast_tuple_target = 8160);

-- The lexicon: every word of the text rows (globs are expanded through it).
CREATE TABLE pgcatalog_words (
    word text COLLATE "C" NOT NULL
);
CREATE INDEX pgcatalog_words_word ON pgcatalog_words (word);


-- == hot rows =============================================================

-- The hot keys: which indexes' values (portal_type, review_state,
-- allowedRolesAndUsers, Subject by default) each catalog keeps in narrow
-- rows, under which short code, of which kind (keys, bool, range, sort),
-- and whether in the key sets.
CREATE TABLE pgcatalog_hot_names (
    cid integer NOT NULL REFERENCES pgcatalog_catalogs ON DELETE CASCADE,
    name text NOT NULL,
    multi boolean NOT NULL,
    code text NOT NULL,
    kind text NOT NULL DEFAULT 'keys',
    in_set boolean NOT NULL DEFAULT true,
    PRIMARY KEY (cid, name)
);

-- One narrow row per entry with hot keys (kept by a trigger on the
-- entries): its keys as code<US>value texts, its effective range (lo, hi,
-- or rng when not two whole numbers), its key set, its free keys' set, a
-- copy of its path and its sort date.
CREATE TABLE pgcatalog_hot (
    rid bigint PRIMARY KEY,
    cid integer NOT NULL,
    keys text[] COLLATE "C" NOT NULL,
    lo bigint,
    hi bigint,
    rng jsonb,
    sid integer,
    path text COLLATE "C",
    kid integer,
    srt bigint
) WITH (fillfactor = 100, autovacuum_vacuum_scale_factor = 0.05,
        autovacuum_analyze_scale_factor = 0.02);
CREATE INDEX pgcatalog_hot_keys ON pgcatalog_hot USING gin (keys);
CREATE INDEX pgcatalog_hot_sid
    ON pgcatalog_hot (sid, lo, hi, rid) INCLUDE (rng);
CREATE INDEX pgcatalog_hot_closed ON pgcatalog_hot (sid, lo, hi) INCLUDE (rng)
    WHERE hi <> 9223372036854775807 OR rng IS NOT NULL;
CREATE INDEX pgcatalog_hot_path
    ON pgcatalog_hot (path) INCLUDE (sid, lo, hi, rid, rng);
CREATE INDEX pgcatalog_hot_kid ON pgcatalog_hot (kid, rid)
    WHERE kid IS NOT NULL;
CREATE INDEX pgcatalog_hot_srt ON pgcatalog_hot (cid, srt, rid) INCLUDE (sid)
    WHERE srt IS NOT NULL;

-- The hot rows' key sets (their keys but the free ones), which each hot
-- row names ...
CREATE TABLE pgcatalog_hot_sets (
    sid integer GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    cid integer NOT NULL REFERENCES pgcatalog_catalogs ON DELETE CASCADE,
    digest text COLLATE "C" NOT NULL,
    keys text[] COLLATE "C" NOT NULL,
    UNIQUE (cid, digest)
);
CREATE INDEX pgcatalog_hot_sets_keys ON pgcatalog_hot_sets USING gin (keys);

-- ... the number of hot rows of each set and range class, as insert-only
-- +1 / -1 rows folded from time to time ...
CREATE TABLE pgcatalog_hot_counts (
    cid integer NOT NULL,
    sid integer NOT NULL,
    cls smallint NOT NULL,
    n bigint NOT NULL,
    first bigint NOT NULL
) WITH (autovacuum_vacuum_scale_factor = 0.05,
        autovacuum_analyze_scale_factor = 0.05);
CREATE INDEX pgcatalog_hot_counts_sid
    ON pgcatalog_hot_counts (sid, cls) INCLUDE (n, first);

-- ... and the keys outside the key sets (Subject's) as sets of their own,
-- which the hot row names (kid): a search on tags alone reads the
-- (kid, rid) B-tree above.
CREATE TABLE pgcatalog_hot_free_sets (
    kid integer GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    cid integer NOT NULL REFERENCES pgcatalog_catalogs ON DELETE CASCADE,
    digest text COLLATE "C" NOT NULL,
    keys text[] COLLATE "C" NOT NULL,
    UNIQUE (cid, digest)
);
CREATE INDEX pgcatalog_hot_free_sets_keys
    ON pgcatalog_hot_free_sets USING gin (keys);


-- == functions ============================================================

-- A JSON value's sort key: text whose byte order ("C") is the value's
-- order, equal for equal values (the value B-trees' first column,
-- plone.pgcatalog.schema.value_kind_sql); the other functions compute the
-- hot rows from an entry's values.

CREATE FUNCTION pgcatalog_hot_bounds(p_cid integer, p_idx jsonb, OUT lo bigint, OUT hi bigint, OUT rng jsonb) RETURNS record
    LANGUAGE plpgsql STABLE
    AS $_$
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
$_$;

CREATE FUNCTION pgcatalog_hot_class(p_lo bigint, p_hi bigint, p_rng jsonb) RETURNS smallint
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
    SELECT (CASE WHEN p_rng IS NOT NULL THEN 2 WHEN p_lo IS NULL THEN 0
                 WHEN p_hi = 9223372036854775807 THEN 1 ELSE 2 END)::smallint
$$;

CREATE FUNCTION pgcatalog_hot_count() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
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

CREATE FUNCTION pgcatalog_hot_free_keys(p_cid integer, p_keys text[]) RETURNS text[]
    LANGUAGE sql STABLE
    AS $$
    SELECT coalesce(array_agg(k.k ORDER BY k.k), '{}'::text[])
    FROM unnest(p_keys) AS k(k)
    WHERE EXISTS (
        SELECT 1 FROM pgcatalog_hot_names n
        WHERE n.cid = p_cid AND NOT n.in_set
          AND left(k.k, length(n.code) + 1) IN (n.code || chr(31),
                                                n.code || chr(30)))
$$;

CREATE FUNCTION pgcatalog_hot_free_set(p_cid integer, p_keys text[]) RETURNS integer
    LANGUAGE plpgsql
    AS $$
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

CREATE FUNCTION pgcatalog_hot_free_set_id(p_cid integer, s text[]) RETURNS integer
    LANGUAGE plpgsql
    AS $$
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

CREATE FUNCTION pgcatalog_hot_keys(p_cid integer, p_idx jsonb) RETURNS text[]
    LANGUAGE sql STABLE
    AS $$
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

CREATE FUNCTION pgcatalog_hot_range(p_cid integer, p_idx jsonb) RETURNS jsonb
    LANGUAGE sql STABLE
    AS $$
    SELECT p_idx -> n.name FROM pgcatalog_hot_names n
    WHERE n.cid = p_cid AND n.kind = 'range' ORDER BY n.name LIMIT 1
$$;

CREATE FUNCTION pgcatalog_hot_set(p_cid integer, p_keys text[]) RETURNS integer
    LANGUAGE plpgsql
    AS $$
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

CREATE FUNCTION pgcatalog_hot_set_keys(p_cid integer, p_keys text[]) RETURNS text[]
    LANGUAGE sql STABLE
    AS $$
    SELECT coalesce(array_agg(k.k ORDER BY k.k), '{}'::text[])
    FROM unnest(p_keys) AS k(k)
    WHERE NOT EXISTS (
        SELECT 1 FROM pgcatalog_hot_names n
        WHERE n.cid = p_cid AND NOT n.in_set
          AND left(k.k, length(n.code) + 1) IN (n.code || chr(31),
                                                n.code || chr(30)))
$$;

CREATE FUNCTION pgcatalog_hot_sort(p_cid integer, p_idx jsonb) RETURNS bigint
    LANGUAGE sql STABLE
    AS $$
    SELECT CASE WHEN jsonb_typeof(v.x) = 'number'
                 AND (v.x #>> '{}')::numeric
                     BETWEEN -9223372036854775808 AND 9223372036854775807
           THEN v.x::bigint END
    FROM (SELECT p_idx -> n.name AS x FROM pgcatalog_hot_names n
          WHERE n.cid = p_cid AND n.kind = 'sort'
          ORDER BY n.name LIMIT 1) v
$$;

CREATE FUNCTION pgcatalog_hot_sync() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
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
                                   kid, srt)
        VALUES (NEW.rid, NEW.cid, found, b.lo, b.hi, b.rng,
                pgcatalog_hot_set(NEW.cid, found), NEW.path,
                pgcatalog_hot_free_set(NEW.cid, found),
                pgcatalog_hot_sort(NEW.cid, NEW.idx))
        ON CONFLICT (rid) DO UPDATE SET keys = EXCLUDED.keys,
            lo = EXCLUDED.lo, hi = EXCLUDED.hi, rng = EXCLUDED.rng,
            sid = EXCLUDED.sid, path = EXCLUDED.path, kid = EXCLUDED.kid,
            srt = EXCLUDED.srt
        WHERE (pgcatalog_hot.keys, pgcatalog_hot.lo, pgcatalog_hot.hi,
               pgcatalog_hot.rng, pgcatalog_hot.sid, pgcatalog_hot.path,
               pgcatalog_hot.kid, pgcatalog_hot.srt)
            IS DISTINCT FROM
            (EXCLUDED.keys, EXCLUDED.lo, EXCLUDED.hi, EXCLUDED.rng,
             EXCLUDED.sid, EXCLUDED.path, EXCLUDED.kid, EXCLUDED.srt);
    END IF;
    RETURN NULL;
END
$$;

CREATE FUNCTION pgcatalog_json_key(v jsonb) RETURNS text
    LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
    AS $$
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

CREATE FUNCTION pgcatalog_words_add() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
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


-- == triggers =============================================================

CREATE TRIGGER pgcatalog_entries_hot
    AFTER INSERT OR DELETE ON pgcatalog_entries
    FOR EACH ROW EXECUTE FUNCTION pgcatalog_hot_sync();
CREATE TRIGGER pgcatalog_entries_hot_update
    AFTER UPDATE OF idx, path ON pgcatalog_entries FOR EACH ROW
    WHEN (OLD.idx IS DISTINCT FROM NEW.idx
          OR OLD.path IS DISTINCT FROM NEW.path)
    EXECUTE FUNCTION pgcatalog_hot_sync();

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

CREATE TRIGGER pgcatalog_text_words_insert
    AFTER INSERT ON pgcatalog_text
    REFERENCING NEW TABLE AS pgcatalog_text_written
    FOR EACH STATEMENT EXECUTE FUNCTION pgcatalog_words_add();
CREATE TRIGGER pgcatalog_text_words_update
    AFTER UPDATE ON pgcatalog_text
    REFERENCING NEW TABLE AS pgcatalog_text_written
    FOR EACH STATEMENT EXECUTE FUNCTION pgcatalog_words_add();

-- 2: language-aware text: the table pgcatalog_langtext and the text search configurations pgcatalog_<language> (accents folded)
CREATE TABLE public.pgcatalog_langtext (
    rid bigint NOT NULL REFERENCES public.pgcatalog_entries ON DELETE CASCADE,
    cid integer NOT NULL,
    name text NOT NULL,
    config text NOT NULL,
    tsv tsvector NOT NULL,
    PRIMARY KEY (rid, name)
) WITH (toast_tuple_target = 8160);

COMMENT ON TABLE public.pgcatalog_langtext IS
'plone.pgcatalog: per (entry, text index searched by language) the text
search configuration (config) its words were parsed with and the weighted
tsvector (title A, description B, body C)';

DO $pgcatalog$
DECLARE
    home text;
    folding text;
    made record;
    stem text;
BEGIN
    -- the catalog tables' schema, as an identifier
    SELECT t.typnamespace::regnamespace::text INTO home FROM pg_type t
        WHERE t.oid = pg_typeof(NULL::public.pgcatalog_langtext);
    BEGIN
        CREATE EXTENSION IF NOT EXISTS unaccent;
    EXCEPTION WHEN OTHERS THEN
        NULL;
    END;
    SELECT quote_ident(n.nspname) || '.' || quote_ident(d.dictname)
        INTO folding FROM pg_ts_dict d
        JOIN pg_namespace n ON n.oid = d.dictnamespace
        WHERE d.dictname = 'unaccent' ORDER BY n.nspname = 'pg_catalog'
        LIMIT 1;
    FOR made IN SELECT c.cfgname FROM pg_ts_config c
            WHERE c.cfgnamespace = 'pg_catalog'::regnamespace LOOP
        EXECUTE format('CREATE TEXT SEARCH CONFIGURATION %s.%I '
                       '(COPY = pg_catalog.%I)', home,
                       'pgcatalog_' || made.cfgname, made.cfgname);
        IF folding IS NOT NULL THEN
            SELECT d.dictname INTO stem FROM pg_ts_config_map m
                JOIN pg_ts_dict d ON d.oid = m.mapdict
                WHERE m.mapcfg = ('pg_catalog.' || quote_ident(made.cfgname))
                    ::regconfig
                AND m.maptokentype = (SELECT t.tokid FROM ts_token_type(
                    'default') t WHERE t.alias = 'word')
                ORDER BY m.mapseqno LIMIT 1;
            EXECUTE format('ALTER TEXT SEARCH CONFIGURATION %s.%I ALTER '
                           'MAPPING FOR hword, hword_part, word WITH %s, '
                           'pg_catalog.%I', home,
                           'pgcatalog_' || made.cfgname, folding,
                           coalesce(stem, 'simple'));
        END IF;
    END LOOP;
END
$pgcatalog$;

-- 3: hot rows mark the hot values that have no key (for facet counts read from the key sets)

CREATE OR REPLACE FUNCTION public.pgcatalog_hot_keys(p_cid integer,
                                                     p_idx jsonb)
RETURNS text[]
    LANGUAGE sql STABLE
    AS $$
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
        UNION ALL
        -- a value without key: the index's code and chr(28)
        SELECT n.code || chr(28)
        FROM pgcatalog_hot_names n
        CROSS JOIN LATERAL (SELECT CASE
            WHEN n.kind = 'bool' THEN NULL
            WHEN NOT n.multi THEN jsonb_build_array(p_idx -> n.name)
            WHEN jsonb_typeof(p_idx -> n.name) = 'array' THEN p_idx -> n.name
            WHEN jsonb_typeof(p_idx -> n.name) = 'string' THEN (
                SELECT l.value FROM pgcatalog_lists l
                WHERE l.digest = (p_idx ->> n.name))
            END AS a) AS x
        WHERE n.cid = p_cid AND n.kind IN ('keys', 'bool')
          AND p_idx ? n.name
          AND CASE WHEN n.kind = 'bool'
                   THEN jsonb_typeof(p_idx -> n.name) <> 'boolean'
                   WHEN x.a IS NULL OR jsonb_typeof(x.a) <> 'array' THEN true
                   ELSE EXISTS (
                       SELECT 1 FROM jsonb_array_elements(x.a) AS v(x)
                       WHERE jsonb_typeof(v.x) <> 'string'
                          OR length(v.x #>> '{}') > 400) END
    ) s
$$;


DO $pgcatalog$
BEGIN
    -- writers wait: a row written meanwhile by the function as it was
    -- would lack its marks
    LOCK TABLE public.pgcatalog_entries IN SHARE MODE;
    WITH k AS (
        SELECT e.rid, e.cid, e.path, e.keys, b.lo, b.hi, b.rng,
               public.pgcatalog_hot_sort(e.cid, e.idx) AS srt
        FROM (SELECT e.rid, e.cid, e.path, e.idx,
                     public.pgcatalog_hot_keys(e.cid, e.idx) AS keys,
                     h.keys AS was
              FROM public.pgcatalog_entries e
              LEFT JOIN public.pgcatalog_hot h ON h.rid = e.rid) e,
             LATERAL public.pgcatalog_hot_bounds(e.cid, e.idx) b
        WHERE e.keys IS DISTINCT FROM coalesce(e.was, '{}'::text[])
    ), gone AS (
        DELETE FROM public.pgcatalog_hot h USING k
        WHERE h.rid = k.rid AND cardinality(k.keys) = 0
    )
    INSERT INTO public.pgcatalog_hot AS h (rid, cid, keys, lo, hi, rng,
                                           sid, path, kid, srt)
    SELECT k.rid, k.cid, k.keys, k.lo, k.hi, k.rng,
           public.pgcatalog_hot_set(k.cid, k.keys), k.path,
           public.pgcatalog_hot_free_set(k.cid, k.keys), k.srt
    FROM k WHERE cardinality(k.keys) > 0
    ON CONFLICT (rid) DO UPDATE SET keys = EXCLUDED.keys, lo = EXCLUDED.lo,
        hi = EXCLUDED.hi, rng = EXCLUDED.rng, sid = EXCLUDED.sid,
        path = EXCLUDED.path, kid = EXCLUDED.kid, srt = EXCLUDED.srt;
END
$pgcatalog$;

-- 4: free keys (Subject's) counted per key set: the table pgcatalog_hot_key_counts, kept by the hot rows' trigger

CREATE TABLE public.pgcatalog_hot_key_counts (
    cid integer NOT NULL,
    sid integer NOT NULL,
    cls smallint NOT NULL,
    key text COLLATE "C" NOT NULL,
    n bigint NOT NULL
) WITH (autovacuum_vacuum_scale_factor = 0.05,
        autovacuum_analyze_scale_factor = 0.05);


CREATE INDEX pgcatalog_hot_key_counts_sid
    ON public.pgcatalog_hot_key_counts (sid, cls) INCLUDE (key, n);


COMMENT ON TABLE public.pgcatalog_hot_key_counts IS
'plone.pgcatalog: per key set (sid), range class (cls) and free key (a key
of the indexes left out of the key sets), +1 / -1 rows whose sum is the
number of hot rows of that set and class holding that key; written by the
trigger on pgcatalog_hot, folded from time to time';


CREATE OR REPLACE FUNCTION public.pgcatalog_hot_count() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF TG_OP <> 'INSERT' AND OLD.sid IS NOT NULL THEN
        INSERT INTO pgcatalog_hot_counts (cid, sid, cls, n, first)
        VALUES (OLD.cid, OLD.sid,
                pgcatalog_hot_class(OLD.lo, OLD.hi, OLD.rng), -1, OLD.rid);
        IF OLD.kid IS NOT NULL THEN
            INSERT INTO pgcatalog_hot_key_counts (cid, sid, cls, key, n)
            SELECT OLD.cid, OLD.sid,
                   pgcatalog_hot_class(OLD.lo, OLD.hi, OLD.rng), k.k, -1
            FROM pgcatalog_hot_free_sets f, unnest(f.keys) AS k(k)
            WHERE f.kid = OLD.kid;
        END IF;
    END IF;
    IF TG_OP <> 'DELETE' AND NEW.sid IS NOT NULL THEN
        INSERT INTO pgcatalog_hot_counts (cid, sid, cls, n, first)
        VALUES (NEW.cid, NEW.sid,
                pgcatalog_hot_class(NEW.lo, NEW.hi, NEW.rng), 1, NEW.rid);
        IF NEW.kid IS NOT NULL THEN
            INSERT INTO pgcatalog_hot_key_counts (cid, sid, cls, key, n)
            SELECT NEW.cid, NEW.sid,
                   pgcatalog_hot_class(NEW.lo, NEW.hi, NEW.rng), k.k, 1
            FROM pgcatalog_hot_free_sets f, unnest(f.keys) AS k(k)
            WHERE f.kid = NEW.kid;
        END IF;
    END IF;
    RETURN NULL;
END
$$;

DROP TRIGGER pgcatalog_hot_count_update ON public.pgcatalog_hot;


CREATE TRIGGER pgcatalog_hot_count_update
    AFTER UPDATE ON public.pgcatalog_hot FOR EACH ROW
    WHEN (OLD.sid IS DISTINCT FROM NEW.sid
          OR OLD.kid IS DISTINCT FROM NEW.kid
          OR public.pgcatalog_hot_class(OLD.lo, OLD.hi, OLD.rng) IS DISTINCT
             FROM public.pgcatalog_hot_class(NEW.lo, NEW.hi, NEW.rng))
    EXECUTE FUNCTION public.pgcatalog_hot_count();


DO $pgcatalog$
BEGIN
    -- writers wait: a hot row written meanwhile by the trigger as it was
    -- would not be counted by key
    LOCK TABLE public.pgcatalog_hot IN SHARE MODE;
    INSERT INTO public.pgcatalog_hot_key_counts (cid, sid, cls, key, n)
    SELECT h.cid, h.sid, public.pgcatalog_hot_class(h.lo, h.hi, h.rng),
           k.k, count(*)
    FROM public.pgcatalog_hot h
    JOIN public.pgcatalog_hot_free_sets f ON f.kid = h.kid,
         unnest(f.keys) AS k(k)
    WHERE h.sid IS NOT NULL
    GROUP BY 1, 2, 3, 4;
END
$pgcatalog$;

-- 5: the text indexes' documents and words kept as totals: the table pgcatalog_text_totals, kept by triggers on the text rows

CREATE TABLE public.pgcatalog_text_totals (
    cid integer NOT NULL,
    name text NOT NULL,
    docs bigint NOT NULL,
    words bigint NOT NULL
) WITH (autovacuum_vacuum_scale_factor = 0.05,
        autovacuum_analyze_scale_factor = 0.05);


CREATE INDEX pgcatalog_text_totals_name
    ON public.pgcatalog_text_totals (cid, name) INCLUDE (docs, words);


COMMENT ON TABLE public.pgcatalog_text_totals IS
'plone.pgcatalog: per catalog (cid) and text index (name), rows of text
rows (docs) and their words (words) added or taken off, whose sums are
Okapi''s collection statistics; written by the triggers on pgcatalog_text,
folded from time to time';


CREATE FUNCTION public.pgcatalog_text_totals_add() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO pgcatalog_text_totals (cid, name, docs, words)
        SELECT n.cid, n.name, count(*), coalesce(sum(coalesce(n.dl, (SELECT (u.positions[1] - 1) * 8191
                             + (u.positions[2] - 8192)
                      FROM unnest(ts_filter(setweight(n.tsv, 'A',
                                                      ARRAY[chr(3)]),
                                            '{a}')) u))), 0)
        FROM pgcatalog_text_new n GROUP BY n.cid, n.name;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO pgcatalog_text_totals (cid, name, docs, words)
        SELECT o.cid, o.name, -count(*), -coalesce(sum(coalesce(o.dl, (SELECT (u.positions[1] - 1) * 8191
                             + (u.positions[2] - 8192)
                      FROM unnest(ts_filter(setweight(o.tsv, 'A',
                                                      ARRAY[chr(3)]),
                                            '{a}')) u))), 0)
        FROM pgcatalog_text_old o GROUP BY o.cid, o.name;
    ELSE
        INSERT INTO pgcatalog_text_totals (cid, name, docs, words)
        SELECT d.cid, d.name, sum(d.docs), sum(d.words) FROM (
            SELECT n.cid, n.name, 1 AS docs, coalesce(n.dl, (SELECT (u.positions[1] - 1) * 8191
                             + (u.positions[2] - 8192)
                      FROM unnest(ts_filter(setweight(n.tsv, 'A',
                                                      ARRAY[chr(3)]),
                                            '{a}')) u)) AS words
            FROM pgcatalog_text_new n
            UNION ALL
            SELECT o.cid, o.name, -1, -coalesce(o.dl, (SELECT (u.positions[1] - 1) * 8191
                             + (u.positions[2] - 8192)
                      FROM unnest(ts_filter(setweight(o.tsv, 'A',
                                                      ARRAY[chr(3)]),
                                            '{a}')) u)) FROM pgcatalog_text_old o) d
        GROUP BY d.cid, d.name
        HAVING sum(d.docs) <> 0 OR sum(d.words) <> 0;
    END IF;
    RETURN NULL;
END
$$;


CREATE TRIGGER pgcatalog_text_totals_insert
    AFTER INSERT ON public.pgcatalog_text
    REFERENCING NEW TABLE AS pgcatalog_text_new
    FOR EACH STATEMENT EXECUTE FUNCTION public.pgcatalog_text_totals_add();


CREATE TRIGGER pgcatalog_text_totals_update
    AFTER UPDATE ON public.pgcatalog_text
    REFERENCING OLD TABLE AS pgcatalog_text_old
                NEW TABLE AS pgcatalog_text_new
    FOR EACH STATEMENT EXECUTE FUNCTION public.pgcatalog_text_totals_add();


CREATE TRIGGER pgcatalog_text_totals_delete
    AFTER DELETE ON public.pgcatalog_text
    REFERENCING OLD TABLE AS pgcatalog_text_old
    FOR EACH STATEMENT EXECUTE FUNCTION public.pgcatalog_text_totals_add();


DO $pgcatalog$
BEGIN
    -- writers wait: a text row written meanwhile, before the triggers,
    -- would not be counted
    LOCK TABLE public.pgcatalog_text IN SHARE MODE;
    INSERT INTO public.pgcatalog_text_totals (cid, name, docs, words)
    SELECT t.cid, t.name, count(*), coalesce(sum(coalesce(t.dl, (SELECT (u.positions[1] - 1) * 8191
                             + (u.positions[2] - 8192)
                      FROM unnest(ts_filter(setweight(t.tsv, 'A',
                                                      ARRAY[chr(3)]),
                                            '{a}')) u))), 0)
    FROM public.pgcatalog_text t GROUP BY t.cid, t.name;
END
$pgcatalog$;

-- 6: the words' document frequencies kept per text index: the table pgcatalog_text_df, kept by the text rows' triggers

CREATE TABLE public.pgcatalog_text_df (
    cid integer NOT NULL,
    name text NOT NULL,
    word text COLLATE "C" NOT NULL,
    n bigint NOT NULL,
    folded boolean NOT NULL DEFAULT false
) WITH (autovacuum_vacuum_scale_factor = 0.05,
        autovacuum_analyze_scale_factor = 0.05);


CREATE INDEX pgcatalog_text_df_word
    ON public.pgcatalog_text_df (cid, name, word) INCLUDE (n);


CREATE INDEX pgcatalog_text_df_unfolded
    ON public.pgcatalog_text_df (cid, name, word) WHERE NOT folded;


COMMENT ON TABLE public.pgcatalog_text_df IS
'plone.pgcatalog: per catalog (cid), text index (name) and word, rows of
documents added or taken off whose sum is the number of text rows holding
the word (its document frequency); written by the triggers on
pgcatalog_text (folded false), folded from time to time into one row per
word (folded true)';


CREATE OR REPLACE FUNCTION public.pgcatalog_text_totals_add() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO pgcatalog_text_totals (cid, name, docs, words)
        SELECT n.cid, n.name, count(*), coalesce(sum(coalesce(n.dl, (SELECT (u.positions[1] - 1) * 8191
                             + (u.positions[2] - 8192)
                      FROM unnest(ts_filter(setweight(n.tsv, 'A',
                                                      ARRAY[chr(3)]),
                                            '{a}')) u))), 0)
        FROM pgcatalog_text_new n GROUP BY n.cid, n.name;
        INSERT INTO pgcatalog_text_df (cid, name, word, n)
        SELECT w.cid, w.name, w.word, count(*) FROM (SELECT n.cid, n.name, u.word, 1 AS d FROM pgcatalog_text_new n
            CROSS JOIN LATERAL unnest(tsvector_to_array(n.tsv)) AS u(word)
            WHERE u.word <> chr(3)) w
        GROUP BY w.cid, w.name, w.word;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO pgcatalog_text_totals (cid, name, docs, words)
        SELECT o.cid, o.name, -count(*), -coalesce(sum(coalesce(o.dl, (SELECT (u.positions[1] - 1) * 8191
                             + (u.positions[2] - 8192)
                      FROM unnest(ts_filter(setweight(o.tsv, 'A',
                                                      ARRAY[chr(3)]),
                                            '{a}')) u))), 0)
        FROM pgcatalog_text_old o GROUP BY o.cid, o.name;
        INSERT INTO pgcatalog_text_df (cid, name, word, n)
        SELECT w.cid, w.name, w.word, -count(*) FROM (SELECT o.cid, o.name, u.word, 1 AS d FROM pgcatalog_text_old o
            CROSS JOIN LATERAL unnest(tsvector_to_array(o.tsv)) AS u(word)
            WHERE u.word <> chr(3)) w
        GROUP BY w.cid, w.name, w.word;
    ELSE
        INSERT INTO pgcatalog_text_totals (cid, name, docs, words)
        SELECT d.cid, d.name, sum(d.docs), sum(d.words) FROM (
            SELECT n.cid, n.name, 1 AS docs, coalesce(n.dl, (SELECT (u.positions[1] - 1) * 8191
                             + (u.positions[2] - 8192)
                      FROM unnest(ts_filter(setweight(n.tsv, 'A',
                                                      ARRAY[chr(3)]),
                                            '{a}')) u)) AS words
            FROM pgcatalog_text_new n
            UNION ALL
            SELECT o.cid, o.name, -1, -coalesce(o.dl, (SELECT (u.positions[1] - 1) * 8191
                             + (u.positions[2] - 8192)
                      FROM unnest(ts_filter(setweight(o.tsv, 'A',
                                                      ARRAY[chr(3)]),
                                            '{a}')) u)) FROM pgcatalog_text_old o) d
        GROUP BY d.cid, d.name
        HAVING sum(d.docs) <> 0 OR sum(d.words) <> 0;
        -- only the words the update adds or takes off
        INSERT INTO pgcatalog_text_df (cid, name, word, n)
        SELECT w.cid, w.name, w.word, sum(w.d) FROM (
            SELECT n.cid, n.name, u.word, 1 AS d FROM pgcatalog_text_new n
            CROSS JOIN LATERAL unnest(tsvector_to_array(n.tsv)) AS u(word)
            WHERE u.word <> chr(3)
            UNION ALL
            SELECT o.cid, o.name, u.word, -1 AS d FROM pgcatalog_text_old o
            CROSS JOIN LATERAL unnest(tsvector_to_array(o.tsv)) AS u(word)
            WHERE u.word <> chr(3)) w
        GROUP BY w.cid, w.name, w.word HAVING sum(w.d) <> 0;
    END IF;
    RETURN NULL;
END
$$;


DO $pgcatalog$
BEGIN
    -- writers wait: a text row written meanwhile, before the new
    -- function, would not be counted
    LOCK TABLE public.pgcatalog_text IN SHARE MODE;
    INSERT INTO public.pgcatalog_text_df (cid, name, word, n, folded)
    SELECT t.cid, t.name, u.word, count(*), true
    FROM public.pgcatalog_text t
    CROSS JOIN LATERAL unnest(tsvector_to_array(t.tsv)) AS u(word)
    WHERE u.word <> chr(3)
    GROUP BY 1, 2, 3;
END
$pgcatalog$;

-- 7: postings of chosen text indexes (Title by default) beside their entries' key sets and ranges: the tables pgcatalog_postings and pgcatalog_postings_names, kept by the text and hot rows' triggers

CREATE TABLE public.pgcatalog_postings_names (
    name text PRIMARY KEY
);


CREATE TABLE public.pgcatalog_postings (
    cid integer NOT NULL,
    name text NOT NULL,
    word text COLLATE "C" NOT NULL,
    rid bigint NOT NULL,
    tf float8,
    dl integer,
    sid integer,
    lo bigint,
    hi bigint,
    rng jsonb
) WITH (autovacuum_vacuum_scale_factor = 0.05,
        autovacuum_analyze_scale_factor = 0.05);


COMMENT ON TABLE public.pgcatalog_postings IS
'plone.pgcatalog: one row per word and text row of the text indexes
pgcatalog_postings_names names: the word''s count in the row (tf), the
row''s word count (dl), and the key set and range of the entry''s hot row
(sid, lo, hi, rng), written by the triggers on pgcatalog_text and
pgcatalog_hot';


COMMENT ON TABLE public.pgcatalog_postings_names IS
'plone.pgcatalog: the text indexes (by name, in every catalog) whose
postings pgcatalog_postings keeps';


CREATE FUNCTION public.pgcatalog_postings_sync() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF TG_OP <> 'INSERT' THEN
        DELETE FROM pgcatalog_postings p USING pgcatalog_postings_old o
        WHERE p.rid = o.rid AND p.name = o.name;
    END IF;
    IF TG_OP <> 'DELETE' THEN
        INSERT INTO pgcatalog_postings (cid, name, word, rid, tf, dl, sid, lo, hi, rng) 
        SELECT n.cid, n.name, u.lexeme, n.rid,
               coalesce((n.tf ->> u.lexeme)::float8,
                        CASE WHEN n.tf IS NULL
                             THEN cardinality(u.positions)::float8
                             ELSE 1 END),
               n.dl, h.sid, h.lo, h.hi, h.rng
        FROM pgcatalog_postings_new n
        JOIN pgcatalog_postings_names k ON k.name = n.name
        CROSS JOIN LATERAL unnest(n.tsv) u
        LEFT JOIN pgcatalog_hot h ON h.rid = n.rid
        WHERE u.lexeme <> chr(3);
    END IF;
    RETURN NULL;
END
$$;


CREATE TRIGGER pgcatalog_text_postings_insert
    AFTER INSERT ON public.pgcatalog_text
    REFERENCING NEW TABLE AS pgcatalog_postings_new
    FOR EACH STATEMENT EXECUTE FUNCTION public.pgcatalog_postings_sync();


CREATE TRIGGER pgcatalog_text_postings_update
    AFTER UPDATE ON public.pgcatalog_text
    REFERENCING OLD TABLE AS pgcatalog_postings_old
                NEW TABLE AS pgcatalog_postings_new
    FOR EACH STATEMENT EXECUTE FUNCTION public.pgcatalog_postings_sync();


CREATE TRIGGER pgcatalog_text_postings_delete
    AFTER DELETE ON public.pgcatalog_text
    REFERENCING OLD TABLE AS pgcatalog_postings_old
    FOR EACH STATEMENT EXECUTE FUNCTION public.pgcatalog_postings_sync();


CREATE FUNCTION public.pgcatalog_postings_hot() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        UPDATE pgcatalog_postings SET sid = NULL, lo = NULL, hi = NULL,
            rng = NULL
        WHERE rid = OLD.rid;
    ELSE
        UPDATE pgcatalog_postings p SET sid = NEW.sid, lo = NEW.lo,
            hi = NEW.hi, rng = NEW.rng
        WHERE p.rid = NEW.rid AND (p.sid, p.lo, p.hi, p.rng)
            IS DISTINCT FROM (NEW.sid, NEW.lo, NEW.hi, NEW.rng);
    END IF;
    RETURN NULL;
END
$$;


CREATE TRIGGER pgcatalog_hot_postings_insert
    AFTER INSERT ON public.pgcatalog_hot FOR EACH ROW
    EXECUTE FUNCTION public.pgcatalog_postings_hot();


CREATE TRIGGER pgcatalog_hot_postings_update
    AFTER UPDATE ON public.pgcatalog_hot FOR EACH ROW
    WHEN ((OLD.sid, OLD.lo, OLD.hi, OLD.rng)
          IS DISTINCT FROM (NEW.sid, NEW.lo, NEW.hi, NEW.rng))
    EXECUTE FUNCTION public.pgcatalog_postings_hot();


CREATE TRIGGER pgcatalog_hot_postings_delete
    AFTER DELETE ON public.pgcatalog_hot FOR EACH ROW
    EXECUTE FUNCTION public.pgcatalog_postings_hot();


DO $pgcatalog$
BEGIN
    -- writers wait: a text or hot row written meanwhile, before the
    -- triggers, would be missed
    LOCK TABLE public.pgcatalog_text, public.pgcatalog_hot IN SHARE MODE;
    INSERT INTO public.pgcatalog_postings_names (name) VALUES ('Title');
    INSERT INTO public.pgcatalog_postings (cid, name, word, rid, tf, dl, sid, lo, hi, rng) 
        SELECT n.cid, n.name, u.lexeme, n.rid,
               coalesce((n.tf ->> u.lexeme)::float8,
                        CASE WHEN n.tf IS NULL
                             THEN cardinality(u.positions)::float8
                             ELSE 1 END),
               n.dl, h.sid, h.lo, h.hi, h.rng
        FROM public.pgcatalog_text n
        JOIN public.pgcatalog_postings_names k ON k.name = n.name
        CROSS JOIN LATERAL unnest(n.tsv) u
        LEFT JOIN public.pgcatalog_hot h ON h.rid = n.rid
        WHERE u.lexeme <> chr(3);
END
$pgcatalog$;


CREATE INDEX pgcatalog_postings_word
    ON public.pgcatalog_postings (cid, name, word, rid)
    INCLUDE (tf, dl, sid, lo, hi, rng);


CREATE INDEX pgcatalog_postings_rid ON public.pgcatalog_postings (rid);

-- 8: the postings' B-tree ordered by the word's count and the document's length within each word (pgcatalog_postings_by_count, replacing pgcatalog_postings_word)

CREATE INDEX pgcatalog_postings_by_count
    ON public.pgcatalog_postings (cid, name, word, tf, dl, rid)
    INCLUDE (sid, lo, hi, rng);


DROP INDEX public.pgcatalog_postings_word;

-- 9: postings of the language rows beside their entries' key sets and ranges: the table pgcatalog_langpostings, kept by the language and hot rows' triggers

CREATE TABLE public.pgcatalog_langpostings (
    cid integer NOT NULL,
    name text NOT NULL,
    config text NOT NULL,
    word text COLLATE "C" NOT NULL,
    rid bigint NOT NULL,
    tf integer NOT NULL,
    dl integer NOT NULL,
    sid integer,
    lo bigint,
    hi bigint,
    rng jsonb
) WITH (autovacuum_vacuum_scale_factor = 0.05,
        autovacuum_analyze_scale_factor = 0.05);


ALTER TABLE public.pgcatalog_langpostings
    ALTER COLUMN word SET STATISTICS 1000;


COMMENT ON TABLE public.pgcatalog_langpostings IS
'plone.pgcatalog: one row per word (lexeme) and row of pgcatalog_langtext:
the configuration of the row, the word''s weighted count there in tenths
(tf: A 10, B 4, C 2, D 1 per position), the row''s number of words (dl,
the tsvector''s length), and the key set and range of the entry''s hot
row (sid, lo, hi, rng), written by the triggers on pgcatalog_langtext and
pgcatalog_hot';


CREATE FUNCTION public.pgcatalog_langpostings_sync() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF TG_OP <> 'INSERT' THEN
        DELETE FROM pgcatalog_langpostings p
        USING pgcatalog_langpostings_old o
        WHERE p.rid = o.rid AND p.name = o.name;
    END IF;
    IF TG_OP <> 'DELETE' THEN
        INSERT INTO pgcatalog_langpostings (cid, name, config, word, rid, tf, dl, sid, lo, hi, rng) 
        SELECT n.cid, n.name, n.config, u.lexeme, n.rid,
               coalesce((SELECT sum(CASE w WHEN 'A' THEN 10 WHEN 'B'
                                      THEN 4 WHEN 'C' THEN 2 ELSE 1 END)
                         FROM unnest(u.weights) w), 1)::integer,
               length(n.tsv), h.sid, h.lo, h.hi, h.rng
        FROM pgcatalog_langpostings_new n
        CROSS JOIN LATERAL unnest(n.tsv) u
        LEFT JOIN pgcatalog_hot h ON h.rid = n.rid;
    END IF;
    RETURN NULL;
END
$$;


CREATE TRIGGER pgcatalog_langtext_postings_insert
    AFTER INSERT ON public.pgcatalog_langtext
    REFERENCING NEW TABLE AS pgcatalog_langpostings_new
    FOR EACH STATEMENT EXECUTE FUNCTION public.pgcatalog_langpostings_sync();


CREATE TRIGGER pgcatalog_langtext_postings_update
    AFTER UPDATE ON public.pgcatalog_langtext
    REFERENCING OLD TABLE AS pgcatalog_langpostings_old
                NEW TABLE AS pgcatalog_langpostings_new
    FOR EACH STATEMENT EXECUTE FUNCTION public.pgcatalog_langpostings_sync();


CREATE TRIGGER pgcatalog_langtext_postings_delete
    AFTER DELETE ON public.pgcatalog_langtext
    REFERENCING OLD TABLE AS pgcatalog_langpostings_old
    FOR EACH STATEMENT EXECUTE FUNCTION public.pgcatalog_langpostings_sync();


CREATE FUNCTION public.pgcatalog_langpostings_hot() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        UPDATE pgcatalog_langpostings SET sid = NULL, lo = NULL, hi = NULL,
            rng = NULL
        WHERE rid = OLD.rid;
    ELSE
        UPDATE pgcatalog_langpostings p SET sid = NEW.sid, lo = NEW.lo,
            hi = NEW.hi, rng = NEW.rng
        WHERE p.rid = NEW.rid AND (p.sid, p.lo, p.hi, p.rng)
            IS DISTINCT FROM (NEW.sid, NEW.lo, NEW.hi, NEW.rng);
    END IF;
    RETURN NULL;
END
$$;


CREATE TRIGGER pgcatalog_hot_langpostings_insert
    AFTER INSERT ON public.pgcatalog_hot FOR EACH ROW
    EXECUTE FUNCTION public.pgcatalog_langpostings_hot();


CREATE TRIGGER pgcatalog_hot_langpostings_update
    AFTER UPDATE ON public.pgcatalog_hot FOR EACH ROW
    WHEN ((OLD.sid, OLD.lo, OLD.hi, OLD.rng)
          IS DISTINCT FROM (NEW.sid, NEW.lo, NEW.hi, NEW.rng))
    EXECUTE FUNCTION public.pgcatalog_langpostings_hot();


CREATE TRIGGER pgcatalog_hot_langpostings_delete
    AFTER DELETE ON public.pgcatalog_hot FOR EACH ROW
    EXECUTE FUNCTION public.pgcatalog_langpostings_hot();


DO $pgcatalog$
BEGIN
    -- writers wait: a language or hot row written meanwhile, before the
    -- triggers, would be missed
    LOCK TABLE public.pgcatalog_langtext, public.pgcatalog_hot
        IN SHARE MODE;
    INSERT INTO public.pgcatalog_langpostings (cid, name, config, word, rid, tf, dl, sid, lo, hi, rng) 
        SELECT n.cid, n.name, n.config, u.lexeme, n.rid,
               coalesce((SELECT sum(CASE w WHEN 'A' THEN 10 WHEN 'B'
                                      THEN 4 WHEN 'C' THEN 2 ELSE 1 END)
                         FROM unnest(u.weights) w), 1)::integer,
               length(n.tsv), h.sid, h.lo, h.hi, h.rng
        FROM public.pgcatalog_langtext n
        CROSS JOIN LATERAL unnest(n.tsv) u
        LEFT JOIN public.pgcatalog_hot h ON h.rid = n.rid;
END
$pgcatalog$;


CREATE INDEX pgcatalog_langpostings_by_count
    ON public.pgcatalog_langpostings (cid, name, config, word, tf, dl, rid)
    INCLUDE (sid, lo, hi, rng);


CREATE INDEX pgcatalog_langpostings_by_rid
    ON public.pgcatalog_langpostings (rid, name, word) INCLUDE (tf, dl);

INSERT INTO pgcatalog_schema (version, compatible, release) VALUES (9, 1, '1.0.0a1');

-- a few rows in this layout
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
