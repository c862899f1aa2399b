"""The query compiler: a ZCatalog query dict -> a search plan.

It follows ``Products.ZCatalog.Catalog.Catalog.searchResults/search`` step
by step (sort index resolution, make_query, one IndexQuery per index in
ZCatalog's order, the batch contract) but, instead of intersecting sets in
Python, it asks each index kind for its condition (a Fragment) and lets
PostgreSQL plan the whole query.  It only chooses a plan (``plans.py``,
``relevance.py``, ``sorting.py``) and composes the fragments; what a query
option means is the index kind's business (``indexes/interfaces.py``).
"""
from Products.PluginIndexes.interfaces import IQueryIndex
from Products.ZCatalog.query import IndexQuery

from plone.pgcatalog.indexes.common import NO_MATCH
from plone.pgcatalog.indexes.context import QueryContext
from plone.pgcatalog.indexes.interfaces import IHotConditionKind
from plone.pgcatalog.indexes.interfaces import IPythonSortKind
from plone.pgcatalog.indexes.interfaces import ISubtreeKind
from plone.pgcatalog.pg import hot
from plone.pgcatalog.pg import keptsets
from plone.pgcatalog.pg import textstats
from plone.pgcatalog.pg.fragment import TRUE
from plone.pgcatalog.pg.fragment import and_
from plone.pgcatalog.pg.fragment import join
from plone.pgcatalog.pg.fragment import literal
from plone.pgcatalog.pg.fragment import q
from plone.pgcatalog.schema import tables as schema
from plone.pgcatalog.search import langpage
from plone.pgcatalog.search import plans
from plone.pgcatalog.search import relevance
from plone.pgcatalog.search import sorting
from plone.pgcatalog.search import wordpage
from plone.pgcatalog.search.query import batch_window
from plone.pgcatalog.search.query import make_query
from plone.pgcatalog.search.query import parses_like_unindex
from plone.pgcatalog.search.query import query_languages
from plone.pgcatalog.search.query import query_names
from plone.pgcatalog.search.query import reverse_for
from plone.pgcatalog.search.query import sort_indexes_for
from plone.pgcatalog.search.query import unindex_prechecks


def compile_search(catalog, query, store, window=None):
    """The plan answering a merged query dict (after the tool's security
    additions) on the catalog of ``store``."""
    sort_indexes = sort_indexes_for(catalog, query)
    # an empty sort_on list still reads sort_order (ZCatalog does)
    reverse = reverse_for(query, sort_indexes) \
        if sort_indexes is not None else None

    query = make_query(catalog, query)
    qc = QueryContext(
        catalog, store.cid,
        text_stats=lambda name: textstats.stats(
            store, catalog.getIndex(name)),
        text_df=lambda name, tsquery: textstats.df(
            store, catalog.getIndex(name), tsquery),
        text_prefetch=lambda name, tsqueries: textstats.prefetch(
            store, catalog.getIndex(name), tsqueries),
        text_stats_kept=lambda name: textstats.kept_stats(
            store, catalog.getIndex(name)),
        text_df_kept=lambda name, tsquery: textstats.kept_df(
            store, catalog.getIndex(name), tsquery),
        text_words=lambda name, prefix, pattern: textstats.words(
            store, catalog.getIndex(name), prefix, pattern),
        text_queries=lambda statement: textstats.tsqueries(
            store, statement),
        languages=query_languages(query))
    # one index alone, sorting by nothing else: a path index may read a
    # subtree as one range (indexes/path/search.py), if no entry lies
    # outside the site; not known in this state of the transaction, that
    # is assumed, asked with the search's statement and checked after it
    # (search.answer_of)
    taking_part = [name for name, names in query_names(catalog)
                   if any(n in query for n in names)]
    qc.alone = len(taking_part) == 1 and all(
        index.getId() == taking_part[0] for index in sort_indexes or ())
    assumed = []

    def path_outside(path):
        if path in assumed:
            return False
        found = store.outside_known(path)
        if found is None:
            store.ride_outside(path)
            assumed.append(path)
            return False
        return found
    qc.path_outside = path_outside
    conditions = conditions_for(catalog, query, qc)
    if conditions is None:
        return plans.Empty()
    plan = _plan(query, store, window, sort_indexes, reverse, qc,
                 conditions)
    plan.assumed_inside = assumed
    return plan


