"""``pgcatalog-verify``: compare a site's catalog with its ZODB (and repair
it), from the command line::

    pgcatalog-verify --zope-conf etc/zope.conf --site Plone [--repair]
                     [--quick] [--batch 500] [--json] [--list] [--sample 20]

Opens the Zope application from the zope.conf (as ``zconsole`` does: a
request, the system user), verifies the site's ``portal_catalog`` in
batches (``plone.pgcatalog.ops.verify``) and prints the report.  Each batch ends
its transaction: committed with ``--repair`` (a repair done is kept however
the run ends), aborted otherwise (no snapshot held for the whole run).
With ``--repair``, a batch's differences are confirmed in a new
transaction before they are repaired, so what the site changed meanwhile
is not undone (``verify.Verifier._confirm``).
Progress goes to stderr, the report to stdout (JSON with ``--json``; every
difference as it is found, tab-separated, with ``--list``).

Exit status: 0 clean, 1 differences found (with ``--repair`` too: run again
to see 0), 2 error.  See docs/verify.md.
"""
import argparse
import json
import sys
import time
import traceback

import transaction
from Acquisition import aq_base
from ZODB.POSException import ConflictError
from zope.component.hooks import getSite
from zope.component.hooks import setSite

from plone.pgcatalog.errors import PGCatalogError
from plone.pgcatalog.ops import verify

CLEAN, DIFFERENCES, ERROR = 0, 1, 2
#: seconds between two progress lines
PROGRESS_EVERY = 2.0


class CommandError(Exception):
    """A usage error reported in one line (exit status 2)."""


def _positive(text):
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError("must be a whole number >= 1, not %r"
                                         % text)
    return value


def parser():
    p = argparse.ArgumentParser(
        prog="pgcatalog-verify",
        description="Compare a Plone site's catalog (plone.pgcatalog) with "
                    "its ZODB; repair the differences on request.")
    p.add_argument("--zope-conf", required=True, metavar="PATH",
                   help="the instance's zope.conf")
    p.add_argument("--site", required=True, metavar="ID",
                   help="the Plone site's id (or path) in the application")
    p.add_argument("--repair", action="store_true",
                   help="reindex stale and missing entries, uncatalog "
                        "orphans; commits after each batch")
    p.add_argument("--batch", type=_positive, default=verify.DEFAULT_BATCH,
                   metavar="N", help="entries/objects per batch (default "
                                     "%(default)s)")
    p.add_argument("--quick", action="store_true",
                   help="look for orphans, missing and stale entries only "
                        "(no index values or metadata compared: much "
                        "faster)")
    p.add_argument("--json", action="store_true",
                   help="print the report as JSON")
    p.add_argument("--list", action="store_true",
                   help="print every difference as it is found")
    p.add_argument("--sample", type=_positive, default=verify.DEFAULT_SAMPLE,
                   metavar="N", help="paths kept per kind in the report "
                                     "(default %(default)s)")
    return p


def open_app(zope_conf):
    """The Zope application of ``zope_conf``, with a request and the system
    user (as ``Zope2.utilities.zconsole`` sets them up)."""
    # imported here: configuring Zope is this command's business only
    import Zope2
    from AccessControl.SecurityManagement import newSecurityManager
    from AccessControl.users import system
    from Testing.makerequest import makerequest
    from Zope2.Startup.run import make_wsgi_app
    from zope.globalrequest import setRequest
    make_wsgi_app({}, zope_conf)
    app = makerequest(Zope2.app())
    app.REQUEST["PARENTS"] = [app]
    setRequest(app.REQUEST)
    newSecurityManager(None, system)
    return app


def find_catalog(app, site_id):
    site = app.unrestrictedTraverse(site_id.strip("/"), None)
    if site is None:
        raise CommandError("no site %r in the application" % site_id)
    catalog = getattr(aq_base(site), "portal_catalog", None)
    # (the tool's marker, as indexes.common.find_tool reads it)
    if catalog is None or not getattr(catalog, "_pgc_is_tool", False):
        raise CommandError("%r has no plone.pgcatalog portal_catalog"
                           % site_id)
    return site, site.portal_catalog


def run(app, args, out=None, err=None):
    """Verify (and repair) the site ``args.site`` of ``app``; the exit
    status.  ``args``: what :func:`parser` parses."""
    out = sys.stdout if out is None else out
    err = sys.stderr if err is None else err
    site, catalog = find_catalog(app, args.site)
    previous = getSite()
    setSite(site)
    last = [time.monotonic()]

    def progress(phase, report):
        now = time.monotonic()
        if now - last[0] >= PROGRESS_EVERY:
            last[0] = now
            err.write("%s: %d entries checked, %d objects walked, %d "
                      "differences\n" % (phase, report.entries,
                                         report.objects, report.total))
            err.flush()

    def on_difference(kind, path, detail):
        if args.list:
            out.write("%s\t%s\t%s\n" % (kind, path, detail))

    conflicts = []

    def end_batch():
        if not args.repair:
            transaction.abort()
            return
        try:
            transaction.commit()
        except ConflictError as exc:
            # a repaired object changed meanwhile (verify.read_current):
            # this batch's repairs are dropped, the next run does them
            transaction.abort()
            conflicts.append(exc)
            err.write("a batch's repairs conflicted with a concurrent change "
                      "and were undone: %s\n" % exc)

    try:
        report = catalog.pgc_verify(
            repair=args.repair, batch=args.batch, sample=args.sample,
            on_difference=on_difference, on_batch=end_batch,
            progress=progress, values=not args.quick,
            fresh=transaction.abort if args.repair else None)
        end_batch()
    finally:
        setSite(previous)
    if args.json:
        data = report.to_dict()
        data["conflicted_batches"] = len(conflicts)
        out.write(json.dumps(data, indent=1) + "\n")
    else:
        out.write("\n".join(report.summary()) + "\n")
        if conflicts:
            out.write("%d batches conflicted with concurrent changes and "
                      "were not repaired: run again\n" % len(conflicts))
    return CLEAN if report.clean and not conflicts else DIFFERENCES


def main(argv=None):
    args = parser().parse_args(argv)
    try:
        app = open_app(args.zope_conf)
    except Exception as exc:
        sys.stderr.write("pgcatalog-verify: cannot open %s: %s\n"
                         % (args.zope_conf, exc))
        return ERROR
    try:
        return run(app, args)
    except (CommandError, PGCatalogError) as exc:
        # one line: the catalog's rows gone, no DSN, the database down
        sys.stderr.write("pgcatalog-verify: %s\n" % exc)
        return ERROR
    except Exception:
        traceback.print_exc()
        return ERROR
    finally:
        transaction.abort()
        app._p_jar.close()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
