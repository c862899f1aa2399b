"""The key sets' ids a search meets, kept per process and assumed.

A text search, or a walk of the hot sort date, beside key conditions
needs the ids of the key sets those conditions meet before its statement
(``hot.set_ids``): given as a parameter, the planner knows how many hot
rows they hold.  Read alone, they cost a round trip.  They are kept under
the catalog's change counters, and after a change that can move them the
ids found last are assumed and checked with the search in its snapshot
(``CatalogStore.assumptions``).  docs/hot-keys.md.
"""

#: (dsn, cid, statement text, parameters) -> (version, row): what a
#: :func:`hot.set_ids` statement found, kept while no committed write could
#: have changed it (:func:`found_ids`)
_found_ids = {}
FOUND_IDS_MAX = 5000
#: the same key -> the row a statement found last, whatever the counters:
#: the row a search may assume, checked in its own snapshot
#: (:func:`found_ids`)
_last_ids = {}


def found_ids(store, statement, names):
    """The row of a :func:`hot.set_ids` ``statement`` on ``store``'s catalog,
    whose key sets are of the indexes ``names`` (:func:`hot.set_names`): read
    once and kept, exact as the result cache is (changes.py).  A key set
    is inserted once and never changed; a new one, or rows moving between
    sets (their counts), come only with a write that changes the values of
    an index in the sets or which entries exist, counted in the catalog's
    change counters; registering hot keys counts as a change of
    everything.  So the row is kept under those counters, filled only from
    a snapshot that holds exactly what they count, and read again by a
    transaction that finds other counters (or without counters: the result
    cache off; or with writes of its own).

    Read again, it costs a search a round trip before its own, after every
    edit of a document (its state, its roles) although new key sets are
    rare.  So, when the search allows it (``store.assumptions``: its
    caller checks them), the row
    this process found last is assumed and the statement sent with the
    search, in its snapshot, to check it: a search that assumed other key
    sets than its snapshot holds is compiled and read again (the count, a
    second value, only chooses a plan: not checked)."""
    counters = store.counters
    if counters is None or store.session.has_writes:
        return tuple(store.execute(statement).fetchone())
    version = (counters.token, counters.all, counters.rows) + tuple(
        counters.names.get(name, 0) for name in names)
    key = (store.session.dsn, store.cid, statement.text,
           repr(statement.params))
    kept = _found_ids.get(key)
    if kept is not None and kept[0] == version:
        return kept[1]
    store.expect_fill()
    last = _last_ids.get(key)
    if last is not None and store.assumptions.allowed:
        store.assumptions.assume(statement, last,
                     lambda row: _found(store, key, version, row),
                     same=lambda assumed, found: assumed[0] == found[0])
        return last
    row = tuple(store.execute(statement).fetchone())
    _found(store, key, version, row)
    return row


def _found(store, key, version, row):
    """A row of a key sets' statement, read in ``store``'s snapshot."""
    if len(_last_ids) >= FOUND_IDS_MAX:
        _last_ids.clear()
    _last_ids[key] = row
    if store.snapshot_complete(store.cache_generation):
        if len(_found_ids) >= FOUND_IDS_MAX:
            _found_ids.clear()
        _found_ids[key] = (version, row)


def forget():
    _found_ids.clear()
    _last_ids.clear()
