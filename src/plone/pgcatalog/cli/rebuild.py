"""``pgcatalog-rebuild``: online build and rebuild of a site's catalog.

::

    pgcatalog-rebuild --zope-conf etc/zope.conf --site Plone
    pgcatalog-rebuild --zope-conf etc/zope.conf --site Plone --resume
    pgcatalog-rebuild --zope-conf etc/zope.conf --site Plone --status
    pgcatalog-rebuild --zope-conf etc/zope.conf --site Plone --cancel
    pgcatalog-rebuild --zope-conf etc/zope.conf --site Plone --refresh
    pgcatalog-rebuild --zope-conf etc/zope.conf --site Plone --index Subject
    pgcatalog-rebuild --zope-conf etc/zope.conf --site Plone \
        --language-text SearchableText --languages en,de,fr
    pgcatalog-rebuild --zope-conf etc/zope.conf --site Plone \
        --exact-text SearchableText

Without ``--resume``, ``--cancel`` or ``--status`` it starts a build
(``--refresh``: from the catalog's own paths; ``--index``: those indexes,
in place; ``--language-text``: a text index switched to language-aware
search, then reindexed in place) and runs it to the end; a run killed meanwhile is continued with
``--resume``.  A switch's old rows are dropped ``--grace`` seconds after
it (a later run drops them if this one was stopped before).  Exit status:
0 done (or status shown), 1 refused (e.g. nothing to resume), 2 usage.
See docs/rebuild.md; ``plone.pgcatalog.ops.rebuild`` does the work.

``main()`` starts Zope from zope.conf; ``run(app, argv)`` takes a running
Zope application (tests call it in-process; ``zconsole run`` scripts can
too).
"""
import argparse
import json
import logging
import sys

import transaction
from AccessControl.SecurityManagement import getSecurityManager
from AccessControl.SecurityManagement import newSecurityManager
from AccessControl.SecurityManagement import setSecurityManager
from AccessControl.users import system
from Testing.makerequest import makerequest
from zope.component.hooks import getSite
from zope.component.hooks import setSite
from zope.globalrequest import getRequest
from zope.globalrequest import setRequest

from plone.pgcatalog.ops.rebuild import DEFAULT_BATCH
from plone.pgcatalog.ops.rebuild import DEFAULT_GRACE
from plone.pgcatalog.ops.rebuild import OnlineRebuild
from plone.pgcatalog.schema import ddl

logger = logging.getLogger("plone.pgcatalog")


def parser():
    p = argparse.ArgumentParser(
        prog="pgcatalog-rebuild",
        description="Online build and rebuild of a Plone site's catalog "
                    "(plone.pgcatalog): batches committed one by one, "
                    "searches answered from the old catalog until an atomic "
                    "switch, resumable.")
    p.add_argument("--zope-conf", help="the instance's zope.conf (main())")
    p.add_argument("--site", required=True,
                   help="id of the Plone site (in the Zope root)")
    what = p.add_mutually_exclusive_group()
    what.add_argument("--resume", action="store_true",
                      help="go on with the build in progress")
    what.add_argument("--cancel", action="store_true",
                      help="abandon the build in progress (its rows are "
                           "dropped after the grace period)")
    what.add_argument("--status", action="store_true",
                      help="print the last build's state (JSON) and exit")
    what.add_argument("--refresh", action="store_true",
                      help="build from the catalog's own paths "
                           "(refreshCatalog) instead of walking the site")
    what.add_argument("--index", nargs="+", metavar="NAME",
                      help="reindex these indexes of the live catalog, in "
                           "place")
    what.add_argument("--language-text", metavar="NAME",
                      help="search text index NAME by language (stems, "
                           "accents folded, weights; docs/language-text.md)"
                           ": switched over, then reindexed in place")
    what.add_argument("--exact-text", metavar="NAME",
                      help="search text index NAME ZCTextIndex-exact again")
    p.add_argument("--languages", default=None,
                   help="with --language-text: the language codes stemmed, "
                        "comma-separated (default: the site's available "
                        "languages)")
    p.add_argument("--default-language", default=None,
                   help="with --language-text: the language of objects in "
                        "none or in another (default: the site's)")
    p.add_argument("--batch", type=int, default=None,
                   help="entries per committed batch (default %d)"
                        % DEFAULT_BATCH)
    p.add_argument("--grace", type=float, default=DEFAULT_GRACE,
                   help="seconds between the switch and dropping the old "
                        "catalog's rows (default %d)" % DEFAULT_GRACE)
    p.add_argument("--max-batches", type=int, default=None,
                   help="stop after this many batches (resume later)")
    p.add_argument("--log-every", type=float, default=10.0,
                   help="seconds between progress lines (default 10)")
    return p


