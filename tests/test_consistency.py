"""Catalog and objects agree in every transaction, across processes
(tests/consistency_probe.py): two writer processes commit as fast as they
can while three reader processes compare every answer with the objects the
same transaction loads, with the result cache off and on.  Not one answer
may be behind or ahead of the objects, nor may iterating one raise."""
import json
import os
import subprocess
import sys

import pytest


PROBE = os.path.join(os.path.dirname(__file__), "consistency_probe.py")


@pytest.mark.parametrize("cache", ["off", "on"])
def test_answers_agree_with_objects(cache):
    done = subprocess.run(
        [sys.executable, "-W", "ignore", PROBE, "--seconds", "20",
         "--writers", "2", "--readers", "3", "--cache", cache],
        capture_output=True, text=True, timeout=600)
    lines = [line for line in done.stdout.splitlines()
             if line.startswith("{")]
    assert done.returncode == 0 and lines, done.stderr[-3000:]
    result = json.loads(lines[-1])
    assert result["commits"] > 20, result
    assert result["transactions"] > 50, result
    assert result["loads"] > 20, result
    for key in ("behind", "ahead", "stale", "transactions_off", "errors",
                "failures", "stale_loads", "old_objects", "diverged"):
        assert result[key] == 0, (key, result)
    if cache == "on":
        assert result["hits"] > 0, result
