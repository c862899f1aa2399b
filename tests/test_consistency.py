"""Catalog and objects agree in every transaction, across processes
(tests/consistency_probe.py): two writer processes commit as fast as they
can while three reader processes compare every answer with the objects the
same transaction loads, with the result cache off and on, and with the
catalog read on a streaming standby (in a snapshot of its own, or in
RelStorage's when RelStorage loads from that standby).  Not one answer may
be behind or ahead of the objects, nor may iterating one raise."""
import json
import os
import subprocess
import sys

import pytest


PROBE = os.path.join(os.path.dirname(__file__), "consistency_probe.py")


def probe(*args):
    done = subprocess.run(
        [sys.executable, "-W", "ignore", PROBE, "--writers", "2",
         "--readers", "3"] + list(args),
        capture_output=True, text=True, timeout=600)
    lines = [line for line in done.stdout.splitlines()
             if line.startswith("{")]
    assert done.returncode == 0 and lines, done.stderr[-3000:]
    return json.loads(lines[-1])


def agreed(result):
    assert result["commits"] > 20, result
    assert result["transactions"] > 50, result
    assert result["loads"] > 20, result
    for key in ("behind", "ahead", "stale", "transactions_off", "errors",
                "failures", "stale_loads", "old_objects", "diverged"):
        # the writers' tracebacks first: pytest cuts a long dict short
        assert result[key] == 0, (key, result.get("writer_errors"), result)


@pytest.mark.parametrize("cache", ["off", "on"])
def test_answers_agree_with_objects(cache):
    result = probe("--seconds", "20", "--cache", cache)
    agreed(result)
    if cache == "on":
        assert result["hits"] > 0, result


def test_answers_read_on_a_standby_agree_with_objects():
    # the catalog in another database than RelStorage's (a snapshot of its
    # own, as on ZEO or FileStorage), read on a streaming standby while
    # two writers commit as fast as they can
    result = probe("--seconds", "12", "--cache", "off", "--catalog",
                   "other", "--standby")
    agreed(result)
    assert result["standby_served"] > result["primary_served"], result


def test_answers_read_in_a_replicas_snapshot_agree_with_objects():
    # the catalog in RelStorage's database, the readers' RelStorage loading
    # from the standby (ro-replica-conf): the catalog reads in its snapshot
    # there; the writers' loads from the primary (a lagging replica lacks
    # what a writer just committed: RelStorage does not wait for it)
    result = probe("--seconds", "12", "--cache", "off", "--catalog", "same",
                   "--standby", "--ro-replica")
    agreed(result)
    assert result["standby_served"] > 4 * result["primary_served"], result
