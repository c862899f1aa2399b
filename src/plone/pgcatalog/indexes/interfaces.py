"""The contract of an index kind, as interfaces.

Each ZCatalog index type is served by one class of this package that
subclasses the stock PluginIndexes class (so code adapting by class keeps
working) and provides :class:`IIndexKind` (through
:class:`~plone.pgcatalog.indexes.base.PGIndex`, which gives the defaults).
The class holds configuration only; the values live in PostgreSQL.

What only some kinds can do is a *capability*, an interface of its own
that the class declares (``@implementer``); the engine asks
``ICapability.providedBy(index)`` and never probes for members:

- :class:`IHotKind`: keeps its values in the hot row (pg/hot.py);
- :class:`IHotConditionKind`: says its condition over the hot row;
- :class:`ISubtreeKind`: reads a search as subtrees of the path column;
- :class:`IPythonSortKind`: sorted in Python (the folders' order);
- :class:`ITextKind`: words in ``pgcatalog_text``;
- :class:`IRankingKind`: a relevance score (Okapi BM25);
- :class:`IReindexedKind`: told when a reindex of it completes;
- :class:`IQueryValueKind`: compares converted query values (the result
  cache keys queries by them).

:func:`plone.pgcatalog.indexes.kind_for` checks a kind's class once, when
it is registered: every capability it declares verified (zope.interface's
``verifyClass``; an attribute needs a class default), and none of a
capability's own members defined without declaring it.  CONTRIBUTING.md
("Add an index kind") says what the engine does with each.

SQL goes in and out as :class:`~plone.pgcatalog.pg.fragment.Fragment` values
(text and parameters together); an entry's row is reached through an
alias (``e`` in searches, ``None`` for the bare column in an index
definition).
"""
from zope.interface import Attribute
from zope.interface import Interface


class IIndexKind(Interface):
    """What the catalog needs from every index kind (PGIndex gives the
    defaults of the attributes and helpers)."""

    pgc_storage = Attribute(
        "Where the value lives: 'idx' (a key of the entry's JSONB ``idx`` "
        "named like the index), 'text' (a row of pgcatalog_text: the kind "
        "provides ITextKind), 'path' (the entry's path/depth columns) or "
        "'none' (nothing stored: GopipIndex sorts by the folders' order).  "
        "The writer, the store's per-index reads and the verifier go by "
        "it.")
    pgc_sortable = Attribute(
        "The index can be a sort_on index (else the search raises "
        "CatalogError, as ZCatalog).")
    pgc_multi = Attribute(
        "The stored value is a JSON array of values (counted per element; "
        "a hot index's keys are its elements).")
    pgc_long_lists = Attribute(
        "A long stored list is kept once in pgcatalog_lists and the entry "
        "holds its digest (plone.pgcatalog.pg.lists): the kind's conditions "
        "and reads accept both forms.")
    pgc_forward_sets = Attribute(
        "``_index[value]`` is always a set of rids (KeywordIndex), never "
        "one int for a single document (UnIndex).")
    pgc_unique = Attribute(
        "One document per value (UUIDIndex): a search asking one value of "
        "such indexes only is a prepared lookup (compiler.unique_lookup).")
    pgc_walkable_sort = Attribute(
        "ZCatalog may sort an unlimited answer by walking this index's "
        "values (one value per document: the UnIndex kinds; "
        "sorting.UnlimitedSort).")

    def pgc_extract(obj):
        """The value to store for ``obj`` (an IIndexableObject wrapper) in
        its stored (JSON-ready) form, or MISSING when ZCatalog would not
        index ``obj`` in this index."""

    def pgc_where(iq, qc):
        """One parsed query (``Products.ZCatalog.query.IndexQuery``; None
        for an index that is not an IQueryIndex) as a boolean Fragment
        over the entry alias ``e``; NO_MATCH when it can match nothing
        (ZCatalog's short circuit); None when the index takes no part
        (``keys is None``).  ``qc`` is the QueryContext (catalog, cid,
        relevance expressions, text statistics)."""

    def pgc_sort(qc):
        """``(keys, present)``: a tuple of Fragments to ORDER BY (in that
        order, each in the sort's direction) and a Fragment true when the
        entry has a value (None: every entry has one).  Entries without a
        value are left out of sorted answers, as in ZCatalog.  Raises
        CatalogError when the index cannot sort."""

    def pgc_decode(value):
        """A stored value as ZCatalog's index would hand it out
        (``uniqueValues``, ``getEntryForObject``)."""

    def pgc_eq_sql(values, alias="e"):
        """Fragment: the entry ``alias`` has one of ``values`` (Python
        values)."""

    def pgc_key_sql(alias="e"):
        """Fragment: ``(<alias>.idx -> 'name')`` (alias None: the bare
        column, as index definitions spell it)."""

    def pgc_text_sql(alias="e"):
        """Fragment: ``((<alias>.idx ->> 'name') COLLATE "C")``, the
        stored value's text."""

    def pgc_present_sql():
        """Fragment: the entry ``e`` has a value for this index."""

    def pgc_indexes():
        """The PostgreSQL indexes the kind wants
        (``plone.pgcatalog.schema.tables.IndexSpec``): created at ``addIndex``,
        dropped at ``delIndex``."""


