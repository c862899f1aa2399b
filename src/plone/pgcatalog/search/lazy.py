"""Big every-match answers, read as they are used.

``len(catalog(portal_type="Document"))`` and the first page of an unbatched
answer are what most callers want of a big answer (plone.restapi's
``@search`` counts and slices; listings show twenty brains).  An every-match
answer read from the hot rows (``plans.EveryMatch`` with a head) therefore
comes as its count and its first :data:`HEAD` rids in rid order, one
statement; the rest is read when something first needs it: an item or a
slice up to :data:`WINDOWS_UP_TO` reads the rids before it a window at a
time (the rids after the last known one, in rid order, at least as many as
are known), anything else (an iteration, membership, a later item) the
statement that reads every match.

The rest must be what the search found, as ZCatalog's rid set is fixed when
the search runs.  It is, because it is read in the same PostgreSQL snapshot
with nothing written since:

* a sequence (:class:`LazyRids`) remembers its session and the session's
  ``epoch``, which moves whenever what its statements see may change (its
  writes sent, a savepoint rolled back, its PostgreSQL transaction ended or
  begun, its connection lost);
* before the session moves its epoch on purpose (writes, rollback to a
  savepoint, commit, abort), it *settles* its open sequences: each reads its
  rest in the state it was found in (:func:`settle`).  A loop that reads a big
  answer and changes what it matched (publishing every private document)
  sees the answer of the search, not of its own changes;
* while sequences are open, the session's reads run in a savepoint, so a
  refused statement does not end the snapshot they need
  (``session._run``).

So a big answer costs its count and its head, and the whole read only when
it is read or is still held when its transaction writes or ends (then no
more than the eager answer cost).  What cannot happen silently: a sequence
whose snapshot went away unread (the connection died, or settling failed)
raises :class:`~plone.pgcatalog.errors.AnswerLost` (a ``TransientError``:
the publisher retries) instead of answering from another state.

A cached answer (``cache.py``) keeps its count and head; the first
transaction whose snapshot is exactly the cached state that reads its rest
adds it (``Answer.learns``).
"""
import logging
import weakref

from plone.pgcatalog.errors import AnswerLost

logger = logging.getLogger("plone.pgcatalog")

#: rids read with the count of a big every-match answer (and the largest
#: answer read whole at once)
HEAD = 100

#: an item up to this position past the head is read with the rids before
#: it, a window at a time in rid order (each at least as many as are known,
#: so a loop of items doubles what it has); past it, or for an iteration,
#: membership or a slice with a negative step, every rid at once
WINDOWS_UP_TO = 5000

#: an answer PostgreSQL estimates at no more matches than this is read
#: whole in the count's scan (plans.EveryMatch): the head would cost a
#: second walk of the rows, more than reading this many rids whole
WHOLE = 20000

#: an answer whose number the key sets' kept counts give (no row read to
#: count it: plans.EveryMatch ``counted``) is read whole when it has at
#: most this many matches, else as its count and head: reading 5,255 rids
#: at 10,000 entries cost more than the head's walk of 100 (``P3``: 2.2
#: -> 1.4-2.0 ms)
WHOLE_COUNTED = 1000


