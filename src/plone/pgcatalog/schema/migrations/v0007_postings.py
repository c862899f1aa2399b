"""Schema version 7: postings of chosen text indexes, one row per word
and document, beside the key set and range of the document's hot row.

A prefix (``Title=lea*``, what a suggestion or live search asks on every
keystroke) is a union of the lexicon's words starting with it.  Read from
the text rows, each word is a scan of the index's GIN and a visit of
every text row holding it, and the union's matches are then joined to the
hot rows the search's other conditions keep (the anonymous filters: half
of the catalog): 15 ms for a three-letter prefix at 100,000 entries.
A posting row holds what the score and the filters read (the word's
count in the document, the document's length, the hot row's key set and
range), so the union is one range of a B-tree read alone
(``(cid, name, word, rid) INCLUDE (...)``): 2.8 ms for the same prefix.

``pgcatalog_postings_names`` names the text indexes (by name, in every
catalog of the database) whose postings are kept; the step names
``Title`` (ten words a document: 490,000 rows, 57 MB at 100,000
entries).  ``SearchableText`` is not named by default: its postings would
be as large as its text rows.  A search reads the postings only when the
table names its index, in the statement itself, so naming an index or
taking it off (``pgcatalog-migrate --postings``,
:mod:`plone.pgcatalog.ops.postings`) needs no restart.

The text rows' statement triggers write the postings of the named
indexes (a changed text: the row's postings again); a row trigger on the
hot rows copies a changed key set or range onto the entry's postings.
The step fills ``Title``'s postings from the text rows as they are.
Writes wait while it runs (the text and hot rows are locked against
change: 2.4 s for level1's 100,000 entries on PostgreSQL 15 on a 2-core
machine).  Processes of version 6 keep working on the upgraded database:
they do not read the postings, the triggers write them.
"""
from plone.pgcatalog.schema.migrations.step import Step


NAMES = """
CREATE TABLE @home@.pgcatalog_postings_names (
    name text PRIMARY KEY
)"""

TABLE = """
CREATE TABLE @home@.pgcatalog_postings (
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
        autovacuum_analyze_scale_factor = 0.05)"""

WORD_INDEX = """
CREATE INDEX pgcatalog_postings_word
    ON @home@.pgcatalog_postings (cid, name, word, rid)
    INCLUDE (tf, dl, sid, lo, hi, rng)"""

RID_INDEX = """
CREATE INDEX pgcatalog_postings_rid ON @home@.pgcatalog_postings (rid)"""

COMMENT_POSTINGS = """
COMMENT ON TABLE @home@.pgcatalog_postings IS
'plone.pgcatalog: one row per word and text row of the text indexes
pgcatalog_postings_names names: the word''s count in the row (tf), the
row''s word count (dl), and the key set and range of the entry''s hot row
(sid, lo, hi, rng), written by the triggers on pgcatalog_text and
pgcatalog_hot'"""

COMMENT_NAMES = """
COMMENT ON TABLE @home@.pgcatalog_postings_names IS
'plone.pgcatalog: the text indexes (by name, in every catalog) whose
postings pgcatalog_postings keeps'"""

#: the postings of the text rows of transition table {t} (alias n) whose
#: index is named: each lexeme but the length marker, its count as a
#: score reads it (the stored count, 1 when not stored, the positions of a
#: row written before counts were stored), the entry's hot row's set and
#: range
_POSTINGS = """
        SELECT n.cid, n.name, u.lexeme, n.rid,
               coalesce((n.tf ->> u.lexeme)::float8,
                        CASE WHEN n.tf IS NULL
                             THEN cardinality(u.positions)::float8
                             ELSE 1 END),
               n.dl, h.sid, h.lo, h.hi, h.rng
        FROM {t} n
        JOIN pgcatalog_postings_names k ON k.name = n.name
        CROSS JOIN LATERAL unnest(n.tsv) u
        LEFT JOIN pgcatalog_hot h ON h.rid = n.rid
        WHERE u.lexeme <> chr(3)"""

_COLUMNS = "(cid, name, word, rid, tf, dl, sid, lo, hi, rng)"

