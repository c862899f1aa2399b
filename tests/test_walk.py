"""One definition of what the catalog should hold (``ops/walk.py``): an
online rebuild (``ops/rebuild.py``) and the verifier (``ops/verify.py``)
agree with each other and with ``clearFindAndRebuild`` on a site holding
a temporary object (CMFCore's ``filterTemporaryItems`` keeps it, and its
comments, out of the catalog), plone.app.discussion comments and, in
shadow mode, the old ZCatalog (``catalog_object`` skips it)."""
import os
import unittest

import transaction
from catalog_cases import rows
from plone.app.contenttypes.content import Document
from plone.app.testing import PLONE_FIXTURE
from plone.app.testing import TEST_USER_ID
from plone.app.testing import TEST_USER_NAME
from plone.app.testing import PloneSandboxLayer
from plone.app.testing import applyProfile
from plone.app.testing import login
from plone.app.testing import logout
from plone.app.testing import setRoles
from Products.CMFCore.indexing import filterTemporaryItems
from Products.CMFCore.indexing import processQueue

import plone.pgcatalog
from plone.pgcatalog.ops import shadow
from plone.pgcatalog.ops import verify
from plone.pgcatalog.ops.rebuild import OnlineRebuild
from plone.pgcatalog.ops.walk import objects
from plone.pgcatalog.ops.walk import walk
from plone.pgcatalog.testing import PGCATALOG_FUNCTIONAL_TESTING
from plone.pgcatalog.testing import CatalogStateLayerMixin
from plone.pgcatalog.testing.layers import PGCATALOG_DATABASE
from plone.pgcatalog.testing.layers import PGCatalogFunctionalTesting


class ShadowFixture(CatalogStateLayerMixin, PloneSandboxLayer):
    """Two documents indexed by the stock catalog, then plone.pgcatalog
    installed in shadow mode (the old ZCatalog an item of the site)."""

    defaultBases = (PGCATALOG_DATABASE, PLONE_FIXTURE)

    def setUpZope(self, app, configurationContext):
        self.loadZCML(package=plone.pgcatalog)

    def setUpPloneSite(self, portal):
        setRoles(portal, TEST_USER_ID, ["Manager"])
        login(portal, TEST_USER_NAME)
        for name in ("before-0", "before-1"):
            portal.invokeFactory("Document", name, title=name)
        processQueue()
        os.environ["PGCATALOG_SHADOW"] = "1"
        try:
            applyProfile(portal, "plone.pgcatalog:default")
        finally:
            del os.environ["PGCATALOG_SHADOW"]
        setRoles(portal, TEST_USER_ID, ["Member"])
        logout()


SHADOW_TESTING = PGCatalogFunctionalTesting(
    bases=(ShadowFixture(),), name="PGCatalog:WalkShadow")



class TemporaryDocument(Document):
    """A document still being made, as portal_factory's were: CMFCore's
    queued indexing (``filterTemporaryItems``) leaves it out, and its
    comments too (they acquire ``isTemporary``)."""

    def isTemporary(self):
        return True


def add_comment(obj, text):
    """A plone.app.discussion comment of ``obj``; its path."""
    from plone.app.discussion.interfaces import IConversation
    from zope.component import createObject
    comment = createObject("plone.Comment")
    comment.text = text
    comment_id = IConversation(obj).addComment(comment)
    return "/".join(obj.getPhysicalPath()) + \
        "/++conversation++default/%s" % comment_id


def enable_comments(portal):
    from plone.app.discussion.interfaces import IDiscussionSettings
    from plone.registry.interfaces import IRegistry
    from zope.component import queryUtility
    applyProfile(portal, "plone.app.discussion:default")
    settings = queryUtility(IRegistry).forInterface(IDiscussionSettings)
    settings.globally_enabled = True


class AgreementCase(unittest.TestCase):
    """A rebuilt catalog: an online rebuild's equals clearFindAndRebuild's,
    and the verifier walks exactly what both index."""

    def rebuilt(self):
        """clearFindAndRebuild's rows (committed)."""
        transaction.begin()
        self.catalog.clearFindAndRebuild()
        processQueue()
        transaction.commit()
        return rows(self.catalog._pgc_key)

    def assertAgree(self):
        expected = self.rebuilt()
        report = verify.verify(self.catalog)
        self.assertTrue(report.clean, "\n".join(report.summary()))
        build = OnlineRebuild(self.catalog, batch_size=2, grace=0)
        state = build.start("rebuild")
        self.assertTrue(build.run())
        online = rows(state.key)
        self.assertEqual(sorted(online), sorted(expected))
        self.assertEqual(online, expected)
        self.assertEqual(state.done, len(expected))
        report = verify.verify(self.catalog, batch=3)
        self.assertTrue(report.clean, "\n".join(report.summary()))
        self.assertEqual(report.entries, len(expected))
        self.assertEqual(report.objects, len(expected))
        return expected


