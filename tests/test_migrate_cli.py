"""``pgcatalog-migrate``: status, ``--sql`` and ``--apply`` on an empty
database and on the baseline, the refusals (a schema newer than this
release, one made before the first release, no DSN), and the DSN read from
a zope.conf by the installed console script."""
import io
import json
import os
import subprocess
import sys
import textwrap

import psycopg
import pytest

from plone.pgcatalog.cli import migrate
from plone.pgcatalog.schema import migrations
from plone.pgcatalog.testing import pgserver


@pytest.fixture
def dsn():
    dsn = pgserver.fresh_database("pgcatalog_migrate")
    yield dsn
    pgserver.drop_database(dsn)


def run(*argv):
    out, err = io.StringIO(), io.StringIO()
    status = migrate.main(list(argv), out=out, err=err)
    return status, out.getvalue(), err.getvalue()


def version(dsn):
    with psycopg.connect(dsn) as conn:
        return migrations.read_state(conn).version


def test_empty_database(dsn):
    status, out, err = run("--dsn", dsn)
    assert status == migrate.PENDING
    assert "schema: none (no catalog tables yet)" in out
    assert "  1  create the catalog tables (baseline)" in out
    assert "pgcatalog-migrate --apply" in out
    assert "password" not in out
    # --sql prints the baseline, runs nothing
    status, out, err = run("--dsn", dsn, "--sql")
    assert status == migrate.PENDING
    assert out.startswith("-- 1: create the catalog tables (baseline)\n")
    assert "CREATE TABLE pgcatalog_entries (" in out
    assert "@home@" not in out
    assert version(dsn) is None
    # --json
    status, out, err = run("--dsn", dsn, "--json")
    data = json.loads(out)
    assert data["database_schema_version"] is None
    assert data["up_to_date"] is False
    assert [s["version"] for s in data["pending"]] == [1] + [
        step.version for step in migrations.STEPS]


def test_apply_then_up_to_date(dsn):
    status, out, err = run("--dsn", dsn, "--apply")
    assert status == migrate.CURRENT
    assert out == "schema version %d\n" % migrations.SCHEMA_VERSION
    assert "1: create the catalog tables (baseline) ...\n" in err
    assert "1: done in" in err
    assert version(dsn) == migrations.SCHEMA_VERSION
    status, out, err = run("--dsn", dsn)
    assert status == migrate.CURRENT
    assert "schema: version %d (made by pgcatalog-plone" % (
        migrations.SCHEMA_VERSION) in out
    assert out.endswith("up to date\n")
    status, out, err = run("--dsn", dsn, "--apply")
    assert (status, out) == (migrate.CURRENT, "schema version %d (nothing to "
                             "do)\n" % migrations.SCHEMA_VERSION)
    status, out, err = run("--dsn", dsn, "--sql")
    assert (status, out) == (migrate.CURRENT, "")


def test_postings_named(dsn):
    """``--postings``: the text indexes whose postings the database keeps
    (Title in a new one); refused before the schema is up to date."""
    status, out, err = run("--dsn", dsn, "--postings", "Title")
    assert status == migrate.ERROR
    assert "pgcatalog-migrate --apply first" in err
    run("--dsn", dsn, "--apply")
    status, out, err = run("--dsn", dsn, "--postings",
                           " SearchableText, Title,")
    assert status == migrate.CURRENT
    assert out == ("postings kept for: SearchableText, Title (added: "
                   "SearchableText; taken off: none)\n")
    status, out, err = run("--dsn", dsn, "--postings", "")
    assert out == ("postings kept for: none (added: none; taken off: "
                   "SearchableText, Title)\n")
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT count(*) FROM pgcatalog_postings_names"
                            ).fetchone() == (0,)


def test_pending_steps_on_the_baseline(dsn, later_release):
    a, b = (step.version for step in later_release)
    with psycopg.connect(dsn, autocommit=True) as conn:
        # this release's schema; the test steps after it pending
        migrations.apply(conn, steps=migrations.STEPS[:-2])
        conn.execute("SELECT 1")
    status, out, err = run("--dsn", dsn)
    assert status == migrate.PENDING
    assert ("  %d  a table for the test: writes go on; about 2 s per 100,000 "
            "entries (under a second here); processes of the release "
            "before it keep running" % a) in out
    assert ("  %d  a column for the test: catalog writes wait while it runs; "
            "about 40 s per 100,000 entries (under a second here); stop "
            "processes of older releases first" % b) in out
    status, out, err = run("--dsn", dsn, "--sql")
    assert out == (
        "-- %d: a table for the test\n"
        "CREATE TABLE pgcatalog_test_step (id integer);\n\n"
        "INSERT INTO pgcatalog_test_step VALUES (1), (2);\n\n"
        "-- %d: a column for the test\n"
        "ALTER TABLE pgcatalog_test_step ADD COLUMN n integer NOT NULL "
        "DEFAULT 0;\n\n" % (a, b))
    status, out, err = run("--dsn", dsn, "--apply")
    assert status == migrate.CURRENT
    assert err.splitlines()[0] == "%d: a table for the test ..." % a
    assert err.splitlines()[2] == "%d: a column for the test ..." % b
    assert version(dsn) == b


