"""Search plans: one small class per way of answering a search.

The compiler (``compiler.py``) picks a plan and gives it the composed
conditions and sort keys; the plan owns its statement(s) and the decoding of
their rows into a result sequence (``results.py``):

- :class:`Page`: a batch of a sorted or unsorted answer (LIMIT/OFFSET);
  the total is counted only when ``actual_result_count`` is read;
- :class:`EveryMatch`: every match, in rid order (ZCatalog's unsorted
  order);
- :class:`UnlimitedSort`: every match, sorted, with ZCatalog's choice of
  algorithm mirrored (see its docstring);
- :class:`RelevancePage` and :class:`Relevance`: text searches without
  ``sort_on``, ordered by Okapi BM25 score (a page scored in SQL; every
  match scored only when a brain is first read); :class:`TextRelevance`
  when one text index takes part (matched and scored in one pass over its
  text rows, joined to the entries for the other conditions);
- :class:`PythonSorted`: a sort index Python must order (GopipIndex).

``run(tool, store)`` executes a plan: ``store`` runs statements in the
transaction (``store.py``), ``tool`` makes the brains.  Search statements
are not prepared: PostgreSQL plans each with its values (an unnamed
statement), because the values decide the plan (a rare or a common
portal_type; a top-N that an index can give when the filters keep most
entries).  A prepared statement switches to a generic plan after five runs,
which measured 0.9 -> 24 ms for a date-ordered page at 10,000 entries.
The exception is a lookup of one value of a unique index (a UID): one
index lookup whatever the value, prepared (``compiler.unique_lookup``).
"""

from plone.pgcatalog import estimates
from plone.pgcatalog import schema
from plone.pgcatalog.fragment import and_
from plone.pgcatalog.fragment import ident
from plone.pgcatalog.fragment import join
from plone.pgcatalog.fragment import literal
from plone.pgcatalog.fragment import q
from plone.pgcatalog.indexes.base import MISSING
from plone.pgcatalog import lazy
from plone.pgcatalog.results import Answer
from plone.pgcatalog.results import Scores
from plone.pgcatalog.results import by_relevance
from plone.pgcatalog.results import results_for
from plone.pgcatalog.store import ENTRIES
from plone.pgcatalog.store import META
from plone.pgcatalog.store import SORT_INDEX_SIZE_CAP


RID = q("e.rid")
RID_DESC = q("e.rid DESC")
#: the text rows as the entries ``e`` of a text search's only condition
#: (their rid and catalog id are the entry's)
TEXT_ROWS = q("{} e", ident(schema.TEXT))
#: the text rows ``tr`` of a text search joined to their entries ``e`` (the
#: search's other conditions)
TEXT_JOINED = q("{} tr JOIN {} ON e.rid = tr.rid", ident(schema.TEXT),
                ENTRIES)
#: the text rows ``tr`` of a text search joined to their hot rows ``h``
#: (every other condition of the search is hot: hot.py)
TEXT_HOT = q("{} tr JOIN {} h ON h.rid = tr.rid", ident(schema.TEXT),
             ident(schema.HOT))
#: the rid of the text row ``tr``
TEXT_RID = q("tr.rid")
#: the score of a match ``tr`` read word by word (:func:`postings`)
POSTINGS_SCORE = q("tr.score")


def postings(statement):
    """The matches ``tr`` (``rid``, ``score``) of a union of many words read
    word by word (``statement``: scoring.postings_sql) as a TextRelevance
    source."""
    return q("({}) tr", statement)


def estimated_entries(store, where):
    """PostgreSQL's estimate of the entries meeting ``where`` (an EXPLAIN,
    no row read)."""
    return estimates.rows(store, q(
        "EXPLAIN (FORMAT JSON) SELECT 1 FROM {} WHERE {}", ENTRIES, where))


def postings_joined(statement):
    """The matches ``tr`` of a union read word by word (as
    :func:`postings`) joined to their entries ``e``, for the search's
    other conditions."""
    return q("{} JOIN {} ON e.rid = tr.rid", postings(statement), ENTRIES)


