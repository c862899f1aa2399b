"""GopipIndex (getObjPositionInParent): sort only, nothing stored.

Positions are asked from the parent folders at sort time, as plone.folder's
GopipIndex does, so reordering a folder never leaves stale positions."""
from collections import UserList

from Acquisition import aq_base
from plone.folder.default import DefaultOrdering
from plone.folder.nogopip import GopipIndex
from plone.folder.nogopip import traverse
from plone.folder.ordered import OrderedBTreeFolderBase
from Products.CMFCore.interfaces import ISiteRoot
from zope.component import getUtility
from zope.interface import implementer

from plone.pgcatalog.indexes.base import PGIndex
from plone.pgcatalog.indexes.common import MISSING
from plone.pgcatalog.indexes.common import NO_MATCH
from plone.pgcatalog.indexes.interfaces import IPythonSortKind


@implementer(IPythonSortKind)
class PGGopipIndex(PGIndex, GopipIndex):
    """Sort-only index computing folder positions in Python."""

    pgc_storage = "none"

    def __init__(self, id, extra=None, caller=None):
        self.id = id

    def pgc_extract(self, obj):
        return MISSING

    def pgc_where(self, iq, qc):
        # ZCatalog: GopipIndex._apply_index answers None, which
        # Catalog._search_index takes for an empty result: a query naming
        # this index finds nothing.
        return NO_MATCH

    def pgc_positions(self, paths):
        """``{path: position}`` for catalog paths, as GopipIndex computes."""
        root = getUtility(ISiteRoot).getPhysicalRoot()
        by_parent = {}
        for path in paths:
            parent, _, oid = path.rpartition("/")
            by_parent.setdefault(parent, []).append((oid, path))
        pos = {}
        for parent, children in by_parent.items():
            container = traverse(root, parent)
            base = aq_base(container) if container is not None else None
            if len(by_parent) == 1:
                order = {oid: i for i, oid in enumerate(
                    _ids_in_order(container))}
                for oid, path in children:
                    if oid in order:
                        pos[path] = order[oid]
                continue
            if getattr(base, "getObjectPosition", None) is None:
                for oid, path in children:
                    pos[path] = 0
                continue
            position = _position_in(container, base)
            for oid, path in children:
                pos[path] = position(oid)
        return pos

    def pgc_order_token(self, parents):
        """What the positions of entries in the folders ``parents`` depend
        on, when there is one folder: its ids in order (equal tokens, equal
        positions); None otherwise (many folders: no token cheaper than the
        positions)."""
        if len(parents) != 1:
            return None
        parent, = parents
        root = getUtility(ISiteRoot).getPhysicalRoot()
        return (parent, tuple(_ids_in_order(traverse(root, parent))))


def _position_in(container, base):
    """``container.getObjectPosition``, as GopipIndex asks it for each
    child.  For a plone.folder folder that keeps plone.folder's methods the
    same answers with the lookups made once per folder, not per child
    (each is an adapter lookup on the object's schema): its ordering
    adapter, and the default ordering's positions (what its
    ``getObjectPosition`` reads; an id it lacks still gets that method's
    answer, its error)."""
    if getattr(type(base), "getObjectPosition", None) is not \
            OrderedBTreeFolderBase.getObjectPosition:
        return container.getObjectPosition
    ordering = container.getOrdering()
    if type(ordering).getObjectPosition is not \
            DefaultOrdering.getObjectPosition:
        return ordering.getObjectPosition
    positions = ordering._pos()

    def position(oid):
        if oid in positions:
            return positions[oid]
        return ordering.getObjectPosition(oid)

    return position


def _ids_in_order(container):
    """``container``'s ids in order (read, never changed, by the
    caller)."""
    if container is None:
        return ()
    if getattr(aq_base(container), "getOrdering", None):
        ordering = container.getOrdering()
        if type(ordering).idsInOrder is DefaultOrdering.idsInOrder:
            # DefaultOrdering.idsInOrder copies its PersistentList item by
            # item through UserList's __getitem__ (2,000 ids: most of a
            # cached listing's time); its list of ids read at once
            order = ordering._order()
            if isinstance(order, UserList):
                return order.data
            return order
        return ordering.idsInOrder()
    return container.objectIds()
