"""The hot keys: counts and every-match answers without the wide row.

``pgcatalog_hot`` holds one narrow row per entry, ``(rid, cid, keys)``:
the string values of the catalog's hot indexes (``hot-indexes``:
``portal_type``, ``review_state``, ``allowedRolesAndUsers``...) as
``code<US>value`` texts under one GIN index, with a key set
(``pgcatalog_hot_sets``) and counts per set, one DateRangeIndex's range and
one DateIndex's sort date; a trigger on ``pgcatalog_entries`` keeps the
rows.  A search whose conditions are all hot is counted and answered from
them, without visiting the wide rows.  This module says which indexes are
hot (:func:`names`, :func:`ready`), registers and unregisters them, and
turns hot conditions into SQL (:func:`where`).  docs/hot-keys.md tells the
whole design: what a key is, the key sets, the counts, the sort date, and
how registering stays safe beside concurrent writers.
"""
from plone.pgcatalog import config
from plone.pgcatalog.indexes.interfaces import IHotKind
from plone.pgcatalog.pg.fragment import TRUE
from plone.pgcatalog.pg.fragment import Fragment
from plone.pgcatalog.pg.fragment import and_
from plone.pgcatalog.pg.fragment import ident
from plone.pgcatalog.pg.fragment import or_
from plone.pgcatalog.pg.fragment import q
from plone.pgcatalog.schema import tables as schema

#: the rid of the hot row ``h``
RID = q("h.rid")
#: between an index's code and a value in a key
SEP = "\x1f"
#: between a boolean index's code and its value
BOOL_SEP = "\x1e"
#: longer strings have no key (a GIN key stays far below its size limit)
MAX_CHARS = 400
#: the hot indexes when the ``hot-indexes`` setting says nothing
DEFAULT_NAMES = ("portal_type", "review_state", "allowedRolesAndUsers",
                 "Subject", "effectiveRange", "is_default_page", "modified")


def names():
    """The names of the indexes kept hot (``hot-indexes`` /
    ``PGCATALOG_HOT_INDEXES``: names separated by spaces or commas; empty:
    none)."""
    value = config._setting("hot-indexes", "PGCATALOG_HOT_INDEXES")
    if value is None:
        return frozenset(DEFAULT_NAMES)
    return frozenset(name for name in value.replace(",", " ").split()
                     if name)


#: the hot indexes left out of the key sets when ``hot-set-exclude`` says
#: nothing
DEFAULT_SET_EXCLUDED = ("Subject",)


def set_excluded():
    """The names of the hot indexes whose keys are left out of the key
    sets (``hot-set-exclude`` / ``PGCATALOG_HOT_SET_EXCLUDE``: names
    separated by spaces or commas)."""
    value = config._setting("hot-set-exclude", "PGCATALOG_HOT_SET_EXCLUDE")
    if value is None:
        return frozenset(DEFAULT_SET_EXCLUDED)
    return frozenset(name for name in value.replace(",", " ").split()
                     if name)


def eligible(index):
    """Whether ``index`` keeps hot keys: a kind that has them (IHotKind),
    under a hot name."""
    return IHotKind.providedBy(index) and index.getId() in names()


def ready(index, cid):
    """Whether catalog ``cid``'s hot rows hold ``index``'s keys."""
    return cid in (index._pgc_hot_codes or ())


def in_sets(index, cid):
    """Whether catalog ``cid``'s key sets hold ``index``'s keys (as
    registered)."""
    return kept_in(index, cid) == "sets"


def kept_in(index, cid):
    """Where catalog ``cid`` keeps ``index``'s keys besides the hot rows,
    as registered: "sets" (the key sets), "free" (the free keys' rows,
    schema version 18) or None (the hot rows only)."""
    found = (index._pgc_hot_sets or {}).get(cid)
    return "sets" if found else ("free" if found is False else None)


def sorts(index, cid):
    """Whether catalog ``cid``'s hot rows hold ``index``'s sort value
    (``srt``, schema version 21), as registered."""
    return IHotKind.providedBy(index) and index.pgc_hot_kind == "sort" \
        and ready(index, cid)


def code(index, cid):
    """``index``'s code in catalog ``cid``'s hot keys."""
    return index._pgc_hot_codes[cid]


