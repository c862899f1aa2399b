"""Verify a catalog against the ZODB, and repair it on request.

Two passes, each in batches of ``batch`` (bounded memory: one batch of rows
and objects at a time, the ZODB cache trimmed after each batch):

1. The catalog's entries, in rid order (keyset paging): each path is
   resolved.  Nothing there: ``orphan``.  An object ``clearFindAndRebuild``
   would not index, or one catalogued under another UID: ``stale_entry``.
   Otherwise its index values and metadata are computed now, as
   ``catalog_object`` would (``extract.py``), and compared with the stored
   ones in their stored (encoded) form: ``stale_value`` names the indexes
   that differ, ``stale_metadata`` the columns.  An entry whose hot row
   (``hot.py``: kept by a trigger, so only a manual change of the tables
   makes one differ) is not what its stored values make is
   ``stale_hot``; its repair computes the hot row again.  So are a key
   set whose counts do not add up (``set:N``), a hot row without an entry
   (``rid:N``) and a word of the text rows missing from the lexicon
   (``word:W``: a glob would miss its documents).
2. The site, walked as an online rebuild walks it (``walk.objects``:
   what ``clearFindAndRebuild`` would index): an object it would index
   that has no entry is ``missing``.

Equal values compare equal: index values are compared as the JSON the
writer stores (numbers by value, so ``jsonb``'s normalization of ``1e20``
or ``1.50`` does not count, booleans strictly; keyword lists as multisets,
without plone.dexterity's generated schema names: ``VOLATILE_PREFIXES``),
text index values by
PostgreSQL as ``tsvector`` values, metadata as encoded JSON, falling back
to the decoded values' equality when the encodings differ (a pickle of an
equal value, a DateTime of the same instant in another zone).

``values=False`` (the command's ``--quick``) skips the comparison of
values: only ``orphan``, ``missing`` and ``stale_entry`` are looked for, and
no indexer runs but the UID's (the cost of computing every index value and
metadata column is most of a full verification's).

Repair (``repair=True``): ``orphan`` and a ``stale_entry`` whose object is
not to be indexed are uncatalogued, everything else is reindexed in full
(``catalog_object(obj, path)``) — what ``clearFindAndRebuild`` would have
made of them, without clearing first.  A repair makes the ZODB commit fail
(ConflictError) if a repaired object changed since it was read
(``read_current``); with ``fresh`` (the command gives ``transaction.abort``),
each batch's differences are looked at again in a new transaction before
they are repaired, so a verification running beside a live site does not
undo what the site committed meanwhile (the two snapshots of a transaction
are taken a moment apart).  Up to ``repair_limit`` entries (None:
all); the rest are counted in ``Report.unrepaired``.  Repeating a repair is
harmless: a second run finds nothing to do.  ``on_batch()`` runs after each
batch's repairs (the command line commits there).

See docs/verify.md.
"""
import orjson
from Acquisition import aq_base
from Products.CMFCore.indexing import processQueue
from ZODB.POSException import ConflictError

from plone.pgcatalog import extract
from plone.pgcatalog import logger
from plone.pgcatalog.codec import core as codec
from plone.pgcatalog.ops import verifystore
from plone.pgcatalog.ops.verifyreport import DEFAULT_SAMPLE
from plone.pgcatalog.ops.verifyreport import Report
from plone.pgcatalog.ops.walk import not_indexed_reason
from plone.pgcatalog.ops.walk import objects
from plone.pgcatalog.ops.walk import physical_path
from plone.pgcatalog.ops.walk import portal_of
from plone.pgcatalog.ops.walk import resolve
from plone.pgcatalog.pg import hot
from plone.pgcatalog.pg import lists
from plone.pgcatalog.pg import textstats

DEFAULT_BATCH = 500
#: the index holding an entry's identity (Plone's UUIDIndex)
UID_INDEX = "UID"

#: members of keyword values that differ between processes for the same
#: object and are never searched for: the dotted names of plone.dexterity's
#: generated schema interfaces (``object_provides``) carry the FTI's
#: modification stamp as the indexing process saw it (``plone_0_Document``
#: in the process that made the type, ``plone_5_<stamp>_..._Document`` in
#: every other)
VOLATILE_PREFIXES = ("plone.dexterity.schema.generated.",)

