"""A search from the query dict to the result sequence.

The tool hands over a merged query (CMFPlone's security additions made);
this module asks the result cache (``cache.py``), and applies ZCatalog's
batch contract around the compiled plan:
batch arguments PostgreSQL's LIMIT / OFFSET cannot take (negative, huge, of
the wrong type) get the whole answer and ZCatalog's own treatment.  Each
search that reaches PostgreSQL is timed here (:func:`answer_of`) for the
slow-query log (``slowlog.py``).
"""
import time

from plone.pgcatalog.errors import CatalogStatementTimeout
from plone.pgcatalog.search import keptmeta
from plone.pgcatalog.search import slowlog
from plone.pgcatalog.search.cache import key_for
from plone.pgcatalog.search.compiler import compile_search
from plone.pgcatalog.search.exclusion import cannot_match
from plone.pgcatalog.search.lazy import LazyRids
from plone.pgcatalog.search.query import BatchWindow
from plone.pgcatalog.search.query import batch_window
from plone.pgcatalog.search.query import make_query
from plone.pgcatalog.search.query import reverse_for
from plone.pgcatalog.search.query import sort_indexes_for
from plone.pgcatalog.search.query import unbatched
from plone.pgcatalog.search.query import unsorted
from plone.pgcatalog.search.results import empty_result
from plone.pgcatalog.search.results import results_for
from plone.pgcatalog.search.results import slice_results


def search(tool, store, query):
    """The result sequence of ``query`` on ``tool``'s catalog: from the
    result cache when it holds the answer (no statement), else from the
    compiled plan (the answer kept when its snapshot allows, see
    cache.py)."""
    window = batch_window(query)
    if not window.in_sql:
        return _outside_sql_window(tool, store, query, window)
    return results_for(tool, _answer(tool, store, query, window))


def _answer(tool, store, query, window, keyed=None):
    """The answer of ``query``: the result cache's, or the compiled
    plan's (kept when its snapshot allows); ``keyed``, ``key_for``'s
    answer when the caller has it."""
    cache, key = keyed or key_for(tool, store, query)
    if key is not None:
        answer = cache.get(key)
        if answer is None:
            answer = cache.still(key, store.counters)
        if answer is not None and (
                answer.rest is None or
                store.snapshot_complete(store.cache_generation)):
            # (a big answer's rest is read in this transaction's snapshot:
            # it must hold exactly the cached state, lazy.py)
            return answer.reordered(tool._catalog)
        store.expect_fill()
    answer = answer_of(tool, store, query, window)
    if key is not None:
        refusal = store.fill_refusal(store.cache_generation)
        if refusal is None:
            answer.tag_meta(store.counters.seq)
            answer.tseq = store.counters.tseq
            answer.judge = cannot_match(tool._catalog, query)
            cache.put(key, answer)
            cache.meta.put(keptmeta.scope(store), answer.meta)
        else:
            cache.refused(refusal)
    return answer


def matching_rids(tool, store, query):
    """Every rid ``query`` matches, in no order (its sort and batch keys
    left out), as a search finds them (the result cache included)."""
    query = unsorted(unbatched(query))
    return _rids(_answer(tool, store, query, batch_window(query)), store)


def _rids(answer, store):
    if answer.rest is not None:
        return list(LazyRids(answer, store).read())
    return list(answer.rids)


def matches_of(tool, store, query):
    """``query``'s matches (its sort and batch keys left out) as facet
    counts read them: the rids of the result cache's answer when it holds
    it, else the compiled plan's statement of every match's rid (a
    Fragment: counted in PostgreSQL, the ids never sent to Python and
    back), else the rids the plan answers."""
    query = unsorted(unbatched(query))
    window = batch_window(query)
    keyed = cache, key = key_for(tool, store, query)
    if key is None or cache.get(key) is None:
        plan = compile_search(tool._catalog, query, store, window)
        if plan.matched is not None and not plan.assumed_inside:
            return plan.matched
    return _rids(_answer(tool, store, query, window, keyed), store)


def answer_of(tool, store, query, window):
    """The compiled plan's answer, timed (compiling included) for the
    slow-query log."""
    started = time.perf_counter()
    plan = None
    try:
        store.assumptions.start()
        try:
            plan = compile_search(tool._catalog, query, store, window)
        finally:
            store.assumptions.stop()
        answer = plan.answer(store)
        if store.assumptions.wrong():
            # rows were assumed (key sets' ids, a glob's words) that this
            # snapshot does not hold: again, with those it holds
            plan = compile_search(tool._catalog, query, store, window)
            answer = plan.answer(store)
        if any(store.entries_outside(path)
               for path in plan.assumed_inside):
            # a subtree was read as one range, but an entry lies outside
            # the site (asked with the statement): again, knowing it
            plan = compile_search(tool._catalog, query, store, window)
            answer = plan.answer(store)
    except CatalogStatementTimeout:
        slowlog.timed(store, query, plan, started, error="timeout")
        raise
    slowlog.timed(store, query, plan, started, answer)
    return answer


def run(tool, store, query, window):
    return results_for(tool, answer_of(tool, store, query, window))


def _outside_sql_window(tool, store, query, window):
    """Batch arguments LIMIT / OFFSET cannot take: the whole answer, then
    ZCatalog's own treatment (its error when something matched; Python's
    slice)."""
    catalog = tool._catalog
    # ZCatalog's first steps raise before the batch arguments are read
    sort_indexes = sort_indexes_for(catalog, query)
    if sort_indexes is not None:
        reverse_for(query, sort_indexes)
    make_query(catalog, query)
    results = run(tool, store, unbatched(query), BatchWindow())
    if window.error is not None:
        if not len(results):
            return results
        if sort_indexes:
            # ZCatalog's count of matches, documents without a sort key
            # included
            rlen = len(run(tool, store, unsorted(unbatched(query)),
                           BatchWindow()))
            if window.sorted_bail_out(rlen):
                return empty_result(rlen)
        raise window.error
    if window.b_size is None:
        return results
    return slice_results(results, window.b_start, window.b_size)
