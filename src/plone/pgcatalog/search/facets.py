"""Facet counts: for named indexes, the values a search's matches hold and
how many matches hold each (``portal_catalog.pgc_facets``, docs/facets.md).

The matches are the search's own (:func:`run.matches_of`: the cached
answer's rids, or the same compiled plan's statement, run inside the
counting statement), the query after CMFPlone's security additions, read
in the transaction's snapshot; the facets of one search are counted in
one statement per kind (``facetcounts``: hot indexes from the matches'
key sets, others from the entries).  So a count is what the search would
list, for the user who asks, at the moment the page's results are read.
Counts are kept per process as the result cache keeps answers
(``store.stamped`` under the search's cache key): found, they cost no
statement, and an edit changes only the counts that read what it
changed.

A facet whose index the query names is counted by default as if that
condition were not there (``disjunctive``: the usual drill-down, where a
facet shows what choosing another of its values would give); the
security indexes are never left out.
"""
import datetime
import numbers

from DateTime import DateTime
from Products.PluginIndexes.interfaces import IDateRangeIndex

from plone.pgcatalog.codec import core as codec
from plone.pgcatalog.pg import facetcounts
from plone.pgcatalog.search.cache import key_for
from plone.pgcatalog.search.query import unbatched
from plone.pgcatalog.search.query import unsorted
from plone.pgcatalog.search.run import matches_of

#: the index kinds whose values are counted
COUNTED = ("FieldIndex", "KeywordIndex", "BooleanIndex", "UUIDIndex")
#: the index kinds counted by date buckets (a DateRangeIndex's entry in
#: each bucket its range overlaps)
BUCKETED = ("DateIndex", "DateRangeIndex")
#: never left out of a facet's search (CMFPlone's security additions)
SECURITY = ("allowedRolesAndUsers", "effectiveRange")
#: the query options of an index (``Subject_operator``, ZCatalog's old
#: spelling): left out with the index's own condition
OPTIONS = ("operator", "range", "usage", "not", "depth", "level")

#: named date buckets: the last N days up to now (negative), or the next N
#: days from now
PRESETS = {"past-day": -1, "past-week": -7, "past-month": -31,
           "past-year": -365, "next-day": 1, "next-week": 7,
           "next-month": 31, "next-year": 365}
#: the buckets of a facet that names none
DEFAULT_BUCKETS = {
    "DateIndex": ("past-day", "past-week", "past-month", "past-year"),
    "DateRangeIndex": ("past-month", "past-week", "next-week",
                       "next-month"),
}

_OPTION_NAMES = ("limit", "filter", "disjunctive", "buckets")

#: facets one request may ask for, and buckets one date facet may have:
#: each facet costs a statement (when not kept), a request never seconds
MAX_FACETS = 32
MAX_BUCKETS = 32


