"""Search plans that sort every match as ZCatalog's sortResults does:

- :class:`UnlimitedSort`: sorted in PostgreSQL (no ``b_size`` /
  ``sort_limit``), with ZCatalog's choice of algorithm mirrored (see its
  docstring);
- :class:`PythonSorted`: a sort index Python must order (GopipIndex):
  the matches and their SQL sort ranks read in one row, put in order by
  :class:`PositionOrder` with the folders' positions (again on every hit
  of a cached answer).

A page sorted in PostgreSQL is a :class:`~plans.Page` (``plans.py``, the
base of these plans too).
"""

from plone.pgcatalog.indexes.common import MISSING
from plone.pgcatalog.indexes.interfaces import IPythonSortKind
from plone.pgcatalog.pg.fragment import and_
from plone.pgcatalog.pg.fragment import ident
from plone.pgcatalog.pg.fragment import join
from plone.pgcatalog.pg.fragment import q
from plone.pgcatalog.pg.store import SORT_INDEX_SIZE_CAP
from plone.pgcatalog.schema import tables as schema
from plone.pgcatalog.search.plans import FIRST_WITH_METADATA
from plone.pgcatalog.search.plans import RID
from plone.pgcatalog.search.plans import Plan
from plone.pgcatalog.search.plans import fetch_row
from plone.pgcatalog.search.plans import keep_first_metadata
from plone.pgcatalog.search.plans import keep_small_metadata
from plone.pgcatalog.search.plans import tie_break
from plone.pgcatalog.search.plans import with_small_metadata
from plone.pgcatalog.search.results import Answer


class UnlimitedSort(Plan):
    """Every match, sorted (no ``b_size`` / ``sort_limit``).

    ZCatalog's sortResults then picks its algorithm by the size of the
    first sort index: when the matches outnumber its distinct values
    (``rlen > len(index) * (rlen / 100 + 1)``, low-cardinality indexes,
    small sites) it walks the index's values, so (1) documents with equal
    keys stay in ascending rid order in *both* directions, and (2)
    ``actual_result_count`` still counts the matches without a sort key.
    The statement counts both (``FILTER``); :meth:`run` decides (it asks
    the store for the index's size) and runs ``ties`` for case (1).  With
    several sort indexes, ties keep ascending rid order in both algorithms;
    the walk's other departures (documents lacking a secondary key kept)
    are not mirrored: the sort contract applies."""

    def __init__(self, where, order, presents, sort_indexes, reverse):
        keyed = and_(*presents)

        def select(tie):
            return q("SELECT count(*), array_agg(e.rid ORDER BY {}) FILTER "
                     "(WHERE {}), count(*) FILTER (WHERE {}) FROM {} "
                     "WHERE {}", join(", ", list(order) + [tie]), keyed,
                     keyed, schema.FROM_ENTRIES, where)

        tie = tie_break(reverse)
        # with the metadata of the first brains (their window: a listing
        # renders its first page)
        self.statement = with_small_metadata(
            select(tie), 3, 1, first=FIRST_WITH_METADATA)
        self.iterate_index = None
        self.ties = None
        if len(sort_indexes) == 1:
            self.iterate_index = sort_indexes[0]
            if tie is not RID:
                self.ties = with_small_metadata(
                    select(RID), 3, 1, first=FIRST_WITH_METADATA)

    def answer(self, store):
        row = fetch_row(store, self.statement)
        rlen, rids, keyed = row[:3]
        rids = rids or []
        count = keyed
        index = self.iterate_index
        if index is not None and rlen and (
                keyed < rlen or self.ties is not None):
            size = self.walkable_size(index, store)
            if size is not None and rlen > size * (rlen / 100 + 1):
                count = rlen
                if self.ties is not None and keyed > 1:
                    row = fetch_row(store, self.ties)
                    rids = row[1] or []
        answer = Answer(rids, count)
        keep_first_metadata(store, answer, row[3:])
        return answer

    @staticmethod
    def walkable_size(index, store):
        """``len(index)`` (its distinct values) as ZCatalog's sortResults
        sees it, counted up to SORT_INDEX_SIZE_CAP; cached while the
        catalog is unchanged.  None for the kinds ZCatalog cannot walk
        that way as it walks an UnIndex (several keys or none per
        document, BooleanIndex's one-sided BTree): their answers follow
        the sort contract (zcatalog-contract.md §9)."""
        if not index.pgc_walkable_sort:
            return None
        return store.stamped(
            ("sort-index-size", index.getId()),
            lambda: store.distinct_values(index, SORT_INDEX_SIZE_CAP),
            names=(index.getId(),))


#: a listing sorted in Python (a folder's contents by position) of up to
#: this many matches comes with every match's metadata: its first page is
#: known only after the sort, and a round trip for it costs more than
#: the rows (a folder of 200 documents: about 140 KB)
SORTED_WITH_METADATA = 256


def _sortable(value):
    return (0,) if value is None else (1, value)


