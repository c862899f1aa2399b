"""Configuration, read in one place.

The PostgreSQL DSN comes from zope.conf::

    <product-config plone.pgcatalog>
        dsn host=/run/postgresql dbname=plone
        pool-max-size 16
    </product-config>

or, when zope.conf has none, from the environment variable ``PGCATALOG_DSN``
(``PGCATALOG_POOL_MAX_SIZE`` for the pool size). See docs/configuration.md.
"""
import os

from plone.pgcatalog.errors import ConfigurationError


try:
    from App.config import getConfiguration
except ImportError:  # pragma: no cover - Zope is always there in practice
    getConfiguration = None


ENV_DSN = "PGCATALOG_DSN"
DEFAULT_POOL_MAX_SIZE = 16


def product_config():
    """``<product-config plone.pgcatalog>`` of zope.conf (empty without
    Zope)."""
    if getConfiguration is None:  # pragma: no cover - Zope is always there
        return {}
    product_config = getattr(getConfiguration(), "product_config", None) or {}
    return product_config.get("plone.pgcatalog", {}) or {}


def get_dsn():
    """The DSN to use now: zope.conf first, then ``PGCATALOG_DSN``."""
    dsn = product_config().get("dsn") or os.environ.get(ENV_DSN)
    if not dsn:
        raise ConfigurationError(
            "plone.pgcatalog has no PostgreSQL DSN: set PGCATALOG_DSN or add "
            "'<product-config plone.pgcatalog> dsn ... </product-config>' to "
            "zope.conf.")
    return dsn


def get_pool_max_size():
    value = (product_config().get("pool-max-size")
             or os.environ.get("PGCATALOG_POOL_MAX_SIZE"))
    return int(value) if value else DEFAULT_POOL_MAX_SIZE


PLAN_CACHE_MODES = ("auto", "force_generic_plan", "force_custom_plan")


def get_plan_cache_mode():
    """PostgreSQL ``plan_cache_mode`` for catalog connections (default
    ``auto``; ``PGCATALOG_PLAN_CACHE_MODE`` / product-config
    ``plan-cache-mode`` to change)."""
    value = (product_config().get("plan-cache-mode")
             or os.environ.get("PGCATALOG_PLAN_CACHE_MODE")
             or "auto")
    if value not in PLAN_CACHE_MODES:
        raise ConfigurationError(
            "plan-cache-mode must be one of %s, not %r"
            % (", ".join(PLAN_CACHE_MODES), value))
    return value


#: the value of a planner setting that leaves the server's own
SERVER = "server"


def get_parallel_workers():
    """``max_parallel_workers_per_gather`` of catalog connections (default
    0; ``PGCATALOG_PARALLEL_WORKERS`` / product-config
    ``parallel-workers``; ``server``: the server's setting).  A catalog
    answers many small concurrent requests; with workers, the planner
    took a parallel walk of the ``modified`` index for a text + filters
    page, 146 ms instead of 6 ms (100,000 entries; the planner settings,
    docs/benchmarks/history.md), and an every-match answer used three processes where one
    bitmap scan answers faster."""
    value = _setting("parallel-workers", "PGCATALOG_PARALLEL_WORKERS")
    if value is None or value == "":
        return 0
    if str(value).strip() == SERVER:
        return None
    return _non_negative_int("parallel-workers", value)


def get_jit():
    """PostgreSQL's ``jit`` for catalog connections: ``off`` by default
    (``PGCATALOG_JIT`` / product-config ``jit``: ``on``, ``off`` or
    ``server``, the server's; returns "on", "off" or None).  A catalog
    statement runs for milliseconds; a planner estimate over
    ``jit_above_cost`` (a union of a glob's words: 227,000) had it compile
    the statement first: 18 ms of a 38 ms statement (100,000 entries,
    PostgreSQL 15 with LLVM, as Debian's and the official images are)."""
    value = _setting("jit", "PGCATALOG_JIT")
    if value is None or value == "":
        return "off"
    value = str(value).strip().lower()
    if value == SERVER:
        return None
    if value not in _BOOLEANS:
        raise ConfigurationError("jit must be on, off or %r, not %r"
                                 % (SERVER, value))
    return "on" if _BOOLEANS[value] else "off"


