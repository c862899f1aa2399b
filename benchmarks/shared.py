"""What the benchmarks share: level1 (``level1/``), level2 (``level2/``)
and the small scripts next to this file.

* the backends and the RelStorage settings every backend runs on;
* the parent side of a run: the command line, environment and result file
  of a child process (``run_benchmarks.py <hidden subcommand>``), the
  machine and PostgreSQL server it ran on, the run record written by
  ``--output``;
* a scratch database for the small scripts;
* the child side: Zope started on RelStorage on a given database;
* measuring: timing statistics (median, nearest-rank p95), rendering the
  first brains of a result, the installed versions;
* reporting: number formatting and the load-average line.

Only the standard library, psycopg, ``plone.pgcatalog.testing.pgserver`` and
``plone.pgcatalog.testing.zopeapp`` (which imports Zope when it starts it, not
before) are imported here, so a parent
process stays light.
"""
import atexit
import contextlib
import json
import logging
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version

import psycopg
from psycopg.conninfo import conninfo_to_dict

from plone.pgcatalog.testing import pgserver
from plone.pgcatalog.testing.zopeapp import open_relstorage
from plone.pgcatalog.testing.zopeapp import start_zope


#: "pgcatalog-engine" is plone.pgcatalog with its result cache off (the
#: engine), "pgcatalog" as installed (cache on)
BACKENDS = ("zcatalog", "pgcatalog-engine", "pgcatalog", "pgcatalog-standby")
#: what each backend is called in a table's header
SHORT_NAMES = {"zcatalog": "zc", "pgcatalog-engine": "pe", "pgcatalog": "pg",
               "pgcatalog-standby": "sb"}


def is_pg(backend):
    """The backend is plone.pgcatalog (with or without its cache)."""
    return backend.startswith("pgcatalog")
RENDER_BRAINS = 20

# RelStorage settings used for every backend (documented in README.md).
RELSTORAGE_SETTINGS = {
    "keep_history": False,       # history-free
    "driver": "psycopg2",        # RelStorage 4.3's CPython PostgreSQL driver
    "cache_local_mb": 10,        # RelStorage default in-process pickle cache
    "cache_local_dir": None,     # no persistent cache files: cold at start
    "cache_servers": (),         # no memcache
    "shared_blob_dir": False,    # blobs in the database, local blob cache
    "commit_lock_timeout": 30,
}

# the benchmarks directory; the repository is its parent
BENCHMARKS = os.path.dirname(os.path.abspath(__file__))
RUN_BENCHMARKS = os.path.join(BENCHMARKS, "run_benchmarks.py")

VERSIONS_OF = ("Products.CMFPlone", "Zope", "ZODB", "RelStorage",
               "Products.ZCatalog", "plone.distribution", "plone.volto",
               "psycopg", "psycopg2-binary", "plone.pgcatalog")


def log(*args):
    print("[%s]" % time.strftime("%H:%M:%S"), *args, file=sys.stderr,
          flush=True)


def write_json(path, data):
    with open(path, "w") as f:
        json.dump(data, f, indent=1, default=str)


# ---------------------------------------------------------------------------
# Parent side: child processes, the machine, the run record
# ---------------------------------------------------------------------------

def child_command(subcommand, *options):
    """``run_benchmarks.py <subcommand> <options>`` in this interpreter."""
    return [sys.executable, RUN_BENCHMARKS, subcommand] + list(options)


def add_child_options(parser):
    """The options of every child subcommand: which backend, its database,
    where to write the JSON result, and ``--env KEY=VALUE`` items."""
    parser.add_argument("--name", required=True, choices=BACKENDS)
    parser.add_argument("--dsn", required=True)
    parser.add_argument("--result-file", required=True)
    parser.add_argument("--env", action="append")


#: where a backend process writes the log records of Zope, Plone and the
#: catalog (set by the parent per backend; unset: a file named after the
#: backend in the system's temporary directory)
LOG_ENV = "PGCATALOG_BENCH_LOG"


def log_file_for(name, output=None, kind="bench"):
    """The log file of backend ``name``: beside ``output`` (its name with
    ``.<name>.log``) or in the current directory."""
    base = os.path.splitext(output)[0] if output else kind
    return os.path.abspath("%s.%s.log" % (base, name))


