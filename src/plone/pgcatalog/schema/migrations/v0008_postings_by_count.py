"""Schema version 8: the postings' B-tree ordered by the word's count and
the document's length within a word.

A page of a single word by relevance (``word``, or ``word*`` standing for
one word: Plone's live search) is the first few postings of the word by
Okapi score, which rises with the word's count in the document (``tf``)
and falls with the document's length (``dl``).  Read from a B-tree keyed
``(cid, name, word, rid)``, every posting of the word was scored to find
the best ten (a common word of ``SearchableText``: a tenth of the
documents).  Keyed ``(cid, name, word, tf, dl, rid)``, each count's
postings come shortest document first, so a page reads a few postings of
each count, then those scoring at least as well as the page's last
(search/wordpage.py).  A prefix (a range of words) and a word's postings
are read from it as before: the columns a score and the filters read are
in it (``INCLUDE``).

The step builds the new B-tree, then drops the old one; catalog writes
wait while it runs (the postings are locked against change: 12 s for the
4,900,872 postings of ``Title`` at 1,000,000 entries, about 4 minutes with
``SearchableText``'s 68,537,550 too, PostgreSQL 15 on a 2-core machine).  Processes
of version 7 keep working on the upgraded database: they read the
postings by word, which the new B-tree serves.
"""
from plone.pgcatalog.schema.migrations.step import Step


BY_COUNT = """
CREATE INDEX pgcatalog_postings_by_count
    ON @home@.pgcatalog_postings (cid, name, word, tf, dl, rid)
    INCLUDE (sid, lo, hi, rng)"""

DROP_WORD = """
DROP INDEX @home@.pgcatalog_postings_word"""

STEP = Step(
    8, "the postings' B-tree ordered by the word's count and the "
    "document's length within each word (pgcatalog_postings_by_count, "
    "replacing pgcatalog_postings_word)",
    [BY_COUNT, DROP_WORD],
    blocks_writes=True, seconds_per_100k=1.0, compatible=True)
