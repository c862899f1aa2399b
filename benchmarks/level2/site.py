"""The level2 site in a backend process: the admin user, the Plone site
(plone.distribution "volto", no default content; plus plone.pgcatalog's
profile for that backend), the documents of the plan created one commit
each, the modification phase, and a fingerprint of the content read from
the objects.  Fills the site and content parts of the backend's result."""
import hashlib
import statistics
import time

import transaction
from AccessControl.SecurityManagement import newSecurityManager
from AccessControl.SecurityManagement import noSecurityManager
from Acquisition import aq_base
from DateTime import DateTime
from plone.distribution.api import site as site_api
from Testing.makerequest import makerequest
from zope.component.hooks import setSite
from zope.globalrequest import setRequest

import shared

from .workload import ADMIN
from .workload import DISTRIBUTION
from .workload import PGCATALOG_PROFILE
from .workload import SITE_ID

TRANSITIONS = {"published": ("publish",), "pending": ("submit",),
               "private": ()}


def minutes_to_datetime(minutes):
    return DateTime("2024/01/01 00:00:00 UTC") + minutes / 1440.0


def build_site(db, plan, with_pg, backend, result):
    """Create the site and its content on one connection, logged in as the
    admin; adds ``catalog_class``, ``site_creation``, ``creation``,
    ``modification``, ``content_sha256`` and ``workflow_chain`` to
    ``result``."""
    conn = db.open()
    app = makerequest(conn.root()["Application"])
    setRequest(app.REQUEST)
    app.acl_users.userFolderAddUser(ADMIN, "admin", ["Manager"], [])
    transaction.commit()
    acl = app.acl_users
    newSecurityManager(None, acl.getUser(ADMIN).__of__(acl))

    site = create_site(app, with_pg, backend, result)
    wf = site.portal_workflow
    conn.getTransferCounts(True)
    result["creation"] = create_documents(conn, site, plan)
    shared.log(backend, "created %d docs: %.1f ms/doc (mean), %.1f "
               "stores/doc" % (len(result["creation"]["samples_ms"]),
                               result["creation"]["mean_ms"],
                               result["creation"]["stores_per_doc"]))
    result["modification"] = modify_documents(conn, site, plan)
    shared.log(backend, "modified %d docs: %.1f ms/doc (mean)"
               % (len(result["modification"]["samples_ms"]),
                  result["modification"].get("mean_ms", 0)))
    result["content_sha256"] = fingerprint(site, plan)
    result["workflow_chain"] = list(wf.getChainForPortalType("Document"))

    noSecurityManager()
    setSite(None)
    setRequest(None)
    transaction.abort()
    app.REQUEST.close()
    conn.close()


def create_site(app, with_pg, backend, result):
    """The site from the distribution (then plone.pgcatalog's profile for
    pgcatalog), made the local site; checks which catalog it got."""
    answers = {
        "site_id": SITE_ID,
        "title": "Benchmark Site",
        "description": "plone.pgcatalog level2 benchmark",
        "default_language": "en",
        "portal_timezone": "UTC",
        "setup_content": False,
    }
    t0 = time.perf_counter()
    site_api.create(app, DISTRIBUTION, answers)
    t_site = time.perf_counter() - t0
    site = app[SITE_ID]
    setSite(site)
    t_profile = 0.0
    if with_pg:
        t0 = time.perf_counter()
        site.portal_setup.runAllImportStepsFromProfile(
            "profile-" + PGCATALOG_PROFILE)
        transaction.commit()
        t_profile = time.perf_counter() - t0
    klass = type(aq_base(site.portal_catalog))
    result["catalog_class"] = "%s.%s" % (klass.__module__, klass.__name__)
    result["site_creation"] = {
        "distribution_ms": t_site * 1000,
        "pgcatalog_profile_ms": t_profile * 1000,
        "total_ms": (t_site + t_profile) * 1000,
    }
    shared.log(backend, "site created in %.0f ms (+ profile %.0f ms), "
               "catalog %s" % (t_site * 1000, t_profile * 1000,
                               result["catalog_class"]))
    if with_pg and klass.__module__.startswith("Products.CMFPlone"):
        raise SystemExit("pgcatalog backend: portal_catalog is still %s "
                         "after the profile" % result["catalog_class"])
    return site


def _timed_commits(conn, items, change):
    """``change(item)`` then commit, for each item: the wall time of each
    (ns) and the ZODB loads and stores of each transaction."""
    times, loads, stores = [], [], []
    for item in items:
        t0 = time.perf_counter_ns()
        change(item)
        transaction.commit()
        times.append(time.perf_counter_ns() - t0)
        n_load, n_store = conn.getTransferCounts(True)
        loads.append(n_load)
        stores.append(n_store)
    return times, loads, stores


def create_documents(conn, site, plan):
    """Each document of the plan with its subjects, workflow state and
    dates, one commit each (timed from invokeFactory to the commit's end)."""
    wf = site.portal_workflow

    def create(doc):
        site.invokeFactory("Document", doc["id"], title=doc["title"],
                           description=doc["description"])
        obj = site[doc["id"]]
        obj.setSubject(doc["subjects"])
        for tr in TRANSITIONS[doc["state"]]:
            wf.doActionFor(obj, tr)
        obj.creation_date = minutes_to_datetime(doc["created_min"])
        obj.setModificationDate(minutes_to_datetime(doc["modified_min"]))

    times, loads, stores = _timed_commits(conn, plan["docs"], create)
    return dict(
        shared.stats(times), total_s=sum(times) / 1e9,
        stores_per_doc=statistics.fmean(stores),
        loads_per_doc=statistics.fmean(loads),
        stores_per_doc_median=statistics.median(stores),
        samples_ms=[t / 1e6 for t in times], stores=stores)


def modify_documents(conn, site, plan):
    """The plan's modifications: new title, reindexObject(), commit."""
    def modify(mod):
        obj = site[plan["docs"][mod["index"]]["id"]]
        obj.setTitle(mod["title"])
        obj.reindexObject()
        # reindexObject() stamped "now"; the indexing queue runs at commit,
        # so the deterministic date below is what gets indexed.
        obj.setModificationDate(minutes_to_datetime(mod["modified_min"]))

    times, loads, stores = _timed_commits(conn, plan["mods"], modify)
    return dict(
        shared.stats(times), total_s=sum(times) / 1e9,
        stores_per_doc=statistics.fmean(stores) if stores else 0,
        loads_per_doc=statistics.fmean(loads) if loads else 0,
        samples_ms=[t / 1e6 for t in times])


def fingerprint(site, plan):
    """A digest of the content read from the objects (not the catalog), so
    the parent can check both backends hold the same content."""
    wf = site.portal_workflow
    digest = hashlib.sha256()
    for doc in plan["docs"]:
        obj = site[doc["id"]]
        digest.update(repr((
            obj.getId(), obj.Title(), obj.Description(), obj.Subject(),
            wf.getInfoFor(obj, "review_state"), obj.created().ISO8601(),
            obj.modified().ISO8601())).encode())
    return digest.hexdigest()
