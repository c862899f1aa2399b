"""What a verification found (``verify.Report``), and the last report of
each catalog in this process (the ZMI's "Verify" tab shows it)."""
import time

KINDS = ("orphan", "missing", "stale_entry", "stale_value",
         "stale_metadata", "stale_hot")
DEFAULT_SAMPLE = 20


class Report:
    """What a verification found: ``counts`` per kind, ``samples`` per kind
    (up to ``sample`` ``(path, detail)`` pairs each), ``entries`` checked,
    ``objects`` walked, ``repaired`` / ``unrepaired`` entries, ``errors``
    (objects whose values could not be computed, with ``error_samples``),
    ``seconds``."""

    def __init__(self, sample=DEFAULT_SAMPLE, repair=False):
        self.sample = sample
        self.repair = repair
        self.counts = dict.fromkeys(KINDS, 0)
        self.samples = {kind: [] for kind in KINDS}
        self.entries = 0
        self.objects = 0
        self.repaired = 0
        self.unrepaired = 0
        self.errors = 0
        self.error_samples = []
        self.started = time.time()
        self.seconds = None

    def add(self, kind, path, detail=""):
        self.counts[kind] += 1
        if len(self.samples[kind]) < self.sample:
            self.samples[kind].append((path, detail))

    def add_error(self, path, detail):
        self.errors += 1
        if len(self.error_samples) < self.sample:
            self.error_samples.append((path, detail))

    @property
    def total(self):
        """Differences found (an entry can count in two kinds: a stale
        value and stale metadata)."""
        return sum(self.counts.values())

    @property
    def clean(self):
        return self.total == 0 and self.errors == 0

    def finish(self):
        self.seconds = time.time() - self.started
        return self

    def to_dict(self):
        return {"clean": self.clean, "counts": dict(self.counts),
                "samples": {k: [list(s) for s in v]
                            for k, v in self.samples.items()},
                "entries": self.entries, "objects": self.objects,
                "repair": self.repair, "repaired": self.repaired,
                "unrepaired": self.unrepaired, "errors": self.errors,
                "error_samples": [list(s) for s in self.error_samples],
                "started": self.started, "seconds": self.seconds}

    def summary(self):
        """The report as lines of text."""
        lines = ["%s: %d catalog entries checked, %d site objects walked%s"
                 % ("clean" if self.clean else "differences",
                    self.entries, self.objects,
                    "" if self.seconds is None
                    else " in %.1f s" % self.seconds)]
        for kind in KINDS:
            lines.append("  %-15s %d" % (kind, self.counts[kind]))
            for path, detail in self.samples[kind]:
                lines.append("      %s%s" % (path, detail and
                                             "  (%s)" % detail))
        if self.errors:
            lines.append("  %-15s %d" % ("errors", self.errors))
            for path, detail in self.error_samples:
                lines.append("      %s  (%s)" % (path, detail))
        if self.repair:
            lines.append("repaired %d, left %d" % (self.repaired,
                                                   self.unrepaired))
        return lines


#: catalog key -> the last Report of this process (the ZMI's "Verify" tab)
_last_reports = {}


def remember(catalog, report):
    _last_reports[catalog._pgc_key] = report


def last_report(catalog):
    return _last_reports.get(catalog._pgc_key)


def forget_reports():
    """Forget every remembered report (tests)."""
    _last_reports.clear()
