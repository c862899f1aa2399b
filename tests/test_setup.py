"""Install, uninstall, toolset re-import, multi-site scoping, ZMI status;
the GenericSetup patch applied explicitly; no tool <-> setuphandlers cycle."""
import subprocess
import sys
import unittest

import transaction
from Acquisition import aq_base
from plone.app.testing import TEST_USER_ID
from plone.app.testing import TEST_USER_NAME
from plone.app.testing import login
from plone.app.testing import setRoles
from Products.CMFCore.interfaces import ICatalogTool
from zope.component import getUtility

from plone.pgcatalog.testing import PGCATALOG_FUNCTIONAL_TESTING
from plone.pgcatalog.testing import PGCATALOG_INTEGRATION_TESTING
from plone.pgcatalog.tool import PGCatalogTool


class TestToolset(unittest.TestCase):
    layer = PGCATALOG_INTEGRATION_TESTING

    def test_reimporting_plone_toolset_keeps_the_tool(self):
        portal = self.layer["portal"]
        setup = portal.portal_setup
        setup.runImportStepFromProfile("profile-Products.CMFPlone:plone",
                                       "toolset")
        self.assertIsInstance(aq_base(portal.portal_catalog), PGCatalogTool)

    def test_status_page(self):
        portal = self.layer["portal"]
        setRoles(portal, TEST_USER_ID, ["Manager"])
        login(portal, TEST_USER_NAME)
        status = portal.portal_catalog.pgc_status()
        self.assertGreaterEqual(status["entries"], 1)
        self.assertIn("portal_type", [i["name"] for i in status["indexes"]])
        self.assertIn("hits", status["cache"])
        html = portal.portal_catalog.manage_catalogStatus()
        self.assertIn("PostgreSQL", html)
        self.assertIn("Result cache", html)

    def test_unsupported_index_type_fails_loudly(self):
        from plone.pgcatalog.errors import UnsupportedIndexType
        catalog = self.layer["portal"].portal_catalog
        with self.assertRaises(UnsupportedIndexType):
            catalog.addIndex("tl", "TopicIndex")
        self.assertNotIn("tl", catalog.indexes())


def _run(code):
    return subprocess.run([sys.executable, "-c", code], capture_output=True,
                          text=True, timeout=300)


class TestPatchAndImports(unittest.TestCase):
    layer = PGCATALOG_INTEGRATION_TESTING

    def test_the_layer_loads_the_patch_from_zcml(self):
        from Products.GenericSetup.registry import ToolsetRegistry

        from plone.pgcatalog import patches
        self.assertTrue(patches.applied())
        patches.apply()         # idempotent: still one wrapper
        self.assertIs(ToolsetRegistry.listRequiredToolInfo,
                      patches._list_required_tool_info)
        self.assertIsNot(patches._original, patches._list_required_tool_info)

    def test_importing_modules_patches_nothing(self):
        done = _run(
            "import plone.pgcatalog.setuphandlers, plone.pgcatalog.tool\n"
            "from Products.GenericSetup.registry import ToolsetRegistry\n"
            "print(ToolsetRegistry.listRequiredToolInfo.__module__)\n")
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(done.stdout.strip(), "Products.GenericSetup.registry")

    def test_tool_and_setuphandlers_do_not_import_each_other(self):
        # convert_index lives with the index kinds; the tool needs nothing
        # of setuphandlers, which imports the tool at its top
        done = _run(
            "import sys, plone.pgcatalog.tool\n"
            "print('plone.pgcatalog.setuphandlers' in sys.modules)\n")
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(done.stdout.strip(), "False")
        with open(sys.modules["plone.pgcatalog.tool"].__file__) as source:
            self.assertNotIn("setuphandlers", source.read())