def key(code, value):
    return code + SEP + value


def query_keys(index, iq, qc, stored):
    """The keys of a query's values (``stored(value)``: a value's stored
    form), or None when the hot rows cannot answer the query: the index
    has no keys in catalog ``qc.cid``, the query has a range or ``not``
    (they read the wide row), or a value has no key (not a string, or
    too long)."""
    if iq is None or not ready(index, qc.cid) or \
            iq.get("not", None) or iq.get("range", None):
        return None
    found = []
    prefix = code(index, qc.cid)
    for value in iq.keys:
        if value is None:
            continue
        value = stored(value)
        if not isinstance(value, str) or len(value) > MAX_CHARS:
            return None
        found.append(key(prefix, value))
    return found or None


class KeyCondition(Fragment):
    """A condition on the hot row ``h``'s keys, which :func:`where` can ask
    of the key sets ``s`` instead when ``sets`` (the index's keys are in
    the sets), or ``free`` (in the free keys' sets)."""

    __slots__ = ("op", "keys", "sets", "free")

    def __init__(self, op, keys, kept):
        fragment = self.over("h", op, keys)
        super().__init__(fragment.text, fragment.params)
        self.op, self.keys = op, keys
        # ``kept``: kept_in's answer
        self.sets = kept == "sets"
        self.free = kept == "free"

    @staticmethod
    def over(alias, op, keys):
        return q("{}.keys {} {}::text[]", ident(alias), q(op), keys)

    def on_sets(self):
        return self.over("s", self.op, self.keys)


def any_of(found, kept=None):
    """The entry ``h`` has one of the keys ``found`` (``kept``: where they
    are kept besides the hot rows, :func:`kept_in`)."""
    return KeyCondition("@>" if len(found) == 1 else "&&", list(found), kept)


def all_of(found, kept=None):
    """The entry ``h`` has every key of ``found``."""
    return KeyCondition("@>", list(found), kept)


def bool_key(code, value):
    return code + BOOL_SEP + ("true" if value else "false")


class Ranged:
    """A range index's condition over the hot row ``h`` (see
    :func:`where`).  What :func:`count` can read from the sets' counts:
    ``term``, the integer the range holds (``range_contains``), or
    ``present``, the entry has a value (``range_present``); anything else
    is counted row by row."""

    def __init__(self, fragment, term=None, present=False):
        self.fragment = fragment
        self.term = term
        self.present = present

    @property
    def counted(self):
        return self.present or self.term is not None


#: the range index's value in the hot row ``h`` when it is not two
#: integers or nulls (``h.lo``, ``h.hi`` hold those)
RANGE = q("h.rng")
#: the bounds of ``h.lo`` / ``h.hi`` (an open end)
BIGINT_MIN = -2 ** 63
BIGINT_MAX = 2 ** 63 - 1


def range_present():
    """The entry ``h`` has a value for the range index."""
    return q("(h.lo IS NOT NULL OR h.rng IS NOT NULL)")


def range_contains(term, exact):
    """The entry ``h``'s range holds ``term`` (an integer within bigint):
    its bounds compared as integers, or, for a value of another shape,
    ``exact`` (the entry's own condition said of ``h.rng``)."""
    return q("((h.lo <= {} AND h.hi >= {}) OR (h.rng IS NOT NULL AND {}))",
             term, term, exact)


def free_only(conditions):
    """Whether the hot conditions of a query are all key conditions on
    free keys (schema version 18: their sets are the hot row's ``kid``)."""
    conditions = meaningful(conditions)
    return bool(conditions) and all(
        isinstance(c, KeyCondition) and c.free for c in conditions)


def _in_sets(keys):
    """Whether every key condition ``keys`` is on indexes in the key
    sets."""
    return all(isinstance(c, KeyCondition) and c.sets for c in keys)


def sets_matching(cid, keys, free=False):
    """The ids of catalog ``cid``'s key sets (``free``: free keys' sets)
    meeting the key conditions ``keys`` (an array)."""
    return q("ARRAY(SELECT s.{} FROM {} s WHERE {})",
             q("kid" if free else "sid"),
             schema.HOT_FREE_SETS_TABLE if free else schema.HOT_SETS_TABLE,
             and_(q("s.cid = {}", cid), *[c.on_sets() for c in keys]))


