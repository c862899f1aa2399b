"""Buffered catalog writes, and their application to PostgreSQL.

The session buffers each transaction's catalog calls in
:class:`PendingWrites`.

An operation is either :class:`Delete` or :class:`Upsert`.  The operations of
one entry are folded into at most a delete and an upsert
(:func:`fold`), then every entry is written, in the order it was first
catalogued (its rows locked first in ``(cid, path)`` order), inside one
pipeline: one network round trip for the whole batch.  The session sends
them (:class:`SessionWrites`) before its next statement, or at the vote.
"""
import logging

import orjson
import psycopg

from plone.pgcatalog.changes import Changes
from plone.pgcatalog.pg import dberrors
from plone.pgcatalog.pg import layouts
from plone.pgcatalog.pg import lists
from plone.pgcatalog.pg.fragment import Fragment
from plone.pgcatalog.pg.fragment import join
from plone.pgcatalog.pg.fragment import literal
from plone.pgcatalog.pg.fragment import q
from plone.pgcatalog.schema import tables as schema

logger = logging.getLogger("plone.pgcatalog")


class PendingWrites:
    """Catalog writes not yet sent to PostgreSQL, coalesced per entry.

    Keyed by ``(cid, path)``; each value is the list of operations for that
    entry in call order.  ``snapshot()`` / ``restore()`` serve savepoints.
    """

    def __init__(self):
        self.ops = {}
        self.counter = {}  # cid -> number of catalog/uncatalog calls

    def __bool__(self):
        return bool(self.ops) or bool(self.counter)

    def add(self, cid, path, op):
        self.ops.setdefault((cid, path), []).append(op)
        self.counter[cid] = self.counter.get(cid, 0) + 1

    def take_ops(self, cid=None):
        """The buffered operations (of catalog ``cid`` only, if given),
        removed from the buffer."""
        if cid is None:
            ops, self.ops = self.ops, {}
            return ops
        ops = {key: value for key, value in self.ops.items()
               if key[0] == cid}
        for key in ops:
            del self.ops[key]
        return ops

    def take_counter(self):
        counter, self.counter = self.counter, {}
        return counter

    def snapshot(self):
        return ({key: list(value) for key, value in self.ops.items()},
                dict(self.counter))

    def restore(self, snap):
        ops, counter = snap
        self.ops = {key: list(value) for key, value in ops.items()}
        self.counter = dict(counter)


class Delete:
    """Remove an entry.  A delete that ``claims`` first writes the entry's
    key, as an insert that does nothing when a row is there, then deletes
    whatever holds it (:func:`claim_statement`)."""
    __slots__ = ("claims",)
    kind = "delete"

    def __init__(self, claims=False):
        self.claims = claims


DELETE = Delete()
#: a live delete mirrored into an online build (mirror.py).  Under
#: REPEATABLE READ a plain DELETE skips a row its snapshot does not show:
#: a batch's entry for the same object, written meanwhile from an older
#: ZODB snapshot, would stay behind, an orphan.  Writing the key instead
#: makes the two meet in the key's unique index: the delete waits for the
#: batch and fails with a serialization failure (a ConflictError, retried,
#: then deleting the batch's row), or the batch waits for the delete and
#: its transaction, committed after the delete's, leaves a row the check
#: before the switch finds (rebuild.OnlineRebuild._forget_removed).
CLAIMED_DELETE = Delete(claims=True)