class Facet:
    """One requested facet: its index and options."""

    def __init__(self, catalog, name, options):
        if not isinstance(name, str):
            raise TypeError("a facet is named by an index id, not %r"
                            % (name,))
        index = catalog.indexes.get(name)
        if index is None:
            raise ValueError("no index %r to count facets of" % name)
        kind = getattr(index, "meta_type", None)
        if kind not in COUNTED + BUCKETED:
            raise ValueError("facets count FieldIndex, KeywordIndex, "
                             "BooleanIndex, UUIDIndex and (by buckets) "
                             "DateIndex and DateRangeIndex values, not %s %r"
                             % (kind, name))
        if options is None:
            options = {}
        if not isinstance(options, dict):
            raise TypeError("the options of facet %r are a dict, not %r"
                            % (name, options))
        unknown = set(options) - set(_OPTION_NAMES)
        if unknown:
            raise ValueError("unknown options of facet %r: %s" % (
                name, ", ".join(sorted(map(str, unknown)))))
        self.name = name
        self.index = index
        limit = options.get("limit")
        if limit is not None and (isinstance(limit, bool) or
                                  not isinstance(limit, int) or limit < 0):
            raise ValueError("facet %r: limit is a whole number >= 0, not "
                             "%r" % (name, limit))
        self.limit = limit
        text = options.get("filter")
        if text is not None and not isinstance(text, str):
            raise ValueError("facet %r: filter is a string, not %r"
                             % (name, text))
        self.filter = text.lower() if text else None
        self.disjunctive = bool(options.get("disjunctive", True)) \
            and name not in SECURITY
        self.buckets = None
        #: a DateRangeIndex: an entry counts in the buckets its range meets
        self.ranged = IDateRangeIndex.providedBy(index)
        if kind in BUCKETED:
            self.buckets = _buckets(index, name, options.get("buckets"),
                                    DEFAULT_BUCKETS[kind])
        elif options.get("buckets") is not None:
            raise ValueError("facet %r: buckets are for DateIndex and "
                             "DateRangeIndex facets" % name)
        #: what the counts depend on beside the search (a cache key; named
        #: buckets are bounded in minutes from now: a new key each minute)
        self.spec = (name, self.limit, self.filter, self.disjunctive,
                     repr(self.buckets))

    def keys(self, query):
        """The keys of ``query`` that are this facet's index's condition."""
        prefix = self.name + "_"
        return [key for key in query if key == self.name or (
            isinstance(key, str) and key.startswith(prefix) and
            key[len(prefix):] in OPTIONS)]

    def tally(self, raw_counts):
        """``{"values": [(value, count)...], "total": distinct values}``
        from the index's stored values and their counts over the matches
        (``facetcounts.values_counts``)."""
        counts = [(codec.decode(raw), n) for raw, n in raw_counts]
        if self.buckets is not None:
            inside = _overlaps if self.ranged else _within
            values = [(label, sum(n for value, n in counts
                                  if inside(value, lo, hi)))
                      for label, lo, hi in self.buckets]
            return {"values": values, "total": len(values)}
        if self.filter is not None:
            counts = [(value, n) for value, n in counts
                      if self.filter in _text(value).lower()]
        counts.sort(key=_order)
        total = len(counts)
        if self.limit is not None:
            counts = counts[:self.limit]
        return {"values": counts, "total": total}


def _text(value):
    return value if isinstance(value, str) else str(value)


def _order(item):
    """Most matches first; equal counts in the values' order (their text
    when they cannot be compared: mixed types)."""
    value, n = item
    if isinstance(value, bool):
        return (-n, 1, "", int(value))
    if isinstance(value, numbers.Number):
        return (-n, 0, "", value)
    return (-n, 2, _text(value), 0)


def _within(value, lo, hi):
    return isinstance(value, numbers.Number) and \
        (lo is None or value >= lo) and (hi is None or value < hi)


def _overlaps(value, lo, hi):
    """A DateRangeIndex value ``[since, until]`` (None: open, as the index
    takes it) meets the bucket ``lo <= date < hi``."""
    if not isinstance(value, (list, tuple)) or len(value) != 2:
        return False
    since, until = value
    if since is not None and not isinstance(since, numbers.Number) or \
            until is not None and not isinstance(until, numbers.Number):
        return False
    return (hi is None or since is None or since < hi) and \
        (lo is None or until is None or until >= lo)


def _minutes(index, value):
    """A DateTime as the minutes ``index`` stores (its own conversion)."""
    if IDateRangeIndex.providedBy(index):
        return index._convertDateTime(value)
    return index._convert(value)


def _bound(index, name, value):
    """A bucket's bound as the index stores dates, or None (open)."""
    if value is None:
        return None
    if isinstance(value, (str, datetime.datetime, datetime.date)):
        try:
            value = DateTime(value)
        except Exception:
            raise ValueError("facet %r: not a date: %r" % (name, value))
    if not isinstance(value, DateTime):
        raise ValueError("facet %r: a bucket's bounds are dates or None, "
                         "not %r" % (name, value))
    return _minutes(index, value)