def set_ids(cid, conditions, counted=False):
    """A statement of one value, the ids of catalog ``cid``'s key sets
    meeting the key conditions of ``conditions`` (an array), or None when
    they are not all on indexes in the sets (or none is a key).  Given to
    :func:`where` as ``ids``, the planner knows how many hot rows those
    sets hold (the B-tree's statistics of ``sid``), where it cannot
    estimate a sub-select finding them.  ``counted``: a second value, the
    number of rows those sets hold (their kept counts, whatever the
    range condition)."""
    conditions = meaningful(conditions)
    keys = [c for c in conditions if not isinstance(c, Ranged)]
    if not keys or not _in_sets(keys):
        return None
    if counted:
        return q("WITH i AS MATERIALIZED (SELECT {} AS ids) SELECT i.ids, "
                 "(SELECT coalesce(sum(k.n), 0) FROM {} k WHERE k.sid = "
                 "ANY(i.ids)) FROM i", sets_matching(cid, keys),
                 schema.HOT_COUNTS_TABLE)
    return q("SELECT {}", sets_matching(cid, keys))


def set_names(indexes, cid):
    """The names of ``indexes`` (index objects) whose keys catalog ``cid``
    keeps in the key sets, sorted."""
    return tuple(sorted(index.getId() for index in indexes
                        if IHotKind.providedBy(index)
                        and kept_in(index, cid) == "sets"))


def where(cid, conditions, sets=True, ids=None):
    """The hot rows' condition for catalog ``cid`` and the hot conditions
    of a query (Fragments over ``h``, or :class:`Ranged` ones), or None
    when only a range condition is hot: an entry without a key has no hot
    row, so at least one key must be asked for.

    When every key condition is on indexes in the key sets (and ``sets``),
    the rows of the matching sets: ``h.sid = ANY(the sets' ids)``, which
    the ``(sid, lo, hi, rid) INCLUDE (rng)`` B-tree answers alone; when
    every condition is on free keys (:func:`free_only`), the rows of the
    matching free keys' sets, ``h.kid = ANY(...)``, which the ``(kid,
    rid)`` B-tree answers alone; else the
    keys' GIN (``sets=False``: always the keys, for the planner's
    estimate, which it cannot make of the sets' ids, and for the first
    rids in rid order, a walk of the primary key).  ``ids``: the sets'
    ids found already (an ``integer[]``: :func:`count` gives them beside a
    kept count; or a list, :func:`set_ids`' answer), instead of finding
    them again."""
    if isinstance(ids, list):
        ids = q("{}::integer[]", ids)
    conditions = meaningful(conditions)
    keys = [c for c in conditions if not isinstance(c, Ranged)]
    if not keys:
        return None
    ranged = [c.fragment for c in conditions if isinstance(c, Ranged)]
    if sets and _in_sets(keys):
        # (no ``h.cid``: the sets are the catalog's, and a condition on a
        # column the B-tree does not hold would visit every row)
        if ids is None and _on_path(conditions):
            # beside a subtree: the rows read from the path's B-tree
            # (``(path) INCLUDE (sid, ...)``), each row's set looked up in
            # a hash of the matching sets' ids, made once (a hashed
            # SubPlan).  ``IS TRUE`` keeps PostgreSQL from making the IN a
            # join: it cannot know how many sets match (thousands,
            # estimated at one), and joined each set to the subtree's
            # range, or each set's rows, visited for their path (58 ms
            # instead of 5 at 100,000 entries).  An array of the ids found
            # first cost a round trip, and milliseconds of planning when
            # the planner estimates it element by element.
            chosen = q("(h.sid IN (SELECT s.sid FROM {} s WHERE {})) IS TRUE",
                       schema.HOT_SETS_TABLE,
                       and_(q("s.cid = {}", cid),
                            *[c.on_sets() for c in keys]))
        else:
            chosen = q("h.sid = ANY({})",
                       sets_matching(cid, keys) if ids is None else ids)
        return and_(chosen, *ranged)
    if sets and ids is None and free_only(conditions):
        # tags alone: the rows of the matching free keys' sets, from the
        # ``(kid, rid)`` B-tree alone (no ``h.cid``, as above)
        return q("h.kid = ANY({})", sets_matching(cid, keys, free=True))
    return and_(q("h.cid = {}", cid), *(keys + ranged))


