"""The other packages' tests ``pgcatalog-testrunner`` skips, and why."""


# Tests skipped by default: (test id, kind, reason). A test id is
# "package.module.Class.method". Kinds:
# "zcatalog-internals": the test asserts how ZCatalog is built (its BTrees,
#     the concrete classes of its indexes) rather than what it answers;
#     plone.pgcatalog by design differs there (results are the same);
# "fails-on-stock": the test fails on stock ZCatalog too (with the Plone
#     version this runner is tested against), so it says nothing about the
#     catalog. Skipped in --stock mode as well.
# "runner": the test asserts the state of a fresh site, which the runner
#     changes by installing plone.pgcatalog in PLONE_FIXTURE.
_CLASS_NAME_REASON = (
    "asserts the index's concrete class name (ZCatalog's index class); "
    "plone.pgcatalog serves each index type by a subclass keeping its data "
    "in PostgreSQL (PGDateIndex is-a DateIndex, same meta_type and "
    "options, same query results), so the name differs by design")
_PASTE_REASON = (
    "makes the catalog pasteable by patching the class "
    "Products.CMFPlone.CatalogTool.CatalogTool (__replaceable__); "
    "portal_catalog is plone.pgcatalog's tool, which that patch does not "
    "reach, so the paste is refused as for any unique tool (with the same "
    "patch applied to PGCatalogTool the paste works, lexicons included)")

EXCLUSIONS = [
    ("Products.CMFPlone.tests.testNavigationView.TestCatalogPortalTabs."
     "testCreateTopLevelTabs",
     "fails-on-stock",
     "expects 7 top-level tabs, a count from an older default content set; "
     "with Plone 6.2's fixtures the view returns 5 tabs on stock ZCatalog "
     "as on plone.pgcatalog"),
] + [
    ("Products.CMFPlone.tests.testCatalogTool.TestCatalogSetup." + name,
     "zcatalog-internals", _CLASS_NAME_REASON)
    for name in (
        "testSearchableTextIsZCTextIndex", "testDescriptionIsZCTextIndex",
        "testTitleIsZCTextIndex", "testPathIsExtendedPathIndex",
        "testGetObjPositionInParentIsGopipIndex", "testDateIsDateIndex",
        "testCreatedIsDateIndex", "testEffectiveIsDateIndex",
        "testEndIsDateRecurringIndex", "testExpiresIsDateIndex",
        "testModifiedIsDateIndex", "testStartIsDateRecurringIndex",
        "testEffectiveRangeIsDateRangeIndex",
        "testSortable_TitleIsFieldIndex",
        "testIs_Default_PageIsBooleanIndex")
] + [
    ("Products.CMFPlone.tests.testCatalogTool.TestCatalogBugs." + name,
     "zcatalog-internals", _PASTE_REASON)
    for name in ("testCanPasteCatalog",
                 "testPastingCatalogPreservesTextIndexes")
] + [
    ("plone.app.portlets.tests.test_actions_portlet.TestRenderer." + name,
     "fails-on-stock",
     "expects the portal_tabs actions of an older default content set; "
     "with Plone 6.2's fixtures it fails on stock ZCatalog as on "
     "plone.pgcatalog")
    for name in ("test_multiple_portlets", "test_portal_tabs")
] + [
    ("Products.CMFPlone.controlpanel.tests.test_controlpanel_browser_"
     "installer.AddonsControlPanelFunctionalTest."
     "test_addons_controlpanel_install_and_uninstall_all",
     "runner",
     "expects a fresh site to show no Uninstall button in the add-ons "
     "control panel; the runner installs plone.pgcatalog in the fixture, "
     "and an installed add-on rightly offers its uninstall"),
] + [
    ("plone.app.event.tests.test_catalog.TextDXIntegration." + name,
     "zcatalog-internals", _CLASS_NAME_REASON)
    for name in ("test_start_is_DateRecurringIndex",
                 "test_end_is_DateRecurringIndex")
] + [
    ("plone.restapi.tests.test_services_querystringsearch."
     "TestQuerystringSearchEndpoint."
     "test_querystringsearch_should_return_all_results_without_limit",
     "zcatalog-internals",
     "fakes 1,001 results by patching Products.ZCatalog.Catalog.Catalog's "
     "_search_index and __getitem__ with mocks; plone.pgcatalog answers "
     "from PostgreSQL, not through that class, so the patch does nothing "
     "(the behaviour it checks, no default limit, holds: the same endpoint "
     "returns every match in the other tests)"),
]
