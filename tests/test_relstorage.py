"""A Plone site on RelStorage (PostgreSQL) with plone.pgcatalog.

The scenario (tests/relstorage_scenario.py) runs in its own process because
it starts a Zope application on RelStorage; it checks after each step
(create, edit, publish, move, rename, delete, abort, snapshots guessed
and given up, conflict and retry, bounded lock waits) that the catalog agrees with the ZODB.
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
        "abort", "a snapshot of its own that agrees, no export",
        "a snapshot of its own ahead of the objects: the storage's instead",
        "guessed snapshots", "conflict and retry", "lock wait bounded, conflict raised"]


def test_races_and_faults_end_as_in_zcatalog():
    """tests/relstorage_races.py: two-request races, faults at each commit
    phase, killed backends, in-doubt transactions, a vanished catalog and
    concurrent editors; the catalog equals the ZODB after each."""
    proc = subprocess.run(
        [sys.executable, "-W", "ignore",
         os.path.join(HERE, "relstorage_races.py")],
        capture_output=True, text=True, timeout=900, cwd=HERE)
    assert proc.returncode == 0, proc.stderr[-5000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["ok"]
    checks = result["checks"]
    for case in ("publish vs delete grandchild", "publish vs move grandchild",
                 "reindex vs uncatalog", "rename vs reindex", "edit vs edit",
                 "different entries: no conflict", "one snapshot: the ZODB's",
                 "idle backends killed: next requests work",
                 "backend killed during a write: retried, nothing "
                 "half-written"):
        assert case in checks, (case, checks)
    assert any(c.startswith("vanished catalog") for c in checks), checks
    assert any(c.endswith("concurrent editors: catalog equals ZODB")
               for c in checks), checks
    for kind in ("commits", "edits", "writes elsewhere"):
        assert any(c.startswith("result cache: ") and
                   c.endswith(kind + ", none stale") for c in checks), checks
    if "no two-phase commit on this server: its cases skipped" not in checks:
        for case in ("storage fails in tpc_vote: catalog not ahead",
                     "storage fails in tpc_finish: catalog not ahead",
                     "backend killed after the catalog's vote: committed",
                     "in-doubt prepared transaction resolved"):
            assert case in checks, (case, checks)
    for case, figures in result["figures"].items():
        if isinstance(figures, dict) and "divergences" in figures:
            assert figures["divergences"] == 0, (case, figures)