def run(app, argv, out=None):
    """Run the command ``argv`` (a list of arguments) on the Zope
    application ``app``; the exit status."""
    out = out or sys.stdout
    args = parser().parse_args(argv)
    if args.batch is not None and args.batch < 1:
        print("--batch must be at least 1", file=sys.stderr)
        return 2
    site = app.unrestrictedTraverse(args.site, None)
    catalog = getattr(site, "portal_catalog", None) if site else None
    if catalog is None or not hasattr(catalog, "_pgc_store"):
        print("no plone.pgcatalog catalog in a site %r" % args.site,
              file=sys.stderr)
        return 1
    saved = getSite(), getRequest(), getSecurityManager()
    app = makerequest(app)
    setRequest(app.REQUEST)
    site = app.unrestrictedTraverse(args.site)
    setSite(site)
    newSecurityManager(None, system)
    try:
        build = OnlineRebuild(site.portal_catalog, batch_size=args.batch,
                              log_every=args.log_every, grace=args.grace)
        return _command(build, args, out)
    except ValueError as exc:
        # BuildError, or a name that is no text index
        transaction.abort()
        print(str(exc), file=sys.stderr)
        return 1
    finally:
        setSite(saved[0])
        setRequest(saved[1])
        setSecurityManager(saved[2])


def _command(build, args, out):
    if args.status:
        print(json.dumps(build.status(), indent=2, sort_keys=True), file=out)
        return 0
    if args.cancel:
        build.cancel()
        build.drop(wait=True)
        return 0
    if args.exact_text:
        build.tool.pgc_exact_text(args.exact_text)
        transaction.get().note("plone.pgcatalog: %s searched exactly"
                               % args.exact_text)
        transaction.commit()
        return 0
    # rows an earlier switch or cancel left behind, once their time came
    build.drop(wait=False)
    if not args.resume:
        if args.language_text:
            languages = None if args.languages is None else [
                code for code in args.languages.split(",") if code.strip()]
            settings = build.tool.pgc_language_text(
                args.language_text, languages, args.default_language)
            transaction.get().note("plone.pgcatalog: %s searched by "
                                   "language" % args.language_text)
            transaction.commit()
            print(json.dumps(settings, indent=2, sort_keys=True), file=out)
            build.start("reindex", [args.language_text])
        elif args.index:
            build.start("reindex", args.index)
        else:
            build.start("refresh" if args.refresh else "rebuild")
    if not build.run(max_batches=args.max_batches):
        print("stopped; go on with --resume", file=out)
        return 0
    build.drop(wait=True)
    print(json.dumps(build.status(), indent=2, sort_keys=True), file=out)
    return 0


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    args = parser().parse_args(argv)
    if not args.zope_conf:
        parser().error("--zope-conf is required")
    logging.basicConfig(level=logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s "
                               "%(message)s")
    # imported here: starting Zope is this function's job only
    import Zope2
    from Zope2.Startup.run import make_wsgi_app
    make_wsgi_app({}, args.zope_conf)
    app = Zope2.app()
    try:
        return run(app, argv)
    finally:
        transaction.abort()
        app._p_jar.close()
        # PostgreSQL indexes of a new catalog still being built in this
        # process's background (they wait for older snapshots, RelStorage's
        # load connections among them: the database is closed first)
        Zope2.DB.close()
        if not ddl.wait_for_builds(ddl.BUILD_WAIT * 10):
            logger.warning("catalog indexes are still being built; run "
                           "portal_catalog.pgc_sync_indexes() later")


if __name__ == "__main__":  # pragma: no cover
    if "app" in globals():  # zconsole run etc/zope.conf this_file.py ...
        # zconsole leaves its own arguments in sys.argv: ours follow the
        # script's path
        ours = [i for i, a in enumerate(sys.argv) if a.endswith(".py")]
        sys.exit(run(globals()["app"], sys.argv[ours[0] + 1:] if ours
                     else []))
    sys.exit(main())
