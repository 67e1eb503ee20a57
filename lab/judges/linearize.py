"""The second witness: is a history of sale attempts linearizable for a stock counter?

The ledger is the store's own account of what it sold; a failover or a bug in the
ledger code corrupts it along with the stock. The clients' history is independent of
it: every request's invocation and completion time and its answer. The history is
linearizable when some order of the requests, each placed at one instant between its
invocation and its completion, explains every answer on one counter that starts at
`initial` and deducts conditionally:

    ok        (200)  stock >= qty at its instant: stock -= qty; with `remaining`,
                     the stock right after it was exactly that
    sold_out  (409)  stock < qty at its instant, nothing changed; with `remaining`,
                     the stock it saw
    unknown          outcome_unknown, a timeout, no answer: either an ok or nothing,
                     anywhere after its invocation (before its completion, if any)
    failed           an answer the contract says changed nothing: left out
    qty 0 with ok    a read: the stock was `remaining` at its instant (the final
                     accounting of a run comes in as one)

Times are integers on one clock; two instants that compare equal may go either way
(a clock's resolution never makes a violation up).

How it decides, cheapest first, and never guesses:
  1. Proofs of a violation that need no search: a stock below zero, two sales that
     left the same stock (the counter strictly decreases, so one deduction vanished:
     a lost update), more units sold than there were, a later request that saw more
     stock than an earlier one left, a sale that began after a sold_out answer for
     the same or a smaller quantity had come back.
  2. A counting proof for the common case (one qty, no `remaining` values but the
     final read): every sale fits in the stock, the final stock shows every 200 (and
     whole unknown sales), and every sold_out comes after enough sales had begun to
     empty the stock.
  3. An ordering proof for the bench's case (one qty, every 200 says the stock it
     left, no sold_out): the counter only goes down, so those values fix the order
     of the sales; the stock levels no 200 left are unknown sales (or, in a window,
     sales after it), each chosen earliest answer first. The earliest instants that
     keep that order inside every interval are an order that explains every answer:
     linearizable, in one pass over the sorted ops. When that pass fails it proves
     nothing (another choice of unknowns might fit), and the search below decides.
  4. Otherwise a Wing-Gong search (Lowe's just-in-time linearization, as in
     Porcupine): ops are tried in invocation order, a return that is reached before
     its op was placed backtracks, and (placed ops, stock) states already seen are
     not searched again; an answer that changes nothing and fits now is placed at
     once (nothing can be lost by it). The search is bounded: past `budget` states
     it says "undecided", with the reason, never a verdict it did not reach; so does
     a history of more than SEARCH_MAX requests (its states would not fit in memory).

A window (`future`: the history stops recording at that instant, as a bench pass
bounded in size does): ops invoked at or after it are not in the history, so any
number of sales (of the one qty) may have taken effect from that instant on; a
history judged so has no final read, and the search is not tried.
"""

import heapq
import json

OUTCOMES = ("ok", "sold_out", "unknown", "failed")
BUDGET = 100000
SEARCH_MAX = 10000
INF = float("inf")


class Op:
    __slots__ = ("id", "invoke", "complete", "qty", "outcome", "remaining", "index")

    def __init__(self, d, index):
        self.id = d.get("id", index)
        self.invoke = d["invoke"]
        self.complete = INF if d.get("complete") is None else d["complete"]
        self.qty = int(d.get("qty", 1))
        self.outcome = d["outcome"]
        self.remaining = d.get("remaining")
        self.index = index
        if self.outcome not in OUTCOMES:
            raise ValueError(f"op {self.id}: outcome {self.outcome!r} is not one of {OUTCOMES}")
        if self.qty < 0 or (self.qty == 0 and self.outcome != "ok"):
            raise ValueError(f"op {self.id}: qty {self.qty} (0 only for a read, outcome ok)")

    @property
    def deducts(self):
        return self.outcome == "ok" and self.qty > 0

    @property
    def pinned(self):
        """The stock right after this op, when its answer says it."""
        return self.remaining if self.outcome in ("ok", "sold_out") else None

    def words(self):
        n = f"#{self.id}"
        r = self.remaining
        if self.outcome == "ok" and self.qty == 0:
            return f"{n} (read {r})"
        if self.outcome == "ok":
            return f"{n} (sold {self.qty}" + (f", read {r + self.qty}, left {r})"
                                              if r is not None else ")")
        if self.outcome == "sold_out":
            return f"{n} (sold_out asking {self.qty}" + (f", saw {r})" if r is not None else ")")
        return f"{n} (outcome unknown, qty {self.qty})"


def result(ops, linearizable, violation=None, searched=0, how="proof", undecided=None):
    return {"linearizable": linearizable, "violation": violation, "ops": ops,
            "searched": searched, "how": how, "undecided": undecided}


