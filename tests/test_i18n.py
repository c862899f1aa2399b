"""Translations (domain plone.pgcatalog, ``locales/``): the committed
catalogs agree with each other and with the sources, and a site whose
visitor asks for German shows the control panel and the catalog's ZMI tabs
in German (Plone's request language negotiation), while the same pages stay
English for everyone else.

CONTRIBUTING.md ("Translations") says how the files are made."""
import ast
import io
import os
import re
import sys
import unittest
import xml.etree.ElementTree as ElementTree
from pathlib import Path
from urllib.parse import unquote

import transaction
from babel.messages.mofile import read_mo
from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po

import plone.pgcatalog
from plone.pgcatalog.testing import PGCATALOG_FUNCTIONAL_TESTING


sys.path.insert(0, os.path.dirname(__file__))
import web_surface_probe as probe  # noqa: E402


PACKAGE = Path(plone.pgcatalog.__file__).parent
DOMAIN = "plone.pgcatalog"
LOCALES = PACKAGE / "locales"
POT = LOCALES / (DOMAIN + ".pot")
LANGUAGES = sorted(p.name for p in LOCALES.iterdir() if p.is_dir())
#: a placeholder of a message: ${name}
PLACEHOLDER = re.compile(r"\$\{(\w+)\}")
#: the XML namespace of i18n attributes in templates and profiles
I18N = "http://xml.zope.org/namespaces/i18n"


def read_catalog(path):
    with open(path, "rb") as f:
        return read_po(f, domain=DOMAIN)


def po_path(language):
    return LOCALES / language / "LC_MESSAGES" / (DOMAIN + ".po")


def default_of(message):
    """The English text of a pot message: its ``Default:`` comment (a
    template's explicit msgid), or the msgid itself."""
    for comment in message.auto_comments:
        if comment.startswith('Default: "') and comment.endswith('"'):
            return comment[len('Default: "'):-1]
    return message.id


class TestCatalogs(unittest.TestCase):
    """The .pot, each .po and its compiled .mo."""

    def test_german_is_there(self):
        self.assertIn("de", LANGUAGES)

    def test_po_translates_every_message_of_the_pot(self):
        pot = {m.id: m for m in read_catalog(POT) if m.id}
        self.assertGreater(len(pot), 100)
        for language in LANGUAGES:
            po = {m.id: m for m in read_catalog(po_path(language)) if m.id}
            with self.subTest(language=language):
                self.assertEqual(sorted(set(pot) - set(po)), [],
                                 "in the .pot, not in the .po: i18ndude sync")
                self.assertEqual(sorted(set(po) - set(pot)), [],
                                 "in the .po only: i18ndude sync")
                for msgid, message in po.items():
                    self.assertTrue(message.string, "untranslated: %r"
                                    % msgid)
                    self.assertFalse(message.fuzzy, "fuzzy: %r" % msgid)
                    # the same ${names} as the English text
                    self.assertEqual(
                        sorted(PLACEHOLDER.findall(message.string)),
                        sorted(PLACEHOLDER.findall(default_of(pot[msgid]))),
                        msgid)

    def test_committed_mo_is_compiled_from_the_po(self):
        for language in LANGUAGES:
            po = read_catalog(po_path(language))
            compiled = io.BytesIO()
            write_mo(compiled, po)
            compiled.seek(0)
            with open(po_path(language).with_suffix(".mo"), "rb") as f:
                committed = read_mo(f)
            fresh = read_mo(compiled)
            with self.subTest(language=language):
                self.assertEqual(
                    {m.id: m.string for m in committed if m.id},
                    {m.id: m.string for m in fresh if m.id},
                    "the .mo is older than the .po: compile it again "
                    "(CONTRIBUTING.md)")


