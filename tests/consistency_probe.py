"""Catalog and objects in the same transaction, across processes.

A Plone site on history-free RelStorage with plone.pgcatalog in the same
PostgreSQL database (two-phase commit on), or with ``--catalog other`` in
another database of the server (the catalog then takes snapshots of its
own, as on ZEO or FileStorage).  Writer processes create, edit,
rename and delete documents, committing as fast as they can; reader
processes, in every transaction, ask the catalog and compare each answer
with the objects the same transaction can load:

* ``behind``: an object the transaction loads that the answer misses;
* ``ahead``: an entry whose object the transaction cannot load;
* ``stale``: an entry whose title is not its object's;
* ``errors``: an exception while searching or iterating the brains (a
  retryable conflict, counted apart, is not one: the publisher retries it);
* ``diverged``: after the run, documents whose entry is missing or holds
  another title than the document (a lost catalog write);
* ``stale_loads``: in a writer's process, a transaction begun after the
  writer logged a commit of its own document, which uses the catalog and
  then loads an older state of that document (RelStorage's load, the
  catalog sharing its snapshot).

With ``--standby`` the server is a primary with a streaming hot standby
(testing/replication.py) and the processes may read the catalog there
(``PGCATALOG_STANDBY_DSNS``, docs/standbys.md; with ``--catalog same``
a catalog sharing RelStorage's snapshot reads where RelStorage loads: the
primary, unless ``--ro-replica``); the readers
report how many of their transactions the standby served.  With
``--ro-replica`` the readers' RelStorage loads objects from the standby as
well (``ro-replica-conf``), and a catalog in RelStorage's database reads in
RelStorage's snapshot there (pg/sharing.py).

Usage (prints one JSON line)::

    python tests/consistency_probe.py [--seconds 120] [--writers 2]
        [--readers 3] [--cache on|off] [--catalog same|other]
        [--standby [--no-route] [--ro-replica]]

tests/test_consistency.py runs it briefly; a longer run is a measurement
(docs/transactions.md).
"""
import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time

import transaction

SITE = "plone"
ADMIN = "admin"
FOLDER = "probe"
HERE = os.path.dirname(os.path.abspath(__file__))


def _open(dsn, workdir, replica=None):
    from plone.pgcatalog.testing.zopeapp import open_relstorage
    from plone.pgcatalog.testing.zopeapp import start_zope
    settings = {}
    if replica:
        # RelStorage loads objects from the standby (ro-replica-conf)
        settings["ro_replica_conf"] = os.path.join(workdir, "ro-replicas")
        with open(settings["ro_replica_conf"], "w") as conf:
            conf.write(replica + "\n")
    db = open_relstorage(dsn, cache_size=400, workdir=workdir, **settings)
    start_zope(db, workdir)
    return db


def setup(dsn, workdir, docs):
    from relstorage_scenario import make_site

    from plone.pgcatalog.testing.zopeapp import Request
    db = _open(dsn, workdir)
    make_site(db)
    with Request(db, SITE, ADMIN, commit=True) as r:
        r.site.invokeFactory("Folder", FOLDER, title="Probe")
        folder = r.site[FOLDER]
        for i in range(docs):
            folder.invokeFactory("Document", "d%d" % i,
                                 title="t%d-0" % i)
    db.close()


def loader(db, end, own, seed, counts):
    """In a writer's process, beside it: each transaction, begun after the
    writer logged a commit of its own document, uses the catalog and loads
    that document, which must be at least as new as the logged commit."""
    from transaction.interfaces import TransientError

    from plone.pgcatalog.testing.zopeapp import Request
    while time.monotonic() < end:
        logged = own[0]
        if logged is None:
            time.sleep(0.01)
            continue
        try:
            with Request(db, SITE, ADMIN) as r:
                len(r.site.portal_catalog.unrestrictedSearchResults(
                    portal_type="Document"))
                title = r.site["own-%d" % seed].Title()
                counts["loads"] += 1
                if int(title.rsplit("-", 1)[1]) < logged:
                    counts["stale_loads"] += 1
        except TransientError:
            pass


