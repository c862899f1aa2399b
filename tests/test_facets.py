"""Facet counts (portal_catalog.pgc_facets, docs/facets.md) against counts
made by hand from the objects a user may see: for hypothesis-made queries
(types, subjects, states, words, paths), as the Manager, a Member and
Anonymous, over private, published and expired content; the drill-down
(a facet counted without its own condition), top-N with ties, the value
filter and date buckets."""
import collections
import unittest

import transaction
from DateTime import DateTime
from hypothesis import HealthCheck
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
from plone.app.testing import TEST_USER_ID
from plone.app.testing import TEST_USER_NAME
from plone.app.testing import login
from plone.app.testing import logout
from plone.app.testing import setRoles
from Products.CMFCore.indexing import processQueue
from statements import statements

from plone.pgcatalog.testing import PGCATALOG_FUNCTIONAL_TESTING
from plone.pgcatalog.testing import PGCATALOG_INTEGRATION_TESTING
from plone.pgcatalog.testing import PGCATALOG_RESTAPI_FUNCTIONAL_TESTING

SUBJECTS = ["alpha", "beta", "gamma", "delta"]
WORDS = ["apple", "pear", "plum"]
HYPOTHESIS = settings(max_examples=25, deadline=None, derandomize=True,
                      database=None,
                      suppress_health_check=[HealthCheck.too_slow])

queries = st.fixed_dictionaries({}, optional={
    "portal_type": st.sampled_from(["Document", "Folder",
                                    ["Document", "Folder"]]),
    "Subject": st.one_of(
        st.sampled_from(SUBJECTS),
        st.fixed_dictionaries({
            "query": st.lists(st.sampled_from(SUBJECTS), min_size=1,
                              max_size=2, unique=True),
            "operator": st.sampled_from(["and", "or"])})),
    "review_state": st.sampled_from(["private", "published"]),
    "SearchableText": st.sampled_from(WORDS),
    "path": st.sampled_from(["/plone/f0", "/plone/f1"]),
})
users = st.sampled_from(["manager", "member", "anonymous"])
facet_names = ("portal_type", "Subject", "review_state", "is_folderish")


def held(obj, name):
    """What the object holds for the facet ``name`` (its own attributes,
    not the catalog's)."""
    if name == "Subject":
        return list(obj.Subject())
    if name == "portal_type":
        return [obj.portal_type]
    if name == "review_state":
        wf = obj.portal_workflow
        chain = wf.getChainFor(obj)
        status = wf.getStatusOf(chain[0], obj) if chain else None
        return [status["review_state"]] if status else []
    if name == "is_folderish":
        return [bool(obj.isPrincipiaFolderish)]
    raise AssertionError(name)


