"""Whether a catalog holds entries outside a subtree.

A path search may read a subtree as one range of the entries' path index
(indexes/path/search.py) when no entry of the catalog lies outside the
site: the catalog's own objects are all below it, but an add-on may
catalogue others (``uid`` of its choosing).  :class:`EntriesOutside` (a
mixin of :class:`~plone.pgcatalog.pg.store.CatalogStore`) asks, or knows:
an answer holds for one state of the transaction, a yes for the process's
life.
"""
from plone.pgcatalog.pg.fragment import q
from plone.pgcatalog.schema import tables as schema

#: (dsn, catalog key, path) of the catalogs known to hold an entry outside
#: the tree at that path (EntriesOutside.outside_known)
_known = set()


def forget():
    """Forget what is known of entries outside (tests)."""
    _known.clear()


class EntriesOutside:
    """The store's answers about entries outside a subtree (its
    ``session``, ``key``, ``cid`` and ``execute``)."""

    def entries_outside(self, path):
        """Whether some entry of this catalog is neither the object at
        ``path`` nor below it (asked unless known: :meth:`outside_known`)."""
        found = self.outside_known(path)
        if found is None:
            found = self.execute(self._outside_sql(path),
                                 prepare=True).fetchone()[0]
            self._know_outside(path, found)
        return found

    def outside_known(self, path):
        """:meth:`entries_outside` as known without a statement, or None.
        An answer holds for one state of the transaction (the session's
        epoch moves when its writes are sent or rolled back, or its
        snapshot ends; with writes waiting to be sent, nothing is known); a
        yes, for this process's life (it only makes path searches take the
        form that is right either way)."""
        if (self.session.dsn, self.key, path) in _known:
            return True
        if self.session.pending:
            return None     # the next statement sends writes first
        found = self.session.cache.get(("outside", self.key, path))
        if found is not None and found[0] == self.session.epoch:
            return found[1]
        return None

    def ride_outside(self, path):
        """Ask :meth:`entries_outside` with the transaction's next
        statement (no round trip of its own)."""
        self.session.ride(self._outside_sql(path),
                          lambda rows: self._know_outside(path, rows[0][0]),
                          prepare=True)

    def _know_outside(self, path, found):
        found = bool(found)
        self.session.keep(("outside", self.key, path),
                          (self.session.epoch, found))
        if found:
            _known.add((self.session.dsn, self.key, path))

    def _outside_sql(self, path):
        """The three ranges around the tree at ``path``, each probed for
        its first entry in index order: a plan that does not depend on the
        values (prepared).  As EXISTS (or one OR of the ranges),
        PostgreSQL's generic plan scanned the table (36-66 ms at 100,000
        entries)."""
        x = "/" + "/".join(c for c in path.split("/") if c)
        first = ("(SELECT e.path FROM {} WHERE e.cid = {} AND %s ORDER BY "
                 "%s LIMIT 1) IS NOT NULL")
        return q("SELECT " + " OR ".join([
            first % ("e.path < {}", "e.cid DESC, e.path DESC"),
            first % ("e.path > {} AND e.path < {}", "e.cid, e.path"),
            first % ("e.path >= {}", "e.cid, e.path")]),
            schema.FROM_ENTRIES, self.cid, x, schema.FROM_ENTRIES, self.cid,
            x, x + "/", schema.FROM_ENTRIES,
            self.cid, x + "0")
