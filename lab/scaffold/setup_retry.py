"""A fault run's row whose setup failed: run once more, then reported as setup.

A fault run's row (or a partition and the rows inside it) judges its strategies only if
the fault did what the row asked of it. A SetupError on the way (a replica that never
held the row's reset, a cut that did not take) or the group's own account of the fault
(a switch the kill did not call for) says it did not, and then the strategy has not
been tried at all. Such a row is run once more: on a loaded machine a fault misfires
now and then, and a second try tells that apart from a row that never sets up. When the
second try fails too, the row is reported as setup, apart from the verdicts:
lab.scaffold.runner.report_fact_rows counts it apart (exit status 2) and
lab.reports.junit writes it as an <error type="setup">, so that the lab's failure is
never read as the strategy's.

A row that does not pass, set up or not, carries its diagnosis: the Sentinels' events
and each stockd's log lines of the try's window, which tell a misbehaving group from a
misbehaving strategy without a rerun.

Each run keeps its own try (what it measures, what it mends after) and its own reading
of "did the setup fail, and why"; the retry, what it says, the setup verdict and the
diagnosis are written once here, for lab.scaffold.failover_window (make failover, make
redis-cluster's kill rows), lab.runs.partition_sentinel and lab.runs.partition_galera."""

from ..stack.instances import log_stamp


def tried(attempt, setup_failed, say, failed, again="running it again"):
    """attempt() run, and run once more when setup_failed(its result) says why its
    setup failed (None when it did not). Each failure is said as "failed: why", the
    first followed by "; again". Returns (result, why): the last try's result, to be
    judged when why is None, else to be reported as setup (setup_verdict)."""
    for first in (True, False):
        result = attempt()
        why = setup_failed(result)
        if not why:
            return result, None
        say(f"{failed}: {why}" + (f"; {again}" if first else ""))
    assert why, "only a second failed setup leaves the loop"
    return result, why


def setup_verdict(row, why):
    """The row reported as setup, apart from the verdicts, with why as its reason."""
    row.update(verdict="setup", reason=f"setup: {why}")
    return row


def diagnosis(what, window, origin, events, instances):
    """What tells the story of a try that did not pass: `what` ("the row") and its window
    (monotonic and wall start, monotonic and wall end), the Sentinels' events (none to
    give when events is None: a group with no Sentinels) and each of the instances' log
    lines of the window. Times are in seconds from origin ((its name, its monotonic
    time): ("the kill", died)), or from the window's start when origin is None."""
    t0, wall0, t1, wall1 = window
    since, at = origin or ("its start", t0)
    lines = [f"{what} from {log_stamp(wall0)} to {log_stamp(wall1)}; "
             f"times below are seconds from {since}"]
    if events is not None:
        lines.append("the Sentinels' events:")
        lines += ["  " + e for e in events.account(t0, t1, at)] or ["  none"]
    for inst in instances:
        lines.append(f"stockd {inst.name}'s log ({inst.log_file()}):")
        lines += ["  " + e for e in inst.log_window(wall0, wall1)] or ["  nothing"]
    return lines
