"""The catalog's schema in PostgreSQL: its baseline, the steps after it.

A database holds the catalog tables of one schema version
(``pgcatalog_schema``).  The first release's tables are the *baseline*
(``baseline.sql``, version :data:`BASELINE`), created in one transaction
on a database without them.  Every later change of the schema is a
:class:`Step`: a frozen module of this package (``vNNNN_<what>.py``)
holding SQL text and what an operator must know before running it — does
it hold writes back, roughly how long per 100,000 entries, can processes of
the release before it keep running on the upgraded database.  A step is
never edited once released (databases made by it exist) and imports no
runtime code: it describes the schema as it was, not as the code is now.

This module only reads the state of a database and moves it forward; who
may do that, and when (a process by itself, or only ``pgcatalog-migrate``),
is :func:`plone.pgcatalog.pg.db.ensure_schema`'s business (``schema-migration``
setting, docs/upgrade.md).

Steps of one database run one at a time: each takes :data:`LOCK` (a
transaction-level advisory lock) and reads the version again under it, so
concurrent processes and commands wait for each other and never run a step
twice.
"""
import time
from importlib import resources

import psycopg
from psycopg import sql

from plone.pgcatalog import __version__
from plone.pgcatalog.schema.migrations import v0002_language_text
from plone.pgcatalog.schema.migrations import v0003_hot_unkeyed
from plone.pgcatalog.schema.migrations import v0004_free_key_counts
from plone.pgcatalog.schema.migrations import v0005_text_totals
from plone.pgcatalog.schema.migrations import v0006_word_frequencies
from plone.pgcatalog.schema.migrations import v0007_postings
from plone.pgcatalog.schema.migrations import v0008_postings_by_count
from plone.pgcatalog.schema.migrations import v0009_language_postings
from plone.pgcatalog.schema.migrations.step import Step

#: pg_advisory_xact_lock key: one process at a time creates or migrates
#: the schema (or builds planner statistics objects, planstats.py)
LOCK = 0x70676361  # "pgca"

#: the schema version of the baseline (the tables of the first release)
BASELINE = 1

#: how long a step waits for a lock (another process's migration, or a
#: transaction in the way of an ALTER) before it fails
LOCK_WAIT = "120s"


def baseline_sql():
    """The text of ``baseline.sql``."""
    return resources.files(__name__).joinpath("baseline.sql").read_text(
        encoding="utf-8")


#: the baseline as a step (on a database without catalog tables): one
#: text of many statements, run in one transaction
CREATE = Step(BASELINE, "create the catalog tables (baseline)",
              [baseline_sql()], blocks_writes=False, compatible=True)

#: the steps after the baseline, in version order (each from a module of
#: its own)
STEPS = (v0002_language_text.STEP, v0003_hot_unkeyed.STEP,
         v0004_free_key_counts.STEP, v0005_text_totals.STEP,
         v0006_word_frequencies.STEP, v0007_postings.STEP,
         v0008_postings_by_count.STEP, v0009_language_postings.STEP)

#: the schema version this release works with
SCHEMA_VERSION = STEPS[-1].version if STEPS else BASELINE


class State:
    """What a database holds: ``version`` (None: no catalog tables),
    ``compatible`` (the oldest release's schema version that runs on it),
    ``release`` (the plone.pgcatalog release that made or last migrated
    it), ``entries`` (PostgreSQL's estimate of the catalog entries, for
    the steps' time estimates), ``prerelease`` (tables of a development
    version from before the first release, which no step upgrades)."""

    def __init__(self, version=None, compatible=None, release=None,
                 updated=None, entries=0, prerelease=None):
        self.version = version
        self.compatible = compatible
        self.release = release
        self.updated = updated
        self.entries = entries
        self.prerelease = prerelease

    @property
    def empty(self):
        return self.version is None and self.prerelease is None

    def pending(self, steps=None):
        """The steps this database lacks, in order (the baseline first on a
        database without tables)."""
        steps = STEPS if steps is None else steps
        if self.prerelease is not None:
            return []
        if self.version is None:
            return [CREATE] + list(steps)
        return [step for step in steps if step.version > self.version]

    def runs(self, version=None):
        """A process of schema version ``version`` (this release's by
        default) can work on it."""
        version = SCHEMA_VERSION if version is None else version
        return (self.version is not None and self.prerelease is None
                and self.compatible <= version <= self.version)


