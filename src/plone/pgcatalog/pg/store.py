"""The store: every statement on one catalog's rows, for one transaction.

A :class:`CatalogStore` is made per catalog and per
:class:`~plone.pgcatalog.pg.session.CatalogSession` (one ZODB transaction):
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

from plone.pgcatalog.errors import CatalogMissing
from plone.pgcatalog.pg import consistency
from plone.pgcatalog.pg import dberrors
from plone.pgcatalog.pg import keptsets
from plone.pgcatalog.pg import layouts
from plone.pgcatalog.pg import lists
from plone.pgcatalog.pg import outside
from plone.pgcatalog.pg import textstats
from plone.pgcatalog.pg.assumptions import Assumptions
from plone.pgcatalog.pg.fragment import TRUE
from plone.pgcatalog.pg.fragment import ident
from plone.pgcatalog.pg.fragment import literal
from plone.pgcatalog.pg.fragment import q
from plone.pgcatalog.schema import tables as schema
from plone.pgcatalog.search import cache as result_cache

#: (dsn, catalog key) -> cid, once committed
_cids = {}
dberrors.on_forget_catalogs(_cids.clear)
#: (dsn, cid, ...) -> (catalog stamp, value): see CatalogStore.stamped
_stamped = {}
STAMPED_MAX = 1000
#: the same for an index's forward lookups (a value's rids: ``UID`` ->
#: rid, asked by plone.app.uuid on every page view), apart: many values
_forward = {}
FORWARD_MAX = 10000
#: (dsn, catalog key, cid) -> (ZODB generation, change counter): see
#: CatalogStore.change_counter
_counter = {}
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
        store = session.keep(("store", key), CatalogStore(session, key))
    store.created = created
    store.on_write = on_write
    return store


class CatalogStore(outside.EntriesOutside):
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
        #: what a search being compiled assumes (assumptions.py)
        self.assumptions = Assumptions(session)

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
        self.writing()
        return self.session.execute_write(self.cid, fragment)

    def add(self, path, op):
        """Buffer an operation on entry ``path`` (sent in batches)."""
        self.writing()
        self.session.queue_write(self.cid, path, op)

    def writing(self):
        """This transaction writes the catalog: its changes are to be
        counted before the commit (``on_write``, the tool's) at the first
        write, and at the first after they were counted."""
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
                consistency.facts_sql([cid]),
                prepare=consistency.GENERIC_PLAN).fetchall())
            facts = self.session.facts.get(cid)
        return consistency.refusal(facts, generation, self.session.shared)

    def expect_fill(self):
        """Send the facts :meth:`snapshot_complete` needs with the
        transaction's next statement (no round trip of their own)."""
        cid = self.cid
        if cid not in self.session.facts:
            self.session.ride(consistency.facts_sql([cid]),
                              self._snapshot_facts,
                              prepare=consistency.GENERIC_PLAN)

    def _snapshot_facts(self, rows):
        for cid, stamp, prepared, moved in rows:
            self.session.learn_facts(cid, stamp, prepared, moved)

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
                           schema.CATALOGS_TABLE, self.key))
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
            schema.CATALOGS_TABLE, self.key)).fetchone()[0]
        self.session.created_catalog(cid)
        self.session.on_commit(lambda: _cids.__setitem__(key, cid))
        return cid

    def state(self):
        """``(change counter, change stamp)`` as this transaction sees
        them (its own pending changes not counted)."""
        return tuple(self.execute(q(
            "SELECT c.counter + coalesce(sum(l.delta), 0), c.stamp + "
            "count(l.id) FROM {} c LEFT JOIN {} l ON l.cid = c.cid WHERE "
            "c.cid = {} GROUP BY c.counter, c.stamp", schema.CATALOGS_TABLE,
            schema.COMMITS_TABLE, self.cid)).fetchone())

    def change_counter(self):
        """:meth:`state`'s counter, kept per process under the ZODB
        generation of this transaction's view (``cache.view``): every
        commit that moves the counter counts one generation (the tool's
        before-commit hook).  Kept from a snapshot holding exactly what
        that generation counts; read by a transaction with writes of its
        own.  plone.app.textfield asks for it on every page showing rich
        text."""
        generation = self.cache_generation
        session = self.session
        if generation is None or session.has_writes or session.pending or \
                self.wrote:
            return self.state()[0]
        key = (session.dsn, self.key, self.cid)
        found = _counter.get(key)
        if found is not None and found[0] == generation:
            return found[1]
        self.expect_fill()
        counter = self.state()[0]
        if self.snapshot_complete(generation):
            _counter[key] = (generation, counter)
        return counter

    def stamped(self, key, compute, names, kept=None, size=STAMPED_MAX):
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
        when it commits).  ``kept``: the dict that keeps them (default:
        the process's), emptied when it holds ``size``."""
        kept = _stamped if kept is None else kept
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
        found = kept.get(key)
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
        if len(kept) >= size:
            kept.clear()
        kept[key] = (version, value)
        return value

    def forward_rids(self, index, value, compute):
        """``compute()``, the rids of ``index``'s entries holding
        ``value`` (a hashable key), kept per process while that index and
        the entries that exist are unchanged (:meth:`stamped`)."""
        return self.stamped(("forward", index.getId(), type(value), value),
                            compute, names=(index.getId(),), kept=_forward,
                            size=FORWARD_MAX)

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
                            schema.FROM_ENTRIES, self.cid))

    def all_paths(self):
        """``[(rid, path)]`` of every entry, in rid order."""
        return [tuple(r) for r in self.rows(q(
            "SELECT e.rid, e.path FROM {} WHERE e.cid = {} ORDER BY e.rid",
            schema.FROM_ENTRIES, self.cid))]

    def all_rids(self):
        return [rid for rid, _ in self.all_paths()]

    def path_of(self, rid):
        """The path of record ``rid`` (an int key), or None."""
        path = self.paths.get(rid)
        if path is None:
            path = self.value(q(
                "SELECT e.path FROM {} WHERE e.rid = {} AND e.cid = {}",
                schema.FROM_ENTRIES, rid, self.cid))
            if path is not None:
                self.paths[rid] = path
        return path

    def rid_of(self, path):
        return self.value(q(
            "SELECT e.rid FROM {} WHERE e.cid = {} AND e.path = {}",
            schema.FROM_ENTRIES, self.cid, path))

    def metadata(self, rid):
        """The metadata JSON of record ``rid``; None without a record."""
        row = self.execute(q(
            "SELECT m.meta FROM {} JOIN {} ON e.rid = m.rid "
            "WHERE e.rid = {} AND e.cid = {}", schema.FROM_META,
            schema.FROM_ENTRIES, rid,
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
            "ON m.rid = e.rid WHERE e.rid = ANY({})", schema.FROM_ENTRIES,
            schema.FROM_META,
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
                "WHERE e.cid = {} AND e.path = ANY({})", schema.FROM_ENTRIES,
                schema.FROM_META,
                self.cid, wanted)))
        return {p for p in paths if p in self.known}

    def set_metadata(self, rid, meta_json):
        digests = layouts.in_metas([meta_json])
        if digests:
            self.write(layouts.store_statement(digests))
        self.write(q(
            "UPDATE {} SET meta = {}::json FROM {} WHERE m.rid = e.rid AND "
            "e.rid = {} AND e.cid = {}", schema.FROM_META, meta_json,
            schema.FROM_ENTRIES, rid,
            self.cid))

    def clear(self):
        """Delete every entry of the catalog (rows of the other tables go
        with them: foreign keys ``ON DELETE CASCADE``)."""
        self.write(q("DELETE FROM {} WHERE e.cid = {}",
                   schema.FROM_ENTRIES, self.cid))
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
                value, schema.FROM_ENTRIES, rid, self.cid))
        if storage == "text":
            return self.value(q(
                "SELECT t.tsv::text FROM {} JOIN {} ON e.rid = t.rid "
                "WHERE t.rid = {} AND e.cid = {} AND t.name = {}",
                schema.FROM_TEXT,
                schema.FROM_ENTRIES, rid, self.cid, index.getId()))
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
            schema.FROM_ENTRIES, literal(int(self.cid)), condition))]

    def index_count(self, index):
        """Entries with a value in ``index``."""
        if index.pgc_storage == "text":
            # the text rows' kept totals (schema version 5)
            return self.value(q(
                "SELECT coalesce(sum(k.docs), 0)::bigint FROM {} k WHERE "
                "k.cid = {} AND k.name = {}", schema.TEXT_TOTALS_TABLE,
                self.cid, index.getId()))
        if index.pgc_storage == "path":
            return self.count()
        if index.pgc_storage != "idx":
            return 0
        return self.value(q(
            "SELECT count(*) FROM {} WHERE e.cid = {} AND e.idx ? {}",
            schema.FROM_ENTRIES, self.cid, index.getId()))

    def value_counts(self, index, rids=None):
        """``[(raw value, documents)]`` of ``index`` (keyword arrays
        counted per element), over every entry or the entries ``rids``."""
        key = index.pgc_key_sql()
        among = TRUE if rids is None else q("e.rid = ANY({})", list(rids))
        if index.pgc_multi:
            key = lists.expanded_sql(key)
            return self.rows(q(
                "SELECT v, count(*) FROM {}, jsonb_array_elements(CASE WHEN "
                "jsonb_typeof({}) = 'array' THEN {} END) AS v WHERE e.cid = "
                "{} AND {} GROUP BY v", schema.FROM_ENTRIES, key, key,
                self.cid, among))
        return self.rows(q(
            "SELECT {} AS v, count(*) FROM {} WHERE e.cid = {} AND e.idx ? {}"
            " AND {} GROUP BY 1", key, schema.FROM_ENTRIES, self.cid,
            index.getId(), among))

    def distinct_values(self, index, cap=SORT_INDEX_SIZE_CAP):
        """Distinct values of ``index``, counted up to ``cap``."""
        key = index.pgc_key_sql()
        return self.value(q(
            "SELECT count(*) FROM (SELECT DISTINCT {} FROM {} WHERE e.cid = "
            "{} AND ({}) IS NOT NULL LIMIT {}) d", key, schema.FROM_ENTRIES,
            self.cid,
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
            literal(1 - pos), schema.FROM_ENTRIES, self.cid, key, value))

    def clear_index(self, index):
        """Drop ``index``'s values from every entry of the catalog."""
        if index.pgc_storage == "idx":
            self.write(q(
                "UPDATE {} SET idx = idx - {} WHERE cid = {} AND idx ? {}",
                schema.ENTRIES_TABLE, index.getId(), self.cid,
                index.getId()))
        elif index.pgc_storage == "text":
            self.write(q(
                "DELETE FROM {} USING {} WHERE e.rid = t.rid AND e.cid = {} "
                "AND t.name = {}", schema.FROM_TEXT, schema.FROM_ENTRIES,
                self.cid, index.getId()))
            # and its language rows (indexes/text/language.py)
            self.write(q("DELETE FROM {} WHERE cid = {} AND name = {}",
                         schema.LANGTEXT_TABLE, self.cid, index.getId()))

    def unique_words(self, index):
        """Distinct words of text index ``index`` in this catalog."""
        return self.value(index.pgc_unique_words_sql(self.cid))


def forget_caches():
    """Empty the per-process caches (catalog ids, stamped answers, text
    statistics): for tests that rewind the database under a process."""
    for cache in (_cids, _stamped, _forward, _counter):
        cache.clear()
    textstats.forget()
    keptsets.forget()
    result_cache.forget()
