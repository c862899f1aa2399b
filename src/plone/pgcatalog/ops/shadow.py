"""Shadow mode: the site's old ZCatalog kept beside the PostgreSQL catalog.

A shadow-mode install (``shadow on`` / ``PGCATALOG_SHADOW=1``, see
docs/migration.md) moves the site's ZCatalog-based ``portal_catalog`` aside
(to :data:`SHADOW_ID`, its BTrees intact) and records on the new tool, in
``_pgc_shadow`` (a small dict, replaced whole on every change), which
object is the shadow, which catalog answers searches (``primary``:
``"pgcatalog"`` or ``"zcatalog"``) and the sample rate.  Then:

- writes go to both: the tool's ``catalog_object`` / ``uncatalog_object``
  / ``manage_catalogClear`` call the shadow's (:func:`write`), in the same
  transaction (the shadow's writes are ZODB writes, as they always were).
  An error of the shadow's is contained (logged, counted, listed) while
  PostgreSQL is the primary and raised while the ZCatalog is;
- searches (``searchResults``, ``__call__``, ``unrestrictedSearchResults``,
  ``search``) are answered by the primary from the merged query (CMFPlone's
  security additions made once, by the tool); a sample of them (every
  N-th, N = 1 / rate, per process and catalog) is answered by the other
  catalog too and the two answers compared (:func:`search`): their paths
  (in order when the query sorts, as a set when it does not; an unsorted
  batch is compared by count only, since the two catalogs number their
  entries differently), their ``len`` and ``actual_result_count``.  A
  difference is logged on ``plone.pgcatalog.ops.shadow`` (WARNING: the query's
  shape, as the slow-query log makes it, and the first differing paths)
  and kept in a per-process ring of the last :data:`SIZE`, shown on the
  ZMI's "Shadow" tab with the counters.  An error of the secondary catalog
  is caught, logged and counted: it never reaches the caller.

Comparisons report, they do not judge: the two catalogs legitimately differ
in a few ZCatalog-bug cases and in the order of equal sort keys
(docs/migration.md).
"""
import collections
import contextlib
import itertools
import logging
import threading
import time

from Acquisition import aq_base
from Acquisition import aq_inner
from Acquisition import aq_parent
from Products.ZCatalog.ZCatalog import ZCatalog
from ZODB.POSException import ConflictError

from plone.pgcatalog import config
from plone.pgcatalog.errors import ConfigurationError
from plone.pgcatalog.search.slowlog import shape

logger = logging.getLogger("plone.pgcatalog.shadow")

#: where a shadow-mode install puts the old ZCatalog
SHADOW_ID = "portal_catalog_zcatalog"
PRIMARIES = ("pgcatalog", "zcatalog")
#: the primary a shadow-mode install starts with: the site answers as it
#: did until someone switches
DEFAULT_PRIMARY = "zcatalog"
DEFAULT_RATE = 0.01
#: differences kept per process
SIZE = 100
#: paths listed per side in a difference
SHOWN_PATHS = 5
#: answers larger than this are compared by their counts only
COMPARE_MAX = 5000
#: query keys that make an answer's order part of the comparison
ORDERED_KEYS = ("sort_on",)
BATCH_KEYS = ("b_start", "b_size", "sort_limit")
#: the definition changes the shadow follows (if it lacks / has the name)
DEFINITIONS = ("addIndex", "delIndex", "addColumn", "delColumn")

_lock = threading.Lock()
_differences = collections.deque(maxlen=SIZE)
_ids = itertools.count(1)
#: catalog key -> counters (and the sampling position)
_counters = {}
#: this thread's writes skip the shadow (see writes_paused)
_paused = threading.local()


# -- settings -------------------------------------------------------------
def settings(tool):
    """The tool's shadow settings (a dict), or None outside shadow mode."""
    return getattr(aq_base(tool), "_pgc_shadow", None) or None


def check_primary(value):
    if value not in PRIMARIES:
        raise ValueError("primary must be one of %s, not %r"
                         % (", ".join(PRIMARIES), value))
    return value


def check_rate(value):
    """``value`` as a sample rate from 0.0 to 1.0 (ValueError else)."""
    try:
        rate = float(str(value).strip())
    except (TypeError, ValueError):
        rate = -1.0
    if not 0.0 <= rate <= 1.0:   # NaN fails too
        raise ValueError("sample rate must be a number from 0.0 to 1.0, "
                         "not %r" % (value,))
    return rate


def wanted():
    """Whether an install keeps the old ZCatalog as a shadow (``shadow``
    / ``PGCATALOG_SHADOW``; default off)."""
    value = config._setting("shadow", "PGCATALOG_SHADOW")
    if value is None or value == "":
        return False
    if str(value).lower() not in config._BOOLEANS:
        raise ConfigurationError(
            "shadow must be on or off, not %r" % value)
    return config._BOOLEANS[str(value).lower()]


