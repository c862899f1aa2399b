"""Where a Zope process's request time goes, from a py-spy profile.

Record a profile of a running instance (the HTTP load benchmark prints
where its instance runs; ``pgrep -f runwsgi`` finds its process)::

    py-spy record -p <pid> -d 35 -r 200 -f raw -o profile.raw

then::

    python benchmarks/profile_share.py profile.raw [more.raw ...]
        [--match pgc_positions] [--top 20]

For each file: the samples taken in request threads (stacks through
waitress's ``WSGITask.execute``), the share of them under plone.pgcatalog's
code, the share under each ``--match`` (a text a frame contains, or any of
several separated by ``|``), and with
``--top`` the plone.pgcatalog frames most often deepest in a stack (where
its own time goes, or the driver call it waits in).
"""
import argparse
import collections


def shares(path, matches, top):
    """(request samples, share under plone.pgcatalog, {match: share},
    [(frame, samples)] of the ``top`` deepest plone.pgcatalog frames)."""
    in_requests = in_catalog = 0
    found = collections.Counter()
    deepest = collections.Counter()
    with open(path) as raw:
        for line in raw:
            stack, _, count = line.rstrip().rpartition(" ")
            if "WSGITask.execute" not in stack:
                continue
            count = int(count)
            in_requests += count
            frames = [f for f in stack.split(";") if "pgcatalog" in f]
            if frames:
                in_catalog += count
                deepest[frames[-1]] += count
            for match in matches:
                if any(text in stack for text in match.split("|")):
                    found[match] += count
    total = float(in_requests or 1)
    return (in_requests, in_catalog / total,
            {m: found[m] / total for m in matches},
            deepest.most_common(top))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("files", nargs="+")
    p.add_argument("--match", action="append", default=[],
                   help="a text a frame contains; 'a|b': any of them "
                   "(ZCatalog's share: 'ZCatalog|PluginIndexes|"
                   "CatalogTool.py')")
    p.add_argument("--top", type=int, default=0)
    args = p.parse_args(argv)
    for path in args.files:
        n, catalog, matched, deepest = shares(path, args.match, args.top)
        print("%s: %d samples in requests, %.1f %% under plone.pgcatalog%s"
              % (path, n, 100 * catalog, "".join(
                  ", %.2f %% under %s" % (100 * share, m)
                  for m, share in matched.items())))
        for frame, count in deepest:
            print("  %6d  %s" % (count, frame))


if __name__ == "__main__":
    main()