class Condition:
    """One index's part in a search, made once by :func:`conditions_for`
    and read by every plan the compiler weighs:

    ``index``, ``iq``
        the index taking part and its parsed query (an IndexQuery; None
        for an index that parses none: GopipIndex);
    ``where``
        its condition over the entry ``e`` (a Fragment: TRUE when every
        entry meets it, the site root's path);
    ``hot_form``
        the same over the hot row ``h`` (IHotConditionKind.pgc_hot_where:
        a key condition, a hot.Ranged, a hot.OnPath), or None when the hot
        row cannot say it;
    ``text``
        the same over the index's text row (indexes.context.TextRow) when
        it is a text condition (the row its kind added to
        ``qc.text_rows`` while making ``where``), else None.

    The catalog's own condition (``e.cid = ...``) is none of them: the
    plan puts it first (:func:`_plan`)."""

    __slots__ = ("index", "iq", "where", "hot_form", "text")

    def __init__(self, index, iq, where, hot_form=None, text=None):
        self.index = index
        self.iq = iq
        self.where = where
        self.hot_form = hot_form
        self.text = text

    def __repr__(self):
        return "<Condition %s: %r%s%s>" % (
            self.index.getId(), self.where,
            "" if self.hot_form is None else " (hot)",
            "" if self.text is None else " (text)")

    @property
    def everywhere(self):
        """Every entry meets it: it narrows nothing."""
        return self.where is TRUE

    @property
    def on_path(self):
        """A path index's condition (a folder's, which may hold few)."""
        return self.index.pgc_storage == "path"

    def resolved(self, reading):
        """This condition with its path's form over the hot rows built
        (``reading``: the plan may read the hot rows) or dropped (None:
        the entries answer it): hot.resolve_path."""
        return Condition(self.index, self.iq, self.where,
                         hot.resolve_path(self.hot_form, reading), self.text)