def test_newer_schema_is_an_error(dsn, test_steps):
    with psycopg.connect(dsn, autocommit=True) as conn:
        migrations.apply(conn, steps=test_steps)
    status, out, err = run("--dsn", dsn)
    assert status == migrate.ERROR
    assert "its processes cannot run on it; upgrade pgcatalog-plone" in out
    status, out, err = run("--dsn", dsn, "--apply")
    assert status == migrate.ERROR
    assert "upgrade pgcatalog-plone" in err
    assert version(dsn) == test_steps[-1].version
    # only additive steps ahead: fine
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("UPDATE pgcatalog_schema SET compatible = 1")
    status, out, err = run("--dsn", dsn)
    assert status == migrate.CURRENT
    assert "newer than this release: its processes run on it" in out


def test_prerelease_schema_is_an_error(dsn):
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE pgcatalog_schema (version integer)")
        conn.execute("INSERT INTO pgcatalog_schema VALUES (21)")
    status, out, err = run("--dsn", dsn, "--apply")
    assert status == migrate.ERROR
    assert "development version from before the first release (version " \
           "21)" in err


def test_no_dsn(monkeypatch):
    monkeypatch.delenv("PGCATALOG_DSN", raising=False)
    status, out, err = run()
    assert status == migrate.ERROR
    assert err.startswith("pgcatalog-migrate: plone.pgcatalog has no "
                          "PostgreSQL DSN")


def test_console_script_reads_the_zope_conf(dsn, tmp_path):
    """The installed command, the DSN from a zope.conf's product-config
    (the environment's PGCATALOG_DSN is not what it uses)."""
    conf = tmp_path / "zope.conf"
    conf.write_text(textwrap.dedent("""\
        %%define INSTANCE %s
        instancehome $INSTANCE
        <product-config plone.pgcatalog>
            dsn %s
        </product-config>
        <zodb_db main>
            <mappingstorage/>
            mount-point /
        </zodb_db>
        """ % (tmp_path, dsn)))
    script = os.path.join(os.path.dirname(sys.executable),
                          "pgcatalog-migrate")
    env = dict(os.environ, PGCATALOG_DSN="host=/nonexistent dbname=x")
    done = subprocess.run([script, "--zope-conf", str(conf), "--apply"],
                          capture_output=True, text=True, env=env,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "schema version %d\n" % migrations.SCHEMA_VERSION
    assert version(dsn) == migrations.SCHEMA_VERSION


def test_grant_sql(dsn):
    run("--dsn", dsn, "--apply")
    status, out, err = run("--dsn", dsn, "--sql", "--grant", 'web "app"')
    assert status == migrate.CURRENT
    lines = out.splitlines()
    assert lines[0] == '-- what web "app" may do'
    assert lines[1] == 'GRANT USAGE ON SCHEMA "public" TO "web ""app""";'
    assert 'GRANT SELECT, INSERT, UPDATE, DELETE ON TABLE ' \
        '"public"."pgcatalog_entries" TO "web ""app""";' in lines
    assert 'GRANT USAGE, SELECT ON SEQUENCE "public"."pgcatalog_rid_seq" ' \
        'TO "web ""app""";' in lines
    # every catalog table and sequence, and nothing else
    with psycopg.connect(dsn) as conn:
        relations = conn.execute(
            "SELECT count(*) FROM pg_class WHERE relname LIKE "
            "'pgcatalog\\_%' AND relkind IN ('r', 'S')").fetchone()[0]
    assert len(lines) == 2 + relations
    # an unknown role: PostgreSQL's refusal, in one line
    status, out, err = run("--dsn", dsn, "--grant", "no-such-role")
    assert status == migrate.ERROR
    assert err.startswith("pgcatalog-migrate: PostgreSQL refused: role "
                          '"no-such-role" does not exist')