#: the hot row ``h``'s range has a start and no end (range class 1 of
#: ``pgcatalog_hot_class``; its start is not null then)
OPEN = q("h.hi = " + str(BIGINT_MAX))
#: the hot row ``h``'s range has an end or another shape (range class 2):
#: the predicate of the partial index ``pgcatalog_hot_closed``, spelled as
#: it is there so that the planner uses the index
CLOSED = q("(h.hi <> %d OR h.rng IS NOT NULL)" % BIGINT_MAX)


class OnPath(Ranged):
    """A path index's condition over the hot row's copy of its entry's
    path (``h.path``, schema version 13): a subtree beside key
    conditions, read from the ``(path) INCLUDE (sid, lo, hi, rid, rng)``
    B-tree alone.  Never counted from the sets' counts.

    Built when a plan reads it (:meth:`resolved`): building may ask, with
    the search's statement, whether an entry lies outside the site
    (indexes/path/search.py), which only plans reading the hot rows need.
    ``build()`` gives the subtrees (disjoint conditions, one range each),
    TRUE (every entry), or None when the path column alone cannot say it.
    The path index gives the same over the entries' column for a path
    search alone (``pgc_subtrees``)."""

    def __init__(self, build, parts=None):
        super().__init__(None if parts is None else or_(*parts))
        self.build = build
        #: the subtrees: disjoint conditions over the path, each one range
        self.parts = parts

    def resolved(self):
        """This condition, built; None when the hot row cannot say it;
        :data:`EVERYWHERE` when every entry meets it (the site root's
        path, which plone.restapi's search adds)."""
        parts = self.build()
        if parts is None:
            return None
        if parts is TRUE:
            return EVERYWHERE
        return OnPath(self.build, parts)

    def each(self):
        """One condition per subtree (their union is this one)."""
        return [OnPath(self.build, [part]) for part in self.parts]


#: a condition every entry meets: left out of the hot rows' conditions
EVERYWHERE = Ranged(TRUE)


def resolve_path(condition, reading):
    """A hot condition of a query with a path condition built
    (``reading``: the plan may read the hot rows) or dropped (None: the
    entries answer it); any other as it is."""
    if not isinstance(condition, OnPath):
        return condition
    return condition.resolved() if reading else None


def _on_path(conditions):
    return any(isinstance(c, OnPath) for c in conditions)


def meaningful(conditions):
    """The conditions but those every entry meets (:data:`EVERYWHERE`)."""
    return [c for c in conditions if c is not EVERYWHERE]


def kept(conditions):
    """Whether :func:`count` adds the key sets' kept counts for the hot
    conditions of a query (a few rows per set, whatever the number of
    matches), rather than counting the rows themselves."""
    conditions = meaningful(conditions)
    keys = [c for c in conditions if not isinstance(c, Ranged)]
    ranged = [c for c in conditions if isinstance(c, Ranged)]
    return bool(keys) and len(ranged) <= 1 and \
        all(c.counted for c in ranged) and _in_sets(keys)


