"""Helpers of the differential suite (tests/test_differential.py).

* :func:`build_content` creates a deterministic Plone content tree (folders
  several levels deep, documents, news items, events with recurrence, real
  workflow states, local roles, accents and punctuation, odd ids, moves,
  renames, copies, deletes and reorders).
* :func:`build_reference` puts a *stock* ZCatalog-based
  ``Products.CMFPlone.CatalogTool.CatalogTool`` beside portal_catalog (not
  registered as the ICatalogTool utility), configured like portal_catalog
  (same lexicon pipelines, index kinds and options, columns) and catalogues
  every path portal_catalog holds.
* :class:`QueryGenerator` produces the queries (deterministic, seeded).
* :func:`compare` runs one query through both catalogs and describes the
  mismatch, if any.
"""
import datetime
import random
import types

import pytz
import transaction
from Acquisition import aq_base
from DateTime import DateTime
from plone.app.textfield.value import RichTextValue
from Products.CMFCore.indexing import processQueue


SEED = 20240615
REF_ID = "zcatalog_ref"
USERS = ("bob", "alice")  # Members, with local Reader roles here and there
WF_TYPES = ["Document", "Folder", "News Item", "Event"]

# Dates are fixed (never "now") so that every run builds the same catalog.
BASE = DateTime("2024/03/15 10:30:00 UTC")
FAR_FUTURE = DateTime("2099/06/01 12:00:00 UTC")

WORDS = [
    "plone", "python", "zope", "catalog", "café", "élève", "naïve", "über",
    "straße", "garçon", "index", "query", "search", "postgres", "relevance",
    "brown", "brownie", "browse", "fox", "jumps", "lazy", "dog", "quick",
    "árvíztűrő", "tükörfúrógép", "Ünïcödé", "año", "niño", "x_ray", "e-mail",
    "3d", "2024", "v1.2", "foo-bar", "don't", "rock&roll", "c++", "a/b",
    "日本語", "emoji", "alpha", "beta", "gamma", "delta", "omega", "sigma",
]
SUBJECTS = [
    "Python", "Plone", "python", "Zope", "Café", "cafe", "News", "Events",
    "Ünïcödé", "Alpha Beta", "alpha", "x-y", "x_y", "2024", "Z", "",
]
TIMEZONES = ["UTC", "Europe/Berlin", "America/New_York", "Asia/Tokyo"]


def _text(rng, n):
    return " ".join(rng.choice(WORDS) for _ in range(n))


def _title(rng, n):
    words = [rng.choice(WORDS) for _ in range(rng.randint(1, 4))]
    if rng.random() < 0.3:
        words[0] = words[0].capitalize()
    punct = rng.choice(["", "", "", "!", "?", ":", " -", ",", "."])
    return "%s %d%s" % (" ".join(words), n, punct)


def _date(rng, spread_days=900, base=BASE):
    # minutes and seconds vary: DateIndex drops seconds
    return base + rng.randint(-spread_days, spread_days) + \
        rng.randint(0, 24 * 3600 - 1) / 86400.0


def _odd_id(rng, n):
    stems = ["doc", "page", "x_y", "xay", "x-y", "item", "a b", "file.txt",
             "n%d" % n, "(paren)", "tilde~", "hash#1", "at@x", "dollar$",
             "comma,1", "Upper", "upper", "ünïcode"]
    return "%s-%d" % (rng.choice(stems), n)


def _create(container, portal_type, oid, rng, n, **extra):
    kw = dict(
        title=_title(rng, n),
        description=_text(rng, rng.randint(0, 8)),
    )
    subjects = tuple(sorted({rng.choice(SUBJECTS)
                             for _ in range(rng.randint(0, 3))} - {""}))
    if subjects:
        kw["subject"] = subjects
    kw.update(extra)
    oid = container.invokeFactory(portal_type, oid, **kw)
    return container[oid]