REINDEX = "reindex"
UNCATALOG = "uncatalog"
#: the entry is right, its hot row (hot.py) is not: computed again
HOT = "hot"
#: hot rows without an entry looked for (and dropped by a repair) per run
HOT_ORPHANS_MAX = 10000
_ABSENT = object()


def same(a, b):
    """JSON values ``a`` and ``b`` are equal as the catalog stores them:
    numbers by value (``jsonb`` prints ``1e20`` as an integer), booleans
    only as booleans, arrays and objects member by member."""
    if type(a) is bool or type(b) is bool:
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if type(a) is list and type(b) is list:
        return len(a) == len(b) and all(map(same, a, b))
    if type(a) is dict and type(b) is dict:
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def _canonical(value):
    """``value`` (JSON) as comparable text: integral floats as integers
    (what ``jsonb`` prints), object keys sorted."""
    def norm(v):
        if type(v) is float and v.is_integer() and abs(v) < 2 ** 63:
            return int(v)
        if type(v) is list:
            return [norm(x) for x in v]
        if type(v) is dict:
            return {k: norm(x) for k, x in v.items()}
        return v
    return orjson.dumps(norm(value), option=orjson.OPT_SORT_KEYS)


def _volatile(value):
    return type(value) is str and value.startswith(VOLATILE_PREFIXES)


def same_value(multi, stored, computed):
    """Index values equal: a multi-valued index's lists (KeywordIndex: a
    set's order, which differs between processes) as multisets, without
    the volatile members (see VOLATILE_PREFIXES)."""
    if multi and type(stored) is list and type(computed) is list:
        return (sorted(_canonical(v) for v in stored if not _volatile(v))
                == sorted(_canonical(v) for v in computed
                          if not _volatile(v)))
    return same(stored, computed)


def same_column(stored, computed):
    """Metadata values equal: encoded, else decoded."""
    if same(stored, computed):
        return True
    if stored is _ABSENT or computed is _ABSENT:
        return False
    try:
        return codec.decode(stored) == codec.decode(computed)
    except ConflictError:
        raise
    except Exception:  # an undecodable stored value is a difference
        return False


def read_current(obj):
    """Have the ZODB commit fail with a ConflictError if ``obj`` changed
    since this transaction read it: a repair writes the catalog from the
    object's state, and no ZODB write of ours would conflict otherwise."""
    base = aq_base(obj)
    jar = getattr(base, "_p_jar", None)
    if jar is None or getattr(base, "_p_oid", None) is None:
        return
    jar.readCurrent(base)
    # readCurrent is checked by a connection taking part in the commit;
    # without a ZODB write of its own it joins here (Connection._register
    # joins without registering an object when given none)
    jar._register()


