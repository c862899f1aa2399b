"""The examples in the package's docstrings run, and say what they show
(each module with ``>>>`` examples is collected: a new one is found)."""
import doctest
import importlib
import pkgutil
import unittest

import plone.pgcatalog


def modules_with_examples():
    found = []
    for info in pkgutil.walk_packages(plone.pgcatalog.__path__,
                                      "plone.pgcatalog."):
        if info.name.startswith("plone.pgcatalog.testing"):
            continue
        module = importlib.import_module(info.name)
        if doctest.DocTestFinder().find(module) and any(
                test.examples for test in doctest.DocTestFinder().find(
                    module)):
            found.append(module)
    return found


class TestDocstringExamples(unittest.TestCase):

    def test_examples_pass(self):
        modules = modules_with_examples()
        # fragment.py's composition is shown by example
        self.assertIn("plone.pgcatalog.pg.fragment",
                      [m.__name__ for m in modules])
        for module in modules:
            with self.subTest(module=module.__name__):
                result = doctest.testmod(module, report=False)
                self.assertGreater(result.attempted, 0)
                self.assertEqual(result.failed, 0)
