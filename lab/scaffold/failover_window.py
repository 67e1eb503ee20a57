"""The failover window, made to happen on demand (make failover on the Sentinel group,
make redis-cluster's kill rows on a shard of the Redis Cluster): a write reaches the
primary but not its replica, the primary dies, the replica is promoted, a second client
comes. The replica is held back (CLIENT PAUSE WRITE) and released once its link to the
dead primary is down; two stockd instances, A (the first client's) and B (the second
client's and the probe's), each row's sequence by its strategy's kind (sales, holder,
quorum: lab.judges.failover_gate), and the dead server restarted, as a supervisor
would, as the new primary's replica, once a majority of the Sentinels name that one.
Each row is measured and judged by lab.judges.failover_gate; a run declares the window's
flags with window_options.

A row judges its strategy only if the group did what the row asked of it: the
Sentinels' events (lab.nemesis.redis_group.SentinelEvents) must show one switch after
the kill, to the held-back replica, and the replica must have held the row's reset
before it. Otherwise the row is run once more, then reported as setup, apart from the
verdicts (lab.scaffold.setup_retry). A row that does not pass carries its diagnosis:
the Sentinels' events and each stockd's log lines of its window.

A run with retrying buyers (lab.scaffold.retrying_mode) gives each row its own: they
buy through B, the instance that answers across the window (A is frozen in a holder
row), from just before the row's fault until the group is whole again. They start only
once the group has settled and the row's reset has reached the replica: buyers that
never pause would keep the replica from ever catching up. An attempt whose setup failed
stops them unread; the next attempt starts them afresh."""

import threading
import time

from ..base.common import ENDLESS_STOCK, SetupError
from ..client.sales import Sale, answer_word, deduct
from ..nemesis import faults as faults_mod
from ..judges import failover_gate
from ..nemesis.redis_group import UNFINISHED
from . import retrying_mode, setup_retry


def window_options(o):
    """The window's flags, which every run of it declares."""
    o.add("--sales", ["FAILOVER_SALES"], 5, int, "sales acknowledged before the death", 1)
    o.add("--hold-ms", ["FAILOVER_HOLD_MS"], 1000, int,
          "the first holder's stay between its read and its write", 50)
    o.add("--request-timeout-ms", ["FAILOVER_REQUEST_TIMEOUT_MS"], 2000, int,
          "instance B's request deadline (A's is 30 s: it is frozen for a while)", 500)
    o.add("--margin-ms", ["FAILOVER_MARGIN_MS"], 500, int,
          "how far past the deadline an answer may come", 0)


PROBE_EVERY_S = 0.05
ROW_FIELDS = [
    "strategy", "kind", "fact", "acked", "store_sold", "acked_lost", "oversold",
    "lost_updates", "first_holder", "second_holder", "promote_s", "replica_back_s", "first_ok_s",
    "gap_answers", "gap_max_ms", "verdict", "reason",
]


