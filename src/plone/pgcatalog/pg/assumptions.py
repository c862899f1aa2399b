"""What a search being compiled assumes, checked in its own snapshot.

Some rows a plan needs before its statement change rarely but are kept
under counters that move often: the key sets' ids of hot conditions
(``keptsets.py``) and a glob's words (``textstats.words``) are read again
after every edit of a state or a text.  Read alone, each costs the search
a round trip.  Instead the search assumes the row this process found last
and sends its statement with the search's own, in the same round trip and
the same snapshot (``REPEATABLE READ``); once the search ran, its caller
asks :meth:`Assumptions.wrong` and, when the snapshot holds another row,
compiles and reads the search again (``run.answer_of``).
"""


class Assumptions:
    """The rows one transaction's search assumes (owned by its store)."""

    def __init__(self, session):
        self.session = session
        #: a search being compiled may assume rows (its caller checks)
        self.allowed = False
        #: ``[assumed row, row found or None, callback, same]`` of each
        self.made = []

    def start(self):
        """A search is compiled: it may assume rows."""
        self.made = []
        self.allowed = True

    def stop(self):
        """The search is compiled: nothing more is assumed."""
        self.allowed = False

    def assume(self, statement, row, found, same=None):
        """Assume ``row`` for ``statement`` (a Fragment of one row whose
        answer this process found before, in another snapshot): the
        statement goes with the transaction's next one.  ``found(row)``
        gets the row found, when :meth:`wrong` is asked; ``same(assumed,
        found)`` says whether the assumption held (default: equal)."""
        check = [row, None, found, same]
        self.made.append(check)

        def checked(rows):
            check[1] = tuple(rows[0])

        self.session.ride(statement, checked)

    def wrong(self):
        """Whether a row was assumed that this snapshot does not hold, or
        could not be checked (its statement did not go with another); the
        assumptions are forgotten, what was found given to their
        callbacks."""
        made, self.made = self.made, []
        wrong = False
        for row, found, keep, same in made:
            if found is None:
                wrong = True
                continue
            keep(found)
            if not (same(row, found) if same is not None else
                    row == found):
                wrong = True
        return wrong