def among_hot(condition):
    """The match ``tr`` is among the hot rows ``h`` meeting ``condition``:
    a semi-join the planner hashes (the hot rows of the matching sets,
    from their B-tree) rather than a look-up of each match's hot row.
    ``h.rid + 0`` is what makes it so: the planner cannot estimate how
    many rows a union's grouping gives (164 for 60,658), and looked each
    up (334 ms, against 218 hashed, at 100,000 entries)."""
    return q("tr.rid IN (SELECT h.rid + 0 FROM {} h WHERE {})",
             ident(schema.HOT), condition)


#: Cost of a match kept by conditions on the entries, in microseconds
#: (100,000 entries, warm): its entry looked up by rid (the primary key,
#: then the row: 174 ms for 60,658 matches of a glob beside
#: ``is_folderish``), or an entry meeting the conditions read once and
#: hashed (the 95,000 entries of ``is_folderish=False`` read by a scan:
#: 66 ms)
ENTRY_LOOKUP_US = 3.0
ENTRY_HASHED_US = 1.0
#: Most rows on either side of that hash: PostgreSQL hashes the side it
#: estimates smaller (a union's grouping, estimated at a few hundred rows
#: whatever its size), in ``work_mem`` (4 MB by default, twice that for a
#: hash).  Past it the hash spills to disk in batches: a glob's 606,251
#: matches beside ``is_folderish`` at 1,000,000 entries took 6.3 s hashed
#: against 5.6 looked up.
HASHED_ROWS_MAX = 100000


def entries_hashed(matches, entries):
    """Whether ``matches`` (the matches to keep, as estimated) are kept at
    less cost among the ``entries`` meeting the other conditions
    (PostgreSQL's estimate), read once and hashed (:func:`among_entries`),
    than by a look-up of each match's entry; never when either side
    would not fit in memory (HASHED_ROWS_MAX)."""
    return entries * ENTRY_HASHED_US < matches * ENTRY_LOOKUP_US \
        and max(matches, entries) <= HASHED_ROWS_MAX


def among_entries(condition):
    """The match ``tr`` is among the entries ``e`` meeting ``condition``:
    a semi-join the planner hashes (the entries read once, by their own
    indexes or a scan), rather than a look-up of each match's entry.  As
    in :func:`among_hot`, ``e.rid + 0`` keeps the planner from turning it
    into a look-up per match (a union's grouping is estimated at a few
    hundred rows whatever its size)."""
    return q("tr.rid IN (SELECT e.rid + 0 FROM {} WHERE {})", ENTRIES,
             condition)


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


def _fetch(store, statement, prepare=False):
    return store.execute(statement, prepare=prepare, binary=True).fetchone()


#: a small answer of a lookup, or of a listing sorted in Python, comes
#: with its brains' metadata when it has no more than this many matches
#: (results.FIRST_WINDOW: what the first brain read would fetch)
SMALL_WITH_METADATA = 32