def count(cid, conditions):
    """A statement of one row ``(n, first)`` for the hot conditions of a
    query (as :func:`where` takes them): ``n`` the number of hot rows
    matching, ``first`` a lower bound of their rids (where a walk of the
    primary key for the first of them may start; null when none match);
    a kept count (:func:`kept`) gives a third column, ``ids``, the matching
    sets' ids (for ``where(..., ids=...)``).
    None when only a range condition is hot.

    When every key condition is on indexes in the key sets, ``n`` adds
    the counts of the matching sets (``pgcatalog_hot_counts``: a few rows
    per set, whatever the number of matches), and ``first`` is the least
    rid the sets ever received.  With a range condition holding a term
    ``T``, the open ranges of those sets (class 1) are counted and those
    starting after ``T`` taken off (the rows of the sets' B-tree from
    ``(sid, T)`` on: those published later than ``T``, few on a live
    site), and the other ranges (class 2: an end, or another shape; the
    partial index ``pgcatalog_hot_closed``) are counted one by one.  Else
    the rows are counted from the keys, and ``first`` is the bigint's
    least value."""
    conditions = meaningful(conditions)
    keys = [c for c in conditions if not isinstance(c, Ranged)]
    if not keys:
        return None
    ranged = [c for c in conditions if isinstance(c, Ranged)]
    if not kept(conditions):
        # (the free keys' sets, when they say it: from their B-tree alone)
        return q("SELECT count(*), {}::bigint FROM {} WHERE {}", BIGINT_MIN,
                 schema.FROM_HOT,
                 where(cid, conditions, sets=free_only(conditions)))
    # the sets' ids are found once (a materialized CTE; a sub-select in
    # FROM would be found again for each use)
    classes, minus, plus = kept_range_parts(ranged)
    total = q("coalesce(sum(k.n){}, 0)",
              q(" FILTER (WHERE {})", classes) if classes else q(""))
    if minus is not None:
        total = q("{} - (SELECT count(*) FROM {} WHERE {} AND {}) + (SELECT "
                  "count(*) FROM {} WHERE {} AND {})", total,
                  schema.FROM_HOT, KEPT_SET, minus, schema.FROM_HOT,
                  KEPT_SET, plus)
    return q("WITH i AS MATERIALIZED (SELECT {} AS ids) SELECT ({})::bigint, "
             "min(k.first), (SELECT i.ids FROM i) AS ids FROM {} k WHERE "
             "k.sid = ANY((SELECT i.ids FROM i)::integer[])",
             sets_matching(cid, keys), total, schema.HOT_COUNTS_TABLE)


#: the hot row ``h`` is in one of the key sets of CTE ``i`` (``ids``)
KEPT_SET = q("h.sid = ANY((SELECT i.ids FROM i)::integer[])")


def kept_range_parts(ranged):
    """How a count from the key sets' kept counts ``k`` (per set and range
    class ``k.cls``) meets the range conditions ``ranged`` (at most one,
    see :func:`count`): ``(classes, minus, plus)``, the condition on
    ``k.cls`` of the kept counts to add (None: every class), and the
    conditions on the hot rows ``h`` of the sets (:data:`KEPT_SET`) to
    count one by one and take off (``minus``) or add (``plus``); both None
    when no row is counted one by one.  With a term ``T``: the open
    ranges (class 1), those starting after ``T`` taken off, the others
    (class 2) that hold ``T`` added."""
    if not ranged:
        return None, None, None
    if ranged[0].present:
        return q("k.cls > 0"), None, None
    term = ranged[0].term
    return (q("k.cls = 1"), q("h.lo > {} AND {}", term, OPEN),
            q("{} AND {}", CLOSED, ranged[0].fragment))


# -- registering ------------------------------------------------------------
def sync(session, cid, index, refill_now=True):
    """Register ``index``'s hot keys for catalog ``cid`` when it is
    eligible, unregister them else (in the transaction).  A change of the
    catalog's hot names computes the hot rows of its entries again, now,
    or, with ``refill_now`` false, when the caller calls :func:`refilled`
    (once for several indexes: at 1,000,000 entries each computation
    rewrites every hot row).  Returns whether the hot names changed."""
    if eligible(index):
        return register(session, cid, index, refill_now)
    return unregister(session, cid, index.getId(), index, refill_now)


def refilled(session, cid):
    """Compute the hot rows of catalog ``cid`` again after changes of its
    hot names (``refill_now`` false)."""
    refill(session, cid)
    session.changed_hot_keys(cid)