def _plan(query, store, window, sort_indexes, reverse, qc, conditions):
    """The plan of the conditions (compile_search)."""
    if window is None:
        window = batch_window(query)
    if not window.in_sql:
        raise ValueError("batch arguments outside what LIMIT/OFFSET take: "
                         "the search slices such answers (BatchWindow)")
    # a path's form over the hot rows, for the plan reading them (every
    # match, unsorted, not by relevance): building it may ask, with the
    # search's first statement, whether an entry lies outside the site
    reading = not sort_indexes and not qc.ranks and window.b_size is None
    conditions = [c.resolved(reading) for c in conditions]
    hot_forms = [c.hot_form for c in conditions]
    # every condition answerable from the hot rows (hot.py): counts and
    # every-match answers read them instead of the entries
    hot_where = hot.where(store.cid, hot_forms) \
        if hot_forms and None not in hot_forms else None
    # the same over the keys: what the planner can estimate
    hot_keys = hot.where(store.cid, hot_forms, sets=False) \
        if hot_where is not None else None
    # their number (from the key sets' counts when they can say it)
    hot_count = hot.count(store.cid, hot_forms) \
        if hot_where is not None else None

    lookup = window.b_size is None and not sort_indexes and not qc.ranks \
        and unique_lookup(conditions)
    # the catalog's id spelled out for a prepared lookup: its generic plan
    # can then use a catalog's partial index (``WHERE cid = N``: a
    # DateIndex's, and a value index's until pgc_sync_indexes shares it)
    in_catalog = q("e.cid = {}", literal(int(store.cid)) if lookup
                   else store.cid)
    # the catalog's condition first, then the indexes' in ZCatalog's order
    wheres = [in_catalog] + [c.where for c in conditions]
    where = and_(*wheres)
    if sort_indexes:
        python_sort = [IPythonSortKind.providedBy(index)
                       for index in sort_indexes]
        sort_keys = [((), None) if python else sort_of(index, qc)
                     for index, python in zip(sort_indexes, python_sort)]
        if any(python_sort):
            return sorting.PythonSorted(wheres, sort_keys, sort_indexes,
                                        reverse, window)
        order, presents = [], []
        for (keys, present), rev in zip(sort_keys, reverse):
            if present is not None:
                presents.append(present)
            order.extend(q("{} DESC", key) if rev else key for key in keys)
        if window.b_size is None:
            return sorting.UnlimitedSort(where, order, presents,
                                         sort_indexes, reverse)
        order.append(plans.tie_break(reverse))
        where = and_(where, *presents)
        plan = hot_sorted(conditions, store, window, sort_indexes, reverse,
                          where, qc)
        if plan is not None:
            return plan
        return plans.Page(where, join(", ", order), window,
                          ride=small(store))
    if qc.ranks:
        plan = text_relevance(conditions, store, window, qc)
        if plan is not None:
            return plan
        if window.b_size is None:
            return relevance.Relevance(where, qc.rank_fragments())
        return relevance.RelevancePage(where, qc.rank_fragments(), window)
    if window.b_size is None:
        if hot_where is not None and any(
                isinstance(h, hot.OnPath) for h in hot_forms):
            return subtree_beside_keys(store, hot_forms, hot_where)
        if hot_where is not None:
            counted = hot.kept(hot_forms)
            return plans.EveryMatch(
                hot_where, source=schema.FROM_HOT, rid=hot.RID, head=hot_count,
                keys_where=hot_keys, counted=counted,
                # the sets' ids the kept count found
                whole_where=hot.where(store.cid, hot_forms,
                                      ids=q("k.ids")) if counted else None,
                kept=hot_forms if counted else None)
        trees = subtrees_alone(conditions, qc, store)
        if trees is not None:
            return trees
        if all(c.everywhere for c in conditions):
            # every entry of the catalog (a search for the site root's
            # path): counted, and its first rids walked in rid order (a
            # walk that keeps every row it reads), the rest read when
            # first needed
            return plans.EveryMatch(where, head=q(
                "SELECT count(*), {}::bigint FROM {} WHERE {}",
                hot.BIGINT_MIN, schema.FROM_ENTRIES, where))
        return plans.EveryMatch(where, prepare=lookup)
    return plans.Page(where, plans.RID, window, count=hot_count, ride=(
        hot_count is not None and hot.kept(hot_forms)) or small(store))


#: A catalog of fewer hot rows than this (PostgreSQL's statistics: every
#: catalog's) counts a page of a batch in the page's round trip whatever
#: the count reads (plans.Page): every match of the whole catalog counted
#: costs less than a round trip more.  In a bigger one only a count from
#: the key sets' kept counts goes with the page; at 100,000 entries the
#: entries of an anonymous listing counted with its page of 20: 1.5 ->
#: 80 ms (level1's ANON).
COUNT_RIDE_ROWS = 10000


def small(store):
    """Whether the catalog's database is small enough (COUNT_RIDE_ROWS)
    to count a page of a batch with the page, whatever the count reads."""
    rows = store.hot_rows()
    return rows is None or rows < COUNT_RIDE_ROWS


#: the hot rows (every catalog's, PostgreSQL's statistics: not known, not
#: reached) from which a page sorted by the hot sort index walks them
#: (:func:`hot_sorted`); 0: whatever their number
HOT_SORTED_ROWS = 30000


