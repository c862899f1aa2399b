"""PostgreSQL's row estimates, asked once a while per statement.

Some plans choose how to read an answer by PostgreSQL's estimate of its
size (``plans.EveryMatch.small``: whole or its head; ``compiler`` for a
union of words: looked up or hashed).  The estimate is an ``EXPLAIN``:
a round trip and a planning of the statement, 0.5-0.8 ms for a keyword
search at 100,000 entries, as much as some of the searches it serves.

The estimate only chooses *how* to read: both ways give the same answer.
So it is kept in the process, by database, statement and values, for
:data:`TTL` seconds (PostgreSQL's statistics change when the table is
analyzed: an estimate a minute old is as good as a new one), at most
:data:`MAX` of them (the least recently used go first).  A stale estimate
costs time, never a wrong answer.
"""
import collections
import json
import threading
import time

#: seconds an estimate is used again
TTL = 60.0

#: estimates kept (the least recently used dropped first)
MAX = 1024

_kept = collections.OrderedDict()
_lock = threading.Lock()


def rows(store, explain):
    """The planner's row estimate of the ``EXPLAIN (FORMAT JSON)``
    statement ``explain`` (a Fragment), run in ``store``'s transaction
    unless a recent one is kept."""
    key = (store.session.dsn, explain.text, repr(explain.params))
    now = time.monotonic()
    with _lock:
        found = _kept.get(key)
        if found is not None and now - found[0] < TTL:
            _kept.move_to_end(key)
            return found[1]
    estimate = from_plan(store.execute(explain, prepare=False).fetchone()[0])
    with _lock:
        _kept[key] = (now, estimate)
        _kept.move_to_end(key)
        while len(_kept) > MAX:
            _kept.popitem(last=False)
    return estimate


def from_plan(plan):
    """The planner's row estimate from ``EXPLAIN (FORMAT JSON)``'s answer
    (a JSON list, or its text); infinite when unreadable."""
    try:
        if isinstance(plan, (str, bytes)):
            plan = json.loads(plan)
        return float(plan[0]["Plan"]["Plan Rows"])
    except (ValueError, TypeError, KeyError, IndexError):
        return float("inf")


def forget():
    """Drop every kept estimate (tests)."""
    with _lock:
        _kept.clear()
