"""The catalog's snapshot agrees with the objects' snapshot.

A ZODB transaction loads objects as of its ZODB snapshot and reads the
catalog in a PostgreSQL snapshot.  Each catalog counts its writing commits
twice: its *generation* in the ZODB (the tool's ``_pgc_generation``, bumped
by every transaction that commits catalog writes, committed with the
storages) and its *change stamp* in PostgreSQL (one commit-log row per such
transaction, committed with the catalog's writes).  A transaction knows the
generation of its ZODB snapshot (no statement) and asks the stamp of its
PostgreSQL snapshot with its first statement (:func:`facts_sql`, in the
same round trip).  They differ only when the two snapshots hold different
commits:

* **behind** (stamp < generation): the objects show a commit whose catalog
  part the snapshot does not.  With two-phase commit the storages commit
  first and the catalog's ``COMMIT PREPARED`` follows a moment later: a
  snapshot taken in between (RelStorage's own, which the catalog shares)
  holds the objects and not their entries.  The session then waits for
  those prepared transactions (their ids are in the facts) and reads in a
  new snapshot, which must match the generation exactly; one that is ahead
  raises :class:`~plone.pgcatalog.errors.CatalogReadConflictError` (Zope
  retries the request).  A transaction that already wrote in the old
  snapshot raises it at once (after the wait).  Prepared transactions
  that outlive the wait belong to a process that died between the two
  commits: the transaction goes on with what is committed (nothing better
  is coming until ``db.resolve_in_doubt`` finishes them).
* **ahead** (stamp > generation): the catalog shows commits whose objects
  the transaction cannot load.  With a snapshot of its own (the catalog in
  another database, on ZEO or FileStorage) it is taken at the first catalog
  statement, after the ZODB's: commits in between are visible.  The
  transaction raises :class:`~plone.pgcatalog.errors.CatalogReadConflictError`
  (Zope runs the request again, in a ZODB snapshot that holds them), as
  the ZODB raised ``ReadConflictError`` before it had MVCC.  A catalog
  that stays ahead of every ZODB snapshot of the process for
  :data:`AHEAD_GRACE` seconds ran ahead for good (a catalog commit whose
  ZODB part failed: without two-phase commit, or an in-doubt transaction
  committed by ``in-doubt-resolution``): that lead is logged and accepted
  (:func:`ahead_verdict`), the site keeps answering; ``pgcatalog-verify``
  finds the difference.

The result cache fills only from a snapshot that holds exactly what the
generation counts (:func:`complete`).

Prepared transactions name the catalogs they write in their global id
(:func:`gid`), so that only this catalog's writers make a snapshot
incomplete: another application's open transaction, a ``pg_dump`` or a
transaction prepared in another database do not.
"""
import logging

from plone.pgcatalog.pg.fragment import FALSE
from plone.pgcatalog.pg.fragment import join
from plone.pgcatalog.pg.fragment import literal
from plone.pgcatalog.pg.fragment import q
from plone.pgcatalog.schema import tables as schema

logger = logging.getLogger("plone.pgcatalog")

#: global ids of the catalog's prepared transactions start with this
GID_PREFIX = "pgcatalog:"
#: a transaction writing more catalogs than this names none ("*": all)
GID_MAX_CATALOGS = 20
#: seconds a reader waits for the prepared transactions its snapshot lacks
#: (a live process commits its own a moment after the storages)
WAIT = 1.0
#: seconds between two looks at them
POLL = 0.002
#: seconds a catalog may show commits that no ZODB snapshot of this process
#: shows before its lead is taken for good (ahead_verdict)
AHEAD_GRACE = 2.0


def gid(token, cids, storage_xid=None):
    """The global id of a prepared transaction writing catalogs ``cids``,
    whose storage's PostgreSQL transaction (in the same database) is
    ``storage_xid``: ``pgcatalog:<token>:<cid>.<cid>[:<storage xid>]``."""
    cids = sorted(cids)
    named = ".".join(str(int(c)) for c in cids) \
        if 0 < len(cids) <= GID_MAX_CATALOGS else "*"
    found = "%s%s:%s" % (GID_PREFIX, token, named)
    if storage_xid is not None:
        found += ":%d" % int(storage_xid)
    return found


def storage_xid_of(gid):
    """The storage transaction a global id names (None: none)."""
    parts = gid.split(":")
    if len(parts) >= 4 and parts[0] + ":" == GID_PREFIX and \
            parts[3].isdigit():
        return parts[3]
    return None


