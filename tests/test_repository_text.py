"""The repository speaks of the product: its README starts with the
install, and no tracked file (or file name) carries work-log vocabulary or
a machine's absolute paths."""
import pathlib
import re
import subprocess
import unittest


ROOT = pathlib.Path(__file__).resolve().parent.parent

#: words of a work log, not of a product (case-insensitive)
WORK_LOG = re.compile(
    r"\bstop \d+\b|\(stop \d+|\bissue #?\d+\b|\bworktrees?\b|/srv/|"
    r"/work/|/root/", re.IGNORECASE)
#: files whose text is not prose (binary or generated)
SKIP = (".png", ".svg", ".mo", ".whl", ".gz", ".ico")
#: this file names the patterns it looks for
SELF = "tests/test_repository_text.py"


def tracked():
    try:
        found = subprocess.run(["git", "ls-files"], cwd=ROOT, check=True,
                               capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    return [name for name in found.splitlines() if name]


class TestRepositoryText(unittest.TestCase):

    def test_readme_starts_with_the_install(self):
        lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
        self.assertLessEqual(len(lines), 120)
        first = [line for line in lines[:40] if "pip install" in line]
        self.assertTrue(first, "no pip install line in README's first 40")
        self.assertTrue(any(" -e " not in line and "--editable" not in line
                            for line in first))

    def test_no_work_log_vocabulary(self):
        names = tracked()
        if names is None:
            self.skipTest("not a git checkout")
        found = []
        for name in names:
            if WORK_LOG.search(name):
                found.append((name, "file name"))
            if name == SELF or name.endswith(SKIP):
                continue
            try:
                text = (ROOT / name).read_text(encoding="utf-8")
            except (UnicodeDecodeError, FileNotFoundError, IsADirectoryError):
                continue
            for number, line in enumerate(text.splitlines(), 1):
                match = WORK_LOG.search(line)
                if match:
                    found.append((name, number, match.group(0)))
        self.assertEqual(found, [])

    def test_the_pattern_finds_what_it_should(self):
        # (spelt in pieces, so that this file holds none of them whole)
        for text in ("as in stop " + "34", "(stop " + "35, writes)",
                     "see issue " + "13", "a work" + "tree",
                     "/" + "srv/runs/x.sh", "/" + "work/main/src"):
            self.assertTrue(WORK_LOG.search(text), text)
        for text in ("stops the server", "an issue of the ZODB",
                     "workflow", "the bar chart"):
            self.assertFalse(WORK_LOG.search(text), text)