def initial_rate():
    """The sample rate a shadow-mode install starts with
    (``shadow-sample-rate`` / ``PGCATALOG_SHADOW_SAMPLE_RATE``; default
    0.01)."""
    value = config._setting("shadow-sample-rate",
                            "PGCATALOG_SHADOW_SAMPLE_RATE")
    if value is None or value == "":
        return DEFAULT_RATE
    try:
        return check_rate(value)
    except ValueError as exc:
        raise ConfigurationError(str(exc)) from None


def start(tool, shadow_id=SHADOW_ID, primary=DEFAULT_PRIMARY, rate=None):
    """Put ``tool`` in shadow mode with the ZCatalog at ``shadow_id``."""
    tool._pgc_shadow = {"id": shadow_id, "primary": check_primary(primary),
                        "rate": initial_rate() if rate is None
                        else check_rate(rate)}


def configure(tool, primary=None, rate=None):
    """Change the primary and/or the sample rate (ValueError on bad input,
    nothing changed then)."""
    current = settings(tool)
    if current is None:
        raise ValueError("this catalog is not in shadow mode")
    new = dict(current)
    if primary is not None and primary != "":
        new["primary"] = check_primary(primary)
    if rate is not None and rate != "":
        new["rate"] = check_rate(rate)
    if new != current:
        tool._pgc_shadow = new
    return new


def stop(tool):
    """Leave shadow mode (the caller deletes the old catalog)."""
    if "_pgc_shadow" in tool.__dict__:
        del tool._pgc_shadow


def shadow_of(tool):
    """The shadow ZCatalog (acquisition-wrapped), or None."""
    current = settings(tool)
    if current is None:
        return None
    parent = aq_parent(aq_inner(tool))
    found = None if parent is None else getattr(
        aq_base(parent), current["id"], None)
    if found is None:
        return None
    return found.__of__(parent)


def is_shadow(tool, obj):
    """Whether ``obj`` is the shadow ZCatalog (never catalogued: a rebuild
    walking the site meets it, and a catalog is not content)."""
    base = aq_base(obj)
    if not isinstance(base, ZCatalog):
        return False
    current = settings(tool)
    return getattr(base, "id", None) == (current or {}).get("id", SHADOW_ID)


def primary_shadow(tool):
    """The shadow ZCatalog when it is the primary, else None."""
    current = settings(tool)
    if current is None or current["primary"] != "zcatalog":
        return None
    return shadow_of(tool)


# -- counters and the ring of differences ----------------------------------
def _count(key, name, n=1):
    with _lock:
        counters = _counters.setdefault(key, collections.Counter())
        counters[name] += n


def counters(key):
    with _lock:
        found = dict(_counters.get(key, ()))
    return {name: found.get(name, 0) for name in
            ("searches", "compared", "differing", "errors", "too_large",
             "write_errors")}


def differences(key):
    """The differences of catalog ``key``, newest first."""
    with _lock:
        found = [d for d in _differences if d["key"] == key]
    found.reverse()
    return found


def clear(key=None):
    with _lock:
        kept = [d for d in _differences if key is not None
                and d["key"] != key]
        _differences.clear()
        _differences.extend(kept)
        if key is None:
            _counters.clear()
        else:
            _counters.pop(key, None)


def _record(key, **facts):
    facts.update(key=key, when=time.strftime("%Y-%m-%d %H:%M:%S"))
    with _lock:
        facts["id"] = next(_ids)
        _differences.append(facts)
    return facts


def sampled(key, rate):
    """Whether this search (the n-th of catalog ``key`` in this process)
    is compared: every 1/rate-th one."""
    with _lock:
        counters = _counters.setdefault(key, collections.Counter())
        counters["searches"] += 1
        n = counters["searches"]
    return int(n * rate) > int((n - 1) * rate)


# -- reads ------------------------------------------------------------------
def zcatalog_search(shadow, query):
    """The stock answer: ZCatalog's own searchResults on the merged query
    (CMFPlone's additions are already in it)."""
    return ZCatalog.searchResults(shadow, query)


def search(tool, query, pg_search):
    """The primary's answer to ``query``; the other's compared for a
    sample."""
    current = settings(tool)
    shadow = shadow_of(tool)
    if shadow is None:
        if current["primary"] == "zcatalog":
            logger.error("shadow ZCatalog %r not found: PostgreSQL answers",
                         current["id"])
        return pg_search(query)

    def pg():
        return pg_search(dict(query))

    def zc():
        return zcatalog_search(shadow, dict(query))

    if current["primary"] == "zcatalog":
        first, second = zc, pg
    else:
        first, second = pg, zc
    results = first()
    key = tool._pgc_key
    if current["rate"] and sampled(key, current["rate"]):
        compare(key, query, current["primary"], results, second)
    return results


def _paths(results):
    return [brain.getPath() for brain in results]


