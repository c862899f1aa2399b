"""The sort keys of stored values (schema version 17,
``pgcatalog_json_key``): the first key of a value index's B-tree, text whose
byte order is the values' order (Python's within a type, JSON's order of the
types), equal exactly for equal values, so that PostgreSQL deduplicates the
B-tree."""
import random

import orjson
import psycopg
import pytest
from DateTime import DateTime

from plone.pgcatalog.codec import core as codec
from plone.pgcatalog.indexes import common
from plone.pgcatalog.schema import migrations
from plone.pgcatalog.schema import tables as schema
from plone.pgcatalog.testing import pgserver


@pytest.fixture(scope="module")
def conn():
    dsn = pgserver.fresh_database("pgcatalog_value_keys")
    with psycopg.connect(dsn, autocommit=True) as conn:
        migrations.apply(conn)
        yield conn
    pgserver.drop_database(dsn)


def keys(conn, values):
    """The sort key of each value (Python values in their stored form)."""
    return [row[0] for row in conn.execute(
        "SELECT pgcatalog_json_key(v.v::jsonb) FROM unnest(%s::text[]) WITH "
        "ORDINALITY AS v(v, n) ORDER BY v.n",
        ([orjson.dumps(v).decode("utf-8") for v in values],)).fetchall()]


def ordered(conn, values):
    """``values`` (stored forms) in the order of their keys, as the B-tree
    holds them (``COLLATE "C"``)."""
    found = keys(conn, values)
    return [values[i] for i in sorted(
        range(len(values)), key=lambda i: found[i].encode("utf-8"))]


def numbers():
    rng = random.Random(17)
    found = [0, 0.5, -0.5, 1, -1, 1.25, 1.2, -1.2, -1.25, 9, 10, 11, 99,
             100, 101, -9, -10, -11, -100, 2 ** 63 - 1, -2 ** 63,
             0.001, 0.00123, 0.0012, -0.001, 12345.678, 1e-7, 3.5e-5,
             123456789012.5]
    for _ in range(300):
        found.append(rng.randint(-10 ** rng.randint(0, 18),
                                 10 ** rng.randint(0, 18)))
        found.append(rng.uniform(-1, 1) * 10 ** rng.randint(-6, 12))
    # the forms PostgreSQL's jsonb keeps (a float with an exponent is
    # tagged by the codec: never one of these)
    return [v for v in found
            if not isinstance(v, float) or "e" not in repr(v)]


def test_numbers_sort_by_value_and_equal_values_share_a_key(conn):
    values = numbers()
    assert [float(v) for v in ordered(conn, values)] == \
        sorted(float(v) for v in values)
    found = dict(zip(map(repr, values), keys(conn, values)))
    # an integer and the equal float have one key (one B-tree key)
    assert keys(conn, [1, 1.0, 100, 100.0, -3, -3.0]) == \
        [found["1"]] * 2 + [found["100"]] * 2 + keys(conn, [-3]) * 2
    # distinct values, distinct keys
    assert len(set(found.values())) == len({float(v) for v in values})


def test_types_in_jsons_order_and_tuples_in_pythons(conn):
    values = [[2], True, None, [1, 2, 3], {"a": 1}, 5, False, [1, 2], [],
              -7, ["b"], ["a", "b"], ["a"], [1, "a"], [1, 1]]
    assert ordered(conn, values) == [
        None, -7, 5, False, True,
        # (a string before a number, as at the top: JSON's order)
        [], ["a"], ["a", "b"], ["b"], [1, "a"], [1, 1], [1, 2], [1, 2, 3],
        [2], {"a": 1}]


def test_strings_within_tuples_by_code_point(conn):
    texts = ["", "a", "a\x01", "a\x01b", "a\x02", "ab", "b", "\x01",
             "\x01\x01", "z\x01\x01", "é", "e", "ü", "𝔸", "\uffff", "A"]
    values = [[t, 1] for t in texts]
    assert [v[0] for v in ordered(conn, values)] == sorted(texts)
    assert len(set(keys(conn, values))) == len(texts)