SYNC = """
CREATE FUNCTION @home@.pgcatalog_postings_sync() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF TG_OP <> 'INSERT' THEN
        DELETE FROM pgcatalog_postings p USING pgcatalog_postings_old o
        WHERE p.rid = o.rid AND p.name = o.name;
    END IF;
    IF TG_OP <> 'DELETE' THEN
        INSERT INTO pgcatalog_postings %(columns)s %(new)s;
    END IF;
    RETURN NULL;
END
$$""" % {"columns": _COLUMNS,
         "new": _POSTINGS.format(t="pgcatalog_postings_new")}

#: the text rows' triggers, a statement each
TEXT_TRIGGERS = ["""
CREATE TRIGGER pgcatalog_text_postings_insert
    AFTER INSERT ON @home@.pgcatalog_text
    REFERENCING NEW TABLE AS pgcatalog_postings_new
    FOR EACH STATEMENT EXECUTE FUNCTION @home@.pgcatalog_postings_sync()
""", """
CREATE TRIGGER pgcatalog_text_postings_update
    AFTER UPDATE ON @home@.pgcatalog_text
    REFERENCING OLD TABLE AS pgcatalog_postings_old
                NEW TABLE AS pgcatalog_postings_new
    FOR EACH STATEMENT EXECUTE FUNCTION @home@.pgcatalog_postings_sync()
""", """
CREATE TRIGGER pgcatalog_text_postings_delete
    AFTER DELETE ON @home@.pgcatalog_text
    REFERENCING OLD TABLE AS pgcatalog_postings_old
    FOR EACH STATEMENT EXECUTE FUNCTION @home@.pgcatalog_postings_sync()"""]

#: a hot row's key set or range, copied onto its entry's postings (none
#: when it goes: the entry then has no hot row, which no hot condition
#: keeps)
HOT_SYNC = """
CREATE FUNCTION @home@.pgcatalog_postings_hot() RETURNS trigger
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
$$"""

#: the hot rows' triggers, a statement each
HOT_TRIGGERS = ["""
CREATE TRIGGER pgcatalog_hot_postings_insert
    AFTER INSERT ON @home@.pgcatalog_hot FOR EACH ROW
    EXECUTE FUNCTION @home@.pgcatalog_postings_hot()""", """
CREATE TRIGGER pgcatalog_hot_postings_update
    AFTER UPDATE ON @home@.pgcatalog_hot FOR EACH ROW
    WHEN ((OLD.sid, OLD.lo, OLD.hi, OLD.rng)
          IS DISTINCT FROM (NEW.sid, NEW.lo, NEW.hi, NEW.rng))
    EXECUTE FUNCTION @home@.pgcatalog_postings_hot()""", """
CREATE TRIGGER pgcatalog_hot_postings_delete
    AFTER DELETE ON @home@.pgcatalog_hot FOR EACH ROW
    EXECUTE FUNCTION @home@.pgcatalog_postings_hot()"""]

FILL = """
DO $pgcatalog$
BEGIN
    -- writers wait: a text or hot row written meanwhile, before the
    -- triggers, would be missed
    LOCK TABLE @home@.pgcatalog_text, @home@.pgcatalog_hot IN SHARE MODE;
    INSERT INTO @home@.pgcatalog_postings_names (name) VALUES ('Title');
    INSERT INTO @home@.pgcatalog_postings %(columns)s %(rows)s;
END
$pgcatalog$""" % {
    "columns": _COLUMNS,
    "rows": _POSTINGS.format(t="@home@.pgcatalog_text").replace(
        "JOIN pgcatalog_postings_names", "JOIN @home@.pgcatalog_postings_names"
    ).replace("JOIN pgcatalog_hot", "JOIN @home@.pgcatalog_hot")}

STEP = Step(
    7, "postings of chosen text indexes (Title by default) beside their "
    "entries' key sets and ranges: the tables pgcatalog_postings and "
    "pgcatalog_postings_names, kept by the text and hot rows' triggers",
    # (the B-trees built after the fill: 3.4 -> 2.4 s at 100,000 entries)
    [NAMES, TABLE, COMMENT_POSTINGS, COMMENT_NAMES, SYNC] + TEXT_TRIGGERS
    + [HOT_SYNC] + HOT_TRIGGERS + [FILL, WORD_INDEX, RID_INDEX],
    blocks_writes=True, seconds_per_100k=2.4, compatible=True)
