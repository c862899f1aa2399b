"""Make a Plone site with plone.pgcatalog and three documents in the
instance of a zope.conf (for test_verify_cli.py's subprocess test):

    python tests/cli_site.py path/to/zope.conf
"""
import sys

import transaction
from Products.CMFCore.indexing import processQueue
from Products.CMFPlone.factory import addPloneSite
from zope.component.hooks import setSite

from plone.pgcatalog.cli.verify import open_app


def main(conf):
    app = open_app(conf)
    site = addPloneSite(app, "plone", extension_ids=(
        "plone.app.contenttypes:default", "plone.pgcatalog:default"))
    setSite(site)
    for n in range(3):
        site.invokeFactory("Document", "doc%d" % n, title="Doc %d" % n)
    processQueue()
    transaction.commit()
    app._p_jar.close()


if __name__ == "__main__":
    main(sys.argv[1])