def send_logs_to_file(name):
    """Zope's, Plone's and the catalog's log records (WARNING and above:
    GenericSetup, behaviors, MimetypesRegistry...) and Python warnings go
    to a file, not between the benchmark's progress lines; says where."""
    path = os.environ.get(LOG_ENV) or os.path.join(
        tempfile.gettempdir(), "pgcatalog-bench-%s.log" % name)
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter(
        "%(asctime)s %(levelname)s %(name)s %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.WARNING)
    logging.captureWarnings(True)
    log(name, "log of Zope, Plone and the catalog:", path)
    return path


def child_environment(backend, dsn):
    """The environment of a child process: ours, with ``PGCATALOG_DSN`` set
    to the backend's database for pgcatalog and unset otherwise."""
    env = dict(os.environ)
    env.pop("PGCATALOG_DSN", None)
    if is_pg(backend):
        env["PGCATALOG_DSN"] = dsn
    if backend == "pgcatalog-engine":
        env["PGCATALOG_CACHE"] = "off"
    return env


def pg_env_options(pg_env, backend):
    """``--pg-env KEY=VALUE`` items as ``--env`` options of a pgcatalog
    child (none for other backends)."""
    options = []
    for item in (pg_env or ()) if is_pg(backend) else ():
        options += ["--env", item]
    return options


def result_file(prefix):
    """A new empty temporary file for a child's JSON result."""
    fd, path = tempfile.mkstemp(prefix=prefix, suffix=".json")
    os.close(fd)
    return path


def run_child(cmd, env, result_path):
    """Run a child; returns (its JSON result, None) or (None, why)."""
    proc = subprocess.run(cmd, env=env)
    if proc.returncode != 0:
        return None, "exit code %d" % proc.returncode
    with open(result_path) as f:
        return json.load(f), None


# ---------------------------------------------------------------------------
# Scripts timing both engines on level1's databases, one child process each
# (more_queries.py, language_text.py, facet_counts.py)
# ---------------------------------------------------------------------------

def side_by_side_parser(description):
    """The options of such a script: the server, the level1 databases'
    scale and seed, the timed and warm-up runs; and the child's own."""
    import argparse
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--dsn", required=True,
                   help="the benchmark server (any database name)")
    p.add_argument("--scale", type=int, default=100000)
    p.add_argument("--seed", type=int, default=20250101)
    p.add_argument("--iterations", type=int, default=15)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--result", help=argparse.SUPPRESS)
    return p


def server_dsn(dsn):
    """``dsn`` without its database name (each child names its own)."""
    return " ".join(part for part in dsn.split()
                    if not part.startswith("dbname="))


def run_side_by_side(script, args, backends, extra=()):
    """Run ``script`` once per backend as a child process (``--child``
    BACKEND ``--result`` FILE, the result cache off); ``{backend: its
    JSON result}``."""
    found = {}
    for backend in backends:
        result = result_file("%s-%s-" % (
            os.path.splitext(os.path.basename(script))[0], backend))
        env = dict(os.environ, PGCATALOG_CACHE="off")
        subprocess.run([sys.executable, os.path.abspath(script), "--dsn",
                        args.dsn, "--scale", str(args.scale), "--seed",
                        str(args.seed), "--iterations", str(args.iterations),
                        "--warmup", str(args.warmup), "--child", backend,
                        "--result", result] + list(extra),
                       check=True, env=env)
        with open(result) as f:
            found[backend] = json.load(f)
        os.unlink(result)
    return found


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def environment(server_dsn):
    """The machine, Python and the PostgreSQL server at ``server_dsn``."""
    host = conninfo_to_dict(server_dsn).get("host") or ""
    kind = ("unix socket" if not host or host.startswith("/")
            else "tcp (%s)" % host)
    with psycopg.connect(server_dsn, autocommit=True) as conn:
        pg_version = conn.execute("SHOW server_version").fetchone()[0]
        pg_full = conn.execute("SELECT version()").fetchone()[0]
    return {
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "postgresql": pg_version,
        "postgresql_full": pg_full,
        "connection": kind,
        "loadavg_start": os.getloadavg(),
        "pgcatalog_dsn_from_env": bool(os.environ.get("PGCATALOG_DSN")),
    }


