"""Publish catalog names through the real Zope publisher and classify the
answers (used by test_web_surface.py, and runnable to measure stock
CMFPlone against plone.pgcatalog):

    python tests/web_surface_probe.py [stock|pg|both] > table.txt

A request goes through ZPublisher's WSGI publisher with Plone's error
handling (as plone.testing.zope.Browser does), with HTTP basic auth for
the Member and the Manager.  The site has a published and a private
document.  One tab-separated line per request: site, role, method, name
(``probe:`` lines ask for the private document by rid or path), status,
class (see ``classify``), what the request committed (``ENTRIES(a->b)``,
``PG``: catalog rows, ``ZODB``) and ``LEAK`` when the private document's
id, title or subject is in the answer.  About 20,000 requests a site,
a minute or two.
"""
import base64
import re
import sys

import transaction


ROLES = ("Anonymous", "Member", "Manager")
#: plone.protect's authenticator in a rendered form
AUTHENTICATOR = re.compile(r'name="_authenticator"\s+value="([0-9a-f]+)"')
MEMBER = ("web-member", "member-secret-1")
MANAGER = ("web-manager", "manager-secret-1")
PRIVATE_ID = "private-secret-doc"
PRIVATE_TITLE = "Hushhush Zanzibar"
PUBLIC_ID = "public-doc"

#: an index of every kind Plone uses (name in a stock Plone 6.2 site)
INDEX_KINDS = {
    "FieldIndex": "portal_type",
    "KeywordIndex": "Subject",
    "BooleanIndex": "is_folderish",
    "UUIDIndex": "UID",
    "DateIndex": "modified",
    "DateRangeIndex": "effectiveRange",
    "DateRecurringIndex": "start",
    "ExtendedPathIndex": "path",
    "ZCTextIndex": "SearchableText",
    "GopipIndex": "getObjPositionInParent",
}


def setup_content(portal):
    """A published and a private document, a Member and a Manager
    (committed)."""
    from plone.app.testing import login
    from plone.app.testing import setRoles
    from plone.app.testing import TEST_USER_ID
    from plone.app.testing import TEST_USER_NAME
    setRoles(portal, TEST_USER_ID, ["Manager"])
    login(portal, TEST_USER_NAME)
    wf = portal.portal_workflow
    wf.setChainForPortalTypes(["Document", "Folder"],
                              "simple_publication_workflow")
    portal.invokeFactory("Document", PUBLIC_ID, title="Open Document")
    wf.doActionFor(portal[PUBLIC_ID], "publish")
    portal.invokeFactory("Document", PRIVATE_ID, title=PRIVATE_TITLE,
                         subject=("Hushhush",))
    acl = portal.acl_users
    acl.userFolderAddUser(MEMBER[0], MEMBER[1], ["Member"], [])
    acl.userFolderAddUser(MANAGER[0], MANAGER[1], ["Manager"], [])
    setRoles(portal, TEST_USER_ID, ["Member"])
    transaction.commit()


class _Errors:
    handleErrors = True


def make_client(app):
    from plone.testing._z2_testbrowser import Zope2Caller
    from webtest import TestApp
    return TestApp(Zope2Caller(_Errors(), app))


def auth_header(role):
    if role == "Anonymous":
        return {}
    user, password = MEMBER if role == "Member" else MANAGER
    token = base64.b64encode(("%s:%s" % (user, password)).encode()).decode()
    return {"HTTP_AUTHORIZATION": "Basic " + token}


def request(client, method, path, role, params=None):
    """``(status, location, body)`` of one request."""
    environ = auth_header(role)
    if method == "GET":
        response = client.get(path, params=params or {}, extra_environ=environ,
                              expect_errors=True)
    else:
        response = client.post(path, params=params or {},
                               extra_environ=environ, expect_errors=True)
    transaction.abort()  # the test's connection sees the request's commit
    return (response.status_int, response.headers.get("Location", ""),
            response.body.decode("utf-8", "replace"))


