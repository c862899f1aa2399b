"""Long keyword lists, stored once: the entries' hot row keeps a reference.

A KeywordIndex value is a JSON array in the entry's ``idx`` document.  Most
are short (roles, subjects), but some are long and the same for thousands
of entries: Plone's ``object_provides`` is some 50 interface names, about
2 KB, three quarters of an entry's index document, and a 100,000-entry
site has a handful of distinct ones.  Kept in the hot row they made every
scan of the entries read two rows per 8 KB page (an every-match answer
visits one page per two matches).

So a list whose JSON text is longer than :data:`LONG_LIST` bytes is stored
once in ``pgcatalog_lists (digest, value)``, keyed by a digest of its
text, and the entry holds the digest as a JSON *string* under the index
name (a keyword value is otherwise always an array, so the two cannot be
confused).  Rows of ``pgcatalog_lists`` are immutable (a digest names one
value) and shared by every catalog and index of the database; they are
never updated, and never deleted by the catalog (a list no entry uses any
more stays: their number is that of the distinct long lists ever written).

Conditions keep their meaning on both forms: "has one of these keywords" is
the array test *or* "is the digest of a list having one of them", the
digests read from ``pgcatalog_lists`` (GIN-indexed) once per statement, so
the entries' GIN index on ``idx -> name`` serves both (it indexes the
digest string as it indexes an element).  Reads that need the list itself
(sorting, ranges, ``uniqueValues``, ``getEntryForObject``) expand the
reference with :func:`expanded_sql`.
"""
import hashlib

import orjson

from plone.pgcatalog.pg.fragment import literal
from plone.pgcatalog.pg.fragment import q
from plone.pgcatalog.schema import tables as schema

#: a keyword list whose JSON text is longer than this (bytes) is stored
#: once and referenced (tests lower it to 0 to send every list that way)
LONG_LIST = 256



#: the long lists this process made, by digest (a digest names one list):
#: what a digest read back from an entry stands for (changes.facts)
_MADE = {}
#: at most this many (then forgotten, to be made again)
MADE_SIZE = 1024


class ListRef(str):
    """A long list's stored form: its digest (what the entry holds, as a
    JSON string), with the list itself in ``values`` for the writer, which
    stores it in ``pgcatalog_lists`` before the entry."""

    def __new__(cls, values, text):
        ref = super().__new__(cls, digest(text))
        ref.values = values
        ref.text = text
        if len(_MADE) >= MADE_SIZE:
            _MADE.clear()
        _MADE[str(ref)] = values
        return ref


def made(ref):
    """The list a digest names if this process made it lately, else
    None."""
    if isinstance(ref, ListRef):
        return ref.values
    return _MADE.get(ref)


def digest(text):
    """The reference of a list whose JSON text is ``text`` (bytes)."""
    return hashlib.sha256(text).hexdigest()[:32]


def stored_list(values):
    """A keyword list's stored form: the list itself, or a
    :class:`ListRef` when its JSON text is longer than :data:`LONG_LIST`."""
    text = orjson.dumps(values)
    if len(text) > LONG_LIST:
        return ListRef(values, text)
    return values


def inline(idx_set):
    """An entry's index values with the long lists themselves instead of
    their references."""
    return {name: value.values if isinstance(value, ListRef) else value
            for name, value in idx_set.items()}


def refs_in(idx_set):
    """``{digest: JSON text}`` of the long lists among an entry's values."""
    return {v: v.text for v in idx_set.values() if isinstance(v, ListRef)}


def store_statement(lists):
    """Store the lists ``{digest: JSON text}`` (those already there are
    left alone: a digest names one value).  Digests in sorted order, so
    two transactions storing the same new lists wait for each other
    instead of deadlocking."""
    digests = sorted(lists)
    return q("INSERT INTO {} (digest, value) SELECT * FROM unnest({}::text[],"
             " {}::jsonb[]) ON CONFLICT (digest) DO NOTHING",
             schema.LISTS_TABLE, digests,
             [lists[d].decode("utf-8") for d in digests])


def expanded_sql(expr):
    """``expr`` (a keyword slot: an array, a digest string or NULL) as the
    list it stands for."""
    return q("(CASE WHEN jsonb_typeof({}) = 'string' THEN (SELECT l.value "
             "FROM {} l WHERE l.digest = ({} #>> '{{}}')) ELSE {} END)",
             expr, schema.LISTS_TABLE, expr, expr)


def holding_sql(expr, list_condition):
    """``expr`` references a stored list meeting ``list_condition`` (a
    Fragment over ``l.value``): the digests are read once per statement,
    the entries found through their GIN index on ``expr``."""
    return q("(jsonb_typeof({}) = 'string' AND {} ?| ARRAY(SELECT l.digest "
             "FROM {} l WHERE {}))", expr, expr, schema.LISTS_TABLE,
             list_condition)


def move_long_lists(store, names):
    """Store apart the long lists that entries of ``store``'s catalog hold
    in line under the keyword indexes ``names`` (entries written before
    schema version 6), in the transaction of ``store``; returns the
    number of entries changed.  Their answers do not change."""
    changed = 0
    for name in names:
        key = q("(e.idx -> {})", literal(name))
        found = {}
        # jsonb's text is at least as long as the compact one (a filter
        # only: the length is measured as the writer measures it)
        for (value,) in store.rows(q(
                "SELECT DISTINCT {} FROM {} e WHERE e.cid = {} AND "
                "jsonb_typeof({}) = 'array' AND octet_length({}::text) > {}",
                key, schema.ENTRIES_TABLE, store.cid, key, key, LONG_LIST)):
            ref = stored_list(value)
            if isinstance(ref, ListRef):
                found[str(ref)] = ref.text
        if not found:
            continue
        store.write(store_statement(found))
        digests = sorted(found)
        changed += store.write(q(
            "UPDATE {} x SET idx = jsonb_set(x.idx, {}::text[], "
            "to_jsonb(v.digest)) FROM unnest({}::text[], {}::jsonb[]) AS "
            "v(digest, value) WHERE x.cid = {} AND (x.idx -> {}) = v.value",
            schema.ENTRIES_TABLE, [name], digests,
            [found[d].decode("utf-8") for d in digests], store.cid,
            literal(name))).rowcount
    return changed