def with_small_metadata(statement, columns, rids, paths=True, first=None,
                        when=None, fence=False):
    """``statement`` (one row of ``columns`` columns, column ``rids`` the
    matches' rids) followed by, when there are no more than
    ``SMALL_WITH_METADATA`` matches, their rids, paths and metadata (the
    brains a caller reads next, without a second statement); else nulls,
    at no cost.  ``paths`` False: the statement gives the paths already,
    rids and metadata only follow (no join to the entries: planned in
    about 0.1 ms).

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
            ident(schema.HOT), META)
        wanted = q("s.{}[1:{}]", found, literal(int(first)))
        if when is not None:
            wanted = q("CASE WHEN {} THEN {} END", when, wanted)
        wanted = q("ANY({})", wanted)
    else:
        if paths:
            columns, source = q("w.r, w.p, w.m"), q(
                "SELECT array_agg(e.rid) AS r, array_agg(e.path) AS p, "
                "array_agg(m.meta::text) AS m FROM {} LEFT JOIN {} ON "
                "m.rid = e.rid WHERE e.rid", ENTRIES, META)
        else:
            columns, source = q("w.r, w.m"), q(
                "SELECT array_agg(m.rid) AS r, array_agg(m.meta::text) AS "
                "m FROM {} WHERE m.rid", META)
        wanted = q("ANY(s.{}) AND cardinality(s.{}) <= {}", found, found,
                   literal(SMALL_WITH_METADATA))
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


class Plan:
    """``answer(store)`` is what the plan finds (an Answer, cacheable);
    ``run(tool, store)`` the result sequence over it."""

    cacheable = True

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
    (results.PGLazyMap), or known at once when the page is the tail."""

    def __init__(self, where, order, window, count=None, source=None):
        self.b_start = window.b_start
        self.b_size = window.b_size
        if source is None:
            page = q("SELECT e.rid, e.path FROM {} WHERE {} ORDER BY {} "
                     "LIMIT {} OFFSET {}", ENTRIES, where, order, self.b_size,
                     self.b_start)
        else:
            # the page's rids walked in the hot rows (``source``, ``where``
            # and ``order`` over ``h``: :func:`hot_sorted`), their paths
            # read for the page only
            page = q("SELECT h.rid, (SELECT e.path FROM {} WHERE e.rid = "
                     "h.rid) AS path FROM (SELECT h.rid FROM {} WHERE {} "
                     "ORDER BY {} LIMIT {} OFFSET {}) h", ENTRIES, source,
                     where, order, self.b_size, self.b_start)
        self.with_metadata = self.b_size <= PAGE_WITH_METADATA
        if self.with_metadata:
            # the page's rows keep their order through a projection (a
            # scalar sub-select per row, no join to reorder them)
            self.statement = q(
                "SELECT p.rid, p.path, (SELECT m.meta::text FROM {} WHERE "
                "m.rid = p.rid) FROM ({}) p", META, page)
        else:
            self.statement = q("SELECT ARRAY(SELECT p.rid FROM ({}) p)",
                               page)
        # the total from the hot rows when they answer the query (``count``:
        # hot.count's statement); a Page walking the hot rows is given the
        # entries' count (``count``, a statement of one value)
        if source is not None:
            self.count = count
        elif count is None:
            self.count = q("SELECT count(*) FROM {} WHERE {}", ENTRIES, where)
        else:
            self.count = q("SELECT k.n FROM ({}) k(n, first)", count)

    def answer(self, store):
        if self.with_metadata:
            rows = store.execute(self.statement, prepare=False,
                                 binary=True).fetchall()
            rids = [row[0] for row in rows]
            meta = {row[0]: (row[1], row[2]) for row in rows}
            for rid, (path, _meta) in meta.items():
                store.paths[rid] = path
        else:
            rids = _fetch(store, self.statement)[0] or []
            meta = None
        if len(rids) < self.b_size and (rids or not self.b_start):
            # the page is the tail (or nothing matched): total known
            answer = Answer(rids, self.b_start + len(rids))
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

    def __init__(self, where, source=ENTRIES, rid=RID, head=None,
                 prepare=False, keys_where=None, counted=False,
                 whole_where=None):
        # ``source``: the entries ``e``; or, when every condition is
        # theirs, the hot rows ``h`` (hot.py) or the text rows ``e``
        #: every match (count, rids): a big answer's rest (lazy.py)
        self.every = q("SELECT count(*), array_agg({}) FROM {} WHERE {}",
                       rid, source, where)
        self.statement = with_small_metadata(self.every, 2, 1) \
            if prepare else self.every
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
        #: (the head comes with its first brains' metadata; every rid,
        #: unordered, without)
        self.either = with_small_metadata(q(
            "SELECT k.n, CASE WHEN k.n <= {} THEN ARRAY(SELECT {} FROM {} "
            "WHERE {}) ELSE {} END FROM ({}) k(n, first)",
            literal(lazy.WHOLE_COUNTED), rid, source, whole_where or where,
            walk, head), 2, 1, first=FIRST_WITH_METADATA, fence=True,
            when=q("s.c0 > {}", literal(lazy.WHOLE_COUNTED))) \
            if head is not None and counted else None
        #: the plan does not depend on the values (compiler.unique_lookup):
        #: prepared, PostgreSQL may keep a generic plan
        self.prepare = prepare

    def matches(self, store):
        """``(count, rids, small)``: ``small``, the metadata of a small
        answer of a prepared lookup (:func:`keep_small_metadata`'s
        arguments), or ()."""
        row = _fetch(store, self.statement, self.prepare)
        rids = row[1] or []
        rids.sort(reverse=self.descending)
        return row[0], rids, row[2:]

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
            if small:
                keep_small_metadata(store, answer, *small)
            return answer
        if self.either is not None:
            row = _fetch(store, self.either)
            count, rids = row[:2]
            if count <= lazy.WHOLE_COUNTED:
                # every rid, as the scan found them
                rids.sort(reverse=self.descending)
                return Answer(rids, len(rids))
        else:
            row = _fetch(store, self.head)
            count, rids = row[:2]
        answer = Answer(rids, count)
        if count > len(rids):
            answer.rest = self.every
            if rids:
                answer.window = self.window
        _keep_first_metadata(store, answer, row[2:])
        return answer