def hot_sorted(conditions, store, window, sort_indexes, reverse, where,
               qc):
    """A page sorted by the hot rows' sort index (hot.sorts: ``srt``,
    schema version 21) whose other conditions are hot ones in the key sets
    (a range one too) and text conditions: the page's rids walked in the
    ``(cid, srt, rid) INCLUDE (sid)`` B-tree, each row's set checked from
    the index tuple and the text matched by the row's rid, where the
    entries' walk visited each wide row (text + type + state by
    ``modified`` at 100,000 entries: 2,853 of them for a page of 20).
    The sets' ids are found first, so that PostgreSQL can estimate how many
    rows they hold (few: it reads them from the sets' B-tree and sorts
    them).  Or None: also on a small site (fewer than ``HOT_SORTED_ROWS``
    hot rows, PostgreSQL's statistics), where the entries' walk is short
    and the sets' ids cost more, a round trip (10,000 entries: 1.87
    against 1.57 ms; 100,000: 6.1-6.6 against 8.2-9.4 ms).  ``where``:
    the same conditions over the entries (the total's statement, run when
    ``actual_result_count`` is read)."""
    cid = store.cid
    if len(sort_indexes) != 1 or not hot.sorts(sort_indexes[0], cid):
        return None
    if HOT_SORTED_ROWS:
        rows = store.hot_rows()
        if rows is None or rows < HOT_SORTED_ROWS:
            return None
    keys, matched = [], []
    for c in conditions:
        if c.everywhere:
            continue
        if c.text is not None:
            matched.append(c.text.over(hot.RID))
        elif c.hot_form is None:
            return None
        else:
            keys.append(c.hot_form)
    found = hot.set_ids(cid, keys)
    if found is None:
        return None
    ids = found_ids(qc, store, found)[0] or []
    rows = and_(q("h.cid = {}", cid), q("h.srt IS NOT NULL"),
                hot.where(cid, keys, ids=ids), *matched)
    order = q("h.srt DESC, h.rid DESC") if reverse[0] else \
        q("h.srt, h.rid")
    return plans.Page(rows, order, window, source=schema.FROM_HOT,
                      count=q("SELECT count(*) FROM {} WHERE {}",
                              schema.FROM_ENTRIES, where))


def found_ids(qc, store, statement):
    """The row of a hot.set_ids ``statement``: the key sets' ids (and
    their rows' count), kept while no write could change them
    (keptsets.found_ids)."""
    indexes = qc.catalog._indexes.values()
    return keptsets.found_ids(store, statement,
                              hot.set_names(indexes, store.cid))


def subtree_beside_keys(store, hot_forms, hot_where):
    """Every match of a subtree beside key conditions (``hot_forms``: the
    conditions' forms over the hot row), counted and every rid read at
    once from the path's B-tree on the hot rows (hot.OnPath, hot.where);
    their rid order is made in Python, as for the entries' every-match
    answers."""
    path = [h for h in hot_forms if isinstance(h, hot.OnPath)][0]
    if len(path.parts) == 1:
        return plans.EveryMatch(hot_where, source=schema.FROM_HOT, rid=hot.RID)
    # several subtrees: one range each (an OR of them is read as a bitmap
    # of the rows, or a scan of the whole B-tree)
    return plans.EveryMatch(TRUE, source=plans.union_of("h", schema.FROM_HOT, [
        hot.where(store.cid, [tree if h is path else h for h in hot_forms])
        for tree in path.each()]), rid=hot.RID)


def subtrees_alone(conditions, qc, store):
    """Every match of a path search alone whose keys are several
    subtrees: one range of the (cid, path) B-tree each, from the index
    alone (an OR of the ranges is read as a bitmap of the entries, or a
    scan of the whole B-tree: 182-208 ms for two sections at 1,000,000
    entries); or None."""
    if not qc.alone or len(conditions) != 1:
        return None
    index, iq = conditions[0].index, conditions[0].iq
    found = index.pgc_subtrees(iq, qc) \
        if ISubtreeKind.providedBy(index) else None
    found = found.resolved() if found is not None else None
    if not isinstance(found, hot.OnPath) or len(found.parts) < 2:
        return None
    return plans.EveryMatch(TRUE, source=plans.union_of(
        "e", schema.FROM_ENTRIES, [and_(q("e.cid = {}", store.cid), part)
                                   for part in found.parts]))


