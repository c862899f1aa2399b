"""RelStorage loading objects from a standby (``ro-replica-conf``): the
catalog reads in RelStorage's snapshot on that standby
(tests/replica_scenario.py, in a process of its own; across processes:
tests/test_consistency.py)."""
import json
import os
import subprocess
import sys


HERE = os.path.dirname(__file__)


def test_catalog_reads_in_the_replicas_snapshot():
    proc = subprocess.run(
        [sys.executable, "-W", "ignore",
         os.path.join(HERE, "replica_scenario.py")],
        capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-5000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["checks"] == [
        "read on the standby in RelStorage's snapshot",
        "replay paused: objects and catalog of one moment",
        "replay resumed: both moved on",
        "a writing transaction wrote on the primary",
        "standby stopped: no catalog error",
        "a replica not among standby-dsns: nothing shared"]
