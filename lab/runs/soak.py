"""The soak (`make soak`): does stockd leak under a long, steady load?

A mix of strategies (default: every one GET /strategies lists, safe and unsafe, both
stores), each on its own product with a stock that never runs out, driven at a fixed
total rate (--rate requests per second, shared evenly, --conns keep-alive connections
per strategy: lab.drivers.load's paced mode) for --seconds. Every --interval seconds it samples
stockd's resident memory and open file descriptors (from /proc/<pid> when it started
stockd itself, else from /metrics: process_resident_memory_bytes, process_open_fds).

Verdict: the last sample of each must be within --tolerance percent of the first
sample after the warm-up (--warmup seconds), and no answer may be a 5xx (none is
planned: no fault is injected) or missing. Exit status 1 otherwise, 2 when the soak
cannot be made. Writes results/soak-<timestamp>/ (soak.json, soak.csv: the samples)
and points results/soak-latest at it; prints the samples and the verdict."""

import os
import sys
import time

from ..base.common import ENDLESS_STOCK, SETTLE_S, comma_list, elapsed_line, now_iso, write_text
from ..client import facts as facts_mod
from ..client.api import metric
from ..client.sales import deduct_path
from ..drivers.load import NO_ANSWER, Load, outcomes_of
from ..reports import tables
from ..scaffold.runner import Runner

CLIENT_TIMEOUT_S = 60

SAMPLE_FIELDS = ["t_s", "rss_kib", "open_fds", "requests", "rate_rps", "failed"]
SAMPLE_TABLE = [("t s", "t_s", ">"), ("RSS MiB", lambda s: s["rss_kib"] / 1024, ">"),
                ("open fds", "open_fds", ">"), ("requests", "requests", ">"),
                ("req/s", "rate_rps", ">"), ("5xx or none", "failed", ">")]
STRATEGY_TABLE = [("strategy", "strategy", "<"), ("store", "store", "<"),
                  ("safe", "safe", "<"), ("requests", "requests", ">"), ("200", "sold", ">"),
                  ("409", lambda r: r["sold_out"] + r["busy"], ">"),
                  ("5xx or none", "failed", ">"), ("detail", "error_detail", "<")]


def options(o):
    o.add("--seconds", ["SOAK_S"], 600, int, "how long the load lasts", 1)
    # Each of stockd's workers opens its link to a backend the first time it runs a
    # strategy that needs that backend: with every strategy at the default rate, the
    # last of those first uses comes minutes in, and each is a descriptor that is not
    # a leak. The reference waits for them.
    o.add("--warmup", ["SOAK_WARMUP_S"], 180, int, "seconds before the reference sample", 0)
    o.add("--interval", ["SOAK_INTERVAL_S"], 10, int, "seconds between samples", 1)
    o.add("--rate", ["SOAK_RATE"], 200, int, "requests per second in all", 1)
    o.add("--conns", ["SOAK_CONNS"], 2, int, "keep-alive connections per strategy", 1)
    o.add("--tolerance", ["SOAK_TOLERANCE_PCT"], 5.0, float,
          "how far (percent) the last sample may be from the reference", 0)
    o.add("--strategies", ["STRATEGIES"], "", comma_list,
          "comma list; empty: all from GET /strategies")
    o.add("--product", ["SOAK_PRODUCT"], 7101, int, "first product id (one per strategy)", 1)


def after_parse(ns, error):
    if ns.seconds < ns.warmup + ns.interval:
        error("--seconds must leave at least one --interval after the --warmup")