#: relevance order (ZCatalog's byValue: score descending, equal scores newest
#: rid first), for the ordered aggregates of the statements that score every
#: match; PostgreSQL sorts once for both (Python's sort of the pairs cost
#: 26 ms for 23,810 matches, PostgreSQL's about 4)
RELEVANCE_ORDER = q("ORDER BY s.score DESC, s.rid DESC")


def _relevance(ranks):
    return join(" + ", [q("COALESCE({}, 0)", r) for r in ranks])


class Relevance(EveryMatch):
    """A text search without a page: match now, score when a brain is
    first read (``len()`` of a text search never pays for relevance).
    Scores are computed once per row (OFFSET 0 keeps the subquery from
    being flattened into several evaluations) and ordered by PostgreSQL
    (``RELEVANCE_ORDER``); the rank expressions only read ``e.rid``, so
    the matched rids are enough."""

    descending = True

    def __init__(self, where, ranks):
        super().__init__(where)
        self.rank = _relevance(ranks)

    def scoring(self, rids):
        return q("SELECT array_agg(s.rid {}), array_agg(s.score {}) FROM "
                 "(SELECT e.rid, ({})::float8 AS score FROM unnest("
                 "{}::bigint[]) AS e(rid) OFFSET 0) s", RELEVANCE_ORDER,
                 RELEVANCE_ORDER, self.rank, rids)

    def answer(self, store):
        count, rids, _small = self.matches(store)
        return Answer(rids, count, scoring=self.scoring)


def _scored(where, rank, source, rid):
    """A statement of ``(rid, score)`` per match of ``where`` over
    ``source``.  ``rank``: the score, a Fragment over the rows, or
    ``(columns, score)`` (scoring.rank_columns): what the score reads of
    the text row, read in the scan, and the score over it (``s``), without
    a sub-select per row."""
    if isinstance(rank, tuple):
        columns, rank = rank
        return q("SELECT s.rid, ({})::float8 AS score FROM (SELECT {} AS "
                 "rid, {} FROM {} WHERE {} OFFSET 0) s", rank, rid, columns,
                 source, where)
    return q("SELECT {} AS rid, ({})::float8 AS score FROM {} WHERE {}",
             rid, rank, source, where)


def _scored_page(scored, window):
    """One row: the number of matches, the page's rids and scores in
    relevance order, the best score of every match (what the scores are
    normalized by); each match scored once (a materialized CTE).  A page
    of up to ``PAGE_WITH_METADATA`` comes with its brains' metadata
    (:func:`with_small_metadata`)."""
    page = q(
        "WITH s AS MATERIALIZED ({}) SELECT (SELECT count(*) FROM s), "
        "array_agg(p.rid ORDER BY p.score DESC, p.rid DESC), "
        "array_agg(p.score ORDER BY p.score DESC, p.rid DESC), "
        "(SELECT max(s.score) FROM s) FROM (SELECT * FROM s ORDER BY "
        "s.score DESC, s.rid DESC LIMIT {} OFFSET {}) p",
        scored, window.b_size, window.b_start)
    if window.b_size <= PAGE_WITH_METADATA:
        return with_small_metadata(page, 4, 1, first=window.b_size)
    return page


