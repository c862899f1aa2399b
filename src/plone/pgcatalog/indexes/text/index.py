"""The ZCTextIndex kind: configuration in the ZODB, words in PostgreSQL.

The index object keeps ZCTextIndex's configuration (``lexicon_id``, indexed
attributes, index type) but no data: each object's words are stored as one
``tsvector`` row of ``pgcatalog_text`` (``rid``, ``cid``, ``name`` = index
id, ``tsv``, and the document length ``dl`` and term frequencies ``tf``
beside it); see :mod:`.encoding`, :mod:`.querytree` and :mod:`.scoring`.

The class is defined here but its persistent path is the package's,
``plone.pgcatalog.indexes.text.PGZCTextIndex`` (ZODB pickles of catalogs
name it, and ``indexes.KINDS`` maps ZCTextIndex to it): ``__module__`` says
so explicitly, and the package imports the class.
"""
from html import escape

from AccessControl.class_init import InitializeClass
from AccessControl.Permissions import search_zcatalog
from AccessControl.SecurityInfo import ClassSecurityInfo
from Products.PluginIndexes.util import safe_callable
from Products.ZCTextIndex.interfaces import ILexicon
from Products.ZCTextIndex.QueryParser import QueryParser
from Products.ZCTextIndex.ZCTextIndex import ZCTextIndex
from Products.ZCTextIndex.ZCTextIndex import index_types
from zope.interface import implementer
from ZPublisher import zpublish

from plone.pgcatalog.indexes.base import PGIndex
from plone.pgcatalog.indexes.common import MISSING
from plone.pgcatalog.indexes.common import NO_MATCH
from plone.pgcatalog.indexes.context import TextRow
from plone.pgcatalog.indexes.context import text_exists
from plone.pgcatalog.indexes.interfaces import IRankingKind
from plone.pgcatalog.indexes.interfaces import IReindexedKind
from plone.pgcatalog.indexes.interfaces import ITextKind
from plone.pgcatalog.indexes.text import language
from plone.pgcatalog.indexes.text.encoding import DL_MARK
from plone.pgcatalog.indexes.text.encoding import dl_sql
from plone.pgcatalog.indexes.text.encoding import unquote_lexeme
from plone.pgcatalog.indexes.text.encoding import source_words
from plone.pgcatalog.indexes.text.encoding import tsvector_literal
from plone.pgcatalog.indexes.text.encoding import words_from_tsvector
from plone.pgcatalog.indexes.text.querytree import FALSE
from plone.pgcatalog.indexes.text.querytree import match_sql
from plone.pgcatalog.indexes.text.querytree import resolve_globs
from plone.pgcatalog.indexes.text.querytree import translate
from plone.pgcatalog.indexes.text.scoring import DF_EXACT_LIMIT
from plone.pgcatalog.indexes.text.scoring import df_sql
from plone.pgcatalog.indexes.text.scoring import words_df_sql
from plone.pgcatalog.indexes.text.scoring import indexed_words
from plone.pgcatalog.indexes.text.postings import kept_word
from plone.pgcatalog.indexes.text.postings import postings_sql
from plone.pgcatalog.indexes.text.scoring import rank_columns
from plone.pgcatalog.indexes.text.scoring import rank_sql
from plone.pgcatalog.pg.fragment import ident
from plone.pgcatalog.pg.fragment import literal
from plone.pgcatalog.pg.fragment import q
from plone.pgcatalog.schema import tables as schema


