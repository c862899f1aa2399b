"""The catalog statements of a trace, summed by shape.

A trace is what ``PGCATALOG_TRACE_FILE`` (or ``http_load.py --trace``)
writes: one line per statement, its time in ms as the calling thread saw
it (the round trip, and in a busy multi-threaded process the wait for the
GIL after the answer arrived), its text, its parameters and the request it
served (a number, the method and the path)::

    python benchmarks/trace_summary.py trace.sql [--top 20] [--width 90]
        [--by-request]

Statements of one shape (the text with its numbers replaced, cut to
``--width`` characters) are counted together: count, total ms, median and
95th percentile, the shapes with the most time first.  ``--by-request``
sums them by kind of request instead (the path with its numbers
replaced): requests that ran a statement, statements and ms per such
request, and the statement shapes each kind ran most.
"""
import argparse
import collections
import re
import statistics

_NUMBER = re.compile(r"\d+")


def statements(path, width):
    """``(ms, shape, request)`` of each statement of the trace at
    ``path``: its shape the text with its numbers replaced, cut to
    ``width``; its request ``number METHOD /path`` ('' outside one)."""
    with open(path) as trace:
        for line in trace:
            parts = line.rstrip("\n").split("\t")
            if len(parts) < 2:
                continue
            try:
                ms = float(parts[0])
            except ValueError:
                continue
            yield (ms, _NUMBER.sub("N", parts[1])[:width],
                   parts[3] if len(parts) > 3 else "")


def shapes(path, width):
    """{shape: [ms, ...]} of the trace at ``path``."""
    found = collections.defaultdict(list)
    for ms, shape, _request in statements(path, width):
        found[shape].append(ms)
    return found


def requests(path, width):
    """{request kind: {request number: [(ms, shape), ...]}} of the trace at
    ``path`` (statements outside a request under the kind '')."""
    found = collections.defaultdict(lambda: collections.defaultdict(list))
    for ms, shape, request in statements(path, width):
        number, _, kind = request.partition(" ")
        found[_NUMBER.sub("N", kind)][number].append((ms, shape))
    return found


def by_request(path, width, top):
    found = requests(path, width)
    print("| requests | statements / request | ms / request | kind | "
          "its statements (per request) |")
    print("|---:|---:|---:|---|---|")
    for kind, served in sorted(found.items(),
                               key=lambda kv: -sum(len(v) for v in
                                                   kv[1].values())):
        statements = [s for one in served.values() for s in one]
        counts = collections.Counter(shape for _, shape in statements)
        most = "; ".join("%.2f `%s`" % (n / len(served),
                                        shape.replace("|", "\\|"))
                         for shape, n in counts.most_common(top))
        print("| %d | %.2f | %.1f | `%s` | %s |" % (
            len(served), len(statements) / len(served),
            sum(ms for ms, _ in statements) / len(served), kind or "-",
            most))


def percentile(values, share):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("trace")
    p.add_argument("--top", type=int, default=20)
    p.add_argument("--width", type=int, default=90)
    p.add_argument("--by-request", action="store_true")
    args = p.parse_args(argv)
    if args.by_request:
        by_request(args.trace, args.width, min(args.top, 4))
        return
    found = shapes(args.trace, args.width)
    total = sum(len(v) for v in found.values())
    print("%d statements, %.0f ms" % (
        total, sum(sum(v) for v in found.values())))
    print("| statements | total ms | p50 ms | p95 ms | shape |")
    print("|---:|---:|---:|---:|---|")
    for shape, times in sorted(found.items(), key=lambda kv: -sum(kv[1]))[
            :args.top]:
        print("| %d | %.0f | %.2f | %.2f | `%s` |" % (
            len(times), sum(times), statistics.median(times),
            percentile(times, 0.95), shape.replace("|", "\\|")))


if __name__ == "__main__":
    main()
