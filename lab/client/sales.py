"""A sale as a client of the contract makes it (DESIGN.md: `POST /stock/deduct/{strategy}`):
the one deduct path every run and driver builds its requests from, one sale and its
answer as (status, error word, body, seconds), the same with the monotonic times of its
start and answer (for a timeline), and a sale sent in the background (a holder the run
freezes, or one whose answer comes after a fault)."""

import threading
import time


def deduct_path(strategy, product, qty=1, **params):
    """The path of a sale of `qty` units of `product` with `strategy`; `params` are the
    sale's further query parameters (hold_ms, ttl_ms, pause_ms, trace), each left out
    when 0 or False."""
    path = f"/stock/deduct/{strategy}?product={product}&qty={qty}"
    return path + "".join(f"&{k}={int(v)}" for k, v in params.items() if v)


def deduct(api, s, product, hold_ms=0, timeout=60):
    """(status, error word or None, body, seconds) of one sale; status 0 when nothing
    answered."""
    t0 = time.monotonic()
    try:
        r = api.call("POST", deduct_path(s.name, product, hold_ms=hold_ms), timeout=timeout)
    except OSError as e:
        return 0, str(e), None, time.monotonic() - t0
    body = r.body if isinstance(r.body, dict) else {}
    return r.status, body.get("error"), body, time.monotonic() - t0


class Sale(threading.Thread):
    """A sale sent in the background; its answer in .answer once joined."""

    def __init__(self, api, s, product, hold_ms):
        super().__init__(daemon=True)
        self.args = (api, s, product, hold_ms)
        self.answer = None

    def run(self):
        self.answer = deduct(*self.args)


def answer_word(answer):
    """An answer as a table shows it: its status, and its error word when it has one."""
    status, word = answer[0], answer[1]
    return f"{status} {word}" if word else str(status)


def timed_sale(api, s, product, hold_ms=0, timeout=60):
    """deduct() with the monotonic times of its start and answer."""
    t0 = time.monotonic()
    answer = deduct(api, s, product, hold_ms, timeout)
    return answer, t0, time.monotonic()


class TimedSale(Sale):
    """A sale sent in the background; (its answer, sent, answered) in .answer."""

    def run(self):
        self.answer = timed_sale(*self.args)