class LazyRids:
    """The rids of a big answer for one result sequence: its head at once,
    every rid when an item past the head (or the whole) is asked for."""

    __slots__ = ("answer", "rids", "session", "epoch", "store",
                 "__weakref__")

    def __init__(self, answer, store):
        self.answer = answer
        #: the head; every rid once read
        self.rids = answer.rids
        session = store.session
        self.session = weakref.ref(session)
        self.store = weakref.ref(store)
        self.epoch = session.epoch
        session.track_lazy(self)

    def __len__(self):
        return self.answer.count

    @property
    def complete(self):
        return len(self.rids) >= self.answer.count

    def known(self, start, stop):
        """``rids[start:stop]`` as far as they are known (no statement)."""
        return self.rids[start:stop]

    def __getitem__(self, index):
        rids = self.rids
        if isinstance(index, slice):
            start, stop, step = index.indices(self.answer.count)
            if step < 0 or (stop > len(rids) and start < stop):
                rids = self.read(stop if step > 0 else None)
            return rids[index]
        count = self.answer.count
        if index < 0:
            index += count
        if not 0 <= index < count:
            raise IndexError(index)
        if index >= len(rids):
            rids = self.read(index + 1)
        return rids[index]

    def __iter__(self):
        return iter(self.read())

    def __contains__(self, rid):
        return rid in self.read()

    def read(self, stop=None):
        """Every rid, in rid order (read now if not yet); with ``stop``, at
        least the first ``stop`` (a window when it is at most
        WINDOWS_UP_TO)."""
        if self.complete or (stop is not None and stop <= len(self.rids)):
            return self.rids
        answer = self.answer
        full = answer.rids
        if answer.rest is None and len(full) >= answer.count:
            # another sequence of the cached answer read it
            self.rids = full
            return full
        session = self.session()
        if session is not None and session.epoch == self.epoch and \
                session.pending:
            # the pending writes go first, and this sequence is settled
            # before them, in the state it was found in
            session.flush()
            if self.complete:
                return self.rids
        if stop is not None and stop <= WINDOWS_UP_TO and \
                answer.window is not None and self.rids:
            self.fetch_window(stop)
        else:
            self.fetch()
        return self.rids

    def _found_session(self):
        """The session whose state this answer was found in, or
        AnswerLost when that state is gone."""
        session = self.session()
        if session is None or session.epoch != self.epoch:
            raise AnswerLost(
                "a big catalog answer was read after the state it was "
                "found in was lost (its connection went away); search "
                "again")
        return session

    def _lost(self, session):
        """A read gave another state than the answer's (it ran on a new
        connection: the one it was found on died)."""
        session.untrack_lazy(self)
        raise AnswerLost(
            "a big catalog answer could not be read in the state it was "
            "found in (its connection was lost); search again")

    def fetch_window(self, stop):
        """Read the rids after the known ones in rid order, at least up to
        ``stop`` and at least as many as are known, in the snapshot this
        answer was found in; AnswerLost when that snapshot is gone."""
        session = self._found_session()
        known = self.rids
        wanted = max(stop - len(known), len(known))
        row = session.execute_settled(self.answer.window(known[-1], wanted))
        if session.epoch != self.epoch:
            self._lost(session)
        more = row[0] or []
        rids = known + more
        if len(rids) >= self.answer.count or len(more) < wanted:
            # the last window: the rids must add up to the count
            if len(rids) != self.answer.count:
                self._lost(session)
            session.untrack_lazy(self)
        self.rids = rids

    def fetch(self):
        """Read every rid in the snapshot this answer was found in;
        AnswerLost when that snapshot is gone."""
        session = self._found_session()
        answer = self.answer
        statement = answer.rest
        if statement is None:   # another sequence of the answer read it
            self.rids = answer.rids
            session.untrack_lazy(self)
            return
        count, rids = session.execute_settled(statement)
        if session.epoch != self.epoch or count != answer.count:
            # read on a new connection (the one it was found on died)
            self._lost(session)
        rids = rids or []
        rids.sort()
        self.rids = rids
        session.untrack_lazy(self)
        store = self.store()
        if answer.rest is statement and store is not None and \
                answer.learns(store):
            added = len(rids) - len(answer.rids)
            answer.rids = rids
            answer.rest = None
            if answer.cache is not None:
                answer.cache.grew(answer.origin or answer, 40 * added)


def open_sequences(session):
    """The session's sequences whose rest is not read yet."""
    return [seq for seq in list(session.lazy) if not seq.complete]


def settle(session):
    """Read the rest of every open sequence of ``session`` found in its
    current state (the session is about to change it).  A failure is
    logged, not raised: the writes or the commit go on, and the sequence
    raises AnswerLost if it is read later."""
    for seq in open_sequences(session):
        if seq.epoch != session.epoch:
            session.untrack_lazy(seq)
            continue
        try:
            seq.fetch()
        except Exception:
            logger.warning("could not read the rest of a big catalog answer "
                           "before its state changed", exc_info=True)
            session.untrack_lazy(seq)
