"""Catalog configuration: Plone's own index set, lexicons and metadata columns
(read from ``Products/CMFPlone/profiles/default/catalog.xml``), set up on a
ZCatalog or a PGCatalogTool."""
import os
import types
import xml.etree.ElementTree as ET

import Products.CMFPlone
from Products.ZCatalog.ZCatalog import ZCatalog
from Products.ZCTextIndex.PipelineFactory import element_factory
from Products.ZCTextIndex.ZCTextIndex import PLexicon


def plone_catalog_definition():
    """Lexicons, indexes and columns of Plone's catalog.xml."""
    path = os.path.join(os.path.dirname(Products.CMFPlone.__file__),
                        "profiles", "default", "catalog.xml")
    root = ET.parse(path).getroot()
    lexicons, indexes, columns = [], [], []
    for node in root:
        if node.tag == "object" and \
                node.get("meta_type") == "ZCTextIndex Lexicon":
            lexicons.append((node.get("name"), [
                (e.get("group"), e.get("name")) for e in node
                if e.tag == "element"]))
        elif node.tag == "index":
            attrs = [e.get("value") for e in node if e.tag == "indexed_attr"]
            extras = {e.get("name"): e.get("value") for e in node
                      if e.tag == "extra"}
            props = {e.get("name"): e.text for e in node
                     if e.tag == "property"}
            spec = {"name": node.get("name"),
                    "meta_type": node.get("meta_type"),
                    "indexed_attrs": attrs, "extras": extras,
                    "properties": props}
            for key in ("since_field", "until_field"):
                if node.get(key):
                    spec["extras"][key] = node.get(key)
            indexes.append(spec)
        elif node.tag == "column":
            columns.append(node.get("value"))
    return {"source": path, "lexicons": lexicons, "indexes": indexes,
            "columns": columns}


def configure_catalog(tool, backend):
    """Lexicons, indexes and columns of Plone's catalog.xml on ``tool``
    (acquisition-wrapped).  GopipIndex (positions asked from the parent
    folders at sort time) needs real containers: it is replaced, in both
    catalogs, by a FieldIndex ``getObjPositionInParent`` over the entry's
    stored position."""
    definition = plone_catalog_definition()
    for lex_id, elements in definition["lexicons"]:
        pipeline = [element_factory.instantiate(group, name)
                    for group, name in elements]
        tool._setObject(lex_id, PLexicon(lex_id, "", *pipeline))
    stand_ins = []
    for spec in definition["indexes"]:
        meta_type = spec["meta_type"]
        name = spec["name"]
        if meta_type == "GopipIndex":
            meta_type = "FieldIndex"
            stand_ins.append(name)
        extra = types.SimpleNamespace()
        if spec["indexed_attrs"]:
            extra.indexed_attrs = ",".join(spec["indexed_attrs"])
        for key, value in spec["extras"].items():
            setattr(extra, key, value)
        if meta_type == "ZCTextIndex":
            extra.doc_attr = ",".join(spec["indexed_attrs"] or [name])
        if backend == "zcatalog":
            ZCatalog.addIndex(tool, name, meta_type, extra)
        else:
            tool.addIndex(name, meta_type, extra)
        index = tool._catalog.getIndex(name)
        for prop, value in spec["properties"].items():
            if value in ("True", "False"):
                value = value == "True"
            setattr(index, prop, value)
    for column in definition["columns"]:
        tool.addColumn(column)
    return {"indexes": [s["name"] for s in definition["indexes"]],
            "columns": definition["columns"],
            "lexicons": [lex for lex, _ in definition["lexicons"]],
            "stand_ins": stand_ins, "source": definition["source"]}