def classify(status, location):
    """'ok' (the name was reached and answered or failed by itself: 2xx,
    other redirects, 400 missing arguments, 500), 'denied' (401, 403, a
    redirect to the login form), 'notfound' (404), 'confirm' (plone.protect
    aborted the transaction and asks for confirmation)."""
    if status in (401, 403):
        return "denied"
    if status == 404:
        return "notfound"
    if status in (301, 302, 303, 307):
        if "require_login" in location or "login_form" in location \
                or "/login" in location:
            return "denied"
        if "@@confirm-action" in location:
            return "confirm"
    return "ok"


def public_names(*classes):
    names = set()
    for klass in classes:
        names.update(n for n in dir(klass) if not n.startswith("_"))
    return sorted(names)


def tool_names():
    from Products.CMFPlone.CatalogTool import CatalogTool
    from plone.pgcatalog.tool import PGCatalogTool
    return public_names(CatalogTool, PGCatalogTool) + ["__call__"]


#: the stock class of each index kind
STOCK_INDEX_CLASSES = {
    "FieldIndex": "Products.PluginIndexes.FieldIndex.FieldIndex.FieldIndex",
    "KeywordIndex":
        "Products.PluginIndexes.KeywordIndex.KeywordIndex.KeywordIndex",
    "BooleanIndex":
        "Products.PluginIndexes.BooleanIndex.BooleanIndex.BooleanIndex",
    "UUIDIndex": "Products.PluginIndexes.UUIDIndex.UUIDIndex.UUIDIndex",
    "DateIndex": "Products.PluginIndexes.DateIndex.DateIndex.DateIndex",
    "DateRangeIndex":
        "Products.PluginIndexes.DateRangeIndex.DateRangeIndex.DateRangeIndex",
    "DateRecurringIndex":
        "Products.DateRecurringIndex.index.DateRecurringIndex",
    "ExtendedPathIndex":
        "Products.ExtendedPathIndex.ExtendedPathIndex.ExtendedPathIndex",
    "ZCTextIndex": "Products.ZCTextIndex.ZCTextIndex.ZCTextIndex",
    "GopipIndex": "plone.folder.nogopip.GopipIndex",
}


def index_names(kind):
    """Public names of the stock class and of ours for index kind ``kind``."""
    from plone.pgcatalog.indexes import kind_for
    from zope.dottedname.resolve import resolve
    return public_names(resolve(STOCK_INDEX_CLASSES[kind]), kind_for(kind))


def url(name, index=None):
    if index is not None:
        return ("/plone/portal_catalog/Indexes/%s/%s" % (index, name)).rstrip(
            "/")
    if name == "__call__":
        return "/plone/portal_catalog"
    return "/plone/portal_catalog/" + name


def leak_probes(portal):
    """``(label, path, params)`` asking for the private document."""
    catalog = portal.portal_catalog
    path = "/plone/" + PRIVATE_ID
    rid = catalog.getrid(path)
    return [
        ("getpath?rid", url("getpath"), {"rid:int": rid}),
        ("getrid?path", url("getrid"), {"path": path}),
        ("getobject?rid", url("getobject"), {"rid:int": rid}),
        ("getMetadataForRID", url("getMetadataForRID"), {"rid:int": rid}),
        ("getIndexDataForRID", url("getIndexDataForRID"), {"rid:int": rid}),
        ("getMetadataForUID", url("getMetadataForUID"), {"uid": path}),
        ("getIndexDataForUID", url("getIndexDataForUID"), {"uid": path}),
        ("searchResults?id", url("searchResults"), {"id": PRIVATE_ID}),
        ("__call__?id", url("__call__"), {"id": PRIVATE_ID}),
        ("search?query", url("search"), {"query.id:record": PRIVATE_ID}),
        ("uniqueValuesFor?id", url("uniqueValuesFor"), {"name": "id"}),
        ("resolve_path", url("resolve_path"), {"path": path}),
        ("Indexes/id/uniqueValues", url("uniqueValues", "id"), {}),
        ("Indexes/Subject/uniqueValues", url("uniqueValues", "Subject"), {}),
        ("Indexes/id/getEntryForObject",
         url("getEntryForObject", "id"), {"documentId:int": rid}),
        ("Indexes/id/keyForDocument", url("keyForDocument", "id"),
         {"id:int": rid}),
    ]