class Upsert:
    """Index (all or some indexes of) one entry.

    ``full``: the index values replace all stored ones (ZCatalog's
    ``idxs=[]``); otherwise ``idx_set``/``idx_remove`` patch the stored
    document, so a partial reindex never blanks other indexes.
    ``meta``: encoded metadata (str) or None to keep the stored metadata.
    ``text_set``: text index name -> tsvector text; ``text_remove``: names
    whose rows go away.  ``meta_from``: with ``meta`` None, a callable
    giving the encoded metadata should the entry have none when the batch
    is written (ZCatalog computes metadata on a partial reindex for new
    entries only: :func:`resolve_metadata` asks once per batch).
    """
    __slots__ = ("full", "idx_set", "idx_remove", "meta", "text_set",
                 "text_remove", "meta_from")
    kind = "upsert"

    def __init__(self, full, idx_set, idx_remove, meta, text_set,
                 text_remove, meta_from=None):
        self.full = full
        self.idx_set = idx_set
        self.idx_remove = idx_remove
        self.meta = meta
        self.text_set = text_set
        self.text_remove = text_remove
        self.meta_from = meta_from if meta is None else None

    def _meta_after(self, later):
        if later.meta is not None:
            return later.meta, None
        if self.meta is not None:
            return self.meta, None
        return None, later.meta_from or self.meta_from

    def merged_with(self, later):
        """This upsert followed by ``later`` (same entry)."""
        meta, meta_from = self._meta_after(later)
        if later.full:
            return Upsert(True, dict(later.idx_set), [], meta,
                          dict(later.text_set), [], meta_from)
        idx_set = dict(self.idx_set)
        idx_remove = [k for k in self.idx_remove if k not in later.idx_set]
        for key in later.idx_remove:
            idx_set.pop(key, None)
            if not self.full and key not in idx_remove:
                idx_remove.append(key)
        idx_set.update(later.idx_set)
        text_set = dict(self.text_set)
        text_remove = [k for k in self.text_remove
                       if k not in later.text_set]
        for key in later.text_remove:
            text_set.pop(key, None)
            if not self.full and key not in text_remove:
                text_remove.append(key)
        text_set.update(later.text_set)
        return Upsert(self.full, idx_set, idx_remove, meta, text_set,
                      text_remove, meta_from)


def fold(ops):
    """Reduce one entry's operations to ``(delete_first, upsert_or_None)``:
    ``delete_first`` is False or the last :class:`Delete`."""
    delete_first = False
    upsert = None
    for op in ops:
        if isinstance(op, Delete):
            delete_first = op
            upsert = None
        elif upsert is None:
            upsert = op
        else:
            upsert = upsert.merged_with(op)
    return delete_first, upsert


def lazy_metadata(ops):
    """``{(cid, path): upsert}`` of the entries whose metadata is to be
    computed only if they have none (see Upsert.meta_from)."""
    lazy = {}
    for key, entry_ops in ops.items():
        if any(not isinstance(op, Delete) and op.meta_from is not None
               for op in entry_ops):
            lazy[key] = entry_ops
    return lazy




def with_metadata(keys):
    """Which of the ``(cid, path)`` pairs ``keys`` have metadata."""
    return q("SELECT e.cid, e.path FROM {} e JOIN {} m ON m.rid = e.rid "
             "JOIN unnest({}::bigint[], {}::text[]) AS k(cid, path) "
             "ON e.cid = k.cid AND e.path = k.path", schema.ENTRIES_TABLE,
             schema.META_TABLE,
             [k[0] for k in keys], [k[1] for k in keys])


def resolve_metadata(lazy, present):
    """Give the lazily recorded entries of ``lazy`` their metadata unless
    ``present`` (the ``(cid, path)`` pairs that have some) says they have
    it and no delete in the batch removes it."""
    for key, entry_ops in lazy.items():
        delete_first, upsert = fold(entry_ops)
        if upsert is None or upsert.meta is not None:
            continue
        if key in present and not delete_first:
            continue
        meta = upsert.meta_from()
        # the entry's last upsert carries it (fold keeps the latest meta)
        for op in reversed(entry_ops):
            if not isinstance(op, Delete):
                op.meta = meta
                op.meta_from = None
                break


def split_path(path):
    """``(parent, depth)`` of a catalog path (uid); the parent is not
    stored, but computed from the path alike (``tables.parent_sql``)."""
    parts = [p for p in path.split("/") if p]
    cut = path.rfind("/")
    parent = path[:cut] if cut > 0 else ""
    return parent, len(parts)


def lock_statement(cid, paths):
    """Lock the existing rows of ``paths`` in path order; each row as it
    was: ``(path, rid, idx, metadata text, text index names)``, what the
    writes change is found from it (changes.Changes.entry)."""
    return q("SELECT e.path, e.rid, e.idx, (SELECT m.meta::text FROM {} m "
             "WHERE m.rid = e.rid), ARRAY(SELECT t.name FROM {} t WHERE "
             "t.rid = e.rid) FROM {} e WHERE e.cid = {} AND e.path = ANY({}) "
             "ORDER BY e.path FOR UPDATE OF e", schema.META_TABLE,
             schema.TEXT_TABLE, schema.ENTRIES_TABLE, cid,
             sorted(paths))


