"""CSRF: plone.protect's automatic check sees ZODB writes only, and the
catalog's writes go to PostgreSQL.  Every catalog name that writes is either
not published at all or published for POST only with plone.protect's
authenticator checked (the ZMI status page's forms carry it); a Manager's
request without the token changes nothing.  Python callers are unchanged.
"""
import os
import re
import sys
import unittest

import transaction
from plone.app.testing import login
from plone.app.testing import logout
from zExceptions import Forbidden

from plone.pgcatalog.testing import PGCATALOG_FUNCTIONAL_TESTING
from plone.pgcatalog.testing import snapshot


sys.path.insert(0, os.path.dirname(__file__))
import web_surface_probe as probe  # noqa: E402


PUBLIC = "/plone/" + probe.PUBLIC_ID

#: (path under portal_catalog, form) of every name that writes, stock's ZMI
#: actions included (ours has none of those: they must not be acquired
#: either), with arguments that would make each of them write.
WRITES = [
    ("manage_catalogClear", {}),
    ("manage_catalogRebuild", {}),
    ("manage_reindexIndex", {"ids:list": "Subject"}),
    ("reindexIndex", {"name": "Subject"}),
    ("refreshCatalog", {"clear:int": "1"}),
    ("clearFindAndRebuild", {}),
    ("manage_addIndex", {"name": "csrf_index", "type": "FieldIndex"}),
    ("manage_delIndex", {"ids:list": "Subject"}),
    ("manage_addColumn", {"name": "csrf_column"}),
    ("manage_delColumn", {"names:list": "Title"}),
    ("addIndex", {"name": "csrf_index", "type": "FieldIndex"}),
    ("delIndex", {"name": "Subject"}),
    ("clearIndex", {"name": "Subject"}),
    ("addColumn", {"name": "csrf_column"}),
    ("delColumn", {"name": "Title"}),
    ("catalog_object", {"obj": "forged", "uid": "/plone/forged"}),
    ("uncatalog_object", {"uid": PUBLIC}),
    ("indexObject", {"object": "forged"}),
    ("reindexObject", {"object": "forged"}),
    ("unindexObject", {"object": "forged"}),
    ("manage_catalogReindex", {}),
    ("manage_catalogObject", {"urls": PUBLIC}),
    ("manage_uncatalogObject", {"urls": PUBLIC}),
    ("manage_catalogFoundItems", {"obj_metatypes": "Document"}),
    ("manage_clearIndex", {"ids:list": "Subject"}),
    ("manage_normalize_paths", {}),
    ("manage_edit", {"threshold:int": "5"}),
    ("manage_subbingToggle", {}),
    ("manage_setProgress", {"pgthreshold:int": "5"}),
]
#: the same for index objects, for an index of each kind
INDEX_WRITES = [
    ("clear", {}),
    ("index_object", {"documentId:int": "{rid}", "obj": "forged"}),
    ("unindex_object", {"documentId:int": "{rid}"}),
    ("insertForwardIndexEntry", {"entry": "forged",
                                 "documentId:int": "{rid}"}),
    ("removeForwardIndexEntry", {"entry": "forged",
                                 "documentId:int": "{rid}"}),
    ("unindex_objectKeywords", {"documentId:int": "{rid}",
                                "keywords:list": "Hushhush"}),
    ("insertEntry", {"comp": "forged", "id:int": "{rid}", "level:int": "0"}),
]
#: the ZMI actions published for POST with the authenticator
ZMI_ACTIONS = ("manage_catalogClear", "manage_catalogRebuild",
               "manage_reindexIndex", "manage_explainSlowQuery")

TOKEN = probe.AUTHENTICATOR