class PythonSorted(Plan):
    """Sorting needs Python (GopipIndex positions come from the folders):
    fetch rid, path and the SQL sort keys of every match as arrays (one
    row), then sort as ZCatalog's sortResults: entries without a key are
    left out; one sort index orders (key, rid) pairs, several sort
    stably.  ``conditions``: the search's conditions over ``e``
    (Fragments, the catalog's first)."""

    def __init__(self, conditions, sort_keys, sort_indexes, reverse,
                 window):
        self.sort_indexes = sort_indexes
        self.reverse = reverse
        self.b_start = window.b_start
        self.b_size = window.b_size
        conditions = list(conditions)
        ranks = []
        for index, (keys, present) in zip(sort_indexes, sort_keys):
            if IPythonSortKind.providedBy(index):
                continue
            # the rank of the entry's key in the SQL order of *all* the
            # sort expressions: Python sorts these integers, ties stay ties
            ranks.append(q("dense_rank() OVER (ORDER BY {})",
                           join(", ", keys)))
            if present is not None:
                conditions.append(present)
        columns = join("", [q(", {} AS {}", r, _column(n))
                            for n, r in enumerate(ranks)])
        inner = q("SELECT e.rid, e.path{} FROM {} WHERE {}", columns,
                  schema.FROM_ENTRIES, and_(*conditions))
        aggregates = join("", [q(", array_agg(s.{})", _column(n))
                               for n in range(len(ranks))])
        # arrays in any (but the same) order: put in rid order in Python
        # (a short listing with its brains' metadata: the paths are here)
        self.statement = with_small_metadata(q(
            "SELECT array_agg(s.rid), array_agg(s.path){} FROM ({}) s",
            aggregates, inner), 2 + len(ranks), 0, paths=False,
            small=SORTED_WITH_METADATA)

    def answer(self, store):
        row = fetch_row(store, self.statement)
        rids = row[0] or []
        paths = row[1] or []
        sql_keys = row[2:-2]
        meta_rids, metas = row[-2:]
        small = None
        if meta_rids is not None:
            # (an entry without metadata has none: None)
            meta_of = dict(zip(meta_rids, metas))
            small = (rids, paths, [meta_of.get(rid) for rid in rids])
        if rids:
            # rid order (the order ties keep, as in ZCatalog's sort)
            order = sorted(range(len(rids)), key=rids.__getitem__)
            rids = [rids[i] for i in order]
            paths = [paths[i] for i in order]
            sql_keys = [[keys[i] for i in order] if keys else keys
                        for keys in sql_keys]
        reorder = PositionOrder(
            [(index.getId() if IPythonSortKind.providedBy(index) else None)
             for index in self.sort_indexes], self.reverse, self.b_start,
            self.b_size, rids, paths, sql_keys)
        answer = Answer(*reorder(self.sort_indexes))
        answer.reorder = reorder
        if small is not None:
            keep_small_metadata(store, answer, *small)
        return answer


class PositionOrder:
    """The Python half of a :class:`PythonSorted` answer: the matches (rid
    order, with their SQL sort keys) put in order with the folders'
    positions *as they are now*, as GopipIndex reads them at sort time.
    A cached answer is ordered again on every hit (positions change
    without catalog writes: ``moveObjectsByDelta(...,
    suppress_events=True)``), from this transaction's folders.  Holds no
    persistent object: the sort indexes are named and looked up in the
    catalog of the transaction ordering."""

    def __init__(self, python_names, reverse, b_start, b_size, rids, paths,
                 sql_keys):
        self.python_names = python_names
        self.reverse = reverse
        self.b_start = b_start
        self.b_size = b_size
        self.rids = rids
        self.paths = paths
        self.sql_keys = sql_keys
        #: (the folders' order token, the order it gave): one folder's
        #: listing is sorted again only when that folder's order changed
        self.memo = None
        #: the folders of the matches (their paths), found once
        self.parents = None

    def size(self):
        return 120 * len(self.rids) + sum(len(p) for p in self.paths)

    def __call__(self, sort_indexes):
        """``(rids of the batch, count)``, ordered by ``sort_indexes``
        (the catalog's index objects, in the query's order)."""
        rids, paths = self.rids, self.paths
        sql_keys = iter(self.sql_keys)
        columns = []
        for index, name in zip(sort_indexes, self.python_names):
            if name is not None:
                pos = index.pgc_positions(paths)
                columns.append([pos.get(p, MISSING) for p in paths])
            else:
                columns.append(next(sql_keys) or [])
        if len(columns) == 1:
            keyed = [(_sortable(k), rid) for k, rid in zip(columns[0], rids)
                     if k is not MISSING]
            keyed.sort(reverse=self.reverse[0])
        else:
            keyed = [(keys, rid) for keys, rid in zip(zip(*columns), rids)
                     if MISSING not in keys]
            # stable multi-pass sort: last key first, each with its
            # direction
            for n in reversed(range(len(columns))):
                keyed.sort(key=lambda item: _sortable(item[0][n]),
                           reverse=self.reverse[n])
        rids = [rid for _, rid in keyed]
        count = len(rids)
        if self.b_size is not None:
            rids = rids[self.b_start:self.b_start + self.b_size]
        return rids, count

    def again(self, catalog):
        """``(rids, count)`` with the positions of ``catalog``'s
        transaction."""
        indexes = [catalog.getIndex(name) if name is not None else None
                   for name in self.python_names]
        if self.parents is None:
            self.parents = frozenset(p.rpartition("/")[0]
                                     for p in self.paths)
        tokens = tuple(index.pgc_order_token(self.parents)
                       for index in indexes if index is not None)
        if None in tokens:
            return self(indexes)
        memo = self.memo
        if memo is not None and memo[0] == tokens:
            return memo[1]
        ordered = self(indexes)
        self.memo = (tokens, ordered)
        return ordered


def _column(n):
    return ident("k%d" % n)
