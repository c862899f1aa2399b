"""What both child processes (``_level1_build``, ``_level1_query``) share:
their environment, and Zope started on RelStorage on the given database."""
import atexit
import os
import shutil
import sys
import tempfile
import time

from .common import run_benchmarks_module


def start_zope_on(args, cache_size, with_pg):
    """Apply ``--env``, open RelStorage on ``args.dsn`` with a ZODB cache
    of ``cache_size`` objects and start Zope on it (with plone.pgcatalog
    if ``with_pg``).  Returns the database and the start-up seconds."""
    rb = run_benchmarks_module()
    for item in getattr(args, "env", None) or ():
        key, _, value = item.partition("=")
        os.environ[key] = value
    if with_pg:
        os.environ["PGCATALOG_DSN"] = args.dsn
    import logging
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    workdir = tempfile.mkdtemp(prefix="pgcatalog-l1-%s-" % args.name)
    atexit.register(shutil.rmtree, workdir, True)
    t0 = time.perf_counter()
    db = rb.open_database(args.dsn, cache_size, workdir)
    rb.start_zope(db, workdir, with_pg)
    return db, time.perf_counter() - t0
