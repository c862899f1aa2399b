"""The catalog statements of a trace, summed by shape.

A trace is what ``PGCATALOG_TRACE_FILE`` (or ``http_load.py --trace``)
writes: one line per statement, its time in ms as the calling thread saw
it (the round trip, and in a busy multi-threaded process the wait for the
GIL after the answer arrived), its text and its parameters::

    python benchmarks/trace_summary.py trace.sql [--top 20] [--width 90]

Statements of one shape (the text with its numbers replaced, cut to
``--width`` characters) are counted together: count, total ms, median and
95th percentile, the shapes with the most time first.
"""
import argparse
import collections
import re
import statistics

_NUMBER = re.compile(r"\d+")


def shapes(path, width):
    """{shape: [ms, ...]} of the trace at ``path``."""
    found = collections.defaultdict(list)
    with open(path) as trace:
        for line in trace:
            parts = line.rstrip("\n").split("\t")
            if len(parts) < 2:
                continue
            try:
                ms = float(parts[0])
            except ValueError:
                continue
            found[_NUMBER.sub("N", parts[1])[:width]].append(ms)
    return found


def percentile(values, share):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("trace")
    p.add_argument("--top", type=int, default=20)
    p.add_argument("--width", type=int, default=90)
    args = p.parse_args(argv)
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