def get_random_page_cost():
    """``random_page_cost`` of catalog connections (default 1.1, as for
    data in memory or on SSDs; ``PGCATALOG_RANDOM_PAGE_COST`` /
    product-config ``random-page-cost``; ``server``: the server's).  With
    PostgreSQL's default (4, a spinning disk's), every-match answers were
    read by a sequential scan evaluating every entry's conditions (52,000
    of 100,000 entries: 86 ms) where a bitmap of the index answers in
    16 ms."""
    value = _setting("random-page-cost", "PGCATALOG_RANDOM_PAGE_COST")
    if value is None or value == "":
        return 1.1
    if str(value).strip() == SERVER:
        return None
    try:
        cost = float(str(value).strip())
    except ValueError:
        cost = -1.0
    if not cost > 0 or cost == float("inf"):
        raise ConfigurationError(
            "random-page-cost must be a number > 0 or %r, not %r"
            % (SERVER, value))
    return cost


DEFAULT_LOCK_TIMEOUT_MS = 200


def _setting(name, env):
    return product_config().get(name) or os.environ.get(env)


def get_lock_timeout_ms():
    """How long (ms) a catalog write waits for a row another transaction
    holds before raising ConflictError (``lock-timeout-ms`` /
    ``PGCATALOG_LOCK_TIMEOUT_MS``; default 200).  Under REPEATABLE READ a
    wait only pays off when the holder rolls back: if it commits, the
    waiting write conflicts anyway."""
    value = _setting("lock-timeout-ms", "PGCATALOG_LOCK_TIMEOUT_MS")
    return int(value) if value else DEFAULT_LOCK_TIMEOUT_MS


DEFAULT_POOL_TIMEOUT = 5.0


def get_pool_timeout():
    """How long (s) a transaction waits for a free catalog connection
    before failing with a retryable error (``pool-timeout`` /
    ``PGCATALOG_POOL_TIMEOUT``; default 5)."""
    value = _setting("pool-timeout", "PGCATALOG_POOL_TIMEOUT")
    return float(value) if value else DEFAULT_POOL_TIMEOUT


_BOOLEANS = {"on": True, "true": True, "yes": True, "1": True,
             "off": False, "false": False, "no": False, "0": False}


def get_two_phase_commit():
    """Use PostgreSQL's two-phase commit when the server allows it
    (``two-phase-commit`` / ``PGCATALOG_TWO_PHASE_COMMIT``; default on)."""
    value = _setting("two-phase-commit", "PGCATALOG_TWO_PHASE_COMMIT")
    if value is None:
        return True
    if str(value).lower() not in _BOOLEANS:
        raise ConfigurationError("two-phase-commit must be on or off, not %r"
                                 % value)
    return _BOOLEANS[str(value).lower()]


def get_standby_dsns():
    """The DSNs of PostgreSQL hot standbys of the catalog's database that
    read-only transactions may read from (``standby-dsns`` /
    ``PGCATALOG_STANDBY_DSNS``: DSNs separated by ``;``; default none:
    every statement goes to ``dsn``).  See docs/standbys.md."""
    value = _setting("standby-dsns", "PGCATALOG_STANDBY_DSNS")
    if not value:
        return []
    return [dsn.strip() for dsn in str(value).split(";") if dsn.strip()]


#: the default bound on a standby's replay lag (seconds)
DEFAULT_STANDBY_MAX_LAG = 10.0


def get_standby_max_lag():
    """Seconds a standby may lag behind the primary's commits and still be
    tried (``standby-max-lag`` / ``PGCATALOG_STANDBY_MAX_LAG``; default
    10; 0: no bound).  Only what is tried: a transaction on a standby
    always checks that its snapshot holds what its objects show
    (docs/standbys.md)."""
    value = _setting("standby-max-lag", "PGCATALOG_STANDBY_MAX_LAG")
    if value is None or str(value).strip() == "":
        return DEFAULT_STANDBY_MAX_LAG
    try:
        found = float(str(value).strip())
    except ValueError:
        found = -1.0
    if not 0 <= found < float("inf"):
        raise ConfigurationError("standby-max-lag must be a number of "
                                 "seconds >= 0, not %r" % value)
    return found


