"""A Plone site on RelStorage (PostgreSQL) with plone.pgcatalog.

The scenario (tests/relstorage_scenario.py) runs in its own process because
it starts a Zope application on RelStorage; it checks after each step
(create, edit, publish, move, rename, delete, abort, conflict and retry,
bounded lock waits) that the catalog agrees with the ZODB.
"""
import json
import os
import subprocess
import sys


HERE = os.path.dirname(__file__)


def test_plone_on_relstorage_catalog_agrees_with_zodb():
    proc = subprocess.run(
        [sys.executable, "-W", "ignore",
         os.path.join(HERE, "relstorage_scenario.py")],
        capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-5000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["ok"]
    assert result["checks"] == [
        "site created", "create", "edit", "publish",
        "anonymous sees published only", "move", "rename", "delete",
        "abort", "conflict and retry", "lock wait bounded, conflict raised"]
