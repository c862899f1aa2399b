"""Test helpers: searches made slow on purpose (a test-only hook)."""
import contextlib
from unittest import mock

from plone.pgcatalog.pg.fragment import and_
from plone.pgcatalog.pg.fragment import q
from plone.pgcatalog.search import compiler


@contextlib.contextmanager
def slow_searches(seconds):
    """Every search's condition also sleeps ``seconds`` in PostgreSQL (once
    per statement: an uncorrelated sub-select)."""
    original = compiler.conditions_for
    sleep = q("(SELECT true FROM pg_sleep({}))", float(seconds))

    def conditions_for(catalog, query, qc):
        conditions = original(catalog, query, qc)
        if conditions is not None:
            # the first condition sleeps too; the hot rows and the text
            # rows cannot sleep: the entries answer
            first = conditions[0]
            conditions[0] = compiler.Condition(
                first.index, first.iq, and_(first.where, sleep))
        return conditions

    with mock.patch.object(compiler, "conditions_for", conditions_for):
        yield
