"""Snippets of text results (docs/snippets.md): ``pgc_snippets``."""
from AccessControl import ClassSecurityInfo
from AccessControl import Unauthorized
from AccessControl.class_init import InitializeClass
from AccessControl.Permissions import search_zcatalog
from zExceptions import NotFound
from ZPublisher import zpublish

from plone.pgcatalog import extract
from plone.pgcatalog.indexes.interfaces import ITextKind
from plone.pgcatalog.search.snippets import MAX_FRAGMENTS
from plone.pgcatalog.search.snippets import MAX_SIZE
from plone.pgcatalog.search.snippets import Terms
from plone.pgcatalog.search.snippets import snippet

#: results one call makes snippets for, at most (the rows shown: each
#: object's text is made by its indexers)
MAX_ROWS = 50
#: the searched text read, at most (characters)
MAX_QUERY = 1000


def _bounded(name, value, highest):
    if isinstance(value, bool) or not isinstance(value, int) \
            or not 1 <= value <= highest:
        raise ValueError("%s: from 1 to %d" % (name, highest))


class SnippetsAPI:
    """pgc_snippets (a mixin of the tool, beside SearchAPI)."""

    security = ClassSecurityInfo()

    # for Python and restricted code with "Search ZCatalog", never a URL
    @zpublish(False)
    @security.protected(search_zcatalog)
    def pgc_snippets(self, results, text, index="SearchableText", size=30,
                     fragments=2):
        """For each brain of ``results`` (the rows shown, at most 50), the
        passages of its object's text (text index ``index``'s source)
        where the words of the text query ``text`` are, as HTML with those
        words in ``<mark>`` (docs/snippets.md); "" for an object the user
        may not open or without text."""
        found = self._catalog.indexes.get(index) \
            if isinstance(index, str) else None
        if found is None or not ITextKind.providedBy(found):
            raise ValueError("snippets come from a text index of this "
                             "catalog, not %r" % (index,))
        _bounded("size", size, MAX_SIZE)
        _bounded("fragments", fragments, MAX_FRAGMENTS)
        results = list(results[:MAX_ROWS + 1])
        if len(results) > MAX_ROWS:
            raise ValueError("snippets for at most %d results" % MAX_ROWS)
        if not isinstance(text, str):
            raise TypeError("the searched text is a string, not %r"
                            % type(text).__name__)
        if len(text) > MAX_QUERY:
            raise ValueError("a searched text of at most %d characters"
                             % MAX_QUERY)
        # the query as the search read it (its ParseError / QueryError)
        node = found.pgc_parse([text])
        terms = Terms(node)
        lexicon = found.getLexicon()
        made = []
        for brain in results:
            try:
                # as the user may open it (restricted traversal)
                obj = brain.getObject()
            except (Unauthorized, NotFound, KeyError, AttributeError):
                obj = None
            if obj is None:
                made.append("")
                continue
            texts = found.pgc_texts(extract.indexable(self, obj))
            made.append(snippet(lexicon, terms, texts, size, fragments))
        return made


InitializeClass(SnippetsAPI)
