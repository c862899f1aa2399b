"""Search plans: one small class per way of answering a search, and the SQL
they share.

The compiler (``compiler.py``) picks a plan and gives it the composed
conditions and sort keys; the plan owns its statement(s) and the decoding of
their rows into a result sequence (``results.py``).  This module holds the
base class and the plans that read matches without scoring or sorting them
in Python, with the pieces of SQL every plan composes (the rid order and
its tie break, a union of disjoint ranges, the brains' metadata read with
the answer):

- :class:`Page`: a batch of a sorted or unsorted answer (LIMIT/OFFSET);
  the total is counted only when ``actual_result_count`` is read;
- :class:`EveryMatch`: every match, in rid order (ZCatalog's unsorted
  order);
- :class:`Empty`: nothing can match.

The plans of a text search by relevance are in ``relevance.py``
(``Relevance``, ``TextRelevance``, ``RelevancePage``); the plans of every
match sorted, in PostgreSQL or in Python, in ``sorting.py``
(``UnlimitedSort``, ``PythonSorted``).  Both build on this module.

``run(tool, store)`` executes a plan: ``store`` runs statements in the
transaction (``store.py``), ``tool`` makes the brains.  PostgreSQL plans
a search statement with its values (an unnamed statement), because the
values decide the plan (a rare or a common portal_type; a top-N that an
index can give when the filters keep most entries).  A prepared statement
switches to a generic plan after five runs, which measured 0.9 -> 24 ms
for a date-ordered page at 10,000 entries; on a small catalog, where the
planning costs more than the plan, each statement text is timed both ways
and runs the faster way (``preparing.py``).  A lookup of one value of a
unique index (a UID) is always prepared: one index lookup whatever the
value (``compiler.unique_lookup``).
"""

from plone.pgcatalog.pg import estimates
from plone.pgcatalog.pg.facetcounts import Matched
from plone.pgcatalog.pg.fragment import ident
from plone.pgcatalog.pg.fragment import join
from plone.pgcatalog.pg.fragment import literal
from plone.pgcatalog.pg.fragment import q
from plone.pgcatalog.schema import tables as schema
from plone.pgcatalog.search import lazy
from plone.pgcatalog.search import preparing
from plone.pgcatalog.search.results import FIRST_WINDOW
from plone.pgcatalog.search.results import Answer
from plone.pgcatalog.search.results import results_for

RID = q("e.rid")
RID_DESC = q("e.rid DESC")


def union_of(alias, source, conditions):
    """The rids of the rows of ``source`` (alias ``alias``, a constant)
    meeting any of ``conditions``, which no row meets two of (disjoint
    subtrees), as a source of that alias: a UNION ALL, each branch read on
    its own (one range of a path B-tree each)."""
    return q("({}) " + alias, join(" UNION ALL ", [
        q("SELECT " + alias + ".rid FROM {} WHERE {}", source, where)
        for where in conditions]))


def tie_break(reverse):
    """Order of entries with equal sort keys, as ZCatalog's sortResults:
    one sort index sorts (key, rid) pairs, so ties follow the sort
    direction; several sort indexes sort stably on the keys only, so ties
    keep the result set's ascending rid order.  (ZCatalog's rids, like
    ours, grow in indexing order.)"""
    if len(reverse) == 1 and reverse[0]:
        return RID_DESC
    return RID


def fetch_row(store, statement, prepare=None):
    """The one row of ``statement`` (read in binary; ``prepare``: as a
    prepared statement, or not; None: a search statement, prepared where
    that measured faster, ``preparing.py``)."""
    if prepare is None:
        return preparing.execute(store, statement, preparing.one)
    return store.execute(statement, prepare=prepare, binary=True).fetchone()


#: a small answer of a lookup, or of a listing sorted in Python, comes
#: with its brains' metadata when it has no more than this many matches
#: (what the first brain read would fetch)
SMALL_WITH_METADATA = FIRST_WINDOW


