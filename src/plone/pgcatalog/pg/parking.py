"""Connections whose COMMIT is on its way: a read-only transaction ends
without waiting for PostgreSQL's answer.

A catalog session that wrote nothing ends its PostgreSQL transaction with
``COMMIT`` (session.py).  Waiting for the server to answer costs a round
trip at the end of every request that read the catalog, for an answer
that is always the same.  :func:`park` sends the ``COMMIT`` (libpq's
``PQsendQuery``, through ``psycopg.pq``) and keeps the connection here
instead of giving it back to its pool; :func:`take` hands it to the next
transaction that needs a connection of the same server, after reading the
answer, which has long arrived by then.  The server ends the transaction
as soon as the ``COMMIT`` reaches it: a parked connection holds no
snapshot, no lock, nothing that keeps VACUUM from its work; only its
answer waits in the socket.

A connection whose answer is not ``COMMIT``'s (the server restarted, the
backend was killed) is given to ``discard`` and the next one is tried;
none left: the caller checks out of the pool as before.  There are at
most as many parked connections as sessions that ended at once (each
parks the connection it took, most often one it took from here), all
counted by their pool as in use; :func:`release_all` gives them back
(pools closing, tests).
"""
import select
import threading
import time

from psycopg import pq


#: seconds :func:`take` waits for a parked connection's answer before it
#: gives up on that connection (it is normally there already)
ANSWER_WAIT = 5.0
#: seconds :func:`park` waits for the socket to take the ``COMMIT``
SEND_WAIT = 5.0

_OK = pq.ExecStatus.COMMAND_OK
_IDLE = pq.TransactionStatus.IDLE

#: dsn -> connections whose COMMIT is on its way (last parked last)
_parked = {}
_lock = threading.Lock()


def park(dsn, conn):
    """Send ``COMMIT`` on ``conn`` (a connection in a transaction that
    wrote nothing, not in a pipeline) without waiting for its answer, and
    keep the connection for :func:`take`.  False when the connection
    cannot take it (broken): the caller discards it."""
    pgconn = conn.pgconn
    try:
        pgconn.send_query(b"COMMIT")
        deadline = time.monotonic() + SEND_WAIT
        while pgconn.flush():
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            select.select([], [pgconn.socket], [], left)
    except Exception:  # noqa: B902 - a closed or broken connection
        return False
    with _lock:
        _parked.setdefault(dsn, []).append(conn)
    return True


def take(dsn, discard):
    """A parked connection of ``dsn`` whose ``COMMIT`` succeeded, idle and
    ready, or None; connections whose answer was anything else go to
    ``discard(dsn, conn)``."""
    while True:
        with _lock:
            waiting = _parked.get(dsn)
            if not waiting:
                return None
            conn = waiting.pop()
        if _answered(conn):
            return conn
        discard(dsn, conn)


def _answered(conn):
    """Read the answer to the ``COMMIT`` sent on ``conn``: whether it
    committed and the connection is idle."""
    pgconn = conn.pgconn
    ok = True
    try:
        deadline = time.monotonic() + ANSWER_WAIT
        while True:
            pgconn.consume_input()
            if pgconn.is_busy():
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                select.select([pgconn.socket], [], [], left)
                continue
            result = pgconn.get_result()
            if result is None:
                break
            ok = ok and result.status == _OK
        return ok and pgconn.transaction_status == _IDLE
    except Exception:  # noqa: B902 - the connection broke while parked
        return False


def release_all(checkin, discard, dsn=None):
    """Give every parked connection (of ``dsn``, or all) back:
    ``checkin(dsn, conn)`` once its answer is read, else ``discard``."""
    with _lock:
        if dsn is None:
            found = [(d, c) for d, conns in _parked.items() for c in conns]
            _parked.clear()
        else:
            found = [(dsn, c) for c in _parked.pop(dsn, ())]
    for conn_dsn, conn in found:
        if _answered(conn):
            checkin(conn_dsn, conn)
        else:
            discard(conn_dsn, conn)


def count(dsn=None):
    """How many connections are parked (of ``dsn``, or all)."""
    with _lock:
        if dsn is not None:
            return len(_parked.get(dsn, ()))
        return sum(len(conns) for conns in _parked.values())