class TestTemporaryItemsAndComments(AgreementCase):
    layer = PGCATALOG_FUNCTIONAL_TESTING

    def setUp(self):
        self.portal = self.layer["portal"]
        setRoles(self.portal, TEST_USER_ID, ["Manager"])
        login(self.portal, TEST_USER_NAME)
        self.catalog = self.portal.portal_catalog
        enable_comments(self.portal)
        self.portal.invokeFactory("Folder", "f", title="Folder")
        for n in (2, 0, 1):    # the folder's order is not the ids'
            self.portal.f.invokeFactory("Document", "d%d" % n,
                                        title="Doc %d" % n)
        self.comment = add_comment(self.portal.f.d0, "A comment")
        temporary = TemporaryDocument(id="tmp")
        temporary.portal_type = "Document"
        temporary.title = "Temporary"
        self.portal.f._setObject("tmp", temporary)
        self.temporary = self.portal.f.tmp
        self.assertIsNone(filterTemporaryItems(self.temporary))
        self.temporary_comment = add_comment(self.temporary, "Not yet")
        processQueue()
        transaction.commit()

    def tearDown(self):
        transaction.abort()

    def test_rebuild_and_verify_agree(self):
        expected = self.assertAgree()
        self.assertIn(self.comment, expected)
        self.assertIn("/plone/f/d2", expected)
        self.assertNotIn("/plone/f/tmp", expected)
        self.assertNotIn(self.temporary_comment, expected)
        # the site, the folder, 3 documents, a comment
        self.assertEqual(len(expected), 6)

    def test_an_entry_of_a_temporary_object_is_stale(self):
        self.catalog.catalog_object(self.temporary)
        report = verify.verify(self.catalog, repair=True)
        self.assertEqual([p for p, _ in report.samples["stale_entry"]],
                         ["/plone/f/tmp"])
        self.assertIn("temporary", report.samples["stale_entry"][0][1])
        self.assertIsNone(self.catalog.getrid("/plone/f/tmp"))
        self.assertTrue(verify.verify(self.catalog).clean)

    def test_walk_resumes_anywhere_in_path_order(self):
        units = [(path, [o.getPhysicalPath() for o in objects])
                 for path, objects in walk(self.catalog)]
        paths = [path for path, _ in units]
        self.assertEqual(paths, sorted(paths))
        self.assertNotIn(("", "plone", "f", "tmp"), paths)
        self.assertIn(("", "plone", "f", "d0"), paths)
        for n, (path, _) in enumerate(units):
            self.assertEqual(
                [(p, [o.getPhysicalPath() for o in objects])
                 for p, objects in walk(self.catalog, path)],
                units[n + 1:])

    def test_the_verifier_walks_in_zope_find_and_apply_order(self):
        met = ["/plone"]
        self.portal.ZopeFindAndApply(
            self.portal, search_sub=True, apply_func=lambda obj, path:
            met.append("/".join(obj.getPhysicalPath())))
        found = [path for path, _ in objects(self.catalog)]
        self.assertEqual(len(found), 6)
        self.assertEqual([p for p in found if "++conversation++" not in p],
                         [p for p in met if p in found])
        self.assertEqual(found[2:5], ["/plone/f/d2", "/plone/f/d0",
                                      self.comment])
        with self.assertRaises(ValueError):
            next(walk(self.catalog, ("", "plone", "f"), order=False))


class TestShadowMode(AgreementCase):
    layer = SHADOW_TESTING

    def setUp(self):
        self.portal = self.layer["portal"]
        self.catalog = self.portal.portal_catalog
        shadow.clear()
        setRoles(self.portal, TEST_USER_ID, ["Manager"])
        login(self.portal, TEST_USER_NAME)
        # writes to PostgreSQL only: the online rebuild does not write
        # the shadow (its own catalog stays as it is)
        self.catalog.pgc_shadow_configure(primary="pgcatalog")
        transaction.commit()

    def tearDown(self):
        transaction.abort()
        shadow.clear()

    def test_the_shadow_zcatalog_is_not_catalogued(self):
        expected = self.assertAgree()
        self.assertNotIn("/plone/" + shadow.SHADOW_ID, expected)
        self.assertIn("/plone/before-0", expected)