def claim_statement(cid, path):
    """Write entry ``path``'s key (a row of no index values, deleted next
    in the same transaction) unless a row holds it (see CLAIMED_DELETE)."""
    _, depth = split_path(path)
    return q("INSERT INTO {} (cid, path, depth, idx) VALUES ({}, {}, {}, "
             "{}::jsonb) ON CONFLICT (cid, path) DO NOTHING",
             schema.ENTRIES_TABLE, cid, path, depth, "{}")


def delete_statement(cid, path):
    return q("DELETE FROM {} WHERE cid = {} AND path = {}",
    schema.ENTRIES_TABLE, cid,
             path)


def upsert_statement(cid, path, op):
    """One statement writing entry ``path`` as ``op`` says: the entry row
    (its whole index document, or a patch of it), then in the same
    statement its metadata and language rows (CTEs reading the entry's
    rid); its text rows are written with the batch's (text_statements).
    Its text depends only on the shape of ``op``, so psycopg prepares each
    shape once per connection.

    A row that would be written as it is is left alone (``WHERE ... IS
    DISTINCT FROM``): Plone reindexes many objects whose values did not
    change, and such a write made a new version of the row (and of the
    entry's, of its every index but for a HOT update).  The entry's rid
    then comes from the row as it stands (``r``)."""
    _, depth = split_path(path)
    values = q("({}, {}, {}, {}::jsonb)", cid, path, depth,
               orjson.dumps(op.idx_set).decode("utf-8"))
    if op.full:
        new = q("EXCLUDED.idx")
    else:
        new = q("((x.idx || EXCLUDED.idx) - {}::text[])",
                list(op.idx_remove))
    # as text: jsonb's equality takes 1 for 1.0, which must be written
    ctes = [q("e AS (INSERT INTO {} AS x (cid, path, depth, idx) "
              "VALUES {} ON CONFLICT (cid, path) DO UPDATE SET idx = {} "
              "WHERE x.idx::text IS DISTINCT FROM ({})::text RETURNING rid)",
              schema.ENTRIES_TABLE, values, new, new),
            q("r AS (SELECT rid FROM e UNION ALL SELECT x.rid FROM {} x "
              "WHERE x.cid = {} AND x.path = {} AND NOT EXISTS (SELECT 1 "
              "FROM e))", schema.ENTRIES_TABLE, cid, path)]
    if op.meta is not None:
        ctes.append(q("m AS (INSERT INTO {} AS y (rid, meta) SELECT rid, "
                      "{}::json FROM r ON CONFLICT (rid) DO UPDATE SET "
                      "meta = EXCLUDED.meta WHERE y.meta::text IS DISTINCT "
                      "FROM EXCLUDED.meta::text)", schema.META_TABLE, op.meta))
    languages = [name for name, value in op.text_set.items()
                 if getattr(value, "language", None) is not None]
    if op.full:
        # a full reindex: the language rows of the indexes not searched
        # by language go (the text rows: text_statements)
        ctes.append(q("ld AS (DELETE FROM {} l USING r WHERE l.rid = r.rid "
                      "AND NOT (l.name = ANY({}::text[])))",
                      schema.LANGTEXT_TABLE, languages))
    elif op.text_remove:
        ctes.append(q("ld AS (DELETE FROM {} l USING r WHERE l.rid = r.rid "
                      "AND l.name = ANY({}::text[]))", schema.LANGTEXT_TABLE,
                      list(op.text_remove)))
    if languages:
        ctes.append(language_rows(cid, [
            (name, op.text_set[name].language) for name in languages]))
    return q("WITH {} SELECT rid FROM r", join(", ", ctes))