class Failover:
    """The window on `group` (a Sentinel-watched group, or a Redis Cluster whose shard
    serves the row's products), with instances a and b; run_row runs one row."""

    def __init__(self, args, group, a, b, say):
        self.args, self.group, self.a, self.b, self.say = args, group, a, b, say
        self.bound_s = (args.request_timeout_ms + args.margin_ms) / 1000
        self.timeline = None
        self.dead = None  # the group server this row killed, until it is back
        self.held = None  # the replica this row held back, until it is released
        self.retrying = None  # the row's retrying buyers: (RetryingClients, product, out_dir)

    def reset(self, product, count):
        self.b.api.must_reset(product, count)

    def probe_until_ok(self, s, product, died):
        """B's probe, one sale every 50 ms from the death until a 200: every answer
        before it, and the time of the first 200 (None when none came in 20 s)."""
        gap = []
        deadline = died + 20
        while time.monotonic() < deadline:
            sent = time.monotonic()
            answer = deduct(self.b.api, s, product, timeout=self.bound_s + 5)
            if answer[0] == 200:
                return gap, time.monotonic()
            gap.append((sent, answer))
            time.sleep(max(0.0, PROBE_EVERY_S - (time.monotonic() - sent)))
        return gap, None

    def heal(self, replica, times):
        """Awaits the promotion, then restarts the dead server as the new primary's
        replica, as a supervisor would: the rows that wait for a replica sell again
        only then."""
        times["promoted"] = self.group.wait_promoted(replica)
        if times["promoted"] and self.dead:
            try:
                self.group.restart(self.dead)
            except SetupError as e:  # mend() tries again, and stops the run if it fails
                times["heal_error"] = str(e)
                return
            self.dead = None
            times["replica_back"] = time.monotonic()

    def fail_over(self, s, primary, replica, probe_product):
        """Kill the primary, release the held-back replica once its link is down, and
        follow the promotion, the dead server's return and B's probe. Returns the
        measurements."""
        died = self.group.kill(primary)
        self.dead = primary
        link_down = self.group.wait_link_down(replica)
        self.group.release(replica)
        self.held = None
        times = {}
        healer = threading.Thread(target=self.heal, args=(replica, times), daemon=True)
        healer.start()
        gap, first_ok = self.probe_until_ok(s, probe_product, died)
        return {"died": died, "link_down": link_down, "healer": healer, "times": times,
                "first_ok": first_ok, "gap": gap, "replica": replica}

    @staticmethod
    def healed(m):
        """The promotion's and the replica's return's times into m, once both are over."""
        m.pop("healer").join()
        times = m.pop("times")
        m.update(promoted=times.get("promoted"), replica_back=times.get("replica_back"),
                 heal_error=times.get("heal_error"))

    def sales_row(self, s, row, product, probe):
        primary, replica = self.group.settled()
        self.reset(product, ENDLESS_STOCK)
        self.reset(probe, ENDLESS_STOCK)
        self.group.wait_caught_up(primary, replica)
        self.start_retrying(s)
        self.group.hold_back(replica)
        self.held = replica
        cut = time.monotonic()
        answers = [deduct(self.a.api, s, product) for _ in range(self.args.sales)]
        acked = sum(1 for a in answers if a[0] == 200)
        row["first_holder"] = ", ".join(sorted({answer_word(a) for a in answers}))
        m = self.fail_over(s, primary, replica, probe)
        account = self.b.api.account(product, s.store) or {}
        row.update(acked=acked, store_sold=account.get("sold"))
        if account.get("sold") is not None:
            row["acked_lost"] = max(0, acked - account["sold"])
        row.update(oversold=account.get("oversold"), lost_updates=account.get("lost_updates"))
        return m, cut

    def holder_row(self, s, row, product, probe):
        primary, replica = self.group.settled()
        self.reset(product, 1)
        self.reset(probe, ENDLESS_STOCK)
        self.group.wait_caught_up(primary, replica)
        self.start_retrying(s)
        self.group.hold_back(replica)
        self.held = replica
        cut = time.monotonic()
        first = Sale(self.a.api, s, product, self.args.hold_ms)
        first.start()
        holding = self.a.wait_holding(first)
        if holding:
            self.a.freeze(True)
        held_at = time.monotonic()
        try:
            m = self.fail_over(s, primary, replica, probe)
            second = deduct(self.b.api, s, product, timeout=self.bound_s + 5)
            m["second"] = (time.monotonic(), second)
        finally:
            if holding:
                self.a.freeze(False)
        first.join(60)
        thawed = time.monotonic()
        m.update(held_at=held_at if holding else None, thawed=thawed, first=first.answer)
        account = self.b.api.account(product, "mysql") or {}
        answers = [first.answer, second]
        row.update(first_holder=answer_word(first.answer) if first.answer else "no answer",
                   second_holder=answer_word(second),
                   acked=sum(1 for a in answers if a and a[0] == 200),
                   store_sold=account.get("sold"), oversold=account.get("oversold"),
                   lost_updates=account.get("lost_updates"))
        return m, cut

    def quorum_row(self, s, row, product, env):
        """Sales through Redlock while one of its three servers is killed and restarted."""
        self.reset(product, ENDLESS_STOCK)
        victim = faults_mod.redlock_names(env)[0]
        self.start_retrying(s)
        before = [deduct(self.b.api, s, product) for _ in range(5)]
        faults_mod.run_stack("kill-one", victim)
        try:
            during = [deduct(self.b.api, s, product, timeout=self.bound_s + 5)
                      for _ in range(10)]
        finally:
            faults_mod.run_stack("start-one", victim)
        account = self.b.api.account(product, "mysql") or {}
        ok_during = sum(1 for a in during if a[0] == 200)
        row.update(acked=sum(1 for a in before + during if a[0] == 200),
                   store_sold=account.get("sold"), oversold=account.get("oversold"),
                   lost_updates=account.get("lost_updates"),
                   first_holder=f"{ok_during}/10 sold with {victim} dead")
        if ok_during == 0:
            row["problems"].append(f"no sale with one of three servers ({victim}) dead")

    def run_row(self, s, product, env, retrying=None):
        """The row of strategy s on `product` (and its probe on product + 1), measured
        and judged; env: the stack's, whose Redlock servers a quorum row kills. Run once
        more when its setup failed (the group did not do what the row asked of it), and
        reported as setup, apart from the verdicts, when it fails again. A row that does
        not pass carries its diagnosis. retrying: the row's retrying buyers, their first
        product and the directory of their histories, or None."""
        self.retrying = retrying
        (row, m, window), setup = setup_retry.tried(
            lambda: self.attempt(s, product, env), lambda tried: tried[0]["setup"], self.say,
            f"{s.name}: the row's setup failed")
        if setup:
            setup_retry.setup_verdict(row, setup)
        if row["kind"] == "holder" and row["fact"] == "two_holders" and not self.timeline \
                and m:
            self.timeline = (s.name, m)
        if row["verdict"] != "pass":
            row["diagnosis"] = self.diagnosis(window, m)
        return row

    def attempt(self, s, product, env):
        """One try of the row: (row, measurements, window), row["setup"] saying why its
        setup failed, or None."""
        row = {f: None for f in ROW_FIELDS}
        row.update(strategy=s.name, kind=failover_gate.kind_of(s), fact=s.failover,
                   problems=[], setup=None)
        self.say(f"{s.name}: {row['kind']} row (fact: {s.failover})")
        window, m = (time.monotonic(), time.time()), None
        if row["kind"] == "quorum":
            self.quorum_row(s, row, product, env)
            failover_gate.judge(row)
            self.retrying_figures(s, row)
            return row, m, window + (time.monotonic(), time.time())
        sequence = self.sales_row if row["kind"] == "sales" else self.holder_row
        try:
            m, cut = sequence(s, row, product, product + 1)
            self.healed(m)
        except SetupError as e:
            row["setup"] = str(e)
        finally:
            self.mend()
        window += (time.monotonic(), time.time())
        if row["setup"]:
            row.pop("problems")
            self.stop_retrying()
            return row, None, window
        failover_gate.measured(row, m, cut, self.bound_s)
        failover_gate.judge(row)
        self.retrying_figures(s, row)
        row["setup"] = self.group_misbehaved(row, m, window)
        return row, m, window

    def start_retrying(self, s):
        """The row's retrying buyers, if it has any, started through B."""
        if self.retrying:
            clients, product, _ = self.retrying
            api = self.b.api
            clients.start(api.host, api.port, api, s.name, s.store, product)

    def stop_retrying(self):
        if self.retrying:
            self.retrying[0].stop()

    def retrying_figures(self, s, row):
        """The row's retrying buyers finished, once the group is whole again: their
        figures in the row, their verdict folded into its."""
        if self.retrying:
            clients, _, out_dir = self.retrying
            row.update(clients.finish(self.b.api, out_dir, s.name))
            row["verdict"], row["reason"] = retrying_mode.folded(row["verdict"], row["reason"],
                                                                 row)

    def group_misbehaved(self, row, m, window):
        """Why the row's failover was not the one it asked for, or None: any switch but
        the one to the held-back replica (a Sentinel that marked a healthy primary down),
        or, on a row that failed, an attempt abandoned half-way (a promotion that timed
        out on a loaded machine)."""
        events = self.group.events
        if events is None:  # a group with no Sentinels to give an account of it
            return None
        switches = [new for _, new in events.switches(m["died"], window[2])]
        wanted = f"127.0.0.1:{m['replica']}"
        if switches != [wanted]:
            return (f"the Sentinels switched the primary to {', '.join(switches) or 'nothing'}"
                    f" in the row's window; the row's kill called for one switch, to {wanted}")
        unfinished = [e[2] for e in events.since(window[0], window[2])
                      if e[2].startswith(UNFINISHED)]
        if unfinished and row["verdict"] != "pass":
            return f"a failover attempt ended half-way ({', '.join(sorted(set(unfinished)))})"
        return None

    def diagnosis(self, window, m):
        """What tells a failed row's story: the Sentinels' events and each stockd's log
        lines of its window, times from the primary's death (or the row's start)."""
        return setup_retry.diagnosis("the row", window, ("the kill", m["died"]) if m else None,
                                     self.group.events, (self.a, self.b))

    def mend(self):
        """The group whole again: no replica held back, the killed server back (as the
        new primary's replica)."""
        if self.held:
            self.group.release(self.held)
            self.held = None
        if self.dead:
            self.group.restart(self.dead)
            self.dead = None
