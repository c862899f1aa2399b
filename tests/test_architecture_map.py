"""The map of the package in docs/architecture.md matches the package.

The tree block of docs/architecture.md (the first ``` block after
"## Rooms") names every module of ``src/plone/pgcatalog``, each under its
package:

* an entry line is ``<prefix><├── or └──><names>  <description>``, where the
  prefix is one ``│   `` or ``    `` per level of nesting (four characters
  each); its names are those before the description: one file or folder
  (``tool.py``, ``pg/``), or several separated by commas
  (``field.py, uuid.py, boolean.py``), each counted; a name ending in ``/``
  is a folder, under which the deeper entries that follow are resolved;
* lines without ``├──`` / ``└──`` continue the description above them, and
  file names in descriptions do not count.

Checked both ways: every file and folder the map names exists, and every
``*.py`` of the package (``__init__.py`` files aside, which their folder's
line stands for) and every package folder is in the map, at its place.
Nothing is left out: ``testing/`` and ``indexes/`` are listed module by
module too.  No server, no Plone layer: the standard library and the
package's location only.
"""
import os
import re
import unittest

import plone.pgcatalog


PACKAGE_DIR = os.path.dirname(os.path.abspath(plone.pgcatalog.__file__))
ARCHITECTURE_MD = os.path.join(
    os.path.dirname(os.path.abspath(__file__)), os.pardir, "docs",
    "architecture.md")
ROOT_LINE = "src/plone/pgcatalog/"

_ENTRY = re.compile(r"^((?:│   |    )*)(?:├── |└── )(.*)$")
# the names: one or more tokens without spaces, separated by ", " (a
# trailing comma allowed); the description follows after white space
_NAMES = re.compile(r"^([^\s,]+(?:, ?[^\s,]+)*,?)(?:\s+(.*))?$")
_NAME = re.compile(r"^[\w.-]+/?$")


class MapError(Exception):
    """The tree block cannot be read as a map."""


def tree_block(text):
    """The lines of the first ``` block after the "## Rooms" heading, as
    (line number in the file, line)."""
    lines = text.splitlines()
    try:
        start = lines.index("## Rooms")
    except ValueError:
        raise MapError('docs/architecture.md has no "## Rooms" heading')
    opened = None
    for number in range(start + 1, len(lines)):
        if lines[number].startswith("```"):
            if opened is None:
                opened = number
            else:
                return [(n + 1, lines[n]) for n in range(opened + 1, number)]
        elif lines[number].startswith("## ") and opened is None:
            break
    raise MapError('no complete ``` block after "## Rooms" in '
                   "docs/architecture.md")


def named_paths(block):
    """{path relative to the package: line number} of every file and folder
    the block names (folders end in "/")."""
    if not block or block[0][1].strip() != ROOT_LINE:
        raise MapError("the tree block should start with %r, not %r"
                       % (ROOT_LINE, block[0][1] if block else ""))
    named = {}
    # folders[d] is the folder the entries of depth d are in ("" = root)
    folders = [""]
    for number, line in block[1:]:
        entry = _ENTRY.match(line)
        if entry is None:
            continue  # a description's continuation, or an empty line
        prefix, rest = entry.groups()
        depth = len(prefix) // 4
        if depth >= len(folders):
            raise MapError("line %d is nested under no folder (is a "
                           "folder's line above it missing, or a line "
                           "indented wrongly?): %r" % (number, line))
        del folders[depth + 1:]
        names = _NAMES.match(rest)
        if names is None:
            raise MapError("line %d names nothing: %r" % (number, line))
        tokens = [t.strip() for t in names.group(1).split(",") if t.strip()]
        for token in tokens:
            if not _NAME.match(token):
                raise MapError("line %d: %r is not a file or folder name"
                               % (number, token))
            path = folders[depth] + token
            if path in named:
                raise MapError("%s is named twice (lines %d and %d)"
                               % (path, named[path], number))
            named[path] = number
        if len(tokens) == 1 and tokens[0].endswith("/"):
            folders.append(folders[depth] + tokens[0])
    return named


def package_paths(root):
    """The modules ("pg/session.py") and package folders ("pg/") of the
    package, __init__.py files left out."""
    found = set()
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        relative = os.path.relpath(folder, root).replace(os.sep, "/")
        relative = "" if relative == "." else relative + "/"
        if relative and "__init__.py" in files:
            found.add(relative)
        for name in files:
            if name.endswith(".py") and name != "__init__.py":
                found.add(relative + name)
    return found


def _exists(root, path):
    full = os.path.join(root, *path.rstrip("/").split("/"))
    return os.path.isdir(full) if path.endswith("/") else os.path.isfile(full)


@unittest.skipUnless(
    os.path.isfile(ARCHITECTURE_MD),
    "docs/architecture.md is not beside tests/ (an installed copy without "
    "the docs folder): no map to check")
class ArchitectureMapTests(unittest.TestCase):

    def setUp(self):
        with open(ARCHITECTURE_MD, encoding="utf-8") as f:
            text = f.read()
        try:
            self.named = named_paths(tree_block(text))
        except MapError as error:
            self.fail("the map in docs/architecture.md (## Rooms) cannot be "
                      "read: %s" % error)

    def test_every_name_in_the_map_exists(self):
        missing = sorted(
            "%s (docs/architecture.md line %d)" % (path, line)
            for path, line in self.named.items()
            if not _exists(PACKAGE_DIR, path))
        if missing:
            self.fail(
                "the map in docs/architecture.md (## Rooms) names what "
                "src/plone/pgcatalog does not hold (moved, renamed or "
                "removed? a line indented under the wrong folder?):\n  "
                + "\n  ".join(missing))

    def test_every_module_is_in_the_map(self):
        absent = sorted(package_paths(PACKAGE_DIR) - set(self.named))
        if absent:
            self.fail(
                "modules or packages of src/plone/pgcatalog missing from the "
                "map in docs/architecture.md (## Rooms); add a line for each "
                "under its folder:\n  " + "\n  ".join(absent))


if __name__ == "__main__":
    unittest.main()