def text_statements(cid, upserts):
    """The statements writing the text rows of ``upserts`` (``[(path,
    Upsert)]``, entries of catalog ``cid`` written before them): the rows
    a full reindex does not write again and those ``text_remove`` names
    deleted in one statement, then every row written in one more.

    One statement for the batch, not one per entry: the text rows'
    statement triggers (Okapi's totals, the words' frequencies, postings:
    schema versions 5-7) run once per statement, and their rows add up
    the batch's words (a build of 1,000 entries per transaction wrote
    three trigger runs and a frequency row per word for each entry)."""
    statements = []
    full = [path for path, op in upserts if op.full]
    kept = [(path, name) for path, op in upserts if op.full
            for name in op.text_set]
    gone = [(path, name) for path, op in upserts if not op.full
            for name in op.text_remove]
    if full or gone:
        statements.append(q(
            "DELETE FROM {} t USING {} e WHERE e.cid = {} AND t.rid = e.rid "
            "AND ((e.path = ANY({}::text[]) AND NOT EXISTS (SELECT 1 FROM "
            "unnest({}::text[], {}::text[]) k(path, name) WHERE k.path = "
            "e.path AND k.name = t.name)) OR (e.path, t.name) IN (SELECT "
            "g.path, g.name FROM unnest({}::text[], {}::text[]) g(path, "
            "name)))", schema.TEXT_TABLE, schema.ENTRIES_TABLE, cid, full,
            [p for p, _n in kept], [n for _p, n in kept],
            [p for p, _n in gone], [n for _p, n in gone]))
    rows = [(path, name, value) for path, op in upserts
            for name, value in op.text_set.items()]
    if rows:
        statements.append(q(
            "INSERT INTO {} AS t (rid, cid, name, tsv, dl, tf) SELECT "
            "e.rid, e.cid, v.name, v.tsv::tsvector, v.dl, v.tf::jsonb FROM "
            "unnest({}::text[], {}::text[], {}::text[], {}::int[], "
            "{}::text[]) AS v(path, name, tsv, dl, tf) JOIN {} e ON e.cid "
            "= {} AND e.path = v.path ON CONFLICT (rid, name) DO UPDATE SET "
            "tsv = EXCLUDED.tsv, dl = EXCLUDED.dl, tf = EXCLUDED.tf WHERE "
            "(t.tsv, t.dl, t.tf::text) IS DISTINCT FROM (EXCLUDED.tsv, "
            "EXCLUDED.dl, EXCLUDED.tf::text)", schema.TEXT_TABLE,
            [r[0] for r in rows], [r[1] for r in rows],
            [str(r[2]) for r in rows],
            [getattr(r[2], "dl", None) for r in rows],
            [None if getattr(r[2], "tf", None) is None
             else orjson.dumps(r[2].tf).decode("utf-8") for r in rows],
            schema.ENTRIES_TABLE, cid))
    return statements


#: the weighted tsvector of a language row's texts (``v.a`` .. ``v.c``:
#: weights A .. C) parsed with the row's configuration, and its words as
#: written (``v.d``, weight D: the simple configuration, for prefixes;
#: indexes/text/language.py)
_WEIGHTED = q(
    "(setweight(to_tsvector(v.config::regconfig, v.a), 'A') || "
    "setweight(to_tsvector(v.config::regconfig, v.b), 'B') || "
    "setweight(to_tsvector(v.config::regconfig, v.c), 'C') || "
    "setweight(to_tsvector({}::regconfig, v.d), 'D'))",
    literal(schema.FORMS_CONFIG))


def language_rows(cid, values):
    """The CTE writing the language rows (``pgcatalog_langtext``) of the
    entry ``r``: ``values`` ``[(text index name, language.LanguageValue)]``,
    parsed by PostgreSQL with each one's text search configuration."""
    texts = [value.texts() for _name, value in values]
    return q("li AS (INSERT INTO {} AS l (rid, cid, name, config, tsv) "
             "SELECT r.rid, {}, v.name, v.config, {} FROM r, unnest("
             "{}::text[], {}::text[], {}::text[], {}::text[], {}::text[], "
             "{}::text[]) AS v(name, config, a, b, c, d) ON CONFLICT (rid, "
             "name) DO UPDATE SET config = EXCLUDED.config, tsv = "
             "EXCLUDED.tsv WHERE (l.config, l.tsv) IS DISTINCT FROM "
             "(EXCLUDED.config, EXCLUDED.tsv))", schema.LANGTEXT_TABLE, cid,
             _WEIGHTED, [name for name, _value in values],
             [value.config for _name, value in values],
             [t[0] for t in texts], [t[1] for t in texts],
             [t[2] for t in texts], [t[3] for t in texts])


