"""Which text indexes keep postings (``pgcatalog_postings``, schema
version 7): one row per word and text row, beside the entry's key set and
range, from which a prefix or a union of words beside the hot conditions
is read as one B-tree range per word (docs/suggest.md).

``Title`` keeps them in a new database.  :func:`keep` names the indexes
that keep them (by name, in every catalog of the database): the postings
of an index taken off are deleted, those of an index added are written
from its text rows, in the caller's transaction; searches follow in the
same snapshot (they ask the names table in their statement), so no
process needs a restart.  ``pgcatalog-migrate --postings`` runs it.
"""
from plone.pgcatalog.pg import db
from plone.pgcatalog.pg.fragment import join
from plone.pgcatalog.pg.fragment import q
from plone.pgcatalog.schema import tables as schema

#: the columns of a posting, in the order :func:`expected` gives them
COLUMNS = q("(cid, name, word, rid, tf, dl, sid, lo, hi, rng)")


def expected(names=None, cid=None):
    """``SELECT`` of the postings the text rows give (every column of
    :data:`COLUMNS`): of the indexes the names table names, or of the
    indexes of ``names`` (a Fragment: a relation of one column ``name``),
    of every catalog or of catalog ``cid``.  A word's count is read as a
    score reads it from the text row (the stored count, 1 when not stored,
    the positions of a row written before counts were stored); the key set
    and range are the entry's hot row's."""
    if names is None:
        names = q("{}", schema.POSTINGS_NAMES_TABLE)
    where = [q("u.lexeme <> chr(3)")]
    if cid is not None:
        where.append(q("n.cid = {}", int(cid)))
    return q(
        "SELECT n.cid, n.name, u.lexeme, n.rid, coalesce((n.tf ->> "
        "u.lexeme)::float8, CASE WHEN n.tf IS NULL THEN cardinality("
        "u.positions)::float8 ELSE 1 END), n.dl, h.sid, h.lo, h.hi, h.rng "
        "FROM {} n JOIN {} k ON k.name = n.name CROSS JOIN LATERAL "
        "unnest(n.tsv) u LEFT JOIN {} h ON h.rid = n.rid WHERE {}",
        schema.TEXT_TABLE, names, schema.HOT_TABLE, join(" AND ", where))


def kept(conn):
    """The names of the text indexes that keep postings, sorted."""
    return [r[0] for r in db.run(conn, q(
        "SELECT name FROM {} ORDER BY 1",
        schema.POSTINGS_NAMES_TABLE)).fetchall()]


def keep_statements(names):
    """The statements making ``names`` (text index names) exactly those
    that keep postings, run in order in one transaction.  Catalog writes
    wait meanwhile (the text and hot rows are locked against change: a
    row written by a trigger that did not yet see the new names would be
    missed); two runs wait for each other."""
    names = sorted(set(names))
    for name in names:
        if not isinstance(name, str) or not name:
            raise ValueError("a text index name: %r" % (name,))
    return [
        q("LOCK TABLE {}, {} IN SHARE ROW EXCLUSIVE MODE",
          schema.TEXT_TABLE, schema.HOT_TABLE),
        q("DELETE FROM {} WHERE name <> ALL({}::text[])",
          schema.POSTINGS_TABLE, names),
        q("DELETE FROM {} WHERE name <> ALL({}::text[])",
          schema.POSTINGS_NAMES_TABLE, names),
        q("WITH k AS (INSERT INTO {} (name) SELECT unnest({}::text[]) ON "
          "CONFLICT DO NOTHING RETURNING name) INSERT INTO {} {} {}",
          schema.POSTINGS_NAMES_TABLE, names, schema.POSTINGS_TABLE,
          COLUMNS, expected(q("k"))),
    ]


def keep(conn, names):
    """Make ``names`` those that keep postings (:func:`keep_statements`)
    on the psycopg connection ``conn``, in one transaction; the names
    added and taken off."""
    before = set(kept(conn))
    with conn.transaction():
        for statement in keep_statements(names):
            db.run(conn, statement)
    return sorted(set(names) - before), sorted(before - set(names))
