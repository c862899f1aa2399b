"""portal_catalog's web surface: what the publisher answers, for Anonymous,
a Member and a Manager, for the tool's names, ``portal_catalog/Indexes``
and the index objects' names, asserted through the real publisher on a
plone.pgcatalog site.

The expectations are a table measured against stock CMFPlone 6.2
(Products.ZCatalog 7.4) with ``tests/web_surface_probe.py``: every answer of
ours equals stock's or is narrower (notfound < denied < confirm < ok), which
``test_table_is_no_wider_than_stock`` checks of the table itself.

Classes: ``o`` ok (the name was reached: 2xx, a redirect other than to the
login form, 400 missing arguments, 500), ``d`` denied (401, 403, redirect to
the login form), ``n`` notfound (404: not published), ``c`` confirm
(plone.protect aborted a write and asks for confirmation).
"""
import os
import sys
import unittest

from AccessControl import Unauthorized
from AccessControl.ZopeGuards import guarded_getattr
from plone.app.testing import logout

from plone.pgcatalog.indexes import kind_for
from plone.pgcatalog.indexes.base import STOCK_DATA_METHODS
from plone.pgcatalog.testing import PGCATALOG_FUNCTIONAL_TESTING
from plone.pgcatalog.testing import PGCATALOG_INTEGRATION_TESTING
from plone.pgcatalog.testing import snapshot
from plone.pgcatalog.tool import PGCatalogTool


sys.path.insert(0, os.path.dirname(__file__))
import web_surface_probe as probe  # noqa: E402


ROLES = probe.ROLES
CLASSES = {"ok": "o", "denied": "d", "notfound": "n", "confirm": "c"}
RANK = {"n": 0, "d": 1, "c": 2, "o": 3}