def build_content(portal, seed=SEED):
    """Create the content tree; returns a list of the content objects
    created (some later moved, renamed or deleted)."""
    rng = random.Random(seed)
    wf = portal.portal_workflow
    wf.setChainForPortalTypes(WF_TYPES, "simple_publication_workflow")
    # no CMFEditions versions (irrelevant here, and they cost set-up time)
    portal.portal_repository.setVersionableContentTypes([])

    counter = [0]

    def next_n():
        counter[0] += 1
        return counter[0]

    folders = [portal]
    # ids whose prefixes collide ('folder', 'folder2', 'folder-2') and
    # LIKE wildcards ('x_y' vs 'xay')
    for oid in ["folder", "folder2", "folder-2", "x_y", "xay", "news",
                "events", "Archiv 2023"]:
        folders.append(_create(portal, "Folder", oid, rng, next_n()))
    # deeper folders: up to 6 levels
    for _ in range(30):
        parent = rng.choice(folders)
        depth = len(parent.getPhysicalPath())
        if depth > 7:
            continue
        oid = rng.choice(["sub", "level", "f", "x_y", "xay", "section"]) + \
            rng.choice(["", "-", "_"]) + str(next_n())
        folders.append(_create(parent, "Folder", oid, rng, counter[0]))

    items = []
    for _ in range(150):
        n = next_n()
        parent = rng.choice(folders)
        kind = rng.choice(["Document", "Document", "Document", "News Item",
                           "Event", "Event"])
        oid = _odd_id(rng, n)
        extra = {}
        if kind == "Event":
            tz = pytz.timezone(rng.choice(TIMEZONES))
            start = tz.localize(datetime.datetime(2024, 1, 1, 8, 0)
                                + datetime.timedelta(
                                    days=rng.randint(-400, 400),
                                    minutes=rng.randint(0, 600),
                                    seconds=rng.randint(0, 59)))
            end = start + datetime.timedelta(hours=rng.randint(0, 50),
                                             minutes=rng.randint(0, 59))
            extra.update(start=start, end=end)
            if rng.random() < 0.35:
                extra["recurrence"] = rng.choice([
                    "RRULE:FREQ=WEEKLY;COUNT=3",
                    "RRULE:FREQ=DAILY;COUNT=5",
                    "RRULE:FREQ=MONTHLY;COUNT=2"])
        if kind in ("Document", "News Item") and rng.random() < 0.3:
            extra["text"] = RichTextValue(
                "<p>%s</p><p>%s</p>" % (_text(rng, 12), _text(rng, 5)),
                "text/html", "text/x-html-safe")
        obj = _create(parent, kind, oid, rng, n, **extra)
        items.append(obj)

    everything = folders[1:] + items
    for obj in everything:
        r = rng.random()
        if r < 0.45:
            wf.doActionFor(obj, "publish")
        elif r < 0.6:
            wf.doActionFor(obj, "submit")
        if rng.random() < 0.2:
            obj.exclude_from_nav = True
            obj.reindexObject(idxs=["exclude_from_nav"])
        if rng.random() < 0.08:
            obj.manage_setLocalRoles(rng.choice(["bob", "alice"]),
                                     ["Reader"])
            obj.reindexObjectSecurity()

    # default pages
    for folder in folders[1:6]:
        docs = [o for o in folder.objectValues()
                if o.portal_type == "Document"]
        if docs:
            folder.setDefaultPage(docs[0].getId())
            docs[0].reindexObject()

    # renames, moves, copies, deletes, reorders (cut/paste needs a savepoint)
    transaction.savepoint(optimistic=True)
    for obj in rng.sample(items, 8):
        parent = obj.__parent__
        new_id = "renamed_" + obj.getId()
        parent.manage_renameObject(obj.getId(), new_id)
    transaction.savepoint(optimistic=True)
    movable = [f for f in folders[9:] if f.__parent__ is not portal]
    for folder in rng.sample(movable, 3):
        target = rng.choice(folders[1:4])
        if "/".join(target.getPhysicalPath()).startswith(
                "/".join(folder.getPhysicalPath())):
            continue
        parent = folder.__parent__
        cp = parent.manage_cutObjects([folder.getId()])
        target.manage_pasteObjects(cp)
        transaction.savepoint(optimistic=True)
    source = portal["folder"]
    cp = portal.manage_copyObjects(["news"])
    source.manage_pasteObjects(cp)
    transaction.savepoint(optimistic=True)
    # Flush the index queue before deleting.  Without it, CMFCore's queue
    # optimisation leaves entries behind for a folder that was created, moved
    # and then deleted in one transaction (reproduced with a stock ZCatalog:
    # both catalogs keep the moved folder's old paths; plone.pgcatalog
    # mirrors ZCatalog here).  The reference is built from our catalog's
    # paths, so every entry must still resolve to an object.
    from Products.CMFCore.indexing import processQueue
    processQueue()
    # delete a few items (and one folder with its subtree)
    alive = [o for o in _walk(portal) if o.portal_type != "Folder"]
    for obj in rng.sample(alive, 6):
        obj.__parent__.manage_delObjects([obj.getId()])
    subfolders = [o for o in _walk(portal) if o.portal_type == "Folder"
                  and len(o.getPhysicalPath()) > 3]
    victim = rng.choice(subfolders)
    victim.__parent__.manage_delObjects([victim.getId()])
    # reorder folders
    for folder in [o for o in _walk(portal) if o.portal_type == "Folder"]:
        ids = list(folder.objectIds())
        if len(ids) > 2:
            folder.moveObjectsByDelta([ids[-1]], -len(ids))
            folder.moveObjectsByDelta(rng.sample(ids, 2), rng.randint(-3, 3))
    portal.moveObjectsToTop(["xay"])

    # fixed dates on everything (last: a full reindex sets modified=now)
    for obj in _walk(portal):
        created = _date(rng)
        obj.creation_date = created
        obj.modification_date = created + rng.randint(0, 300) + \
            rng.random()
        r = rng.random()
        if r < 0.15:
            obj.effective_date = None
        elif r < 0.75:
            obj.effective_date = _date(rng)
        else:
            obj.effective_date = _date(rng, 200, FAR_FUTURE)
        r = rng.random()
        if r < 0.7:
            obj.expiration_date = None
        elif r < 0.85:
            obj.expiration_date = _date(rng)
        else:
            obj.expiration_date = _date(rng, 200, FAR_FUTURE)
        obj.reindexObject(idxs=["created", "modified", "effective",
                                "expires", "effectiveRange", "Date"])
    processQueue()
    return everything