def _buckets(index, name, buckets, default):
    """``[(label, low, high)]`` of a date facet: named presets
    (:data:`PRESETS`, the last or the next days from now) or ``(label,
    start, end)`` (start <= date < end; None: open)."""
    if buckets is None:
        buckets = default
    if isinstance(buckets, str) or not isinstance(buckets, (list, tuple)):
        raise ValueError("facet %r: buckets are a list, not %r"
                         % (name, buckets))
    if len(buckets) > MAX_BUCKETS:
        raise ValueError("facet %r: at most %d buckets" % (name, MAX_BUCKETS))
    now = DateTime()
    found = []
    for bucket in buckets:
        if isinstance(bucket, str):
            days = PRESETS.get(bucket)
            if days is None:
                raise ValueError("facet %r: no bucket %r (named ones: %s)"
                                 % (name, bucket, ", ".join(PRESETS)))
            # (the index keeps minutes: this minute included)
            if days < 0:
                found.append((bucket, _minutes(index, now + days),
                              _minutes(index, now) + 1))
            else:
                found.append((bucket, _minutes(index, now),
                              _minutes(index, now + days) + 1))
            continue
        if not isinstance(bucket, (list, tuple)) or len(bucket) != 3:
            raise ValueError("facet %r: a bucket is a name or (label, "
                             "start, end), not %r" % (name, bucket))
        label, lo, hi = bucket
        found.append((label, _bound(index, name, lo),
                      _bound(index, name, hi)))
    return found


def requested(catalog, facets):
    """The :class:`Facet` list of ``facets``: index names, or a dict of
    index name -> options (None: the defaults)."""
    if isinstance(facets, str):
        facets = [facets]
    if isinstance(facets, dict):
        items = list(facets.items())
    elif isinstance(facets, (list, tuple)):
        # (a name asked twice is counted once)
        items = [(name, None) for name in dict.fromkeys(
            name if isinstance(name, str) else repr(name)
            for name in facets)]
    else:
        raise TypeError("facets are index ids or a dict of index id -> "
                        "options, not %r" % (facets,))
    if len(items) > MAX_FACETS:
        raise ValueError("at most %d facets in one request" % MAX_FACETS)
    return [Facet(catalog, name, options) for name, options in items]


def facet_counts(tool, store, query, facets):
    """``{index name: {"values": [(value, count)...], "total": n}}`` of
    the search ``query`` (CMFPlone's security additions made) for the
    requested ``facets`` (:func:`requested`)."""
    wanted = requested(tool._catalog, facets)
    query = unsorted(unbatched(query))
    #: the facets of each search, by the keys it leaves out
    groups = {}
    for facet in wanted:
        left_out = tuple(sorted(facet.keys(query))) if facet.disjunctive \
            else ()
        groups.setdefault(left_out, []).append(facet)
    #: facet name -> its counts, of the searches counted in this call
    counted_now = {}

    def counts_of(left_out, searched):
        # every facet of the search at once: its matches read once, the
        # entries once (facetcounts.values_counts)
        # (a statement of the matches' rids when the result cache does
        # not hold them: counted without sending them to and fro)
        matches = matches_of(tool, store, searched)
        group = groups[left_out]
        found = facetcounts.values_counts(
            store, [f.index for f in group], matches) \
            if not isinstance(matches, list) or matches else \
            [[] for _f in group]
        for facet, raw in zip(group, found):
            counted_now[facet.name] = facet.tally(raw)

    result = {}
    for facet in wanted:
        left_out = tuple(sorted(facet.keys(query))) if facet.disjunctive \
            else ()
        searched = {k: v for k, v in query.items() if k not in left_out}
        _cache, key = key_for(tool, store, searched)

        def count(facet=facet, left_out=left_out, searched=searched):
            if facet.name not in counted_now:
                counts_of(left_out, searched)
            return counted_now[facet.name]

        if key is None:     # result cache off, own writes, unkeyable values
            counted = count()
        else:
            # kept as the result cache keeps the search's answer (its key
            # holds the counters of what the search reads), under the
            # counters of the facet's index too
            counted = store.stamped(("facets", key, facet.spec), count,
                                    names=(facet.name,))
        result[facet.name] = {"values": list(counted["values"]),
                              "total": counted["total"]}
    return result