def with_small_metadata(statement, columns, rids, paths=True, first=None,
                        when=None, fence=False, small=SMALL_WITH_METADATA):
    """``statement`` (one row of ``columns`` columns, column ``rids`` the
    matches' rids) followed by, when there are no more than ``small``
    matches (default ``SMALL_WITH_METADATA``), their rids, paths and
    metadata (the brains a caller reads next, without a second
    statement); else nulls, at no cost.  ``paths`` False: the statement
    gives the paths already, rids and metadata only follow (no join to
    the entries: planned in about 0.1 ms).

    For prepared statements, or without ``paths``: the join to the
    entries costs about 0.5 ms of planning (their expression indexes),
    which a generic plan pays once (a UID lookup with its brain: 0.8 ->
    0.24 ms), and an unprepared statement each time, as much as the window
    of metadata it saves.

    ``first``: the paths and metadata of the first ``first`` rids of
    column ``rids`` however many there are (the window the first brain
    read would fetch: an answer in an order known here, whose first page
    is rendered; the paths from the hot rows, whatever ``paths`` says);
    ``when``: only when this condition on the row's columns (``s.c0``...)
    holds (the rids are then in the answer's order).  ``fence``: the
    statement is materialized first (a row that is no aggregate, such as
    a head's ``ARRAY(...)``, would be pulled up into the join and its
    sub-selects run again; an aggregate's is not, and materializing its
    arrays would cost more than the join)."""
    names = join(", ", [ident("c%d" % n) for n in range(columns)])
    found = ident("c%d" % rids)
    if first is not None:
        # the paths from the hot rows (narrow, planned in little time:
        # the entries' expression indexes cost about 0.3 ms of planning
        # and their rows a visit); a match without a hot row (no hot key)
        # is left to the window its brain reads
        columns, source = q("w.r, w.p, w.m"), q(
            "SELECT array_agg(hr.rid) AS r, array_agg(hr.path) AS p, "
            "array_agg(m.meta::text) AS m FROM {} hr LEFT JOIN {} ON "
            "m.rid = hr.rid WHERE hr.path IS NOT NULL AND hr.rid",
            schema.HOT_TABLE, schema.FROM_META)
        wanted = q("s.{}[1:{}]", found, literal(int(first)))
        if when is not None:
            wanted = q("CASE WHEN {} THEN {} END", when, wanted)
        wanted = q("ANY({})", wanted)
    else:
        if paths:
            columns, source = q("w.r, w.p, w.m"), q(
                "SELECT array_agg(e.rid) AS r, array_agg(e.path) AS p, "
                "array_agg(m.meta::text) AS m FROM {} LEFT JOIN {} ON "
                "m.rid = e.rid WHERE e.rid", schema.FROM_ENTRIES,
                schema.FROM_META)
        else:
            columns, source = q("w.r, w.m"), q(
                "SELECT array_agg(m.rid) AS r, array_agg(m.meta::text) AS "
                "m FROM {} WHERE m.rid", schema.FROM_META)
        wanted = q("ANY(s.{}) AND cardinality(s.{}) <= {}", found, found,
                   literal(int(small)))
    if fence:
        return q("WITH s({}) AS MATERIALIZED ({}) SELECT s.*, {} FROM s "
                 "LEFT JOIN LATERAL ({} = {}) w ON true", names, statement,
                 columns, source, wanted)
    return q("SELECT s.*, {} FROM ({}) s({}) LEFT JOIN LATERAL ({} = {}) w "
             "ON true", columns, statement, names, source, wanted)


def keep_small_metadata(store, answer, rids, paths, metas):
    """Give ``answer`` the metadata of its rids ``rids`` (their paths and
    metadata, None for an entry without metadata), and the transaction
    their paths."""
    if not rids:
        return
    known = store.known
    for rid, path, meta in zip(rids, paths, metas):
        store.paths[rid] = path
        if meta is not None:
            known.add(path)
        answer.meta[rid] = (path, meta)


#: the first brains of a head, and of every match sorted in PostgreSQL,
#: come with the answer: the window a first brain read would fetch
FIRST_WITH_METADATA = FIRST_WINDOW


def keep_first_metadata(store, answer, columns):
    """Keep the metadata read with the answer: ``columns``, the rids,
    paths and metadata :func:`with_small_metadata` added (``first``), or
    nothing."""
    if len(columns) == 3 and columns[0]:
        keep_small_metadata(store, answer, *columns)


