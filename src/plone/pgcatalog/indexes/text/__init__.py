"""ZCTextIndex served from PostgreSQL full text search.

- :mod:`.encoding`: a document's words (the lexicon's own pipeline) as one
  ``tsvector`` with positions and a document length marker, and back;
- :mod:`.querytree`: a query parsed by ZCTextIndex's ``QueryParser``,
  evaluated with ZCTextIndex's execution rules into a match tree, written
  as a ``tsquery`` and as a condition;
- :mod:`.scoring`: ZCTextIndex's Okapi BM25 score (or ts_rank) in SQL;
- :mod:`.index`: :class:`PGZCTextIndex`, the index kind.

``plone.pgcatalog.indexes.text.PGZCTextIndex`` is the class's persistent
path (ZODB pickles name it): the class lives in :mod:`.index` and says
this package is its module.

Known differences from ZCatalog (by PostgreSQL's tsvector limits):

- positions above 16383 are clamped to 16383, so phrase search in words
  beyond the 16383rd word of a document is unreliable (may miss or find
  phrases there), and the word order given back by ``pgc_decode`` is lost
  for those words;
- at most 256 positions are kept per distinct word: phrase search on
  occurrences past the 256th, the term frequency used by the score and the
  decoded word list are truncated accordingly;
- a single word longer than 2046 bytes is stored as a truncated prefix
  plus a hash (found by an exact query of the same word and by prefix
  globs, but decoded as that surrogate);
- a document whose distinct words exceed ~1 MB drops the words past that
  budget;
- the empty word (Plone's normalizer maps a few letters to "") is stored
  as ``"\\x01"``;
- ``ZCTextIndex.index_object`` keeps the old words when an object no
  longer has any text (it returns 0 without unindexing); ``pgc_extract``
  returns MISSING then, and the writer decides (deleting the row is the
  saner behaviour, keeping it mirrors ZCatalog).
"""
from plone.pgcatalog.indexes.text.encoding import TextValue
from plone.pgcatalog.indexes.text.encoding import doclen_from_tsvector
from plone.pgcatalog.indexes.text.encoding import lexeme
from plone.pgcatalog.indexes.text.encoding import quote_lexeme
from plone.pgcatalog.indexes.text.encoding import source_words
from plone.pgcatalog.indexes.text.encoding import term_words
from plone.pgcatalog.indexes.text.encoding import tsvector_literal
from plone.pgcatalog.indexes.text.encoding import words_from_tsvector
from plone.pgcatalog.indexes.text.index import PGZCTextIndex
from plone.pgcatalog.indexes.text.querytree import translate
from plone.pgcatalog.indexes.text.querytree import tsquery_text


__all__ = [
    "PGZCTextIndex", "TextValue", "doclen_from_tsvector", "lexeme",
    "quote_lexeme", "source_words", "term_words", "translate",
    "tsquery_text", "tsvector_literal", "words_from_tsvector",
]