def writer(db, seconds, seed):
    import threading

    from transaction.interfaces import TransientError

    from plone.pgcatalog.testing.zopeapp import Request
    rnd = random.Random(seed)
    done = retries = failures = 0
    errors = []
    end = time.monotonic() + seconds
    n = 0
    own = [None]
    counts = {"loads": 0, "stale_loads": 0}
    thread = threading.Thread(target=loader,
                              args=(db, end, own, seed, counts))
    thread.start()
    while time.monotonic() < end:
        n += 1
        op = rnd.random()
        try:
            if n % 4 == 0:
                # its own document, outside the probed folder
                with Request(db, SITE, ADMIN, commit=True) as r:
                    name = "own-%d" % seed
                    if name not in r.site.objectIds():
                        r.site.invokeFactory("Document", name)
                    r.site[name].setTitle("own-%d" % n)
                    r.site[name].reindexObject()
                own[0] = n
                done += 1
                continue
            with Request(db, SITE, ADMIN, commit=True) as r:
                folder = r.site[FOLDER]
                ids = folder.objectIds()
                if op < 0.25 or len(ids) < 5:
                    new = "w%d-%d" % (seed, n)
                    folder.invokeFactory("Document", new,
                                         title="%s-%d" % (new, n))
                elif op < 0.7:
                    doc = folder[rnd.choice(ids)]
                    doc.setTitle("%s-%d" % (doc.getId(), n))
                    doc.reindexObject()
                elif op < 0.85:
                    folder.manage_delObjects([rnd.choice(ids)])
                else:
                    old = rnd.choice(ids)
                    folder.manage_renameObject(old, "r%d-%d" % (seed, n))
            done += 1
        except TransientError:
            retries += 1
        except Exception as exc:  # noqa: B902 - counted
            failures += 1
            if len(errors) < 5:
                import traceback
                errors.append(traceback.format_exc()[-1500:])
    thread.join()
    return {"commits": done, "retries": retries, "failures": failures,
            "errors": errors, "loads": counts["loads"],
            "stale_loads": counts["stale_loads"]}


QUERIES = [
    lambda path: {"portal_type": "Document", "path": path},
    lambda path: {"path": {"query": path, "depth": 1},
                  "sort_on": "getObjPositionInParent"},
    lambda path: {"portal_type": "Document", "path": path,
                  "sort_on": "modified", "sort_order": "descending",
                  "b_size": 20},
]


def compare(folder, brains, full):
    """(behind, ahead, stale) of one answer against the objects: objects
    the answer misses (``full`` answers only), entries whose object the
    transaction cannot load, entries whose title is not their object's."""
    objects = {}
    for child in folder.objectValues():
        if getattr(child, "portal_type", None) == "Document":
            objects["/".join(child.getPhysicalPath())] = child.Title()
    seen = {}
    ahead = stale = 0
    for brain in brains:
        path = brain.getPath()
        seen[path] = brain.Title
        try:
            obj = brain._unrestrictedGetObject()
        except (KeyError, AttributeError):
            obj = None
        if obj is None:
            ahead += 1
        elif obj.Title() != brain.Title:
            stale += 1
    behind = len(set(objects) - set(seen)) if full else 0
    return behind, ahead, stale


def reader(db, seconds, seed):
    from transaction.interfaces import TransientError

    from plone.pgcatalog.testing.zopeapp import Request
    rnd = random.Random(seed)
    counts = {"transactions": 0, "answers": 0, "behind": 0, "ahead": 0,
              "stale": 0, "old_objects": 0,
              "transactions_off": 0, "errors": 0, "conflicts": 0}
    samples = []
    end = time.monotonic() + seconds
    #: each reader transaction (its begin, searches, objects compared, end)
    durations = []
    while time.monotonic() < end:
        started = time.perf_counter()
        try:
            with Request(db, SITE, ADMIN) as r:
                folder = r.site[FOLDER]
                path = "/".join(folder.getPhysicalPath())
                catalog = r.site.portal_catalog
                off = False
                for _ in range(2):
                    index = rnd.randrange(len(QUERIES))
                    query = QUERIES[index](path)
                    brains = list(catalog.unrestrictedSearchResults(query))
                    behind, ahead, stale = compare(
                        folder, brains, full="b_size" not in query)
                    counts["answers"] += 1
                    counts["behind"] += behind
                    counts["ahead"] += ahead
                    counts["stale"] += stale
                    if behind or ahead or stale:
                        off = True
                        if len(samples) < 5:
                            samples.append({
                                "query": index, "behind": behind,
                                "ahead": ahead, "stale": stale,
                                "missing": sorted(
                                    "/".join(o.getPhysicalPath())
                                    for o in folder.objectValues()
                                    if "/".join(o.getPhysicalPath())
                                    not in {b.getPath() for b in brains})
                                [:3]})
                counts["transactions"] += 1
                counts["transactions_off"] += off
                durations.append(time.perf_counter() - started)
                # the objects as RelStorage stored them in this snapshot
                # (the catalog's, which is RelStorage's when shared): a
                # loaded state older than that is RelStorage's own lag
                session = catalog._pgc_store().session
                if getattr(session, "shared", False):
                    from ZODB.utils import u64
                    oid = u64(folder._p_oid)
                    row = session.execute(
                        "SELECT tid FROM object_state WHERE zoid = %s",
                        (oid,)).fetchone()
                    if row and row[0] != u64(folder._p_serial):
                        counts["old_objects"] += 1
        except TransientError:
            counts["conflicts"] += 1
        except Exception as exc:  # noqa: B902 - counted
            counts["errors"] += 1
            if len(samples) < 10:
                samples.append({"error": "%s: %s" % (type(exc).__name__,
                                                     exc)})
    counts["samples"] = samples
    counts["durations"] = durations
    from plone.pgcatalog.search import cache
    counts["cache"] = cache.stats()
    from plone.pgcatalog import config
    from plone.pgcatalog.pg import standby
    served = standby.status(config.get_dsn())
    counts["primary_served"] = served["primary_served"]
    counts["standby_served"] = sum(s["served"] for s in served["standbys"])
    counts["standby_behind"] = sum(s["behind"] for s in served["standbys"])
    return counts


