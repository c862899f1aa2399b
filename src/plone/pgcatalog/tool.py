"""``portal_catalog``: the ZCatalog / CMFPlone catalog API on PostgreSQL.

Built on ``UniqueObject`` + ``Folder`` (the ZCTextIndex lexicons stay
sub-objects, as in ZCatalog); provides the interfaces Plone looks up.  The
search API (searchResults with CMFPlone's security additions,
unrestrictedSearchResults, search) compiles queries with
:mod:`plone.pgcatalog.query`; the write API (catalog_object,
uncatalog_object and CMFCore's queued indexObject/reindexObject/
unindexObject) buffers writes in the transaction's
:class:`plone.pgcatalog.session.CatalogSession`.

Web surface: every method states whether ZPublisher may publish it
(``zpublish``) and which permission guards it (for restricted code too), as
in stock CMFPlone or narrower: the catalog API is for Python and restricted
code, not for URLs.  The ZMI actions that write are published for POST only
and check plone.protect's authenticator, because plone.protect's automatic
CSRF check sees ZODB writes only and ours go to PostgreSQL
(``tests/test_web_surface.py`` holds the measured table).
"""
import functools
import time
import uuid

from AccessControl import ClassSecurityInfo
from AccessControl.class_init import InitializeClass
from AccessControl.Permissions import manage_zcatalog_entries
from AccessControl.Permissions import manage_zcatalog_indexes
from AccessControl.Permissions import search_zcatalog
from Acquisition import aq_base
from Acquisition import aq_inner
from Acquisition import aq_parent
from DateTime import DateTime
from Missing import MV
from OFS.Folder import Folder
from plone.base.interfaces import IPloneCatalogTool
from Products.PageTemplates.PageTemplateFile import PageTemplateFile
from plone.indexer.interfaces import IIndexableObject
from plone.protect import CheckAuthenticator
from plone.protect import PostOnly
from plone.protect import protect
from Products.CMFCore.CatalogTool import CatalogTool as CMFCatalogTool
from Products.CMFCore.indexing import processQueue
from Products.CMFCore.interfaces import ICatalogTool
from Products.CMFCore.utils import _getAuthenticatedUser
from Products.CMFCore.utils import UniqueObject
from Products.CMFPlone.CatalogTool import CatalogTool as PloneCatalogTool
from Products.PluginIndexes.interfaces import IPluggableIndex
from Products.ZCatalog.interfaces import IZCatalog
from Products.ZCatalog.ZCatalogIndexes import ZCatalogIndexes
from zope.component import queryMultiAdapter
from zope.interface import implementer
from ZPublisher import zpublish

from plone.pgcatalog import codec
from plone.pgcatalog import db
from plone.pgcatalog import ddl
from plone.pgcatalog.catalog import check_index_name
from plone.pgcatalog.config import get_dsn
from plone.pgcatalog.errors import CatalogMissing
from plone.pgcatalog.schema import STATE_SQL
from plone.pgcatalog.session import current_session
from plone.pgcatalog import logger
from plone.pgcatalog.catalog import CatalogConfig
from plone.pgcatalog.errors import CatalogError
from plone.pgcatalog.indexes import kind_for
from plone.pgcatalog.indexes.base import MISSING
from plone.pgcatalog.indexes.common import needs_tag
from plone.pgcatalog.query import batch_window
from plone.pgcatalog.query import BatchWindow
from plone.pgcatalog.query import compile_search
from plone.pgcatalog.query import make_query
from plone.pgcatalog.query import merge_query_args
from plone.pgcatalog.query import reverse_for
from plone.pgcatalog.query import sort_indexes_for
from plone.pgcatalog.query import unbatched
from plone.pgcatalog.query import unsorted
from plone.pgcatalog.results import empty_result
from plone.pgcatalog.results import make_relevance_results
from plone.pgcatalog.results import make_results
from plone.pgcatalog.results import slice_results
from plone.pgcatalog.writer import DELETE
from plone.pgcatalog.writer import Upsert


_cids = {}
#: (dsn, cid, text index) -> (expiry, commit generation, (docs, words))
_text_stats = {}
TEXT_STATS_TTL = 30.0
#: (dsn, cid, text index, tsquery) -> (expiry, commit generation, count)
_text_df = {}
TEXT_DF_MAX = 20000
#: (dsn, cid, ...) -> (catalog stamp, value): see _pgc_stamped
_stamped = {}
STAMPED_MAX = 1000


def safe_callable(ob):
    from Products.ZCatalog.Catalog import safe_callable as _safe
    return _safe(ob)


#: the indexes CMFPlone's searchResults sets from the user and the time
SECURITY_INDEXES = ("allowedRolesAndUsers", "effectiveRange")


def secured(query):
    """``query`` without the ``<security index>_<option>`` keys a caller
    may have added (``allowedRolesAndUsers_range="min"`` would turn the
    user's roles into a range that matches everything; stock ZCatalog reads
    such keys).  A deliberate difference: the security filters cannot be
    weakened by any key a caller passes."""
    if not any(key.startswith(SECURITY_INDEXES) for key in query
               if isinstance(key, str)):
        return query
    prefixes = tuple(name + "_" for name in SECURITY_INDEXES)
    return {key: value for key, value in query.items()
            if not (isinstance(key, str) and key.startswith(prefixes))}


def rid_key(rid):
    """``rid`` as a record id PostgreSQL can look up, or None when no
    record can have it (ZCatalog's IOBTrees find nothing under a key that
    is no integer, or one out of range)."""
    if isinstance(rid, int) and -2 ** 63 <= rid < 2 ** 63:
        return int(rid)
    return None


