"""What every part of level1 shares: the backends, the seed, where the
catalog lives, the log line, JSON out, the source state, run_benchmarks."""
import hashlib
import json
import os
import subprocess
import sys
import time


BACKENDS = ("zcatalog", "pgcatalog")
SEED = 20250101
PLAN_VERSION = 1
SITE_ID = "plone"
RENDER_BRAINS = 20


# the benchmarks directory (where run_benchmarks.py is); the repository
# is its parent
BENCHMARKS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def log(*args):
    print("[%s]" % time.strftime("%H:%M:%S"), *args, file=sys.stderr,
          flush=True)


def run_benchmarks_module():
    import run_benchmarks
    return run_benchmarks


def write_json(path, data):
    with open(path, "w") as f:
        json.dump(data, f, indent=1, default=str)


def parse_list(text, conv=int):
    return [conv(x.strip()) for x in text.split(",") if x.strip()]


def source_state():
    """The git commit of the working tree and a digest of its uncommitted
    changes to src/ (the package is measured as it is on disk)."""
    root = os.path.dirname(BENCHMARKS)
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root,
                              capture_output=True, text=True).stdout.strip()
        diff = subprocess.run(["git", "diff", "HEAD", "--", "src"], cwd=root,
                              capture_output=True).stdout
        return {"commit": head, "src_diff_sha256":
                hashlib.sha256(diff).hexdigest() if diff else None}
    except OSError:
        return None