def _page_answer(store, statement):
    row = _fetch(store, statement)
    count, rids, raw, top = row[:4]
    rids = rids or []
    # normalized by the best score of every match, not of the page
    scores = Scores(dict(zip(rids, raw or [])), top or 0)
    answer = Answer(rids, count, scores)
    _keep_first_metadata(store, answer, row[4:])
    return answer


#: the first brains of a head, and of every match sorted in PostgreSQL,
#: come with the answer: the window a first brain read would fetch
#: (results.FIRST_WINDOW)
FIRST_WITH_METADATA = 32


def _keep_first_metadata(store, answer, columns):
    """Keep the metadata read with the answer: ``columns``, the rids,
    paths and metadata :func:`with_small_metadata` added (``first``), or
    nothing."""
    if len(columns) == 3 and columns[0]:
        keep_small_metadata(store, answer, *columns)


class TextRelevance(Plan):
    """A search by relevance with one text index, matched and scored in one
    pass over its text rows (the score reads the row it matched instead of
    looking it up again), ordered as Relevance orders; every match, or a
    page (``window``).

    ``source``: the text rows alone as ``e`` (``TEXT_ROWS``: the text
    condition is the search's only one; their rid and catalog id are the
    entry's), or joined to their entries (``TEXT_JOINED``: the text rows
    ``tr``, the entries ``e`` for the search's other conditions), or to
    their hot rows when the other conditions are all hot (``TEXT_HOT``:
    ``h``); ``rid`` the match's rid there.  ``rank``: the score of the text row, a
    Fragment or ``(columns, score)`` (see :func:`_scored`).

    Text + filters (12,542 text matches of 100,000 entries, 8,123 kept by
    ``allowedRolesAndUsers`` and ``effectiveRange``): matched on the
    entries and then scored by a look-up per match, 57 + 31 ms; joined
    and scored in the scan, 73 ms; joined to the hot rows (the key sets'
    ids given as an array PostgreSQL can estimate: a hash of the text
    matches probed by the sets' B-tree), 49-57 ms in SQL."""

    def __init__(self, where, rank, source=TEXT_ROWS, rid=RID, window=None):
        scored = _scored(where, rank, source, rid)
        self.window = window
        if window is not None:
            self.statement = _scored_page(scored, window)
            return
        # (no first brains' metadata here: joined to this statement, it
        # cost about as much as the window a first brain read fetches,
        # 0.8-1.0 ms at 100,000 entries, and a count would pay it)
        self.statement = q(
            "SELECT count(*), array_agg(s.rid {}), array_agg(s.score {}) "
            "FROM ({} OFFSET 0) s", RELEVANCE_ORDER, RELEVANCE_ORDER, scored)

    def answer(self, store):
        if self.window is not None:
            return _page_answer(store, self.statement)
        row = _fetch(store, self.statement)
        count, rids, raw = row[:3]
        ordered, scores = by_relevance(rids, raw)
        answer = Answer(ordered, count, scores)
        _keep_first_metadata(store, answer, row[3:])
        return answer


class RelevancePage(Plan):
    """A page of a text search by relevance (rank computed once per
    matching entry, the count and the best score read from the same
    scored matches); equal scores by descending rid, as ZCatalog's
    ``byValue`` (newest entry first)."""

    def __init__(self, where, ranks, window):
        self.statement = _scored_page(
            _scored(where, _relevance(ranks), ENTRIES, RID), window)

    def answer(self, store):
        return _page_answer(store, self.statement)