def python_msgids():
    """``{msgid: where}`` of every ``_("...")`` call in the package's
    modules (the message factory of our domain is ``_``)."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) \
                    and isinstance(node.func, ast.Name) \
                    and node.func.id == "_" and node.args:
                first = node.args[0]
                if not (isinstance(first, ast.Constant)
                        and isinstance(first.value, str)):
                    raise AssertionError("%s:%d: _() of a non-literal"
                                         % (path, node.lineno))
                found[first.value] = "%s:%d" % (path.name, node.lineno)
    return found


def template_msgids():
    """``{msgid: where}`` of the explicit msgids of every template
    (``i18n:translate="id"``, ``i18n:attributes="attr id; ..."``); a
    template that translates without declaring our domain, or with a
    msgid taken from its text (``i18n:translate=""``), fails."""
    found = {}
    paths = sorted(PACKAGE.rglob("*.pt")) + sorted(PACKAGE.rglob("*.zpt"))
    for path in paths:
        text = path.read_text(encoding="utf-8")
        if "i18n:" not in text:
            continue
        if 'i18n:domain="%s"' % DOMAIN not in text:
            raise AssertionError("%s translates without i18n:domain=%r"
                                 % (path.name, DOMAIN))
        for msgid in re.findall(r'\bi18n:translate="([^"]*)"', text):
            if not msgid.strip():
                raise AssertionError("%s: i18n:translate without an "
                                     "explicit msgid" % path.name)
            found[msgid] = path.name
        for spec in re.findall(r'\bi18n:attributes="([^"]*)"', text):
            for pair in spec.split(";"):
                words = pair.split()
                if len(words) != 2:
                    raise AssertionError("%s: i18n:attributes=%r without "
                                         "an explicit msgid"
                                         % (path.name, spec))
                found[words[1]] = path.name
    return found


def configuration_msgids():
    """``{msgid: where}`` of the GenericSetup profiles' titles and
    descriptions (ZCML of our domain) and the configlets' titles."""
    found = {}
    for path in sorted(PACKAGE.glob("*.zcml")):
        root = ElementTree.parse(path).getroot()
        if root.get("i18n_domain") != DOMAIN:
            continue
        for node in root.iter(
                "{http://namespaces.zope.org/genericsetup}registerProfile"):
            for name in ("title", "description"):
                if node.get(name):
                    found[node.get(name)] = path.name
    for path in sorted(PACKAGE.glob("profiles/*/controlpanel.xml")):
        root = ElementTree.parse(path).getroot()
        for node in root.iter("configlet"):
            if node.get("title"):
                domain = node.get("{%s}domain" % I18N) \
                    or root.get("{%s}domain" % I18N)
                if domain != DOMAIN:
                    raise AssertionError("%s: configlet %r outside our "
                                         "domain" % (path, node.get("title")))
                found[node.get("title")] = path.name
    return found


class TestPotFollowsTheSources(unittest.TestCase):
    """Every message the sources use is in the .pot (rebuild it with
    i18ndude when this fails: CONTRIBUTING.md)."""

    def setUp(self):
        self.pot = {m.id for m in read_catalog(POT) if m.id}

    def check(self, found):
        self.assertTrue(found)
        missing = {msgid: where for msgid, where in found.items()
                   if msgid not in self.pot}
        self.assertEqual(missing, {}, "not in the .pot: i18ndude "
                         "rebuild-pot")

    def test_python_messages(self):
        found = python_msgids()
        self.assertIn("Statement timeout of catalog reads (ms)", found)
        self.assertIn("Shadow mode settings saved.", found)
        self.check(found)

    def test_template_messages(self):
        found = template_msgids()
        self.assertIn("heading_status", found)          # controlpanel.pt
        self.assertIn("button_reindex_selected", found)  # www/status.zpt
        self.check(found)

    def test_profile_and_configlet_messages(self):
        found = configuration_msgids()
        self.assertIn("plone.pgcatalog: PostgreSQL catalog", found)
        self.assertIn("PostgreSQL catalog", found)
        self.check(found)


