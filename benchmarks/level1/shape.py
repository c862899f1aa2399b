"""The shape of the synthetic site: the folder tree, the content types and
their weights, workflow states, the interfaces each type provides, tags,
users, groups, the vocabulary and the time span of the content."""


# Folders are 1 in FOLDER_EVERY entries; the tree has MAX_DEPTH levels
# below the site, TOP_FOLDERS of them at the first level.
FOLDER_EVERY = 20
TOP_FOLDERS = 12
MAX_DEPTH = 5

# (portal_type, Type() title, id prefix, weight %, mime_type, size KB range)
ITEM_TYPES = (
    ("Document", "Page", "document", 55, "text/html", (2, 40)),
    ("News Item", "News Item", "news-item", 15, "text/html", (2, 30)),
    ("Event", "Event", "event", 8, "text/html", (1, 10)),
    ("File", "File", "file", 12, "application/pdf", (20, 5000)),
    ("Image", "Image", "image", 10, "image/jpeg", (30, 4000)),
)
FOLDER_TYPE = ("Folder", "Folder", "folder", 0, "", (0, 1))
TYPES = (FOLDER_TYPE,) + ITEM_TYPES

STATES = ("published", "private", "pending", "visible")
STATE_WEIGHTS = (60, 25, 8, 7)

# object_provides (a realistic share of what Plone's content provides)
_COMMON_IFACES = (
    "zope.interface.Interface",
    "persistent.interfaces.IPersistent",
    "zope.location.interfaces.IContained",
    "zope.location.interfaces.ILocation",
    "zope.annotation.interfaces.IAttributeAnnotatable",
    "zope.annotation.interfaces.IAnnotatable",
    "OFS.interfaces.ITraversable",
    "OFS.interfaces.ISimpleItem",
    "OFS.interfaces.IItem",
    "OFS.interfaces.IManageable",
    "OFS.interfaces.IPropertyManager",
    "AccessControl.interfaces.IRoleManager",
    "AccessControl.interfaces.IOwned",
    "Acquisition.interfaces.IAcquirer",
    "App.interfaces.IUndoSupport",
    "webdav.interfaces.IDAVResource",
    "Products.CMFCore.interfaces._content.IDynamicType",
    "Products.CMFCore.interfaces._content.ICatalogableDublinCore",
    "Products.CMFCore.interfaces._content.IDublinCore",
    "Products.CMFCore.interfaces._content.IMutableDublinCore",
    "Products.CMFCore.interfaces._content.ICatalogAware",
    "Products.CMFCore.interfaces._content.IWorkflowAware",
    "Products.CMFCore.interfaces._content.IOpaqueItemManager",
    "Products.CMFCore.interfaces._content.IContentish",
    "plone.dexterity.interfaces.IDexterityContent",
    "plone.uuid.interfaces.IAttributeUUID",
    "plone.uuid.interfaces.IUUIDAware",
    "plone.app.relationfield.behavior.IRelatedItems",
    "plone.app.dexterity.behaviors.metadata.IBasic",
    "plone.app.dexterity.behaviors.metadata.ICategorization",
    "plone.app.dexterity.behaviors.metadata.IPublication",
    "plone.app.dexterity.behaviors.metadata.IOwnership",
    "plone.app.contenttypes.behaviors.leadimage.ILeadImage",
    "plone.app.versioningbehavior.behaviors.IVersionable",
    "plone.app.dexterity.behaviors.discussion.IAllowDiscussion",
    "plone.app.dexterity.behaviors.exclfromnav.IExcludeFromNavigation",
    "plone.namedfile.interfaces.IImageScaleTraversable",
    "plone.app.lockingbehavior.behaviors.ILocking",
)
_TYPE_IFACES = {
    "Folder": ("plone.dexterity.interfaces.IDexterityContainer",
               "plone.folder.interfaces.IFolder",
               "plone.folder.interfaces.IOrderableFolder",
               "Products.CMFCore.interfaces._content.IFolderish",
               "plone.app.contenttypes.interfaces.IFolder",
               "plone.app.contenttypes.behaviors.collection.ISyndicatableCollection",  # noqa: E501
               "OFS.interfaces.IObjectManager",
               "OFS.interfaces.IOrderedContainer"),
    "Document": ("plone.dexterity.interfaces.IDexterityItem",
                 "plone.app.contenttypes.interfaces.IDocument",
                 "plone.app.contenttypes.behaviors.richtext.IRichText",
                 "plone.app.contenttypes.behaviors.tableofcontents.ITableOfContents"),  # noqa: E501
    "News Item": ("plone.dexterity.interfaces.IDexterityItem",
                  "plone.app.contenttypes.interfaces.INewsItem",
                  "plone.app.contenttypes.behaviors.richtext.IRichText",
                  "plone.app.contenttypes.behaviors.leadimage.ILeadImageBehavior"),  # noqa: E501
    "Event": ("plone.dexterity.interfaces.IDexterityItem",
              "plone.app.contenttypes.interfaces.IEvent",
              "plone.event.interfaces.IEvent",
              "plone.app.event.dx.interfaces.IDXEvent",
              "plone.app.event.dx.behaviors.IEventBasic",
              "plone.app.event.dx.behaviors.IEventRecurrence",
              "plone.app.event.dx.behaviors.IEventLocation",
              "plone.app.event.dx.behaviors.IEventContact",
              "plone.event.interfaces.IRecurrenceSupport"),
    "File": ("plone.dexterity.interfaces.IDexterityItem",
             "plone.app.contenttypes.interfaces.IFile",
             "plone.namedfile.interfaces.IHasFile"),
    "Image": ("plone.dexterity.interfaces.IDexterityItem",
              "plone.app.contenttypes.interfaces.IImage",
              "plone.namedfile.interfaces.IHasImage"),
}
OBJECT_PROVIDES = {t: tuple(sorted(_COMMON_IFACES + extra))
                   for t, extra in _TYPE_IFACES.items()}

# Subject tags: the first ones are what queries ask for; the rest generated.
TAG_HEADS = ("Python", "Plone", "Zope", "PostgreSQL", "Catalog", "Search",
             "Performance", "Security", "Workflow", "Volto", "React",
             "Database", "Indexing", "Caching", "Testing")
N_TAGS = 200
N_USERS = 60
N_GROUPS = 12
VOCABULARY = 20000
BLOCK = 1000  # entries generated together (texts drawn with numpy)

# Time span of the content: 2014-01-01 .. 2024-12-31 (UTC), in minutes.
EPOCH_2014 = 1388534400
SPAN_MINUTES = (11 * 365 + 3) * 24 * 60
DAY = 24 * 60


ROLES_PRIVATE = ("Contributor", "Editor", "Manager", "Owner", "Reader",
                 "Site Administrator")