def final_check(db):
    """After the run, in a new transaction: the catalog holds exactly the
    folder's documents with their titles (nothing lost)."""
    from plone.pgcatalog.testing.zopeapp import Request
    with Request(db, SITE, ADMIN) as r:
        folder = r.site[FOLDER]
        objects = {"/".join(o.getPhysicalPath()): o.Title()
                   for o in folder.objectValues()
                   if getattr(o, "portal_type", None) == "Document"}
        entries = {b.getPath(): b.Title
                   for b in r.site.portal_catalog.unrestrictedSearchResults(
                       portal_type="Document",
                       path="/".join(folder.getPhysicalPath()))}
        differ = sorted(set(objects.items()) ^ set(entries.items()))
        return {"documents": len(objects), "diverged": len(differ),
                "diverged_samples": differ[:6]}


def child(args):
    sys.path.insert(0, HERE)
    os.environ["PGCATALOG_DSN"] = args.dsn
    os.environ["PGCATALOG_CACHE"] = args.cache
    if args.standby_dsns:
        os.environ["PGCATALOG_STANDBY_DSNS"] = args.standby_dsns
    workdir = tempfile.mkdtemp(prefix="pgcatalog-probe-")
    # (the writers' RelStorage loads from the primary: a lagging replica
    # does not hold what their process just committed, RelStorage's own
    # limit; editors' Zope processes are set up so)
    db = _open(args.storage_dsn or args.dsn, workdir,
               args.ro_replica if args.role == "reader" else None)
    if args.role == "check":
        result = final_check(db)
    else:
        role = writer if args.role == "writer" else reader
        result = role(db, args.seconds, args.seed)
    result["role"] = args.role
    try:
        db.close()
    except Exception as exc:  # noqa: B902 - the counts are what matter
        result["close_error"] = "%s: %s" % (type(exc).__name__, exc)
    print(json.dumps(result))