class IHotKind(Interface):
    """The kind keeps its values in the hot row (plone.pgcatalog.pg.hot)
    when the index is named in the ``hot-indexes`` setting: hot.sync
    registers it for a catalog (and records on the index object, in
    ``_pgc_hot_codes`` / ``_pgc_hot_sets``, its code and where its keys
    are kept).  Its conditions are read from the hot rows through
    :class:`IHotConditionKind`, its sort value through ``pgc_hot_kind``
    "sort"."""

    pgc_hot_kind = Attribute(
        "What the hot row keeps of it: 'keys' (its string values, "
        "``code<US>value``: FieldIndex, UUIDIndex, KeywordIndex), 'bool' "
        "(one boolean key: BooleanIndex), 'range' (its bounds, ``h.lo`` / "
        "``h.hi`` / ``h.rng``: DateRangeIndex) or 'sort' (the sort value "
        "``h.srt``: a page sorted by it walks the hot rows, "
        "compiler.hot_sorted: DateIndex).  A row keeps one 'range' and "
        "one 'sort' index per catalog.")


class IHotConditionKind(Interface):
    """The kind can say a query's condition over the hot row ``h``: a
    search whose conditions all have that form is counted and answered
    from the hot rows (compiler, hot.where)."""

    def pgc_hot_where(iq, qc):
        """The query ``iq`` as a condition over the hot row ``h``: a
        Fragment over ``h.keys`` (hot.KeyCondition), a hot.Ranged, or a
        hot.OnPath (the path's copy ``h.path``, built when a plan reads
        it); None when the hot row cannot answer it (the index has no hot
        keys in catalog ``qc.cid``, or the query names a value without a
        key, a range, ``not``...)."""


class ISubtreeKind(Interface):
    """The kind can read a search as subtrees of a path column, each one
    range of a B-tree: a path search alone over several subtrees is read
    as their union (compiler.subtrees_alone)."""

    def pgc_subtrees(iq, qc, column=None):
        """The search ``iq`` as a hot.OnPath over the path ``column`` (the
        entry's path when None or left out), whose ``resolved()`` gives
        the disjoint subtrees; None for other searches (a depth, a
        navtree, a level)."""


class IPythonSortKind(Interface):
    """The kind is sorted in Python (GopipIndex: the folders' order, read
    at sort time): a search sorted by it fetches every match and its SQL
    sort keys, and orders them with these positions
    (sorting.PythonSorted, sorting.PositionOrder)."""

    def pgc_positions(paths):
        """``{path: position}`` for catalog paths (a path without a
        position is left out of the sorted answer)."""

    def pgc_order_token(parents):
        """What the positions of entries in the folders ``parents`` (a
        frozenset of their paths) depend on (equal tokens, equal
        positions: a cached order is kept), or None when no token is
        cheaper than the positions."""


class ITextKind(Interface):
    """The kind's words live in ``pgcatalog_text`` (``pgc_storage``
    'text'): one tsvector row per document and index."""

    pgc_language = Attribute(
        "How the index is searched by language (indexes/text/language."
        "LanguageText; its rows in pgcatalog_langtext), or None: "
        "ZCTextIndex-exact.")

    def pgc_words(obj):
        """The word list ZCTextIndex would index for ``obj`` (None when it
        would not index it)."""

    def pgc_texts(obj):
        """The strings the words of ``obj`` are read from (the indexed
        attributes' texts; snippets show them)."""

    def pgc_parse(keys):
        """The match tree of a query's keys (indexes/text/querytree.py);
        None when ZCTextIndex would answer None."""

    def pgc_unique_words_sql(cid):
        """The statement (a Fragment) counting the distinct words of this
        index in catalog ``cid`` (``numObjects``; store.unique_words)."""