class TestGermanPages(unittest.TestCase):
    """A visitor whose browser asks for German, on a site offering it."""

    layer = PGCATALOG_FUNCTIONAL_TESTING

    def setUp(self):
        from plone.registry.interfaces import IRegistry
        from zope.component import getUtility
        self.portal = self.layer["portal"]
        probe.setup_content(self.portal)
        registry = getUtility(IRegistry, context=self.portal)
        registry["plone.available_languages"] = ["en", "de"]
        registry["plone.use_request_negotiation"] = True
        transaction.commit()
        self.client = probe.make_client(self.layer["app"])

    def request(self, method, path, language, params=None):
        environ = dict(probe.auth_header("Manager"))
        if language:
            environ["HTTP_ACCEPT_LANGUAGE"] = language
        call = self.client.get if method == "GET" else self.client.post
        response = call(path, params=params or {}, extra_environ=environ,
                        expect_errors=True)
        transaction.abort()
        return (response.status_int, response.headers.get("Location", ""),
                response.body.decode("utf-8"))

    def text(self, path, language):
        status, _, body = self.request("GET", path, language)
        self.assertEqual(status, 200, body[:2000])
        return body, " ".join(re.sub(r"<[^>]+>", " ", body).split())

    def test_control_panel(self):
        body, text = self.text("/plone/@@pgcatalog-controlpanel", "de")
        table = re.search(r'id="pgc-controlpanel-status">(.*?)</table>',
                          body, re.S).group(1)
        table = " ".join(re.sub(r"<[^>]+>", " ", table).split())
        self.assertIn("Einträge %d" % len(self.portal.portal_catalog),
                      table)
        self.assertIn("Datenbank", table)
        self.assertIn("Geltendes Zeitlimit für Leseanfragen", table)
        self.assertIn("Einstellungen", text)                   # a heading
        self.assertIn("Zeitlimit für Leseanfragen an den Katalog (ms)",
                      text)                                    # a field
        self.assertIn("plone.pgcatalog speichert den Katalog dieser Website "
                      "in PostgreSQL.", text)
        self.assertNotIn("Statement timeout of catalog reads", text)
        # the same page for a browser asking for English
        _, text = self.text("/plone/@@pgcatalog-controlpanel", "en")
        self.assertIn("Statement timeout of catalog reads (ms)", text)
        self.assertNotIn("Einträge", text)

    def test_configlet_in_site_setup(self):
        _, text = self.text("/plone/@@overview-controlpanel", "de")
        self.assertIn("PostgreSQL-Katalog", text)

    def test_zmi_catalog_tab(self):
        body, text = self.text("/plone/portal_catalog/manage_catalogStatus",
                               "de")
        self.assertIn("Dieser Katalog speichert seine Einträge in "
                      "PostgreSQL (plone.pgcatalog).", text)
        self.assertIn("Einträge %d" % len(self.portal.portal_catalog),
                      text)
        self.assertIn("Noch kein Online-Aufbau.", text)
        self.assertIn("Online-Aufbau fortsetzen", text)         # a button
        self.assertIn('value="Ausgewählte neu indizieren"', body)  # an input
        self.assertNotIn("Reindex selected", body)
        # a browser without a language preference: the site's, English
        body, text = self.text(
            "/plone/portal_catalog/manage_catalogStatus", None)
        self.assertIn('value="Reindex selected"', body)
        self.assertIn("No online build yet.", text)

    def test_zmi_indexes_tab_and_verify_message(self):
        _, text = self.text("/plone/portal_catalog/manage_catalogIndexes",
                            "de")
        self.assertIn("PostgreSQL-Indizes", text)
        self.assertIn("gültig", text)      # a state computed in Python
        body, _ = self.text("/plone/portal_catalog/manage_catalogVerify",
                            "de")
        token = probe.AUTHENTICATOR.findall(body)[0]
        status, location, _ = self.request(
            "POST", "/plone/portal_catalog/manage_verifyCatalog", "de",
            {"_authenticator": token})
        self.assertEqual(status, 302)
        message = unquote(re.search(r"manage_tabs_message=([^&]*)",
                                    location).group(1))
        self.assertTrue(message.startswith(("Fehlerfrei:",
                                            "Unterschiede gefunden:")),
                        message)
