"""Retrying buyers: each makes one logical purchase and retries it, with the same
Idempotency-Key when it sends one, until it gets an answer it can act on.

What a real client does after `503 outcome_unknown`, a 5xx, its own timeout or a
dropped connection: it cannot tell a sale that happened from one that did not, so it
tries again. Without a key the retry is a second purchase whenever the first one
happened after all; with a key the service can recognise it. The buyer retries those
answers, and a key's `409 in_progress`, only (any other 200 or 4xx is final: sold, sold
out, busy, refused), at most
`attempts` times, waiting `backoff_s` doubled after each try up to `backoff_cap_s`,
every try on a fresh connection (a timed-out one is unusable). Every try is kept
(lab.drivers.load's Answer), so a purchase's history is its tries in order.

A keyed purchase may be asked to `confirm`: once it has its answer, it sends the same
key once more. That try can sell nothing on a service that keeps keys (it is a
replay), and its answer must be the one the buyer acted on: how a run sees that a
key's retries were answered alike, and that an `outcome_unknown` followed by a
replayed answer resolved to that answer. Without a key it is not sent: it would be a
second purchase."""

import csv
import http.client
import os
import threading
import time
import uuid

from ..base.common import REPO, SetupError
from ..base.waiting import wait_until
from . import jmeter
from .load import NO_ANSWER, Answer, error_word, failure_word, remaining_of

KEY_HEADER = "Idempotency-Key"
# The same buyers as a JMeter plan: a key per iteration, retried the same way.
PLAN = os.path.join(REPO, "jmeter", "retry.jmx")
# The JTL columns the plan's rows need (deduct.properties names the others).
PLAN_VARIABLES = "outcome,instance,remaining,key"
NO_KEY_HEADER = "X-Not-A-Key"  # where a keyless plan run sends its keys: nowhere
PLAN_START_S = 60  # a JVM's start on a loaded machine


def retried(answer):
    """Whether a buyer tries again after this answer: no HTTP answer, a 5xx, or `409
    in_progress` (its key's first try is still running: the answer is yet to come)."""
    return (answer.status == NO_ANSWER or answer.status >= 500
            or (answer.status == 409 and answer.word == "in_progress"))


class Purchase:
    """One logical purchase: its key (None: sent without one) and its tries."""

    def __init__(self, key):
        self.key = key
        self.tries = []
        self.check = None  # the confirming try's Answer, when one was sent

    def final(self):
        """The answer the buyer acted on: its last try when that was not retried, else
        None (it gave up)."""
        last = self.tries[-1] if self.tries else None
        return last if last is not None and not retried(last) else None

    def answers(self):
        """Every answer of this key's tries that was not retried, the confirming one
        included: what the service said the purchase came to."""
        tries = self.tries + ([self.check] if self.check else [])
        return [t for t in tries if not retried(t)]

    def agrees(self):
        """Whether those answers are one answer: the same status, word and `remaining`
        (a replay gives the first answer again, body and all)."""
        said = {(a.status, a.word, a.remaining) for a in self.answers()}
        return len(said) <= 1


def one_try(host, port, path, key, timeout_s):
    """POST `path` once on a fresh connection: its Answer."""
    headers = {"Accept": "application/json", "Content-Length": "0"}
    if key:
        headers[KEY_HEADER] = key
    conn = http.client.HTTPConnection(host, port, timeout=timeout_s)
    start = time.monotonic()
    try:
        conn.request("POST", path, headers=headers)
        resp = conn.getresponse()
        raw = resp.read()
        answer = Answer(start, time.monotonic(), resp.status, error_word(resp.status, raw),
                        remaining_of(raw))
    except (OSError, http.client.HTTPException) as e:
        answer = Answer(start, time.monotonic(), NO_ANSWER, failure_word(e))
    finally:
        conn.close()
    return answer


class RetryingBuyers:
    """`count` buyers at host:port, one purchase each of POST `path`, all started at
    once; with_keys: each purchase sends its own key on every try."""

    def __init__(self, host, port, path, count, *, with_keys, timeout_s, attempts=8,
                 backoff_s=0.05, backoff_cap_s=0.4, confirm=False):
        self.host, self.port, self.path = host, port, path
        self.timeout_s, self.attempts = timeout_s, attempts
        self.confirm = confirm and with_keys
        self.backoff_s, self.backoff_cap_s = backoff_s, backoff_cap_s
        self.purchases = [Purchase(str(uuid.uuid4()) if with_keys else None)
                          for _ in range(count)]
        self.threads = [threading.Thread(target=self.buy, args=(p,), daemon=True)
                        for p in self.purchases]

    def one(self, purchase):
        """One try of `purchase`: its Answer (a subclass sends another request)."""
        return one_try(self.host, self.port, self.path, purchase.key, self.timeout_s)

    def buy(self, purchase):
        pause = self.backoff_s
        for _ in range(self.attempts):
            answer = self.one(purchase)
            purchase.tries.append(answer)
            if not retried(answer):
                if self.confirm:
                    purchase.check = self.one(purchase)
                return
            time.sleep(pause)
            pause = min(pause * 2, self.backoff_cap_s)

    def start(self):
        for t in self.threads:
            t.start()

    def join(self, seconds):
        """Wait at most `seconds` for every buyer; whether all of them finished."""
        deadline = time.monotonic() + seconds
        for t in self.threads:
            t.join(max(0.0, deadline - time.monotonic()))
        return not any(t.is_alive() for t in self.threads)


