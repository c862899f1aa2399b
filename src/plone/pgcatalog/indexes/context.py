"""What an index kind is told while it turns a query into SQL."""
from plone.pgcatalog.pg.fragment import Fragment
from plone.pgcatalog.pg.fragment import q
from plone.pgcatalog.schema import tables as schema


class QueryContext:
    """The compiler's context for one search: the catalog configuration,
    the catalog's id (for conditions that look at the whole catalog), the
    relevance expressions text indexes add (summed to order by relevance)
    and the text statistics the tool caches:
    ``text_stats(index_id) -> (documents, total words)`` and
    ``text_df(index_id, tsquery) -> documents`` (Okapi BM25), and
    ``text_prefetch(index_id, tsqueries)`` reading those not cached in one
    statement, ``text_stats_kept(index_id)`` and ``text_df_kept(index_id,
    tsquery)`` the same when kept, else None (never a statement: a score
    may read the rest in its own statement), and ``text_words(index_id,
    prefix, pattern) -> words or None``, the lexicon's words a glob
    matches; ``path_outside(path) ->
    bool``, whether some entry of the catalog is neither the object at
    ``path`` nor below it (None: not known, taken as yes).  ``alone``: the
    index asked is the search's only one, and nothing else sorts."""

    def __init__(self, catalog=None, cid=None, text_stats=None,
                 text_df=None, text_prefetch=None, text_words=None,
                 path_outside=None, text_queries=None, languages=None,
                 text_stats_kept=None, text_df_kept=None):
        self.catalog = catalog
        self.cid = cid
        self.text_stats = text_stats
        self.text_df = text_df
        self.text_prefetch = text_prefetch
        self.text_stats_kept = text_stats_kept
        self.text_df_kept = text_df_kept
        self.text_words = text_words
        self.path_outside = path_outside
        self.text_queries = text_queries
        self.languages = languages
        self.alone = False
        #: relevance Fragments over the entry ``e`` (summed for ordering),
        #: or callables making them (:meth:`rank_fragments`)
        self.ranks = []
        #: each text condition again, over its text row
        #: (``pgcatalog_text``) itself (:class:`TextRow`), added by the
        #: text index as it makes the condition: a text search reads its
        #: matches and their scores there (compiler.Condition.text)
        self.text_rows = []

    def add_rank(self, expr):
        """Add a relevance expression: a Fragment, or a callable making
        it, called only if the plan orders by relevance through the
        entries (a text search alone is scored over its text rows:
        ``text_rows``)."""
        if not isinstance(expr, Fragment) and not callable(expr):
            raise TypeError("a relevance expression is a Fragment")
        self.ranks.append(expr)

    def rank_fragments(self):
        """The relevance expressions, made."""
        made = []
        for expr in self.ranks:
            if not isinstance(expr, Fragment):
                expr = expr()
                if not isinstance(expr, Fragment):
                    raise TypeError("a relevance expression is a Fragment")
            made.append(expr)
        self.ranks = made
        return made


def text_exists(rid, match):
    """A text row ``t`` of the entry whose rid is ``rid`` (a Fragment: the
    entry's, or a hot row's) meets ``match`` (a condition over ``t``)."""
    return q("EXISTS (SELECT 1 FROM {} t WHERE t.rid = {} AND {})",
             schema.TEXT_TABLE, rid, match)


class TextRow:
    """A text index's condition over its text row (``pgcatalog_text``)
    rather than the entry: a text search reads its matches there, and their
    scores from the row it matched, without looking it up again.

    ``condition(alias)``: the condition over the text row ``alias`` (the
    index gave the compiler the same over the entry ``e``);
    ``rank(alias)``: the score of that row,
    ``(columns, score)`` (what the score reads of the row, in the scan's
    projection, and the score over them as ``s``) or, when the score reads
    more of the row (a glob, a union), ``row_score(alias)``, a Fragment
    over the row; ``columns(alias)``: the two parts only (None when the
    score has no such form); ``postings(cid)``: the matches in catalog
    ``cid`` and their scores read word by word (``postings.Postings``), or
    None (only a union of many words has them); ``kept_word(cid)``: the
    matches of a single word and their scores read from the postings kept
    for the index (``postings.KeptWord``), or None;
    ``language_postings(cid)``: the matches and scores of a search by
    language read from its postings (``language.LanguagePostings``), or
    None; ``name``: the index's
    id (whose postings the database may keep); ``table``: the rows' table
    (``pgcatalog_text``, or ``pgcatalog_langtext`` for an index searched
    by language), whose rows have ``rid`` and ``cid``."""

    def __init__(self, condition, columns, row_score, postings=None,
                 table=schema.TEXT_TABLE, kept_word=None, name=None,
                 language_postings=None):
        self.condition = condition
        self.columns = columns
        self.row_score = row_score
        self.postings = postings or (lambda cid: None)
        self.kept_word = kept_word or (lambda cid: None)
        self.language_postings = language_postings or (lambda cid: None)
        self.name = name
        self.table = table

    def rank(self, alias="e"):
        return self.columns(alias) or self.row_score(alias)

    def over(self, rid):
        """The condition over the entry whose rid is ``rid`` (a hot row's,
        compiler.hot_sorted), as the index's own is over ``e``."""
        return q("EXISTS (SELECT 1 FROM {} t WHERE t.rid = {} AND {})",
                 self.table, rid, self.condition("t"))
