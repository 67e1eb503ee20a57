"""Answers counted by outcome, the same way for every driver:

    sold             200
    sold_out         409 "sold_out"
    busy             409 "busy"
    outcome_unknown  503 "outcome_unknown": the sale may or may not have happened
    errors           anything else (overloaded, timeout, shutting_down,
                     backend_unavailable, a failed connection ...), kept by word

The gate's ledger rule: the store's `sold` is the 200s' units plus at most the
outcome_unknown answers' units."""

COUNTED = ("sold", "sold_out", "busy", "outcome_unknown", "errors")


def classify(status, word):
    """The bucket of one answer (status as text or int, word the body's "error")."""
    status = str(status).strip()
    if status == "200":
        return "sold"
    if status == "409" and word in ("sold_out", "busy"):
        return word
    if status == "503" and word == "outcome_unknown":
        return "outcome_unknown"
    return "errors"


class Outcomes:
    def __init__(self):
        self.counts = dict.fromkeys(COUNTED, 0)
        self.kinds = {}     # error detail: "503 overloaded" -> count

    def add(self, status, word, n=1, what=None):
        """Count n answers; `what` names an error that has no status (e.g. a
        connection failure)."""
        bucket = classify(status, word)
        self.counts[bucket] += n
        if bucket == "errors":
            key = what or " ".join(x for x in (str(status).strip(), word) if x and x != "none")
            self.kinds[key or "no answer"] = self.kinds.get(key or "no answer", 0) + n

    def merge(self, other):
        """Adds another Outcomes' counts to these."""
        for bucket, n in other.counts.items():
            self.counts[bucket] += n
        for kind, n in other.kinds.items():
            self.kinds[kind] = self.kinds.get(kind, 0) + n

    def __getitem__(self, bucket):
        return self.counts[bucket]

    @property
    def requests(self):
        return sum(self.counts.values())

    @property
    def answered(self):
        """Answers the contract allows for a sale attempt."""
        return self.counts["sold"] + self.counts["sold_out"] + self.counts["busy"]

    def detail(self):
        """The errors by kind, most frequent first: "503 overloaded x3; 502 x1"."""
        return counts_text(self.kinds)

    def fields(self):
        return dict(self.counts, error_detail=self.detail())


def ledger_problem(sold_200, unknown, qty, store_sold):
    """Why the store's ledger disagrees with the answers, or None: it must hold the
    200s' units and at most the outcome_unknown answers' units on top."""
    if store_sold is None:
        return "the store's ledger could not be read"
    low, high = sold_200 * qty, (sold_200 + unknown) * qty
    if low <= store_sold <= high:
        return None
    extra = f" + up to {unknown} outcome_unknown" if unknown else ""
    return f"store sold {store_sold} != {sold_200} answers 200{extra} x qty {qty}"


def counts_text(counts):
    """{kind: n} as "kind xN; ...", most frequent first."""
    return "; ".join(f"{k} x{v}" for k, v in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
