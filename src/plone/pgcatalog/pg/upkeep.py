"""Upkeep of the catalog tables after commits: the planner's statistics
read again after bulk writes (:func:`analyze`), the counts the triggers
keep as +1 / -1 rows folded (:func:`fold_hot_counts`) and the commit log
into its catalog's counter (:func:`compact_commit_log`), the hot tables
vacuumed after every hot row was written again (:func:`vacuum_hot`).

Each runs on a pooled connection of its own, after the transaction that
made it due committed, and is best effort: what it does not do leaves
answers right, only slower to compute.
"""
import logging
import threading

import psycopg
from psycopg import sql

from plone.pgcatalog.pg import db
from plone.pgcatalog.pg.db import get_pool
from plone.pgcatalog.pg.db import run
from plone.pgcatalog.pg.fragment import join
from plone.pgcatalog.pg.fragment import q
from plone.pgcatalog.schema import tables as schema

logger = logging.getLogger("plone.pgcatalog")

#: a transaction writing at least this many entries (install, rebuild,
#: imports) refreshes the planner's statistics right after it commits,
#: rather than leaving queries to wait for autovacuum ...
ANALYZE_AFTER_ROWS = 200
#: ... once the entries this process wrote since its last ANALYZE of the
#: database are at least this fraction of the entries counted then.  A
#: table that grew by less has the same shape for the planner, and
#: autovacuum analyzes it after 2 % of changes (schema); an ANALYZE of the
#: four tables takes 1.3 s at 50,000 entries, so a bulk load of 1,000-entry
#: transactions spent as long analyzing as writing.
ANALYZE_GROWTH = 0.2

_analyses = {}  # dsn -> [entries written since the last ANALYZE, entries then]
_analyses_lock = threading.Lock()


def analyze_due(dsn, rows):
    """Count ``rows`` entries a committed transaction wrote; whether the
    catalog tables should be analyzed now (:func:`analyze`): a transaction
    of ``ANALYZE_AFTER_ROWS`` or more, once the entries written since this
    process's last ANALYZE are ``ANALYZE_GROWTH`` of those counted then
    (the first such transaction of a process always)."""
    with _analyses_lock:
        state = _analyses.setdefault(dsn, [0, 0])
        state[0] += rows
        if rows < ANALYZE_AFTER_ROWS or state[0] < ANALYZE_GROWTH * state[1]:
            return False
        state[0] = 0
        return True


#: the kept counts' +1 / -1 rows are folded once the entries this process
#: wrote since its last fold reach this many (any transaction's count): a
#: fold rewrites the folded rows of every word and key set the new rows
#: name, so a bulk load of 1,000-entry transactions that folded after each
#: spent an eighth of its commits folding; a read sums at most one row per
#: transaction and word or set meanwhile
FOLD_AFTER_ROWS = 10000

_unfolded = {}  # dsn -> entries written since this process's last fold


def fold_due(dsn, rows):
    """Count ``rows`` entries a committed transaction wrote; whether the
    kept counts should be folded now (:func:`fold_hot_counts`): once the
    entries written since this process's last fold are
    ``FOLD_AFTER_ROWS``.  Small transactions are folded after
    ``COMPACT_EVERY`` commits as well (:func:`committed`)."""
    with _analyses_lock:
        written = _unfolded[dsn] = _unfolded.get(dsn, 0) + rows
        if written < FOLD_AFTER_ROWS:
            return False
        _unfolded[dsn] = 0
        return True


def analyze(dsn):
    """ANALYZE the catalog tables (best effort; a table autovacuum is
    busy with is skipped: it is being analyzed, and the connection's
    lock timeout would make the wait an error), and keep the number of
    entries it counted for :func:`analyze_due`."""
    try:
        with get_pool(dsn).connection() as conn:
            run(conn, q("ANALYZE (SKIP_LOCKED) {}", join(", ", [
                schema.ENTRIES_TABLE, schema.META_TABLE,
                schema.TEXT_TABLE, schema.HOT_TABLE, schema.HOT_SETS_TABLE,
                schema.HOT_COUNTS_TABLE, schema.HOT_FREE_SETS_TABLE,
                schema.HOT_KEY_COUNTS_TABLE, schema.TEXT_TOTALS_TABLE,
                schema.TEXT_DF_TABLE, schema.POSTINGS_TABLE,
                schema.LANGPOSTINGS_TABLE])))
            entries = run(conn, q(
                "SELECT greatest(reltuples, 0)::bigint FROM pg_class "
                "WHERE oid = {}::regclass",
                sql.Literal(schema.ENTRIES))).fetchone()[0]
    except psycopg.Error:
        logger.warning("ANALYZE of the catalog tables failed",
                       exc_info=True)
        return
    analyzed(dsn, entries)


