"""The chaos run's figures and verdict for one (fault, strategy) row, from every answer
the load driver recorded (lab.drivers.load.Answer), the fault's timeline and the store's
accounting afterwards.

Timeline (monotonic seconds): `injecting` when the fault's command began, `injected`
when it returned (the process killed, stopped or frozen somewhere in between),
`back` when every faulted backend answered again. Requests are judged by when they
were sent, never by when their answer came: a request sent during a freeze is
answered after the thaw, and one sent in the instant before the freeze is answered
long after it. So a request *met the outage* when it was sent before `back` and was
still unanswered at `injecting` (the earliest moment the fault can have landed; the
command's return comes later, and a request sent in between met the fault all the
same). While gone, a strategy that needs the backend must answer 503, never hang: no
request may take longer than the request deadline plus a margin; the requests that
met the outage must include 503s (the fault showed), or, when the backend's quorum
stays, requests sent after `injected` must get 200s before `back`. Once back, it
must answer 200 again within RECOVER_S, without stockd being restarted, and no
request sent later than that may get a 503. A strategy claiming safety must show 0
oversold and 0 lost, and its store's ledger must hold the 200s' units plus at most
the outcome_unknown answers' units (lab.client.outcomes.ledger_problem)."""

from collections import Counter

from ..client.outcomes import counts_text, ledger_problem
from ..drivers.load import NO_ANSWER, outcomes_of
from ..nemesis.faults import OUTAGE, QUORUM

RECOVER_S = 2.0
# The 503 words of a backend fault or a deadline; outcome_unknown may have sold.
FAULT_WORDS = ("backend_unavailable", "timeout", "outcome_unknown", "overloaded")
CONTRACT = {200: ("",), 409: ("sold_out", "busy"), 503: FAULT_WORDS}


class Timeline:
    def __init__(self, started, injecting, injected, back, stopped):
        self.started, self.injecting, self.injected = started, injecting, injected
        self.back, self.stopped = back, stopped

    def gone_s(self):
        return None if self.back is None else self.back - self.injected


def recover_s(answers, back):
    """Seconds from the backend's return to the end of the first 200 after it."""
    if back is None:
        return None
    ends = [a.end for a in answers if a.status == 200 and a.end >= back]
    return round(max(0.0, min(ends) - back), 3) if ends else None


def figures(answers, timeline, acct):
    """The row's numbers (a dict; the verdict is judged from it)."""
    t = timeline
    gone_until = t.back or t.stopped
    met = [a for a in answers if a.start < gone_until and a.end >= t.injecting]
    sent_during = [a for a in answers if t.injected <= a.start < gone_until]
    late = [a for a in answers if t.back is not None and a.start >= t.back + RECOVER_S]
    words = Counter(a.word for a in answers if a.status == 503)
    rec = recover_s(answers, t.back)
    o = outcomes_of(answers)
    return {
        "requests": len(answers),
        "ok": o["sold"],
        "ok_before": sum(1 for a in answers if a.status == 200 and a.end < t.injecting),
        "ok_during": sum(1 for a in sent_during if a.status == 200 and a.end < gone_until),
        "refused_during": sum(1 for a in met if a.status == 503),
        "conflict": o["busy"] + o["sold_out"],
        "unavailable": words.get("backend_unavailable", 0),
        "timeout": words.get("timeout", 0),
        "unknown": words.get("outcome_unknown", 0),
        "overloaded": words.get("overloaded", 0),
        "late_refused": sum(1 for a in late if a.status == 503),
        "unexpected": unexpected(answers),
        "max_ms": round(max((a.end - a.start for a in answers), default=0) * 1000, 1),
        "recover_s": rec,
        "store_sold": (acct or {}).get("sold"),
        "oversold": (acct or {}).get("oversold"),
        "lost_updates": (acct or {}).get("lost_updates"),
        "ledger": None if acct is None else (
            ledger_problem(o["sold"], o["outcome_unknown"], 1, acct.get("sold")) or "ok"),
        "error_detail": o.detail(),
    }


def unexpected(answers):
    """Answers outside the contract, by kind ("500 x2; no answer (reset) x1")."""
    c = Counter()
    for a in answers:
        if a.status == NO_ANSWER:
            c[f"no answer ({a.word})"] += 1
        elif a.word not in CONTRACT.get(a.status, ()):
            c[f"{a.status} {a.word}".strip()] += 1
    return counts_text(c)


def answer_problems(f, bound_ms, prefix=""):
    """What is wrong with the answers themselves: some outside the contract, or later
    than the deadline plus margin (bound_ms)."""
    p = []
    if f["unexpected"]:
        p.append(f"{prefix}answers outside the contract: {f['unexpected']}")
    if f["max_ms"] > bound_ms:
        p.append(f"{prefix}a request took {f['max_ms']:.0f} ms > deadline + margin "
                 f"{bound_ms:.0f} ms")
    return p


def problems(f, expect, hit, safe, bound_ms, alive):
    """Why the row fails (empty: it passes). expect: the fault's OUTAGE or QUORUM;
    hit: the strategy needs the faulted backend; bound_ms: deadline plus margin."""
    p = []
    if not alive:
        p.append("stockd died")
    if f["ok_before"] == 0:
        p.append("no 200 before the fault: the run shows nothing")
    p += answer_problems(f, bound_ms)
    if hit and expect == OUTAGE and f["refused_during"] == 0:
        p.append("no 503 to a request that met the outage: the fault did not show")
    if hit and expect == QUORUM and f["ok_during"] == 0:
        p.append("no 200 while the quorum stayed")
    if f["recover_s"] is None:
        p.append("no 200 after the backend came back")
    elif f["recover_s"] > RECOVER_S:
        p.append(f"first 200 {f['recover_s']:.2f} s after the backend came back "
                 f"(> {RECOVER_S:g} s)")
    if f["late_refused"]:
        p.append(f"{f['late_refused']} requests sent more than {RECOVER_S:g} s after the return "
                 "answered 503")
    if f["ledger"] is None:
        p.append("the store's accounting could not be read")
    elif f["ledger"] != "ok":
        p.append(f"ledger: {f['ledger']}")
    if safe and (f["oversold"] or f["lost_updates"]):
        p.append(f"claims safe, but oversold {f['oversold']}, lost {f['lost_updates']}")
    return p
