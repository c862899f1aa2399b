"""The ZMI's admin tabs: indexes, metadata, entries, the slow-query report.

The tabs have stock ZCatalog's names (``manage_catalogIndexes``,
``manage_catalogSchema``, ``manage_catalogView``,
``manage_objectInformation``, ``manage_catalogReport``) and its permission
("Manage ZCatalog Entries"); they read, and the one action (EXPLAIN of a
slow query) is published for POST only with plone.protect's authenticator,
as the status page's.  The per-index "Reindex" buttons post to
``manage_reindexIndex`` (maintenance.py).  The data methods are Python API
(not published); their statements are ``stats.py``'s and the store's.
"""
import os
from urllib.parse import urlencode

from AccessControl import ClassSecurityInfo
from AccessControl.class_init import InitializeClass
from AccessControl.Permissions import manage_zcatalog_entries
from plone.protect import CheckAuthenticator
from plone.protect import PostOnly
from plone.protect import protect
from Products.PageTemplates.PageTemplateFile import PageTemplateFile
from zExceptions import BadRequest
from zope.i18n import translate
from ZPublisher import zpublish

from plone.pgcatalog import _
from plone.pgcatalog.indexes.interfaces import IIndexKind
from plone.pgcatalog.indexes.interfaces import ITextKind
from plone.pgcatalog.pg import stats
from plone.pgcatalog.pg.store import rid_key
from plone.pgcatalog.search import slowlog

WWW = os.path.join(os.path.dirname(os.path.dirname(__file__)), "www")
#: characters of a value shown on the entry page
SHOWN_MAX = 300
#: entries per page of the Entries tab, by default
PAGE_SIZE = 50

#: the admin tabs (tool.py adds them to manage_options)
ADMIN_TABS = (
    {"action": "manage_catalogIndexes", "label": "Indexes"},
    {"action": "manage_catalogSchema", "label": "Metadata"},
    {"action": "manage_catalogView", "label": "Entries"},
    {"action": "manage_catalogReport", "label": "Query Report"},
)


def _template(name):
    return PageTemplateFile(os.path.join(WWW, name), globals())


def _whole(value, name, default, maximum=None):
    """A form's number ``value`` as an int >= 0 (``default`` when empty);
    BadRequest otherwise."""
    if value is None or value == "":
        return default
    try:
        number = int(value)
    except (TypeError, ValueError):
        number = -1
    if number < 0 or (maximum is not None and number > maximum):
        raise BadRequest("%s must be a whole number from 0%s, not %r" % (
            name, " to %d" % maximum if maximum is not None else "", value))
    return number


def _shown(value):
    text = repr(value)
    if len(text) > SHOWN_MAX:
        text = text[:SHOWN_MAX - 3] + "..."
    return text