#: name: stock GET, stock POST, ours GET, ours POST, each for Anonymous,
#: Member, Manager.  Every callable the catalog classes define (ZCatalog,
#: CMFCore's and CMFPlone's CatalogTool, PGCatalogTool), the tool's own URL
#: (``__call__``), ``Indexes`` and the ZMI entry points (manage_main,
#: manage_workspace).  Measured, stock and ours (see the module docstring);
#: a name one side lacks is ``n`` there.
TOOL_TABLE = """
__call__                     ddd ddd   ddd ddd
addColumn                    nnn nnn   nnn nnn
addIndex                     nnn nnn   nnn nnn
allow_inactive               ddd ddd   nnn nnn
availableIndexes             ddo ddo   nnn nnn
catalog_object               nnn nnn   nnn nnn
clearFindAndRebuild          nnn nnn   nnn nnn
clearIndex                   nnn nnn   nnn nnn
delColumn                    nnn nnn   nnn nnn
delIndex                     nnn nnn   nnn nnn
getAllBrains                 nnn nnn   nnn nnn
getCatalogPlan               ddo ddo   nnn nnn
getCatalogReport             ddo ddo   nnn nnn
getCounter                   nnn nnn   nnn nnn
getIndexDataForRID           nnn nnn   nnn nnn
getIndexDataForUID           nnn nnn   nnn nnn
getIndexObjects              nnn nnn   nnn nnn
getMetadataForRID            nnn nnn   nnn nnn
getMetadataForUID            nnn nnn   nnn nnn
getobject                    nnn nnn   nnn nnn
getpath                      nnn nnn   nnn nnn
getrid                       nnn nnn   nnn nnn
index_objects                nnn nnn   nnn nnn
Indexes                      ddo ddo   ddo ddo
indexes                      nnn nnn   nnn nnn
indexObject                  nnn nnn   nnn nnn
maintain_zodb_cache          nnn nnn   nnn nnn
manage_addColumn             ddo ddo   nnn nnn
manage_addIndex              ddo ddo   nnn nnn
manage_afterClone            nnn nnn   nnn nnn
manage_catalogAdvanced       ddo ddo   nnn nnn
manage_catalogClear          ddc ddo   nnn ddd
manage_catalogFind           ddo ddo   nnn nnn
manage_catalogFoundItems     ddc ddo   nnn nnn
manage_catalogIndexes        ddo ddo   ddo ddo
manage_catalogObject         ddo ddo   nnn nnn
manage_catalogPlan           ddo ddo   nnn nnn
manage_catalogRebuild        ddc ddo   nnn ddd
manage_catalogReindex        ddc ddo   nnn nnn
manage_catalogReport         ddo ddo   ddo ddo
manage_catalogSchema         ddo ddo   ddo ddo
manage_catalogStatus         ddo ddo   ddo ddo
manage_catalogView           ddo ddo   ddo ddo
manage_clearIndex            ddo ddo   nnn nnn
manage_delColumn             ddo ddo   nnn nnn
manage_delIndex              ddo ddo   nnn nnn
manage_edit                  ddc ddo   nnn nnn
manage_editCatalogReport     ddc ddo   nnn nnn
manage_explainSlowQuery      ddo ddo   nnn ddd
manage_normalize_paths       ddo ddo   nnn nnn
manage_objectInformation     ddo ddo   ddo ddo
manage_overview              ddo ddo   nnn nnn
manage_reindexIndex          ddo ddo   nnn ddd
manage_resetCatalogReport    ddo ddo   nnn nnn
manage_setProgress           ddc ddo   nnn nnn
manage_subbingToggle         ddc ddo   nnn nnn
manage_uncatalogObject       ddo ddo   nnn nnn
manage_main                  ddo ddo   ddo ddo
manage_workspace             ddo ddo   ddo ddo
pgc_entries_report           nnn nnn   nnn nnn
pgc_entry_report             nnn nnn   nnn nnn
pgc_index_report             nnn nnn   nnn nnn
pgc_recreate_catalog         nnn nnn   nnn nnn
pgc_slow_report              nnn nnn   nnn nnn
pgc_status                   nnn nnn   nnn nnn
pgc_store_long_lists         nnn nnn   nnn nnn
pgc_sync_indexes             nnn nnn   nnn nnn
pgc_table_report             nnn nnn   nnn nnn
refreshCatalog               ddo ddo   nnn nnn
reindexIndex                 nnn nnn   nnn nnn
reindexObject                nnn nnn   nnn nnn
resolve_path                 nnn nnn   nnn nnn
resolve_url                  nnn nnn   nnn nnn
schema                       nnn nnn   nnn nnn
search                       nnn nnn   nnn nnn
searchAll                    nnn nnn   nnn nnn
searchResults                nnn nnn   nnn nnn
uncatalog_object             nnn nnn   nnn nnn
unindexObject                nnn nnn   nnn nnn
uniqueValuesFor              nnn nnn   nnn nnn
unrestrictedSearchResults    ddd ddd   nnn nnn
valid_roles                  nnn nnn   nnn nnn
ZopeFindAndApply             ddo ddo   ddo ddo
"""
# manage_catalogStatus is this tool's "Catalog" tab: its stock columns are
# those of stock's "Catalog" tab, manage_catalogView.  The admin tabs
# (toolapi/admin.py) have stock's names: manage_catalogIndexes,
# manage_catalogSchema, manage_catalogView (entries), manage_objectInformation
# (400 without a rid), manage_catalogReport (the slow-query log).  Its
# EXPLAIN action, manage_explainSlowQuery, has no stock name: its stock
# columns are those of stock's "Query Plan" tab, manage_catalogPlan; it is
# published for POST only and wants the authenticator (403 without).  The ZMI actions
# manage_catalogClear / manage_catalogRebuild / manage_reindexIndex are
# published for POST only and answer 403 without plone.protect's
# authenticator (test_csrf.py); stock answers a Manager's GET with the
# confirmation page (its writes are ZODB writes plone.protect sees).


def parse_table(text):
    table = {}
    for line in text.strip().splitlines():
        name, sget, spost, oget, opost = line.split()
        table[name] = {"stock": {"GET": sget, "POST": spost},
                       "ours": {"GET": oget, "POST": opost}}
    return table


TOOL = parse_table(TOOL_TABLE)

#: requests for the private document by its rid or path, every role (stock:
#: 404 but for the tool's URL, which answers 403; a stock Manager reads a
#: FieldIndex's getEntryForObject); ours answer with none of its data.
PROBES = {
    "getpath?rid": "nnn", "getrid?path": "nnn", "getobject?rid": "nnn",
    "getMetadataForRID": "nnn", "getIndexDataForRID": "nnn",
    "getMetadataForUID": "nnn", "getIndexDataForUID": "nnn",
    "searchResults?id": "nnn", "__call__?id": "ddd", "search?query": "nnn",
    "uniqueValuesFor?id": "nnn", "resolve_path": "nnn",
    "Indexes/id/uniqueValues": "nnn", "Indexes/Subject/uniqueValues": "nnn",
    "Indexes/id/getEntryForObject": "nnn", "Indexes/id/keyForDocument": "nnn",
}

