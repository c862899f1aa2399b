"""Schema version 9: postings of the language rows, one row per stem (or
word as written) and entry, beside the key set and range of the entry's
hot row.

A search by language (docs/language-text.md) ranks its matches by a score
that adds up per word: each query word the entry has contributes by its
weighted count there (title ``A`` 10, description ``B`` 4, body ``C`` 2,
a word as written ``D`` 1, in tenths) and the entry's number of distinct
words.  Read from the language rows, each match's whole ``tsvector``
(about 2 KB at level1's sizes) is read to rank it: 223 ms for two common
words beside the anonymous filters at 1,000,000 entries.  A posting row
holds what the score and the filters read, so words joined by AND, or a
prefix, are read from one B-tree alone (``(cid, name, config, word, tf,
dl, rid) INCLUDE (sid, lo, hi, rng)``), and any other query's matches
are scored from their postings, found by entry (``(rid, name, word)
INCLUDE (tf, dl)``), without their ``tsvector``.

The language rows' statement triggers write the postings (a changed row:
its postings again); a row trigger on the hot rows copies a changed key
set or range onto the entry's postings.  The step fills the postings of
the language rows there are; catalog writes wait while it runs (none
when no text index is searched by language; at 100,000 entries of
level1's ``SearchableText``: see docs/upgrade.md).  Processes of version
8 keep working on the upgraded database: they do not read the postings,
the triggers write them.
"""
from plone.pgcatalog.schema.migrations.step import Step


TABLE = """
CREATE TABLE @home@.pgcatalog_langpostings (
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
        autovacuum_analyze_scale_factor = 0.05)"""

#: the words' frequencies as the planner reads them (a common word of
#: level1's 100,000 entries, one posting in 800, was estimated at a
#: twentieth of its postings from the default hundred)
STATISTICS = """
ALTER TABLE @home@.pgcatalog_langpostings
    ALTER COLUMN word SET STATISTICS 1000"""

BY_COUNT = """
CREATE INDEX pgcatalog_langpostings_by_count
    ON @home@.pgcatalog_langpostings (cid, name, config, word, tf, dl, rid)
    INCLUDE (sid, lo, hi, rng)"""

BY_RID = """
CREATE INDEX pgcatalog_langpostings_by_rid
    ON @home@.pgcatalog_langpostings (rid, name, word) INCLUDE (tf, dl)"""

COMMENT = """
COMMENT ON TABLE @home@.pgcatalog_langpostings IS
'plone.pgcatalog: one row per word (lexeme) and row of pgcatalog_langtext:
the configuration of the row, the word''s weighted count there in tenths
(tf: A 10, B 4, C 2, D 1 per position), the row''s number of words (dl,
the tsvector''s length), and the key set and range of the entry''s hot
row (sid, lo, hi, rng), written by the triggers on pgcatalog_langtext and
pgcatalog_hot'"""

#: the postings of the language rows of transition table {t} (alias n):
#: each lexeme, its weighted count (a lexeme without positions counts as
#: one of weight D), the row's length, the entry's hot row's set and range
_POSTINGS = """
        SELECT n.cid, n.name, n.config, u.lexeme, n.rid,
               coalesce((SELECT sum(CASE w WHEN 'A' THEN 10 WHEN 'B'
                                      THEN 4 WHEN 'C' THEN 2 ELSE 1 END)
                         FROM unnest(u.weights) w), 1)::integer,
               length(n.tsv), h.sid, h.lo, h.hi, h.rng
        FROM {t} n
        CROSS JOIN LATERAL unnest(n.tsv) u
        LEFT JOIN {hot} h ON h.rid = n.rid"""

_COLUMNS = "(cid, name, config, word, rid, tf, dl, sid, lo, hi, rng)"

