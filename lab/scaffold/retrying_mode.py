"""The retrying client mode of a fault run (make compare, make failover, make stream-chaos,
the partition runs): what a client that retries does to each row's fault.

With `--retrying-buyers N` (RETRYING_BUYERS; 0, the default, leaves the run as it was),
each row runs, beside its own clients and through its own fault, N buyers who send an
Idempotency-Key with every purchase and N who send none, all of them retrying every
lost answer (no answer, a 5xx: outcome_unknown, timeout, backend_unavailable; a key's
409 in_progress) with the same request, bounded, with backoff (lab.drivers.retrying's
KeepBuying). Each kind buys one unit at a time of a product of its own, reset to a
stock that never runs out, so that the ledger can tell a retry's second effect from a
sale: every unit beyond one per purchase is a double buy (lab.judges.retries). A keyed
buyer sends its key once more after its answer: the answers must agree.

The row gains, for each kind, its purchases, tries, lost first tries and double buys,
and for the keys, the keys answered two ways and a history checked with each key's
tries as one operation. When the row's strategy claims keys (its `idempotent` in GET
/strategies), the keyed figures are judged as make retry judges them, and a run folds
that verdict into its row's (`verdict`); otherwise they are measured. The keyless
figures are always measured: what retries cost without keys."""

import os

from ..base.common import ENDLESS_STOCK, SETTLE_S, SetupError
from ..client.sales import deduct_path
from ..drivers.retrying import KeepBuying
from ..judges import history, retries
from ..judges.settlement import wait_drained

KINDS = (("keys", True), ("nokeys", False))
COLUMNS = ["retry_purchases", "retry_tries", "retry_lost", "double_buys_keys",
           "double_buys_nokeys", "retry_disagree", "retry_history", "retry_verdict",
           "retry_reason"]


def retrying_options(o, env, attempts=8, timeout_ms=300):
    """The mode's flags, each also read from `env` + its name's variable (RETRYING_BUYERS
    for env "RETRYING_"); attempts and timeout_ms: their defaults (a fault whose outage
    outlasts eight quick refusals wants more tries)."""
    o.add("--retrying-buyers", [env + "BUYERS"], 0, int,
          "retrying buyers with keys, and as many without, beside each row's clients "
          "(0: none)", 0)
    o.add("--retrying-timeout-ms", [env + "TIMEOUT_MS"], timeout_ms, int,
          "each retrying try's client timeout", 10)
    o.add("--retrying-attempts", [env + "ATTEMPTS"], attempts, int,
          "tries per retrying purchase at most", 1)


def claims_of(strategies_doc):
    """{strategy name: whether its row says it keeps Idempotency-Keys} of a GET
    /strategies document."""
    return {r["name"]: bool(r.get("idempotent")) for r in strategies_doc["strategies"]}


