"""The values of indexes over a search's matches, and how many matches
hold each: what facet counts are made of (search/facets.py).

Hot indexes are read from the matches' key sets, the others from the
entries, each kind in one statement.  A hot row names its key set
(``sid``: the keys of the indexes in the sets) and its free keys' set
(``kid``: ``Subject``'s by default); a set's keys never change.  When
every condition of the search is on the key sets, each set's matches are
its kept counts (``pgcatalog_hot_counts``) and each free key's its counts
per set (``pgcatalog_hot_key_counts``, schema version 4), corrected
beside a range as ``hot.count`` corrects them: no match is read.  Else the
matches' narrow hot rows are grouped by set, each set's count added to
each of its keys: a few thousand sets where the entries' wide rows were
tens of thousands (docs/facets.md).

A value the hot row has no key for (not a string, longer than 400
characters; a boolean index's value that is not a boolean) is marked in
it since schema version 3 (the index's code and ``chr(28)``,
``v0003_hot_unkeyed``): an index whose mark a match holds is counted from
the entries instead.  An entry without any hot value has no hot row and
adds nothing, as it holds no value to count.

The matches come as a list of rids (the result cache's answer) or as the
search plan's statements (:class:`Matched`): then the search runs inside
the counting statement, its ids never sent to Python and back.
"""
import re

from plone.pgcatalog.indexes.interfaces import IHotKind
from plone.pgcatalog.pg import hot
from plone.pgcatalog.pg import lists
from plone.pgcatalog.pg.fragment import join
from plone.pgcatalog.pg.fragment import literal
from plone.pgcatalog.pg.fragment import or_
from plone.pgcatalog.pg.fragment import q
from plone.pgcatalog.schema import tables as schema

#: after an index's code in its key, the mark of a value without key (a
#: string value follows ``hot.SEP``, a boolean one ``hot.BOOL_SEP``)
UNKEYED = "\x1c"
#: a key: the index's code, what follows it, the value
_KEY = re.compile("([^\x1c-\x1f]*)([\x1c-\x1f])(.*)", re.S)


def countable(index, cid):
    """Whether catalog ``cid``'s key sets (or free keys' sets) hold every
    value of ``index`` a facet counts: a hot index of strings or booleans
    whose keys are registered in the sets."""
    return IHotKind.providedBy(index) and \
        index.pgc_hot_kind in ("keys", "bool") and \
        hot.ready(index, cid) and hot.kept_in(index, cid) is not None


class Matched:
    """A search's matches as statements (``plans.Plan.matched``):
    ``rids``, one column ``rid``, a row per match; ``hot_where``, when the
    plan reads only the hot rows ``h``, its condition over them (the hot
    rows' sets are then read in the same scan), or None; ``kept``, when
    the sets' kept counts count the matches (``hot.kept``), the hot
    conditions (:func:`set_counts` counts each set's matches), or
    None."""

    __slots__ = ("rids", "hot_where", "kept")

    def __init__(self, rids, hot_where=None, kept=None):
        self.rids = rids
        self.hot_where = hot_where
        self.kept = kept


def among(rid, matches):
    """The condition "``rid`` (a Fragment: a column) is one of
    ``matches``": a list of rids, or :class:`Matched`."""
    if isinstance(matches, Matched):
        return q("{} IN (SELECT x.rid FROM ({}) x)", rid, matches.rids)
    return q("{} = ANY({}::bigint[])", rid, list(matches))


def values_counts(store, indexes, rids):
    """``[[(raw value, documents)], ...]``: the values of each of
    ``indexes`` over the entries ``rids`` (see :func:`among`) and how many
    of them hold each.  Hot indexes (:func:`countable`) are counted from
    the matches' key sets, the others, and a hot index a match holds a
    value without key of, from the entries."""
    found = [None] * len(indexes)
    on_sets = [n for n, index in enumerate(indexes)
               if countable(index, store.cid)]
    if on_sets:
        counted, unkeyed = sets_values_counts(
            store, [indexes[n] for n in on_sets], rids)
        for m, n in enumerate(on_sets):
            if m not in unkeyed:
                found[n] = counted[m]
    rest = [n for n, counts in enumerate(found) if counts is None]
    for n, counts in zip(rest, entries_values_counts(
            store, [indexes[n] for n in rest], rids)):
        found[n] = counts
    return found