class TestFacets(unittest.TestCase):
    layer = PGCATALOG_INTEGRATION_TESTING

    def setUp(self):
        self.portal = self.layer["portal"]
        setRoles(self.portal, TEST_USER_ID, ["Manager"])
        self.catalog = self.portal.portal_catalog
        wf = self.portal.portal_workflow
        wf.setChainForPortalTypes(["Document", "Folder"],
                                  "simple_publication_workflow")
        n = 0
        for f in range(2):
            self.portal.invokeFactory("Folder", "f%d" % f, title="Folder")
            folder = self.portal["f%d" % f]
            wf.doActionFor(folder, "publish")
            for d in range(9):
                n += 1
                kind = "Folder" if d % 4 == 3 else "Document"
                folder.invokeFactory(
                    kind, "d%d" % d, title="Doc %d" % n,
                    description=" ".join(WORDS[:1 + (n % 3)]),
                    subject=SUBJECTS[:n % 4] + (["alpha"] if n % 5 == 0
                                                else []))
                doc = folder["d%d" % d]
                if n % 3:
                    wf.doActionFor(doc, "publish")
                if n % 7 == 0:
                    # expired: Anonymous and Members no longer find it
                    doc.setExpirationDate(DateTime() - 1)
                # (one published in two days: Anonymous does not find it
                # yet)
                doc.setEffectiveDate(DateTime() + 2 if n == 10
                                     else DateTime() - n)
                doc.reindexObject()
        processQueue()
        self.manager = self.portal.acl_users.getUserById(TEST_USER_ID)

    def tearDown(self):
        logout()
        transaction.abort()

    def as_user(self, who):
        if who == "manager":
            setRoles(self.portal, TEST_USER_ID, ["Manager"])
            login(self.portal, TEST_USER_NAME)
        elif who == "member":
            setRoles(self.portal, TEST_USER_ID, ["Member"])
            login(self.portal, TEST_USER_NAME)
        else:
            logout()

    def by_hand(self, query, name):
        """{value: count} of the objects ``searchResults(query)`` lists
        (the query passed as pgc_facets gets it: CMFPlone asks whether
        inactive content may be shown of the keyword arguments' paths)."""
        counts = collections.Counter()
        for brain in self.catalog.searchResults(query):
            obj = brain._unrestrictedGetObject()
            for value in set(held(obj, name)):
                counts[value] += 1
        return dict(counts)

    def check(self, query, who):
        self.as_user(who)
        got = self.catalog.pgc_facets(query, facets=facet_names)
        for name in facet_names:
            # drill-down: counted as if its own condition were not there
            own = {k: v for k, v in query.items() if k != name}
            expected = self.by_hand(own, name)
            values = got[name]["values"]
            self.assertEqual(dict(values), expected, (who, query, name))
            self.assertEqual(got[name]["total"], len(expected))
            # most matches first, ties in the values' order
            self.assertEqual(
                [n for _v, n in values], sorted(expected.values(),
                                                reverse=True))

    @HYPOTHESIS
    @given(query=queries, who=users)
    def test_counts_are_the_visible_objects(self, query, who):
        self.check(query, who)

    def test_security_counts_differ_by_user(self):
        self.as_user("anonymous")
        anonymous = self.catalog.pgc_facets({}, facets=["review_state"])
        self.assertEqual([v for v, _n in anonymous["review_state"][
            "values"]], ["published"])
        self.as_user("manager")
        manager = self.catalog.pgc_facets({}, facets=["review_state"])
        states = dict(manager["review_state"]["values"])
        self.assertIn("private", states)
        self.assertGreater(states["published"],
                           dict(anonymous["review_state"]["values"])[
                               "published"])   # expired ones too

    def test_not_disjunctive_counts_within_the_selection(self):
        self.as_user("manager")
        got = self.catalog.pgc_facets(
            {"Subject": "beta"},
            facets={"Subject": {"disjunctive": False}})
        expected = self.by_hand({"Subject": "beta"}, "Subject")
        self.assertEqual(dict(got["Subject"]["values"]), expected)
        self.assertNotIn("alpha", [v for v, n in got["Subject"]["values"]
                                   if n > expected.get("beta", 0)])

    def test_limit_filter_and_ties(self):
        self.as_user("manager")
        full = self.catalog.pgc_facets({}, facets=["Subject"])["Subject"]
        top = self.catalog.pgc_facets(
            {}, facets={"Subject": {"limit": 2}})["Subject"]
        self.assertEqual(top["values"], full["values"][:2])
        self.assertEqual(top["total"], full["total"])
        order = [(-n, v) for v, n in full["values"]]
        self.assertEqual(order, sorted(order))      # ties by value
        found = self.catalog.pgc_facets(
            {}, facets={"Subject": {"filter": "LT"}})["Subject"]
        self.assertEqual([v for v, _n in found["values"]],
                         [v for v, _n in full["values"] if "lt" in v])
        self.assertEqual(found["total"], len(found["values"]))

    def test_date_buckets(self):
        self.as_user("manager")
        week = DateTime() - 7.5
        got = self.catalog.pgc_facets({"portal_type": "Document"}, facets={
            "effective": {"buckets": [
                ("recent", week, None), ("older", None, week),
                "past-year"]}})
        docs = [b._unrestrictedGetObject() for b in
                self.catalog.searchResults({"portal_type": "Document"})]
        # a DateIndex keeps minutes: the buckets compare minutes, as a
        # range query of the index does
        minutes = self.catalog._catalog.getIndex("effective")._convert
        expected = [
            ("recent", len([d for d in docs
                            if minutes(d.effective()) >= minutes(week)])),
            ("older", len([d for d in docs
                           if minutes(d.effective()) < minutes(week)])),
            # (not the one published in two days)
            ("past-year", len([d for d in docs
                               if d.effective() <= DateTime()]))]
        self.assertEqual(got["effective"]["values"], expected)
        self.assertTrue(expected[0][1] and expected[1][1])
        self.assertEqual(got["effective"]["total"], 3)

    def test_date_range_buckets(self):
        """A DateRangeIndex's entry counts in each bucket its range meets
        (named buckets: the past or the next days from now)."""
        extra = type("extra", (), {"since_field": "effective",
                                   "until_field": "expires"})
        self.catalog.addIndex("shown", "DateRangeIndex", extra)
        self.catalog.manage_reindexIndex(["shown"])
        self.as_user("manager")
        now = DateTime()
        got = self.catalog.pgc_facets({"portal_type": "Document"}, facets={
            "shown": {"buckets": [
                ("before", None, now - 10), ("from now on", now, None),
                "past-week", "next-week"]}})["shown"]
        docs = [b._unrestrictedGetObject() for b in
                self.catalog.searchResults({"portal_type": "Document"})]
        minutes = self.catalog._catalog.getIndex("shown")._convertDateTime

        def meeting(lo, hi):
            # (a date the index cannot keep, Plone's "never expires", is
            # an open end, as the index takes it)
            found = 0
            for doc in docs:
                since = minutes(doc.effective())
                until = minutes(doc.expires())
                found += (hi is None or since is None or since < hi) and \
                    (lo is None or until is None or until >= lo)
            return found
        expected = [
            ("before", meeting(None, minutes(now - 10))),
            ("from now on", meeting(minutes(now), None)),
            ("past-week", meeting(minutes(now - 7), minutes(now) + 1)),
            ("next-week", meeting(minutes(now), minutes(now + 7) + 1))]
        self.assertEqual(got["values"], expected)
        # some expired (not in the next week), some older than 10 days
        self.assertTrue(0 < expected[0][1] < len(docs))
        self.assertTrue(0 < expected[3][1] < len(docs))
        # the default buckets
        found = self.catalog.pgc_facets({"portal_type": "Document"},
                                        facets=["shown"])["shown"]
        self.assertEqual([v for v, _n in found["values"]], [
            "past-month", "past-week", "next-week", "next-month"])

    def test_hot_facets_are_read_from_the_key_sets(self):
        """Hot indexes (portal_type, Subject, review_state) are counted from
        the matches' key sets in one statement, with the search inside it:
        no entry read, no rid sent."""
        self.as_user("anonymous")
        got, sent = statements(self.catalog, lambda: self.catalog.pgc_facets(
            {"portal_type": "Document"},
            facets={"Subject": None, "review_state": None,
                    "portal_type": {"disjunctive": False}}))
        self.assertEqual(dict(got["review_state"]["values"]),
                         self.by_hand({"portal_type": "Document"},
                                      "review_state"))
        self.assertEqual(dict(got["Subject"]["values"]),
                         self.by_hand({"portal_type": "Document"}, "Subject"))
        counting = [text for text in sent if "pgcatalog_hot_sets" in text
                    and "unnest(c.keys)" in text]
        self.assertEqual(len(counting), 1, sent)
        self.assertNotIn("pgcatalog_entries", counting[0])
        self.assertNotIn("bigint[]", counting[0])

    @HYPOTHESIS
    @given(query=queries, who=users)
    def test_counts_of_the_key_sets_alone(self, query, who):
        """Facets whose keys are all in the key sets (portal_type,
        review_state): counted from the sets' kept counts when every
        condition of the search is on them."""
        self.as_user(who)
        got = self.catalog.pgc_facets(query, facets=["portal_type",
                                                     "review_state"])
        for name in ("portal_type", "review_state"):
            own = {k: v for k, v in query.items() if k != name}
            self.assertEqual(dict(got[name]["values"]),
                             self.by_hand(own, name), (who, query, name))

    def test_key_sets_counted_from_their_kept_counts(self):
        for who in ("anonymous", "manager"):
            self.as_user(who)
            got, sent = statements(
                self.catalog, lambda: self.catalog.pgc_facets(
                    {"portal_type": "Document"},
                    facets=["review_state", "portal_type", "Subject"]))
            for name in ("review_state", "portal_type", "Subject"):
                own = {} if name == "portal_type" else \
                    {"portal_type": "Document"}
                self.assertEqual(dict(got[name]["values"]),
                                 self.by_hand(own, name), (who, name))
            counting = [text for text in sent if "unnest(c.keys)" in text]
            self.assertEqual(len(counting), 2, sent)
            for text in counting:
                self.assertIn("pgcatalog_hot_counts", text)
                self.assertNotIn("pgcatalog_entries", text)
            # the tags from their counts per set (schema version 4)
            self.assertTrue(any("pgcatalog_hot_key_counts" in text
                                for text in counting), counting)

    def test_values_without_key_are_counted(self):
        """A hot index's value the hot row has no key for (a subject of
        more than 400 characters) is counted from the entry, beside the
        others, exactly."""
        long_subject = " ".join(["long"] * 90)
        self.portal.f0.d0.setSubject(["alpha", long_subject])
        self.portal.f0.d0.reindexObject()
        processQueue()
        for who in ("manager", "anonymous"):
            self.as_user(who)
            got = self.catalog.pgc_facets({}, facets=["Subject",
                                                      "portal_type"])
            expected = self.by_hand({}, "Subject")
            self.assertIn(long_subject, expected)
            self.assertEqual(dict(got["Subject"]["values"]), expected)
            self.assertEqual(dict(got["portal_type"]["values"]),
                             self.by_hand({}, "portal_type"))

    def test_bad_requests(self):
        self.as_user("manager")
        for facets in (["no_such_index"], ["SearchableText"], ["path"],
                       {"Subject": {"limit": -1}},
                       {"Subject": {"colour": 1}},
                       {"Subject": {"buckets": ["past-week"]}},
                       {"effective": {"buckets": ["someday"]}},
                       {"effective": {"buckets": ["past-week"] * 33}},
                       {"i%d" % n: None for n in range(33)}, 42):
            with self.subTest(facets=facets):
                with self.assertRaises((ValueError, TypeError)):
                    self.catalog.pgc_facets({}, facets=facets)

    def test_nothing_matches(self):
        self.as_user("manager")
        got = self.catalog.pgc_facets({"portal_type": "Nothing"},
                                      facets=["Subject"])
        self.assertEqual(got, {"Subject": {"values": [], "total": 0}})


