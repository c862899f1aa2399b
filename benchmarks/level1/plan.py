"""The deterministic content plan: :class:`Plan` (every entry of a catalog of
``n`` entries, drawn from seeded generators, the same in every process),
its pseudo words and Zipf weights, dates, and the stub class the catalogs
index."""
import array
import random
import time

import numpy
from DateTime import DateTime

from .common import SEED, SITE_ID
from .shape import (BLOCK, DAY, EPOCH_2014, FOLDER_EVERY, ITEM_TYPES,
                    MAX_DEPTH, N_GROUPS, N_TAGS, N_USERS, OBJECT_PROVIDES,
                    ROLES_PRIVATE, SPAN_MINUTES, STATE_WEIGHTS, STATES,
                    TAG_HEADS, TOP_FOLDERS, TYPES, VOCABULARY)


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
            "sortable_title": sortable_title(title),
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
        d = _dates["floor"] = DateTime(1970, 0)
    return d


def _ceiling_date():
    d = _dates.get("ceiling")
    if d is None:
        d = _dates["ceiling"] = DateTime(2500, 0)
    return d


def sortable_title(title):
    """Plone's sortable_title, simplified: lower case, numbers zero-padded
    (so every title here sorts distinctly)."""
    parts = []
    for word in title.lower().split():
        parts.append(word.zfill(8) if word.isdigit() else word)
    return " ".join(parts)


def make_stub_class():
    # Imported here, not at the top: plone.indexer brings CMFCore and more
    # (about a second), and only the _level1_build child needs the stub; the
    # parent imports this module (through queries and report).
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