def entries_values_counts(store, indexes, rids):
    """``[[(raw value, documents)], ...]`` of each of ``indexes`` over the
    entries ``rids``, read from the entries in one statement (the entries
    read once, only the indexes' values kept)."""
    if not indexes:
        return []
    keys, counts = [], []
    for n, index in enumerate(indexes):
        key = index.pgc_key_sql()
        column = q("k{}", literal(n))
        if index.pgc_multi:
            keys.append(q("{} AS {}", lists.expanded_sql(key), column))
            counts.append(q(
                "SELECT {}, v, count(*) FROM m, jsonb_array_elements("
                "CASE WHEN jsonb_typeof({}) = 'array' THEN {} END) AS v "
                "GROUP BY v", literal(n), column, column))
        else:
            keys.append(q("CASE WHEN e.idx ? {} THEN {} END AS {}",
                          index.getId(), key, column))
            counts.append(q(
                "SELECT {}, {}, count(*) FROM m WHERE {} IS NOT NULL "
                "GROUP BY 2", literal(n), column, column))
    rows = store.rows(q(
        "WITH m AS MATERIALIZED (SELECT {} FROM {} WHERE e.cid = {} AND "
        "{}) {}", join(", ", keys), schema.FROM_ENTRIES, store.cid,
        among(q("e.rid"), rids), join(" UNION ALL ", counts)))
    found = [[] for _index in indexes]
    for n, value, count in rows:
        found[n].append((value, count))
    return found


def sets_values_counts(store, indexes, rids):
    """``([[(raw value, documents)], ...], unkeyed)``: the values of each
    of ``indexes`` (:func:`countable` ones) over the entries ``rids`` (see
    :func:`among`) and
    how many of them hold each, read from their hot rows' sets in one
    statement; ``unkeyed``: the positions of the indexes a match holds a
    value without key of (to be counted from the entries)."""
    codes = {hot.code(index, store.cid): n for n, index in enumerate(indexes)}
    #: the free keys' sets only when a facet's keys are there
    free = any(hot.kept_in(index, store.cid) == "free" for index in indexes)
    if isinstance(rids, Matched) and rids.kept is not None:
        # every condition on the key sets: each set's matches, and each
        # free key's, from the kept counts, no hot row read (but those a
        # range takes off or adds)
        counted = q("SELECT s.keys, g.n FROM ({}) g(sid, n) JOIN {} s ON "
                    "s.sid = g.sid WHERE g.n > 0",
                    set_counts(store.cid, rids.kept), schema.HOT_SETS_TABLE)
        if free:
            counted = q("{} UNION ALL SELECT ARRAY[g.key], g.n FROM ({}) "
                        "g(key, n) WHERE g.n > 0", counted,
                        free_key_counts(store.cid, rids.kept))
    else:
        where = _hot_where(rids)
        if free:
            counted = q(
                "WITH m AS MATERIALIZED (SELECT h.sid, h.kid FROM {} WHERE "
                "{}) SELECT s.keys, g.n FROM (SELECT m.sid, count(*) AS n "
                "FROM m WHERE m.sid IS NOT NULL GROUP BY m.sid) g JOIN {} s "
                "ON s.sid = g.sid UNION ALL SELECT f.keys, g.n FROM (SELECT "
                "m.kid, count(*) AS n FROM m WHERE m.kid IS NOT NULL GROUP BY "
                "m.kid) g JOIN {} f ON f.kid = g.kid", schema.FROM_HOT, where,
                schema.HOT_SETS_TABLE, schema.HOT_FREE_SETS_TABLE)
        else:
            # the sets' ids alone: an index-only scan of their B-tree
            counted = q(
                "SELECT s.keys, g.n FROM (SELECT h.sid, count(*) AS n FROM {} "
                "WHERE {} AND h.sid IS NOT NULL GROUP BY h.sid) g JOIN {} s "
                "ON s.sid = g.sid", schema.FROM_HOT, where,
                schema.HOT_SETS_TABLE)
    # each index's keys: its code, then a character below the space
    # (hot.SEP, hot.BOOL_SEP, UNKEYED), compared as the keys' collation "C"
    # orders them (a code is digits)
    wanted = or_(*[q("(k.k >= {} AND k.k < {})", code + UNKEYED, code + " ")
                   for code in sorted(codes)])
    rows = store.rows(q(
        "SELECT k.k, sum(c.n)::bigint FROM ({}) c(keys, n), unnest(c.keys) "
        "AS k(k) WHERE {} GROUP BY k.k HAVING sum(c.n) > 0", counted,
        wanted))
    found = [[] for _index in indexes]
    unkeyed = set()
    for key, count in rows:
        code, mark, value = _KEY.match(key).groups()
        n = codes[code]
        if mark == UNKEYED:
            unkeyed.add(n)
        elif mark == hot.BOOL_SEP:
            found[n].append((value == "true", count))
        else:
            found[n].append((value, count))
    return found, unkeyed


