"""CPU time the host gave to someone else: steal, read from /proc/stat.

On a virtual machine a neighbour's load shows up here and nowhere else: a run
loses throughput to it as if stockd were slower, and a ratio measured across two
such moments says more about the neighbour than about stockd. The bench
measures steal around every row and measures a row again when it was disturbed."""

STAT = "/proc/stat"


def cpu_times(path=STAT):
    """(steal, total) jiffies of all CPUs together, or None without a /proc/stat.
    Its first line: cpu user nice system idle iowait irq softirq steal [guest...];
    guest time is already counted in user."""
    try:
        with open(path) as f:
            fields = f.readline().split()
    except OSError:
        return None
    if len(fields) < 5 or fields[0] != "cpu":
        return None
    values = [int(v) for v in fields[1:9]]
    return (values[7] if len(values) > 7 else 0), sum(values)


def steal_pct(before, after):
    """The share of CPU time stolen between two cpu_times() readings, in percent
    (one decimal), or None when either is missing or no time passed."""
    if before is None or after is None or after[1] <= before[1]:
        return None
    return round(100.0 * (after[0] - before[0]) / (after[1] - before[1]), 1)
