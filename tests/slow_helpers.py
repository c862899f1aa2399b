"""Test helpers: searches made slow on purpose (a test-only hook)."""
import contextlib
from unittest import mock

from plone.pgcatalog import compiler
from plone.pgcatalog.fragment import q


@contextlib.contextmanager
def slow_searches(seconds):
    """Every search's condition also sleeps ``seconds`` in PostgreSQL (once
    per statement: an uncorrelated sub-select)."""
    original = compiler.conditions_for

    def conditions_for(catalog, query, qc, hot_conditions=None):
        conditions = original(catalog, query, qc, hot_conditions)
        if conditions is not None:
            conditions.append(q("(SELECT true FROM pg_sleep({}))",
                                float(seconds)))
            if hot_conditions is not None:
                # the hot rows cannot sleep: the entries answer
                hot_conditions.append(None)
        return conditions

    with mock.patch.object(compiler, "conditions_for", conditions_for):
        yield
