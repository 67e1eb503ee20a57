"""The clients' history of a run, the second witness beside the store's ledger.

Every request becomes one op for lab.judges.linearize: when it was sent (invoke), when its
answer came (complete; none: never answered), its qty, its outcome and, when the
reply said it, the stock it left (or the stock a sold_out saw):

    200                                     ok
    409 sold_out                            sold_out
    503 outcome_unknown or timeout, or no   unknown: it may or may not have sold (a
    HTTP answer at all                      timeout is taken at its worst: the witness
                                            never leans on the server's word)
    anything else (busy, 400, 503 ...)      failed: the contract says nothing changed

After the run, the store's counter read once more (the accounting's `remaining`)
is a final read: it must show every 200 and nothing but them and the unknowns. The
history never uses the ledger's `sold`: that is the other witness.

Sources: JMeter's CSV JTL (timeStamp is when the request began, ms; + elapsed, when
it answered; the plan extracts the reply's `remaining`), the chaos driver's answers
(lab.drivers.load, monotonic seconds), the retrying buyers' purchases (one op per
key), the bench's wrk pass (bench/history.lua: a file per
thread, monotonic microseconds) and the race driver's JSON (POST /lab/race, monotonic
microseconds). Times are integers; a JTL's millisecond interval is widened by 1 ms
so that truncation never orders two requests that may have overlapped. Each history
streams to disk as it is read, one JSON line per op (history-<row>.jsonl beside the
results)."""

import csv
import json
import os
import time

from . import linearize


def outcome_of(status, word):
    status = str(status).strip()
    if status == "200":
        return "ok"
    if status == "409" and word == "sold_out":
        return "sold_out"
    if not status.isdigit() or status == "0":
        return "unknown"
    if status == "503" and word in ("outcome_unknown", "timeout"):
        return "unknown"
    return "failed"


def _int_or_none(text):
    try:
        return int(str(text).strip())
    except (TypeError, ValueError):
        return None


class Writer:
    """Ops kept for the check and written to `path` one JSON line each as they come
    (path None: kept only)."""

    def __init__(self, path):
        self.ops, self.f = [], open(path, "w", encoding="utf-8") if path else None

    def add(self, op):
        self.ops.append(op)
        if self.f:
            self.f.write(json.dumps(op, separators=(",", ":")) + "\n")

    def close(self):
        if self.f:
            self.f.close()
        return self.ops


def from_jtl(jtl, path, qty):
    """The ops of a CSV JTL written with jmeter/deduct.properties (empty without one)."""
    w = Writer(path)
    if os.path.exists(jtl):
        with open(jtl, newline="", encoding="utf-8", errors="replace") as f:
            for n, rec in enumerate(csv.DictReader(f), 1):
                ts, ms = _int_or_none(rec.get("timeStamp")), _int_or_none(rec.get("elapsed"))
                if ts is None or ms is None:
                    continue
                outcome = outcome_of(rec.get("responseCode") or "",
                                     (rec.get("outcome") or "").strip())
                op = {"id": n, "invoke": ts, "complete": ts + ms + 1, "qty": qty,
                      "outcome": outcome}
                left = _int_or_none(rec.get("remaining"))
                if left is not None and outcome in ("ok", "sold_out"):
                    op["remaining"] = left
                w.add(op)
    return w.close()


def from_answers(answers, path, qty):
    """The ops of lab.drivers.load answers (monotonic seconds, to microseconds)."""
    w = Writer(path)
    for n, a in enumerate(answers, 1):
        w.add({"id": n, **_answer_op(a, qty)})
    return w.close()


def from_purchases(purchases, path, qty):
    """The ops of retrying buyers (lab.drivers.retrying). A keyed purchase is one op,
    however many tries it took: invoked when its first try was sent, completed with
    the answer the buyer acted on (an outcome_unknown followed by a replayed answer is
    that answer), or never when it gave up: its key is what makes the tries one
    request. A purchase without a key is as many ops as tries, each a purchase of its
    own to the service."""
    w = Writer(path)
    for n, p in enumerate(purchases, 1):
        if p.key is None:
            for k, a in enumerate(p.tries, 1):
                w.add(dict(_answer_op(a, qty), id=f"{n}.{k}"))
            continue
        final = p.final()
        op = _answer_op(final, qty) if final else {"outcome": "unknown", "qty": qty}
        op.update(id=n, invoke=int(p.tries[0].start * 1e6),
                  complete=int(final.end * 1e6) + 1 if final else None)
        w.add(op)
    return w.close()


def _answer_op(a, qty):
    """One answer of lab.drivers.load as an op (no id): a client timeout has no
    completion, since the request may still take effect after the client gave up."""
    outcome = outcome_of(a.status, a.word)
    op = {"invoke": int(a.start * 1e6),
          "complete": None if a.status == 0 and a.word == "client timeout"
          else int(a.end * 1e6) + 1, "qty": qty, "outcome": outcome}
    if a.remaining is not None and outcome in ("ok", "sold_out"):
        op["remaining"] = a.remaining
    return op