def get_share_storage_snapshot():
    """Read the catalog in the ZODB's own snapshot when it shares
    RelStorage's database (``share-storage-snapshot`` /
    ``PGCATALOG_SHARE_STORAGE_SNAPSHOT``; default on).  Exact, at the
    price of exporting the snapshot (~1 ms, measured on a 2-vCPU VM) in
    the ZODB transactions whose own snapshot does not hold exactly the
    objects' commits (docs/transactions.md)."""
    value = _setting("share-storage-snapshot",
                     "PGCATALOG_SHARE_STORAGE_SNAPSHOT")
    if value is None:
        return True
    if str(value).lower() not in _BOOLEANS:
        raise ConfigurationError("share-storage-snapshot must be on or off, "
                                 "not %r" % value)
    return _BOOLEANS[str(value).lower()]


def get_in_doubt_seconds():
    """Age (s) after which a prepared catalog transaction nobody finished
    is resolved (``in-doubt-seconds``; default 60)."""
    value = _setting("in-doubt-seconds", "PGCATALOG_IN_DOUBT_SECONDS")
    return float(value) if value else 60.0


def get_in_doubt_resolution():
    """``COMMIT`` (default) or ``ROLLBACK``: what happens to such a
    transaction (``in-doubt-resolution``)."""
    value = (_setting("in-doubt-resolution", "PGCATALOG_IN_DOUBT_RESOLUTION")
             or "commit").upper()
    if value not in ("COMMIT", "ROLLBACK"):
        raise ConfigurationError("in-doubt-resolution must be commit or "
                                 "rollback, not %r" % value)
    return value


DEFAULT_CACHE_MB = 64


def get_cache():
    """The in-process result cache is on (``cache`` / ``PGCATALOG_CACHE``;
    default on)."""
    value = _setting("cache", "PGCATALOG_CACHE")
    if value is None:
        return True
    if str(value).lower() not in _BOOLEANS:
        raise ConfigurationError("cache must be on or off, not %r" % value)
    return _BOOLEANS[str(value).lower()]


def get_cache_mb():
    """The result cache's memory bound per process, in MB (``cache-mb`` /
    ``PGCATALOG_CACHE_MB``; default 64)."""
    value = _setting("cache-mb", "PGCATALOG_CACHE_MB")
    return float(value) if value else DEFAULT_CACHE_MB


def _non_negative_int(name, value, unit=""):
    """``value`` of setting ``name`` as an integer >= 0."""
    try:
        number = int(str(value).strip())
    except ValueError:
        number = -1
    if number < 0:
        raise ConfigurationError("%s must be a whole number%s >= 0, not %r"
                                 % (name, unit, value))
    return number


def _non_negative_setting(name, env, default, site=None, unit=""):
    """Setting ``name`` (``env`` in the environment) as an integer >= 0;
    ``site``: a site's own settings, which win."""
    if site is not None and site.get(name) is not None:
        return _non_negative_int(name, site[name], unit)
    value = _setting(name, env)
    if value is None or value == "":
        return default
    return _non_negative_int(name, value, unit)


#: a catalog database with fewer hot rows tries its searches prepared
DEFAULT_PREPARED_SEARCH_ROWS = 5000


def get_prepared_search_rows():
    """Up to how many hot rows (PostgreSQL's statistics) a search statement
    is timed prepared too and kept prepared where that is faster
    (``prepared-search-rows`` / ``PGCATALOG_PREPARED_SEARCH_ROWS``; default
    5000; 0: never, search/preparing.py)."""
    return _non_negative_setting("prepared-search-rows",
                                 "PGCATALOG_PREPARED_SEARCH_ROWS",
                                 DEFAULT_PREPARED_SEARCH_ROWS)


#: per-site values (the site's plone.registry records, settings.py), keyed
#: by setting name; they win over zope.conf and the environment for the
#: site's catalog
OVERRIDABLE = ("statement-timeout-ms", "slow-query-ms",
               "verify-zmi-max-entries", "verify-zmi-repair-limit")


def _ms_setting(name, env, default, site=None):
    return _non_negative_setting(name, env, default, site,
                                 " of milliseconds")


DEFAULT_STATEMENT_TIMEOUT_MS = 0


