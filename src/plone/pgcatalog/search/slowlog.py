"""The slow-query log: searches slower than ``slow-query-ms``, per process.

``run.py`` times each search that reaches PostgreSQL (compiling the
query and running its plan: one ``time.perf_counter()`` pair, no extra
statement) and hands the slow ones here.  Each is logged on the
``plone.pgcatalog.slow`` logger (WARNING) and kept in a ring buffer of the
last :data:`SIZE` per process, which the ZMI's "Query Report" tab lists.

What is kept and logged is the query's *shape*: index names, the options
of each (``operator``, ``range``, ``depth``, ...) and the batch and sort
arguments; every value is replaced by its type or its length
(``portal_type=<str>``, ``allowedRolesAndUsers=<4 items>``), so user data
(searched words, user ids, paths) stays out of the log.  The compiled
statement (with its values) stays in memory only, for EXPLAIN on demand
(:func:`explain`, run in the asking Manager's transaction).  Not timed:
answers from the result cache (no statement), a page's total counted when
first read, relevance scores computed when a brain is first read.
"""
import collections
import itertools
import logging
import threading
import time

from plone.pgcatalog.pg.fragment import q

logger = logging.getLogger("plone.pgcatalog.slow")

#: entries kept per process (the oldest go first)
SIZE = 100
#: query keys whose values are not user data: shown as they are (short)
PLAIN_KEYS = frozenset(("sort_on", "sort_order", "sort_limit", "b_start",
                        "b_size"))
#: options of a query record whose values are shown (short, scalar)
PLAIN_OPTIONS = frozenset(("operator", "range", "depth", "navtree",
                           "navtree_start", "level", "usage"))
SHOWN_MAX = 40

_entries = collections.deque(maxlen=SIZE)
_ids = itertools.count(1)
_lock = threading.Lock()


class SlowQuery:
    """One slow search (what the ZMI shows, and what EXPLAIN needs)."""

    __slots__ = ("id", "when", "dsn", "key", "shape", "ms", "rows", "total",
                 "plan", "statement", "error")

    def __init__(self, dsn, key, shape, ms, rows, total, plan, statement,
                 error):
        self.id = None
        self.when = time.time()
        self.dsn = dsn
        #: the catalog's key (the tool's ``_pgc_key``)
        self.key = key
        self.shape = shape
        self.ms = ms
        #: rids returned, and the total (None: not counted)
        self.rows = rows
        self.total = total
        #: the plan's class name (plans.py, relevance.py, sorting.py)
        self.plan = plan
        #: the compiled statement (a Fragment), or None
        self.statement = statement
        #: why it ended without an answer (e.g. "timeout"), or None
        self.error = error

    def info(self):
        """A dict for the ZMI page."""
        return {"id": self.id, "when": time.strftime(
            "%Y-%m-%d %H:%M:%S", time.localtime(self.when)),
            "shape": self.shape, "ms": "%.1f" % self.ms, "rows": self.rows,
            "total": "?" if self.total is None else self.total,
            "plan": self.plan, "error": self.error or "",
            "explainable": self.statement is not None}


def _shown(value):
    """A plain value as shown (truncated)."""
    text = repr(value)
    if len(text) > SHOWN_MAX:
        text = text[:SHOWN_MAX - 3] + "..."
    return text


def redact(value):
    """A value's type, or a sequence's length: never the value."""
    if isinstance(value, (list, tuple, set, frozenset)):
        return "<%d item%s>" % (len(value), "" if len(value) == 1 else "s")
    return "<%s>" % type(value).__name__


def shape(query):
    """The shape of a query dict: ``name=<type>`` per index, options and
    batch arguments shown, values redacted (sorted by name)."""
    parts = []
    try:
        names = sorted(query.keys(), key=str)
    except Exception:  # noqa: B902 - any mapping a caller passed
        return "<query>"
    for name in names:
        value = query[name]
        if name in PLAIN_KEYS:
            parts.append("%s=%s" % (name, _shown(value)))
        elif isinstance(value, dict) or (
                hasattr(value, "keys") and hasattr(value, "get")):
            options = []
            for option in sorted(value.keys(), key=str):
                if option in PLAIN_OPTIONS:
                    options.append("%s: %s" % (option,
                                               _shown(value[option])))
                else:
                    options.append("%s: %s" % (option, redact(value[option])))
            parts.append("%s={%s}" % (name, ", ".join(options)))
        else:
            parts.append("%s=%s" % (name, redact(value)))
    return " ".join(parts)


def record(store, query, plan, ms, answer=None, error=None):
    """Keep and log a slow search of ``store``'s catalog."""
    entry = SlowQuery(
        store.session.dsn, store.key, shape(query), ms,
        None if answer is None else len(answer.rids),
        None if answer is None else answer.count,
        type(plan).__name__ if plan is not None else "-",
        getattr(plan, "statement", None), error)
    with _lock:
        entry.id = next(_ids)
        _entries.append(entry)
    logger.warning("slow catalog search: %.1f ms, %s rows (total %s), plan "
                   "%s%s: %s", ms, "-" if entry.rows is None else entry.rows,
                   "?" if entry.total is None else entry.total, entry.plan,
                   ", " + error if error else "", entry.shape)
    return entry


def timed(store, query, plan, started, answer=None, error=None):
    """Record the search begun at ``started`` (perf_counter) if it took at
    least the session's ``slow-query-ms`` (0: off); a search that ended in
    ``error`` is recorded whenever the log is on."""
    threshold = store.session.slow_ms
    if not threshold:
        return None
    ms = (time.perf_counter() - started) * 1000.0
    if ms < threshold and error is None:
        return None
    return record(store, query, plan, ms, answer, error)


def entries(dsn, key):
    """The entries of catalog ``key`` (on ``dsn``), newest first."""
    with _lock:
        found = [e for e in _entries if e.key == key and e.dsn == dsn]
    found.reverse()
    return found


def get(dsn, key, entry_id):
    for entry in entries(dsn, key):
        if entry.id == entry_id:
            return entry
    return None


def clear(dsn=None, key=None):
    """Forget the entries (of catalog ``key`` only, when given)."""
    with _lock:
        kept = [e for e in _entries if key is not None and not (
            e.key == key and e.dsn == dsn)]
        _entries.clear()
        _entries.extend(kept)


def explain(store, entry):
    """``EXPLAIN (FORMAT TEXT)`` of a slow search's statement (planned
    again, in the caller's transaction: never executed), as text."""
    if entry.statement is None:
        return ""
    rows = store.rows(q("EXPLAIN (FORMAT TEXT) {}", entry.statement))
    return "\n".join(row[0] for row in rows)