SYNC = """
CREATE FUNCTION @home@.pgcatalog_langpostings_sync() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF TG_OP <> 'INSERT' THEN
        DELETE FROM pgcatalog_langpostings p
        USING pgcatalog_langpostings_old o
        WHERE p.rid = o.rid AND p.name = o.name;
    END IF;
    IF TG_OP <> 'DELETE' THEN
        INSERT INTO pgcatalog_langpostings %(columns)s %(new)s;
    END IF;
    RETURN NULL;
END
$$""" % {"columns": _COLUMNS,
         "new": _POSTINGS.format(t="pgcatalog_langpostings_new",
                                 hot="pgcatalog_hot")}

#: the language rows' triggers, a statement each
LANGTEXT_TRIGGERS = ["""
CREATE TRIGGER pgcatalog_langtext_postings_insert
    AFTER INSERT ON @home@.pgcatalog_langtext
    REFERENCING NEW TABLE AS pgcatalog_langpostings_new
    FOR EACH STATEMENT EXECUTE FUNCTION @home@.pgcatalog_langpostings_sync()
""", """
CREATE TRIGGER pgcatalog_langtext_postings_update
    AFTER UPDATE ON @home@.pgcatalog_langtext
    REFERENCING OLD TABLE AS pgcatalog_langpostings_old
                NEW TABLE AS pgcatalog_langpostings_new
    FOR EACH STATEMENT EXECUTE FUNCTION @home@.pgcatalog_langpostings_sync()
""", """
CREATE TRIGGER pgcatalog_langtext_postings_delete
    AFTER DELETE ON @home@.pgcatalog_langtext
    REFERENCING OLD TABLE AS pgcatalog_langpostings_old
    FOR EACH STATEMENT EXECUTE FUNCTION @home@.pgcatalog_langpostings_sync()
"""]

#: a hot row's key set or range, copied onto its entry's language postings
#: (none when it goes: no hot condition keeps an entry without a hot row)
HOT_SYNC = """
CREATE FUNCTION @home@.pgcatalog_langpostings_hot() RETURNS trigger
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
$$"""

#: the hot rows' triggers
HOT_TRIGGERS = ["""
CREATE TRIGGER pgcatalog_hot_langpostings_insert
    AFTER INSERT ON @home@.pgcatalog_hot FOR EACH ROW
    EXECUTE FUNCTION @home@.pgcatalog_langpostings_hot()""", """
CREATE TRIGGER pgcatalog_hot_langpostings_update
    AFTER UPDATE ON @home@.pgcatalog_hot FOR EACH ROW
    WHEN ((OLD.sid, OLD.lo, OLD.hi, OLD.rng)
          IS DISTINCT FROM (NEW.sid, NEW.lo, NEW.hi, NEW.rng))
    EXECUTE FUNCTION @home@.pgcatalog_langpostings_hot()""", """
CREATE TRIGGER pgcatalog_hot_langpostings_delete
    AFTER DELETE ON @home@.pgcatalog_hot FOR EACH ROW
    EXECUTE FUNCTION @home@.pgcatalog_langpostings_hot()"""]

FILL = """
DO $pgcatalog$
BEGIN
    -- writers wait: a language or hot row written meanwhile, before the
    -- triggers, would be missed
    LOCK TABLE @home@.pgcatalog_langtext, @home@.pgcatalog_hot
        IN SHARE MODE;
    INSERT INTO @home@.pgcatalog_langpostings %(columns)s %(rows)s;
END
$pgcatalog$""" % {
    "columns": _COLUMNS,
    "rows": _POSTINGS.format(t="@home@.pgcatalog_langtext",
                             hot="@home@.pgcatalog_hot")}

STEP = Step(
    9, "postings of the language rows beside their entries' key sets and "
    "ranges: the table pgcatalog_langpostings, kept by the language and "
    "hot rows' triggers",
    [TABLE, STATISTICS, COMMENT, SYNC] + LANGTEXT_TRIGGERS + [HOT_SYNC]
    + HOT_TRIGGERS + [FILL, BY_COUNT, BY_RID],
    blocks_writes=True, seconds_per_100k=80.0, compatible=True)