class TestFacetsOverHTTP(unittest.TestCase):
    """``@pgcatalog-facets`` (plone.restapi): the body Volto's search block
    sends to ``@querystring-search``, with ``facets``."""

    layer = PGCATALOG_RESTAPI_FUNCTIONAL_TESTING

    def setUp(self):
        import requests
        self.portal = self.layer["portal"]
        setRoles(self.portal, TEST_USER_ID, ["Manager"])
        wf = self.portal.portal_workflow
        wf.setChainForPortalTypes(["Document"], "simple_publication_workflow")
        for n in range(6):
            self.portal.invokeFactory("Document", "h%d" % n, title="H %d" % n,
                                      subject=SUBJECTS[:1 + n % 3])
            if n % 2:
                wf.doActionFor(self.portal["h%d" % n], "publish")
        processQueue()
        transaction.commit()
        self.url = self.portal.absolute_url() + "/@pgcatalog-facets"
        self.session = requests.Session()
        self.session.headers["Accept"] = "application/json"
        self.addCleanup(self.session.close)

    def post(self, body, auth=None):
        return self.session.post(self.url, json=body, auth=auth)

    def test_counts_for_each_user(self):
        from plone.app.testing import SITE_OWNER_NAME
        from plone.app.testing import SITE_OWNER_PASSWORD
        body = {"query": [{"i": "portal_type",
                           "o": "plone.app.querystring.operation.selection.any",
                           "v": ["Document"]}],
                "facets": {"Subject": {"limit": 2}, "review_state": None}}
        manager = self.post(body, (SITE_OWNER_NAME, SITE_OWNER_PASSWORD))
        self.assertEqual(manager.status_code, 200, manager.text[:500])
        anonymous = self.post(body)
        self.assertEqual(anonymous.status_code, 200, anonymous.text[:500])
        for answer, user in ((manager, "manager"), (anonymous, None)):
            if user:
                login(self.portal, TEST_USER_NAME)
            else:
                logout()
            expected = self.portal.portal_catalog.pgc_facets(
                {"portal_type": ["Document"]},
                facets={"Subject": {"limit": 2}, "review_state": None})
            got = answer.json()["facets"]
            for name in ("Subject", "review_state"):
                self.assertEqual(
                    [(v["value"], v["count"]) for v in got[name]["values"]],
                    [tuple(x) for x in expected[name]["values"]])
                self.assertEqual(got[name]["total"], expected[name]["total"])
        self.assertEqual([v["value"] for v in anonymous.json()["facets"][
            "review_state"]["values"]], ["published"])

    def test_bad_bodies(self):
        for body in ({}, {"facets": "Subject"}, {"facets": ["nothing"]},
                     {"facets": ["Subject"], "query": "x"},
                     {"facets": ["Subject"], "query": [
                         {"i": "effective", "v": "not a date",
                          "o": "plone.app.querystring.operation.date."
                               "largerThan"}]},
                     {"facets": ["Subject"] * 40 + ["no"]},
                     {"facets": {"Subject": {"limit": "3"}}}, ["Subject"]):
            with self.subTest(body=body):
                answer = self.post(body)
                self.assertEqual(answer.status_code, 400, answer.text[:300])
                self.assertNotIn("psycopg", answer.text)


