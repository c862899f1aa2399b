"""Suggestions for what a user is typing (autocomplete): the search
``portal_catalog.pgc_suggest`` runs (docs/suggest.md).

Every word of the typed text becomes a prefix (``plone con`` -> ``plone*
AND con*``, as Plone's own search box sends it) of one text index
(``Title`` by default), beside the caller's other conditions; the answer
is the first page of that search by relevance, as ``searchResults`` lists
it for the user who asks (CMFPlone's security additions).  So a
suggestion is exactly what the search page would find first, and what a
user may not see is never suggested.
"""
import re

from plone.pgcatalog.indexes.interfaces import ITextKind

#: suggestions one request may ask for
MAX_LIMIT = 50
#: typed text read (characters) and words made prefixes: a request never
#: costs seconds
MAX_TEXT = 200
MAX_WORDS = 8

#: ZCTextIndex's query syntax, read as a separator in typed text
_SYNTAX = re.compile('[()"*?+\\-\u3000]')
#: a letter or a digit: what makes a term a word for the lexicon
_WORD = re.compile(r"[^\W_]")
#: its operators, quoted when typed as words
_OPERATORS = ("and", "or", "not")


def prefix_query(text):
    """The ZCTextIndex query that finds every word of ``text`` as a prefix
    (``None`` when it has no word): the query syntax a user may type is
    read as separators, ``and``/``or``/``not`` as words, and a term without
    a letter or digit (no word for the lexicon) is left out."""
    if not isinstance(text, str):
        raise TypeError("the text to suggest for is a string, not %r"
                        % type(text).__name__)
    terms = []
    words = [word for word in _SYNTAX.sub(" ", text[:MAX_TEXT]).split()
             if _WORD.search(word)]
    for word in words[:MAX_WORDS]:
        if word.lower() in _OPERATORS:
            # a quoted word: found as itself (no glob inside quotes)
            terms.append('"%s"' % word)
        else:
            terms.append(word + "*")
    return " AND ".join(terms) or None


def suggest_query(catalog, text, index, limit, query):
    """The search (a dict, for ``searchResults``) of suggestion ``text``
    on text index ``index`` of ``catalog`` (the tool's ``_catalog``)
    beside ``query``, its first page of ``limit`` by relevance; None when
    ``text`` has no word."""
    found = catalog.indexes.get(index) if isinstance(index, str) else None
    if found is None or not ITextKind.providedBy(found):
        raise ValueError("suggestions come from a text index of this "
                         "catalog, not %r" % (index,))
    if isinstance(limit, bool) or not isinstance(limit, int) \
            or not 1 <= limit <= MAX_LIMIT:
        raise ValueError("limit: from 1 to %d suggestions" % MAX_LIMIT)
    words = prefix_query(text)
    if words is None:
        return None
    query = {key: value for key, value in query.items()
             if key not in ("sort_on", "sort_order", "sort_limit",
                            "b_start", "b_size")}
    query[index] = words
    # relevance order (no sort_on), the first page only
    query["b_start"] = 0
    query["b_size"] = limit
    return query
