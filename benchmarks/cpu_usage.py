"""CPU used by the processes of a benchmark, by role, read from ``/proc``
(Linux)::

    python benchmarks/cpu_usage.py [--seconds 30] [--every 1]

Samples every process's user + system time every ``--every`` seconds for
``--seconds`` and prints, per role, the CPU seconds used per second of
wall time (1.0: one core busy the whole time): ``zope-<instance>`` for each
``runwsgi`` process (named by its instance's directory, as
``http_load.py`` makes them: ``stock``, ``pgcatalog``), ``postgres`` for
every PostgreSQL process, ``python`` for other Python processes (the load
clients) and ``other``.  Started while ``http_load.py`` loads one backend
(``--backends stock`` or ``--backends pgcatalog``, after its warm-up), it
says whether the Zope process or the machine is the limit.
"""
import argparse
import os
import sys
import time

TICKS = os.sysconf("SC_CLK_TCK")


def role(cmdline):
    """The role of a process by its command line."""
    words = cmdline.split()
    if any(w.endswith("runwsgi") for w in words):
        conf = [w for w in words if w.endswith("zope.ini")]
        # <instance>/etc/zope.ini
        name = os.path.basename(os.path.dirname(os.path.dirname(conf[0]))) \
            if conf else "?"
        return "zope-%s" % name
    if words and (words[0].startswith("postgres")
                  or os.path.basename(words[0]) == "postgres"):
        return "postgres"
    if words and "python" in os.path.basename(words[0]):
        return "python"
    return "other"


def sample():
    """{pid: (role, CPU seconds so far)} of the running processes."""
    found = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(
                    "utf-8", "replace")
            with open("/proc/%s/stat" % pid) as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue    # gone meanwhile
        # utime and stime: fields 14 and 15 of stat, 12 and 13 after ")"
        cpu = (int(fields[11]) + int(fields[12])) / TICKS
        found[pid] = (role(cmdline), cpu)
    return found


def usage(seconds, every):
    """{role: CPU seconds per wall second} over ``seconds``; a process
    that started meanwhile counts from its start, one that ended counts
    until its last sample."""
    totals = {}
    before = sample()
    started = time.monotonic()
    end = started + seconds
    while time.monotonic() < end:
        time.sleep(every)
        now = sample()
        for pid, (name, cpu) in now.items():
            used = cpu - before.get(pid, (name, 0.0))[1]
            totals[name] = totals.get(name, 0.0) + max(used, 0.0)
        before = dict(before, **now)
    wall = time.monotonic() - started
    return {name: used / wall for name, used in totals.items()}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=30)
    p.add_argument("--every", type=float, default=1)
    args = p.parse_args(argv)
    found = usage(args.seconds, args.every)
    print("CPU seconds per second over %.0f s (1.0: one core busy):"
          % args.seconds)
    for name, share in sorted(found.items(), key=lambda i: -i[1]):
        print("  %-20s %.2f" % (name, share))
    return 0


if __name__ == "__main__":
    sys.exit(main())
