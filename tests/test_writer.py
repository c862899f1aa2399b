"""The writer's folding of buffered operations (pure Python: what reaches
PostgreSQL for an entry after any sequence of catalog / uncatalog calls in
one transaction), and the lazy metadata of partial reindexes."""
from plone.pgcatalog.pg.writer import CLAIMED_DELETE
from plone.pgcatalog.pg.writer import DELETE
from plone.pgcatalog.pg.writer import Upsert
from plone.pgcatalog.pg.writer import fold
from plone.pgcatalog.pg.writer import lazy_metadata
from plone.pgcatalog.pg.writer import resolve_metadata
from plone.pgcatalog.pg.writer import split_path


def full(meta="m", **values):
    return Upsert(True, dict(values), [], meta, {}, [])


def partial(set_=None, remove=(), meta=None, meta_from=None, text=None,
            text_remove=()):
    return Upsert(False, dict(set_ or {}), list(remove), meta,
                  dict(text or {}), list(text_remove), meta_from)


def test_nothing():
    assert fold([]) == (False, None)


def test_delete_then_nothing():
    assert fold([DELETE]) == (DELETE, None)


def test_the_last_delete_says_whether_it_claims():
    assert fold([CLAIMED_DELETE])[0].claims
    assert not fold([CLAIMED_DELETE, full(a=1), DELETE])[0].claims
    delete_first, upsert = fold([DELETE, CLAIMED_DELETE, full(a=1)])
    assert delete_first.claims and upsert.idx_set == {"a": 1}


def test_upsert_after_delete_recreates():
    delete_first, upsert = fold([full(a=1), DELETE, full(meta="n", b=2)])
    assert delete_first
    assert upsert.full and upsert.idx_set == {"b": 2} and upsert.meta == "n"


def test_delete_after_upsert_wins():
    assert fold([full(a=1), DELETE]) == (DELETE, None)


def test_partials_patch_each_other():
    _, upsert = fold([partial({"a": 1}, remove=["b"]),
                      partial({"b": 2}, remove=["c"]),
                      partial(remove=["a"])])
    assert not upsert.full
    assert upsert.idx_set == {"b": 2}
    # "b" was set again, "a" and "c" go from the stored document
    assert sorted(upsert.idx_remove) == ["a", "c"]


def test_partial_after_full_stays_full():
    _, upsert = fold([full(a=1, b=2), partial({"b": 3}, remove=["a"])])
    assert upsert.full
    assert upsert.idx_set == {"b": 3}
    # a full upsert replaces the document: nothing to remove
    assert upsert.idx_remove == []


def test_full_after_partial_replaces():
    _, upsert = fold([partial({"a": 1}, remove=["z"]), full(meta=None, b=2)])
    assert upsert.full and upsert.idx_set == {"b": 2}
    assert upsert.idx_remove == []


def test_text_values_fold_like_index_values():
    _, upsert = fold([partial(text={"T": "x"}), partial(text_remove=["T"]),
                      partial(text={"U": "y"})])
    assert upsert.text_set == {"U": "y"} and upsert.text_remove == ["T"]


def test_latest_metadata_wins_and_none_keeps():
    _, upsert = fold([full(meta="1", a=1), partial({"a": 2})])
    assert upsert.meta == "1"
    _, upsert = fold([full(meta="1", a=1), partial({"a": 2}, meta="2")])
    assert upsert.meta == "2"


def test_lazy_metadata_only_for_entries_without_any():
    calls = []

    def source(name):
        def meta_from():
            calls.append(name)
            return '{"n": "%s"}' % name
        return meta_from

    ops = {
        (1, "/a"): [partial({"x": 1}, meta_from=source("a"))],  # has meta
        (1, "/b"): [partial({"x": 1}, meta_from=source("b"))],  # new entry
        (1, "/c"): [DELETE, partial({"x": 1}, meta_from=source("c"))],
        (1, "/d"): [full(meta="known", x=1),
                    partial({"x": 2}, meta_from=source("d"))],
        (2, "/a"): [partial({"x": 1})],                 # not lazy
    }
    lazy = lazy_metadata(ops)
    assert sorted(lazy) == [(1, "/a"), (1, "/b"), (1, "/c"), (1, "/d")]
    resolve_metadata(lazy, present={(1, "/a"), (1, "/c")})
    # /a has metadata: kept; /b is new; /c is deleted first in the batch;
    # /d gets the metadata its earlier full upsert recorded
    assert sorted(calls) == ["b", "c"]
    assert fold(ops[(1, "/a")])[1].meta is None
    assert fold(ops[(1, "/b")])[1].meta == '{"n": "b"}'
    assert fold(ops[(1, "/c")])[1].meta == '{"n": "c"}'
    assert fold(ops[(1, "/d")])[1].meta == "known"


def test_split_path():
    assert split_path("/plone/a/b") == ("/plone/a", 3)
    assert split_path("/plone") == ("", 1)
    assert split_path("") == ("", 0)