def parent(args):
    sys.path.insert(0, HERE)
    from plone.pgcatalog.testing import pgserver
    servers = None
    if args.standby:
        from plone.pgcatalog.testing.replication import ReplicatedServers
        servers = ReplicatedServers(standbys=1)
        dsn, standbys = servers.fresh_database("pgcatalog_probe")
        # (--no-route: the standby replays, the primary serves every read:
        # the same machine's load, to compare with)
        args.standby_dsns = "" if args.no_route else ";".join(standbys)
        fresh = servers.fresh_database
    else:
        dsn = pgserver.fresh_database("pgcatalog_probe")
        fresh = pgserver.fresh_database
    args.storage_dsn = dsn
    storage_standbys = servers is not None and standbys
    if args.catalog == "other":
        args.storage_dsn = fresh("pgcatalog_probe_zodb")
        if servers is not None:
            args.storage_dsn, storage_standbys = args.storage_dsn
    if args.ro_replica:
        if not storage_standbys:
            raise SystemExit("--ro-replica needs --standby")
        args.ro_replica = replica_name(storage_standbys[0])
    os.environ["PGCATALOG_DSN"] = dsn
    # the site, in a process of its own (Zope starts once per process)
    subprocess.run([sys.executable, __file__, "--setup", "--dsn", dsn,
                    "--storage-dsn", args.storage_dsn,
                    "--docs", str(args.docs)], check=True)
    procs = []
    for i in range(args.writers):
        procs.append(_spawn(args, dsn, "writer", 100 + i))
    for i in range(args.readers):
        procs.append(_spawn(args, dsn, "reader", 200 + i))
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=args.seconds + 300)
        lines = [line for line in out.splitlines() if line.startswith("{")]
        if proc.returncode or not lines:
            raise RuntimeError("a probe process failed:\n" + err[-3000:])
        results.append(json.loads(lines[-1]))
    check = _spawn(args, dsn, "check", 0)
    out, err = check.communicate(timeout=300)
    lines = [line for line in out.splitlines() if line.startswith("{")]
    if check.returncode or not lines:
        raise RuntimeError("the final check failed:\n" + err[-3000:])
    final = json.loads(lines[-1])
    total = {"writers": args.writers, "readers": args.readers,
             "seconds": args.seconds, "cache": args.cache,
             "catalog": args.catalog}
    for key in ("commits", "retries", "failures", "loads", "stale_loads"):
        total[key] = sum(r.get(key, 0) for r in results
                         if r["role"] == "writer")
    total["standby"] = bool(args.standby)
    total["routed"] = bool(args.standby_dsns)
    total["ro_replica"] = bool(args.ro_replica)
    for key in ("transactions", "answers", "behind", "ahead", "stale",
                "old_objects", "primary_served", "standby_served",
                "standby_behind",
                "transactions_off", "errors", "conflicts"):
        total[key] = sum(r.get(key, 0) for r in results
                         if r["role"] == "reader")
    total["hits"] = sum(r["cache"]["hits"] for r in results
                        if r["role"] == "reader" and r["cache"])
    total["misses"] = sum(r["cache"]["misses"] for r in results
                          if r["role"] == "reader" and r["cache"])
    total["samples"] = [s for r in results if r["role"] == "reader"
                        for s in r["samples"]][:10]
    durations = sorted(d for r in results if r["role"] == "reader"
                       for d in r["durations"])
    if durations:
        # a reader transaction, begun to ended (ms)
        total["reader_p50_ms"] = round(
            1000.0 * durations[len(durations) // 2], 2)
        total["reader_p99_ms"] = round(
            1000.0 * durations[int(0.99 * (len(durations) - 1))], 2)
    total["writer_errors"] = [e for r in results if r["role"] == "writer"
                              for e in r["errors"]][:5]
    total["documents"] = final["documents"]
    total["diverged"] = final["diverged"]
    total["diverged_samples"] = final["diverged_samples"]
    from plone.pgcatalog.pg import db as pgc_db
    pgc_db.close_pools()
    if servers is not None:
        servers.close()
    else:
        pgserver.drop_database(dsn)
        if args.storage_dsn != dsn:
            pgserver.drop_database(args.storage_dsn)
    print(json.dumps(total))
    return total


def replica_name(dsn):
    """A standby's DSN as RelStorage's ro-replica-conf names it
    (``host:port``)."""
    from psycopg.conninfo import conninfo_to_dict
    params = conninfo_to_dict(dsn)
    return "%s:%s" % (params["host"], params.get("port", 5432))


def _spawn(args, dsn, role, seed):
    return subprocess.Popen(
        [sys.executable, __file__, "--child", role, "--dsn", dsn,
         "--storage-dsn", args.storage_dsn,
         "--seconds", str(args.seconds), "--seed", str(seed),
         "--cache", args.cache] + (
             ["--standby-dsns", args.standby_dsns] if args.standby_dsns
             else []) + (
             ["--ro-replica", args.ro_replica] if args.ro_replica
             else []), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--seconds", type=float, default=120)
    p.add_argument("--writers", type=int, default=2)
    p.add_argument("--readers", type=int, default=3)
    p.add_argument("--docs", type=int, default=60)
    p.add_argument("--cache", default="on")
    p.add_argument("--catalog", choices=("same", "other"), default="same",
                   help="the catalog in RelStorage's database, or in "
                        "another one")
    p.add_argument("--dsn")
    p.add_argument("--storage-dsn")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--standby", action="store_true",
                   help="a primary with a streaming standby; the catalog "
                        "may read on the standby")
    p.add_argument("--no-route", action="store_true",
                   help="with --standby: the standby replays, but every "
                        "read goes to the primary")
    p.add_argument("--ro-replica", nargs="?", const=True, default=None,
                   help="with --standby: the readers' RelStorage loads "
                        "objects from the standby too (ro-replica-conf); "
                        "with --catalog same the catalog reads in its "
                        "snapshot there")
    p.add_argument("--standby-dsns", help=argparse.SUPPRESS)
    p.add_argument("--child", dest="role")
    p.add_argument("--setup", action="store_true")
    args = p.parse_args(argv)
    if args.setup:
        sys.path.insert(0, HERE)
        os.environ["PGCATALOG_DSN"] = args.dsn
        setup(args.storage_dsn or args.dsn,
              tempfile.mkdtemp(prefix="pgcatalog-probe-"), args.docs)
        return
    if args.role:
        child(args)
        return
    parent(args)


if __name__ == "__main__":
    main()
