"""Schema version 6: the words' document frequencies kept per text index.

A relevance score needs each query word's document frequency (the number
of documents of the index holding it; ZCTextIndex keeps it as the length
of the word's postings).  It was counted from the text rows holding the
word, up to 2,000 of them, after every change of the index's text (a
word in more documents counted exactly once and kept for ten minutes
whatever changed meanwhile): a few milliseconds per common word in the
first text search after an edit, and a common word's frequency a little
behind.

``pgcatalog_text_df`` holds, per catalog, text index and word, insert-only
rows of documents added or taken off, written by the text rows' statement
triggers beside the totals of schema version 5 (an update adds rows only
for the words it adds or takes off), folded from time to time
(``upkeep.fold_hot_counts``: the words of the rows written since the last fold,
found under a partial index, become one row each).  A word's frequency is
the sum of its few rows: exact and current for every word.

The step creates the table, replaces the triggers' function, and counts
the words of the text rows as they are.  Writes wait while it runs (the
text rows are locked against change: 5.4 s for level1's 100,000 entries on
PostgreSQL 15 on a 2-core machine).  Processes of version 5 keep working
on the upgraded database: they neither read nor write the table (the
triggers write it for them).
"""
from plone.pgcatalog.schema.migrations.step import Step


TABLE = """
CREATE TABLE @home@.pgcatalog_text_df (
    cid integer NOT NULL,
    name text NOT NULL,
    word text COLLATE "C" NOT NULL,
    n bigint NOT NULL,
    folded boolean NOT NULL DEFAULT false
) WITH (autovacuum_vacuum_scale_factor = 0.05,
        autovacuum_analyze_scale_factor = 0.05)"""

INDEX = """
CREATE INDEX pgcatalog_text_df_word
    ON @home@.pgcatalog_text_df (cid, name, word) INCLUDE (n)"""

#: the rows the triggers wrote since the last fold: a fold reads the words
#: they name, not every word of the catalog (2,060,007 rows at 1,000,000
#: entries)
UNFOLDED = """
CREATE INDEX pgcatalog_text_df_unfolded
    ON @home@.pgcatalog_text_df (cid, name, word) WHERE NOT folded"""

COMMENT = """
COMMENT ON TABLE @home@.pgcatalog_text_df IS
'plone.pgcatalog: per catalog (cid), text index (name) and word, rows of
documents added or taken off whose sum is the number of text rows holding
the word (its document frequency); written by the triggers on
pgcatalog_text (folded false), folded from time to time into one row per
word (folded true)'"""

#: a text row's word count: the stored dl, else the tsvector's marker
#: (a lexeme chr(3) whose two positions encode it)
_DL = """coalesce({r}.dl, (SELECT (u.positions[1] - 1) * 8191
                             + (u.positions[2] - 8192)
                      FROM unnest(ts_filter(setweight({r}.tsv, 'A',
                                                      ARRAY[chr(3)]),
                                            '{{a}}')) u))"""

#: the words of the text rows of transition table {t} (alias {r}), each
#: with {d} documents: the row's lexemes but the length marker
_WORDS = """SELECT {r}.cid, {r}.name, u.word, {d} AS d FROM {t} {r}
            CROSS JOIN LATERAL unnest(tsvector_to_array({r}.tsv)) AS u(word)
            WHERE u.word <> chr(3)"""

ADD = """
CREATE OR REPLACE FUNCTION @home@.pgcatalog_text_totals_add() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO pgcatalog_text_totals (cid, name, docs, words)
        SELECT n.cid, n.name, count(*), coalesce(sum(%(new)s), 0)
        FROM pgcatalog_text_new n GROUP BY n.cid, n.name;
        INSERT INTO pgcatalog_text_df (cid, name, word, n)
        SELECT w.cid, w.name, w.word, count(*) FROM (%(new_words)s) w
        GROUP BY w.cid, w.name, w.word;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO pgcatalog_text_totals (cid, name, docs, words)
        SELECT o.cid, o.name, -count(*), -coalesce(sum(%(old)s), 0)
        FROM pgcatalog_text_old o GROUP BY o.cid, o.name;
        INSERT INTO pgcatalog_text_df (cid, name, word, n)
        SELECT w.cid, w.name, w.word, -count(*) FROM (%(old_words)s) w
        GROUP BY w.cid, w.name, w.word;
    ELSE
        INSERT INTO pgcatalog_text_totals (cid, name, docs, words)
        SELECT d.cid, d.name, sum(d.docs), sum(d.words) FROM (
            SELECT n.cid, n.name, 1 AS docs, %(new)s AS words
            FROM pgcatalog_text_new n
            UNION ALL
            SELECT o.cid, o.name, -1, -%(old)s FROM pgcatalog_text_old o) d
        GROUP BY d.cid, d.name
        HAVING sum(d.docs) <> 0 OR sum(d.words) <> 0;
        -- only the words the update adds or takes off
        INSERT INTO pgcatalog_text_df (cid, name, word, n)
        SELECT w.cid, w.name, w.word, sum(w.d) FROM (
            %(new_words)s
            UNION ALL
            %(old_gone)s) w
        GROUP BY w.cid, w.name, w.word HAVING sum(w.d) <> 0;
    END IF;
    RETURN NULL;
END
$$""" % {"new": _DL.format(r="n"), "old": _DL.format(r="o"),
         "new_words": _WORDS.format(r="n", t="pgcatalog_text_new", d=1),
         "old_words": _WORDS.format(r="o", t="pgcatalog_text_old", d=1),
         "old_gone": _WORDS.format(r="o", t="pgcatalog_text_old", d=-1)}

FILL = """
DO $pgcatalog$
BEGIN
    -- writers wait: a text row written meanwhile, before the new
    -- function, would not be counted
    LOCK TABLE @home@.pgcatalog_text IN SHARE MODE;
    INSERT INTO @home@.pgcatalog_text_df (cid, name, word, n, folded)
    SELECT t.cid, t.name, u.word, count(*), true
    FROM @home@.pgcatalog_text t
    CROSS JOIN LATERAL unnest(tsvector_to_array(t.tsv)) AS u(word)
    WHERE u.word <> chr(3)
    GROUP BY 1, 2, 3;
END
$pgcatalog$"""

STEP = Step(
    6, "the words' document frequencies kept per text index: the table "
    "pgcatalog_text_df, kept by the text rows' triggers",
    [TABLE, INDEX, UNFOLDED, COMMENT, ADD, FILL],
    blocks_writes=True, seconds_per_100k=5.4, compatible=True)