class Writer:
    """Writes folded operations in one pipeline.

    The batch's existing rows are locked first, in ``(cid, path)`` order, so
    concurrent transactions lock catalog rows in the same order and cannot
    deadlock on them; then entries are written in the order they were first
    catalogued, so new entries get their rids in indexing order as in
    ZCatalog (whose sorted results order ties by rid).  The locked rows, as
    they were, tell what the batch changed (``{cid: changes.Changes}``,
    returned: the result cache's counters, changes.py)."""

    def apply(self, conn, ops):
        paths = {}
        for cid, path in ops:
            paths.setdefault(cid, []).append(path)
        locks = {}
        long_lists = {}
        for entry_ops in ops.values():
            for op in entry_ops:
                if not isinstance(op, Delete):
                    long_lists.update(lists.refs_in(op.idx_set))
        folded = {key: fold(entry_ops) for key, entry_ops in ops.items()}
        digests = layouts.in_metas(
            upsert.meta for _delete, upsert in folded.values()
            if upsert is not None and upsert.meta is not None)
        with conn.pipeline():
            cur = conn.cursor()
            if long_lists:
                # before the entries that reference them
                _run(cur, lists.store_statement(long_lists))
            if digests:
                # the metadata layouts, before the records naming them
                _run(cur, layouts.store_statement(digests))
            for cid in sorted(paths):
                locks[cid] = conn.cursor()
                _run(locks[cid], lock_statement(cid, paths[cid]))
            texts = {}
            for key, (delete_first, upsert) in folded.items():
                cid, path = key
                if delete_first:
                    if delete_first.claims:
                        _run(cur, claim_statement(cid, path))
                    _run(cur, delete_statement(cid, path))
                if upsert is not None:
                    _run(cur, upsert_statement(cid, path, upsert))
                    if upsert.full or upsert.text_set or upsert.text_remove:
                        texts.setdefault(cid, []).append((path, upsert))
            for cid in sorted(texts):
                for statement in text_statements(cid, texts[cid]):
                    _run(cur, statement)
        found = {}
        for cid, lock in locks.items():
            changes = found[cid] = Changes()
            old = {row[0]: row[1:] for row in lock.fetchall()}
            for path in paths[cid]:
                changes.entry(old.get(path), *folded[(cid, path)],
                              path=path)
        return found


def _run(cur, statement):
    cur.execute(statement.text, statement.params, prepare=True)