#: What stock answers Anonymous and Members with something other than
#: 404/denied among all public names of the tool and the index objects
#: (measured; ours answers the same or less): OFS and WebDAV generics, and
#: configuration getters of some index kinds.  (Stock also answers a
#: DateIndex's clear, histogram, numObjects, insertForwardIndexEntry, ...
#: and ZCTextIndex's query to Anonymous; ours publishes none of these.)
OPEN_TOOL = {"COPY", "MKCOL", "OPTIONS", "PUT", "TRACE", "absolute_url",
             "absolute_url_path", "getActionInfo", "getId", "manage_clone",
             "manage_form_title", "manage_tabs", "manage_zmi_logout",
             "title_and_id", "title_or_id", "validRoles", "validate_roles",
             "virtual_url_path", "zope_copyright"}
OPEN_INDEX = {"COPY", "HEAD", "OPTIONS", "TRACE", "absolute_url",
              "absolute_url_path", "manage_form_title", "manage_zmi_logout",
              "virtual_url_path", "zope_copyright"}
_SIMPLE_ITEM = {"", "MKCOL", "PUT", "getIndexQueryNames",
                "getIndexSourceNames", "manage_tabs", "title_and_id",
                "title_or_id", "validRoles", "valid_roles", "validate_roles"}
_RANGE = {"getSinceField", "getUntilField"}
OPEN_INDEX_KIND = {
    "DateIndex": _SIMPLE_ITEM,
    "DateRecurringIndex": _SIMPLE_ITEM | _RANGE,
    "DateRangeIndex": _RANGE | {"getCeilingValue", "getFloorValue",
                                "getPrecisionValue"},
    "ExtendedPathIndex": {"getId"},
    "ZCTextIndex": {"getId"},
}
#: and to Members also
OPEN_MEMBER = {"PROPFIND", "manage_DAVget"}


def unpublished_index_names(kind):
    """Names no index object of ours publishes: everything plone.pgcatalog
    defines on it and the stock data methods it inherits."""
    cls = kind_for(kind)
    names = set(STOCK_DATA_METHODS) & set(dir(cls))
    for klass in cls.__mro__:
        if klass.__module__.startswith("plone.pgcatalog."):
            names.update(n for n, v in vars(klass).items()
                         if not n.startswith("_") and callable(v))
    return sorted(names)


class TestTable(unittest.TestCase):

    def test_table_is_no_wider_than_stock(self):
        for name, row in TOOL.items():
            for method in ("GET", "POST"):
                for i, role in enumerate(ROLES):
                    stock = row["stock"][method][i]
                    ours = row["ours"][method][i]
                    with self.subTest(name=name, method=method, role=role):
                        self.assertLessEqual(RANK[ours], RANK[stock])

    def test_table_covers_the_catalog_api(self):
        from Products.CMFCore.CatalogTool import CatalogTool as CMFTool
        from Products.CMFPlone.CatalogTool import CatalogTool as PloneTool
        from Products.ZCatalog.ZCatalog import ZCatalog
        names = set()
        for klass in (ZCatalog, CMFTool, PloneTool, PGCatalogTool):
            names.update(n for n, v in vars(klass).items()
                         if not n.startswith("_") and callable(v)
                         and not n.endswith("__roles__"))
        self.assertEqual(names - set(TOOL), set())