def vacuum_hot(dsn):
    """VACUUM and ANALYZE the hot rows, their sets' counts and the kept
    postings after every hot row was written again (a change of the hot
    indexes: hot.refilled).  The counts a search or its facets read come
    from index-only scans, which visit the table for each row of a page
    not yet marked all-visible and step over every dead index entry:
    right after hot indexes were added at 1,000,000 entries, five facets
    counted from the kept counts took 80-136 ms, 10-28 ms once vacuumed
    (5.5 s), and autovacuum gets there minutes later.  Best effort; a
    table autovacuum is busy with is skipped."""
    try:
        with get_pool(dsn).connection() as conn:
            run(conn, q("VACUUM (ANALYZE, SKIP_LOCKED) {}", join(", ", [
                schema.HOT_TABLE, schema.HOT_SETS_TABLE,
                schema.HOT_COUNTS_TABLE, schema.HOT_FREE_SETS_TABLE,
                schema.HOT_KEY_COUNTS_TABLE, schema.POSTINGS_TABLE,
                schema.LANGPOSTINGS_TABLE])))
    except psycopg.Error:
        logger.warning("VACUUM of the hot rows' tables failed",
                       exc_info=True)


def analyzed(dsn, entries):
    """An ANALYZE of ``dsn``'s catalog tables counted ``entries``."""
    with _analyses_lock:
        _analyses.setdefault(dsn, [0, 0])[1] = entries


