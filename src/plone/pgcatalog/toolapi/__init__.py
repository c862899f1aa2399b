"""The catalog tool's API, one mixin per part of ZCatalog's (and CMFCore's,
CMFPlone's) interface; ``plone.pgcatalog.tool.PGCatalogTool`` combines them.

Each method states whether ZPublisher may publish it (``zpublish``) and
which permission guards it (for restricted code too), as in stock CMFPlone
or narrower (``tests/test_web_surface.py`` holds the measured table).  The
mixins hold no state: everything is read and written through the tool's
store (``tool._pgc_store()``).
"""
