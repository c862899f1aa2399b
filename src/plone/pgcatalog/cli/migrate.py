"""``pgcatalog-migrate``: show, print or apply what the catalog tables'
schema lacks::

    pgcatalog-migrate [--dsn DSN | --zope-conf etc/zope.conf] [--sql | --apply]
                      [--grant ROLE] [--postings NAMES] [--json]

Without ``--sql`` or ``--apply`` it shows the database's schema version,
this release's, and each pending step: whether catalog writes wait while it
runs, roughly how long it takes for the entries the database holds, and
whether processes of the release before it keep running on the upgraded
database (a rolling deploy).  ``--sql`` prints the SQL it would run;
``--apply`` runs the pending steps, one transaction each, with progress
on stderr.  ``--grant ROLE`` gives a role of the running processes what
they need on the catalog tables and no more (with ``--sql``: prints it).
``--postings Title,Description`` names the text indexes whose postings
the database keeps for fast prefixes (docs/suggest.md; ``Title`` by
default).

The database: ``--dsn``, else the ``dsn`` of ``<product-config
plone.pgcatalog>`` in ``--zope-conf``, else ``PGCATALOG_DSN`` — the one the
processes use.  Run it as the role that owns the catalog tables (or may
create them): docs/upgrade.md lists the privileges.

Exit status: 0 up to date (or, with ``--apply``, brought up to date), 1
steps pending (status and ``--sql``), 2 error (no DSN, no connection, a
schema this release cannot upgrade or work on).
"""
import argparse
import json
import sys

import psycopg

from plone.pgcatalog import __version__
from plone.pgcatalog import config
from plone.pgcatalog.errors import PGCatalogError
from plone.pgcatalog.ops import postings
from plone.pgcatalog.pg.db import safe_dsn
from plone.pgcatalog.schema import migrations

CURRENT, PENDING, ERROR = 0, 1, 2


class CommandError(Exception):
    """A usage or state error reported in one line (exit status 2)."""


def parser():
    p = argparse.ArgumentParser(
        prog="pgcatalog-migrate",
        description="Show, print (--sql) or apply (--apply) the pending "
                    "steps of the plone.pgcatalog tables' schema.")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--dsn", metavar="DSN",
                       help="the PostgreSQL DSN (default: the zope.conf's, "
                            "else PGCATALOG_DSN)")
    where.add_argument("--zope-conf", metavar="PATH",
                       help="the instance's zope.conf: the DSN of its "
                            "<product-config plone.pgcatalog>")
    what = p.add_mutually_exclusive_group()
    what.add_argument("--sql", action="store_true",
                      help="print the SQL of the pending steps, run nothing")
    what.add_argument("--apply", action="store_true",
                      help="run the pending steps (progress on stderr)")
    p.add_argument("--grant", metavar="ROLE",
                   help="grant ROLE what running processes need on the "
                        "catalog tables (reading and writing rows; not "
                        "changing the schema): a least-privilege role, "
                        "docs/upgrade.md")
    p.add_argument("--postings", metavar="NAMES",
                   help="the text indexes (comma-separated names, '' for "
                        "none) whose postings the database keeps for fast "
                        "prefixes (Title by default): those taken off are "
                        "deleted, those added written from their text "
                        "rows; catalog writes wait meanwhile")
    p.add_argument("--json", action="store_true",
                   help="print the status as JSON")
    return p


def find_dsn(args):
    if args.dsn:
        return args.dsn
    if args.zope_conf:
        # the configuration only: no database is opened
        from Zope2.Startup.run import configure_wsgi
        try:
            configure_wsgi(args.zope_conf)
        except Exception as exc:  # noqa: B902 - ZConfig's and OS errors
            raise CommandError("cannot read %s: %s" % (args.zope_conf, exc))
    try:
        return config.get_dsn()
    except PGCatalogError as exc:
        raise CommandError(str(exc))


def _duration(seconds):
    if seconds < 1:
        return "under a second"
    if seconds < 90:
        return "about %d s" % round(seconds)
    return "about %d min" % round(seconds / 60.0)


def describe(state):
    """The status as a dict (what ``--json`` prints)."""
    steps = state.pending()
    return {
        "release": __version__,
        "release_schema_version": migrations.SCHEMA_VERSION,
        "database_schema_version": state.version,
        "database_compatible_from": state.compatible,
        "database_release": state.release,
        "prerelease_schema_version": state.prerelease,
        "entries": state.entries,
        "up_to_date": state.runs() and not steps,
        "pending": [{
            "version": step.version,
            "title": step.title,
            "blocks_writes": step.blocks_writes and not state.empty,
            "seconds_per_100000_entries": step.seconds_per_100k,
            "estimated_seconds": step.estimate(state.entries),
            "older_processes_keep_running": step.compatible,
        } for step in steps],
    }


