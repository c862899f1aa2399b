"""Planner statistics of the catalog's expression indexes: one extended
statistics object per distinct expression list of a valid partial
expression index of ``pgcatalog_entries`` (see below)."""
import hashlib

from psycopg import sql

from plone.pgcatalog.schema.tables import DDL_LOCK

# -- planner statistics of the expression indexes ---------------------------
#
# PostgreSQL keeps statistics on the expressions of an expression index, but
# its planner ignores those of a *partial* index ("they probably don't
# reflect whole-relation statistics"), and a DateIndex's B-tree is partial
# (``WHERE cid = N``; so were every B-tree before the shared ones, and are
# a catalog's until ``pgc_sync_indexes`` builds them shared).  Without them
# every condition on an index value is estimated at a default selectivity
# (0.5 % for an equality): a query for half the entries was estimated at 2
# rows, and the planner fetched every match and sorted it where walking the
# sort index would stop after a page (100,000 entries: "Documents by title,
# b_start=1000" 302 -> 9 ms).  An extended statistics object on the same
# expressions (PostgreSQL 14+) gives the planner the distribution of the
# whole table, as it would have for a plain column.  One object per
# distinct expression list, shared by the catalogs; made and dropped to
# follow the valid *partial* expression indexes (:func:`ensure_statistics`),
# filled by the next ANALYZE.
#
# Only for those: the planner loads every statistics object of a table
# each time it plans a statement on it (their expressions parsed again),
# which cost about 0.3 ms of every statement on the entries with one object
# per index (10,000 entries, 23 objects: 0.43 ms of planning against 0.13
# with the indexes' own statistics), more than many of those statements
# take to run.

_EXPRESSION_INDEXES_SQL = """
    SELECT i.indexrelid, ARRAY(
        SELECT pg_get_indexdef(i.indexrelid, k, true)
        FROM generate_subscripts(i.indkey, 1) AS s(n),
             LATERAL (SELECT s.n + 1 AS k) kk
        WHERE i.indkey[s.n] = 0 ORDER BY s.n)
    FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
    WHERE i.indrelid = to_regclass('pgcatalog_entries') AND i.indisvalid
      AND i.indexprs IS NOT NULL AND i.indpred IS NOT NULL
      AND c.relname LIKE 'pgcatalog\\_x\\_%%'"""

_STATISTICS_SQL = """
    SELECT s.stxname FROM pg_statistic_ext s
    WHERE s.stxrelid = to_regclass('pgcatalog_entries')
      AND s.stxname LIKE 'pgcatalog\\_s\\_%%'"""


#: how long making or dropping a statistics object waits for the table
STATISTICS_LOCK_WAIT = "5s"


def statistics_name(expressions):
    """The statistics object's name for an index's expressions."""
    digest = hashlib.sha1("\x00".join(expressions).encode("utf-8"))
    return "pgcatalog_s_%s" % digest.hexdigest()[:12]


def ensure_statistics(conn):
    """Give every valid partial expression index of ``pgcatalog_entries``
    its statistics object and drop those no index wants any more (under the
    DDL lock, in a transaction of its own).  The expressions are
    PostgreSQL's own rendering of the catalog's index definitions.  Returns
    the names created (they hold nothing until the next ANALYZE)."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (DDL_LOCK,))
        # CREATE/DROP STATISTICS wait for an ANALYZE of the table (they
        # block no reader or writer): past the deadlock check, autovacuum's
        # gives way; a manual one or an index build may take longer
        conn.execute(sql.SQL("SET LOCAL lock_timeout = {}").format(
            sql.Literal(STATISTICS_LOCK_WAIT)), ())
        wanted = {}
        for _oid, expressions in conn.execute(
                _EXPRESSION_INDEXES_SQL, ()).fetchall():
            if expressions:
                wanted[statistics_name(expressions)] = expressions
        existing = {row[0] for row in conn.execute(
            _STATISTICS_SQL, ()).fetchall()}
        for name in sorted(existing - set(wanted)):
            conn.execute(sql.SQL("DROP STATISTICS IF EXISTS {}").format(
                sql.Identifier(name)), ())
        created = sorted(set(wanted) - existing)
        for name in created:
            conn.execute(sql.SQL(
                "CREATE STATISTICS IF NOT EXISTS {} ON {} FROM "
                "pgcatalog_entries").format(
                sql.Identifier(name), sql.SQL(", ").join(
                    sql.SQL("({})").format(sql.SQL(expression))
                    for expression in wanted[name])), ())
    return created