class Gauges:
    """stockd's resident memory (KiB) and open file descriptors: from /proc for the
    process the soak started, else from /metrics."""

    def __init__(self, api, service):
        self.api, self.service = api, service

    def source(self):
        return "/proc" if self.service.proc is not None else "/metrics"

    def read(self):
        proc = self.service.proc
        if proc is not None:
            try:
                return self.service.own_memory_kib("VmRSS"), len(os.listdir(f"/proc/{proc.pid}/fd"))
            except OSError:
                return None, None
        samples = self.api.metrics()[1]
        rss = metric(samples, "process_resident_memory_bytes")
        fds = metric(samples, "process_open_fds")
        return (None if rss is None else int(rss // 1024)), (None if fds is None else int(fds))


def failed(answers):
    return sum(1 for a in answers if a.status == NO_ANSWER or a.status >= 500)


def change_pct(ref, last):
    return None if not ref or last is None else round((last - ref) * 100.0 / ref, 2)


def verdict(samples, warmup, tolerance, failures):
    """(figures, problems): the reference (first sample at or after the warm-up) and
    last sample of RSS and fds, their change in percent, and what is wrong."""
    ref = next((s for s in samples if s["t_s"] >= warmup), None)
    last = samples[-1] if samples else None
    problems = []
    figures = {"reference_t_s": ref and ref["t_s"], "last_t_s": last and last["t_s"]}
    for field in ("rss_kib", "open_fds"):
        a, b = (ref or {}).get(field), (last or {}).get(field)
        pct = change_pct(a, b)
        figures.update({f"{field}_reference": a, f"{field}_last": b, f"{field}_change_pct": pct})
        if pct is None:
            problems.append(f"{field}: no sample after the warm-up to compare")
        elif abs(pct) > tolerance:
            problems.append(f"{field}: {a} after the warm-up, {b} at the end "
                            f"({pct:+.2f}% > {tolerance:g}%)")
    if failures:
        problems.append(f"{failures} answers were a 5xx or missing (none planned)")
    return figures, problems


def sample_loop(args, gauges, load, keys, say):
    """Samples at t = 0, interval, ... seconds (the last one at --seconds)."""
    samples, t0 = [], time.monotonic()
    ticks = list(range(0, args.seconds + 1, args.interval))
    if ticks[-1] != args.seconds:
        ticks.append(args.seconds)
    last = None  # (requests, time) of the previous sample
    for tick in ticks:
        time.sleep(max(0.0, t0 + tick - time.monotonic()))
        now = time.monotonic()
        answers = [a for k in keys for a in load.answers(k)]
        rss, fds = gauges.read()
        rate = round((len(answers) - last[0]) / (now - last[1]), 1) if last else None
        s = {"t_s": tick, "rss_kib": rss, "open_fds": fds, "requests": len(answers),
             "rate_rps": rate, "failed": failed(answers)}
        last = (len(answers), now)
        samples.append(s)
        say(f"t={tick}s RSS {rss} KiB, {fds} fds, {len(answers)} requests, "
            f"{rate} req/s, {s['failed']} 5xx or missing")
    return samples


def strategy_rows(selected, load):
    rows = []
    for s in selected:
        answers = load.answers(s.name)
        o = outcomes_of(answers)
        r = {"strategy": s.name, "store": s.store, "safe": s.safe_single,
             "failed": failed(answers)}
        r.update(o.fields())
        r["requests"] = len(answers)
        rows.append(r)
    return rows


def soak(args, api, service, say):
    """The load and its samples: (selected, samples, per-strategy rows, gauges' source)."""
    facts = facts_mod.parse(api.strategies().body)
    selected = facts.select(args.strategies)
    facts_mod.check_needs(api, facts, selected)
    load = Load(args.host, args.port, CLIENT_TIMEOUT_S)
    for i, s in enumerate(selected):
        api.must_reset(args.product + i, ENDLESS_STOCK)
        load.add(s.name, deduct_path(s.name, args.product + i),
                 args.conns, rate=args.rate / len(selected))
    gauges = Gauges(api, service)
    say(f"{args.rate} req/s over {len(selected)} strategies for {args.seconds} s, samples "
        f"every {args.interval} s from {gauges.source()}, reference after {args.warmup} s")
    load.start()
    try:
        samples = sample_loop(args, gauges, load, [s.name for s in selected], say)
    finally:
        load.stop()
    api.wait_idle(SETTLE_S)
    return selected, samples, strategy_rows(selected, load), gauges.source()


def report(run, done):
    samples, rows, figures, problems, out_dir = done
    print(tables.text_table(samples, SAMPLE_TABLE))
    print()
    print(tables.text_table(rows, STRATEGY_TABLE))
    print()
    for field, name in (("rss_kib", "RSS KiB"), ("open_fds", "open fds")):
        print(f"{name}: {figures[f'{field}_reference']} at {figures['reference_t_s']} s "
              f"(after the warm-up), {figures[f'{field}_last']} at {figures['last_t_s']} s: "
              f"{figures[f'{field}_change_pct']}%")
    for p in problems:
        print(f"FAIL {p}")
    print(f"soak {'FAILED' if problems else 'passed'}; results in {out_dir}")
    print(elapsed_line(run.elapsed()))
    return 1 if problems else 0


def work(run):
    args = run.args
    out_dir = run.out_dir()
    run.say(f"results in {out_dir}")
    selected, samples, rows, source = soak(args, run.api, run.service, run.say)
    failures = sum(r["failed"] for r in rows)
    figures, problems = verdict(samples, args.warmup, args.tolerance, failures)
    params = {"started": run.started, "finished": now_iso(), "host": args.host,
              "port": args.port, "seconds": args.seconds, "warmup_s": args.warmup,
              "interval_s": args.interval, "rate_rps": args.rate,
              "tolerance_pct": args.tolerance, "strategies": [s.name for s in selected],
              "gauges": source, "stockd_started_by_soak": run.service.started}
    write_text(os.path.join(out_dir, "soak.json"), tables.json_text(
        {"params": params, "samples": samples, "strategies": rows, "figures": figures,
         "problems": problems, "verdict": "fail" if problems else "pass"}))
    write_text(os.path.join(out_dir, "soak.csv"), tables.csv_text(samples, SAMPLE_FIELDS))
    return samples, rows, figures, problems, out_dir


RUNNER = Runner("soak", __doc__, options=options, after_parse=after_parse, work=work,
                report=report, host=True, port=True, results="soak-", instances=1)
main, parse_args = RUNNER.main, RUNNER.parse

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