#: RelStorage (PostgreSQL) holds advisory lock -1 from its vote to its
#: commit (its "commit lock"): in the catalog's vote, which follows the
#: storages', the holder in this database is this commit's storage
#: transaction.  Its id as a full (xid8) number, from this transaction's.
STORAGE_XID = q(
    "SELECT (((pg_current_xact_id()::text::bigint >> 32) - CASE WHEN "
    "t.transactionid::text::bigint > (pg_current_xact_id()::text::bigint "
    "& 4294967295) THEN 1 ELSE 0 END) << 32) + "
    "t.transactionid::text::bigint FROM pg_locks a JOIN pg_locks t ON "
    "t.virtualtransaction = a.virtualtransaction AND t.locktype = "
    "'transactionid' WHERE a.locktype = 'advisory' AND a.granted AND "
    "a.database = (SELECT oid FROM pg_database WHERE datname = "
    "current_database()) AND a.classid = 4294967295 AND a.objid = "
    "4294967295 AND a.objsubid = 1 LIMIT 1")


def xact_status(xid):
    """``pg_xact_status`` of a full transaction id (committed, aborted,
    in progress, or NULL when too old to know)."""
    return q("SELECT pg_xact_status({}::text::xid8)", str(int(xid)))


def _of_catalog(gid_sql, cid_sql):
    """SQL: the prepared transaction ``gid_sql`` writes catalog
    ``cid_sql`` (an id without catalogs names them all)."""
    part = "split_part(%s, ':', 3)" % gid_sql
    return ("(%s IN ('', '*') OR %s::text = ANY(string_to_array(%s, '.')))"
            % (part, cid_sql, part))


def facts_sql(cids):
    """One row per catalog of ``cids``, in the current snapshot: its id,
    its change stamp, the ids of its prepared transactions (not committed,
    so missing from every snapshot), and whether a transaction the
    snapshot sees as in progress has committed since (its catalog part
    then missing from it).

    The statement has no parameters (the catalog ids, integers, are
    spelled out): prepared (:data:`GENERIC_PLAN`), PostgreSQL plans it once
    per connection, whatever ``plan_cache_mode`` says; planned with values
    it cost 0.15-0.3 ms of planning in every transaction."""
    ids = [int(cid) for cid in sorted(cids)]
    return q(
        "SELECT c.cid, c.stamp + (SELECT count(*) FROM {} l WHERE l.cid = "
        "c.cid), ARRAY(SELECT p.transaction::text FROM pg_prepared_xacts p "
        "WHERE p.database = current_database() AND p.gid LIKE {} AND "
        + _of_catalog("p.gid", "c.cid") + "), EXISTS (SELECT 1 FROM "
        "pg_snapshot_xip(pg_current_snapshot()) x WHERE pg_xact_status(x) = "
        "'committed') FROM {} c WHERE {}",
        schema.COMMITS_TABLE, literal(GID_PREFIX + "%"),
        schema.CATALOGS_TABLE,
        q("c.cid IN ({})", join(", ", [literal(cid) for cid in ids]))
        if ids else FALSE)


#: how a statement without parameters that runs in every transaction is
#: sent: prepared, so that PostgreSQL keeps its plan (a statement without
#: parameters always runs with its generic plan)
GENERIC_PLAN = True


def queue_facts(conn, cids):
    """Queue :func:`facts_sql` of catalogs ``cids`` on ``conn`` in its
    transaction (a pipeline), prepared; the facts' cursor."""
    fragment = facts_sql(cids)
    return conn.cursor().execute(fragment.text, fragment.params,
                                 prepare=GENERIC_PLAN)


def commits_of_sql(xid):
    """The catalogs a committed transaction ``xid`` (32 bits, as
    ``pg_prepared_xacts`` gives it) wrote, and its commit-log rows in each."""
    return q("SELECT l.cid, count(*) FROM {} l WHERE l.xmin::text = {} "
             "GROUP BY l.cid", schema.COMMITS_TABLE, str(xid))


def still_prepared_sql(xids):
    """How many of the prepared transactions ``xids`` are still prepared."""
    return q("SELECT count(*) FROM pg_prepared_xacts WHERE "
             "transaction::text = ANY({}::text[])", list(xids))