class Plan:
    """``answer(store)`` is what the plan finds (an Answer, cacheable);
    ``run(tool, store)`` the result sequence over it."""

    cacheable = True
    #: the subtrees' paths the plan read as one range each, right while no
    #: entry lies outside the site (compiler.compile_search; run.py asks)
    assumed_inside = ()
    #: the matches as statements (facetcounts.Matched: what facet counts
    #: read them from without sending their ids), or None when the plan
    #: has none
    matched = None

    def answer(self, store):  # pragma: no cover - abstract
        raise NotImplementedError

    def run(self, tool, store):
        return results_for(tool, self.answer(store))


class Empty(Plan):
    """Nothing can match (ZCatalog's short circuit)."""

    def answer(self, store):
        return Answer([], 0)


#: a page up to this size comes with its brains' metadata (one statement
#: for the search and the page a listing renders)
PAGE_WITH_METADATA = 50


class Page(Plan):
    """A batch: its rids now (a top-N the planner can take from an index)
    and, for a small page, the metadata its brains show (read in the same
    statement: rendering the page costs no second round trip); the total
    (``actual_result_count``) only when someone asks for it
    (results.PGLazyMap), or known at once when the page is the tail; a
    page of a batch (``BatchWindow.batched``) is counted with it, in the
    same round trip when that costs little (``ride``, the compiler says:
    the key sets' kept counts add it, or the catalog is small); else its
    total is counted when first read, as a page that is not a batch's: a
    caller that does not show the total should not pay for reading every
    match (at 1,000,000 entries an anonymous listing's 303,987 matches:
    700 ms for a page of 1.3)."""

    def __init__(self, where, order, window, count=None, source=None,
                 ride=False):
        self.b_start = window.b_start
        self.b_size = window.b_size
        self.batched = window.batched
        if source is None:
            page = q(
    "SELECT e.rid, e.path FROM {} WHERE {} ORDER BY {} "
    "LIMIT {} OFFSET {}",
    schema.FROM_ENTRIES,
    where,
    order,
    self.b_size,
     self.b_start)
        else:
            # the page's rids walked in the hot rows (``source``, ``where``
            # and ``order`` over ``h``: :func:`hot_sorted`), their paths
            # read for the page only
            page = q(
    "SELECT h.rid, (SELECT e.path FROM {} WHERE e.rid = "
    "h.rid) AS path FROM (SELECT h.rid FROM {} WHERE {} "
    "ORDER BY {} LIMIT {} OFFSET {}) h",
    schema.FROM_ENTRIES,
    source,
    where,
    order,
    self.b_size,
     self.b_start)
        self.with_metadata = self.b_size <= PAGE_WITH_METADATA
        if self.with_metadata:
            # the page's rows keep their order through a projection (a
            # scalar sub-select per row, no join to reorder them)
            self.statement = q(
                "SELECT p.rid, p.path, (SELECT m.meta::text FROM {} WHERE "
                "m.rid = p.rid) FROM ({}) p", schema.FROM_META, page)
        else:
            self.statement = q("SELECT ARRAY(SELECT p.rid FROM ({}) p)",
                               page)
        # the total from the hot rows when they answer the query (``count``:
        # hot.count's statement); a Page walking the hot rows is given the
        # entries' count (``count``, a statement of one value)
        if source is not None:
            self.count = count
        elif count is None:
            self.count = q(
    "SELECT count(*) FROM {} WHERE {}",
    schema.FROM_ENTRIES,
     where)
        else:
            self.count = q("SELECT k.n FROM ({}) k(n, first)", count)
        self.ride = ride and self.count is not None

    def answer(self, store):
        counted = []
        if self.batched and self.ride:
            # planned with its values (never a generic plan)
            store.session.ride(self.count, counted.extend)
        if self.with_metadata:
            rows = preparing.execute(store, self.statement,
                                     preparing.every)
            rids = [row[0] for row in rows]
            meta = {row[0]: (row[1], row[2]) for row in rows}
            for rid, (path, _meta) in meta.items():
                store.paths[rid] = path
        else:
            rids = fetch_row(store, self.statement)[0] or []
            meta = None
        if len(rids) < self.b_size and (rids or not self.b_start):
            # the page is the tail (or nothing matched): total known
            answer = Answer(rids, self.b_start + len(rids))
        elif counted:
            answer = Answer(rids, counted[0][0], counting=self.count)
        else:
            answer = Answer(rids, None, counting=self.count)
        if meta:
            answer.meta.update(meta)
        return answer