@implementer(ITextKind, IRankingKind, IReindexedKind)
class PGZCTextIndex(PGIndex, ZCTextIndex):
    """ZCTextIndex configuration; the words live in ``pgcatalog_text``."""

    # the persistent path (see the module docstring)
    __module__ = "plone.pgcatalog.indexes.text"

    security = ClassSecurityInfo()

    pgc_storage = "text"
    pgc_sortable = False
    #: "okapi": ZCTextIndex's own score (exact, ~20-60 us per matched
    #: row); "ts_rank": PostgreSQL's ts_rank (~5 us per row, another
    #: relevance order).  ``qc.text_rank`` overrides it per query.
    pgc_rank_mode = "okapi"
    #: searched by language: language.LanguageText's settings as plain
    #: data, or None (ZCTextIndex-exact); see pgc_language
    _pgc_language = None

    def __init__(self, id, extra=None, caller=None, index_factory=None,
                 field_name=None, lexicon_id=None):
        # ZCTextIndex.__init__ without creating the Okapi/Cosine index.
        self.id = id
        self._fieldname = field_name or getattr(extra, 'doc_attr', '') or id
        self._indexed_attrs = self._fieldname.split(',')
        self._indexed_attrs = [attr.strip()
                               for attr in self._indexed_attrs if attr]

        lexicon_id = lexicon_id or getattr(extra, 'lexicon_id', '')
        lexicon = getattr(caller, lexicon_id, None)
        if lexicon is None:
            raise LookupError('Lexicon "%s" not found' % escape(lexicon_id))
        if not ILexicon.providedBy(lexicon):
            raise ValueError('Object "%s" does not implement '
                             'ZCTextIndex Lexicon interface'
                             % lexicon.getId())
        self.lexicon_id = lexicon.getId()
        self._v_lexicon = lexicon

        if index_factory is None:
            if extra.index_type not in index_types.keys():
                raise ValueError('Invalid index type "%s"' % escape(
                    extra.index_type))
            self._index_factory = index_types[extra.index_type]
            self._index_type = extra.index_type
        else:
            self._index_factory = index_factory

    # GenericSetup's ZCTextIndex adapter uses _indexed_attrs; UnIndex-style
    # callers use indexed_attrs.
    @property
    def indexed_attrs(self):
        return self.getIndexSourceNames()

    @indexed_attrs.setter
    def indexed_attrs(self, value):
        self._indexed_attrs = list(value)

    @property
    def pgc_language(self):
        """How the index is searched by language (a language.LanguageText),
        or None: ZCTextIndex-exact.  Set by the tool (toolapi/language.py);
        stored as plain data."""
        data = self._pgc_language
        return None if data is None else language.LanguageText.from_dict(
            data)

    @pgc_language.setter
    def pgc_language(self, settings):
        self._pgc_language = None if settings is None else \
            settings.as_dict()

    def clear(self):
        """Empty the index (ZCatalog's ``clearIndex``): its rows go (the
        data API's ``clear``, through the catalog tool), and the cached
        lexicon is forgotten."""
        try:
            del self._v_lexicon
        except (AttributeError, KeyError):
            pass
        # ZCTextIndex.clear would make a new Okapi index object (ours has
        # none): the data API's clear deletes this index's text rows.
        super().clear()

    # -- contract --------------------------------------------------------
    def pgc_words(self, obj):
        """The word list ZCTextIndex would index for ``obj`` (None when it
        would not index it)."""
        return self._words_of(self.pgc_texts(obj))

    def _words_of(self, all_texts):
        if not all_texts:
            return None
        return source_words(self.getLexicon(), all_texts)

    def pgc_texts(self, obj):
        """The strings ZCTextIndex would read the words of ``obj`` from
        (an IIndexableObject wrapper): its indexed attributes' texts."""
        # ZCTextIndex.index_object
        fields = getattr(self, '_indexed_attrs', [self._fieldname])
        all_texts = []
        for attr in fields:
            text = getattr(obj, attr, None)
            if text is None:
                continue
            if safe_callable(text):
                text = text()
            if text is not None:
                if isinstance(text, (list, tuple, set)):
                    all_texts.extend(text)
                else:
                    all_texts.append(text)
        return [t for t in all_texts if isinstance(t, str)]

    def pgc_extract(self, obj):
        texts = self.pgc_texts(obj)
        words = self._words_of(texts)
        if words is None:
            return MISSING
        # No words is a real value too: ZCTextIndex indexes the document
        # with an empty word list (it counts in N and the mean length).
        value = tsvector_literal(words)
        settings = self.pgc_language
        if settings is not None:
            # the language row is written beside it (once switched over)
            value.language = language.value_of(settings, obj, texts)
        return value

    def pgc_reindexed(self):
        """Every entry's row was written again (a reindex of this index):
        a language-aware search switched on meanwhile is complete."""
        settings = self.pgc_language
        if settings is not None and not settings.ready:
            self.pgc_language = settings.completed()

    @zpublish(False)
    @security.protected(search_zcatalog)
    def uniqueValues(self, name=None, withLengths=0):
        """As ZCTextIndex: a text index has no unique values (the tool's
        ``uniqueValuesFor`` raises NotImplementedError)."""
        raise NotImplementedError

    def pgc_decode(self, value):
        return words_from_tsvector(value)

    def pgc_parse(self, keys):
        """The match tree for query keys; None when ZCTextIndex returns
        None (empty query string or an ignored query)."""
        query_str = ' '.join(keys)
        if not query_str:
            return None
        lexicon = self.getLexicon()
        tree = QueryParser(lexicon).parseQuery(query_str)
        return translate(tree, lexicon)

    def pgc_where(self, iq, qc):
        if iq.keys is None:
            return None
        settings = self.pgc_language
        if settings is not None and settings.ready:
            return self._pgc_language_where(iq, qc, settings)
        node = self.pgc_parse(iq.keys)
        text_words = getattr(qc, "text_words", None)
        if node is not None and callable(text_words):
            # each glob as its words (the lexicon's): matched and scored
            # as ZCTextIndex does
            node = resolve_globs(node, lambda glob: text_words(
                self.getId(), glob.prefix, glob.pattern))
        if node is None or node is FALSE:
            # ZCatalog: an empty (or None) index result short-circuits.
            return NO_MATCH
        qc.add_rank(lambda: self.pgc_rank_sql(node, qc))
        # the query's strings are parameters; the index id a literal (the
        # GIN index is on the row's words when it is this index's)
        name = literal(self.getId())
        condition = text_exists(q("e.rid"),
                                match_sql(node, indexed_words(name, "t")))
        text_rows = getattr(qc, "text_rows", None)
        if text_rows is not None:
            # the score over the text row, made only if the compiler
            # takes that way
            text_rows.append(TextRow(
                lambda alias: match_sql(node, indexed_words(name, alias)),
                lambda alias: self.pgc_rank_columns(node, qc, alias),
                lambda alias: self.pgc_rank_sql(node, qc, row=alias),
                lambda cid: self.pgc_postings_sql(node, qc, cid),
                kept_word=lambda cid: self.pgc_kept_word(node, qc, cid),
                name=self.getId()))
        return condition

    def _pgc_language_where(self, iq, qc, settings):
        """The condition of a language-aware search (language.py): the
        query parsed as ZCTextIndex parses it (its errors), stemmed in each
        language the query may find."""
        query_str = " ".join(iq.keys)
        tree = QueryParser(self.getLexicon()).parseQuery(query_str) \
            if query_str else None
        if tree is None:
            # as the exact search's pgc_where: nothing matches
            return NO_MATCH
        configs = settings.configs_for(qc.languages)
        texts = qc.text_queries(language.queries_sql(tree, configs))
        queries = language.language_queries(configs, texts)
        if not queries:
            return NO_MATCH
        name = self.getId()
        qc.add_rank(language.rank_sql(name, queries))
        # the same over the language row itself (a search by relevance
        # reads its matches and scores there, or from the postings)
        qc.text_rows.append(language.text_row(
            name, queries, lambda cid: language.postings_of(cid, name,
                                                          queries)))
        return language.exists_sql(q("e.rid"), name, queries)

    def pgc_rank_sql(self, node, qc=None, row=False):
        """Relevance of the matched entry ``e`` (a Fragment, literals
        only): ZCTextIndex's Okapi BM25 score, or ts_rank (see
        ``pgc_rank_mode``); ``row``: the entry's text row is in the
        statement (True: it is ``e``; or its alias)."""
        mode = getattr(qc, "text_rank", None) or self.pgc_rank_mode
        return rank_sql(self.getId(), node, qc, mode, row)

    def pgc_rank_columns(self, node, qc=None, row="e"):
        """The Okapi score of the text row ``row`` (an alias) as
        ``(columns, score)`` (scoring.rank_columns), or None."""
        mode = getattr(qc, "text_rank", None) or self.pgc_rank_mode
        return rank_columns(self.getId(), node, qc, mode, row)

    def pgc_postings_sql(self, node, qc, cid):
        """The matches in catalog ``cid`` and their Okapi scores read word
        by word (a postings.Postings: postings.postings_sql), or None."""
        mode = getattr(qc, "text_rank", None) or self.pgc_rank_mode
        return postings_sql(self.getId(), node, qc, cid, mode)

    def pgc_kept_word(self, node, qc, cid):
        """The matches of a single word in catalog ``cid`` and their Okapi
        scores read from the index's kept postings (a postings.KeptWord:
        postings.kept_word), or None."""
        mode = getattr(qc, "text_rank", None) or self.pgc_rank_mode
        return kept_word(self.getId(), node, qc, cid, mode)

    #: the number of documents ``pgc_df_sql`` counts up to (a word in as
    #: many or more: a common word, counted exactly by ``exact``)
    pgc_df_limit = DF_EXACT_LIMIT

    def pgc_df_sql(self, cid, tsquery, exact=False):
        """The statement (a Fragment) counting the documents of catalog
        ``cid`` whose words match ``tsquery`` (a tsquery's text), up to
        ``pgc_df_limit`` (``exact``: all of them): the document frequency
        a score uses.  A word's is exact either way: the sum of its kept
        rows (``pgcatalog_text_df``)."""
        return df_sql(self.getId(), cid, tsquery, exact)

    def pgc_words_df_sql(self, cid, tsqueries):
        """The statement (a Fragment) of the document frequencies of
        several words (``tsqueries`` of one lexeme each: not
        ``pgc_df_capped``) in catalog ``cid``: one ``bigint[]``, in their
        order."""
        return words_df_sql(self.getId(), cid, tsqueries)

    def pgc_df_capped(self, tsquery):
        """Whether ``pgc_df_sql`` stops counting ``tsquery``'s documents
        at ``pgc_df_limit`` (not a word's: read from its kept rows)."""
        return unquote_lexeme(tsquery) is None

    def pgc_doclen_sql(self, alias="t"):
        """The word count (Okapi document length) of the text row
        ``alias`` (None: the bare columns), a Fragment: the stored ``dl``,
        else read from the tsvector's marker."""
        if alias is None:
            return q("coalesce(dl, {})", dl_sql(q("tsv")))
        return q("coalesce({}, {})", ident(alias, "dl"),
                 dl_sql(ident(alias, "tsv")))

    def pgc_unique_words_sql(self, cid):
        """The statement (a Fragment) counting the distinct words of this
        index (ZCTextIndex's ``numObjects``) in catalog ``cid``'s text
        rows."""
        return q("SELECT count(DISTINCT u.lexeme) FROM {} x CROSS JOIN "
                 "LATERAL unnest(tsvector_to_array(x.tsv)) AS u(lexeme) "
                 "WHERE x.cid = {} AND x.name = {} AND u.lexeme <> {}",
                 schema.TEXT_TABLE, cid, literal(self.getId()),
                 literal(DL_MARK))

    def pgc_indexes(self):
        # shared by the catalogs with a text index of this name (a
        # tsvector column: nothing another catalog stores can break it);
        # not partial: the planner ignores a partial index's statistics
        # (scoring.indexed_words)
        specs = [schema.IndexSpec(
            "words", q("USING gin ({})", indexed_words(
                literal(self.getId()))).ddl, table=schema.TEXT, shared=True)]
        if self.pgc_language is not None:
            # the language rows of this index (language.py); partial by
            # name: the planner estimated a prefix's 12,542 rows at 12,713
            # from the column's statistics (100,000 entries)
            specs.append(schema.IndexSpec(
                "language", "USING gin (tsv)", table=schema.LANGTEXT,
                where=q("name = {}", literal(self.getId())).ddl,
                shared=True))
        return specs


InitializeClass(PGZCTextIndex)