def check(initial, history, budget=BUDGET, future=None):
    """The verdict on `history` (dicts: id, invoke, complete, qty, outcome, remaining)
    for a counter starting at `initial`: {"linearizable": True | False | None
    (undecided), "violation": words | None, "ops", "searched", "how", "undecided"}.
    future: the instant a window's recording stopped (module doc), or None."""
    ops = [Op(d, i) for i, d in enumerate(history)]
    ops = [o for o in ops if o.outcome != "failed"]
    for i, o in enumerate(ops):
        o.index = i
    why = quick_violation(initial, ops)
    if why:
        return result(len(ops), False, why)
    if counting_applies(ops, future):
        why = counting_violation(initial, ops)
        return result(len(ops), why is None, why)
    if ordering_applies(ops) and in_order(initial, ops, future):
        return result(len(ops), True, how="order")
    if future is not None:
        return result(len(ops), None, how="order", undecided=(
            f"a window of {len(ops)} requests that the ordering proof could not line up "
            "(the search needs the whole history)"))
    if len(ops) > SEARCH_MAX:
        return result(len(ops), None, how="search", undecided=(
            f"{len(ops)} requests, more than the search takes ({SEARCH_MAX}), and no proof "
            "applied"))
    return Search(initial, ops, budget).run()


# ---------------------------------------------------------------- proofs without search


def quick_violation(initial, ops):
    return (bounds_violation(initial, ops) or duplicate_violation(ops)
            or oversell_violation(initial, ops) or order_violation(ops)
            or sold_out_violation(ops) or final_violation(initial, ops))


def bounds_violation(initial, ops):
    for o in ops:
        r = o.pinned
        if r is None:
            continue
        if r < 0:
            return f"{o.words()}: a counter that refuses to sell below zero never shows {r}"
        top = initial - o.qty if o.deducts else initial
        if r > top:
            return f"{o.words()}: more than the {initial} units the run started with"
        if o.outcome == "sold_out" and r >= o.qty:
            return f"{o.words()}: {r} units were enough for {o.qty}"
    return None


def duplicate_violation(ops):
    seen = {}
    for o in sorted((o for o in ops if o.deducts and o.remaining is not None),
                    key=lambda o: o.invoke):
        first = seen.setdefault(o.remaining, o)
        if first is not o:
            return (f"{first.words()} and {o.words()} both left {o.remaining}: the stock "
                    "only goes down, so one of the two deductions vanished (a lost update)")
    return None


def oversell_violation(initial, ops):
    sold = sum(o.qty for o in ops if o.deducts)
    if sold <= initial:
        return None
    last = max((o for o in ops if o.deducts), key=lambda o: o.complete)
    return (f"the 200 answers sold {sold} units of the {initial} there were: "
            f"{sold - initial} oversold (the last to answer: {last.words()})")


def order_violation(ops):
    """An op that began after another had answered, but saw more stock than it left."""
    pinned = sorted((o for o in ops if o.pinned is not None), key=lambda o: o.complete)
    best, k = None, 0
    for b in sorted(pinned, key=lambda o: o.invoke):
        while k < len(pinned) and pinned[k].complete < b.invoke:
            if best is None or pinned[k].pinned < best.pinned:
                best = pinned[k]
            k += 1
        if best is not None and (best.pinned < b.pinned or
                                 (best.pinned == b.pinned and b.deducts)):
            return (f"{best.words()} had answered before {b.words()} began, yet "
                    f"#{b.id} found more stock than #{best.id} left")
    return None


def sold_out_violation(ops):
    """A sale that began after a sold_out for the same or a smaller qty had answered."""
    outs = sorted((o for o in ops if o.outcome == "sold_out"), key=lambda o: o.complete)
    smallest, k = None, 0
    for b in sorted((o for o in ops if o.deducts), key=lambda o: o.invoke):
        while k < len(outs) and outs[k].complete < b.invoke:
            if smallest is None or outs[k].qty < smallest.qty:
                smallest = outs[k]
            k += 1
        if smallest is not None and smallest.qty <= b.qty:
            return (f"{smallest.words()} had answered before {b.words()} began: "
                    f"once the stock was below {smallest.qty}, a sale of {b.qty} cannot follow")
    return None


def final_reads(ops):
    """The reads that came after every other op had answered (a run's accounting)."""
    last = max((o.complete for o in ops if o.qty), default=-INF)
    return [o for o in ops if o.qty == 0 and o.invoke > last]


