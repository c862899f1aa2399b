"""The store: every statement on one catalog's rows, for one transaction.

A :class:`CatalogStore` is made per catalog and per
:class:`~plone.pgcatalog.session.CatalogSession` (one ZODB transaction):
it knows the catalog's id in PostgreSQL, holds the transaction's small
caches (rid -> path, paths known to have metadata) and runs every read and
write on ``pgcatalog_entries``, ``pgcatalog_meta`` and ``pgcatalog_text``
that is not a search plan's own statement (``plans.py``) or the batched
writes of catalogued objects (``writer.py``).  The tool, index objects and
result sequences ask the store; none of them writes SQL.

Per-process caches of catalog-wide answers (``uniqueValues``, a sort
index's size) live here too (text statistics: ``textstats.py``): they are
exact, keyed by the catalog's change stamp read in the transaction's own
snapshot (:meth:`CatalogStore.stamped`).

Why one module of some 440 lines: it is the one place that holds a
catalog's statements (the point of the room); split by table it would
scatter the caches and the catalog id that every statement shares.
"""
import time

from plone.pgcatalog import cache as result_cache
from plone.pgcatalog import consistency
from plone.pgcatalog import dberrors
from plone.pgcatalog import layouts
from plone.pgcatalog import lists
from plone.pgcatalog import schema
from plone.pgcatalog import textstats
from plone.pgcatalog.errors import CatalogMissing
from plone.pgcatalog.fragment import ident
from plone.pgcatalog.fragment import literal
from plone.pgcatalog.fragment import q


ENTRIES = q("{} e", ident(schema.ENTRIES))
#: (dsn, catalog key, path) of the catalogs known to hold an entry outside
#: the tree at that path (CatalogStore.outside_known)
_OUTSIDE = set()
META = q("{} m", ident(schema.META))
TEXT = q("{} t", ident(schema.TEXT))

#: (dsn, catalog key) -> cid, once committed
_cids = {}
dberrors.on_forget_catalogs(_cids.clear)
#: (dsn, cid, ...) -> (catalog stamp, value): see CatalogStore.stamped
_stamped = {}
STAMPED_MAX = 1000
#: dsn -> (monotonic time, PostgreSQL's statistics' number of hot rows of
#: every catalog, or None); read again after HOT_ROWS_TTL seconds
_hot_rows = {}
HOT_ROWS_TTL = 60.0
#: ZCatalog walks a sort index only when it has fewer distinct values
#: than rlen / (1 + rlen / 100) < 100: counting up to this is enough
SORT_INDEX_SIZE_CAP = 100


def rid_key(rid):
    """``rid`` as a record id PostgreSQL can look up, or None when no
    record can have it (ZCatalog's IOBTrees find nothing under a key that
    is no integer, or one out of range)."""
    if isinstance(rid, int) and -2 ** 63 <= rid < 2 ** 63:
        return int(rid)
    return None


def store_for(session, key, created, on_write=None):
    """The store of catalog ``key`` (the tool's ``_pgc_key``) in
    ``session``; ``created``: the catalog's rows were made once, so their
    absence is an error (CatalogMissing), not a new catalog; ``on_write()``
    is called at the transaction's first write to the catalog."""
    store = session.cache.get(("store", key))
    if store is None:
        store = session.cache[("store", key)] = CatalogStore(session, key)
    store.created = created
    store.on_write = on_write
    return store