def _walk(container):
    for obj in container.objectValues():
        if getattr(aq_base(obj), "portal_type", None) not in WF_TYPES:
            continue
        yield obj
        if obj.portal_type == "Folder":
            yield from _walk(obj)


# -- the reference ZCatalog --------------------------------------------------

def _original_class(index):
    return [k for k in type(aq_base(index)).__mro__
            if getattr(k, "meta_type", None) == index.meta_type
            and not k.__module__.startswith("plone.pgcatalog")][0]


def _extra(index):
    """The ``extra`` record the stock constructor wants, from the
    configuration carried by plone.pgcatalog's index."""
    idx = aq_base(index)
    mt = idx.meta_type
    if mt == "ZCTextIndex":
        return types.SimpleNamespace(
            doc_attr=",".join(idx._indexed_attrs),
            lexicon_id=idx.lexicon_id, index_type=idx._index_type)
    if mt == "DateRangeIndex":
        return types.SimpleNamespace(
            since_field=idx._since_field, until_field=idx._until_field,
            floor_value=getattr(idx, "floor_value", None),
            ceiling_value=getattr(idx, "ceiling_value", None),
            precision_value=getattr(idx, "precision_value", None))
    if mt == "DateRecurringIndex":
        return types.SimpleNamespace(recurdef=idx.attr_recurdef,
                                     until=idx.attr_until)
    if mt in ("ExtendedPathIndex", "GopipIndex"):
        attrs = idx.__dict__.get("indexed_attrs")
        return types.SimpleNamespace(
            indexed_attrs=",".join(attrs) if attrs else None)
    extra = types.SimpleNamespace(
        indexed_attrs=",".join(idx.getIndexSourceNames()))
    if mt == "DateIndex":
        extra.index_naive_time_as_local = idx.index_naive_time_as_local
        extra.precision = idx.precision
    return extra


def build_reference(portal, ref_id=REF_ID):
    """A stock ZCatalog (CMFPlone CatalogTool) configured like
    portal_catalog, holding every path portal_catalog holds."""
    from Products.CMFPlone.CatalogTool import CatalogTool
    from Products.ZCatalog.ZCatalog import ZCatalog
    from Products.ZCTextIndex.ZCTextIndex import PLexicon

    pg = portal.portal_catalog
    ref = CatalogTool()
    ref.id = ref_id
    # lexicons: same pipelines (as setuphandlers._copy_lexicons, reversed)
    for oid, lex in pg.objectItems():
        lex = aq_base(lex)
        if lex.meta_type == "ZCTextIndex Lexicon":
            ref._setObject(oid, PLexicon(oid, lex.title,
                                         *list(lex._pipeline)),
                           suppress_events=True)
    # set_owner=0: the creator would own it and, as Owner, get "Access
    # inactive portal content" on it (searchResults' allow_inactive)
    portal._setObject(ref_id, ref, set_owner=0, suppress_events=True)
    ref = portal[ref_id]
    for name in pg.indexes():
        index = pg._catalog.getIndex(name)
        klass = _original_class(index)
        if index.meta_type == "GopipIndex":
            fresh = klass(name, caller=ref)
        else:
            fresh = klass(name, extra=_extra(index), caller=ref)
            if index.meta_type == "DateIndex":
                # constructors of some versions ignore these extras
                fresh.index_naive_time_as_local = \
                    aq_base(index).index_naive_time_as_local
                fresh.precision = aq_base(index).precision
        ZCatalog.addIndex(ref, name, fresh)
    for name in pg._catalog.names:
        ZCatalog.addColumn(ref, name)
    processQueue()
    root = portal.getPhysicalRoot()
    # ZCatalog numbers records from a random start and jumps to another
    # random number at every multiple of 4,000: starting at 1, the ~200
    # records here get increasing rids in the order they are catalogued —
    # pgcatalog's rid order (an unsorted search answers in it) — so ties
    # of sorted answers are comparable exactly (test_differential).
    ref._catalog._v_nextid = 1
    for brain in pg.unrestrictedSearchResults(path="/"):
        path = brain.getPath()
        obj = root.unrestrictedTraverse(path)
        ref.catalog_object(obj, path)
    return ref
