"""Schema version 3: the hot rows say which values have no key.

A hot index's value that cannot be a key (not a string, or longer than
400 characters; a boolean index's value that is not a boolean) was left
out of the hot row without a trace, so the hot rows could not tell an
entry without a value from one whose value has no key.  From this version
such an entry's hot row holds, once per index, the index's code followed
by the character 28 (``unkeyed``): facet counts read the values of the
hot indexes from the key sets (docs/facets.md) and know which matches
must be counted from the entry itself.  An entry whose hot values all
lack keys now has a hot row holding only those marks.

The step replaces ``pgcatalog_hot_keys`` (what the trigger and the
registration compute a hot row's keys with) and computes again the hot
rows whose keys change: those of entries with a value without key, few
on a Plone site.  Writes wait while it runs (every entry's keys are
computed once: 3.1 s for level1's 100,000 entries on PostgreSQL 15
on a 2-core machine).  Processes of version 2 keep working on the
upgraded database: no query of theirs names the marks.
"""
from plone.pgcatalog.schema.migrations.step import Step


KEYS = r"""
CREATE OR REPLACE FUNCTION @home@.pgcatalog_hot_keys(p_cid integer,
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
$$"""

REFILL = """
DO $pgcatalog$
BEGIN
    -- writers wait: a row written meanwhile by the function as it was
    -- would lack its marks
    LOCK TABLE @home@.pgcatalog_entries IN SHARE MODE;
    WITH k AS (
        SELECT e.rid, e.cid, e.path, e.keys, b.lo, b.hi, b.rng,
               @home@.pgcatalog_hot_sort(e.cid, e.idx) AS srt
        FROM (SELECT e.rid, e.cid, e.path, e.idx,
                     @home@.pgcatalog_hot_keys(e.cid, e.idx) AS keys,
                     h.keys AS was
              FROM @home@.pgcatalog_entries e
              LEFT JOIN @home@.pgcatalog_hot h ON h.rid = e.rid) e,
             LATERAL @home@.pgcatalog_hot_bounds(e.cid, e.idx) b
        WHERE e.keys IS DISTINCT FROM coalesce(e.was, '{}'::text[])
    ), gone AS (
        DELETE FROM @home@.pgcatalog_hot h USING k
        WHERE h.rid = k.rid AND cardinality(k.keys) = 0
    )
    INSERT INTO @home@.pgcatalog_hot AS h (rid, cid, keys, lo, hi, rng,
                                           sid, path, kid, srt)
    SELECT k.rid, k.cid, k.keys, k.lo, k.hi, k.rng,
           @home@.pgcatalog_hot_set(k.cid, k.keys), k.path,
           @home@.pgcatalog_hot_free_set(k.cid, k.keys), k.srt
    FROM k WHERE cardinality(k.keys) > 0
    ON CONFLICT (rid) DO UPDATE SET keys = EXCLUDED.keys, lo = EXCLUDED.lo,
        hi = EXCLUDED.hi, rng = EXCLUDED.rng, sid = EXCLUDED.sid,
        path = EXCLUDED.path, kid = EXCLUDED.kid, srt = EXCLUDED.srt;
END
$pgcatalog$"""

STEP = Step(
    3, "hot rows mark the hot values that have no key (for facet counts "
    "read from the key sets)",
    [KEYS, REFILL],
    blocks_writes=True, seconds_per_100k=3.1, compatible=True)