def leaks(body):
    return PRIVATE_ID in body or PRIVATE_TITLE in body or "Hushhush" in body


# ----------------------------------------------------------------------
# measuring
# ----------------------------------------------------------------------
def _setup_layer(layer, done):
    for base in layer.__bases__:
        _setup_layer(base, done)
    if layer not in done:
        layer.setUp()
        done.append(layer)


def _resolution(layer, out):
    for base in layer.__bases__:
        _resolution(base, out)
    if layer not in out:
        out.append(layer)
    return out


def _entries(portal):
    catalog = portal.portal_catalog
    return len(catalog)


def _targets():
    targets = [(None, n) for n in tool_names()]
    for kind, index in INDEX_KINDS.items():
        targets.append((index, ""))  # the index object itself
        targets.extend((index, n) for n in index_names(kind))
    # WebDAV's DELETE answers GET too: in a stock site a Manager's DELETE of
    # an index leaves the connection's catalog without it even when nothing
    # is committed (a plain dict is not restored): ask it last, start afresh
    # after it
    return sorted(targets, key=lambda t: t[1] == "DELETE")


def measure(layer, label, out):
    """Every target, GET and POST, each role.  Each role and method starts
    from a fresh functional test (a fresh ZODB, the catalog rows restored),
    and so does the rest of a run after a request that committed anything
    (a ZODB transaction, or catalog rows in PostgreSQL), so that no answer
    depends on what an earlier request did."""
    done = []
    _setup_layer(layer, done)
    pg = label == "pg"
    if pg:
        from plone.pgcatalog.testing import snapshot
    layers = _resolution(layer, [])
    state = {}

    def start():
        for each in layers:
            if hasattr(each, "testSetUp"):
                each.testSetUp()
        app, portal = layer["app"], layer["portal"]
        setup_content(portal)
        state.update(app=app, portal=portal, client=make_client(app),
                     clean=snapshot() if pg else None,
                     entries=_entries(portal),
                     tid=app._p_jar.db().lastTransaction())

    def stop():
        for each in reversed(layers):
            if hasattr(each, "testTearDown"):
                each.testTearDown()

    def write(role, method, where, status, location, changed, body):
        out.write("%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n" % (
            label, role, method, where, status, classify(status, location),
            changed, "LEAK" if leaks(body) else ""))

    targets = _targets()
    try:
        for role in ROLES:
            for method in ("GET", "POST"):
                start()
                try:
                    if method == "GET":
                        for probe, path, params in leak_probes(
                                state["portal"]):
                            status, location, body = request(
                                state["client"], "GET", path, role, params)
                            write(role, "GET", "probe:" + probe, status,
                                  location, "", body)
                    for index, name in targets:
                        status, location, body = request(
                            state["client"], method, url(name, index), role)
                        changed = []
                        portal = state["portal"]
                        now = _entries(portal)
                        if now != state["entries"]:
                            changed.append("ENTRIES(%d->%d)" % (
                                state["entries"], now))
                        if pg and snapshot() != state["clean"]:
                            changed.append("PG")
                        db = state["app"]._p_jar.db()
                        if db.lastTransaction() != state["tid"]:
                            changed.append("ZODB")
                        where = ("Indexes/%s/%s" % (index, name) if index
                                 else name)
                        write(role, method, where, status, location,
                              ",".join(changed), body)
                        if changed or name == "DELETE":
                            stop()
                            start()
                    out.flush()
                finally:
                    stop()
    finally:
        for each in reversed(done):
            each.tearDown()


def main(which):
    out = sys.stdout
    if which in ("stock", "both"):
        from plone.app.testing import PLONE_FUNCTIONAL_TESTING
        measure(PLONE_FUNCTIONAL_TESTING, "stock", out)
    if which in ("pg", "both"):
        from plone.pgcatalog.testing import PGCATALOG_FUNCTIONAL_TESTING
        measure(PGCATALOG_FUNCTIONAL_TESTING, "pg", out)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "both")
