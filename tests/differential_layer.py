"""The differential suite's layer: the generated content tree, catalogued
by plone.pgcatalog's portal_catalog and by a reference ZCatalog
(test_differential.py, test_hostile.py)."""
import os

from plone.app.testing import IntegrationTesting
from plone.app.testing import login
from plone.app.testing import logout
from plone.app.testing import PloneSandboxLayer
from plone.app.testing import setRoles
from plone.app.testing import TEST_USER_ID
from plone.app.testing import TEST_USER_NAME

import differential_content as content
from plone.pgcatalog.testing import CatalogStateLayerMixin
from plone.pgcatalog.testing import PGCATALOG_FIXTURE


#: the seed of the content (DIFFERENTIAL_CONTENT_SEED explores another tree)
CONTENT_SEED = int(os.environ.get("DIFFERENTIAL_CONTENT_SEED")
                   or content.SEED)


class DifferentialFixture(CatalogStateLayerMixin, PloneSandboxLayer):
    """The content tree, catalogued by portal_catalog and the reference."""

    defaultBases = (PGCATALOG_FIXTURE,)

    def setUpPloneSite(self, portal):
        setRoles(portal, TEST_USER_ID, ["Manager"])
        login(portal, TEST_USER_NAME)
        for user in content.USERS:
            portal.acl_users.userFolderAddUser(user, "secret", ["Member"],
                                               [])
        content.build_content(portal, seed=CONTENT_SEED)
        content.build_reference(portal)
        setRoles(portal, TEST_USER_ID, ["Member"])
        logout()


DIFFERENTIAL_FIXTURE = DifferentialFixture()
DIFFERENTIAL_TESTING = IntegrationTesting(
    bases=(DIFFERENTIAL_FIXTURE,), name="PGCatalog:Differential")