def status_lines(dsn, state):
    lines = ["database: %s" % safe_dsn(dsn),
             "this release: pgcatalog-plone %s, schema version %d"
             % (__version__, migrations.SCHEMA_VERSION)]
    if state.prerelease is not None:
        lines.append(
            "schema: made by a development version from before the first "
            "release (version %s): no step upgrades it; give the catalog a "
            "new database (or drop the pgcatalog_* tables) and build it "
            "again" % state.prerelease)
        return lines
    if state.empty:
        lines.append("schema: none (no catalog tables yet)")
    else:
        lines.append("schema: version %d (made by pgcatalog-plone %s on "
                     "%s), processes of schema version %d and later run on "
                     "it; about %d entries"
                     % (state.version, state.release,
                        state.updated.strftime("%Y-%m-%d %H:%M %Z"),
                        state.compatible, state.entries))
    if state.version is not None and \
            state.version > migrations.SCHEMA_VERSION:
        lines.append(
            "newer than this release: %s" % (
                "its processes run on it" if state.runs() else
                "its processes cannot run on it; upgrade pgcatalog-plone"))
        return lines
    steps = state.pending()
    if not steps:
        lines.append("up to date")
        return lines
    lines.append("pending:")
    for step in steps:
        if step is migrations.CREATE:
            lines.append("  %d  %s" % (step.version, step.title))
            continue
        lines.append(
            "  %d  %s: %s; %s per 100,000 entries (%s here); %s"
            % (step.version, step.title,
               "catalog writes wait while it runs"
               if step.blocks_writes and not state.empty
               else "writes go on",
               _duration(step.seconds_per_100k),
               _duration(step.estimate(state.entries)),
               "processes of the release before it keep running"
               if step.compatible else
               "stop processes of older releases first"))
    lines.append("apply with: pgcatalog-migrate --apply (same options)")
    return lines


def run(dsn, args, out, err):
    try:
        conn = psycopg.connect(dsn, autocommit=True,
                               application_name="pgcatalog-migrate")
    except psycopg.Error as exc:
        raise CommandError("cannot connect to %s: %s"
                           % (safe_dsn(dsn), str(exc).strip()))
    with conn:
        state = migrations.read_state(conn)
        if args.json and not args.apply and not args.sql:
            out.write(json.dumps(describe(state), indent=1, default=str)
                      + "\n")
        elif not args.apply:
            if args.sql:
                home = migrations.home(conn)
                for step in state.pending():
                    out.write("-- %d: %s\n" % (step.version, step.title))
                    for text in step.sql(home):
                        out.write(text.rstrip().rstrip(";") + ";\n\n")
                if args.grant:
                    out.write("-- what %s may do\n" % args.grant)
                    for statement in migrations.grants(conn, args.grant):
                        out.write(statement.as_string(conn) + ";\n")
            elif not args.grant and args.postings is None:
                out.write("\n".join(status_lines(dsn, state)) + "\n")
        if state.prerelease is not None or (
                state.version is not None and not state.runs() and
                state.version > migrations.SCHEMA_VERSION):
            if args.apply or args.sql:
                err.write("\n".join(status_lines(dsn, state)[2:]) + "\n")
            return ERROR
        if not args.apply and (args.sql or not (args.grant or
                                                args.postings is not None)):
            return PENDING if state.pending() else CURRENT

        def progress(step, event, seconds):
            if event == "start":
                err.write("%d: %s ...\n" % (step.version, step.title))
            else:
                err.write("%d: done in %.1f s\n" % (step.version, seconds))
            err.flush()

        if args.apply:
            done = migrations.apply(conn, progress=progress)
            state = migrations.read_state(conn)
            out.write("schema version %s%s\n" % (
                state.version, "" if done else " (nothing to do)"))
        if args.grant:
            statements = migrations.grants(conn, args.grant)
            if not statements:
                raise CommandError("no catalog tables to grant on: run "
                                   "pgcatalog-migrate --apply first")
            with conn.transaction():
                for statement in statements:
                    conn.execute(statement)
            out.write("granted %s what running processes need on %d "
                      "catalog tables and sequences\n"
                      % (args.grant, len(statements) - 1))
        if args.postings is not None:
            if not state.runs() or state.pending():
                raise CommandError("the schema is not up to date: run "
                                   "pgcatalog-migrate --apply first")
            names = [n.strip() for n in args.postings.split(",")
                     if n.strip()]
            added, gone = postings.keep(conn, names)
            out.write("postings kept for: %s (added: %s; taken off: %s)\n"
                      % (", ".join(sorted(set(names))) or "none",
                         ", ".join(added) or "none",
                         ", ".join(gone) or "none"))
        return PENDING if state.pending() else CURRENT


def main(argv=None, out=None, err=None):
    out = sys.stdout if out is None else out
    err = sys.stderr if err is None else err
    args = parser().parse_args(argv)
    try:
        dsn = find_dsn(args)
        return run(dsn, args, out, err)
    except CommandError as exc:
        err.write("pgcatalog-migrate: %s\n" % exc)
        return ERROR
    except psycopg.Error as exc:
        err.write("pgcatalog-migrate: PostgreSQL refused: %s\n"
                  % str(exc).strip())
        return ERROR


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
