"""Statements for the ZMI's admin tabs: what PostgreSQL holds for a catalog.

Read-only statements on one catalog's rows and on the server's catalogs
(``pg_class``, ``pg_index``), run in the asking transaction through the
catalog's store (``store.py``): the PostgreSQL indexes each catalog index
uses (``pgcatalog_indexes``) with their size and state, the tables' sizes,
and pages of entries by path prefix.  Nothing here writes.
"""
from plone.pgcatalog import _
from plone.pgcatalog.pg.fragment import q
from plone.pgcatalog.schema import tables as schema

#: entries per page of the Entries tab, at most
PAGE_MAX = 500


def pg_indexes(store):
    """``{catalog index name: [facts of each PostgreSQL index it uses]}``:
    name, ``exists``, ``valid`` (usable by queries), ``ready`` (kept up to
    date by writes), ``bytes`` (on disk) and ``size`` (for people)."""
    rows = store.rows(q(
        "SELECT r.name, r.pg_index, c.oid IS NOT NULL, "
        "coalesce(i.indisvalid, false), coalesce(i.indisready, false), "
        "coalesce(pg_relation_size(c.oid), 0), "
        "pg_size_pretty(coalesce(pg_relation_size(c.oid), 0)) "
        "FROM {} r LEFT JOIN pg_class c ON c.relname = r.pg_index "
        "AND c.relnamespace = current_schema()::regnamespace "
        "LEFT JOIN pg_index i ON i.indexrelid = c.oid "
        "WHERE r.cid = {} ORDER BY r.name, r.pg_index",
        schema.INDEXES_TABLE, store.cid))
    found = {}
    for name, pg_index, exists, valid, ready, size, pretty in rows:
        found.setdefault(name, []).append({
            "name": pg_index, "exists": exists, "valid": valid,
            "ready": ready, "bytes": size, "size": pretty,
            "state": state_of(exists, valid, ready)})
    return found


def state_of(exists, valid, ready):
    """What a PostgreSQL index's flags mean for queries (a message for
    people: the Indexes tab shows it in the request's language)."""
    if not exists:
        return _("missing (pgc_sync_indexes builds it)")
    if valid:
        return _("valid")
    if ready:
        return _("building")
    return _("invalid (the next build replaces it)")


def table_sizes(store):
    """``[(table, bytes, size for people)]`` of the catalog tables (every
    catalog of the database together; indexes and TOAST included)."""
    return [tuple(r) for r in store.rows(q(
        "SELECT t.name, pg_total_relation_size(t.name::regclass), "
        "pg_size_pretty(pg_total_relation_size(t.name::regclass)) "
        "FROM unnest({}::text[]) AS t(name) ORDER BY 1",
        [schema.ENTRIES, schema.META, schema.TEXT, schema.LISTS,
         schema.HOT, schema.HOT_SETS, schema.HOT_COUNTS,
         schema.HOT_FREE_SETS, schema.HOT_KEY_COUNTS, schema.WORDS,
         schema.LANGTEXT, schema.TEXT_TOTALS, schema.TEXT_DF,
         schema.POSTINGS, schema.LANGPOSTINGS]))]


def entries_page(store, prefix, b_start, b_size):
    """``(total, [(rid, path)])``: the entries whose path starts with
    ``prefix`` (all: ``""``), in path order, ``b_size`` from ``b_start``."""
    where = q("e.cid = {}", store.cid)
    if prefix:
        # the range serves the (cid, path) index, starts_with is exact
        where = q("{} AND e.path >= {} AND starts_with(e.path, {})", where,
                  prefix, prefix)
    total = store.value(
        q("SELECT count(*) FROM {} WHERE {}", schema.FROM_ENTRIES, where))
    rows = store.rows(q("SELECT e.rid, e.path FROM {} WHERE {} ORDER BY "
    "e.path LIMIT {} OFFSET {}", schema.FROM_ENTRIES, where, b_size, b_start))
    return total, [tuple(r) for r in rows]