class EveryMatch(Plan):
    """Every match in rid order (ZCatalog's unsorted order; descending for
    a text search's deferred relevance order): read in whatever order the
    plan likes, sorted in Python afterwards (the rows lie in about rid
    order, so the sort is a near-linear pass).  An ORDER BY here made
    PostgreSQL walk the primary key and fetch the rows one by one: 205 ->
    100 ms for 51,906 of 100,000 entries.

    With ``head`` (the hot rows, whose narrow rows make a walk in rid
    order cheap; ``head`` is hot.count's statement, which counts them and
    bounds their first rid): the count and the first ``lazy.HEAD`` rids in
    rid order (a walk of the primary key from that bound),
    the rest read when first needed (lazy.py); an answer of up to HEAD
    matches is whole at once.  The head costs a second walk of the rows
    (in rid order, or a second bitmap scan and sort when the matches are
    few), which a mid-size answer reads faster whole in the count's scan:
    so an answer PostgreSQL estimates at no more than ``lazy.WHOLE``
    matches is read whole (an EXPLAIN, kept a minute: estimates.py; measured at
    1,000,000 entries, two tags with 19,245 matches: 38 -> 26 ms).  The
    estimate only chooses how to read; both ways give the same answer.
    When ``head`` adds the key sets' kept counts (``counted``), the
    number is known before any row is read, and one statement chooses:
    every rid when it is at most ``lazy.WHOLE_COUNTED``, else the head
    (no EXPLAIN, no second round trip; the count costs nothing there, so
    only a small answer is read whole).
    An every-match answer from the entries is read whole: walking their
    wide rows in rid order for a head can cost a full scan when the
    matches are few or lie late."""

    descending = False

    def __init__(self, where, source=schema.FROM_ENTRIES, rid=RID, head=None,
                 prepare=False, keys_where=None, counted=False,
                 whole_where=None, kept=None):
        # ``source``: the entries ``e``; or, when every condition is
        # theirs, the hot rows ``h`` (hot.py) or the text rows ``e``;
        # ``kept``: the hot conditions, when the sets' kept counts count
        # the matches (hot.kept; facet counts read them per set)
        #: every match (count, rids): a big answer's rest (lazy.py)
        self.every = q("SELECT count(*), array_agg({}) FROM {} WHERE {}",
                       rid, source, where)
        self.matched = Matched(
            q("SELECT {} AS rid FROM {} WHERE {}", rid, source, where),
            where if source == schema.FROM_HOT else None, kept)
        if prepare:
            self.statement = with_small_metadata(self.every, 2, 1)
        elif self.descending:
            self.statement = self.every
        else:
            # with the metadata of the first brains in rid order (the
            # window the first brain read would fetch: a listing renders
            # its first page), their rids taken from the matches (a top-N,
            # not a sort of every rid)
            self.statement = with_small_metadata(q(
                "SELECT k.n, k.r, ARRAY(SELECT x.rid FROM unnest(k.r) AS "
                "x(rid) ORDER BY x.rid LIMIT {}) FROM ({}) k(n, r)",
                literal(FIRST_WITH_METADATA), self.every), 3, 2,
                first=FIRST_WITH_METADATA, fence=True)
        # ``keys_where``: the same matches in a form the planner can
        # estimate and walk in rid order (hot.where's keys form, when
        # ``where`` counts key sets)
        keys_where = keys_where or where
        # the first HEAD rids, walked in rid order from the count's bound
        walk = q("ARRAY(SELECT {} FROM {} WHERE {} AND {} >= k.first ORDER "
                 "BY {} LIMIT {})", rid, source, keys_where, rid, rid,
                 literal(lazy.HEAD))
        #: the next rids after the head, a window at a time (lazy.py)
        self.window = (lambda last, n: q(
            "SELECT ARRAY(SELECT {} FROM {} WHERE {} AND {} > {} ORDER BY {} "
            "LIMIT {})", rid, source, keys_where, rid, int(last), rid,
            int(n))) if head is not None else None
        # (with the metadata of the first brains: the head is in rid order)
        self.head = with_small_metadata(
            q("SELECT k.n, {} FROM ({}) k(n, first)", walk, head), 2, 1,
            first=FIRST_WITH_METADATA, fence=True) \
            if head is not None else None
        self.estimate = q("EXPLAIN (FORMAT JSON) SELECT {} FROM {} WHERE {}",
                          rid, source, keys_where) \
            if head is not None else None
        #: ``head``'s count is kept (hot.kept): the count, and every rid
        #: when they are at most lazy.WHOLE_COUNTED, else the head, in one
        #: statement (a CASE runs only the sub-select of its branch;
        #: ``whole_where``: ``where`` over the count's columns, the key
        #: sets' ids it found)
        #: (with the metadata of the first brains in rid order: the
        #: head's, or every rid's least, a top-N of them; OFFSET 0: the
        #: rids read once, not again for the first ones)
        self.either = with_small_metadata(q(
            "SELECT w.n, w.r, CASE WHEN w.n <= {} THEN ARRAY(SELECT x.rid "
            "FROM unnest(w.r) AS x(rid) ORDER BY x.rid LIMIT {}) ELSE "
            "w.r[1:{}] END FROM (SELECT k.n, CASE WHEN k.n <= {} THEN "
            "ARRAY(SELECT {} FROM {} WHERE {}) ELSE {} END FROM ({}) k(n, "
            "first) OFFSET 0) w(n, r)",
            literal(lazy.WHOLE_COUNTED), literal(FIRST_WITH_METADATA),
            literal(FIRST_WITH_METADATA), literal(lazy.WHOLE_COUNTED), rid,
            source, whole_where or where, walk, head), 3, 2,
            first=FIRST_WITH_METADATA, fence=True) \
            if head is not None and counted else None
        #: the plan does not depend on the values (compiler.unique_lookup):
        #: prepared, PostgreSQL may keep a generic plan
        self.prepare = prepare

    def matches(self, store):
        """``(count, rids, small)``: ``small``, the metadata of a small
        answer of a prepared lookup (:func:`keep_small_metadata`'s
        arguments), or ()."""
        row = fetch_row(store, self.statement, self.prepare or None)
        rids = row[1] or []
        rids.sort(reverse=self.descending)
        if self.prepare:
            return row[0], rids, row[2:]
        return row[0], rids, row[3:]

    def estimated(self, store):
        """PostgreSQL's estimate of the number of matches."""
        return estimates.rows(store, self.estimate)

    def small(self, store, counted=False):
        """Whether to read the answer whole: PostgreSQL estimates it at
        no more than ``lazy.WHOLE`` matches.  No EXPLAIN when the hot rows
        of every catalog are well under that (a small site: one round trip
        less per search; their number is PostgreSQL's statistics', grown
        by half for what was written since they were taken).  Never when
        the count is ``counted`` (kept: :attr:`either` chooses, in SQL,
        by ``lazy.WHOLE_COUNTED``)."""
        if counted:
            return False
        rows = store.hot_rows()
        if rows is not None and rows * 1.5 <= lazy.WHOLE:
            return True
        return self.estimated(store) <= lazy.WHOLE

    def answer(self, store):
        if self.head is None or self.small(store, self.either is not None):
            count, rids, small = self.matches(store)
            answer = Answer(rids, count)
            if self.prepare:
                if small:
                    keep_small_metadata(store, answer, *small)
            else:
                keep_first_metadata(store, answer, small)
            return answer
        if self.either is not None:
            row = fetch_row(store, self.either)
            count, rids = row[:2]
            metadata = row[3:]
            if count <= lazy.WHOLE_COUNTED:
                # every rid, as the scan found them
                rids = rids or []
                rids.sort(reverse=self.descending)
                answer = Answer(rids, len(rids))
                keep_first_metadata(store, answer, metadata)
                return answer
        else:
            row = fetch_row(store, self.head)
            count, rids = row[:2]
            metadata = row[2:]
        answer = Answer(rids, count)
        if count > len(rids):
            answer.rest = self.every
            if rids:
                answer.window = self.window
        keep_first_metadata(store, answer, metadata)
        return answer