def register(session, cid, index, refill_now=True):
    name, multi = index.getId(), bool(index.pgc_multi)
    kind = index.pgc_hot_kind
    # (a range or a sort index gives the row no key)
    in_set = kind not in ONE_PER_ROW and name not in set_excluded()
    if ready(index, cid) and kept_in(index, cid) == (
            "sets" if in_set else "free"):
        # registered, in the transaction that marked this index object
        # (another kind under the name is another object)
        return False
    rows = session.execute(q(
        "SELECT name, code, kind, multi, in_set FROM {} WHERE cid = {}",
        schema.HOT_NAMES_TABLE, cid)).fetchall()
    if kind in ONE_PER_ROW and any(k == kind and n != name
                                   for n, _c, k, _m, _s in rows):
        # the row keeps one range index and one sort index: this one is
        # answered from the entries
        return unregister(session, cid, name, index, refill_now)
    codes = {n: c for n, c, _k, _m, _s in rows}
    mine = codes.get(name)
    if mine is None:
        # the smallest number no other hot index of the catalog has
        taken = set(codes.values())
        mine = next(str(n) for n in range(1, len(taken) + 2)
                    if str(n) not in taken)
    same = (name, mine, kind, multi, in_set) in set(rows)
    if not same:
        session.execute_write(cid, q(
            "INSERT INTO {} (cid, name, multi, code, kind, in_set) VALUES "
            "({}, {}, {}, {}, {}, {}) ON CONFLICT (cid, name) DO UPDATE SET "
            "multi = EXCLUDED.multi, code = EXCLUDED.code, kind = "
            "EXCLUDED.kind, in_set = EXCLUDED.in_set",
            schema.HOT_NAMES_TABLE, cid, name, multi, mine, kind, in_set))
    changed = not same or not ready(index, cid)
    if changed and refill_now:
        refilled(session, cid)
    # else: only this object's record of the sets was missing (a catalog
    # upgraded to schema version 9, which filled the sets by the default,
    # or 18, which filled the free keys' rows)
    _mark(index, cid, mine, in_set)
    return changed


#: the kinds of index a hot row keeps one value of (the catalog's first
#: registered, by name)
ONE_PER_ROW = ("range", "sort")


def unregister(session, cid, name, index=None, refill_now=True):
    gone = bool(session.execute_write(cid, q(
        "DELETE FROM {} WHERE cid = {} AND name = {} RETURNING 1",
        schema.HOT_NAMES_TABLE,
        cid, name)).fetchall())
    if gone and refill_now:
        refilled(session, cid)
    if index is not None:
        _mark(index, cid, None, False)
    return gone


def prune(session, cid, keep, refill_now=True):
    """Unregister the hot keys of catalog ``cid``'s indexes not in
    ``keep`` (names).  Returns whether any went (see :func:`sync`)."""
    changed = False
    for (name,) in session.execute(q(
            "SELECT name FROM {} WHERE cid = {}", schema.HOT_NAMES_TABLE,
            cid)).fetchall():
        if name not in keep:
            changed = unregister(session, cid, name, None,
                                 refill_now) or changed
    return changed


def _mark(index, cid, code, in_set):
    """Record on ``index`` its ``code`` in catalog ``cid`` (None: it has
    no keys there) and whether its keys are in the key sets."""
    codes = dict(index._pgc_hot_codes or {})
    if codes.get(cid) != code:
        if code is None:
            codes.pop(cid, None)
        else:
            codes[cid] = code
        index._pgc_hot_codes = codes
    # True: in the key sets; False: in the free keys' rows (version 18)
    sets = dict(index._pgc_hot_sets or {})
    wanted = None if code is None else bool(in_set)
    if sets.get(cid) != wanted:
        if wanted is None:
            sets.pop(cid, None)
        else:
            sets[cid] = wanted
        index._pgc_hot_sets = sets


def refill(session, cid):
    """Compute the hot rows of catalog ``cid``'s entries again (after its
    hot names changed)."""
    _recompute(session, cid, q(""))


