"""A change of the catalog's schema after the baseline (see the package)."""


class Step:
    """One change of the schema, from ``version - 1`` to ``version``.

    ``statements``: SQL texts run in order in one transaction (``@home@``
    stands for the catalog tables' schema, quoted); ``blocks_writes``:
    whether catalog writes wait while it runs (an ALTER or an index build
    in the transaction); ``seconds_per_100k``: roughly how long it takes
    per 100,000 catalog entries (measured, the step's docstring says
    where); ``compatible``: processes of the release before it keep working
    on the upgraded database (the step only adds what they do not use), so
    a rolling deploy may run it before restarting them."""

    __slots__ = ("version", "title", "statements", "blocks_writes",
                 "seconds_per_100k", "compatible")

    def __init__(self, version, title, statements, blocks_writes=True,
                 seconds_per_100k=0.0, compatible=False):
        self.version = version
        self.title = title
        self.statements = tuple(statements)
        self.blocks_writes = blocks_writes
        self.seconds_per_100k = seconds_per_100k
        self.compatible = compatible

    def sql(self, home):
        """The statements, ``@home@`` replaced by the quoted schema name."""
        return [text.replace("@home@", home) for text in self.statements]

    def estimate(self, entries):
        """Roughly how many seconds it takes on ``entries`` entries."""
        return self.seconds_per_100k * entries / 100000.0