def path_key(path):
    """``path`` if a record can have it, else None: None and strings
    PostgreSQL cannot hold are found nowhere (as in ZCatalog's uids
    OIBTree, which holds no such key); any other type raises TypeError,
    as comparing it with the OIBTree's string keys does."""
    if path is None:
        return None
    if not isinstance(path, str):
        raise TypeError("'<' not supported between instances of 'str' and "
                        "%r" % type(path).__name__)
    if needs_tag(path):
        return None
    return path


@implementer(IPloneCatalogTool, IZCatalog, ICatalogTool)
class PGCatalogTool(UniqueObject, Folder):
    """Plone's catalog tool, with every index kept in PostgreSQL."""

    id = "portal_catalog"
    meta_type = "Plone Catalog Tool"
    title = ""
    _pgc_is_tool = True
    _pgc_key = None
    threshold = 10000
    long_query_time = 0.1
    unwrapobjects = False

    security = ClassSecurityInfo()

    _properties = (
        {"id": "title", "type": "string", "mode": "w"},
        {"id": "unwrapobjects", "type": "boolean", "mode": "w"},
    )

    # Folder's tabs without "View": stock CMFPlone has none, and it would
    # send a Member's manage_workspace to the tool's URL.
    manage_options = (
        {"action": "manage_main", "label": "Contents"},
        {"action": "manage_catalogStatus", "label": "Catalog"},
    ) + tuple(o for o in Folder.manage_options[1:] if o["label"] != "View")

    def __init__(self, id=None):
        self.id = id or "portal_catalog"
        self._catalog = CatalogConfig()
        self.Indexes = ZCatalogIndexes()
        self._pgc_key = uuid.uuid4().hex

    # ------------------------------------------------------------------
    # PostgreSQL plumbing
    # ------------------------------------------------------------------
    def _pgc_session(self):
        return current_session(jar=self._p_jar)

    def _pgc_cid(self):
        """This catalog's id in PostgreSQL (its ``pgcatalog_catalogs`` row,
        made on first use, in the transaction that first uses it).  A
        catalog whose row vanished after it was made (the database
        replaced, the row deleted) raises CatalogMissing instead of
        silently starting empty."""
        key = (get_dsn(), self._pgc_key)
        cid = _cids.get(key)
        if cid is not None:
            return cid
        session = self._pgc_session()
        cid = session.cache.get(("cid", key))
        if cid is not None:
            return cid
        row = session.execute("SELECT cid FROM pgcatalog_catalogs WHERE "
                              "key = %s", (key[1],)).fetchone()
        if row is not None:
            cid = _cids[key] = row[0]
            return cid
        if self.__dict__.get("_pgc_created"):
            raise CatalogMissing(
                "The PostgreSQL rows of this catalog (key %s) are gone.  "
                "Restore the database from a backup, or make a new empty "
                "catalog (portal_catalog.pgc_recreate_catalog()) and "
                "rebuild it." % key[1])
        # made in this transaction (seen by it, by others once it commits)
        cid = session.execute_write(
            None, "INSERT INTO pgcatalog_catalogs (key) VALUES (%s) "
            "RETURNING cid", (key[1],)).fetchone()[0]
        session.cache[("cid", key)] = cid
        session.on_commit(lambda: _cids.__setitem__(key, cid))
        return cid

    def _pgc_mark_created(self):
        """Remember (in the ZODB, with the tool's configuration) that this
        catalog's PostgreSQL rows exist: from then on their loss is an
        error.  Called where the tool is written anyway (install, copy)."""
        self._pgc_cid()
        if not self.__dict__.get("_pgc_created"):
            self._pgc_created = True

    def _pgc_query(self, sql, params=()):
        return self._pgc_session().execute(sql, params).fetchall()

    def _pgc_path_cache(self):
        return self._pgc_session().cache.setdefault(("paths", self._pgc_key),
                                                    {})

    def _pgc_known_paths(self):
        """Paths this transaction saw with metadata (no need to compute
        metadata for them on a partial reindex without update_metadata)."""
        return self._pgc_session().cache.setdefault(("known", self._pgc_key),
                                                    set())

    def _pgc_write_sql(self, sql, params=()):
        self._pgc_session().execute_write(self._pgc_cid(), sql, params)

    def _pgc_stamped(self, key, compute):
        """``compute()``, cached per process while this catalog's change
        stamp stays the same (exact: every transaction writing to the
        catalog bumps it when it commits).  A transaction with its own
        catalog writes computes afresh."""
        session = self._pgc_session()
        if session.has_writes:
            return compute()
        cid = self._pgc_cid()
        stamp = self._pgc_state()[1]
        key = (session.dsn, cid) + tuple(key)
        found = _stamped.get(key)
        if found is not None and found[0] == stamp:
            return found[1]
        # computed in the transaction's snapshot, the stamp's
        value = compute()
        if len(_stamped) >= STAMPED_MAX:
            _stamped.clear()
        _stamped[key] = (stamp, value)
        return value

    def _pgc_state(self):
        """``(change counter, change stamp)`` as this transaction sees
        them (its own pending changes not counted)."""
        return tuple(self._pgc_session().execute(
            STATE_SQL, (self._pgc_cid(),)).fetchone())

    @zpublish(False)  # OFS's copy hook
    def manage_afterClone(self, item):
        # a copied catalog is a new, empty catalog
        self._pgc_key = uuid.uuid4().hex
        self.__dict__.pop("_pgc_created", None)
        super().manage_afterClone(item)
        self._pgc_mark_created()

    # ------------------------------------------------------------------
    # ZMI
    # ------------------------------------------------------------------
    security.declareProtected(manage_zcatalog_entries,
                              "manage_catalogStatus")
    manage_catalogStatus = PageTemplateFile("www/status.zpt", globals())

    @zpublish(False)  # data for manage_catalogStatus, not a page
    @security.protected(manage_zcatalog_entries)
    def pgc_status(self):
        """Facts about this catalog for the ZMI status page."""
        from plone.pgcatalog import config
        from plone.pgcatalog.db import _safe_dsn
        session = self._pgc_session()
        version, server = session.execute(
            "SELECT (SELECT max(version) FROM pgcatalog_schema), "
            "current_setting('server_version')").fetchone()
        counter = self._pgc_state()[0]
        indexes = []
        for name in self._catalog._indexes:
            index = self._catalog.getIndex(name)
            try:
                count = index.numObjects()
            except Exception:  # a status page must not fail on one index
                logger.exception("numObjects of %s failed", name)
                count = "?"
            indexes.append({"name": name, "meta_type": index.meta_type,
                            "count": count})
        return {"entries": len(self), "dsn": _safe_dsn(config.get_dsn()),
                "server_version": server, "schema_version": version,
                "key": self._pgc_key, "counter": counter,
                "indexes": indexes}

    # ------------------------------------------------------------------
    # Searching
    # ------------------------------------------------------------------
    def _listAllowedRolesAndUsers(self, user):
        return PloneCatalogTool._listAllowedRolesAndUsers(self, user)

    security.declarePrivate("allow_inactive")

    @zpublish(False)
    def allow_inactive(self, query_kw):
        return PloneCatalogTool.allow_inactive(self, query_kw)

    # Search API: for Python and restricted code (TALES, scripts) with
    # "Search ZCatalog", never a URL (stock CMFPlone's have no docstring).
    @zpublish(False)
    @security.protected(search_zcatalog)
    def searchResults(self, query=None, **kw):
        """Search the catalog as CMFPlone does: pending indexing is processed
        first, and allowedRolesAndUsers / effectiveRange are always set by
        the tool, whatever the caller passed."""
        processQueue()
        kw = kw.copy()
        show_inactive = kw.get("show_inactive", None)
        if show_inactive is None and isinstance(query, dict):
            show_inactive = query.get("show_inactive", None)
        if show_inactive is None:
            show_inactive = self.allow_inactive(kw)
        user = _getAuthenticatedUser(self)
        kw["allowedRolesAndUsers"] = self._listAllowedRolesAndUsers(user)
        if not show_inactive:
            kw["effectiveRange"] = DateTime()
        sort_on = kw.get("sort_on") or []
        if isinstance(sort_on, str):
            sort_on = [sort_on]
        valid_indexes = self.indexes()
        try:
            sort_on = [idx for idx in sort_on if idx in valid_indexes]
        except TypeError:
            sort_on = []
        if not sort_on:
            kw.pop("sort_on", None)
        else:
            kw["sort_on"] = sort_on
        return self._pgc_search(secured(merge_query_args(query, **kw)))

    # the tool's own URL: stock CMFPlone marks __call__ zpublish(False) too
    @zpublish(False)
    @security.protected(search_zcatalog)
    def __call__(self, *args, **kw):
        return self.searchResults(*args, **kw)

    @zpublish(False)
    @security.private
    def unrestrictedSearchResults(self, REQUEST=None, **kw):
        """Search without the security additions (see CMFCore)."""
        processQueue()
        return self._pgc_search(merge_query_args(REQUEST, **kw))

    @security.private
    def _unrestrictedSearchResults(self, REQUEST=None, **kw):
        """Like unrestrictedSearchResults, without processQueue()."""
        return self._pgc_search(merge_query_args(REQUEST, **kw))

    @zpublish(False)
    @security.protected(search_zcatalog)
    def search(self, query, sort_index=None, reverse=0, limit=None,
               merge=1):
        """ZCatalog's programmatic search, wrapped as CMFPlone does."""
        processQueue()
        user = _getAuthenticatedUser(self)
        query["allowedRolesAndUsers"] = self._listAllowedRolesAndUsers(user)
        if not self.allow_inactive(query):
            query["effectiveRange"] = DateTime()
        query = dict(query)
        if sort_index is not None:
            if isinstance(sort_index, (list, tuple)):
                query["sort_on"] = [getattr(i, "getId", lambda: i)()
                                    for i in sort_index]
            else:
                query["sort_on"] = getattr(sort_index, "getId",
                                           lambda: sort_index)()
            if isinstance(reverse, (list, tuple)):
                query["sort_order"] = ["descending" if r else "ascending"
                                       for r in reverse]
            else:
                query["sort_order"] = "descending" if reverse else ""
        if limit is not None:
            query["sort_limit"] = limit
        return self._pgc_search(secured(query))

    def _pgc_search(self, query):
        window = batch_window(query)
        if not window.in_sql:
            return self._pgc_search_outside_sql_window(query, window)
        return self._pgc_search_window(query, window)

    def _pgc_search_outside_sql_window(self, query, window):
        """Batch arguments LIMIT / OFFSET cannot take (negative, huge, of
        the wrong type): the whole answer, then ZCatalog's own treatment
        (its error when something matched; Python's slice)."""
        # ZCatalog's first steps raise before the batch arguments are read
        sort_indexes = sort_indexes_for(self._catalog, query)
        if sort_indexes is not None:
            reverse_for(query, sort_indexes)
        make_query(self._catalog, query)
        results = self._pgc_search_window(unbatched(query), BatchWindow())
        if window.error is not None:
            if not len(results):
                return results
            if sort_indexes:
                # ZCatalog's count of matches, documents without a sort
                # key included
                rlen = len(self._pgc_search_window(
                    unsorted(unbatched(query)), BatchWindow()))
                if window.sorted_bail_out(rlen):
                    return empty_result(rlen)
            raise window.error
        if window.b_size is None:
            return results
        return slice_results(results, window.b_start, window.b_size)

    def _pgc_search_window(self, query, window):
        # Search statements are not prepared: PostgreSQL plans each one
        # with its values (an unnamed statement), because the values
        # decide the plan (a rare or a common portal_type; a top-N that an
        # index can give when the filters keep most entries).  A prepared
        # statement switches to a generic plan after five runs, which
        # measured 0.9 -> 24 ms for a date-ordered page at 10,000 entries.
        plan = compile_search(self._catalog, self._pgc_cid(), query,
                              text_stats=self._pgc_text_stats,
                              text_df=self._pgc_text_df, window=window)
        if plan.empty:
            return empty_result()
        if plan.python_sort:
            return self._pgc_python_sorted(plan)
        row = self._pgc_session().execute(plan.statement, prepare=False,
                                          binary=True).fetchone()
        if plan.count is not None:
            rids = row[0] or []
            if len(rids) < plan.b_size and (rids or not plan.b_start):
                # the page is the tail (or nothing matched): total known
                return make_results(self, rids, plan.b_start + len(rids))
            return make_results(self, rids, None, count=functools.partial(
                self._pgc_count, plan.count))
        if plan.unlimited_sorted:
            return self._pgc_unlimited_sorted(plan, row)
        count = row[0]
        rids = row[1] or []
        if plan.rid_order is not None:
            rids.sort(reverse=plan.rid_order == "desc")
        if plan.score is not None:
            return make_relevance_results(self, rids, count, plan.score)
        scores = None
        if plan.scored:
            raw_scores = row[2] or []
            top = row[3] or 0
            scores = {}
            for rid, score in zip(rids, raw_scores):
                norm = int(100.0 * score / top) if top else 1
                scores[rid] = (score, norm)
        if not plan.limited and plan.b_size is not None:
            rids = rids[plan.b_start:plan.b_start + plan.b_size]
        return make_results(self, rids, count, scores)

    def _pgc_unlimited_sorted(self, plan, row):
        """Every match, sorted, as ZCatalog's sortResults gives it: when the
        first sort index has fewer distinct values than the matches call
        for, ZCatalog walks the index (``_sort_iterate_index``): ties keep
        ascending rid order in both directions and ``actual_result_count``
        counts the matches without a sort key too."""
        rlen, rids, keyed = row[0], row[1] or [], row[2]
        count = keyed
        if plan.iterate_index is not None and rlen and (
                keyed < rlen or plan.ties is not None):
            size = self._pgc_sort_index_size(plan.iterate_index)
            if size is not None and rlen > size * (rlen / 100 + 1):
                count = rlen
                if plan.ties is not None and keyed > 1:
                    rids = self._pgc_session().execute(
                        plan.ties, prepare=False,
                        binary=True).fetchone()[1] or []
        return make_results(self, rids, count)

    #: ZCatalog walks a sort index only when it has fewer distinct values
    #: than rlen / (1 + rlen / 100) < 100: counting up to this is enough
    SORT_INDEX_SIZE_CAP = 100

    def _pgc_sort_index_size(self, index):
        """``len(index)`` (its distinct values) as ZCatalog's sortResults
        sees it, counted up to SORT_INDEX_SIZE_CAP; cached while the
        catalog is unchanged.  None for the kinds ZCatalog cannot walk that
        way as it walks an UnIndex (several keys or none per document,
        BooleanIndex's one-sided BTree): their answers follow the sort
        contract (zcatalog-contract.md §9)."""
        if not getattr(index, "pgc_walkable_sort", False):
            return None
        key = index._pgc_key_literal
        sql = ("SELECT count(*) FROM (SELECT DISTINCT e.idx -> %s FROM "
               "pgcatalog_entries e WHERE e.cid = %%s AND (e.idx -> %s) IS "
               "NOT NULL LIMIT %d) d" % (key, key, self.SORT_INDEX_SIZE_CAP))
        return self._pgc_stamped(
            ("sort-index-size", index.getId()),
            lambda: self._pgc_query(sql, (self._pgc_cid(),))[0][0])

    def _pgc_count(self, statement):
        """A page's total, counted when ``actual_result_count`` is read."""
        return self._pgc_session().execute(statement,
                                           prepare=False).fetchone()[0]

    def _pgc_text_stats(self, name):
        """``(documents, total words)`` of text index ``name`` (Okapi's
        collection statistics), exact in a transaction with its own catalog
        writes, else cached per process until this process commits catalog
        writes or TEXT_STATS_TTL seconds pass (another process's writes)."""
        session = self._pgc_session()
        cid = self._pgc_cid()
        key = (session.dsn, cid, name)
        if not session.has_writes:
            found = _text_stats.get(key)
            if found is not None and found[0] > time.monotonic() \
                    and found[1] == db.commit_generation():
                return found[2]
        index = self._catalog.getIndex(name)
        row = session.execute(
            "SELECT count(*), coalesce(sum(%s), 0) FROM pgcatalog_text t "
            "JOIN pgcatalog_entries e ON e.rid = t.rid WHERE e.cid = %%s "
            "AND t.name = %%s" % index.pgc_doclen_sql("t.tsv"),
            (cid, name)).fetchone()
        stats = (int(row[0]), int(row[1]))
        if not session.has_writes:
            _text_stats[key] = (time.monotonic() + TEXT_STATS_TTL,
                                db.commit_generation(), stats)
        return stats

    def _pgc_text_df(self, name, tsquery):
        """Documents of text index ``name`` matching ``tsquery`` (capped
        at the index kind's DF_EXACT_LIMIT): a word's document frequency for
        the Okapi score, cached as the collection statistics are."""
        session = self._pgc_session()
        cid = self._pgc_cid()
        key = (session.dsn, cid, name, tsquery)
        cacheable = not session.has_writes
        if cacheable:
            found = _text_df.get(key)
            if found is not None and found[0] > time.monotonic() \
                    and found[1] == db.commit_generation():
                return found[2]
        index = self._catalog.getIndex(name)
        count = session.execute(index.pgc_df_sql(),
                                (cid, tsquery)).fetchone()[0]
        if cacheable:
            if len(_text_df) >= TEXT_DF_MAX:
                _text_df.clear()
            _text_df[key] = (time.monotonic() + TEXT_STATS_TTL,
                             db.commit_generation(), int(count))
        return int(count)

    def _pgc_python_sorted(self, plan):
        """Sort matches in Python (GopipIndex positions come from the
        folders), as ZCatalog's sortResults: entries without a key are left
        out; one sort index orders (key, rid) pairs, several sort stably."""
        row = self._pgc_session().execute(plan.statement, prepare=False,
                                          binary=True).fetchone()
        rids = row[0] or []
        paths = row[1] or []
        sql_keys = row[2:]
        if rids:
            # rid order (the order ties keep, as in ZCatalog's sort)
            order = sorted(range(len(rids)), key=rids.__getitem__)
            rids = [rids[i] for i in order]
            paths = [paths[i] for i in order]
            sql_keys = [[keys[i] for i in order] if keys else keys
                        for keys in sql_keys]
        sql_keys = iter(sql_keys)
        columns = []
        for index in plan.python_sort:
            if getattr(index, "pgc_python_sort", False):
                pos = index.pgc_positions(paths)
                columns.append([pos.get(p, MISSING) for p in paths])
            else:
                columns.append(next(sql_keys) or [])
        if len(columns) == 1:
            keyed = [(_sortable(k), rid) for k, rid in zip(columns[0], rids)
                     if k is not MISSING]
            keyed.sort(reverse=plan.reverse[0])
            rids = [rid for _, rid in keyed]
        else:
            keyed = [(keys, rid) for keys, rid in zip(zip(*columns), rids)
                     if MISSING not in keys]
            # stable multi-pass sort: last key first, each with its direction
            for n in reversed(range(len(columns))):
                keyed.sort(key=lambda item: _sortable(item[0][n]),
                           reverse=plan.reverse[n])
            rids = [rid for _, rid in keyed]
        count = len(rids)
        if plan.b_size is not None:
            rids = rids[plan.b_start:plan.b_start + plan.b_size]
        return make_results(self, rids, count)

    # ------------------------------------------------------------------
    # Writing
    # ------------------------------------------------------------------
    # Writing entries: Python API only (stock CMFPlone publishes neither
    # catalog_object nor uncatalog_object).
    @zpublish(False)
    @security.protected(manage_zcatalog_entries)
    def catalog_object(self, obj, uid=None, idxs=None, update_metadata=1,
                       pghandler=None):
        """(Re)index ``obj`` under ``uid`` (its physical path by default)."""
        if idxs is None:
            idxs = []
        wrapper = obj
        if not IIndexableObject.providedBy(obj):
            found = queryMultiAdapter((obj, self), IIndexableObject)
            if found is not None:
                wrapper = found
        if uid is None:
            try:
                uid = obj.getPhysicalPath
            except AttributeError:
                raise CatalogError(
                    "A cataloged object must support the 'getPhysicalPath' "
                    "method if no unique id is provided when cataloging")
            uid = "/".join(uid())
        elif not isinstance(uid, str):
            raise CatalogError("The object unique id must be a string.")
        self._pgc_catalog_object(wrapper, uid, idxs, update_metadata)

    def _pgc_catalog_object(self, obj, uid, idxs, update_metadata):
        catalog = self._catalog
        indexes = catalog._indexes
        full = not idxs
        names = list(indexes) if full else [n for n in idxs if n in indexes]
        idx_set, idx_remove, text_set, text_remove = {}, [], {}, []
        for name in names:
            index = catalog.getIndex(name)
            storage = index.pgc_storage
            if storage not in ("idx", "text"):
                continue
            value = index.pgc_extract(obj)
            if storage == "idx":
                if value is MISSING:
                    idx_remove.append(name)
                else:
                    idx_set[name] = value
            else:
                if value is MISSING:
                    text_remove.append(name)
                else:
                    text_set[name] = value
        session = self._pgc_session()
        meta = None
        if update_metadata or not self._pgc_has_metadata(uid):
            unpicklable = []
            meta = codec.encode_meta(self._pgc_recordify(obj),
                                     unpicklable).decode("utf-8")
            # ZCatalog keeps an unpicklable value in its metadata BTree and
            # fails when the transaction commits (the ZODB cannot pickle
            # it); here the column reads Missing.Value until then, and the
            # commit fails the same way unless a later record replaces it.
            if unpicklable:
                column, exc = unpicklable[0]
                session.set_commit_error(
                    self._pgc_cid(), uid, exc,
                    "metadata column %r of %s cannot be stored" % (column,
                                                                   uid))
            else:
                session.set_commit_error(self._pgc_cid(), uid, None)
        session.pending.add(self._pgc_cid(), uid, Upsert(
            full, idx_set, idx_remove, meta, text_set, text_remove))

    def _pgc_has_metadata(self, uid):
        """Whether entry ``uid`` has metadata, as this transaction sees it:
        without update_metadata ZCatalog computes metadata for new entries
        only."""
        known = self._pgc_known_paths()
        if uid in known:
            return True
        if self._pgc_query(
                "SELECT 1 FROM pgcatalog_entries e JOIN pgcatalog_meta m "
                "ON m.rid = e.rid WHERE e.cid = %s AND e.path = %s",
                (self._pgc_cid(), uid)):
            known.add(uid)
            return True
        return False

    def _pgc_recordify(self, obj):
        record = {}
        for name in self._catalog.names:
            attr = getattr(obj, name, MV)
            if attr is not MV and safe_callable(attr):
                attr = attr()
            record[name] = attr
        return record

    @zpublish(False)
    @security.protected(manage_zcatalog_entries)
    def uncatalog_object(self, uid):
        """Remove the entry ``uid`` (a path) from the catalog."""
        session = self._pgc_session()
        session.pending.add(self._pgc_cid(), uid, DELETE)
        session.set_commit_error(self._pgc_cid(), uid, None)
        self._pgc_known_paths().discard(uid)

    @zpublish(False)
    @security.private
    def indexObject(self, object, idxs=None):
        if idxs is None:
            idxs = []
        self.reindexObject(object, idxs)

    # CMFCore's functions (private, no docstring: never published)
    unindexObject = CMFCatalogTool.unindexObject
    reindexObject = CMFCatalogTool.reindexObject
    _indexObject = CMFCatalogTool._indexObject
    _unindexObject = CMFCatalogTool._unindexObject
    _reindexObject = CMFCatalogTool._reindexObject
    _CatalogTool__url = CMFCatalogTool._CatalogTool__url
    security.declarePrivate("unindexObject", "reindexObject", "_indexObject",
                            "_unindexObject", "_reindexObject")

    def _increment_counter(self):
        """Kept for API compatibility: the counter is bumped by each
        catalog_object / uncatalog_object in PostgreSQL."""

    @zpublish(False)
    @security.private
    def getCounter(self):
        """Changes counter (transactional, in PostgreSQL)."""
        processQueue()
        return self._pgc_state()[0] + self._pgc_session().counter_delta(
            self._pgc_cid())

    # ------------------------------------------------------------------
    # Records
    # ------------------------------------------------------------------
    @zpublish(False)
    @security.protected(search_zcatalog)
    def getpath(self, rid, default=KeyError):
        """The path of record ``rid``."""
        cache = self._pgc_path_cache()
        rid = rid_key(rid)
        path = cache.get(rid)
        if path is None:
            rows = self._pgc_query(
                "SELECT path FROM pgcatalog_entries WHERE rid = %s AND "
                "cid = %s", (rid, self._pgc_cid())) if rid is not None \
                else ()
            if not rows:
                if default is KeyError:
                    raise KeyError(rid)
                return default
            path = cache[rid] = rows[0][0]
        return path

    @zpublish(False)
    @security.protected(search_zcatalog)
    def getrid(self, path, default=None):
        """The record id of ``path``, or ``default``."""
        if not path_key(path):
            return default
        rows = self._pgc_query(
            "SELECT rid FROM pgcatalog_entries WHERE cid = %s AND path = %s",
            (self._pgc_cid(), path))
        return rows[0][0] if rows else default

    @zpublish(False)
    @security.protected(search_zcatalog)
    def getobject(self, rid, REQUEST=None):
        """The object of record ``rid``."""
        return aq_parent(self).unrestrictedTraverse(self.getpath(rid))

    def _pgc_brain_for_rid(self, rid):
        if self.getpath(rid, None) is None:
            raise KeyError(rid)
        result = make_results(self, [rid_key(rid)], 1)
        return result[0]

    def _pgc_metadata_tuple(self, rid):
        meta = self.getMetadataForRID(rid)
        return tuple(meta[name] for name in self._catalog.names)

    def _pgc_set_metadata_tuple(self, rid, record):
        names = self._catalog.names
        meta = codec.encode_meta(dict(zip(names, record))).decode("utf-8")
        self._pgc_write_sql(
            "UPDATE pgcatalog_meta m SET meta = %s::json FROM "
            "pgcatalog_entries e WHERE m.rid = e.rid AND e.rid = %s AND "
            "e.cid = %s", (meta, rid, self._pgc_cid()))

    def _pgc_all_paths(self):
        return [tuple(r) for r in self._pgc_query(
            "SELECT rid, path FROM pgcatalog_entries WHERE cid = %s "
            "ORDER BY rid", (self._pgc_cid(),))]

    @zpublish(False)
    @security.protected(search_zcatalog)
    def getMetadataForRID(self, rid):
        rid = rid_key(int(rid))  # int(): ZCatalog's first step
        if rid is None:
            raise KeyError(rid)
        rows = self._pgc_query(
            "SELECT m.meta FROM pgcatalog_meta m JOIN pgcatalog_entries e "
            "ON e.rid = m.rid WHERE e.rid = %s AND e.cid = %s",
            (rid, self._pgc_cid()))
        if not rows:
            raise KeyError(rid)
        meta = codec.decode_meta(rows[0][0] or {})
        return {name: meta.get(name, MV) for name in self._catalog.names}

    @zpublish(False)
    @security.protected(search_zcatalog)
    def getIndexDataForRID(self, rid):
        return {name: self._catalog.getIndex(name).getEntryForObject(rid, "")
                for name in self._catalog._indexes}

    def _pgc_index_value(self, index, rid):
        storage = index.pgc_storage
        rid = rid_key(rid)
        if rid is None:
            return None
        cid = self._pgc_cid()
        if storage == "idx":
            rows = self._pgc_query(
                "SELECT e.idx -> %s FROM pgcatalog_entries e WHERE e.rid = %s"
                " AND e.cid = %s", (index.getId(), rid, cid))
        elif storage == "text":
            rows = self._pgc_query(
                "SELECT t.tsv::text FROM pgcatalog_text t JOIN "
                "pgcatalog_entries e ON e.rid = t.rid WHERE t.rid = %s AND "
                "e.cid = %s AND t.name = %s", (rid, cid, index.getId()))
        elif storage == "path":
            rows = self._pgc_query(
                "SELECT e.path FROM pgcatalog_entries e WHERE e.rid = %s AND "
                "e.cid = %s", (rid, cid))
        else:
            return None
        return rows[0][0] if rows else None

    def _pgc_index_rids(self, index, iq):
        from plone.pgcatalog.fragment import TRUE
        from plone.pgcatalog.fragment import q
        from plone.pgcatalog.indexes.base import NO_MATCH
        from plone.pgcatalog.indexes.base import QueryContext
        from plone.pgcatalog.query import where_of
        qc = QueryContext(self._catalog)
        fragment = where_of(index, iq, qc)
        if fragment is NO_MATCH:
            return []
        if fragment is None:
            fragment = TRUE
        rows = self._pgc_session().execute(q(
            "SELECT e.rid FROM pgcatalog_entries e WHERE e.cid = {} AND {} "
            "ORDER BY e.rid", self._pgc_cid(), fragment)).fetchall()
        return [r[0] for r in rows]

    def _pgc_clear_index(self, index):
        if index.pgc_storage == "idx":
            self._pgc_write_sql(
                "UPDATE pgcatalog_entries SET idx = idx - %s WHERE cid = %s "
                "AND idx ? %s", (index.getId(), self._pgc_cid(),
                                 index.getId()))
        elif index.pgc_storage == "text":
            self._pgc_write_sql(
                "DELETE FROM pgcatalog_text t USING pgcatalog_entries e "
                "WHERE e.rid = t.rid AND e.cid = %s AND t.name = %s",
                (self._pgc_cid(), index.getId()))

    def __len__(self):
        return self._pgc_query(
            "SELECT count(*) FROM pgcatalog_entries WHERE cid = %s",
            (self._pgc_cid(),))[0][0]

    def __bool__(self):
        return True

    @zpublish(False)
    @security.protected(search_zcatalog)
    def getAllBrains(self):
        """All brains, as a generator (ZCatalog API)."""
        rids = [rid for rid, _ in self._pgc_all_paths()]
        results = make_results(self, rids, len(rids))
        for brain in results:
            yield brain

    @zpublish(False)
    @security.protected(search_zcatalog)
    def searchAll(self):
        rids = [rid for rid, _ in self._pgc_all_paths()]
        return make_results(self, rids, len(rids))

    # ------------------------------------------------------------------
    # Indexes and columns
    # ------------------------------------------------------------------
    @zpublish(False)
    @security.protected(search_zcatalog)
    def indexes(self):
        """Names of the indexes."""
        return list(self._catalog._indexes.keys())

    @zpublish(False)
    @security.protected(search_zcatalog)
    def schema(self):
        """Names of the metadata columns."""
        return list(self._catalog.schema.keys())

    # stock ZCatalog: index_objects "Search ZCatalog" (unwrapped indexes),
    # getIndexObjects "Manage ZCatalogIndex Entries"; here both hand out
    # wrapped index objects, so both take the managers' permission.
    @zpublish(False)
    @security.protected(manage_zcatalog_indexes)
    def index_objects(self):
        return [self._catalog.getIndex(n) for n in self._catalog._indexes]

    getIndexObjects = index_objects
    security.declareProtected(manage_zcatalog_indexes, "getIndexObjects")

    @zpublish(False)
    @security.protected(manage_zcatalog_indexes)
    def availableIndexes(self):
        return self._catalog.indexes

    @zpublish(False)
    @security.protected(manage_zcatalog_indexes)
    def addIndex(self, name, type, extra=None):
        """Add an index of ZCatalog type ``type`` (a meta_type or an index
        object); a type plone.pgcatalog cannot serve fails here, loudly."""
        check_index_name(name)
        if IPluggableIndex.providedBy(type):
            from plone.pgcatalog.setuphandlers import convert_index
            index = convert_index(type)
        else:
            klass = kind_for(type)
            index = klass(name, extra=extra, caller=self)
        self._catalog.addIndex(name, index)
        self._pgc_create_ddl(index)

    def _pgc_create_ddl(self, index):
        ddl.create(self._pgc_session(), self._pgc_cid(), index)

    @zpublish(False)
    @security.protected(manage_zcatalog_entries)
    def pgc_recreate_catalog(self):
        """Give this catalog new, empty PostgreSQL rows after its old ones
        were lost (CatalogMissing), then rebuild it from the ZODB (in this
        transaction).  For a Manager, from Python (``bin/zconsole`` or a
        debug session)."""
        self._pgc_key = uuid.uuid4().hex
        self.__dict__.pop("_pgc_created", None)
        self._pgc_mark_created()
        for index in self.index_objects():
            self._pgc_create_ddl(index)
        self.clearFindAndRebuild()

    @zpublish(False)
    @security.protected(manage_zcatalog_indexes)
    def pgc_sync_indexes(self):
        """Make this catalog's PostgreSQL indexes what its indexes want:
        create the missing ones, drop the others (after the commit).  Run
        it after upgrading from plone.pgcatalog's schema version 3 or older
        (per-catalog indexes replace the shared ones).  Returns
        ``(created, dropped)`` PostgreSQL index names."""
        return ddl.sync(self._pgc_session(), self._pgc_cid(),
                        self.index_objects())

    @zpublish(False)
    @security.protected(manage_zcatalog_indexes)
    def delIndex(self, name):
        """Remove an index and its values."""
        index = self._catalog.getIndex(name)
        self._pgc_clear_index(index)
        ddl.remove(self._pgc_session(), self._pgc_cid(), name)
        self._catalog.delIndex(name)

    @zpublish(False)
    @security.protected(manage_zcatalog_indexes)
    def clearIndex(self, name):
        self._catalog.getIndex(name).clear()

    @zpublish(False)
    @security.protected(manage_zcatalog_indexes)
    def addColumn(self, name, default_value=None, threshold=10000):
        """Add a metadata column (entries get it at their next reindex, as
        in ZCatalog; until then brains show Missing.Value)."""
        self._catalog.addColumn(name, default_value, threshold)
        self._catalog._p_changed = True

    @zpublish(False)
    @security.protected(manage_zcatalog_indexes)
    def delColumn(self, name, threshold=10000):
        """Remove a metadata column."""
        self._catalog.delColumn(name, threshold)
        self._catalog._p_changed = True

    # The ZMI's index and column forms: not published here (this tool has
    # no Indexes or Metadata tab; stock publishes them to Managers, guarded
    # by plone.protect's ZODB write check).  Add forms of index products
    # still call manage_addIndex from Python.
    @zpublish(False)
    @security.protected(manage_zcatalog_indexes)
    def manage_addIndex(self, name, type, extra=None, REQUEST=None,
                        RESPONSE=None, URL1=None):
        self.addIndex(name, type, extra)
        if REQUEST and RESPONSE:
            RESPONSE.redirect(URL1 + "/manage_main")

    @zpublish(False)
    @security.protected(manage_zcatalog_indexes)
    def manage_delIndex(self, ids=None, REQUEST=None, RESPONSE=None,
                        URL1=None):
        if not ids:
            raise BadRequest("No items specified")
        if isinstance(ids, str):
            ids = (ids,)
        for name in ids:
            self.delIndex(name)
        if REQUEST and RESPONSE:
            RESPONSE.redirect(URL1 + "/manage_main")

    @zpublish(False)
    @security.protected(manage_zcatalog_indexes)
    def manage_addColumn(self, name, REQUEST=None, RESPONSE=None, URL1=None):
        self.addColumn(name)

    @zpublish(False)
    @security.protected(manage_zcatalog_indexes)
    def manage_delColumn(self, names, REQUEST=None, RESPONSE=None,
                         URL1=None):
        if isinstance(names, str):
            names = (names,)
        for name in names:
            self.delColumn(name)

    @zpublish(False)
    @security.protected(search_zcatalog)
    def uniqueValuesFor(self, name):
        """Unique values of index ``name``."""
        return tuple(self._catalog.getIndex(name).uniqueValues())

    # ------------------------------------------------------------------
    # Rebuilding
    # ------------------------------------------------------------------
    # ZMI actions that write to PostgreSQL: plone.protect's automatic check
    # sees ZODB writes only, so these check its authenticator themselves
    # when published (POST only); Python callers (no REQUEST) are unchanged.
    @zpublish(methods="POST")
    @security.protected(manage_zcatalog_entries)
    @protect(CheckAuthenticator, PostOnly)
    def manage_catalogClear(self, REQUEST=None, RESPONSE=None, URL1=None):
        """Remove every entry of this catalog (in the current transaction:
        other readers keep seeing the old entries until it commits)."""
        self._pgc_session().pending.take_ops()
        self._pgc_write_sql("DELETE FROM pgcatalog_entries WHERE cid = %s",
                            (self._pgc_cid(),))
        self._pgc_path_cache().clear()
        self._pgc_known_paths().clear()

    @zpublish(False)
    @security.protected(manage_zcatalog_entries)
    def clearFindAndRebuild(self):
        """Empty the catalog, then index every contentish object (and
        plone.app.discussion comments), in one transaction."""
        return PloneCatalogTool.clearFindAndRebuild(self)

    @zpublish(methods="POST")
    @security.protected(manage_zcatalog_entries)
    @protect(CheckAuthenticator, PostOnly)
    def manage_catalogRebuild(self, RESPONSE=None, URL1=None, REQUEST=None):
        """Clear and rebuild the catalog."""
        self.clearFindAndRebuild()
        if RESPONSE is not None:
            RESPONSE.redirect(URL1 + "/manage_main")

    # stock publishes refreshCatalog to Managers (its writes are ZODB
    # writes plone.protect sees); here it is Python API only
    @zpublish(False)
    @security.protected(manage_zcatalog_entries)
    def refreshCatalog(self, clear=0, pghandler=None):
        """Reindex every catalogued object (clearing first if ``clear``)."""
        paths = [path for _, path in self._pgc_all_paths()]
        if clear:
            self.manage_catalogClear()
        root = self.getPhysicalRoot()
        for path in paths:
            obj = root.unrestrictedTraverse(path, None)
            if obj is None:
                logger.error("refreshCatalog: could not resolve %s", path)
                if not clear:
                    self.uncatalog_object(path)
                continue
            self.catalog_object(obj, path, pghandler=pghandler)

    @zpublish(False)
    @security.protected(manage_zcatalog_entries)
    def reindexIndex(self, name, REQUEST=None, pghandler=None):
        """Recompute index(es) ``name`` for every catalogued object (and
        create the PostgreSQL indexes they want, should some be missing:
        an upgraded plone.pgcatalog may want others)."""
        names = [name] if isinstance(name, str) else list(name)
        for index_id in names:
            self._pgc_create_ddl(self._catalog.getIndex(index_id))
        root = self.getPhysicalRoot()
        for _, path in self._pgc_all_paths():
            obj = root.unrestrictedTraverse(path, None)
            if obj is None:
                continue
            self.catalog_object(obj, path, idxs=names, update_metadata=0)

    @zpublish(methods="POST")
    @security.protected(manage_zcatalog_entries)
    @protect(CheckAuthenticator, PostOnly)
    def manage_reindexIndex(self, ids=None, REQUEST=None, RESPONSE=None,
                            URL1=None):
        """Reindex the selected indexes (the status page's form)."""
        if not ids:
            raise BadRequest("No items specified")
        self.reindexIndex(ids, REQUEST)
        if REQUEST and RESPONSE:
            RESPONSE.redirect(URL1 + "/manage_main")

    @zpublish(False)
    @security.private
    def maintain_zodb_cache(self):
        """Nothing to do: the catalog holds no ZODB objects."""

    # stock publishes these two to Managers (its Query Plan and Query
    # Report tabs); this tool has neither
    @zpublish(False)
    @security.protected(manage_zcatalog_entries)
    def getCatalogPlan(self):
        return ""

    @zpublish(False)
    @security.protected(manage_zcatalog_entries)
    def getCatalogReport(self):
        return []

    # RoleManager.valid_roles is published by its docstring; stock
    # ZCatalog replaces it with an unpublished "Search ZCatalog" method
    @zpublish(False)
    @security.protected(search_zcatalog)
    def valid_roles(self):
        return Folder.valid_roles(self)



def _sortable(value):
    return (0,) if value is None else (1, value)


from zExceptions import BadRequest  # noqa: E402


InitializeClass(PGCatalogTool)
