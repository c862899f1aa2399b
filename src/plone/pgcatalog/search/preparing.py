"""Whether a search statement runs prepared: timed both ways, per text.

PostgreSQL plans an unprepared statement with its values every time.  On
a small catalog that planning costs more than running the plan (level2's
searches at 500 entries: 0.13-0.31 ms of planning against 0.02-0.2 ms of
execution), and a prepared statement saves it once PostgreSQL keeps a
generic plan (after five plans made with the values, when the generic
one's estimate is no worse).  But a generic plan can be slower than the
planning it saves (level2 with ``PGCATALOG_PLAN_CACHE_MODE=
force_generic_plan``, BENCHMARKS.md: a folder's listing 0.15 + 0.18 ms
planned with its values against 0.51 ms, text scoring 0.31 + 0.68 against
0.93 ms; at 10,000 entries a date-ordered page 0.9 -> 24 ms), so the
values' plans stay the rule and a statement text is prepared only where
it measured clearly faster:

- only while the catalog is small (fewer hot rows than :func:`rows`,
  PostgreSQL's statistics, or none yet; ``prepared-search-rows`` in
  configuration.md): a plan's worst there is a short walk of every entry;
- each text runs unprepared and prepared in turn: the first
  :data:`CUSTOM_PLANS` pairs are not counted (PostgreSQL plans a prepared
  statement's first five runs with their values too, and a process's
  first runs pay cold caches: timed first and alone, the unprepared runs
  made a slower generic plan look faster), the next :data:`TRIAL` pairs
  are, and the text is kept prepared when its median time is at most
  :data:`GAIN` of the unprepared one;
- a prepared run :data:`SLOWER` times the unprepared median (values the
  generic plan does not suit: a security filter keeping many more entries
  than the trial's) sends the text back to the values' plans;
- after :data:`RETRY` more runs it is timed again (the catalog and its
  statistics change).

An earlier trial of ``force_generic_plan`` below a size bound was not
kept: some statements (a folder's children, a page by date under a
security filter) were slower, 1.8-2.8x at 2,000 entries; timing each text
keeps those on the values' plans.

Which way a statement runs never changes its answer: whatever the plan,
an answer is put in its order (rid ties included) by its statement or in
Python.
"""
import time

from plone.pgcatalog import config


#: runs timed each way (after the uncounted pairs)
TRIAL = 5
#: the runs of a prepared statement PostgreSQL plans with their values
#: before it compares a generic plan (plancache.c)
CUSTOM_PLANS = 5
#: prepared when its median time is at most this share of unprepared
GAIN = 0.8
#: a prepared run this many times the unprepared median ends its choice
SLOWER = 3.0
#: runs after which a text is timed again
RETRY = 1000
#: statement texts remembered (all forgotten when there are more)
TEXTS = 500


class Timing:
    """One statement text's trials and its choice."""

    __slots__ = ("runs", "unprepared", "prepared", "choice", "bound")

    def __init__(self):
        self.runs = 0
        self.unprepared = []
        self.prepared = []
        self.choice = None
        #: a prepared run slower than this goes back to the values' plans
        self.bound = None

    def prepare(self):
        """Whether the next run is prepared."""
        if self.choice is not None:
            return self.choice
        return self.runs % 2 == 1

    def timed(self, prepared, seconds):
        """A run took ``seconds``."""
        self.runs += 1
        if self.choice is not None:
            if prepared and seconds > self.bound:
                # other values the generic plan does not suit (a security
                # filter that keeps more entries): the values' plans
                self.choice = False
            if self.runs >= RETRY:
                self.choice = None
                self.runs = 0
            return
        if self.runs <= 2 * CUSTOM_PLANS:
            return
        (self.prepared if prepared else self.unprepared).append(seconds)
        if len(self.prepared) >= TRIAL:
            unprepared = _median(self.unprepared)
            self.choice = _median(self.prepared) <= GAIN * unprepared
            self.bound = SLOWER * unprepared
            self.runs = 0
            self.unprepared, self.prepared = [], []


def _median(values):
    return sorted(values)[len(values) // 2]


#: statement text -> Timing (this process's)
_timings = {}
#: PREPARED_ROWS, read once
_rows = []


def rows():
    """:data:`config.get_prepared_search_rows`, read once per process."""
    if not _rows:
        _rows.append(config.get_prepared_search_rows())
    return _rows[0]


def small(store):
    """Whether ``store``'s database is small enough to try prepared
    searches (also when PostgreSQL has not analyzed its tables yet: new
    ones, as ``compiler.small`` takes them)."""
    limit = rows()
    if not limit:
        return False
    hot = store.hot_rows()
    return hot is None or hot < limit


def execute(store, statement, read):
    """``read(cursor)`` of the search ``statement`` run in ``store``,
    prepared or not as its text's timing says."""
    if not small(store):
        return read(store.execute(statement, prepare=False, binary=True))
    timing = _timings.get(statement.text)
    if timing is None:
        if len(_timings) >= TEXTS:
            _timings.clear()
        timing = _timings[statement.text] = Timing()
    prepare = timing.prepare()
    started = time.perf_counter()
    result = read(store.execute(statement, prepare=prepare, binary=True))
    timing.timed(prepare, time.perf_counter() - started)
    return result


def one(cursor):
    """The first row (a reader for :func:`execute`)."""
    return cursor.fetchone()


def every(cursor):
    """Every row (a reader for :func:`execute`)."""
    return cursor.fetchall()


def choices():
    """``{text: True (prepared) / False / None (timing)}``: what this
    process chose (tests)."""
    return {text: t.choice for text, t in list(_timings.items())}