class RetryingClients:
    """One row's retrying buyers: start() them on two products before the fault,
    finish() after it for the row's figures. Inert when the run asked for none.
    lossy: the row's fault loses acknowledged sales by its strategy's own fact, and its
    keyed figures are judged by lossy_verdict; racy: the strategy does not claim safety
    for the row, and they are judged by racy_verdict."""

    def __init__(self, args, claims, lossy=False, racy=False):
        self.args, self.claims = args, claims
        self.judge = lossy_verdict if lossy else racy_verdict if racy else retries.verdict
        self.buyers = {}
        self.before = {}
        self.product = self.store = self.strategy = None
        self.settles = False

    @property
    def on(self):
        return self.args.retrying_buyers > 0

    def start(self, host, port, api, strategy, store, product, also=(), settles=False):
        """Reset `product` (keyed buyers) and product + 1 (keyless) to an endless stock,
        read their ledgers, and start both kinds at host:port (their retries in turn at
        `also`'s other (host, port) too, when given: KeepBuying). settles: the strategy's
        sales reach `store` later, through the order stream (GET /strategies: settles),
        so finish() reads the ledgers once the stream has drained."""
        if not self.on:
            return
        a = self.args
        self.product, self.store, self.strategy = product, store, strategy
        self.settles = settles
        for k, (kind, keyed) in enumerate(KINDS):
            api.must_reset(product + k, ENDLESS_STOCK)
            self.before[kind] = self.account(api, product + k)
            self.buyers[kind] = KeepBuying(
                host, port, deduct_path(strategy, product + k), a.retrying_buyers,
                with_keys=keyed, timeout_s=a.retrying_timeout_ms / 1000,
                attempts=a.retrying_attempts, also=also)
        for b in self.buyers.values():
            b.start()

    def stop(self):
        for b in self.buyers.values():
            b.stop()

    def finish(self, api, out_dir, label):
        """Stop the buyers, wait for their last purchases and for stockd (`api`, the one
        that answers after the fault) to be idle, and read the ledgers: the row's figures
        ({} when the mode is off)."""
        if not self.on:
            return {}
        self.stop()
        bound = SETTLE_S + self.args.retrying_attempts * 2
        for kind, b in self.buyers.items():
            if not b.join(bound):
                raise SetupError(f"{self.strategy}: retrying buyers ({kind}) still trying "
                                 f"{bound} s after the row")
            b.resolve()
        api.wait_idle(SETTLE_S)
        if self.settles:
            for k in range(len(KINDS)):
                wait_drained(api, self.product + k)
        figures = {kind: self.figures(api, kind, k, out_dir, label)
                   for k, (kind, _) in enumerate(KINDS)}
        return self.row(figures, self.judge)

    def figures(self, api, kind, k, out_dir, label):
        purchases = self.buyers[kind].purchases
        after = self.account(api, self.product + k)
        path = os.path.join(out_dir, f"retrying-{label}-{kind}.jsonl")
        keyed = kind == "keys"
        return {"keys": keyed, "claims": self.claims.get(self.strategy, False),
                **retries.from_ledger(purchases, len(purchases), self.before[kind], after,
                                      path, keyed, "each try is a purchase of its own")}

    @staticmethod
    def row(figures, judge=retries.verdict):
        keyed, keyless = figures["keys"], figures["nokeys"]
        verdict, reason = judge(keyed)
        return {
            "retry_purchases": keyed["purchases"] + keyless["purchases"],
            "retry_tries": keyed["tries"] + keyless["tries"],
            "retry_lost": keyed["first_tries_lost"] + keyless["first_tries_lost"],
            "double_buys_keys": keyed["extra"], "double_buys_nokeys": keyless["extra"],
            "retry_disagree": keyed["disagree"],
            "retry_history": history.short(keyed) or "-",
            "retry_verdict": verdict, "retry_reason": reason,
        }

    def account(self, api, product):
        account = api.account(product, self.store)
        if account is None:
            raise SetupError(f"GET /stock/{product} has no {self.store} accounting")
        return account


def lossy_verdict(keyed):
    """The keyed figures' (verdict, reason) on a row whose fault loses acknowledged
    sales by its strategy's own fact (a Redis failover's loses_sales): a key is kept in
    the sale's atomic step, so it is lost with its sale and cannot buy twice, but the
    ledger then holds fewer units than the 200s, the key's confirming try may sell anew
    (answered two ways), and the history has a 200 that never happened. Those are the
    fact's, not the key's: only the double buys and the purchases never answered are
    judged."""
    return retries.verdict({**keyed, "ok": keyed["sold"] // keyed["qty"], "disagree": 0,
                            "history_linearizable": None})


def racy_verdict(keyed):
    """The keyed figures' (verdict, reason) on a strategy that does not claim safety for
    the row (nolock's race, a process mutex across instances): concurrent buyers lose
    each other's updates, so their history is not linearizable whatever the keys do.
    That is the strategy's race, which its own row judges: the rest is judged."""
    return retries.verdict({**keyed, "history_linearizable": None})


def folded(verdict, reason, row):
    """A row's (verdict, reason) with its retrying figures' verdict folded in: a keyed
    strategy's double buy fails a row that passed."""
    if row.get("retry_verdict") == retries.FAIL and verdict == retries.PASS:
        return retries.FAIL, f"retrying clients: {row['retry_reason']}"
    return verdict, reason


def table_columns():
    """The printed columns of the mode, for a run's table when the mode is on."""
    return [("dbl buys keys", "double_buys_keys", ">"),
            ("dbl buys no keys", "double_buys_nokeys", ">"),
            ("retry", lambda r: r.get("retry_verdict", "-").upper(), "<")]


def with_columns(args, fields, table):
    """A run's (row fields, printed table) with the mode's added when it is on, and as
    they were when it is off."""
    if args.retrying_buyers <= 0:
        return fields, table
    return fields + COLUMNS, table + table_columns()
