"""Metadata layouts: a record's column names stored once, not per entry.

A metadata record is stored as a JSON array: its layout's digest, then its
values in column order (``codec.core.encode_meta``).  ``pgcatalog_meta_layouts``
maps each digest to its column names; rows written before a column was added
or removed keep their layout and read as they were written (a column the
layout lacks is Missing.Value, as in ZCatalog until the entry is
reindexed).  A digest is a hash of the names, so a process that encoded a
layout knows it; one that did not reads it once (:func:`lookup`).

Every flush that writes metadata stores the layouts of its records (those
already there are left alone), before the records, in the same transaction:
a committed record's layout is always there.
"""
import orjson

from plone.pgcatalog.codec import core as codec
from plone.pgcatalog.pg.fragment import q
from plone.pgcatalog.schema import tables as schema



def in_metas(metas):
    """The layout digests of stored metadata texts ``metas``."""
    found = set()
    for meta in metas:
        digest = codec.meta_layout_of(meta)
        if digest is not None:
            found.add(digest)
    return found


def store_statement(digests):
    """Store the layouts ``digests`` (known to this process: it encoded
    them).  In sorted order: two transactions storing the same new layout
    wait for each other instead of deadlocking."""
    digests = sorted(digests)
    return q("INSERT INTO {} (digest, names) SELECT * FROM unnest({}::text[],"
             " {}::jsonb[]) ON CONFLICT (digest) DO NOTHING",
             schema.META_LAYOUTS_TABLE,
             digests, [orjson.dumps(codec.layout_names(d)).decode("utf-8")
                       for d in digests])


def lookup(store):
    """``lookup(digest)`` for codec.meta_dict: the layout's names, read
    with ``store``'s transaction when this process does not know them."""
    def read(digest):
        names = store.value(q("SELECT names FROM {} WHERE digest = {}",
                              schema.META_LAYOUTS_TABLE, digest))
        if names is None:
            raise KeyError("unknown metadata layout %r" % digest)
        return codec.learn_layout(digest, names)
    return read