def fold_hot_counts(dsn):
    """Fold the key sets' counts (``pgcatalog_hot_counts``, hot.py; and
    the free keys' per set, ``pgcatalog_hot_key_counts``): the rows of a
    set and range class (and key) become one, and those of sets that are
    gone (their catalog dropped) go; the text indexes' totals and words'
    document frequencies (``pgcatalog_text_totals``, ``pgcatalog_text_df``,
    textstats.py) likewise.  One statement, READ COMMITTED: the
    rows it deletes and the one it inserts change the sums of no snapshot;
    rows committed meanwhile are left for the next fold.  Best effort: run
    after this process wrote ``FOLD_AFTER_ROWS`` entries (:func:`fold_due`)
    and every ``COMPACT_EVERY`` commits; the counts are right unfolded,
    only longer to add up."""
    try:
        with get_pool(dsn).connection() as conn:
            with conn.transaction():
                if not run(conn, q("SELECT pg_try_advisory_xact_lock({})",
                                   schema.FOLD_LOCK)).fetchone()[0]:
                    return
                run(conn, q(
                    "WITH many AS (SELECT k.sid, k.cls FROM {} k GROUP BY "
                    "k.sid, k.cls HAVING count(*) > 1 OR NOT EXISTS (SELECT "
                    "1 FROM {} s WHERE s.sid = k.sid)), d AS (DELETE FROM {} "
                    "k USING many m WHERE k.sid = m.sid AND k.cls = m.cls "
                    "RETURNING k.cid, k.sid, k.cls, k.n, k.first) INSERT INTO "
                    "{} (cid, sid, cls, n, first) SELECT d.cid, d.sid, d.cls, "
                    "sum(d.n), min(d.first) FROM d WHERE EXISTS (SELECT 1 "
                    "FROM {} s WHERE s.sid = d.sid) GROUP BY d.cid, d.sid, "
                    "d.cls HAVING sum(d.n) <> 0",
                    schema.HOT_COUNTS_TABLE, schema.HOT_SETS_TABLE,
                    schema.HOT_COUNTS_TABLE, schema.HOT_COUNTS_TABLE,
                    schema.HOT_SETS_TABLE))
                # the free keys' counts per set the same way (schema
                # version 4)
                run(conn, q(
                    "WITH many AS (SELECT k.sid, k.cls, k.key FROM {} k "
                    "GROUP BY k.sid, k.cls, k.key HAVING count(*) > 1 OR NOT "
                    "EXISTS (SELECT 1 FROM {} s WHERE s.sid = k.sid)), d AS "
                    "(DELETE FROM {} k USING many m WHERE k.sid = m.sid AND "
                    "k.cls = m.cls AND k.key = m.key RETURNING k.cid, k.sid, "
                    "k.cls, k.key, k.n) INSERT INTO {} (cid, sid, cls, key, "
                    "n) SELECT d.cid, d.sid, d.cls, d.key, sum(d.n) FROM d "
                    "WHERE EXISTS (SELECT 1 FROM {} s WHERE s.sid = d.sid) "
                    "GROUP BY d.cid, d.sid, d.cls, d.key HAVING sum(d.n) <> 0",
                    schema.HOT_KEY_COUNTS_TABLE, schema.HOT_SETS_TABLE,
                    schema.HOT_KEY_COUNTS_TABLE, schema.HOT_KEY_COUNTS_TABLE,
                    schema.HOT_SETS_TABLE))
                # the text indexes' totals (schema version 5): one row per
                # catalog and index; a dropped catalog's add up to nothing
                run(conn, q(
                    "WITH many AS (SELECT k.cid, k.name FROM {} k GROUP BY "
                    "k.cid, k.name HAVING count(*) > 1), d AS (DELETE FROM "
                    "{} k USING many m WHERE k.cid = m.cid AND k.name = "
                    "m.name RETURNING k.cid, k.name, k.docs, k.words) INSERT "
                    "INTO {} (cid, name, docs, words) SELECT d.cid, d.name, "
                    "sum(d.docs), sum(d.words) FROM d GROUP BY d.cid, d.name "
                    "HAVING sum(d.docs) <> 0 OR sum(d.words) <> 0",
                    schema.TEXT_TOTALS_TABLE, schema.TEXT_TOTALS_TABLE,
                    schema.TEXT_TOTALS_TABLE))
                # the words' document frequencies (schema version 6): the
                # words of the rows written since the last fold (a partial
                # index holds them), not every word of the catalogs
                run(conn, q(
                    "WITH many AS (SELECT DISTINCT k.cid, k.name, k.word FROM "
                    "{} k WHERE NOT k.folded), d AS (DELETE FROM {} k USING "
                    "many m WHERE k.cid = m.cid AND k.name = m.name AND "
                    "k.word = m.word RETURNING k.cid, k.name, k.word, k.n) "
                    "INSERT INTO {} (cid, name, word, n, folded) SELECT "
                    "d.cid, d.name, d.word, sum(d.n), true FROM d GROUP BY "
                    "d.cid, d.name, d.word HAVING sum(d.n) <> 0",
                    schema.TEXT_DF_TABLE, schema.TEXT_DF_TABLE,
                    schema.TEXT_DF_TABLE))
    except psycopg.Error:
        logger.warning("folding the key sets' counts failed", exc_info=True)


#: the commit log is folded into pgcatalog_catalogs after this many commits
#: of one process
COMPACT_EVERY = 200

_since_compact = {}


def committed(dsn, cids):
    """This process committed writes to catalogs ``cids``: every
    ``COMPACT_EVERY`` commits of a catalog its commit log is folded and
    the kept counts too."""
    db.count_commit()
    for cid in cids:
        n = _since_compact[(dsn, cid)] = _since_compact.get((dsn, cid), 0) + 1
        if n >= COMPACT_EVERY:
            _since_compact[(dsn, cid)] = 0
            compact_commit_log(dsn, cid)
            fold_hot_counts(dsn)


def compact_commit_log(dsn, cid):
    """Fold catalog ``cid``'s commit log into its counter and stamp (one
    short statement; readers see the same figures before and after)."""
    try:
        with get_pool(dsn).connection() as conn:
            with conn.transaction():
                if not run(conn, q("SELECT pg_try_advisory_xact_lock({}, {})",
                                   schema.COMPACT_LOCK, cid)).fetchone()[0]:
                    return
                # the log's rows go, their sums and count go to the row
                run(conn, q(
                    "WITH d AS (DELETE FROM {} WHERE cid = {} RETURNING "
                    "delta) UPDATE {} SET counter = counter + (SELECT "
                    "coalesce(sum(delta), 0) FROM d), stamp = stamp + "
                    "(SELECT count(*) FROM d) WHERE cid = {}",
                    schema.COMMITS_TABLE, cid, schema.CATALOGS_TABLE,
                    cid))
    except psycopg.Error:
        logger.warning("folding the catalog's commit log failed",
                       exc_info=True)
