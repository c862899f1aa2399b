"""Language-aware text indexes (docs/language-text.md): switching over."""
from AccessControl import ClassSecurityInfo
from AccessControl.class_init import InitializeClass
from AccessControl.Permissions import manage_zcatalog_indexes
from plone.registry.interfaces import IRegistry
from zope.component import queryUtility
from ZPublisher import zpublish

from plone.pgcatalog.buildstate import BUILDING
from plone.pgcatalog.indexes.interfaces import ITextKind
from plone.pgcatalog.indexes.text import language
from plone.pgcatalog.ops.mirror import current_state
from plone.pgcatalog.pg.fragment import literal
from plone.pgcatalog.pg.fragment import q
from plone.pgcatalog.schema import tables as schema


class LanguageTextAPI:
    """pgc_language_text, pgc_exact_text, pgc_language_status (a mixin of
    the tool).  Python API only (scripts, upgrade steps,
    ``pgcatalog-rebuild --language-text``), never a URL."""

    security = ClassSecurityInfo()

    @zpublish(False)
    @security.protected(manage_zcatalog_indexes)
    def pgc_language_text(self, name, languages=None, default=None,
                          weights=None):
        """Search text index ``name`` by language: stemmed in the
        object's language, accents folded, title and description weighted
        (language.py).  ``languages``: the language codes stemmed (the
        site's available languages by default), ``default``: the language
        of an object in another one or in none (the site's default
        language); ``weights``: ``[(attribute, "A" | "B" | "C")]`` read
        besides the index's text (title A, description B by default).

        From this transaction on, every write keeps the index's language
        rows; searches stay ZCTextIndex-exact until a reindex of the index
        has written every entry's (``reindexIndex``, or online:
        ``pgcatalog-rebuild --index NAME``).  The settings, as a dict."""
        index = self._pgc_text_index(name)
        build = current_state(self)
        if build is not None and build.phase == BUILDING:
            # its batches done so far would lack the language rows, which
            # its end would take as complete
            raise ValueError("an online %s is in progress: switch the index "
                             "over once it is done (or cancelled)"
                             % build.mode)
        registry = queryUtility(IRegistry)
        if languages is None:
            languages = (registry.get("plone.available_languages")
                         if registry is not None else None) or ()
        if default is None:
            default = (registry.get("plone.default_language")
                       if registry is not None else None) or ""
        weights = language.DEFAULT_WEIGHTS if weights is None else weights
        for _attribute, weight in weights:
            if weight not in language.WEIGHTS:
                raise ValueError("a weight is A, B or C, not %r"
                                 % (weight,))
        available = self._pgc_text_configs()
        chosen, fallback = language.choose_configs(
            available, list(languages) + [default], default)
        index.pgc_language = language.LanguageText(chosen, fallback,
                                                   weights)
        # the GIN index of its language rows
        self._pgc_create_ddl(index)
        return index.pgc_language.as_dict()

    @zpublish(False)
    @security.protected(manage_zcatalog_indexes)
    def pgc_exact_text(self, name):
        """Search text index ``name`` ZCTextIndex-exact again (at once:
        its language rows are deleted in this transaction)."""
        index = self._pgc_text_index(name)
        index.pgc_language = None
        store = self._pgc_store()
        store.write(q("DELETE FROM {} WHERE cid = {} AND name = {}",
                      schema.LANGTEXT_TABLE, store.cid, name))

    @zpublish(False)
    @security.protected(manage_zcatalog_indexes)
    def pgc_language_status(self, name):
        """How text index ``name`` is searched: ``mode`` ("exact" or
        "language"), its settings, ``rows`` (entries with a language row)
        and ``entries`` (entries with a text row of it), ``folding``
        (whether the configurations fold accents)."""
        index = self._pgc_text_index(name)
        settings = index.pgc_language
        if settings is None:
            return {"mode": "exact"}
        store = self._pgc_store()
        rows, entries = store.execute(q(
            "SELECT (SELECT count(*) FROM {} WHERE cid = {} AND name = {}), "
            "(SELECT count(*) FROM {} WHERE cid = {} AND name = {})",
            schema.LANGTEXT_TABLE, store.cid, name, schema.TEXT_TABLE,
            store.cid, name)).fetchone()
        folding = store.value(q(
            "SELECT EXISTS (SELECT 1 FROM pg_ts_config_map m JOIN pg_ts_dict "
            "d ON d.oid = m.mapdict WHERE m.mapcfg = {}::regconfig AND "
            "d.dictname = 'unaccent')", literal(settings.default)))
        found = settings.as_dict()
        found.update(mode="language", rows=rows, entries=entries,
                     folding=bool(folding))
        return found

    def _pgc_text_index(self, name):
        index = self._catalog.getIndex(name)
        if not ITextKind.providedBy(index):
            raise ValueError("%r is not a text index" % (name,))
        return index

    def _pgc_text_configs(self):
        """The names of the language configurations the database has
        (``pgcatalog_<name>``, schema step 2), without the prefix."""
        store = self._pgc_store()
        return {row[0] for row in store.rows(q(
            "SELECT substr(cfgname, {}) FROM pg_ts_config WHERE "
            "starts_with(cfgname, {})", len(language.PREFIX) + 1,
            language.PREFIX))}


InitializeClass(LanguageTextAPI)