def final_violation(initial, ops):
    """After everything answered, the stock must show what the answers took: every
    200's units, and any of the unknowns' (one qty: a whole number of them)."""
    finals = final_reads(ops)
    if not finals:
        return None
    f = finals[0]
    took = initial - f.remaining
    sold = sum(o.qty for o in ops if o.deducts)
    unknown = [o.qty for o in ops if o.outcome == "unknown"]
    if took < sold:
        return (f"{f.words()} after every request had answered: {took} units left the "
                f"counter, but the 200 answers sold {sold}: {sold - took} of their deductions "
                "vanished (lost updates)")
    if took > sold + sum(unknown):
        return (f"{f.words()} after every request had answered: {took} units left the "
                f"counter, more than the {sold} the 200 answers sold"
                + (f" and the {sum(unknown)} the unknown answers may have" if unknown else ""))
    if len(set(unknown)) == 1 and (took - sold) % unknown[0]:
        return (f"{f.words()}: {took - sold} units beyond the 200 answers is no whole "
                f"number of unknown sales of {unknown[0]}")
    return None


def counting_applies(ops, future=None):
    qtys = {o.qty for o in ops if o.qty}
    finals = final_reads(ops)
    return len(qtys) <= 1 and all(o.remaining is None for o in ops if o.qty) and \
        len(finals) == sum(1 for o in ops if not o.qty) and \
        (future is None or not any(o.outcome == "sold_out" for o in ops))


def counting_violation(initial, ops):
    """One qty, no remaining values: every sale fits (checked already); the first
    sold_out to answer must come after enough sales (200s, and unknowns that may have
    sold) had begun to empty the stock, and every 200 must have begun by then."""
    outs = [o for o in ops if o.outcome == "sold_out"]
    if not outs:
        return None  # final_violation checked the reads after everything
    finals = final_reads(ops)
    first = min(outs, key=lambda o: o.complete)
    q = first.qty
    need = initial // q
    late = [o for o in ops if o.deducts and o.invoke > first.complete]
    if late:
        return (f"{first.words()} had answered before {late[0].words()} began, "
                "yet it sold")
    could = sum(1 for o in ops if o.deducts or (o.outcome == "unknown" and
                                                 o.invoke <= first.complete))
    if could < need:
        return (f"{first.words()} answered when at most {could} sales of {q} had begun, "
                f"but {initial} units need {need} to run out: the stock cannot have been gone")
    left = initial - need * q
    for f in finals:
        if f.remaining != left:
            return (f"{first.words()} says the stock ran out, so it ended at {left}, "
                    f"but {f.words()} after every request had answered")
    return None


def ordering_applies(ops):
    """One qty, every 200 with the stock it left, no sold_out: the ordering proof's
    case (a bench row's: a stock that never runs out)."""
    return len({o.qty for o in ops if o.qty}) == 1 and all(
        o.outcome == "unknown" or (o.outcome == "ok" and o.pinned is not None) for o in ops)


def in_order(initial, ops, future=None):
    """True when the sales, in the order their `remaining` values fix, fit their
    intervals at the earliest instants that keep that order, each stock level no 200
    left taken by an unknown sale (the earliest to answer among those already sent,
    else the next one sent) or, from `future` on, by a sale after the window; the
    reads (qty 0) at the level they show. False: not shown this way."""
    q = next(o.qty for o in ops if o.qty)
    sales = {o.remaining + q: o for o in ops if o.deducts}
    reads = {}
    for o in ops:
        if not o.qty:
            reads.setdefault(o.remaining, []).append(o)
    bottom = min(list(reads) + [o.remaining for o in sales.values()], default=initial)
    if any((initial - r) % q for r in reads) or (initial - bottom) % q or \
            (initial - bottom) // q > 4 * len(ops) + 1000:
        return False  # a level the walk would never visit, or too many to walk
    unknown = sorted((o for o in ops if o.outcome == "unknown"), key=lambda o: o.invoke)
    sent, k, t, level = [], 0, -INF, initial  # sent: (complete, invoke) heap
    while True:
        for r in reads.get(level, ()):
            t = max(t, r.invoke)
            if t > r.complete:
                return False
        if level == bottom:
            return True
        o = sales.get(level)
        if o is not None:
            t = max(t, o.invoke)
            if t > o.complete:
                return False
        else:
            while k < len(unknown) and unknown[k].invoke <= t:
                heapq.heappush(sent, (unknown[k].complete, unknown[k].invoke))
                k += 1
            while sent and sent[0][0] < t:
                heapq.heappop(sent)  # answered before this level: it did not sell here
            if sent:
                heapq.heappop(sent)
            elif k < len(unknown) and (future is None or unknown[k].invoke <= future):
                t = unknown[k].invoke
                k += 1
            elif future is not None:
                t = max(t, future)
            else:
                return False
        level -= q


# ---------------------------------------------------------------- the search