class CatalogStore:
    """Statements on one catalog's rows in one transaction."""

    def __init__(self, session, key):
        self.session = session
        self.key = key
        self.created = False
        self.on_write = None
        #: this transaction wrote to the catalog (or queued a write)
        self.wrote = False
        #: the result cache's view of this transaction (cache.key_for): its
        #: generation (fill checks) and the catalog's change counters
        #: (changes.py), or None
        self.cache_generation = None
        self.counters = None
        self._cid = None
        #: the ZODB generation to check the snapshot against, until the
        #: session is told (watch)
        self._generation = None
        #: rid -> path, as this transaction read them
        self.paths = {}
        #: paths this transaction saw with metadata
        self.known = set()

    # -- plumbing -----------------------------------------------------------
    def is_current(self):
        """Whether this is still its transaction's store (a savepoint's
        rollback and the transaction's end drop it)."""
        return self.session.cache.get(("store", self.key)) is self

    def execute(self, fragment, prepare=None, binary=False):
        """Run a statement (a Fragment) in the transaction; the cursor."""
        return self.session.execute(fragment, prepare=prepare, binary=binary)

    def rows(self, fragment):
        return self.execute(fragment).fetchall()

    def value(self, fragment):
        """The first column of the first row (None without a row)."""
        row = self.execute(fragment).fetchone()
        return None if row is None else row[0]

    def write(self, fragment):
        """Run a statement writing this catalog's rows."""
        self._writing()
        return self.session.execute_write(self.cid, fragment)

    def add(self, path, op):
        """Buffer an operation on entry ``path`` (sent in batches)."""
        self._writing()
        self.session.pending.add(self.cid, path, op)

    def _writing(self):
        self.wrote = True
        if self.on_write is not None and \
                self.session.count_hooks.get(self.key) != "registered":
            # the first write, or one after the changes were counted
            self.on_write()

    def snapshot_complete(self, generation):
        """Whether this transaction's PostgreSQL snapshot holds exactly the
        catalog writes that ZODB generation ``generation`` counts
        (consistency.complete; see cache.py).  Its facts come with the
        transaction's first statement (the session watches the catalog),
        else with a statement of their own, once."""
        return self.fill_refusal(generation) is None

    def fill_refusal(self, generation):
        """Why this transaction's snapshot may not fill the result cache
        (consistency.refusal), or None."""
        cid = self.cid
        facts = self.session.facts.get(cid)
        if facts is None:
            self._snapshot_facts(self.execute(
                consistency.facts_sql([cid])).fetchall())
            facts = self.session.facts.get(cid)
        return consistency.refusal(facts, generation, self.session.shared)

    def expect_fill(self):
        """Send the facts :meth:`snapshot_complete` needs with the
        transaction's next statement (no round trip of their own)."""
        cid = self.cid
        if cid not in self.session.facts:
            self.session.ride(consistency.facts_sql([cid]),
                              self._snapshot_facts)

    def _snapshot_facts(self, rows):
        for cid, stamp, prepared, moved in rows:
            self.session.facts[cid] = consistency.Facts(stamp, prepared,
                                                        moved)

    @property
    def cid(self):
        """This catalog's id (its ``pgcatalog_catalogs`` row, made on first
        use, in the transaction that first uses it).  A catalog whose row
        vanished after it was made (the database replaced, the row deleted)
        raises CatalogMissing instead of silently starting empty."""
        if self._cid is None:
            self._cid = self._catalog_id()
            self._watch()
        return self._cid

    def watch(self, generation):
        """Have the session check that its snapshot agrees with the ZODB
        generation ``generation()`` of this catalog (consistency.py), as
        soon as the catalog's id is known (without a statement when this
        process knows it)."""
        self._generation = generation
        if self._cid is None:
            self._cid = _cids.get((self.session.dsn, self.key))
        if self._cid is not None:
            self._watch()

    def _watch(self):
        generation, self._generation = self._generation, None
        if generation is not None:
            self.session.watch(self._cid, generation())

    def _catalog_id(self):
        key = (self.session.dsn, self.key)
        cid = _cids.get(key)
        if cid is not None:
            return cid
        cid = self.value(q("SELECT cid FROM {} WHERE key = {}",
                           ident(schema.CATALOGS), self.key))
        if cid is not None:
            _cids[key] = cid
            return cid
        if self.created:
            raise CatalogMissing(
                "The PostgreSQL rows of this catalog (key %s) are gone.  "
                "Restore the database from a backup, or make a new empty "
                "catalog (portal_catalog.pgc_recreate_catalog()) and "
                "rebuild it." % self.key)
        # made in this transaction (seen by it, by others once it commits)
        cid = self.session.execute_write(None, q(
            "INSERT INTO {} (key) VALUES ({}) RETURNING cid",
            ident(schema.CATALOGS), self.key)).fetchone()[0]
        self.session.created_catalog(cid)
        self.session.on_commit(lambda: _cids.__setitem__(key, cid))
        return cid

    def state(self):
        """``(change counter, change stamp)`` as this transaction sees
        them (its own pending changes not counted)."""
        return tuple(self.execute(q(
            "SELECT c.counter + coalesce(sum(l.delta), 0), c.stamp + "
            "count(l.id) FROM {} c LEFT JOIN {} l ON l.cid = c.cid WHERE "
            "c.cid = {} GROUP BY c.counter, c.stamp", ident(schema.CATALOGS),
            ident(schema.COMMITS), self.cid)).fetchone())

    def stamped(self, key, compute, names):
        """``compute()``, cached per process while what it reads is
        unchanged (exact).  A transaction with its own catalog writes
        computes afresh.

        ``names``: the indexes whose values it reads.  With the
        catalog's change counters in this transaction's view
        (``cache.view``): kept under their counters, those of the entries
        that exist and of "everything", as the result cache keys an answer
        (changes.py), and filled only from a PostgreSQL snapshot holding
        exactly what the ZODB snapshot counts (``snapshot_complete``).
        Found, it costs no statement: the counters are the ZODB
        snapshot's.  Otherwise under the catalog's change stamp, read with
        a statement (every transaction writing to the catalog bumps it
        when it commits)."""
        session = self.session
        if session.has_writes or session.pending or self.wrote:
            return compute()
        counters = self.counters
        if counters is not None:
            version = ("counters", counters.token, counters.all,
                       counters.rows) + tuple(counters.names.get(name, 0)
                                              for name in names)
        else:
            version = ("stamp", self.state()[1])
        key = (session.dsn, self.key) + tuple(key)
        found = _stamped.get(key)
        if found is not None and found[0] == version:
            return found[1]
        if counters is not None:
            # whether the snapshot may fill: asked with the same statement
            self.expect_fill()
        # computed in the transaction's snapshot, the version's
        value = compute()
        if counters is not None and \
                not self.snapshot_complete(self.cache_generation):
            return value        # read for this transaction only
        if len(_stamped) >= STAMPED_MAX:
            _stamped.clear()
        _stamped[key] = (version, value)
        return value

    def hot_rows(self):
        """PostgreSQL's statistics' number of hot rows (every catalog's:
        an upper bound of any answer from them), read at most once per
        ``HOT_ROWS_TTL`` seconds per process; None when unknown (never
        analyzed).  An estimate: use it only to choose how to read."""
        dsn = self.session.dsn
        now = time.monotonic()
        seen = _hot_rows.get(dsn)
        if seen is None or now - seen[0] > HOT_ROWS_TTL:
            value = self.value(q(
                "SELECT c.reltuples FROM pg_class c WHERE c.oid = "
                "to_regclass({})", literal(schema.HOT)))
            seen = _hot_rows[dsn] = (
                now, None if value is None or value < 0 else float(value))
        return seen[1]

    def server_facts(self):
        """``(schema version, server version)``."""
        return self.execute(q(
            "SELECT (SELECT max(version) FROM {}), "
            "current_setting('server_version')",
            ident("pgcatalog_schema"))).fetchone()

    # -- records ------------------------------------------------------------
    def count(self):
        return self.value(q("SELECT count(*) FROM {} WHERE e.cid = {}",
                            ENTRIES, self.cid))

    def all_paths(self):
        """``[(rid, path)]`` of every entry, in rid order."""
        return [tuple(r) for r in self.rows(q(
            "SELECT e.rid, e.path FROM {} WHERE e.cid = {} ORDER BY e.rid",
            ENTRIES, self.cid))]

    def all_rids(self):
        return [rid for rid, _ in self.all_paths()]

    def path_of(self, rid):
        """The path of record ``rid`` (an int key), or None."""
        path = self.paths.get(rid)
        if path is None:
            path = self.value(q(
                "SELECT e.path FROM {} WHERE e.rid = {} AND e.cid = {}",
                ENTRIES, rid, self.cid))
            if path is not None:
                self.paths[rid] = path
        return path

    def rid_of(self, path):
        return self.value(q(
            "SELECT e.rid FROM {} WHERE e.cid = {} AND e.path = {}",
            ENTRIES, self.cid, path))

    def metadata(self, rid):
        """The metadata JSON of record ``rid``; None without a record."""
        row = self.execute(q(
            "SELECT m.meta FROM {} JOIN {} ON e.rid = m.rid "
            "WHERE e.rid = {} AND e.cid = {}", META, ENTRIES, rid,
            self.cid)).fetchone()
        return None if row is None else (row[0] or {})

    def meta_layout(self):
        """``lookup(digest)``: the column names of a metadata layout
        (codec.meta_dict)."""
        return layouts.lookup(self)

    def metadata_window(self, rids):
        """``{rid: (path, meta JSON text or None)}`` for ``rids`` (one
        statement); fills the rid -> path and known-metadata caches."""
        rows = self.execute(q(
            "SELECT e.rid, e.path, m.meta::text FROM {} LEFT JOIN {} "
            "ON m.rid = e.rid WHERE e.rid = ANY({})", ENTRIES, META,
            list(rids)), binary=True).fetchall()
        found = {}
        for rid, path, meta in rows:
            self.paths[rid] = path
            if meta is not None:
                self.known.add(path)
            found[rid] = (path, meta)
        return found

    def with_metadata(self, paths):
        """Which of ``paths`` have metadata, as this transaction sees them
        (one statement for any number of paths)."""
        wanted = [p for p in paths if p not in self.known]
        if wanted:
            self.known.update(r[0] for r in self.rows(q(
                "SELECT e.path FROM {} JOIN {} ON m.rid = e.rid "
                "WHERE e.cid = {} AND e.path = ANY({})", ENTRIES, META,
                self.cid, wanted)))
        return {p for p in paths if p in self.known}

    def set_metadata(self, rid, meta_json):
        digests = layouts.in_metas([meta_json])
        if digests:
            self.write(layouts.store_statement(digests))
        self.write(q(
            "UPDATE {} SET meta = {}::json FROM {} WHERE m.rid = e.rid AND "
            "e.rid = {} AND e.cid = {}", META, meta_json, ENTRIES, rid,
            self.cid))

    def clear(self):
        """Delete every entry of the catalog (rows of the other tables go
        with them: foreign keys ``ON DELETE CASCADE``)."""
        self.write(q("DELETE FROM {} WHERE e.cid = {}", ENTRIES, self.cid))
        self.paths.clear()
        self.known.clear()

    # -- one index's values -------------------------------------------------
    def index_value(self, index, rid):
        """The stored value of ``index`` for record ``rid`` (raw: JSON,
        tsvector text or path), or None."""
        storage = index.pgc_storage
        if storage == "idx":
            value = index.pgc_key_sql()
            if index.pgc_multi:
                value = lists.expanded_sql(value)
            return self.value(q(
                "SELECT {} FROM {} WHERE e.rid = {} AND e.cid = {}",
                value, ENTRIES, rid, self.cid))
        if storage == "text":
            return self.value(q(
                "SELECT t.tsv::text FROM {} JOIN {} ON e.rid = t.rid "
                "WHERE t.rid = {} AND e.cid = {} AND t.name = {}", TEXT,
                ENTRIES, rid, self.cid, index.getId()))
        if storage == "path":
            return self.path_of(rid)
        return None

    def index_rids(self, condition):
        """Rids (ascending) of the entries meeting ``condition`` (a
        Fragment over ``e``)."""
        # the catalog id as a literal: a prepared statement's generic plan
        # can then use the catalog's own (partial) indexes
        return [r[0] for r in self.rows(q(
            "SELECT e.rid FROM {} WHERE e.cid = {} AND {} ORDER BY e.rid",
            ENTRIES, literal(int(self.cid)), condition))]

    def index_count(self, index):
        """Entries with a value in ``index``."""
        if index.pgc_storage == "text":
            return self.value(q(
                "SELECT count(*) FROM {} JOIN {} ON e.rid = t.rid WHERE "
                "e.cid = {} AND t.name = {}", TEXT, ENTRIES, self.cid,
                index.getId()))
        if index.pgc_storage == "path":
            return self.count()
        if index.pgc_storage != "idx":
            return 0
        return self.value(q(
            "SELECT count(*) FROM {} WHERE e.cid = {} AND e.idx ? {}",
            ENTRIES, self.cid, index.getId()))

    def value_counts(self, index):
        """``[(raw value, documents)]`` of ``index`` (keyword arrays
        counted per element)."""
        key = index.pgc_key_sql()
        if index.pgc_multi:
            key = lists.expanded_sql(key)
            return self.rows(q(
                "SELECT v, count(*) FROM {}, jsonb_array_elements(CASE WHEN "
                "jsonb_typeof({}) = 'array' THEN {} END) AS v WHERE e.cid = "
                "{} GROUP BY v", ENTRIES, key, key, self.cid))
        return self.rows(q(
            "SELECT {} AS v, count(*) FROM {} WHERE e.cid = {} AND e.idx ? {}"
            " GROUP BY 1", key, ENTRIES, self.cid, index.getId()))

    def distinct_values(self, index, cap=SORT_INDEX_SIZE_CAP):
        """Distinct values of ``index``, counted up to ``cap``."""
        key = index.pgc_key_sql()
        return self.value(q(
            "SELECT count(*) FROM (SELECT DISTINCT {} FROM {} WHERE e.cid = "
            "{} AND ({}) IS NOT NULL LIMIT {}) d", key, ENTRIES, self.cid,
            key, literal(int(cap))))

    def range_bound_counts(self, index, pos):
        """``[(value, open-ended, documents)]`` of DateRangeIndex
        ``index``'s since (``pos`` 0) or until (1) values."""
        key = index.pgc_key_sql()
        value = q("({} -> {})", key, literal(pos))
        return self.rows(q(
            "SELECT {} AS v, ({} -> {}) = 'null'::jsonb AS is_open, "
            "count(*) FROM {} WHERE e.cid = {} AND {} IS NOT NULL "
            "AND {} <> 'null'::jsonb GROUP BY 1, 2", value, key,
            literal(1 - pos), ENTRIES, self.cid, key, value))

    def clear_index(self, index):
        """Drop ``index``'s values from every entry of the catalog."""
        if index.pgc_storage == "idx":
            self.write(q(
                "UPDATE {} SET idx = idx - {} WHERE cid = {} AND idx ? {}",
                ident(schema.ENTRIES), index.getId(), self.cid,
                index.getId()))
        elif index.pgc_storage == "text":
            self.write(q(
                "DELETE FROM {} USING {} WHERE e.rid = t.rid AND e.cid = {} "
                "AND t.name = {}", TEXT, ENTRIES, self.cid, index.getId()))

    # -- text statistics (textstats.py) -------------------------------------
    def text_stats(self, index):
        """``(documents, total words)`` of text index ``index`` (Okapi's
        collection statistics)."""
        return textstats.stats(self, index)

    def text_df(self, index, tsquery):
        """Documents of text index ``index`` matching ``tsquery``: a word's
        document frequency for the Okapi score."""
        return textstats.df(self, index, tsquery)

    def entries_outside(self, path):
        """Whether some entry of this catalog is neither the object at
        ``path`` nor below it (asked unless known: :meth:`outside_known`)."""
        found = self.outside_known(path)
        if found is None:
            found = self.execute(self._outside_sql(path),
                                 prepare=True).fetchone()[0]
            self._know_outside(path, found)
        return found

    def outside_known(self, path):
        """:meth:`entries_outside` as known without a statement, or None.
        An answer holds for one state of the transaction (the session's
        epoch moves when its writes are sent or rolled back, or its
        snapshot ends; with writes waiting to be sent, nothing is known); a
        yes, for this process's life (it only makes path searches take the
        form that is right either way)."""
        if (self.session.dsn, self.key, path) in _OUTSIDE:
            return True
        if self.session.pending:
            return None     # the next statement sends writes first
        found = self.session.cache.get(("outside", self.key, path))
        if found is not None and found[0] == self.session.epoch:
            return found[1]
        return None

    def ride_outside(self, path):
        """Ask :meth:`entries_outside` with the transaction's next
        statement (no round trip of its own)."""
        self.session.ride(self._outside_sql(path),
                          lambda rows: self._know_outside(path, rows[0][0]),
                          prepare=True)

    def _know_outside(self, path, found):
        found = bool(found)
        self.session.cache[("outside", self.key, path)] = (
            self.session.epoch, found)
        if found:
            _OUTSIDE.add((self.session.dsn, self.key, path))

    def _outside_sql(self, path):
        """The three ranges around the tree at ``path``, each probed for
        its first entry in index order: a plan that does not depend on the
        values (prepared).  As EXISTS (or one OR of the ranges),
        PostgreSQL's generic plan scanned the table (36-66 ms at 100,000
        entries)."""
        x = "/" + "/".join(c for c in path.split("/") if c)
        first = ("(SELECT e.path FROM {} WHERE e.cid = {} AND %s ORDER BY "
                 "%s LIMIT 1) IS NOT NULL")
        return q("SELECT " + " OR ".join([
            first % ("e.path < {}", "e.cid DESC, e.path DESC"),
            first % ("e.path > {} AND e.path < {}", "e.cid, e.path"),
            first % ("e.path >= {}", "e.cid, e.path")]),
            ENTRIES, self.cid, x, ENTRIES, self.cid, x, x + "/", ENTRIES,
            self.cid, x + "0")

    def text_words(self, index, prefix, pattern=None):
        """The lexicon's words of text index ``index`` a glob matches
        (sorted), or None when there are too many (textstats.words)."""
        return textstats.words(self, index, prefix, pattern)

    def text_prefetch(self, index, tsqueries):
        """Read those of the statistics and document frequencies a score
        needs that are not kept, in one statement."""
        textstats.prefetch(self, index, tsqueries)

    def unique_words(self, index):
        """Distinct words of text index ``index`` in this catalog."""
        return self.value(index.pgc_unique_words_sql(self.cid))


def forget_caches():
    """Empty the per-process caches (catalog ids, stamped answers, text
    statistics): for tests that rewind the database under a process."""
    for cache in (_cids, _stamped):
        cache.clear()
    textstats.forget()
    result_cache.forget()