class Facts:
    """What a PostgreSQL snapshot holds of one catalog (a row of
    :func:`facts_sql`)."""

    __slots__ = ("stamp", "prepared", "moved")

    def __init__(self, stamp, prepared, moved):
        self.stamp = stamp
        self.prepared = tuple(prepared or ())
        self.moved = bool(moved)


#: why an answer was not filled into the result cache
COUNT = "count"
WRITER = "writer"


def refusal(facts, generation, shared):
    """Why a snapshot with ``facts`` may not fill the result cache for ZODB
    generation ``generation`` (None: it may, :func:`complete`):
    :data:`COUNT` (it holds another number of commits than the objects':
    one was finishing, or the two counts drifted apart, docs/cache.md) or
    :data:`WRITER` (a snapshot of its own while a writer of this catalog
    was committing)."""
    if facts is None or generation is None or facts.stamp != generation:
        return COUNT
    if not shared and (facts.prepared or facts.moved):
        return WRITER
    return None


def complete(facts, generation, shared):
    """Whether a snapshot with ``facts`` holds exactly the catalog writes
    that ZODB generation ``generation`` counts.

    Shared with the storage (the objects' own snapshot): an equal count
    suffices, as the catalog's part of a transaction becomes visible after
    the storages' with two-phase commit (before it without), so the two
    sets of commits are one within the other.  A snapshot of its own, taken
    after the ZODB's: the count, and none of this catalog's writers in
    progress when it was taken (one of them may be counted by the
    generation and missing here while another, not counted, is visible),
    nor any transaction finished between the snapshot and the facts (it
    may have been one)."""
    return refusal(facts, generation, shared) is None


# -- ahead of the objects ----------------------------------------------------

#: what a transaction does with a snapshot ahead of its objects
RETRY = "retry"
ANSWER = "answer"

#: (dsn, cid) -> the newest generation a ZODB snapshot of this process showed
_newest = {}
#: (dsn, cid) -> (stamp, since): the catalog has shown ``stamp`` since
#: ``since`` (monotonic) and no ZODB snapshot of this process has counted it
_pending = {}
#: (dsn, cid) -> the lead over the ZODB's count accepted for good
_accepted = {}


def saw(key, generation):
    """A transaction of this process counts ``generation`` writing commits
    of catalog ``key`` (dsn, cid) in its ZODB snapshot."""
    if generation > _newest.get(key, -1):
        _newest[key] = generation
    pending = _pending.get(key)
    if pending is not None and generation >= pending[0]:
        del _pending[key]


def ahead_verdict(key, stamp, generation, now):
    """What a transaction whose ZODB snapshot counts ``generation`` commits
    of catalog ``key`` does with a catalog snapshot counting ``stamp``
    (more): :data:`RETRY` while the objects of those commits exist in a
    newer ZODB snapshot (one of this process counted them) or may a moment
    later (:data:`AHEAD_GRACE`); :data:`ANSWER` once the lead is taken for
    good (logged), and from then on for a lead no greater."""
    saw(key, generation)
    stamp -= _accepted.get(key, 0)
    if stamp <= generation:
        return ANSWER
    if _newest[key] >= stamp:
        return RETRY
    pending = _pending.get(key)
    if pending is None:
        _pending[key] = (stamp, now)
        return RETRY
    if now - pending[1] < AHEAD_GRACE:
        return RETRY
    del _pending[key]
    lead = stamp - _newest[key]
    _accepted[key] = _accepted.get(key, 0) + lead
    logger.warning(
        "catalog %s: PostgreSQL holds %d writing commits more than any ZODB "
        "snapshot of this process has counted for %.1f s: taken as a catalog "
        "commit whose ZODB part failed (without two-phase commit, or an "
        "in-doubt transaction committed); answering from it. Run "
        "pgcatalog-verify (docs/verify.md)", key[1], lead, now - pending[1])
    return ANSWER


def accept_lead(dsn, leads):
    """Catalog writes were committed without their ZODB part (an in-doubt
    transaction committed by ``in-doubt-resolution``): ``leads`` maps the
    catalogs' ids to the number of writing commits no ZODB snapshot will
    count; this process answers from them without waiting
    (:data:`AHEAD_GRACE`)."""
    for cid, lead in leads.items():
        key = (dsn, cid)
        _accepted[key] = _accepted.get(key, 0) + lead


def forget_ahead():
    """Forget what this process saw of leads (tests)."""
    _newest.clear()
    _pending.clear()
    _accepted.clear()