class Search:
    """Lowe's just-in-time linearization over a doubly linked list of call and return
    events, with a cache of (placed ops, stock) states."""

    def __init__(self, initial, ops, budget):
        self.initial, self.ops, self.budget = initial, ops, budget
        events = []
        for o in ops:
            events.append((o.invoke, 0, o.index))
            events.append((o.complete, 1, o.index))
        events.sort(key=lambda e: (e[0], e[1]))
        n = len(events)
        # node 0 is the head; event k is node k + 1
        self.op_of = [None] + [e[2] for e in events]
        self.is_call = [False] + [e[1] == 0 for e in events]
        self.next = list(range(1, n + 2))
        self.next[n] = None
        self.prev = [None] + list(range(n))
        self.ret = [0] * len(ops)
        for k, e in enumerate(events):
            if e[1] == 1:
                self.ret[e[2]] = k + 1

    def lift(self, node):
        r = self.ret[self.op_of[node]]
        for x in (node, r):
            self.next[self.prev[x]] = self.next[x]
            if self.next[x] is not None:
                self.prev[self.next[x]] = self.prev[x]

    def unlift(self, node):
        r = self.ret[self.op_of[node]]
        for x in (r, node):
            self.next[self.prev[x]] = x
            if self.next[x] is not None:
                self.prev[self.next[x]] = x

    def steps(self, o, s):
        """The stocks after `o` from stock `s`: none, one, or (unknown) two."""
        if o.outcome == "unknown":
            return [s, s - o.qty] if s >= o.qty else [s]
        if o.outcome == "sold_out":
            return [s] if s < o.qty and (o.remaining is None or o.remaining == s) else []
        if s < o.qty:
            return []
        after = s - o.qty
        return [after] if o.remaining is None or o.remaining == after else []

    def forced(self, node, s):
        """A call whose op changes nothing and fits stock `s` now: placing it at
        once loses nothing."""
        o = self.ops[self.op_of[node]]
        return o.outcome != "unknown" and o.qty * (o.outcome == "ok") == 0 and \
            bool(self.steps(o, s))

    def run(self):
        self.s, self.placed, self.seen, self.frames = self.initial, 0, set(), []
        best, blocked = -1, None
        node = self.first_forced(self.next[0]) or self.next[0]
        while self.next[0] is not None:
            if len(self.seen) > self.budget:
                return result(len(self.ops), None, None, len(self.seen), "search",
                              f"gave up after {len(self.seen)} states ({len(self.ops)} "
                              "ops): too many orders left to rule out")
            if self.is_call[node]:
                o = self.ops[self.op_of[node]]
                moved = self.place(node, self.steps(o, self.s))
                node = moved or self.next[node]
                continue
            # the return of an op not placed yet: no order from here works
            if len(self.frames) > best:
                best, blocked = len(self.frames), (self.op_of[node], self.s)
            node = self.backtrack()
            if node is None:
                return result(len(self.ops), False, self.stuck(best, blocked),
                              len(self.seen), "search")
        return result(len(self.ops), True, None, len(self.seen), "search")

    def place(self, node, alts):
        """Place the op of call `node` with the first untried stock of `alts`; the
        node to look at next, or None when none is left."""
        o = self.ops[self.op_of[node]]
        while alts:
            after = alts.pop(0)
            key = (self.placed | (1 << o.index), after)
            if key in self.seen:
                continue
            self.seen.add(key)
            self.frames.append((node, self.s, self.placed, alts, self.forced(node, self.s)))
            self.s, self.placed = after, key[0]
            self.lift(node)
            first = self.next[0]
            return self.first_forced(first) or first
        return None

    def backtrack(self):
        """Undo placements back to the last one with an untried alternative or a
        later candidate; the node to try next, or None when every order failed."""
        while self.frames:
            node, self.s, self.placed, alts, forced = self.frames.pop()
            self.unlift(node)
            if forced:
                continue  # placing it was no choice: undo the choice before it
            return self.place(node, alts) or self.next[node]
        return None

    def first_forced(self, node):
        """The first pending call that changes nothing and fits now, if any (up to
        the first return: later calls are not pending yet)."""
        x = node
        while x is not None and self.is_call[x]:
            if self.forced(x, self.s):
                return x
            x = self.next[x]
        return None

    def stuck(self, depth, blocked):
        index, s = blocked
        o = self.ops[index]
        return (f"no order of the {len(self.ops)} requests explains every answer: at best "
                f"{depth} line up, then {o.words()} cannot, with {s} in stock")


def check_file(path, initial, budget=BUDGET):
    """check() over a history file of one JSON op per line."""
    with open(path, encoding="utf-8") as f:
        return check(initial, [json.loads(line) for line in f if line.strip()], budget)