class AdminAPI:
    """The admin tabs' pages, their data, and EXPLAIN of a slow query."""

    security = ClassSecurityInfo()

    security.declareProtected(manage_zcatalog_entries,
                              "manage_catalogIndexes")
    manage_catalogIndexes = _template("indexes.zpt")
    security.declareProtected(manage_zcatalog_entries,
                              "manage_catalogSchema")
    manage_catalogSchema = _template("metadata.zpt")
    security.declareProtected(manage_zcatalog_entries, "manage_catalogView")
    manage_catalogView = _template("entries.zpt")
    security.declareProtected(manage_zcatalog_entries,
                              "manage_objectInformation")
    manage_objectInformation = _template("entry.zpt")
    security.declareProtected(manage_zcatalog_entries,
                              "manage_catalogReport")
    manage_catalogReport = _template("slow.zpt")

    @zpublish(False)
    @security.protected(manage_zcatalog_entries)
    def pgc_index_report(self):
        """Each index: name, kind, entries with a value, the PostgreSQL
        indexes it uses (size, state) and their total size, and for a text
        index searched by language "ready" or "pending" (else None)."""
        store = self._pgc_store()
        used = stats.pg_indexes(store)
        report = []
        for name in self._catalog._indexes:
            index = self._catalog.getIndex(name)
            pg_indexes = used.get(name, [])
            searched = index.pgc_language \
                if ITextKind.providedBy(index) else None
            report.append({
                "name": name, "meta_type": index.meta_type,
                # a text index searched by language (language-text.md)
                "language": None if searched is None else
                ("ready" if searched.ready else "pending"),
                "entries": store.index_count(index)
                if IIndexKind.providedBy(index) else "?",
                "pg_indexes": pg_indexes,
                "bytes": sum(i["bytes"] for i in pg_indexes)})
        return report

    @zpublish(False)
    @security.protected(manage_zcatalog_entries)
    def pgc_table_report(self):
        """``[(table, bytes, size)]`` of the catalog tables."""
        return stats.table_sizes(self._pgc_store())

    @zpublish(False)
    @security.protected(manage_zcatalog_entries)
    def pgc_entries_report(self, prefix="", b_start=0, b_size=PAGE_SIZE):
        """A page of entries by path prefix: ``{total, rows: [{rid,
        path}], prefix, b_start, b_size, previous, next}`` (the last two:
        URLs of the neighbour pages, or None)."""
        if prefix is None:
            prefix = ""
        if not isinstance(prefix, str) or "\x00" in prefix:
            raise BadRequest("prefix must be a path (text without NUL)")
        try:
            prefix.encode("utf-8")
        except UnicodeEncodeError:
            raise BadRequest("prefix must be a path (valid text)") from None
        b_start = _whole(b_start, "b_start", 0, 2 ** 62)
        b_size = _whole(b_size, "b_size", PAGE_SIZE, stats.PAGE_MAX) \
            or PAGE_SIZE
        total, rows = stats.entries_page(self._pgc_store(), prefix, b_start,
                                         b_size)
        def page_url(start):
            return "manage_catalogView?" + urlencode(
                {"prefix": prefix, "b_start": start, "b_size": b_size})

        return {"total": total, "prefix": prefix, "b_start": b_start,
                "b_size": b_size,
                "rows": [{"rid": rid, "path": path} for rid, path in rows],
                "previous": page_url(max(b_start - b_size, 0))
                if b_start else None,
                "next": page_url(b_start + b_size)
                if b_start + b_size < total else None}

    @zpublish(False)
    @security.protected(manage_zcatalog_entries)
    def pgc_entry_report(self, rid):
        """One entry: ``{rid, path, indexes: [(name, value)], metadata:
        [(name, value)]}`` (values as ``repr``, shortened), or None."""
        rid = rid_key(_whole(rid, "rid", None, 2 ** 63 - 1))
        if rid is None:
            raise BadRequest("rid is required")
        path = self.getpath(rid, None)
        if path is None:
            return None
        indexes = sorted((name, _shown(value)) for name, value in
                         self.getIndexDataForRID(rid).items())
        try:
            meta = self.getMetadataForRID(rid)
        except KeyError:
            meta = {}
        return {"rid": rid, "path": path, "indexes": indexes,
                "metadata": sorted((name, _shown(value))
                                   for name, value in meta.items())}

    @zpublish(False)
    @security.protected(manage_zcatalog_entries)
    def pgc_slow_report(self):
        """The slow-query log of this catalog in this process (newest
        first) and the settings in force."""
        store = self._pgc_store()
        session = store.session
        return {"entries": [e.info() for e in slowlog.entries(
            session.dsn, store.key)],
            "slow_ms": session.slow_ms, "timeout_ms": session.timeout_ms,
            "size": slowlog.SIZE}

    @zpublish(methods="POST")
    @security.protected(manage_zcatalog_entries)
    @protect(CheckAuthenticator, PostOnly)
    def manage_explainSlowQuery(self, entry=None, REQUEST=None):
        """The Query Report with ``EXPLAIN`` (the plan PostgreSQL would
        choose now; the statement is not run) of slow query ``entry``."""
        entry_id = _whole(entry, "entry", None)
        if entry_id is None:
            raise BadRequest("entry is required")
        store = self._pgc_store()
        found = slowlog.get(store.session.dsn, store.key, entry_id)
        if found is None:
            explained = translate(
                _("This slow query is no longer in the log."),
                context=REQUEST)
        elif found.statement is None:
            explained = translate(
                _("This search ran no statement of its own."),
                context=REQUEST)
        else:
            explained = slowlog.explain(store, found)
        if REQUEST is None:
            return explained
        return self.manage_catalogReport(explained=explained,
                                         explained_id=entry_id)


InitializeClass(AdminAPI)
