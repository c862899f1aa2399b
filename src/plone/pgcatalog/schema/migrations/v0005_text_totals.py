"""Schema version 5: the text indexes' documents and words kept as totals.

A relevance score needs, per text index, the number of documents and their
total length (Okapi's collection statistics; ZCTextIndex keeps
``document_count`` and ``_totaldoclen`` the same way).  They were counted
from every text row of the index after each change of its text, in the
first search that needed them: 68 ms warm at 100,000 entries (a two-word
search right after an edit took 1.25 s at 1,000,000 with the words'
counts too, BENCHMARKS.md), paid by the first text search after every
edit.

``pgcatalog_text_totals`` holds, per catalog and text index, insert-only
rows of documents and words added (or taken off, negative), written by
statement triggers on ``pgcatalog_text`` (insert, update, delete: every
path that writes text rows, savepoints included, in its transaction),
folded from time to time (``upkeep.fold_hot_counts``).  The statistics are the
sums of a few rows.

The step creates the table and the triggers, and counts the text rows as
they are.  Writes wait while it runs (the text rows are locked against
change: 0.3 s for level1's 100,000 entries on PostgreSQL 15 on a 2-core
machine).  Processes of version 4 keep working on the upgraded database:
they neither read nor write the table (the triggers write it for them).
"""
from plone.pgcatalog.schema.migrations.step import Step


TABLE = """
CREATE TABLE @home@.pgcatalog_text_totals (
    cid integer NOT NULL,
    name text NOT NULL,
    docs bigint NOT NULL,
    words bigint NOT NULL
) WITH (autovacuum_vacuum_scale_factor = 0.05,
        autovacuum_analyze_scale_factor = 0.05)"""

INDEX = """
CREATE INDEX pgcatalog_text_totals_name
    ON @home@.pgcatalog_text_totals (cid, name) INCLUDE (docs, words)"""

COMMENT = """
COMMENT ON TABLE @home@.pgcatalog_text_totals IS
'plone.pgcatalog: per catalog (cid) and text index (name), rows of text
rows (docs) and their words (words) added or taken off, whose sums are
Okapi''s collection statistics; written by the triggers on pgcatalog_text,
folded from time to time'"""

#: a text row's word count: the stored dl, else the tsvector's marker
#: (a lexeme chr(3) whose two positions encode it)
_DL = """coalesce({r}.dl, (SELECT (u.positions[1] - 1) * 8191
                             + (u.positions[2] - 8192)
                      FROM unnest(ts_filter(setweight({r}.tsv, 'A',
                                                      ARRAY[chr(3)]),
                                            '{{a}}')) u))"""

ADD = """
CREATE FUNCTION @home@.pgcatalog_text_totals_add() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO pgcatalog_text_totals (cid, name, docs, words)
        SELECT n.cid, n.name, count(*), coalesce(sum(%(new)s), 0)
        FROM pgcatalog_text_new n GROUP BY n.cid, n.name;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO pgcatalog_text_totals (cid, name, docs, words)
        SELECT o.cid, o.name, -count(*), -coalesce(sum(%(old)s), 0)
        FROM pgcatalog_text_old o GROUP BY o.cid, o.name;
    ELSE
        INSERT INTO pgcatalog_text_totals (cid, name, docs, words)
        SELECT d.cid, d.name, sum(d.docs), sum(d.words) FROM (
            SELECT n.cid, n.name, 1 AS docs, %(new)s AS words
            FROM pgcatalog_text_new n
            UNION ALL
            SELECT o.cid, o.name, -1, -%(old)s FROM pgcatalog_text_old o) d
        GROUP BY d.cid, d.name
        HAVING sum(d.docs) <> 0 OR sum(d.words) <> 0;
    END IF;
    RETURN NULL;
END
$$""" % {"new": _DL.format(r="n"), "old": _DL.format(r="o")}

INSERT = """
CREATE TRIGGER pgcatalog_text_totals_insert
    AFTER INSERT ON @home@.pgcatalog_text
    REFERENCING NEW TABLE AS pgcatalog_text_new
    FOR EACH STATEMENT EXECUTE FUNCTION @home@.pgcatalog_text_totals_add()"""

UPDATE = """
CREATE TRIGGER pgcatalog_text_totals_update
    AFTER UPDATE ON @home@.pgcatalog_text
    REFERENCING OLD TABLE AS pgcatalog_text_old
                NEW TABLE AS pgcatalog_text_new
    FOR EACH STATEMENT EXECUTE FUNCTION @home@.pgcatalog_text_totals_add()"""

DELETE = """
CREATE TRIGGER pgcatalog_text_totals_delete
    AFTER DELETE ON @home@.pgcatalog_text
    REFERENCING OLD TABLE AS pgcatalog_text_old
    FOR EACH STATEMENT EXECUTE FUNCTION @home@.pgcatalog_text_totals_add()"""

FILL = """
DO $pgcatalog$
BEGIN
    -- writers wait: a text row written meanwhile, before the triggers,
    -- would not be counted
    LOCK TABLE @home@.pgcatalog_text IN SHARE MODE;
    INSERT INTO @home@.pgcatalog_text_totals (cid, name, docs, words)
    SELECT t.cid, t.name, count(*), coalesce(sum(%s), 0)
    FROM @home@.pgcatalog_text t GROUP BY t.cid, t.name;
END
$pgcatalog$""" % _DL.format(r="t")

STEP = Step(
    5, "the text indexes' documents and words kept as totals: the table "
    "pgcatalog_text_totals, kept by triggers on the text rows",
    [TABLE, INDEX, COMMENT, ADD, INSERT, UPDATE, DELETE, FILL],
    blocks_writes=True, seconds_per_100k=0.3, compatible=True)