def compare(key, query, primary, results, other_search):
    """Compare ``results`` with ``other_search()``'s; never raises (but
    ConflictError, which the publisher retries)."""
    secondary = PRIMARIES[1 - PRIMARIES.index(primary)]
    try:
        other = other_search()
        mine = (len(results), results.actual_result_count)
        theirs = (len(other), other.actual_result_count)
        if max(mine + theirs) > COMPARE_MAX:
            _count(key, "too_large")
            found = None if mine == theirs else ("count", [], [], None)
        else:
            found = difference(query, _paths(results), _paths(other),
                               mine, theirs)
    except ConflictError:
        raise
    except Exception as exc:  # noqa: B902 - never break the request
        _count(key, "errors")
        logger.warning("shadow comparison failed: %s answered, %s raised "
                       "%s: %s", primary, secondary, type(exc).__name__,
                       shape(query), exc_info=True)
        _record(key, kind="error", shape=shape(query), primary=primary,
                counts="", only_primary=[], only_secondary=[],
                position=None, error="%s: %s" % (type(exc).__name__, exc))
        return None
    _count(key, "compared")
    if found is None:
        return None
    kind, only_mine, only_theirs, position = found
    _count(key, "differing")
    counts = "%s: %d (total %s), %s: %d (total %s)" % (
        primary, mine[0], mine[1], secondary, theirs[0], theirs[1])
    logger.warning("shadow difference (%s) %s; %s; only in %s: %s; only in "
                   "%s: %s; query: %s", kind, "" if position is None else
                   "at position %d" % position, counts, primary, only_mine,
                   secondary, only_theirs, shape(query))
    return _record(key, kind=kind, shape=shape(query), primary=primary,
                   counts=counts, only_primary=only_mine,
                   only_secondary=only_theirs, position=position, error="")


def ordered(query):
    return any(query.get(name) for name in ORDERED_KEYS)


def batched(query):
    return any(query.get(name) not in (None, "") for name in BATCH_KEYS)


def difference(query, mine, theirs, my_counts, their_counts):
    """``(kind, only mine, only theirs, position)`` or None when equal:
    kind ``members`` (other paths), ``order`` (same paths, other order),
    ``count`` (``len`` or ``actual_result_count`` differ only)."""
    if ordered(query) or not batched(query):
        mine_set, their_set = set(mine), set(theirs)
        only_mine = [p for p in mine if p not in their_set]
        only_theirs = [p for p in theirs if p not in mine_set]
        if only_mine or only_theirs or len(mine) != len(theirs):
            return ("members", only_mine[:SHOWN_PATHS],
                    only_theirs[:SHOWN_PATHS], None)
        if ordered(query) and mine != theirs:
            position = next(i for i, (a, b) in enumerate(zip(mine, theirs))
                            if a != b)
            return ("order", mine[position:position + SHOWN_PATHS],
                    theirs[position:position + SHOWN_PATHS], position)
    if my_counts != their_counts:
        return ("count", [], [], None)
    return None


# -- writes -----------------------------------------------------------------
def write(tool, method, *args):
    """Call ``method`` of the shadow ZCatalog (a write the tool made): an
    error is raised while the ZCatalog is the primary, contained (logged,
    counted, listed) while PostgreSQL is."""
    current = settings(tool)
    if current is None or getattr(_paused, "on", False):
        return
    shadow = shadow_of(tool)
    try:
        if shadow is None:
            raise LookupError("shadow ZCatalog %r not found" % current["id"])
        if method == "catalog_object":
            obj, uid, idxs, update_metadata, pghandler = args
            if idxs:
                known = shadow._catalog.indexes
                idxs = [name for name in idxs if name in known]
                if not idxs:
                    return   # none of these indexes is the shadow's
            shadow.catalog_object(obj, uid, idxs, update_metadata,
                                  pghandler)
        elif method in DEFINITIONS:
            name = args[0]
            has = (name in shadow._catalog.indexes if "Index" in method
                   else name in shadow._catalog.schema)
            if has == method.startswith("add"):
                return   # already as wanted
            if method == "addIndex" and not isinstance(args[1], str):
                logger.warning("index %s was added from an index object: "
                               "not added to the shadow ZCatalog", name)
                return
            getattr(shadow, method)(*args)
        else:
            getattr(shadow, method)(*args)
    except ConflictError:
        raise
    except Exception as exc:  # noqa: B902 - contained while secondary
        if current["primary"] == "zcatalog":
            raise
        key = tool._pgc_key
        _count(key, "write_errors")
        logger.warning("shadow ZCatalog's %s failed (the two catalogs may "
                       "differ from now on)", method, exc_info=True)
        path = args[1] if method == "catalog_object" else (
            args[0] if args else "")
        _record(key, kind="write error", shape=method, primary="pgcatalog",
                counts="", only_primary=[str(path)], only_secondary=[],
                position=None, error="%s: %s" % (type(exc).__name__, exc))


@contextlib.contextmanager
def writes_paused():
    """Within it, this thread's catalog writes go to PostgreSQL only: for
    a bulk build of the PostgreSQL catalog in shadow mode (the shadow is
    complete already).  Other threads' writes (live edits) still go to
    both."""
    before = getattr(_paused, "on", False)
    _paused.on = True
    try:
        yield
    finally:
        _paused.on = before