class TestFacetsKept(unittest.TestCase):
    """Counts kept as the result cache keeps answers: found again without a
    statement; an edit of what they read counts them again."""

    layer = PGCATALOG_FUNCTIONAL_TESTING

    def setUp(self):
        self.portal = self.layer["portal"]
        setRoles(self.portal, TEST_USER_ID, ["Manager"])
        for n in range(4):
            self.portal.invokeFactory("Document", "k%d" % n,
                                      subject=SUBJECTS[:1 + n % 2])
        processQueue()
        transaction.commit()
        self.catalog = self.portal.portal_catalog

    def tearDown(self):
        transaction.abort()

    def counts(self):
        found, sent = statements(self.catalog, lambda: self.catalog.pgc_facets(
            {"portal_type": "Document"}, facets=["Subject"]))
        transaction.abort()
        return dict(found["Subject"]["values"]), sent

    def test_kept_and_counted_again_after_an_edit(self):
        first, _sent = self.counts()
        self.assertEqual(first, {"alpha": 4, "beta": 2})
        again, sent = self.counts()
        self.assertEqual(again, first)
        self.assertEqual(sent, [])
        self.portal.k0.setSubject(["gamma"])
        self.portal.k0.reindexObject()
        processQueue()
        transaction.commit()
        after, sent = self.counts()
        self.assertEqual(after, {"alpha": 3, "beta": 2, "gamma": 1})
        self.assertTrue(sent)