def _recompute(session, cid, only):
    """Write the hot rows of catalog ``cid``'s entries (``only``: a
    condition on the entry ``e``, or empty) as their values make them."""
    session.execute_write(cid, q(
        "WITH k AS (SELECT e.rid, e.cid, e.path, pgcatalog_hot_keys(e.cid, "
        "e.idx) AS keys, b.lo, b.hi, b.rng, pgcatalog_hot_sort(e.cid, e.idx) "
        "AS srt FROM {} e, LATERAL pgcatalog_hot_bounds(e.cid, e.idx) b "
        "WHERE e.cid = {}{}), "
        "gone AS (DELETE FROM {} h USING k WHERE h.rid = k.rid AND "
        "cardinality(k.keys) = 0) "
        "INSERT INTO {} AS h (rid, cid, keys, lo, hi, rng, sid, path, kid, "
        "srt) SELECT k.rid, k.cid, k.keys, k.lo, k.hi, k.rng, "
        "pgcatalog_hot_set(k.cid, k.keys), k.path, pgcatalog_hot_free_set("
        "k.cid, k.keys), k.srt FROM "
        "k WHERE cardinality(k.keys) > 0 ON CONFLICT (rid) DO UPDATE SET "
        "keys = EXCLUDED.keys, lo = EXCLUDED.lo, hi = EXCLUDED.hi, rng = "
        "EXCLUDED.rng, sid = EXCLUDED.sid, path = EXCLUDED.path, kid = "
        "EXCLUDED.kid, srt = EXCLUDED.srt WHERE (h.keys, h.lo, h.hi, h.rng, "
        "h.sid, h.path, h.kid, h.srt) IS DISTINCT FROM (EXCLUDED.keys, "
        "EXCLUDED.lo, EXCLUDED.hi, EXCLUDED.rng, EXCLUDED.sid, EXCLUDED.path, "
        "EXCLUDED.kid, EXCLUDED.srt)", schema.ENTRIES_TABLE,
        cid, only, schema.HOT_TABLE, schema.HOT_TABLE))


def refresh(session, cid, rids):
    """Compute the hot rows of catalog ``cid``'s entries ``rids`` again,
    and drop hot rows of ``rids`` without an entry (verify's repair)."""
    rids = list(rids)
    session.execute_write(cid, q(
        "DELETE FROM {} h WHERE h.cid = {} AND h.rid = ANY({}::bigint[]) AND "
        "NOT EXISTS (SELECT 1 FROM {} e WHERE e.rid = h.rid)",
        schema.HOT_TABLE, cid, rids, schema.ENTRIES_TABLE))
    _recompute(session, cid, q(" AND e.rid = ANY({}::bigint[])", rids))


def recount(session, cid):
    """Count catalog ``cid``'s hot rows by key set (and free key) again
    (``pgcatalog_hot_counts``, ``pgcatalog_hot_key_counts``; verify's
    repair).  Writers meanwhile add their +1 / -1 rows, which stay right
    beside this snapshot's count."""
    session.execute_write(cid, q(
        "DELETE FROM {} WHERE cid = {}", schema.HOT_COUNTS_TABLE, cid))
    session.execute_write(cid, q(
        "INSERT INTO {} (cid, sid, cls, n, first) {}", schema.HOT_COUNTS_TABLE,
        counted(cid)))
    session.execute_write(cid, q(
        "DELETE FROM {} WHERE cid = {}", schema.HOT_KEY_COUNTS_TABLE, cid))
    session.execute_write(cid, q(
        "INSERT INTO {} (cid, sid, cls, key, n) {}",
        schema.HOT_KEY_COUNTS_TABLE, key_counted(cid)))


def counted(cid):
    """Catalog ``cid``'s hot rows counted by key set and range class, as
    ``pgcatalog_hot_counts`` should add them up: ``(cid, sid, cls, n,
    first)``, ``first`` their least rid."""
    return q("SELECT h.cid, h.sid, pgcatalog_hot_class(h.lo, h.hi, h.rng) "
             "AS cls, count(*) AS n, min(h.rid) AS first FROM {} h WHERE "
             "h.cid = {} AND h.sid IS NOT NULL GROUP BY 1, 2, 3",
             schema.HOT_TABLE, cid)


def key_counted(cid):
    """Catalog ``cid``'s hot rows counted by key set, range class and free
    key, as ``pgcatalog_hot_key_counts`` should add them up: ``(cid, sid,
    cls, key, n)``."""
    return q("SELECT h.cid, h.sid, pgcatalog_hot_class(h.lo, h.hi, h.rng) "
             "AS cls, k.k AS key, count(*) AS n FROM {} h JOIN {} f ON f.kid "
             "= h.kid, unnest(f.keys) AS k(k) WHERE h.cid = {} AND h.sid IS "
             "NOT NULL GROUP BY 1, 2, 3, 4", schema.HOT_TABLE,
             schema.HOT_FREE_SETS_TABLE, cid)
