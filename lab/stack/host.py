"""CPU time the host gave to someone else: steal, read from /proc/stat; and the CPU
time a process (and its children processes) spent, from /proc/PID/stat.

On a virtual machine a neighbour's load shows up here and nowhere else: a run
loses throughput to it as if stockd were slower, and a ratio measured across two
such moments says more about the neighbour than about stockd. The bench
measures steal around every row and measures a row again when it was disturbed."""

import os

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


def _stat_fields(pid):
    """/proc/PID/stat's fields after the command name, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def process_tree(pid):
    """pid and the processes it started (one level: a Node.js cluster's workers)."""
    try:
        others = [int(p) for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return [pid]
    return [pid] + [p for p in others if (_stat_fields(p) or [None, None])[1] == str(pid)]


def process_cpu_s(pids):
    """User plus system CPU seconds the processes spent so far (their threads
    included), or None when one of them cannot be read. A host's other load moves
    it much less than a rate: a neighbour mostly delays a request, it does not make
    it cost more instructions."""
    total = 0
    for pid in pids:
        f = _stat_fields(pid)
        if f is None or len(f) < 13:
            return None
        total += int(f[11]) + int(f[12])  # utime, stime
    return total / os.sysconf("SC_CLK_TCK")