def text_relevance(conditions, store, window, qc):
    """The plan reading a search by relevance from its one text index's
    rows (relevance.TextRelevance), or None.

    The text condition alone (and the catalog's, or a condition every
    entry meets): its text rows are the matches.  With other conditions:
    the text rows joined to their hot rows when the other conditions are
    all hot and in the key sets (the sets' ids found first, so that
    PostgreSQL can estimate how many rows they hold), else to their
    entries; for a page, or for every match
    when the score is read from the text row's columns (a union or a glob
    reads more of the row: every match is then scored only when a brain
    is read, relevance.Relevance).

    A union of words (a glob of several words) is read word by word instead
    (postings.postings_sql) when it is the only condition, or beside other
    conditions that keep enough of the documents for that to pay
    (``Postings.pays``): hot ones (the sets' kept counts, read with their
    ids), or conditions on the entries but a path (PostgreSQL's estimate:
    a language keeps most documents; beside a folder, which may hold few,
    the union is matched there and scored row by row).

    A search by language of words joined by AND, or of a prefix or words
    joined by OR, alone or beside hot conditions, reads its matches and
    scores from the language rows' postings (language.LanguagePostings)."""
    texts = [c.text for c in conditions if c.text is not None]
    if len(texts) != 1:
        return None
    cid = store.cid
    text = texts[0]
    page = window if window.b_size is not None else None
    postings = text.postings(cid)
    # a single word, from its index's kept postings when the database
    # keeps them (as this process last read: the statement asks itself)
    kept = text.kept_word(cid) if postings is None else None
    if kept is not None and \
            text.name not in textstats.postings_named(store):
        kept = None
    # a search by language whose matches its postings give
    lang = text.language_postings(cid)
    # the other conditions; one every entry meets (the site root's path,
    # which plone.restapi's search adds) is left out
    others = [c for c in conditions if c.text is None and not c.everywhere]
    # beside a folder's path
    beside_path = any(c.on_path and not c.everywhere for c in conditions)
    if not others:
        if postings is not None:
            source = relevance.postings(postings.statement)
            if postings.kept is not None:
                source = relevance.kept_postings_or(postings.kept, TRUE,
                                                    source, TRUE)
            return relevance.TextRelevance(
                TRUE, relevance.POSTINGS_SCORE, source=source,
                rid=relevance.TEXT_RID, window=page)
        if kept is not None:
            return kept_word_plan(kept, text, cid, TRUE,
                                  relevance.text_alone(text.table), page)
        if lang is not None:
            return language_plan(lang, TRUE, page, store)
        return relevance.TextRelevance(
            and_(q("e.cid = {}", cid), text.condition("e")), text.rank("e"),
            source=relevance.text_rows(text.table), window=page)
    hot_others = [c.hot_form for c in others]
    found = hot.set_ids(cid, hot_others, counted=postings is not None
                        or kept is not None) \
        if hot_others and None not in hot_others else None
    ids = None
    if found is not None:
        row = found_ids(qc, store, found)
        ids = row[0] or []
        if postings is not None and not postings.pays(row[1]):
            postings = None
        if postings is not None:
            kept = hot.where(cid, hot_others, ids=ids)
            hashed = relevance.hot_hashed(postings.reads, row[1])
            if hashed and relevance.postings_hashed_first(postings.reads,
                                                          row[1]):
                where = kept
                source = relevance.postings_on_hot(postings.statement)
            else:
                where = relevance.among_hot(kept, hashed=hashed)
                source = relevance.postings(postings.statement)
            if postings.kept is not None:
                # (the kept postings hold the hot row's set and range
                # under the hot row's names)
                source = relevance.kept_postings_or(postings.kept, kept,
                                                    source, where)
                where = TRUE
            return relevance.TextRelevance(
                where, relevance.POSTINGS_SCORE, rid=relevance.TEXT_RID,
                window=page, source=source)
        if kept is not None:
            # (the kept postings hold the hot row's set and range under
            # the hot row's names; read when they are few enough for the
            # hot rows kept: the statement asks)
            return kept_word_plan(kept.beside(row[1]), text, cid,
                                  hot.where(cid, hot_others, ids=ids),
                                  relevance.text_hot(text.table), page)
        if lang is not None:
            # (the postings hold the hot row's set and range under the hot
            # row's names)
            return language_plan(lang, hot.where(cid, hot_others, ids=ids),
                                 page, store)
    elif postings is not None and not beside_path:
        plan = postings_beside_entries(postings, others, store, page,
                                       qc)
        if plan is not None:
            return plan
    rank = text.columns("tr")
    if rank is None:
        if page is None:
            return None
        rank = text.row_score("tr")
    matched = and_(q("tr.cid = {}", cid), text.condition("tr"))
    if ids is not None:
        return relevance.TextRelevance(
            and_(matched, hot.where(cid, hot_others, ids=ids)),
            rank, source=relevance.text_hot(text.table),
            rid=relevance.TEXT_RID, window=page)
    return relevance.TextRelevance(
        and_(matched, *[c.where for c in others]), rank,
        source=relevance.text_joined(text.table), rid=relevance.TEXT_RID,
        window=page)