def test_datetimes_by_their_instant(conn):
    dates = [DateTime(s) for s in (
        "1960/01/01 00:00 UTC", "1969/12/31 23:59:59 UTC",
        "1970/01/01 00:00 UTC", "1999/05/05 12:00 UTC",
        "2001/09/08 00:00 UTC", "2001/09/10 00:00 UTC",
        "2024/02/29 08:30 GMT+2", "2286/11/20 17:46:40 UTC",
        "2300/01/01 UTC")]
    values = [codec.encode(d) for d in dates]
    shuffled = list(values)
    random.Random(3).shuffle(shuffled)
    assert ordered(conn, shuffled) == values


def test_the_kind_of_a_string_is_null_and_keys_are_cut(conn):
    rows = conn.execute(
        "SELECT %s, %s FROM (SELECT %%s::jsonb AS v) s" % (
            schema.value_kind_sql("'\"x\"'::jsonb"),
            schema.value_kind_sql("s.v")),
        (orjson.dumps(list(range(1000))).decode("utf-8"),)).fetchone()
    assert rows[0] is None
    assert len(rows[1]) == schema.KEY_CHARS


def test_a_number_is_found_through_the_b_tree(conn):
    """Equality with a number, a tuple, a long list: the key found in the
    value index's B-tree, the value compared (a cut key holds no more
    than its first characters)."""
    conn.execute("CREATE TABLE IF NOT EXISTS value_keys_t (idx jsonb)")
    conn.execute("TRUNCATE value_keys_t")
    long_ = list(range(600))
    other = long_[:-1] + [-1]
    conn.execute(
        "INSERT INTO value_keys_t SELECT jsonb_build_object('n', v) FROM "
        "unnest(%s::jsonb[]) v",
        ([orjson.dumps(v).decode() for v in
          ["a", 3, 3.0, 4, [1, 2], [1, 2.0], True, long_, other]],))
    conn.execute("CREATE INDEX value_keys_i ON value_keys_t ((%s))"
                 % schema.value_kind_sql("(idx -> 'n')"))
    conn.execute("ANALYZE value_keys_t")

    class Index:
        def pgc_key_sql(self, alias="e"):
            return common.key_sql("n", alias)

        def pgc_text_sql(self, alias="e"):
            return common.text_sql("n", alias)

    def count(values):
        cond = common.value_eq_sql(Index(), values, "e")
        with conn.transaction():
            conn.execute("SET LOCAL enable_seqscan = off")
            plan = "\n".join(r[0] for r in conn.execute(
                "EXPLAIN SELECT 1 FROM value_keys_t e WHERE " + cond.text,
                cond.params).fetchall())
            assert "value_keys_i" in plan, plan
            return conn.execute("SELECT count(*) FROM value_keys_t e WHERE "
                                + cond.text, cond.params).fetchone()[0]

    assert count([3]) == 2
    assert count([3.0, 4]) == 3
    assert count([(1, 2)]) == 2
    assert count([True]) == 1
    assert count([long_]) == 1
    assert count([other, 7]) == 1


def test_long_keys_stop_at_what_a_b_tree_holds(conn):
    """A key stops once it is longer than the value B-trees hold
    (``schema.KEY_CHARS``); its first characters, all an index or a query
    reads, are those of the whole key (the baseline's function without its
    bound)."""
    text = migrations.baseline_sql()
    start = text.index("CREATE FUNCTION pgcatalog_json_key")
    whole = text[start:text.index("$$;", text.index("$$", start) + 2) + 3]
    assert whole.count("EXIT WHEN length(r) > %d;" % schema.KEY_CHARS) == 2
    whole = whole.replace(
        "EXIT WHEN length(r) > %d;" % schema.KEY_CHARS, "").replace(
        "@home@.pgcatalog_json_key", "pg_temp.json_key_whole").replace(
        "FUNCTION pgcatalog_json_key", "FUNCTION pg_temp.json_key_whole")
    conn.execute(whole)
    values = [list(range(5000)), [list(range(3000)), [1, 2]],
              {"k%04d" % i: i for i in range(500)}, ["x" * 3000, "y"],
              [[["deep"] * 400] * 3], list(range(10)), {"a": [1, 2]}]
    for value in values:
        new, was = conn.execute(
            "SELECT pgcatalog_json_key(%s::jsonb), "
            "pg_temp.json_key_whole(%s::jsonb)",
            (orjson.dumps(value).decode(),) * 2).fetchone()
        n = schema.KEY_CHARS
        assert new[:n] == was[:n], value
        if len(was) <= n:
            assert new == was
        else:
            # one element past the bound at most (the long string's
            # element itself is whole)
            assert len(new) < 2 * n + 3100
