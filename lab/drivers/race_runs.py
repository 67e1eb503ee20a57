"""The comparison's race timelines: for each unsafe strategy one small race run by
stockd itself (POST /lab/race: it resets a lab product, fires the buyers through its
own port with trace=1 and answers with every request's times, answer and trace), and
one of its store's safe counterpart for contrast. Each race's history is checked
against the race's own ledger, like a comparison row, by the judge the run hands in
(lab.judges.gate.race_check); report.html draws each race with web/race.js.

A stockd without the race driver answers 404 or 405: the report says so and the run goes
on (the timelines are a picture, never a verdict of the run)."""

BUYERS, UNITS, HOLD_MS, TTL_MS, PAUSE_MS = 12, 6, 50, 20, 50
PATH = "/lab/race"


def counterpart(facts, s, instances):
    """The safe strategy that a race of `s` is drawn beside: the first, in the
    server's order, that claims safety here on the same store with no lease and
    nothing but that store to need (with one instance, nolock's is its own body
    under a mutex)."""
    for c in facts.strategies:
        if (c.store == s.store and c.safe_for(instances) and not c.lease
                and set(c.needs) <= {s.store}):
            return c
    return None


def races_for(facts, selected, instances):
    """[(strategy name, request parameters)]: every selected strategy that does not
    claim safety here, with the parameters its exposed_by names, then its store's safe
    counterpart (once) with the same hold."""
    values = {"hold_ms": HOLD_MS, "ttl_ms": TTL_MS, "pause_ms": PAUSE_MS}
    out, partners = [], []
    for s in selected:
        if s.safe_for(instances):
            continue
        params = {"hold_ms": HOLD_MS, "ttl_ms": 0, "pause_ms": 0}
        params.update({p: values[p] for p in s.exposed_by})
        out.append((s.name, params))
        partner = counterpart(facts, s, instances)
        if partner and partner.name not in partners:
            partners.append(partner.name)
    return out + [(p, {"hold_ms": HOLD_MS, "ttl_ms": 0, "pause_ms": 0}) for p in partners]


def run(api, facts, selected, instances, say, judge):
    """{"available": bool, "note": words, "races": [{"strategy", "params", "race" (the
    driver's JSON), "check"}]}; judge(race, units) makes each race's check."""
    races = []
    for name, params in races_for(facts, selected, instances):
        body = dict(strategy=name, buyers=BUYERS, units=UNITS, qty=1, **params)
        try:
            r = api.post_json(PATH, body, timeout=60)
        except OSError as e:
            return {"available": False, "note": f"POST {PATH} failed: {e}", "races": races}
        if r.status in (404, 405):  # no such route, or only the page's GET under /lab/
            note = f"this stockd lacks the race driver (POST {PATH} answered {r.status})"
            say(f"no race timelines: {note}")
            return {"available": False, "races": races, "note": note}
        if r.status != 200 or not isinstance(r.body, dict):
            say(f"race {name}: POST {PATH} answered {r.status}: {str(r.body)[:160]}")
            continue
        check = judge(r.body, UNITS)
        say(f"race {name} ({BUYERS} buyers, {UNITS} units): ledger: {check['ledger']}; "
            f"history: {check['history']}")
        races.append({"strategy": name, "params": body, "race": r.body, "check": check})
    return {"available": True, "races": races,
            "note": f"{len(races)} races of {BUYERS} buyers for {UNITS} units"}