class SessionWrites:
    """The writing part of a catalog session (a mixin of
    :class:`~plone.pgcatalog.pg.session.CatalogSession`, whose state it
    reads and changes: ``pending``, ``wrote``, ``dirty``,
    ``counter_flushed``, ``changes``, ``failed``): writes buffered in
    :class:`PendingWrites` go to PostgreSQL before the session's next
    statement (``flush``), in a savepoint, applied by :class:`Writer`;
    what they changed is kept for the catalog's change counters."""

    def changed_hot_keys(self, cid):
        """This transaction registered or unregistered hot keys of catalog
        ``cid`` (hot.py)."""
        self.hot_changed.add(cid)

    def forget_hot_changes(self):
        """The tool made the hot-key changes conflict with concurrent
        writers (or none needed to)."""
        self.hot_changed.clear()

    def count_hook(self, key, state):
        """The before-commit hook counting catalog ``key``'s changes is
        ``state`` ("registered" or "counted"; tool.py)."""
        self.count_hooks[key] = state

    def count_generation(self, key):
        """Whether catalog ``key``'s generation is yet to be counted in this
        transaction (True once: the caller counts it)."""
        if key in self.generation_counted:
            return False
        self.generation_counted.add(key)
        return True

    def queue_write(self, cid, path, op):
        """Buffer operation ``op`` on entry ``path`` of catalog ``cid``
        (sent before the next statement, or at the vote)."""
        self.pending.add(cid, path, op)

    def execute_write(self, cid, query, params=()):
        """Run one writing statement on catalog ``cid``'s rows (None: no
        catalog's rows, e.g. a new catalog's own)."""
        if isinstance(query, Fragment):
            query, params = query.text, query.params
        if self.pending:
            self.flush()
        self.writes_sent = True
        self.settle()
        self._begin_checked()
        try:
            cursor = self._run(query, params, None, False, write=True)
        finally:
            self.epoch += 1
        if cid is not None:
            self.dirty.add(cid)
            # a statement on any number of rows: every answer may change
            self._changes(cid).all = True
        return cursor

    def _changes(self, cid):
        changes = self.changes.get(cid)
        if changes is None:
            changes = self.changes[cid] = Changes()
        return changes

    def take_changes(self, cid):
        """What this transaction changed in catalog ``cid`` since the last
        call, its pending writes sent first (a before-commit hook counts
        them: changes.py)."""
        self.flush()
        self.counted.add(cid)
        return self.changes.pop(cid, None) or Changes()

    def commits_catalog(self, cid):
        """Whether the commit will log a change of catalog ``cid`` (its
        change stamp goes up: tpc_vote), as things stand."""
        return bool((self.wrote or self.pending) and (
            cid in self.dirty or cid in self.counter_flushed
            or cid in self.pending.counter))

    def flush(self):
        """Send buffered writes to PostgreSQL (in a savepoint: if they are
        refused, the transaction cannot commit, but goes on until then)."""
        if not self.pending:
            return
        if self.failed is not None:
            # the commit will fail anyway: keep the writes in Python
            return
        lazy = lazy_metadata(self.pending.ops)
        if lazy:
            # one statement for the batch: which entries have metadata
            statement = with_metadata(list(lazy))
            present = {tuple(r) for r in self._run(
                statement.text, statement.params, True, False).fetchall()}
            resolve_metadata(lazy, present)
        ops = self.pending.take_ops()
        counter = self.pending.take_counter()
        for cid, n in counter.items():
            self.counter_flushed[cid] = self.counter_flushed.get(cid, 0) + n
        self.dirty.update(counter)
        self.dirty.update(cid for cid, _path in ops)
        if not ops:
            return
        self.rows_written += len(ops)
        self.writes_sent = True
        # big answers found before these writes keep what they found
        self.settle()
        self._begin_checked()

        def queue(conn, fresh):
            conn.execute("SAVEPOINT pgc_flush", prepare=False)
            self._unlimited(conn)
            found = self.writer.apply(conn, ops)
            self._limited(conn)
            conn.execute("RELEASE SAVEPOINT pgc_flush", prepare=False)
            return found

        def failed(conn, exc, fresh):
            error = dberrors.translate_error(exc, "catalog writes")
            dberrors.forget_prepared(conn)
            if dberrors.connection_lost(exc) or conn.broken:
                self._contain(conn, exc, False)
            else:
                try:
                    with conn.pipeline():
                        conn.execute("ROLLBACK TO SAVEPOINT pgc_flush",
                                     prepare=False)
                        conn.execute("RELEASE SAVEPOINT pgc_flush",
                                     prepare=False)
                    # the transaction (begun here if it was not) goes on
                    self.begun = True
                except psycopg.Error:
                    self._contain(conn, exc, False)
            self.failed = error
            raise error from None

        try:
            found = self._send(queue, failed)
        finally:
            self.epoch += 1
        self.wrote = True
        for cid, changes in found.items():
            self._changes(cid).update(changes)

    def set_commit_error(self, cid, path, exc, what=None):
        """Make this transaction's commit fail with ``exc`` (or not, with
        None) because of entry ``path``'s latest record, as the ZODB would
        when pickling ZCatalog's data."""
        if exc is None:
            self.commit_errors.pop((cid, path), None)
            return
        logger.error("%s: %s (the transaction cannot commit)", what, exc)
        self.commit_errors[(cid, path)] = exc

    def counter_delta(self, cid):
        return (self.counter_flushed.get(cid, 0)
                + self.pending.counter.get(cid, 0))