class UnlimitedSort(Plan):
    """Every match, sorted (no ``b_size`` / ``sort_limit``).

    ZCatalog's sortResults then picks its algorithm by the size of the
    first sort index: when the matches outnumber its distinct values
    (``rlen > len(index) * (rlen / 100 + 1)``, low-cardinality indexes,
    small sites) it walks the index's values, so (1) documents with equal
    keys stay in ascending rid order in *both* directions, and (2)
    ``actual_result_count`` still counts the matches without a sort key.
    The statement counts both (``FILTER``); :meth:`run` decides (it asks
    the store for the index's size) and runs ``ties`` for case (1).  With
    several sort indexes, ties keep ascending rid order in both algorithms;
    the walk's other departures (documents lacking a secondary key kept)
    are not mirrored: the sort contract applies."""

    def __init__(self, where, order, presents, sort_indexes, reverse):
        keyed = and_(*presents)

        def select(tie):
            return q("SELECT count(*), array_agg(e.rid ORDER BY {}) FILTER "
                     "(WHERE {}), count(*) FILTER (WHERE {}) FROM {} "
                     "WHERE {}", join(", ", list(order) + [tie]), keyed,
                     keyed, ENTRIES, where)

        tie = tie_break(reverse)
        # with the metadata of the first brains (their window: a listing
        # renders its first page)
        self.statement = with_small_metadata(
            select(tie), 3, 1, first=FIRST_WITH_METADATA)
        self.iterate_index = None
        self.ties = None
        if len(sort_indexes) == 1:
            self.iterate_index = sort_indexes[0]
            if tie is not RID:
                self.ties = with_small_metadata(
                    select(RID), 3, 1, first=FIRST_WITH_METADATA)

    def answer(self, store):
        row = _fetch(store, self.statement)
        rlen, rids, keyed = row[:3]
        rids = rids or []
        count = keyed
        index = self.iterate_index
        if index is not None and rlen and (
                keyed < rlen or self.ties is not None):
            size = self.walkable_size(index, store)
            if size is not None and rlen > size * (rlen / 100 + 1):
                count = rlen
                if self.ties is not None and keyed > 1:
                    row = _fetch(store, self.ties)
                    rids = row[1] or []
        answer = Answer(rids, count)
        _keep_first_metadata(store, answer, row[3:])
        return answer

    @staticmethod
    def walkable_size(index, store):
        """``len(index)`` (its distinct values) as ZCatalog's sortResults
        sees it, counted up to SORT_INDEX_SIZE_CAP; cached while the
        catalog is unchanged.  None for the kinds ZCatalog cannot walk
        that way as it walks an UnIndex (several keys or none per
        document, BooleanIndex's one-sided BTree): their answers follow
        the sort contract (zcatalog-contract.md §9)."""
        if not index.pgc_walkable_sort:
            return None
        return store.stamped(
            ("sort-index-size", index.getId()),
            lambda: store.distinct_values(index, SORT_INDEX_SIZE_CAP),
            names=(index.getId(),))


def _sortable(value):
    return (0,) if value is None else (1, value)


class PythonSorted(Plan):
    """Sorting needs Python (GopipIndex positions come from the folders):
    fetch rid, path and the SQL sort keys of every match as arrays (one
    row), then sort as ZCatalog's sortResults: entries without a key are
    left out; one sort index orders (key, rid) pairs, several sort
    stably."""

    def __init__(self, conditions, sort_keys, sort_indexes, reverse,
                 window):
        self.sort_indexes = sort_indexes
        self.reverse = reverse
        self.b_start = window.b_start
        self.b_size = window.b_size
        conditions = list(conditions)
        ranks = []
        for index, (keys, present) in zip(sort_indexes, sort_keys):
            if index.pgc_python_sort:
                continue
            # the rank of the entry's key in the SQL order of *all* the
            # sort expressions: Python sorts these integers, ties stay ties
            ranks.append(q("dense_rank() OVER (ORDER BY {})",
                           join(", ", keys)))
            if present is not None:
                conditions.append(present)
        columns = join("", [q(", {} AS {}", r, _column(n))
                            for n, r in enumerate(ranks)])
        inner = q("SELECT e.rid, e.path{} FROM {} WHERE {}", columns,
                  ENTRIES, and_(*conditions))
        aggregates = join("", [q(", array_agg(s.{})", _column(n))
                               for n in range(len(ranks))])
        # arrays in any (but the same) order: put in rid order in Python
        # (a short listing with its brains' metadata: the paths are here)
        self.statement = with_small_metadata(q(
            "SELECT array_agg(s.rid), array_agg(s.path){} FROM ({}) s",
            aggregates, inner), 2 + len(ranks), 0, paths=False)

    def answer(self, store):
        row = _fetch(store, self.statement)
        rids = row[0] or []
        paths = row[1] or []
        sql_keys = row[2:-2]
        meta_rids, metas = row[-2:]
        small = None
        if meta_rids is not None:
            # (an entry without metadata has none: None)
            meta_of = dict(zip(meta_rids, metas))
            small = (rids, paths, [meta_of.get(rid) for rid in rids])
        if rids:
            # rid order (the order ties keep, as in ZCatalog's sort)
            order = sorted(range(len(rids)), key=rids.__getitem__)
            rids = [rids[i] for i in order]
            paths = [paths[i] for i in order]
            sql_keys = [[keys[i] for i in order] if keys else keys
                        for keys in sql_keys]
        reorder = PositionOrder(
            [(index.getId() if index.pgc_python_sort else None)
             for index in self.sort_indexes], self.reverse, self.b_start,
            self.b_size, rids, paths, sql_keys)
        answer = Answer(*reorder(self.sort_indexes))
        answer.reorder = reorder
        if small is not None:
            keep_small_metadata(store, answer, *small)
        return answer