def language_plan(lang, condition, page, store):
    """The plan reading a search by language from its postings (``lang``:
    language.postings_of's) meeting ``condition`` (over the hot row's
    names): a page of words joined by AND from its best matches
    (langpage.py), else every match scored."""
    if langpage.applies(lang, page, store):
        return langpage.LanguageWordsPage(lang, condition, page)
    return relevance.TextRelevance(
        TRUE, relevance.POSTINGS_SCORE, rid=relevance.TEXT_RID,
        window=page, source=relevance.postings(lang.statement(condition)))


def kept_word_plan(kept, text, cid, condition, source, page):
    """The plan reading a single word from its kept postings meeting
    ``condition`` (over the hot row's names), or, when the statement finds
    them not kept, from its text rows ``source`` (``tr``) meeting it; a
    page from its best postings (wordpage.py)."""
    rows = relevance.word_rows(
        kept, and_(q("tr.cid = {}", cid), text.condition("tr"), condition),
        text.rank("tr"), source)
    matches = relevance.kept_word_or(kept, condition, rows)
    if wordpage.reaches(page) and kept.dl_at_most is not None:
        return wordpage.KeptWordPage(kept, condition, matches, page, rows)
    return relevance.TextRelevance(
        TRUE, relevance.POSTINGS_SCORE, source=matches,
        rid=relevance.TEXT_RID, window=page)


