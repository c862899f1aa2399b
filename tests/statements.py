"""What a catalog sends to PostgreSQL while a function runs (tests)."""


def statements(catalog, func, riders=False):
    """``(func(), [statement text, ...])``: the statements ``catalog``'s
    session of the current transaction ran during ``func()`` (each round
    trip's first; ``riders``: and after it those sent with it,
    ``session.ride``)."""
    session = catalog._pgc_session()
    sent = []
    original = session._run

    def counting(*args, **kw):
        sent.append(args[0])
        if riders:
            sent.extend(fragment.text for fragment, _c, _p in session.riders)
        return original(*args, **kw)

    session._run = counting
    try:
        return func(), sent
    finally:
        del session._run


def search_part(text):
    """A statement's text without the first brains' metadata some search
    statements read after their own (plans.with_small_metadata): what the
    search itself reads."""
    return text.split(" LEFT JOIN LATERAL (SELECT array_agg(")[0]
