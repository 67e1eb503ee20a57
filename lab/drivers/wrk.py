"""The wrk driver: keep-alive HTTP load for a fixed time at a fixed number of
connections, with bench/count.lua counting every answer by status and error word, or
(counting=False, for the bench's pairs) bench/rate.lua, which leaves wrk its own
counts and its full speed; run_history: bench/history.lua, which also writes every
request's history (a thread per connection: lab.judges.history.from_wrk reads it);
run(..., script=ORDER_SCRIPT): bench/order.lua, the bench's hold-then-pay orders;
run(..., script=KEYED_SCRIPT, script_args=("key",)): bench/keyed.lua, a fresh
Idempotency-Key on each request ("none": the same requests without)."""

import json
import os
import shutil
import subprocess

from ..base.common import REPO, SetupError
from ..client.outcomes import Outcomes

SCRIPT = os.path.join(REPO, "bench", "count.lua")
RATE_SCRIPT = os.path.join(REPO, "bench", "rate.lua")
HISTORY_SCRIPT = os.path.join(REPO, "bench", "history.lua")
ORDER_SCRIPT = os.path.join(REPO, "bench", "order.lua")
KEYED_SCRIPT = os.path.join(REPO, "bench", "keyed.lua")  # the key-cost pairs' requests
MARK = "LAB-RESULT "


class Result:
    def __init__(self):
        self.outcomes = Outcomes()
        self.rps = None
        self.p50_ms = self.p95_ms = self.p99_ms = self.max_ms = None
        self.instances = {}

    @property
    def requests(self):
        return self.outcomes.requests


def binary():
    path = shutil.which("wrk")
    if not path:
        raise SetupError("wrk not found (scripts/deps.sh bench)")
    return path


def command(url, conns, seconds, timeout_s, counting=True, threads=None, script_args=(),
            script=None):
    """wrk's command line: at most 2 threads (this is a 2-core machine's load
    generator), never more threads than connections; `threads` and `script_args`:
    the history pass's; `script` (with its `script_args`): another script."""
    threads = threads or max(1, min(2, conns, os.cpu_count() or 1))
    script = script or (HISTORY_SCRIPT if script_args else SCRIPT if counting else RATE_SCRIPT)
    return [binary(), f"-t{threads}", f"-c{conns}", f"-d{seconds}s", f"--timeout={timeout_s}s",
            "-s", script, url] + (["--"] + list(script_args) if script_args else [])


def parse(output):
    """A Result from wrk's output (the script's LAB-RESULT line); None when there is
    no such line."""
    line = next((ln[len(MARK):] for ln in output.splitlines() if ln.startswith(MARK)), None)
    if line is None:
        return None
    doc = json.loads(line)
    res = Result()
    for key, n in doc["answers"].items():
        status, _, word = key.partition(" ")
        res.outcomes.add(status, word, n)
    sock = doc["socket"]
    for kind in ("connect", "read", "write", "timeout"):
        if sock.get(kind):
            res.outcomes.add("", "", sock[kind], what=f"socket {kind} (wrk)")
    if doc.get("status_errors"):
        res.outcomes.add("", "", doc["status_errors"], what="status 400 or more (wrk)")
    seconds = doc["duration_us"] / 1e6
    if seconds > 0:
        res.rps = round(doc["requests"] / seconds, 1)
    lat = doc["latency_us"]
    if doc["requests"]:
        res.p50_ms, res.p95_ms = lat["p50"] / 1000.0, lat["p95"] / 1000.0
        res.p99_ms, res.max_ms = lat["p99"] / 1000.0, lat["max"] / 1000.0
    res.instances = doc["instances"]
    return res


def run(url, conns, seconds, log_path, counting=True, history=None, script=None,
        script_args=()):
    """Drive `url` for `seconds` with `conns` keep-alive connections; the console
    goes to log_path. SetupError when wrk gives no result. history: (prefix, most
    ops): record every request with bench/history.lua, a thread per connection, at
    most that many ops in all (lab.judges.history.from_wrk reads PREFIX.*). script,
    script_args: another script than count.lua, and its arguments."""
    extra = {"script": script, "script_args": script_args}
    if history:
        prefix, most = history
        extra = {"threads": conns, "script_args": (prefix, str(max(1, most // conns)))}
    cmd = command(url, conns, seconds, max(5, 3 * seconds), counting, **extra)
    proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, universal_newlines=True,
                          timeout=seconds + 60)
    with open(log_path, "a") as f:
        f.write(" ".join(cmd) + "\n" + proc.stdout + "\n")
    res = parse(proc.stdout)
    if res is None:
        last = proc.stdout.strip().splitlines()[-1:] or ["no output"]
        raise SetupError(f"wrk gave no result for {url} (exit {proc.returncode}: {last[0][:160]})")
    return res