def postings_beside_entries(postings, others, store, page, qc):
    """The plan reading a union of words word by word beside conditions
    on the entries (``others``: Conditions, some without a hot form), or
    None when matching the union at once and scoring the rows they keep
    costs less (``Postings.pays``).

    How many documents they keep: the hot conditions in the key sets by
    the sets' kept counts, the others by PostgreSQL's estimate (a language
    keeps most documents), taken as independent.  Not beside a path, as a
    precaution: a folder may hold few documents, and PostgreSQL's estimate
    of a path condition ranges from right to far off (at 100,000 entries
    a section of 7,245 entries estimated at 6,993, a folder of 954 at 1);
    too high, a folder's search would read every posting of the union.  A
    union there is matched in the folder and scored row by row.  The
    matches are kept by the hot rows first (a hashed semi-join,
    relevance.among_hot), then by the entries for the other conditions:
    each looked up, or, when they are more than the entries meeting those
    conditions would cost to read once (``relevance.entries_hashed``),
    among those entries, hashed (``relevance.among_entries``)."""
    cid = store.cid
    on_hot = [c.hot_form for c in others if c.hot_form is not None]
    keys = hot.set_ids(cid, on_hot, counted=True) if on_hot else None
    rest = [c.where for c in others if keys is None or c.hot_form is None]
    documents = postings.documents
    hot_share, ids = 1.0, None
    if keys is not None:
        ids, kept = found_ids(qc, store, keys)
        ids = ids or []
        if documents:
            hot_share = min(1.0, float(kept) / documents)
    on_entries = and_(q("e.cid = {}", cid), *rest)
    estimate = relevance.estimated_entries(store, on_entries)
    share = hot_share
    if documents:
        share *= min(1.0, estimate / documents)
    if not postings.pays(share * documents if documents else estimate):
        return None
    # the union's matches that reach the entries: looked up one by one, or
    # the entries meeting the other conditions read once and hashed
    union = min(postings.reads, documents) if documents else postings.reads
    if relevance.entries_hashed(union * hot_share, estimate):
        where = relevance.among_entries(on_entries)
        source = relevance.postings(postings.statement)
    else:
        where = and_(*rest)
        source = relevance.postings_joined(postings.statement)
    if ids is not None:
        where = and_(relevance.among_hot(hot.where(cid, on_hot, ids=ids)),
                     where)
    return relevance.TextRelevance(
        where, relevance.POSTINGS_SCORE, rid=relevance.TEXT_RID,
        window=page, source=source)


def unique_lookup(conditions):
    """Whether the search asks one value of unique indexes only
    (``pgc_unique``: a UUIDIndex; ``uuidToObject`` and every resolved
    link ask this).  Its plan is one index lookup whatever the value, so
    its statement is prepared and PostgreSQL keeps a generic plan after
    five runs (``plan_cache_mode`` ``auto``): planning cost 0.43 ms
    against 0.03 ms of execution for a UID at 10,000 entries, with the
    entries' 28 expression indexes to consider."""
    return bool(conditions) and all(
        c.index.pgc_unique and c.iq is not None
        and c.iq.get("range") is None and not c.iq.get("not")
        and len(c.iq.keys) == 1 for c in conditions)


def conditions_for(catalog, query, qc):
    """The conditions (:class:`Condition`) of the indexes taking part, in
    ZCatalog's order; None when nothing can match (an index said NO_MATCH:
    ZCatalog stops there too, the indexes after it are not parsed) or no
    index takes part."""
    conditions = []
    for name, names in query_names(catalog):
        if not any(n in query for n in names):
            continue
        index = catalog.getIndex(name)
        if IQueryIndex.providedBy(index):
            # (as ZCatalog parses it: every IQueryIndex has these)
            iq = IndexQuery(query, index.getId(), index.query_options,
                            index.operators, index.useOperator)
            if iq.keys is None:
                continue
            if parses_like_unindex(index):
                unindex_prechecks(iq)
        else:
            # ZCatalog hands such an index (GopipIndex) the raw query
            # (``_apply_index``): it parses no options
            iq = None
        texts = len(qc.text_rows)
        where = index.pgc_where(iq, qc)
        if where is None:
            continue
        if where is NO_MATCH:
            return None
        hot_form = index.pgc_hot_where(iq, qc) if iq is not None and \
            IHotConditionKind.providedBy(index) else None
        # the text row a text index added while making its condition
        text = qc.text_rows[texts] if len(qc.text_rows) > texts else None
        conditions.append(Condition(index, iq, where, hot_form, text))
    return conditions or None


def sort_of(index, qc):
    """``(keys, present)`` of a sort index (see IIndexKind.pgc_sort)."""
    keys, present = index.pgc_sort(qc)
    return tuple(keys), present
