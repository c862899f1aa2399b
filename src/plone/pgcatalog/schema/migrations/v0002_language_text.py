"""Schema version 2: the words of text indexes searched by language.

A text index switched to language-aware search (docs/language-text.md)
keeps, beside its ZCTextIndex row in ``pgcatalog_text``, one row per
entry in ``pgcatalog_langtext``: the text search configuration it was
parsed with (the object's language's) and its weighted ``tsvector``
(title A, description B, body C).  Its GIN index is built per text index
when the index is switched over (``pgcatalog_x_*``, plone.pgcatalog.schema.ddl).

The text search configurations ``pgcatalog_<name>``: a copy of each of the
server's own (``english``, ``german``, ``french``, ... and ``simple``)
whose words pass through the ``unaccent`` dictionary before the stemmer,
when the ``unaccent`` extension can be created here (it ships with
PostgreSQL's contrib; a trusted extension since PostgreSQL 13, so the
database owner may create it); without it, plain copies (no accent
folding: the status says so).

Adds only: processes of schema version 1 keep running (they neither read
nor write the new table).  Instant: an empty table, some configurations.
"""
from plone.pgcatalog.schema.migrations.step import Step


TABLE = """\
CREATE TABLE @home@.pgcatalog_langtext (
    rid bigint NOT NULL REFERENCES @home@.pgcatalog_entries ON DELETE CASCADE,
    cid integer NOT NULL,
    name text NOT NULL,
    config text NOT NULL,
    tsv tsvector NOT NULL,
    PRIMARY KEY (rid, name)
) WITH (toast_tuple_target = 8160)"""

COMMENT = """\
COMMENT ON TABLE @home@.pgcatalog_langtext IS
'plone.pgcatalog: per (entry, text index searched by language) the text
search configuration (config) its words were parsed with and the weighted
tsvector (title A, description B, body C)'"""

CONFIGURATIONS = """\
DO $pgcatalog$
DECLARE
    home text;
    folding text;
    made record;
    stem text;
BEGIN
    -- the catalog tables' schema, as an identifier
    SELECT t.typnamespace::regnamespace::text INTO home FROM pg_type t
        WHERE t.oid = pg_typeof(NULL::@home@.pgcatalog_langtext);
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
$pgcatalog$"""

STEP = Step(
    2, "language-aware text: the table pgcatalog_langtext and the text "
    "search configurations pgcatalog_<language> (accents folded)",
    [TABLE, COMMENT, CONFIGURATIONS],
    blocks_writes=False, seconds_per_100k=0.0, compatible=True)