def from_wrk(prefix, threads, path, qty, settled=None):
    """The ops of a wrk pass recorded by bench/history.lua (PREFIX.1 .. PREFIX.threads,
    PREFIX.end), and the instant its window closed (the earliest "cut": a thread
    that reached its bound) or None. An op's id is THREAD.LINE. In a window, the ops
    sent from that instant on are left out (lab.judges.linearize's `future`). settled: an
    instant (monotonic µs) by which wrk had closed its connections and stockd had
    finished every request it had: a request that never got its answer took effect
    before it, if at all (its complete)."""
    lines, cut = [], None
    for n in list(range(1, threads + 1)) + ["end"]:
        name = f"{prefix}.{n}"
        if not os.path.exists(name):
            continue
        with open(name, encoding="utf-8", errors="replace") as f:
            for k, line in enumerate(f, 1):
                fields = line.split()
                if fields[:1] == ["cut"]:
                    t = int(fields[1])
                    cut = t if cut is None else min(cut, t)
                elif len(fields) == 5:
                    lines.append((f"{n}.{k}", fields))
    w = Writer(path)
    for ident, (invoke, complete, status, left, word) in lines:
        if cut is not None and int(invoke) >= cut:
            continue
        outcome = outcome_of(status, "" if word == "-" else word)
        op = {"id": ident, "invoke": int(invoke),
              "complete": settled if complete == "-" else int(complete), "qty": qty,
              "outcome": outcome}
        if left != "-" and outcome in ("ok", "sold_out"):
            op["remaining"] = int(left)
        w.add(op)
    return w.close(), cut


def from_race(race):
    """The ops of the race driver's JSON (POST /lab/race)."""
    ops = []
    for h in race.get("history") or []:
        outcome = outcome_of(h.get("status") or 0, h.get("error") or "")
        op = {"id": h.get("id"), "invoke": h.get("invoke_us"), "complete": h.get("complete_us"),
              "qty": h.get("qty", race.get("qty", 1)), "outcome": outcome}
        if isinstance(h.get("remaining"), int) and outcome in ("ok", "sold_out"):
            op["remaining"] = h["remaining"]
        ops.append(op)
    return ops


def for_undersells(ops, undersells, qty):
    """ops as the checker may read them for a row whose stock is split (its
    `undersells` fact): a sold_out that asked one segment ("any_qty"), or asked for
    more than one segment need hold ("split_qty" with qty > 1), says that a segment
    was short, not that the product was: it changed nothing and tells nothing of the
    product's stock, so it goes in as "failed". A qty-1 sold_out of a split_qty row
    stays: it found every segment empty in turn, and a segment, once empty, stays so
    until a reset, so the product was empty when the last was asked."""
    if not undersells or (undersells == "split_qty" and qty <= 1):
        return ops
    return [dict(o, outcome="failed") if o["outcome"] == "sold_out" else o for o in ops]


def with_final_read(ops, remaining, path=None):
    """ops plus the store's counter read after every request had answered."""
    if not isinstance(remaining, int):
        return ops
    last = max((o["complete"] for o in ops if o["complete"] is not None), default=0)
    op = {"id": "final", "invoke": last + 1, "complete": last + 1, "qty": 0, "outcome": "ok",
          "remaining": remaining}
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(op, separators=(",", ":")) + "\n")
    return ops + [op]


def judge(initial, ops, future=None):
    """The row's history fields: history (the words), linearizable, ops, searched,
    seconds. future: a window's end (lab.judges.linearize), said in the words."""
    t0 = time.monotonic()
    r = linearize.check(initial, ops, future=future)
    said = text(r) if future is None else f"{text(r)} (a window: the first {r['ops']} requests)"
    return {"history": said, "history_linearizable": r["linearizable"],
            "history_ops": r["ops"], "history_searched": r["searched"],
            "history_how": r["how"], "history_s": round(time.monotonic() - t0, 3)}


def judge_final(initial, ops, remaining, path=None, future=None):
    """judge() of ops with the store's counter read after them (remaining: an int, or
    None when there is none to add, as for a window)."""
    return judge(initial, with_final_read(ops, remaining, path), future=future)


def text(r):
    if r["linearizable"] is None:
        return f"undecided: {r['undecided']}"
    return "linearizable" if r["linearizable"] else r["violation"]


def short(r):
    """A row's history verdict in a word, for the printed tables."""
    said = r.get("history_linearizable")
    if r.get("history_ops") is None:
        return None
    return "undecided" if said is None else "lin" if said else "NOT lin"


def not_judged(why):
    return {"history": f"not checked: {why}", "history_linearizable": None,
            "history_ops": None, "history_searched": None, "history_how": None,
            "history_s": None}
