"""The package's layout keeps the architecture visible: a few modules at
the top and packages by job, no import cycle (imports inside functions
included), no module or class too big to read, and migration steps that
describe the schema without importing runtime code."""
import ast
import pathlib
import unittest

import plone.pgcatalog

PACKAGE = pathlib.Path(plone.pgcatalog.__file__).parent
NAME = "plone.pgcatalog"

#: limits a reader can hold (a module that does one job may be long, but
#: not longer than this)
MAX_TOP_MODULES = 14
MAX_MODULE_LINES = 700
MAX_CLASS_LINES = 450


def modules():
    """{dotted name: path} of every module of the package."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join((NAME,) + parts)] = path
    return found


def imports(name, path, known):
    """The package's modules that module ``name`` imports, anywhere in it
    (at module level or inside a function)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    is_package = path.name == "__init__.py"
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".")
                if not is_package:
                    base = base[:-1]
                base = base[:len(base) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module
                                          else []))
            else:
                module = node.module or ""
            targets = []
            for alias in node.names:
                sub = module + "." + alias.name
                targets.append(sub if sub in known else module)
        else:
            continue
        found.update(t for t in targets if t in known and t != name)
    return found


def cycles(graph):
    """The strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on_stack, result = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                result.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return result


class TestLayout(unittest.TestCase):

    def test_few_modules_at_the_top(self):
        top = sorted(p.name for p in PACKAGE.glob("*.py"))
        self.assertLessEqual(len(top), MAX_TOP_MODULES, top)

    def test_no_import_cycle(self):
        known = modules()
        graph = {name: imports(name, path, known)
                 for name, path in known.items()}
        self.assertEqual(cycles(graph), [])

    def test_cycle_finder_finds_cycles(self):
        graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
        self.assertEqual(cycles(graph), [["a", "b", "c"]])

    def test_modules_and_classes_a_reader_can_hold(self):
        too_long = []
        for name, path in modules().items():
            text = path.read_text(encoding="utf-8")
            lines = text.count("\n")
            if lines > MAX_MODULE_LINES:
                too_long.append((name, lines))
            for node in ast.walk(ast.parse(text)):
                if isinstance(node, ast.ClassDef):
                    length = node.end_lineno - node.lineno + 1
                    if length > MAX_CLASS_LINES:
                        too_long.append((name + "." + node.name, length))
        self.assertEqual(too_long, [])

    def test_migrations_import_no_runtime_code(self):
        known = modules()
        prefix = NAME + ".schema.migrations"
        for name, path in known.items():
            if name.startswith(prefix):
                with self.subTest(module=name):
                    self.assertEqual(
                        {m for m in imports(name, path, known)
                         if not m.startswith(prefix)} - {NAME}, set())

    def test_test_modules_import_no_other_test_module(self):
        """Shared bases, layers and helpers live in helper modules
        (catalog_cases.py, differential_layer.py, statements.py...), not in
        another test module (whose tests would run twice)."""
        here = pathlib.Path(__file__).parent
        found = []
        for path in sorted(here.glob("test_*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                names = []
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and not node.level:
                    names = [node.module or ""]
                found.extend((path.name, name) for name in names
                             if name.startswith("test_"))
        self.assertEqual(found, [])
