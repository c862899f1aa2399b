"""SQL as composed fragments: the text and its parameters travel together.

Every statement plone.pgcatalog sends is built from :class:`Fragment` values
(or is a constant).  A fragment is made by :func:`q` from a *constant*
template whose ``{}`` slots are filled, in order, by

- other fragments (their text goes in, their parameters follow in place),
- ``psycopg.sql`` composables without parameters (``Identifier``,
  ``Literal``: rendered once; a ``%`` in them is doubled so that it stays a
  character), and
- any other Python value, which becomes a parameter (``%s``).

So a value can never become SQL text (a string argument is always a
parameter), the parameter order is the order of the text by construction,
and a ``%`` in the template or in a literal is a character, never a
placeholder.  ``{{`` and ``}}`` write braces (``'{{}}'`` is the JSON path
``'{}'``).

>>> f = q("e.cid = {} AND {}", 7, q("(e.idx -> {}) IS NOT NULL",
...                                   literal("a%b")))
>>> f.text
"e.cid = %s AND (e.idx -> 'a%%b') IS NOT NULL"
>>> f.params
(7,)
"""
import functools
import string

from psycopg import sql as pgsql


class Fragment:
    """SQL text with ``%s`` placeholders (a literal ``%`` written ``%%``)
    and the parameters of those placeholders, in order.  Made by :func:`q`,
    :func:`literal`, :func:`ident`, :func:`param` and the combinators."""

    __slots__ = ("text", "params")

    def __init__(self, text, params=()):
        self.text = text
        self.params = tuple(params)

    def __repr__(self):
        return "Fragment(%r, %r)" % (self.text, self.params)

    def __eq__(self, other):
        return (isinstance(other, Fragment) and self.text == other.text
                and self.params == other.params)

    def __hash__(self):
        return hash((self.text, self.params))

    @property
    def ddl(self):
        """The text of a fragment without parameters (DDL), as PostgreSQL
        reads it (``%%`` is one ``%`` once psycopg has read it: DDL runs
        with an empty parameter tuple)."""
        if self.params:
            raise ValueError("DDL cannot take parameters: %r" % (self,))
        return self.text


@functools.lru_cache(maxsize=4096)
def _template(template):
    """``template`` split at its ``{}`` slots, each piece's ``%`` doubled."""
    pieces = []
    current = []
    for text, field, spec, conv in string.Formatter().parse(template):
        current.append(text.replace("%", "%%"))
        if field is None:
            continue
        if field != "" or spec or conv:
            raise ValueError("only {} slots: %r" % template)
        pieces.append("".join(current))
        current = []
    pieces.append("".join(current))
    return tuple(pieces)


def _render(composable):
    return composable.as_string(None).replace("%", "%%")


@functools.lru_cache(maxsize=4096)
def _literal_text(kind, value):
    # keyed by the type too: 1, 1.0 and True are one key to a dict
    return _render(pgsql.Literal(value))


@functools.lru_cache(maxsize=4096)
def _ident_text(names):
    return _render(pgsql.Identifier(*names))


def q(template, *args):
    """A fragment from the constant ``template`` and its slot values (see
    the module docstring)."""
    pieces = _template(template)
    if len(pieces) != len(args) + 1:
        raise ValueError("%d slots, %d values: %r" % (
            len(pieces) - 1, len(args), template))
    if not args:
        return Fragment(pieces[0])
    text = [pieces[0]]
    params = []
    for arg, piece in zip(args, pieces[1:]):
        if isinstance(arg, Fragment):
            text.append(arg.text)
            params.extend(arg.params)
        elif isinstance(arg, pgsql.Composable):
            text.append(_render(arg))
        else:
            text.append("%s")
            params.append(arg)
        text.append(piece)
    return Fragment("".join(text), params)


def param(value):
    """``value`` as a parameter."""
    return Fragment("%s", (value,))


def literal(value):
    """``value`` as an SQL literal (for names that must be spelled out in
    the statement: a JSON key an expression index is defined on)."""
    kind = type(value)
    if kind in _CACHED_LITERALS:
        return Fragment(_literal_text(kind, value))
    return Fragment(_render(pgsql.Literal(value)))


#: the types whose literals are kept rendered (the others are rare)
_CACHED_LITERALS = frozenset((str, int, bool, float))


def ident(*names):
    """A (qualified) identifier."""
    return Fragment(_ident_text(names))


def join(separator, fragments):
    """The fragments joined by the constant ``separator``."""
    fragments = list(fragments)
    text = separator.replace("%", "%%").join(f.text for f in fragments)
    params = [p for f in fragments for p in f.params]
    return Fragment(text, params)


TRUE = Fragment("TRUE")
FALSE = Fragment("FALSE")


def and_(*fragments):
    """All of the conditions (TRUE for none)."""
    fragments = [f for f in fragments if f is not TRUE]
    if not fragments:
        return TRUE
    if len(fragments) == 1:
        return fragments[0]
    return q("({})", join(" AND ", fragments))


def or_(*fragments):
    """Any of the conditions (FALSE for none)."""
    fragments = [f for f in fragments if f is not FALSE]
    if not fragments:
        return FALSE
    if len(fragments) == 1:
        return fragments[0]
    return q("({})", join(" OR ", fragments))


def not_(fragment):
    """The condition is false (NULL counts as false: ``IS NOT TRUE``)."""
    return q("({}) IS NOT TRUE", fragment)