class TestCSRF(unittest.TestCase):
    layer = PGCATALOG_FUNCTIONAL_TESTING

    def setUp(self):
        self.portal = self.layer["portal"]
        probe.setup_content(self.portal)
        self.catalog = self.portal.portal_catalog
        self.client = probe.make_client(self.layer["app"])

    def state(self):
        """The catalog as PostgreSQL and the ZODB hold it."""
        catalog = self.portal.portal_catalog
        return (snapshot(), len(catalog), sorted(catalog.indexes()),
                sorted(catalog.schema()))

    def post(self, name, form, role="Manager"):
        return probe.request(self.client, "POST",
                             "/plone/portal_catalog/" + name, role, form)

    def token(self):
        status, _, body = probe.request(
            self.client, "GET", "/plone/portal_catalog/manage_catalogStatus",
            "Manager")
        self.assertEqual(status, 200)
        found = TOKEN.findall(body)
        self.assertTrue(found, "no authenticator on the status page")
        return found[0]

    def test_requests_without_token_change_nothing(self):
        rid = str(self.catalog.getrid(PUBLIC))
        targets = [(name, form) for name, form in WRITES]
        for kind, index in probe.INDEX_KINDS.items():
            for name, form in INDEX_WRITES:
                form = {k: v.format(rid=rid) for k, v in form.items()}
                targets.append(("Indexes/%s/%s" % (index, name), form))
        for name, form in targets:
            for method in ("GET", "POST"):
                with self.subTest(name=name, method=method):
                    before = self.state()
                    status, location, _ = probe.request(
                        self.client, method, "/plone/portal_catalog/" + name,
                        "Manager", form)
                    answer = probe.classify(status, location)
                    self.assertIn(answer, ("notfound", "denied"), status)
                    self.assertEqual(self.state(), before)

    def test_zmi_actions_want_post(self):
        token = self.token()
        before = self.state()
        for name in ZMI_ACTIONS:
            with self.subTest(name=name):
                status, _, _ = probe.request(
                    self.client, "GET", "/plone/portal_catalog/" + name,
                    "Manager", {"_authenticator": token, "ids:list": "id"})
                self.assertEqual(status, 404)
                self.assertEqual(self.state(), before)

    def test_token_of_another_user_is_refused(self):
        # a token is the user's: the Member's does not do for the Manager
        login(self.portal, probe.MEMBER[0])
        from plone.protect.authenticator import createToken
        token = createToken()
        logout()
        before = self.state()
        status, _, _ = self.post("manage_catalogClear",
                                 {"_authenticator": token})
        self.assertEqual(status, 403)
        self.assertEqual(self.state(), before)

    def test_status_page_forms_carry_the_authenticator(self):
        status, _, body = probe.request(
            self.client, "GET", "/plone/portal_catalog/manage_catalogStatus",
            "Manager")
        self.assertEqual(status, 200)
        actions = dict(re.findall(
            r'<form\b[^>]*\baction="([^"]+)"[^>]*>(.*?)</form>', body, re.S))
        for action in ("manage_reindexIndex", "manage_catalogRebuild"):
            self.assertIn(action, actions)
            self.assertRegex(actions[action], TOKEN)
        self.assertEqual(len(re.findall(r'<form\b[^>]*method="post"', body)),
                         2)

    def test_reindex_form(self):
        doc = self.portal[probe.PUBLIC_ID]
        doc.setSubject(["Freshword"])  # not reindexed
        transaction.commit()
        self.assertEqual(len(self.catalog(Subject="Freshword")), 0)
        status, _, _ = self.post("manage_reindexIndex",
                                 {"ids:list": "Subject"})
        self.assertEqual(status, 403)
        self.assertEqual(len(self.catalog(Subject="Freshword")), 0)
        status, location, _ = self.post(
            "manage_reindexIndex",
            {"ids:list": "Subject", "_authenticator": self.token()})
        self.assertEqual(status, 302, location)
        self.assertEqual(
            [b.getPath() for b in self.catalog(Subject="Freshword")],
            [PUBLIC])

    def test_rebuild_form(self):
        entries = len(self.catalog)
        self.catalog.uncatalog_object(PUBLIC)
        transaction.commit()
        self.assertEqual(len(self.catalog), entries - 1)
        status, _, _ = self.post("manage_catalogRebuild", {})
        self.assertEqual(status, 403)
        self.assertEqual(len(self.catalog), entries - 1)
        status, location, _ = self.post("manage_catalogRebuild",
                                        {"_authenticator": self.token()})
        self.assertEqual(status, 302, location)
        self.assertEqual(len(self.catalog), entries)
        self.assertEqual(self.catalog.getrid(PUBLIC) is None, False)

    def test_clear_with_token(self):
        self.assertGreater(len(self.catalog), 0)
        status, _, _ = self.post("manage_catalogClear",
                                 {"_authenticator": self.token()})
        self.assertIn(status, (200, 204, 302))
        self.assertEqual(len(self.catalog), 0)


class TestPythonCallers(unittest.TestCase):
    """The CSRF check runs only for a real request handed to the method:
    Python callers (no REQUEST) work as before."""
    layer = PGCATALOG_FUNCTIONAL_TESTING

    def setUp(self):
        self.portal = self.layer["portal"]
        probe.setup_content(self.portal)
        self.catalog = self.portal.portal_catalog

    def entries(self):
        # a search sees this transaction's pending writes (len() does not)
        return len(self.catalog.unrestrictedSearchResults(path="/plone"))

    def test_without_request(self):
        catalog = self.catalog
        doc = self.portal[probe.PUBLIC_ID]
        doc.setSubject(["Freshword"])
        catalog.manage_reindexIndex(ids=["Subject"])
        self.assertEqual(len(catalog(Subject="Freshword")), 1)
        entries = self.entries()
        catalog.manage_catalogClear()
        self.assertEqual(self.entries(), 0)
        catalog.manage_catalogRebuild()
        self.assertEqual(self.entries(), entries)
        catalog.manage_catalogClear()
        catalog.manage_catalogRebuild(None, None)  # RESPONSE, URL1
        self.assertEqual(self.entries(), entries)

    def test_with_a_request_lacking_the_token(self):
        request = self.layer["request"]
        entries = self.entries()
        with self.assertRaises(Forbidden):
            self.catalog.manage_catalogClear(request)
        self.assertEqual(self.entries(), entries)
