"""What every part of level1 shares (beyond ``benchmarks/shared.py``): the
seed, the plan version, where the catalog lives, list options, the source
state."""
import hashlib
import os
import subprocess

from shared import BENCHMARKS


SEED = 20250101
PLAN_VERSION = 1
SITE_ID = "plone"
# a query's timed runs stop after --max-seconds-per-query, but not before
MIN_ITERATIONS = 5


def parse_list(text, conv=int):
    return [conv(x.strip()) for x in text.split(",") if x.strip()]


def source_state():
    """The git commit of the working tree, the tree id of its src/ and a
    digest of its uncommitted changes to src/ (the package is measured as
    it is on disk).  A stored catalog is reused by the tree and the digest
    (``source_key``): a commit that changes no source (documentation,
    benchmark results) does not make the next run rebuild."""
    root = os.path.dirname(BENCHMARKS)
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root,
                              capture_output=True, text=True).stdout.strip()
        tree = subprocess.run(["git", "rev-parse", "HEAD:src"], cwd=root,
                              capture_output=True, text=True).stdout.strip()
        diff = subprocess.run(["git", "diff", "HEAD", "--", "src"], cwd=root,
                              capture_output=True).stdout
        return {"commit": head, "src_tree": tree, "src_diff_sha256":
                hashlib.sha256(diff).hexdigest() if diff else None}
    except OSError:
        return None


def source_key(state):
    """What decides whether a stored catalog fits this source."""
    if not state:
        return None
    if state.get("src_tree"):
        return (state["src_tree"], state.get("src_diff_sha256"))
    return (state.get("commit"), state.get("src_diff_sha256"))