def run_record(benchmark, started, env_info, args, **rest):
    """The head of an ``--output`` file (what ran, when, where, with which
    arguments), followed by ``rest``."""
    return dict({
        "benchmark": benchmark,
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "duration_s": time.time() - started,
        "environment": env_info,
        "arguments": {k: v for k, v in vars(args).items() if k != "func"},
    }, **rest)


@contextlib.contextmanager
def scratch_database(name):
    """A fresh database on the benchmark server (``PGCATALOG_DSN``'s or the
    embedded one), dropped afterwards; yields its DSN."""
    dsn = pgserver.fresh_database(name)
    try:
        yield dsn
    finally:
        pgserver.drop_database(dsn)


# ---------------------------------------------------------------------------
# Child side: Zope on RelStorage
# ---------------------------------------------------------------------------

def start_backend(name, dsn, cache_size, env_items, workdir_prefix,
                  ro_replica=None):
    """In a child process: set ``PGCATALOG_DSN`` (pgcatalog), apply the
    ``--env KEY=VALUE`` items, open RelStorage on ``dsn`` with the settings
    above and a ZODB cache of ``cache_size`` objects, and start Zope on it
    the way ``Zope2.startup_wsgi()`` does for a WSGI instance (see
    ``plone.pgcatalog.testing.zopeapp``).  plone.autoinclude loads every installed
    Plone add-on (as in a real instance); for the ZCatalog backend
    plone.pgcatalog is left out so the stock site carries none of its
    configuration.  ``ro_replica``: a ``host:port`` RelStorage loads objects
    from (its ``ro-replica-conf``).  Returns the database and the start-up
    seconds."""
    with_pg = is_pg(name)
    if with_pg:
        os.environ["PGCATALOG_DSN"] = dsn
    for item in env_items or ():
        key, _, value = item.partition("=")
        os.environ[key] = value
    send_logs_to_file(name)
    workdir = tempfile.mkdtemp(prefix="%s%s-" % (workdir_prefix, name))
    atexit.register(shutil.rmtree, workdir, True)
    t0 = time.perf_counter()
    settings = dict(RELSTORAGE_SETTINGS)
    if ro_replica:
        settings["ro_replica_conf"] = os.path.join(workdir, "ro-replicas")
        with open(settings["ro_replica_conf"], "w") as conf:
            conf.write(ro_replica + "\n")
    db = open_relstorage(dsn, cache_size, workdir, **settings)
    start_zope(db, workdir, with_pgcatalog=with_pg)
    return db, time.perf_counter() - t0


def versions():
    out = {}
    for name in VERSIONS_OF:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = None
    return out


# ---------------------------------------------------------------------------
# Measuring and reporting
# ---------------------------------------------------------------------------

def stats(samples_ns):
    """Median, nearest-rank p95 and p99, mean, min, max of nanosecond
    samples, in ms ({} for no samples)."""
    ms = sorted(s / 1e6 for s in samples_ns)
    if not ms:
        return {}
    p95 = ms[max(0, math.ceil(0.95 * len(ms)) - 1)]   # nearest rank
    p99 = ms[max(0, math.ceil(0.99 * len(ms)) - 1)]
    return {
        "n": len(ms),
        "median_ms": statistics.median(ms),
        "p95_ms": p95,
        "p99_ms": p99,
        "mean_ms": statistics.fmean(ms),
        "min_ms": ms[0],
        "max_ms": ms[-1],
    }


def render(results):
    """What a listing reads of its first ``RENDER_BRAINS`` brains."""
    for brain in results[:RENDER_BRAINS]:
        brain.getPath()
        brain.getURL()
        brain.Title
        brain.modified
        brain.review_state


def fmt(value, unit=""):
    if value is None:
        return "-"
    if abs(value) >= 100:
        return "%.0f%s" % (value, unit)
    if abs(value) >= 10:
        return "%.1f%s" % (value, unit)
    return "%.3g%s" % (value, unit) if abs(value) < 1 else "%.2f%s" % (
        value, unit)


def load_line(env_info):
    """The load average at the start and end of a run, flagged when the
    machine was busy."""
    return "load average (1/5/15 min) at start %s, at end %s%s" % (
        "/".join("%.2f" % x for x in env_info["loadavg_start"]),
        "/".join("%.2f" % x for x in env_info["loadavg_end"]),
        "  <- busy machine: timings are noisy"
        if max(env_info["loadavg_start"][0], env_info["loadavg_end"][0])
        > (os.cpu_count() or 1) * 0.75 else "")
