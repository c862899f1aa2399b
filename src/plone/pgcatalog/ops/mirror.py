"""Live writes and an online build (rebuild.py): what keeps the build
equal to a fresh rebuild while the site is written to.

* :func:`write`: while a build is registered (``portal_catalog._pgc_build``),
  every ``catalog_object`` / ``uncatalog_object`` of the live catalog is
  written to the build too.  A writer whose ZODB snapshot predates the
  registration (or the switch, or a cancel) fails its commit with a
  ConflictError and is retried: the first catalog write of a transaction
  asks the ZODB to check the tool is still current (``tool._pgc_changed``).
* :func:`read_current`: a batch asks the ZODB to check, when it commits,
  that every object it indexed and their containers are unchanged since
  it read them; a concurrent mirrored write of the same entry conflicts in
  PostgreSQL.  A delete changes no record a batch checks (a BTree folder
  keeps its items in buckets of their own): a mirrored delete claims the
  entry's key first (``writer.CLAIMED_DELETE``), so that a batch writing the
  entry from an older snapshot meets it there.
* :func:`index_into`: an object indexed into another catalog's store (the
  build's), as ``catalog_object`` indexes it into the live one.
"""
from Acquisition import aq_base
from Acquisition import aq_inner
from Acquisition import aq_parent

from plone.pgcatalog import extract
from plone.pgcatalog.errors import CatalogMissing
from plone.pgcatalog.pg.store import store_for
from plone.pgcatalog.pg.writer import CLAIMED_DELETE
from plone.pgcatalog.pg.writer import Delete
from plone.pgcatalog.pg.writer import Upsert


def current_state(tool):
    """The tool's online build state (the last build's), or None."""
    return getattr(aq_base(tool), "_pgc_build", None)


def write(tool, uid, op):
    """Copy a live write (``op`` on entry ``uid``) into the registered
    build, if any (called by catalog_object / uncatalog_object)."""
    state = current_state(tool)
    if state is None or not state.mirrors:
        return
    try:
        store = store_for(tool._pgc_session(), state.key, True)
        store.cid
    except CatalogMissing:
        return  # the build was cancelled and dropped meanwhile
    store.add(uid, CLAIMED_DELETE if isinstance(op, Delete) else copy_op(op))


def copy_op(op):
    """An Upsert of its own (the session resolves lazily computed metadata
    per entry and catalog)."""
    return Upsert(op.full, dict(op.idx_set), list(op.idx_remove), op.meta,
                  dict(op.text_set), list(op.text_remove), op.meta_from)


def index_into(tool, store, obj, uid=None):
    """Index ``obj`` fully (values and metadata) into ``store``'s catalog
    under ``uid`` (its path by default), as ``catalog_object(obj)`` would
    into the live one."""
    if uid is None:
        uid = "/".join(obj.getPhysicalPath())
    tool._pgc_catalog_object(extract.indexable(tool, obj), uid, [], 1, store=store)
    return uid


def read_current(jar, obj, checked):
    """Ask the ZODB to check, at commit, that ``obj`` and its
    containers are unchanged since this batch read them."""
    while obj is not None:
        base = aq_base(obj)
        oid = getattr(base, "_p_oid", None)
        if oid is not None and oid not in checked and \
                getattr(base, "_p_jar", None) is jar:
            checked.add(oid)
            base._p_activate()
            jar.readCurrent(base)
        obj = aq_parent(aq_inner(obj))