class TestUninstall(unittest.TestCase):
    layer = PGCATALOG_FUNCTIONAL_TESTING

    def test_uninstall_puts_back_an_indexed_zcatalog(self):
        from Products.CMFPlone.CatalogTool import CatalogTool

        from plone.pgcatalog.setuphandlers import install
        from plone.pgcatalog.setuphandlers import uninstall
        portal = self.layer["portal"]
        setRoles(portal, TEST_USER_ID, ["Manager"])
        login(portal, TEST_USER_NAME)
        portal.invokeFactory("Document", "doc", title="Hello world")
        transaction.commit()
        indexes = set(portal.portal_catalog.indexes())
        columns = set(portal.portal_catalog.schema())
        uninstall(portal)
        transaction.commit()
        catalog = portal.portal_catalog
        self.assertIs(type(aq_base(catalog)), CatalogTool)
        self.assertIs(aq_base(getUtility(ICatalogTool)), aq_base(catalog))
        self.assertEqual(set(catalog.indexes()), indexes)
        self.assertEqual(set(catalog.schema()), columns)
        self.assertEqual([b.getId for b in catalog(SearchableText="hello")],
                         ["doc"])
        self.assertEqual(len(catalog(portal_type="Document")), 1)
        # and back again
        install(portal)
        transaction.commit()
        self.assertIsInstance(aq_base(portal.portal_catalog), PGCatalogTool)
        self.assertEqual(len(portal.portal_catalog(portal_type="Document")),
                         1)


class TestMultiSite(unittest.TestCase):
    layer = PGCATALOG_INTEGRATION_TESTING

    def test_two_catalogs_do_not_see_each_other(self):
        portal = self.layer["portal"]
        setRoles(portal, TEST_USER_ID, ["Manager"])
        login(portal, TEST_USER_NAME)
        portal.invokeFactory("Document", "mine", title="Mine")
        first = portal.portal_catalog
        other = PGCatalogTool("other_catalog")
        portal._setObject("other_catalog", other)
        other = portal.other_catalog
        for name in ("id", "portal_type"):
            other.addIndex(name, "FieldIndex")
        other.addColumn("Title")
        other.catalog_object(portal.mine, "/elsewhere/mine")
        self.assertEqual(len(other.unrestrictedSearchResults(
            portal_type="Document")), 1)
        self.assertEqual([b.getPath() for b in first.unrestrictedSearchResults(
            portal_type="Document")], ["/plone/mine"])
        other.manage_catalogClear()
        self.assertEqual(len(other.unrestrictedSearchResults(
            portal_type="Document")), 0)
        self.assertEqual(len(first.unrestrictedSearchResults(
            portal_type="Document")), 1)


class TestComments(unittest.TestCase):
    """plone.app.discussion catalogues comments at
    .../++conversation++default/<id> and uncatalogues them by path."""
    layer = PGCATALOG_INTEGRATION_TESTING

    def test_comments_indexed_rebuilt_and_removed(self):
        from plone.app.discussion.interfaces import IConversation
        from plone.app.discussion.interfaces import IDiscussionSettings
        from plone.app.testing import applyProfile
        from plone.registry.interfaces import IRegistry
        from zope.component import createObject
        from zope.component import queryUtility
        portal = self.layer["portal"]
        setRoles(portal, TEST_USER_ID, ["Manager"])
        login(portal, TEST_USER_NAME)
        applyProfile(portal, "plone.app.discussion:default")
        settings = queryUtility(IRegistry).forInterface(IDiscussionSettings)
        settings.globally_enabled = True
        portal.invokeFactory("Document", "doc", title="Commented")
        conversation = IConversation(portal.doc)
        comment = createObject("plone.Comment")
        comment.text = "Hello from a comment"
        comment_id = conversation.addComment(comment)
        catalog = portal.portal_catalog
        path = "/plone/doc/++conversation++default/%s" % comment_id

        def comment_paths():
            return [b.getPath() for b in catalog.unrestrictedSearchResults(
                portal_type="Discussion Item")]

        self.assertEqual(comment_paths(), [path])
        catalog.clearFindAndRebuild()
        self.assertEqual(comment_paths(), [path])
        del conversation[comment_id]
        self.assertEqual(comment_paths(), [])