class PositionOrder:
    """The Python half of a :class:`PythonSorted` answer: the matches (rid
    order, with their SQL sort keys) put in order with the folders'
    positions *as they are now*, as GopipIndex reads them at sort time.
    A cached answer is ordered again on every hit (positions change
    without catalog writes: ``moveObjectsByDelta(...,
    suppress_events=True)``), from this transaction's folders.  Holds no
    persistent object: the sort indexes are named and looked up in the
    catalog of the transaction ordering."""

    def __init__(self, python_names, reverse, b_start, b_size, rids, paths,
                 sql_keys):
        self.python_names = python_names
        self.reverse = reverse
        self.b_start = b_start
        self.b_size = b_size
        self.rids = rids
        self.paths = paths
        self.sql_keys = sql_keys
        #: (the folders' order token, the order it gave): one folder's
        #: listing is sorted again only when that folder's order changed
        self.memo = None

    def size(self):
        return 120 * len(self.rids) + sum(len(p) for p in self.paths)

    def __call__(self, sort_indexes):
        """``(rids of the batch, count)``, ordered by ``sort_indexes``
        (the catalog's index objects, in the query's order)."""
        rids, paths = self.rids, self.paths
        sql_keys = iter(self.sql_keys)
        columns = []
        for index, name in zip(sort_indexes, self.python_names):
            if name is not None:
                pos = index.pgc_positions(paths)
                columns.append([pos.get(p, MISSING) for p in paths])
            else:
                columns.append(next(sql_keys) or [])
        if len(columns) == 1:
            keyed = [(_sortable(k), rid) for k, rid in zip(columns[0], rids)
                     if k is not MISSING]
            keyed.sort(reverse=self.reverse[0])
        else:
            keyed = [(keys, rid) for keys, rid in zip(zip(*columns), rids)
                     if MISSING not in keys]
            # stable multi-pass sort: last key first, each with its
            # direction
            for n in reversed(range(len(columns))):
                keyed.sort(key=lambda item: _sortable(item[0][n]),
                           reverse=self.reverse[n])
        rids = [rid for _, rid in keyed]
        count = len(rids)
        if self.b_size is not None:
            rids = rids[self.b_start:self.b_start + self.b_size]
        return rids, count

    def again(self, catalog):
        """``(rids, count)`` with the positions of ``catalog``'s
        transaction."""
        indexes = [catalog.getIndex(name) if name is not None else None
                   for name in self.python_names]
        tokens = tuple(index.pgc_order_token(self.paths)
                       for index in indexes if index is not None)
        if None in tokens:
            return self(indexes)
        memo = self.memo
        if memo is not None and memo[0] == tokens:
            return memo[1]
        ordered = self(indexes)
        self.memo = (tokens, ordered)
        return ordered


def _column(n):
    return ident("k%d" % n)