class IReindexedKind(Interface):
    """The kind learns that every entry's value of it was written again
    (``reindexIndex``, or an online reindex finished: ops/rebuild.py)."""

    def pgc_reindexed():
        """Called in the transaction that completes the reindex."""


class IRankingKind(Interface):
    """The kind scores its matches (ZCTextIndex's Okapi BM25, or
    ts_rank): a search without sort_on is ordered by relevance.  Its
    ``pgc_where`` adds the score to ``qc.add_rank`` and its text row to
    ``qc.text_rows`` (indexes/context.TextRow), from which the compiler
    reads the matches and their scores (relevance.TextRelevance); the
    statistics the scores need are counted by pg/textstats.py with the
    statements below."""

    pgc_rank_mode = Attribute(
        "'okapi' (ZCTextIndex's own score) or 'ts_rank' (PostgreSQL's); "
        "``qc.text_rank`` overrides it per query.")
    pgc_df_limit = Attribute(
        "The number of documents ``pgc_df_sql`` counts up to (a word in as "
        "many or more is a common word, counted exactly once and kept: "
        "textstats); None: no limit.")

    def pgc_rank_sql(node, qc=None, row=False):
        """The score of the matched entry ``e`` for the match tree
        ``node`` (a Fragment, literals only); ``row``: the entry's text
        row is in the statement (True: it is ``e``; or its alias)."""

    def pgc_rank_columns(node, qc=None, row="e"):
        """The score of the text row ``row`` as ``(columns, score)``
        (scoring.rank_columns), or None when it has no such form."""

    def pgc_postings_sql(node, qc, cid):
        """The matches in catalog ``cid`` and their scores read word by
        word (a postings.Postings), or None."""

    def pgc_kept_word(node, qc, cid):
        """The matches of a single word in catalog ``cid`` and their scores
        read from the postings kept for the index (a postings.KeptWord),
        or None."""

    def pgc_df_sql(cid, tsquery, exact=False):
        """The statement counting the documents of catalog ``cid`` whose
        words match ``tsquery``, up to ``pgc_df_limit`` (``exact``: all
        of them)."""

    def pgc_words_df_sql(cid, tsqueries):
        """The statement of several words' document frequencies
        (``tsqueries`` for which ``pgc_df_capped`` is False): one
        ``bigint[]``, in their order."""

    def pgc_df_capped(tsquery):
        """Whether ``pgc_df_sql`` stops counting at ``pgc_df_limit`` for
        ``tsquery`` (False where its count is exact anyway)."""

    def pgc_doclen_sql(alias="t"):
        """The word count (document length) of the text row ``alias``
        (None: the bare columns), a Fragment."""


class IQueryValueKind(Interface):
    """The kind compares query values after converting them (a
    DateRangeIndex compares a DateTime as its minutes): two queries whose
    values convert alike get the same answer, and the result cache
    (search/cache.py) keys them alike."""

    def pgc_query_value(value):
        """One value of a query (not a dict nor a list) as the kind
        compares it, as a hashable key tagged by its conversion (a tuple
        such as ``("minutes", n)``), or None when the kind takes the
        value as it is given.  Raises what converting it raises."""


class ISetQueryKind(Interface):
    """The kind's answer to a list of strings (the query's value, or its
    ``query`` beside an ``operator``) depends neither on their order nor
    on repeats: ZCatalog's UnIndex joins the values' sets ("or") or
    intersects them ("and").  The result cache (search/cache.py) keys
    such a list as a set: the navigation tree and the global sections,
    asking for the same types in another order, share one answer."""


#: the optional capabilities, each checked at registration
CAPABILITIES = (IHotKind, IHotConditionKind, ISubtreeKind, IPythonSortKind,
                ITextKind, IRankingKind, IQueryValueKind, IReindexedKind,
                ISetQueryKind)
