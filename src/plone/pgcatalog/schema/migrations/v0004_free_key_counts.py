"""Schema version 4: the free keys counted per key set.

The free keys (those of the hot indexes left out of the key sets,
``Subject``'s by default) are a set of their own per hot row (``kid``),
nearly one per entry: counting a tag's matches meant reading every
matching hot row.  ``pgcatalog_hot_key_counts`` holds, per key set, range
class and free key, insert-only +1 / -1 rows that the trigger on the hot
rows writes beside ``pgcatalog_hot_counts`` (now also when only the free
keys change), folded from time to time (``upkeep.fold_hot_counts``).  Facet
counts of a search whose conditions are all on the key sets add them up
for the matching sets (docs/facets.md): a few rows per set and tag,
whatever the number of matches.

The step creates the table, replaces the trigger function and the update
trigger, and counts the hot rows as they are.  Writes wait while it runs
(the hot rows are locked against change: 0.3 s for level1's 100,000
entries on PostgreSQL 15 on a 2-core machine).  Processes of version 3 keep
working on the upgraded database: they neither read nor write the new
table (the database's trigger writes it for them).
"""
from plone.pgcatalog.schema.migrations.step import Step


TABLE = """
CREATE TABLE @home@.pgcatalog_hot_key_counts (
    cid integer NOT NULL,
    sid integer NOT NULL,
    cls smallint NOT NULL,
    key text COLLATE "C" NOT NULL,
    n bigint NOT NULL
) WITH (autovacuum_vacuum_scale_factor = 0.05,
        autovacuum_analyze_scale_factor = 0.05)"""

INDEX = """
CREATE INDEX pgcatalog_hot_key_counts_sid
    ON @home@.pgcatalog_hot_key_counts (sid, cls) INCLUDE (key, n)"""

COMMENT = """
COMMENT ON TABLE @home@.pgcatalog_hot_key_counts IS
'plone.pgcatalog: per key set (sid), range class (cls) and free key (a key
of the indexes left out of the key sets), +1 / -1 rows whose sum is the
number of hot rows of that set and class holding that key; written by the
trigger on pgcatalog_hot, folded from time to time'"""

COUNT = """
CREATE OR REPLACE FUNCTION @home@.pgcatalog_hot_count() RETURNS trigger
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
$$"""

DROP_UPDATE = "DROP TRIGGER pgcatalog_hot_count_update ON @home@.pgcatalog_hot"

UPDATE = """
CREATE TRIGGER pgcatalog_hot_count_update
    AFTER UPDATE ON @home@.pgcatalog_hot FOR EACH ROW
    WHEN (OLD.sid IS DISTINCT FROM NEW.sid
          OR OLD.kid IS DISTINCT FROM NEW.kid
          OR @home@.pgcatalog_hot_class(OLD.lo, OLD.hi, OLD.rng) IS DISTINCT
             FROM @home@.pgcatalog_hot_class(NEW.lo, NEW.hi, NEW.rng))
    EXECUTE FUNCTION @home@.pgcatalog_hot_count()"""

FILL = """
DO $pgcatalog$
BEGIN
    -- writers wait: a hot row written meanwhile by the trigger as it was
    -- would not be counted by key
    LOCK TABLE @home@.pgcatalog_hot IN SHARE MODE;
    INSERT INTO @home@.pgcatalog_hot_key_counts (cid, sid, cls, key, n)
    SELECT h.cid, h.sid, @home@.pgcatalog_hot_class(h.lo, h.hi, h.rng),
           k.k, count(*)
    FROM @home@.pgcatalog_hot h
    JOIN @home@.pgcatalog_hot_free_sets f ON f.kid = h.kid,
         unnest(f.keys) AS k(k)
    WHERE h.sid IS NOT NULL
    GROUP BY 1, 2, 3, 4;
END
$pgcatalog$"""

STEP = Step(
    4, "free keys (Subject's) counted per key set: the table "
    "pgcatalog_hot_key_counts, kept by the hot rows' trigger",
    [TABLE, INDEX, COMMENT, COUNT, DROP_UPDATE, UPDATE, FILL],
    blocks_writes=True, seconds_per_100k=0.3, compatible=True)