def _hot_where(matches):
    """The matches' condition over the hot rows ``h``: the plan's own when
    it reads them, else the rids."""
    if isinstance(matches, Matched) and matches.hot_where is not None:
        return matches.hot_where
    return among(q("h.rid"), matches)


def _kept_parts(conditions, kept_rows, rows, grouped):
    """The parts of a count per set (or per set and key) of the hot
    conditions of a query (``hot.kept`` ones), as ``hot.count`` adds
    them: the kept rows (``kept_rows``: a statement over the counts ``k``,
    to which a range class condition is added), and beside a range
    holding a term, the open ranges starting after it taken off and the
    others added, read row by row (``rows``: what a hot row ``h`` adds,
    ``grouped``: what they are grouped by)."""
    classes, minus, plus = hot.kept_range_parts(
        [c for c in hot.meaningful(conditions) if isinstance(c, hot.Ranged)])
    parts = [q("{} AND {}", kept_rows, classes) if classes else kept_rows]
    if minus is not None:
        parts += [q("SELECT {}, -count(*) FROM {} WHERE {} AND {} GROUP BY "
                    "{}", grouped, rows, hot.KEPT_SET, minus, grouped),
                  q("SELECT {}, count(*) FROM {} WHERE {} AND {} GROUP BY {}",
                    grouped, rows, hot.KEPT_SET, plus, grouped)]
    return parts


def _with_sets(cid, conditions, parts):
    keys = [c for c in hot.meaningful(conditions)
            if not isinstance(c, hot.Ranged)]
    return q("WITH i AS MATERIALIZED (SELECT {} AS ids) SELECT x.g, "
             "sum(x.n)::bigint AS n FROM ({}) x(g, n) GROUP BY x.g",
             hot.sets_matching(cid, keys), join(" UNION ALL ", parts))


def set_counts(cid, conditions):
    """A statement of ``(sid, n)``: how many hot rows of each key set meet
    the hot conditions of a query (``hot.kept`` ones), from the sets' kept
    counts (``n`` may be 0)."""
    return _with_sets(cid, conditions, _kept_parts(
        conditions,
        q("SELECT k.sid, k.n FROM {} k WHERE k.sid = ANY((SELECT i.ids FROM "
          "i)::integer[])", schema.HOT_COUNTS_TABLE),
        schema.FROM_HOT, q("h.sid")))


def free_key_counts(cid, conditions):
    """A statement of ``(key, n)``: how many hot rows meeting the hot
    conditions of a query (``hot.kept`` ones) hold each free key, from the
    free keys' kept counts per set (``pgcatalog_hot_key_counts``, schema
    version 4; ``n`` may be 0)."""
    return _with_sets(cid, conditions, _kept_parts(
        conditions,
        q("SELECT k.key, k.n FROM {} k WHERE k.sid = ANY((SELECT i.ids FROM "
          "i)::integer[])", schema.HOT_KEY_COUNTS_TABLE),
        q("{} JOIN {} f ON f.kid = h.kid, unnest(f.keys) AS fk(k)",
          schema.FROM_HOT, schema.HOT_FREE_SETS_TABLE), q("fk.k")))