class Verifier:
    """One verification of ``catalog`` (see the module docstring)."""

    def __init__(self, catalog, batch=DEFAULT_BATCH, repair=False,
                 repair_limit=None, sample=DEFAULT_SAMPLE,
                 on_difference=None, on_batch=None, progress=None,
                 values=True, fresh=None):
        batch = int(batch)
        if batch < 1:
            raise ValueError("batch must be at least 1, not %r" % batch)
        if repair_limit is not None and int(repair_limit) < 0:
            raise ValueError("repair_limit must not be negative")
        self.catalog = catalog
        self.batch = batch
        self.repair_limit = repair_limit
        self.on_difference = on_difference
        self.on_batch = on_batch
        self.progress = progress
        #: compare index values and metadata (False: orphans, missing and
        #: stale entries only, much faster: no indexer runs but the UID's)
        self.values = values
        #: starts a new transaction before a batch's repairs, which are
        #: then confirmed in it (see _confirm); None: repair what was found
        self.fresh = fresh
        self.report = Report(sample, repair)
        self.config = catalog._catalog
        #: digest -> long keyword list (lists.py), as read so far
        self.long_lists = {}
        self.portal = portal_of(catalog)
        self.portal_path = physical_path(self.portal)
        self.root = catalog.getPhysicalRoot()

    def run(self):
        processQueue()  # CMFCore's queued (re)indexing goes first
        self.check_entries()
        self.check_hot_orphans()
        self.check_hot_counts()
        self.check_lexicon()
        self.check_text_totals()
        self.find_missing()
        return self.report.finish()

    # -- differences and repairs ---------------------------------------------
    def _confirm(self, todo):
        """The repairs of ``todo`` a fresh look still wants: ``fresh()``
        starts a new transaction (the command aborts the batch's), whose
        ZODB and catalog snapshots both see what committed while the batch
        was checked (an object created after the batch's ZODB snapshot but
        catalogued before its PostgreSQL one is no orphan)."""
        self.fresh()
        store = self.catalog._pgc_store()
        entries = verifystore.entries_at(store, list(todo))
        wanted = {}
        note = self._noter(wanted, False)
        self._check_batch(store, entries, note)
        stored = {entry.path for entry in entries}
        for path in todo:
            if path in stored:
                continue
            obj = resolve(self.root, path)
            if obj is not None and not_indexed_reason(
                    obj, self.catalog, self.portal_path) is None:
                note("missing", path, "", REINDEX, obj)
        skipped = len(todo) - len(wanted)
        if skipped:
            logger.info("verify: %d differences gone when confirmed (changed "
                        "meanwhile)", skipped)
        return wanted

    def _repair(self, todo):
        report = self.report
        for path, (action, obj) in todo.items():
            if not report.repair or (self.repair_limit is not None
                                     and report.repaired >= self.repair_limit):
                report.unrepaired += 1
                continue
            try:
                if action == UNCATALOG:
                    self.catalog.uncatalog_object(path)
                elif action == HOT:
                    store = self.catalog._pgc_store()
                    hot.refresh(store.session, store.cid, [obj])
                else:
                    # buffered only once every value is computed: a failing
                    # indexer leaves the entry as it was
                    self.catalog.catalog_object(obj, path)
                    read_current(obj)
            except ConflictError:
                raise
            except Exception as exc:
                logger.exception("verify: cannot repair %s", path)
                report.add_error(path, "repair: %s: %s"
                                 % (type(exc).__name__, exc))
                report.unrepaired += 1
                continue
            report.repaired += 1

    def _end_batch(self, phase, todo):
        if todo and self.report.repair and self.fresh is not None:
            todo = self._confirm(todo)
        self._repair(todo)
        if self.on_batch is not None:
            self.on_batch()
        jar = self.catalog._p_jar
        if jar is not None:
            jar.cacheGC()
        if self.progress is not None:
            self.progress(phase, self.report)

    # -- pass 1: the catalog's entries ----------------------------------------
    def check_entries(self):
        after = None
        while True:
            store = self.catalog._pgc_store()
            entries = verifystore.entries_after(store, after, self.batch)
            if not entries:
                return
            after = entries[-1].rid
            todo = {}
            self.report.entries += len(entries)
            self._check_batch(store, entries, self._noter(todo, True))
            self._end_batch("entries", todo)

    def check_hot_orphans(self):
        """Hot rows without an entry (``stale_hot``, named ``rid:N``):
        dropped by a repair."""
        store = self.catalog._pgc_store()
        rids = verifystore.hot_orphans(store, HOT_ORPHANS_MAX)
        for rid in rids:
            self.report.add("stale_hot", "rid:%d" % rid,
                            "hot row without an entry")
        if rids and self.report.repair:
            hot.refresh(store.session, store.cid, rids)
            self.report.repaired += len(rids)
            if self.on_batch is not None:
                self.on_batch()
        elif rids:
            self.report.unrepaired += len(rids)

    def check_hot_counts(self):
        """Key sets whose counts, or whose free keys' counts, do not add up
        to their hot rows (``stale_hot``, named ``set:N``): counted again
        by a repair."""
        store = self.catalog._pgc_store()
        wrong = verifystore.hot_count_mismatches(store, HOT_ORPHANS_MAX)
        for sid, cls, counted, rows in wrong:
            self.report.add("stale_hot", "set:%d" % sid,
                            "range class %d: counted %d, %d rows"
                            % (cls, counted, rows))
        # the free keys' counts per set (schema version 4)
        keys = verifystore.key_count_mismatches(store, HOT_ORPHANS_MAX)
        for sid, cls, key, counted, rows in keys:
            self.report.add("stale_hot", "set:%d" % sid,
                            "range class %d, free key %r: counted %d, %d "
                            "rows" % (cls, key, counted, rows))
        wrong = wrong + keys
        if wrong and self.report.repair:
            hot.recount(store.session, store.cid)
            self.report.repaired += len(wrong)
            if self.on_batch is not None:
                self.on_batch()
        elif wrong:
            self.report.unrepaired += len(wrong)

    def check_lexicon(self):
        """Words of the text rows missing from the lexicon (``stale_hot``,
        named ``word:W``; a glob would miss their documents): added by a
        repair."""
        store = self.catalog._pgc_store()
        words = verifystore.missing_words(store, HOT_ORPHANS_MAX)
        for word in words:
            self.report.add("stale_hot", "word:%s" % word,
                            "a word of the text rows missing from the "
                            "lexicon")
        if words and self.report.repair:
            verifystore.add_missing_words(store)
            textstats.forget()
            self.report.repaired += len(words)
            if self.on_batch is not None:
                self.on_batch()
        elif words:
            self.report.unrepaired += len(words)

    def check_text_totals(self):
        """Text indexes whose kept totals of documents and words (Okapi's
        collection statistics), or words whose kept document frequencies,
        do not add up to their text rows, and kept postings that differ
        from their text rows and hot rows (``stale_hot``, named
        ``totals:<index>``, ``df:<index>:<word>``,
        ``postings:<index>:<word>:<rid>``): counted or written again by a
        repair."""
        store = self.catalog._pgc_store()
        totals = verifystore.text_total_mismatches(store, HOT_ORPHANS_MAX)
        for name, kept, rows in totals:
            self.report.add("stale_hot", "totals:%s" % name,
                            "documents and words kept %d, %d; of the rows "
                            "%d, %d" % (kept + rows))
        words = verifystore.text_df_mismatches(store, HOT_ORPHANS_MAX)
        for name, word, kept, rows in words:
            self.report.add("stale_hot", "df:%s:%s" % (name, word),
                            "documents kept %d, of the rows %d"
                            % (kept, rows))
        kept = verifystore.postings_mismatches(store, HOT_ORPHANS_MAX)
        for name, word, rid in kept:
            self.report.add("stale_hot", "postings:%s:%s:%d"
                            % (name, word, rid),
                            "the kept posting differs from the text row")
        wrong = totals + words + kept
        if wrong and self.report.repair:
            if totals:
                verifystore.recount_text_totals(store)
            if words:
                verifystore.recount_text_df(store)
            if kept:
                verifystore.rewrite_postings(store)
            textstats.forget()
            self.report.repaired += len(wrong)
            if self.on_batch is not None:
                self.on_batch()
        elif wrong:
            self.report.unrepaired += len(wrong)

    def _noter(self, todo, count):
        """``note(kind, path, detail, action, obj=None)``: a difference goes
        to ``todo`` (path -> (action, object)), and to the report when
        ``count``."""
        def note(kind, path, detail, action, obj=None):
            if count:
                self.report.add(kind, path, detail)
                if self.on_difference is not None:
                    self.on_difference(kind, path, detail)
            if path not in todo or action == UNCATALOG or \
                    todo[path][0] == HOT:
                todo[path] = (action, obj)
        return note

    def _check_batch(self, store, entries, note):
        texts = []
        found = {}
        for entry in entries:
            self._check_entry(entry, note, texts, found)
        for rid, name in verifystore.text_mismatches(store, texts):
            found[rid][1].append(name)
        stale_hot = verifystore.hot_mismatches(
            store, [entry.rid for entry in entries])
        for entry in entries:
            if entry.rid in stale_hot:
                note("stale_hot", entry.path, "hot keys", HOT, entry.rid)
            if entry.rid not in found:
                continue
            obj, values, columns = found[entry.rid]
            if values:
                note("stale_value", entry.path,
                     "indexes: " + ", ".join(sorted(values)), REINDEX, obj)
            if columns:
                note("stale_metadata", entry.path,
                     "columns: " + ", ".join(columns), REINDEX, obj)

    def _check_entry(self, entry, note, texts, found):
        path = entry.path
        obj = resolve(self.root, path)
        if obj is None:
            note("orphan", path, "nothing at this path", UNCATALOG)
            return
        reason = not_indexed_reason(obj, self.catalog, self.portal_path)
        if reason is not None:
            note("stale_entry", path, reason, UNCATALOG)
            return
        wrapper = extract.indexable(self.catalog, obj)
        try:
            if self.values:
                _, idx_set, _, text_set, _ = extract.index_values(
                    self.config, wrapper, [])
                meta, _ = extract.metadata(self.config, wrapper)
            else:  # the identity only
                _, idx_set, _, _, _ = extract.index_values(
                    self.config, wrapper, [UID_INDEX])
        except ConflictError:
            raise
        except Exception as exc:
            logger.exception("verify: cannot compute the values of %s", path)
            self.report.add_error(path, "%s: %s" % (type(exc).__name__, exc))
            return
        stored = self._long_lists_expanded(
            orjson.loads(entry.idx) if entry.idx else {})
        expected = orjson.loads(orjson.dumps(lists.inline(idx_set)))
        uid_was = stored.get(UID_INDEX, _ABSENT)
        uid_is = expected.get(UID_INDEX, _ABSENT)
        if (UID_INDEX in self.config._indexes and uid_was is not _ABSENT
                and uid_is is not _ABSENT and not same(uid_was, uid_is)):
            note("stale_entry", path, "catalogued as UID %s, the object's "
                 "is %s" % (uid_was, uid_is), REINDEX, obj)
            return
        if not self.values:
            return
        values = []
        for name in self.config._indexes:
            storage = self.config.getIndex(name).pgc_storage
            if storage == "idx":
                if not same_value(self.config.getIndex(name).pgc_multi,
                                  stored.get(name, _ABSENT),
                                  expected.get(name, _ABSENT)):
                    values.append(name)
            elif storage == "text":
                want = name in text_set
                searched = self.config.getIndex(name).pgc_language
                if want != (name in entry.text_names):
                    values.append(name)
                elif want and searched is not None and searched.ready and \
                        name not in entry.language_names:
                    # searched by language (ITextKind): its row is missing
                    values.append(name)
                elif want:
                    texts.append((entry.rid, name, text_set[name]))
        found[entry.rid] = (obj, values, self._columns(entry.meta, meta))

    def _long_lists_expanded(self, stored):
        """An entry's stored index values with the digests of long lists
        (:mod:`plone.pgcatalog.pg.lists`) replaced by the lists: an entry
        written before lists were stored apart, or after, compares by its
        values."""
        refs = {name: value for name, value in stored.items()
                if type(value) is str and name in self.config._indexes
                and self.config.getIndex(name).pgc_multi}
        if not refs:
            return stored
        known = self.long_lists
        missing = set(refs.values()) - set(known)
        if missing:
            known.update(verifystore.long_lists(
                self.catalog._pgc_store(), missing))
        return dict(stored, **{name: known.get(ref, ref)
                               for name, ref in refs.items()})

    def _columns(self, stored_text, computed_text):
        """Metadata columns whose stored value differs."""
        names = list(self.config.names)
        if stored_text is None:
            return names
        lookup = self.catalog._pgc_store().meta_layout()
        stored = codec.meta_dict(orjson.loads(stored_text), lookup)
        computed = codec.meta_dict(orjson.loads(computed_text), lookup)
        return [n for n in names
                if not same_column(stored.get(n, _ABSENT),
                                   computed.get(n, _ABSENT))]

    # -- pass 2: the site's objects ------------------------------------------
    def find_missing(self):
        batch = []
        for path, obj in objects(self.catalog):
            self.report.objects += 1
            batch.append((path, obj))
            if len(batch) >= self.batch:
                self._missing(batch)
                batch = []
        if batch:
            self._missing(batch)

    def _missing(self, batch):
        store = self.catalog._pgc_store()
        present = verifystore.catalogued(store, [p for p, _ in batch])
        todo = {}
        note = self._noter(todo, True)
        for path, obj in batch:
            if path not in present:
                note("missing", path, "", REINDEX, obj)
        self._end_batch("objects", todo)


def verify(catalog, **options):
    """Verify ``catalog`` (options: see :class:`Verifier`); the Report."""
    return Verifier(catalog, **options).run()
