"""RelStorage loading objects from a streaming standby (``ro-replica-conf``)
with plone.pgcatalog in RelStorage's database and that standby among the
catalog's ``standby-dsns``: a read-only transaction reads the catalog in
RelStorage's own snapshot on the standby (pg/sharing.py), so its answers
are the objects' moment whatever the standby's replay does; a transaction
that writes moves to the primary; a replica the catalog does not know
shares nothing.

Run by tests/test_replica_snapshot.py in its own process (Zope starts once
per process).  Prints one JSON line with the steps checked.
"""
import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SITE = "plone"
ADMIN = "admin"
FOLDER = "f"


def read(db):
    """In a read-only transaction of ``db``: the ids of the folder's
    Documents as the objects and as the catalog have them, their titles
    in the catalog, and where the catalog read."""
    from plone.pgcatalog.testing.zopeapp import Request
    with Request(db, SITE, ADMIN) as r:
        folder = r.site[FOLDER]
        objects = sorted(folder.objectIds())
        brains = r.site.portal_catalog.unrestrictedSearchResults(
            portal_type="Document",
            path="/".join(folder.getPhysicalPath()))
        entries = sorted(b.getId for b in brains)
        titles = sorted(b.Title for b in brains)
        session = r.site.portal_catalog._pgc_store().session
        where = {"shared": session.shared, "conn_dsn": session.conn_dsn}
    return objects, entries, titles, where


def run():
    from plone.pgcatalog.testing.replication import ReplicatedServers
    servers = ReplicatedServers(standbys=1)
    try:
        return _run(servers)
    finally:
        from plone.pgcatalog.pg import db as pgc_db
        pgc_db.close_pools()
        servers.close()


def _run(servers):
    sys.path.insert(0, HERE)
    from consistency_probe import replica_name
    from relstorage_scenario import make_site

    from plone.pgcatalog import config
    from plone.pgcatalog.pg import standby
    from plone.pgcatalog.testing.zopeapp import Request
    from plone.pgcatalog.testing.zopeapp import open_relstorage
    from plone.pgcatalog.testing.zopeapp import start_zope

    primary, (standby_dsn,) = servers.fresh_database("pgcatalog_replica")
    os.environ["PGCATALOG_DSN"] = primary
    os.environ["PGCATALOG_STANDBY_DSNS"] = standby_dsn
    os.environ["PGCATALOG_CACHE"] = "off"
    workdir = tempfile.mkdtemp(prefix="pgcatalog-replica-")
    checks = []

    def opened(name, replica):
        settings = {}
        if replica:
            settings["ro_replica_conf"] = os.path.join(workdir, name + ".conf")
            with open(settings["ro_replica_conf"], "w") as conf:
                conf.write(replica + "\n")
        return open_relstorage(primary, 400, os.path.join(workdir, name),
                               **settings)

    # the writer's database loads from the primary; the reader's from the
    # standby, as a Zope process with ro-replica-conf does
    writer = opened("writer", None)
    start_zope(writer, workdir)
    make_site(writer)
    with Request(writer, SITE, ADMIN, commit=True) as r:
        r.site.invokeFactory("Folder", FOLDER, title="F")
        r.site[FOLDER].invokeFactory("Document", "a", title="a-0")
    servers.wait_for_replay()
    reader = opened("reader", replica_name(standby_dsn))

    standby.forget()
    objects, entries, titles, where = read(reader)
    assert objects == entries == ["a"], (objects, entries)
    assert where["shared"], where
    on = standby.standbys_of(config.get_dsn())[0]
    assert where["conn_dsn"] == on.connect_dsn, where
    assert standby.status(config.get_dsn())["standbys"][0]["served"] == 1
    checks.append("read on the standby in RelStorage's snapshot")

    # replay paused: the primary moves on, the standby's objects and
    # catalog stay together (a catalog read on the primary would show
    # entries whose objects this transaction cannot load)
    servers.pause_replay(0)
    try:
        with Request(writer, SITE, ADMIN, commit=True) as r:
            r.site[FOLDER].invokeFactory("Document", "b", title="b-0")
            r.site[FOLDER]["a"].setTitle("a-1")
            r.site[FOLDER]["a"].reindexObject()
        for _ in range(3):
            objects, entries, titles, where = read(reader)
            assert objects == entries == ["a"], (objects, entries)
            assert titles == ["a-0"], titles
            assert where["shared"], where
        checks.append("replay paused: objects and catalog of one moment")
    finally:
        servers.resume_replay(0)
    servers.wait_for_replay()
    objects, entries, titles, where = read(reader)
    assert objects == entries == ["a", "b"], (objects, entries)
    assert titles == ["a-1", "b-0"], titles
    assert where["shared"], where
    checks.append("replay resumed: both moved on")

    # a transaction that writes: its catalog writes go to the primary
    with Request(reader, SITE, ADMIN, commit=True) as r:
        folder = r.site[FOLDER]
        assert len(r.site.portal_catalog.unrestrictedSearchResults(
            portal_type="Document")) == 2
        # (its reads so far were on the standby; its writes, sent at
        # the commit, cannot be: a standby refuses them)
        folder.invokeFactory("Document", "c", title="c-0")
    with Request(writer, SITE, ADMIN) as r:
        found = sorted(b.getId for b in
                       r.site.portal_catalog.unrestrictedSearchResults(
                           portal_type="Document"))
        assert found == ["a", "b", "c"], found
    servers.wait_for_replay()
    objects, entries, titles, where = read(reader)
    assert objects == entries == ["a", "b", "c"], (objects, entries)
    assert where["shared"], where
    checks.append("a writing transaction wrote on the primary")

    # the standby stopped: RelStorage cannot load (its list of replicas
    # has no other), the catalog raises no error of its own
    servers.stop_standby(0)
    try:
        for _ in range(3):
            try:
                objects, entries, titles, where = read(reader)
            except Exception as exc:  # noqa: B902 - RelStorage's own
                # RelStorage cannot load from a stopped replica: its
                # error, not the catalog's
                assert "catalog" not in type(exc).__module__, exc
                continue
            assert objects == entries, (objects, entries)
    finally:
        servers.start_standby(0)
    checks.append("standby stopped: no catalog error")

    # a replica the catalog does not know: nothing shared, answers checked
    # against the objects as on ZEO
    os.environ["PGCATALOG_STANDBY_DSNS"] = ""
    standby.forget()
    from plone.pgcatalog.pg import sharing
    sharing.forget()
    servers.wait_for_replay()
    objects, entries, titles, where = read(reader)
    assert objects == entries == ["a", "b", "c"], (objects, entries)
    assert not where["shared"] and where["conn_dsn"] == primary, where
    checks.append("a replica not among standby-dsns: nothing shared")
    # (the reader's database is left to the process's end: ZODB cannot
    # close connections whose storage lost its replica mid-transaction)
    writer.close()
    return checks


if __name__ == "__main__":
    print(json.dumps({"ok": True, "checks": run()}))