def read_state(conn):
    """The :class:`State` of the database ``conn`` is connected to (its
    current schema, as the catalog's statements see it)."""
    found = conn.execute(
        "SELECT to_regclass('pgcatalog_schema') IS NOT NULL, "
        "to_regclass('pgcatalog_entries') IS NOT NULL").fetchone()
    if not found[0]:
        if found[1]:
            return State(prerelease=0)
        return State()
    columns = {row[0] for row in conn.execute(
        "SELECT attname FROM pg_attribute WHERE attrelid = "
        "'pgcatalog_schema'::regclass AND attnum > 0 AND NOT attisdropped"
    ).fetchall()}
    if "compatible" not in columns:
        # the layout before the first release: version only
        row = conn.execute("SELECT max(version) FROM pgcatalog_schema"
                           ).fetchone()
        return State(prerelease=row[0] or 0)
    row = conn.execute(
        "SELECT version, compatible, release, updated FROM pgcatalog_schema"
    ).fetchone()
    if row is None:
        return State(prerelease=0)
    entries = conn.execute(
        "SELECT greatest(reltuples, 0)::bigint FROM pg_class WHERE oid = "
        "to_regclass('pgcatalog_entries')").fetchone()
    return State(*row, entries=entries[0] if entries else 0)


def home(conn):
    """The schema the catalog tables live in (or will: the current one),
    quoted."""
    return conn.execute(
        "SELECT quote_ident(coalesce((SELECT n.nspname FROM pg_class c JOIN "
        "pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = "
        "to_regclass('pgcatalog_schema')), current_schema()))").fetchone()[0]


def apply(conn, steps=None, progress=None, lock_wait=LOCK_WAIT):
    """Run what the database lacks, one step per transaction (``conn`` in
    autocommit mode); the steps run.  ``progress(step, event, seconds)``
    is told ``"start"`` and ``"done"`` of each.  A database another
    process upgrades meanwhile is waited for and read again; one newer
    than ``steps`` is left as it is.

    The schema lock is held for the whole run (a session lock) and the
    state read again in each step's own transaction: a transaction begun
    before another process committed its tables would still find them
    missing in its catalog caches."""
    steps = STEPS if steps is None else steps
    done = []
    with conn.transaction():
        conn.execute(sql.SQL("SET LOCAL lock_timeout = {}").format(
            sql.Literal(lock_wait)))
        conn.execute("SELECT pg_advisory_lock(%s)", (LOCK,))
    try:
        while True:
            with conn.transaction():
                conn.execute(sql.SQL("SET LOCAL lock_timeout = {}").format(
                    sql.Literal(lock_wait)))
                state = read_state(conn)
                pending = state.pending(steps)
                if not pending:
                    return done
                step = pending[0]
                if progress is not None:
                    progress(step, "start", 0.0)
                started = time.monotonic()
                where = home(conn)
                for text in step.sql(where):
                    # several statements in one text (the baseline): the
                    # simple query protocol takes them at once
                    psycopg.ClientCursor(conn).execute(text)
                if state.version is None:
                    conn.execute(
                        "INSERT INTO pgcatalog_schema (version, compatible, "
                        "release) VALUES (%s, %s, %s)",
                        (step.version, step.version, __version__))
                else:
                    conn.execute(
                        "UPDATE pgcatalog_schema SET version = %s, "
                        "compatible = CASE WHEN %s THEN compatible ELSE %s "
                        "END, release = %s, updated = now()",
                        (step.version, step.compatible, step.version,
                         __version__))
            done.append(step)
            if progress is not None:
                progress(step, "done", time.monotonic() - started)
    finally:
        if not conn.closed:
            conn.execute("SELECT pg_advisory_unlock(%s)", (LOCK,))


def grants(conn, role):
    """The statements that give ``role`` what a running process needs on
    the catalog tables, and no more (docs/upgrade.md): the schema's usage,
    reading and writing every ``pgcatalog_*`` table (the triggers that keep
    the hot rows run as the writer), the sequences their ids come from.
    Not: creating or altering tables, functions or indexes (the owner's,
    through ``pgcatalog-migrate``).  Composed, never formatted."""
    where = conn.execute(
        "SELECT n.nspname FROM pg_class c JOIN pg_namespace n ON n.oid = "
        "c.relnamespace WHERE c.oid = to_regclass('pgcatalog_schema')"
    ).fetchone()
    if where is None:
        return []
    rows = conn.execute(
        "SELECT c.relname, c.relkind::text FROM pg_class c JOIN pg_namespace "
        "n ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relname LIKE "
        "'pgcatalog\\_%%' AND c.relkind IN ('r', 'S') ORDER BY 2, 1",
        (where[0],)).fetchall()
    who = sql.Identifier(role)
    found = [sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(
        sql.Identifier(where[0]), who)]
    for name, kind in rows:
        what = sql.Identifier(where[0], name)
        found.append(sql.SQL(
            "GRANT SELECT, INSERT, UPDATE, DELETE ON TABLE {} TO {}"
            if kind == "r" else
            "GRANT USAGE, SELECT ON SEQUENCE {} TO {}").format(what, who))
    return found