class KeepBuying(RetryingBuyers):
    """`conns` buyers at host:port who make purchase after purchase of POST `path`, each
    retried as RetryingBuyers retries it, until stop(): a buyer stopped in the middle
    of a purchase finishes it (its tries are bounded). with_keys: a key per purchase.

    `also`: other (host, port) of the same service, tried in turn: a purchase's first
    try goes to host:port, each retry to the next of them, as a load balancer sends a
    request whose answer was lost to another instance; the key goes with it. The
    confirming try goes where the answer came from."""

    def __init__(self, host, port, path, conns, *, with_keys, timeout_s, attempts=8,
                 confirm=True, also=()):
        super().__init__(host, port, path, 0, with_keys=with_keys, timeout_s=timeout_s,
                         attempts=attempts, confirm=confirm)
        self.with_keys = with_keys
        self.targets = [(host, port), *also]
        self.stopping = threading.Event()
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self.keep_buying, daemon=True)
                        for _ in range(conns)]

    def one(self, purchase):
        """One try of `purchase` at the target whose turn it is: the first try at
        host:port, each retry at the next target, round and round; the confirming try
        where the answer came from."""
        turn = len(purchase.tries) - (purchase.final() is not None)
        host, port = self.targets[turn % len(self.targets)]
        return one_try(host, port, self.path, purchase.key, self.timeout_s)

    def keep_buying(self):
        while not self.stopping.is_set():
            purchase = Purchase(str(uuid.uuid4()) if self.with_keys else None)
            with self.lock:
                self.purchases.append(purchase)
            self.buy(purchase)

    def stop(self):
        self.stopping.set()

    def resolve(self):
        """Once the fault is over, each keyed purchase that gave up is tried again with
        its key, as a client would: its tries go on from where they stopped, so the
        service says what its first tries came to. A keyless one is left as it is (a
        new try would be a new purchase)."""
        for purchase in self.purchases:
            if purchase.key and purchase.final() is None:
                self.buy(purchase)


def jtl_answer(rec):
    """One JTL row of jmeter/retry.jmx as an Answer (times in seconds): a row with no
    HTTP status got no answer, "client timeout" when JMeter's timeout fired."""
    start = int(rec["timeStamp"]) / 1000
    end = start + int(rec["elapsed"]) / 1000
    code, word = rec.get("responseCode") or "", (rec.get("outcome") or "").strip()
    remaining = (rec.get("remaining") or "").strip()
    remaining = int(remaining) if remaining.lstrip("-").isdigit() else None
    if not code.isdigit():
        return Answer(start, end, NO_ANSWER,
                      "client timeout" if "Timeout" in code else code.rsplit(".", 1)[-1])
    return Answer(start, end, int(code), None if word == "none" else word, remaining)


def purchases_from_jtl(path, keyed):
    """The purchases of a JTL written by jmeter/retry.jmx with PLAN_VARIABLES: one per
    key, its tries in the order they were sent; keyed: the key reached the service
    (else it went in another header, and only groups the tries)."""
    by_key = {}
    with open(path, newline="", encoding="utf-8", errors="replace") as f:
        for rec in csv.DictReader(f):
            key = rec.get("key") or ""
            if key not in by_key:
                by_key[key] = Purchase(key if keyed else None)
            by_key[key].tries.append(jtl_answer(rec))
    for p in by_key.values():
        p.tries.sort(key=lambda a: a.start)
    return list(by_key.values())


class JmeterBuyers:
    """The same buyers as RetryingBuyers, driven by jmeter/retry.jmx (one thread per
    purchase, one iteration each): started once JMeter says its test started, their
    purchases read from its JTL once it exits."""

    def __init__(self, command, out_dir, name, host, port, strategy, product, count, *,
                 with_keys, timeout_s, attempts=8, token=None):
        self.command, self.out_dir, self.name, self.token = command, out_dir, name, token
        self.with_keys, self.attempts = with_keys, attempts
        self.props = {"host": host, "port": port, "strategy": strategy, "product": product,
                      "threads": count, "loops": 1, "timeout_ms": int(timeout_s * 1000),
                      "attempts": attempts, "sample_variables": PLAN_VARIABLES,
                      "key_header": KEY_HEADER if with_keys else NO_KEY_HEADER}
        self.purchases, self.result = [], None
        self.thread = threading.Thread(target=self.drive, daemon=True)

    def drive(self):
        self.result = jmeter.run(self.command, self.out_dir, self.name, self.props,
                                 PLAN_START_S + 120, token=self.token, plan=PLAN)

    def start(self):
        out = os.path.join(self.out_dir, self.name + ".out")
        self.thread.start()

        def started():
            if not self.thread.is_alive():
                return True
            try:
                with open(out, errors="replace") as f:
                    return "Starting the test" in f.read()
            except OSError:
                return False

        if not wait_until(PLAN_START_S, started, 0.01):
            raise SetupError(f"JMeter did not start {PLAN} within {PLAN_START_S} s (see {out})")

    def join(self, seconds):
        self.thread.join(seconds)
        if self.thread.is_alive():
            return False
        if self.result.rc != 0 or not os.path.exists(self.result.jtl):
            raise SetupError(f"JMeter exited with status {self.result.rc} on {PLAN} "
                             f"(see {self.result.out})")
        self.purchases = purchases_from_jtl(self.result.jtl, self.with_keys)
        return True