class TestWebSurface(unittest.TestCase):
    layer = PGCATALOG_FUNCTIONAL_TESTING

    def setUp(self):
        self.portal = self.layer["portal"]
        probe.setup_content(self.portal)
        self.client = probe.make_client(self.layer["app"])
        self.rows = snapshot()

    def answer(self, method, path, role, params=None):
        status, location, body = probe.request(self.client, method, path,
                                               role, params)
        return CLASSES[probe.classify(status, location)], status, body

    def assertCatalogUnchanged(self, msg=None):
        self.assertTrue(snapshot() == self.rows,
                        msg or "the catalog's rows changed")

    def test_tool_names(self):
        for name, row in TOOL.items():
            for method in ("GET", "POST"):
                for i, role in enumerate(ROLES):
                    with self.subTest(name=name, method=method, role=role):
                        got, status, _ = self.answer(method, probe.url(name),
                                                     role)
                        self.assertEqual(
                            got, row["ours"][method][i],
                            "%s %s as %s: %d" % (method, name, role, status))
        self.assertCatalogUnchanged()

    def test_private_document_not_revealed(self):
        probes = probe.leak_probes(self.portal)
        self.assertEqual({p[0] for p in probes}, set(PROBES))
        for label, path, params in probes:
            for i, role in enumerate(ROLES):
                with self.subTest(probe=label, role=role):
                    got, status, body = self.answer("GET", path, role, params)
                    self.assertEqual(got, PROBES[label][i], status)
                    self.assertFalse(probe.leaks(body))

    def test_index_objects_publish_nothing_of_ours(self):
        catalog = self.portal.portal_catalog
        for kind, index in probe.INDEX_KINDS.items():
            self.assertEqual(catalog._catalog.getIndex(index).meta_type, kind)
            for name in unpublished_index_names(kind):
                for method in ("GET", "POST"):
                    for role in ROLES:
                        with self.subTest(index=index, name=name,
                                          method=method, role=role):
                            got, status, _ = self.answer(
                                method, probe.url(name, index), role)
                            self.assertEqual(got, "n", status)
        self.assertCatalogUnchanged()

    def test_anonymous_and_members_reach_only_what_stock_opens(self):
        # every public name of the tool and of each index kind, GET
        targets = [(None, n, OPEN_TOOL)
                   for n in probe.public_names(PGCatalogTool)]
        targets.append((None, "__call__", OPEN_TOOL))
        for kind, index in probe.INDEX_KINDS.items():
            open_ = OPEN_INDEX | OPEN_INDEX_KIND.get(kind, set())
            targets.append((index, "", open_))
            targets.extend((index, n, open_)
                           for n in probe.public_names(kind_for(kind)))
        for role in ("Anonymous", "Member"):
            extra = OPEN_MEMBER if role == "Member" else set()
            for index, name, open_ in targets:
                with self.subTest(index=index, name=name, role=role):
                    got, status, _ = self.answer("GET", probe.url(name, index),
                                                 role)
                    if got == "o":
                        self.assertIn(name, open_ | extra, status)
        self.assertCatalogUnchanged()


class TestRestrictedCode(unittest.TestCase):
    """Not published is not private: restricted code (TALES, scripts) keeps
    the catalog API stock declares for it."""
    layer = PGCATALOG_INTEGRATION_TESTING

    def test_anonymous(self):
        portal = self.layer["portal"]
        logout()
        catalog = portal.portal_catalog
        search = portal.restrictedTraverse("portal_catalog/searchResults")
        found = search(portal_type="Plone Site")
        self.assertEqual([b.getPath() for b in found], ["/plone"])
        # calling the tool (TALES: portal_catalog(...)) is guarded as
        # searchResults is
        self.assertEqual(PGCatalogTool.__call____roles__.__name__,
                         PGCatalogTool.searchResults__roles__.__name__)
        self.assertEqual(len(catalog(portal_type="Plone Site")), 1)
        for name in ("searchResults", "search", "getpath",
                     "getrid", "getobject", "getMetadataForRID",
                     "getIndexDataForRID", "uniqueValuesFor", "indexes",
                     "schema", "getAllBrains", "searchAll", "valid_roles"):
            with self.subTest(name=name):
                self.assertTrue(callable(guarded_getattr(catalog, name)))
        for name in ("manage_catalogClear", "manage_catalogRebuild",
                     "manage_reindexIndex", "reindexIndex", "refreshCatalog",
                     "clearFindAndRebuild", "catalog_object",
                     "uncatalog_object", "addIndex", "delIndex", "addColumn",
                     "delColumn", "index_objects", "getIndexObjects",
                     "getCounter", "unrestrictedSearchResults", "pgc_status",
                     "getCatalogPlan", "getCatalogReport",
                     "maintain_zodb_cache", "allow_inactive",
                     "manage_catalogIndexes", "manage_catalogSchema",
                     "manage_catalogView", "manage_objectInformation",
                     "manage_catalogReport", "manage_explainSlowQuery",
                     "pgc_index_report", "pgc_table_report",
                     "pgc_entries_report", "pgc_entry_report",
                     "pgc_slow_report"):
            with self.subTest(name=name):
                with self.assertRaises(Unauthorized):
                    guarded_getattr(catalog, name)
        index = catalog._catalog.getIndex("Subject")
        for name in ("uniqueValues", "numObjects", "getEntryForObject"):
            with self.subTest(index_name=name):
                self.assertTrue(callable(guarded_getattr(index, name)))
        for name in ("clear", "index_object", "pgc_extract", "pgc_where",
                     "pgc_key_sql"):
            with self.subTest(index_name=name):
                with self.assertRaises(Unauthorized):
                    guarded_getattr(index, name)