def get_statement_timeout_ms(site=None):
    """How long (ms) a catalog read (a search, a lookup) may run before
    PostgreSQL cancels it and the caller gets CatalogStatementTimeout
    (``statement-timeout-ms`` / ``PGCATALOG_STATEMENT_TIMEOUT_MS``; default
    0: none set, the server's own ``statement_timeout`` applies).  Writes,
    the commit and index builds are never limited by it.  ``site``: the
    site's own settings (the control panel's), which win."""
    return _ms_setting("statement-timeout-ms",
                       "PGCATALOG_STATEMENT_TIMEOUT_MS",
                       DEFAULT_STATEMENT_TIMEOUT_MS, site)


DEFAULT_SLOW_QUERY_MS = 1000


def get_slow_query_ms(site=None):
    """A search taking at least this long (ms) is logged on
    ``plone.pgcatalog.slow`` and kept in the ZMI's Slow queries tab
    (``slow-query-ms`` / ``PGCATALOG_SLOW_QUERY_MS``; default 1000; 0: off).
    ``site``: the site's own settings (the control panel's), which win."""
    return _ms_setting("slow-query-ms", "PGCATALOG_SLOW_QUERY_MS",
                       DEFAULT_SLOW_QUERY_MS, site)


SCHEMA_MIGRATION = ("create", "upgrade", "off")


def get_schema_migration():
    """What a process may do to the catalog tables' schema by itself
    (``schema-migration`` / ``PGCATALOG_SCHEMA_MIGRATION``):

    ``create`` (the default)
        create the tables in a database without them (a new site works at
        once), never upgrade existing ones: after an upgrade of the
        package, a process refuses to work on the older schema until
        ``pgcatalog-migrate --apply`` ran (no migration holds a production
        site's writes back by surprise).
    ``upgrade``
        also apply the pending steps when it finds an older schema (a
        development or single-process site).
    ``off``
        never change the schema (a role that may not: the schema is
        created and upgraded with ``pgcatalog-migrate`` by its owner).

    docs/upgrade.md."""
    value = (_setting("schema-migration", "PGCATALOG_SCHEMA_MIGRATION")
             or "create").strip().lower()
    if value not in SCHEMA_MIGRATION:
        raise ConfigurationError(
            "schema-migration must be one of %s, not %r"
            % (", ".join(SCHEMA_MIGRATION), value))
    return value


INSTALL_INDEX = ("now", "later")


def get_install_index():
    """Whether installing the profile indexes the site's content in its
    transaction (``now``, the default) or leaves it to an online build
    (``later``: ``pgcatalog-rebuild``, docs/rebuild.md) —
    ``install-index`` / ``PGCATALOG_INSTALL_INDEX``."""
    value = (_setting("install-index", "PGCATALOG_INSTALL_INDEX")
             or "now").lower()
    if value not in INSTALL_INDEX:
        raise ConfigurationError("install-index must be now or later, not %r"
                                 % value)
    return value


DEFAULT_VERIFY_ZMI_MAX_ENTRIES = 5000
DEFAULT_VERIFY_ZMI_REPAIR_LIMIT = 1000


def get_verify_zmi_max_entries(site=None):
    """The ZMI's "Verify" tab verifies catalogs of up to this many entries
    in the request (``verify-zmi-max-entries`` /
    ``PGCATALOG_VERIFY_ZMI_MAX_ENTRIES``; default 5000); larger ones are
    verified with ``pgcatalog-verify`` (docs/verify.md).  ``site``: the
    site's own settings, which win."""
    return _non_negative_setting("verify-zmi-max-entries",
                                 "PGCATALOG_VERIFY_ZMI_MAX_ENTRIES",
                                 DEFAULT_VERIFY_ZMI_MAX_ENTRIES, site)


def get_verify_zmi_repair_limit(site=None):
    """Entries one "Repair" of the ZMI's "Verify" tab repairs at most
    (``verify-zmi-repair-limit`` / ``PGCATALOG_VERIFY_ZMI_REPAIR_LIMIT``;
    default 1000): the rest are counted and left for the next one.
    ``site``: the site's own settings, which win."""
    return _non_negative_setting("verify-zmi-repair-limit",
                                 "PGCATALOG_VERIFY_ZMI_REPAIR_LIMIT",
                                 DEFAULT_VERIFY_ZMI_REPAIR_LIMIT, site)
