"""Hostile clients against real stockd instances (`make probe`): what a web page,
another local user or a slow client can do, tried the way they would, at a scale the
integration tests leave out (docs/security.md says what each probe stands for).

It brings the private stack up (scripts/stack.sh up, left running) and two stockd
instances behind the stack's nginx on host:port (scripts/stack.sh instances-up 2,
stopped at the end), then probes the first instance directly and the pair through
nginx: a DNS-rebinding Host, a same-site page, an encoded NUL, two body lengths, a
flood of held sales whose clients went at once, nine addresses trickling a thousand
request heads each, half-sent requests closed by their clients (a burst from one
address many times its limit, amid heads trickling from nine others and held sales
whose clients went: none may stay half-closed a second later), a trickled head
against --idle-timeout-s, keep-alive requests through nginx across stockd's idle
timeout, and broken requests against the log;
and, as another local user would, the stack's backends: MariaDB's root over TCP
writing a file, every Redis server and Sentinel without the password.
Prints a table of probe, expected and answered; exit status 1 when any probe answers
otherwise, 2 when the run cannot be made. About 45 s.

--quick (the gate's) starts one stockd at host:port instead and runs only the
half-sent requests, smaller."""

import collections
import concurrent.futures
import os
import select
import socket
import stat
import subprocess
import sys
import threading
import time

from ..base.common import elapsed_line
from ..client import sources
from ..client.api import Api, metric
from ..stack.service import run_dir, stack_env, stack_script
from ..reports import tables
from ..scaffold.runner import Runner

PRODUCT = 7701
FLOOD = 480  # held sales, 1000 ms each, whose clients close at once
ADDRESSES = 9  # 127.0.0.2 .. 127.0.0.10
TRICKLERS = 1000  # per address
BROKEN = 2000
IDLE_TIMEOUT_S = 15  # stockd's default --idle-timeout-s
FREED_WITHIN_S = 1.0  # no connection its client closed may outlive it by more
HALF_HEAD = b"GET /health HTTP/1.1\r\nHo"
# Half-sent requests closed by their clients, from 127.0.0.1: more than the default
# --max-per-ip (512) would hold; amid `trickle` heads from each of ADDRESSES others and
# `holds` held sales whose clients went; then `timed` more, each timed to its close.
Hangups = collections.namedtuple("Hangups", "burst trickle holds timed")
HANGUPS = Hangups(burst=2000, trickle=600, holds=200, timed=500)
HANGUPS_QUICK = Hangups(burst=600, trickle=100, holds=40, timed=200)
CLOSE_WAIT = 0x08  # a TCP state in /proc/net/tcp
NGINX_GAPS_S = (9.5, 10.5, 14.5, 14.9, 15.0, 15.1, 15.5)
# The stack's Redis servers and Sentinels, by the names scripts/stack.sh gives them.
REDIS_BACKENDS = ("redis", sources.backend_name("redlock.c"), "ha", "sentinel")


def connect(port, source=None, timeout=5.0):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(timeout)
    if source:
        s.bind((source, 0))
    s.connect(("127.0.0.1", port))
    return s


def exchange(port, data, timeout=5.0):
    """Sends `data` on a new connection and reads until the server closes or
    `timeout`: (status, the answer's text); status 0 when none came."""
    s = connect(port, timeout=timeout)
    got = b""
    try:
        s.sendall(data)
        while True:
            b = s.recv(65536)
            if not b:
                break
            got += b
    except OSError:
        pass
    finally:
        s.close()
    text = got.decode("latin-1")
    try:
        return int(text.split(" ", 2)[1]), text
    except (IndexError, ValueError):
        return 0, text


def request(method, path, *headers, body=b""):
    """The bytes of a request; Host: 127.0.0.1 unless `headers` name one."""
    host = [] if any(h.lower().startswith("host:") for h in headers) else ["Host: 127.0.0.1"]
    lines = [f"{method} {path} HTTP/1.1"] + host + list(headers) + \
            [f"Content-Length: {len(body)}", "Connection: close", "", ""]
    return "\r\n".join(lines).encode() + body


def exchange_redis(port, command):
    """`command` on a new connection to a Redis server or Sentinel, without AUTH:
    the first line of its reply (b"" when none came)."""
    try:
        with connect(port) as s:
            s.sendall(command)
            got = b""
            while b"\r\n" not in got:
                chunk = s.recv(4096)
                if not chunk:
                    break
                got += chunk
            return got
    except OSError:
        return b""


def redis_ports():
    """(kind, port) of every Redis server and Sentinel of the stack that runs, kind
    "sentinel" or another (scripts/stack.sh status: "NAME STATE port PORT pid PID")."""
    out = subprocess.run([stack_script(), "status"], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True).stdout
    return [(w[0].split("-")[0], int(w[3])) for w in (ln.split() for ln in out.splitlines())
            if len(w) >= 4 and w[1] == "running" and w[3].isdigit() and
            w[0].split("-")[0] in REDIS_BACKENDS]


def tcp_sockets():
    """(local port, remote address, state) of every TCP socket on this machine, as the
    kernel's tables say (/proc/net/tcp, and tcp6 when there is one); the remote
    address of an IPv6 socket is None."""
    for table, v4 in (("/proc/net/tcp", True), ("/proc/net/tcp6", False)):
        try:
            with open(table) as f:
                lines = f.read().splitlines()[1:]
        except FileNotFoundError:
            if v4:
                raise
            continue
        for line in lines:
            local, remote, state = line.split()[1:4]
            address = socket.inet_ntoa(bytes.fromhex(remote.split(":")[0])[::-1]) if v4 else None
            yield int(local.split(":")[1], 16), address, int(state, 16)


def close_waits(port):
    """stockd's sockets on `port` in CLOSE_WAIT: their client closed, stockd has not."""
    return sum(1 for local, _, state in tcp_sockets() if local == port and state == CLOSE_WAIT)


def until_no_close_wait(port, limit_s):
    """Waits until close_waits(port) is 0, for up to limit_s: (how many were left,
    seconds waited)."""
    t0 = time.time()
    while True:
        left, took = close_waits(port), time.time() - t0
        if left == 0 or took >= limit_s:
            return left, took
        time.sleep(0.002)


def send_and_close(port, data, source=None):
    """Sends `data` on a new connection and closes at once (a client that gave up);
    whether it was sent."""
    try:
        with connect(port, source, timeout=2) as s:
            s.sendall(data)
        return True
    except OSError:
        return False


def freeing_times(port, count, sources):
    """`count` half heads from `sources` in turn, each client shutting its sending
    side (as close() does) but keeping the socket to see stockd close its own: the
    seconds each took, sorted, for those stockd closed within 5 s."""
    started, poller = {}, select.poll()
    for i in range(count):
        try:
            s = connect(port, sources[i % len(sources)], timeout=2)
            s.sendall(HALF_HEAD)
            s.shutdown(socket.SHUT_WR)
        except OSError:
            continue
        started[s.fileno()] = (s, time.time())
        poller.register(s, select.POLLIN)
    took, deadline = [], time.time() + 5
    while started and time.time() < deadline:
        for fd, _ in poller.poll(100):
            s, t0 = started[fd]
            try:
                ended = s.recv(4096, socket.MSG_DONTWAIT) == b""
            except BlockingIOError:
                ended = False
            except OSError:
                ended = True
            if ended:
                took.append(time.time() - t0)
                poller.unregister(fd)
                s.close()
                del started[fd]
    for s, _ in started.values():
        s.close()
    return sorted(took)


def timed_health(port, source=None):
    """GET /health from `source`: (status, milliseconds)."""
    t0 = time.time()
    try:
        s = connect(port, source, timeout=3)
        s.sendall(request("GET", "/health"))
        status = int(s.recv(64).split(b" ", 2)[1])
        s.close()
    except (OSError, IndexError, ValueError):
        status = 0
    return status, (time.time() - t0) * 1000


def word_of(text):
    for w in ("forbidden", "bad_request", "overloaded", "payload_too_large"):
        if f'"{w}"' in text:
            return w
    return ""


class Probe:
    def __init__(self, api, direct, say, hangup_sizes=HANGUPS):
        self.api, self.direct, self.say = api, direct, say
        self.port = direct.port
        self.hangup_sizes = hangup_sizes
        self.rows = []

    def row(self, probe, expected, answered, ok):
        self.rows.append({"probe": probe, "expected": expected, "answered": answered,
                          "verdict": "pass" if ok else "FAIL"})

    def answer(self, probe, expected_status, data):
        status, text = exchange(self.port, data)
        got = f"{status} {word_of(text)}".strip()
        self.row(probe, f"{expected_status}", got, status == int(expected_status.split()[0]))

    def sold(self):
        a = self.direct.account(PRODUCT, "mysql")
        return a["sold"] if a else None

    def guards(self):
        self.direct.must_reset(PRODUCT, 1000000)
        before = self.sold()
        self.answer("reset from a rebound name (Host rebind.example)", "403 forbidden",
                    request("POST", f"/stock/reset?product={PRODUCT}&count=5",
                            "Host: rebind.example:8080", "Origin: http://rebind.example:8080"))
        self.answer("a sale from a same-site page (another port)", "403 forbidden",
                    request("GET", f"/stock/deduct/sql?product={PRODUCT}",
                            "Sec-Fetch-Site: same-site"))
        self.answer("an encoded NUL: ?qty%00x=5", "400 bad_request",
                    request("POST", f"/stock/deduct/sql?product={PRODUCT}&qty%00x=5"))
        self.answer("two Host headers", "400 bad_request",
                    request("GET", f"/stock/{PRODUCT}", "Host: 127.0.0.1",
                            "Host: rebind.example"))
        self.answer("two Content-Lengths", "400 bad_request",
                    request("POST", f"/stock/deduct/sql?product={PRODUCT}",
                            "Content-Length: 9", body=b'{"qty":5}'))
        self.answer("Content-Length and chunked", "400 bad_request",
                    request("POST", f"/stock/deduct/sql?product={PRODUCT}",
                            "Transfer-Encoding: chunked", body=b'9\r\n{"qty":5}\r\n0\r\n\r\n'))
        after = self.sold()
        self.row("  ... and what they sold", "0", f"{after - before}", after == before)

    def dropped(self, reason):
        _, samples = self.direct.metrics()
        return metric(samples, "stockd_http_dropped_total", reason=reason) or 0

    def flood(self):
        """FLOOD held sales whose clients close at once, then a request that needs a
        worker: it must not wait behind them."""
        gone_before = self.dropped("client_gone")
        data = request("POST", f"/stock/deduct/nolock?product={PRODUCT}&hold_ms=1000")
        for _ in range(FLOOD):
            s = connect(self.port)
            s.sendall(data)
            s.close()
        time.sleep(0.2)
        t0 = time.time()
        self.direct.account(PRODUCT, "mysql")
        took = (time.time() - t0) * 1000
        time.sleep(1.5)
        gone = self.dropped("client_gone") - gone_before
        self.row(f"GET /stock/{PRODUCT} after {FLOOD} held sales whose clients went",
                 "< 500 ms", f"{took:.0f} ms", took < 500)
        self.row("  ... the abandoned sales dropped before they ran", f">= {FLOOD // 2}",
                 f"{gone:.0f}", gone >= FLOOD // 2)

    def slowloris(self):
        """ADDRESSES x TRICKLERS half-sent heads, then /health from 127.0.0.1."""
        socks = []
        head = b"GET /strategies HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        for a in range(ADDRESSES):
            for _ in range(TRICKLERS):
                try:
                    s = connect(self.port, f"127.0.0.{a + 2}", timeout=2)
                    s.sendall(head)
                    socks.append(s)
                except OSError:
                    pass
        time.sleep(1)
        t0 = time.time()
        try:
            status, _ = exchange(self.port, request("GET", "/health"), timeout=3)
        except OSError:
            status = 0
        took = (time.time() - t0) * 1000
        for s in socks:
            s.close()
        self.row(f"/health while {ADDRESSES} addresses x {TRICKLERS} heads trickle",
                 "answered < 1000 ms", f"{status} after {took:.0f} ms",
                 status in (200, 503) and took < 1000)

    def hangups(self):
        """Half-sent requests closed by their clients, amid trickling heads and held sales"""
        n = self.hangup_sizes
        tricklers = [f"127.0.0.{a + 2}" for a in range(ADDRESSES)]
        self.direct.must_reset(PRODUCT, 1000000)
        held = request("POST", f"/stock/deduct/nolock?product={PRODUCT}&hold_ms=1000")
        holds = sum(send_and_close(self.port, held) for _ in range(n.holds))
        socks = []
        for source in tricklers:
            for _ in range(n.trickle):
                try:
                    s = connect(self.port, source, timeout=2)
                    s.sendall(b"GET /strategies HTTP/1.1\r\nHost: 127.0.0.1\r\n")
                    socks.append(s)
                except OSError:
                    pass
        sent = sum(send_and_close(self.port, HALF_HEAD) for _ in range(n.burst))
        left, took = until_no_close_wait(self.port, FREED_WITHIN_S)
        answers = [timed_health(self.port, source) for source in ("127.0.0.1", "127.0.0.11")]
        kept = sum(1 for local, address, state in tcp_sockets()
                   if local == self.port and address in tricklers and state != CLOSE_WAIT)
        for s in socks:
            s.close()
        times = freeing_times(self.port, n.timed, [f"127.0.1.{i + 1}" for i in range(20)])
        self.row(f"{sent} half-sent requests from 127.0.0.1, closed, amid {holds} held sales "
                 "whose clients went", f"0 in CLOSE_WAIT within {FREED_WITHIN_S * 1000:.0f} ms",
                 f"{left} after {took * 1000:.0f} ms", left == 0)
        self.row(f"  ... /health from .1 and .11, stockd holding {kept} heads from {ADDRESSES} "
                 "addresses", "answered < 1000 ms",
                 ", ".join(f"{st} after {ms:.0f} ms" for st, ms in answers),
                 all(st in (200, 503) and ms < 1000 for st, ms in answers))
        self.row(f"  ... {n.timed} more, each timed from its client's close to stockd's",
                 f"{n.timed} closed, max < {FREED_WITHIN_S * 1000:.0f} ms",
                 f"{len(times)} closed, median {times[len(times) // 2] * 1000:.0f} ms, "
                 f"max {times[-1] * 1000:.0f} ms" if times else "none closed",
                 len(times) == n.timed and times[-1] < FREED_WITHIN_S)

    def trickle(self, out):
        """One header line every 2 s: closed at --idle-timeout-s, not kept."""
        s = connect(self.port)
        s.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        t0, closed = time.time(), None
        s.settimeout(2)
        while time.time() - t0 < IDLE_TIMEOUT_S + 5:
            try:
                if s.recv(4096) == b"":
                    closed = time.time() - t0
                    break
            except socket.timeout:
                pass
            except OSError:
                closed = time.time() - t0
                break
            try:
                s.sendall(b"X-Trickle: 1\r\n")
            except OSError:
                closed = time.time() - t0
                break
        s.close()
        out.append(closed)

    def through_nginx(self, gap, out):
        """A keep-alive client of nginx that comes back after `gap` seconds."""
        codes = []
        for i in range(2):
            if i:
                time.sleep(gap)
            try:
                codes.append(self.api.call("GET", f"/stock/{PRODUCT}").status)
            except OSError:
                codes.append(0)
        out.extend(codes)

    def idle_boundary(self):
        """Clients of nginx coming back around stockd's idle timeout (nginx must have
        let the upstream connection go first), alongside a trickled head."""
        closed, codes = [], []
        threads = [threading.Thread(target=self.trickle, args=(closed,))]
        threads += [threading.Thread(target=self.through_nginx, args=(g, codes))
                    for g in NGINX_GAPS_S]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        c = closed[0] if closed else None
        # The loops look at the deadlines at least once a second.
        self.row("a head trickled one line every 2 s", f"closed by {IDLE_TIMEOUT_S + 2} s",
                 "kept" if c is None else f"closed after {c:.1f} s",
                 c is not None and c <= IDLE_TIMEOUT_S + 2)
        bad = [x for x in codes if x != 200]
        self.row(f"nginx, clients back after {NGINX_GAPS_S[0]:g}..{NGINX_GAPS_S[-1]:g} s idle",
                 "no 502", f"{len(codes)} requests, {len(bad)} not 200 {bad or ''}".strip(),
                 not bad)

    def log_lines(self):
        path = os.path.join(run_dir(), "stack", f"stockd-{self.port}.log")
        try:
            with open(path, "rb") as f:
                return f.read().count(b"\n")
        except OSError:
            return None

    def broken(self):
        before = self.log_lines()
        errors_before = self.dropped("protocol_error")
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda _: exchange(self.port, b"\x16\x03\x01\x02\x05 not HTTP\r\n\r\n"),
                          range(BROKEN)))
        grown = (self.log_lines() or 0) - (before or 0)
        counted = self.dropped("protocol_error") - errors_before
        self.row(f"{BROKEN} broken requests: log lines", "<= 2", f"{grown}",
                 before is not None and grown <= 2)
        self.row("  ... counted in /metrics", f">= {BROKEN}", f"{counted:.0f}", counted >= BROKEN)

    def backends(self):
        """The stack's backends, tried as another local user would"""
        env = stack_env()
        proof = f"/tmp/stockd-probe-{os.getpid()}"
        r = subprocess.run(["mariadb", "--no-defaults", "--protocol=TCP", "-h127.0.0.1",
                            f"-P{env['STOCKD_MYSQL_PORT']}", "-uroot", "-e",
                            f"SELECT 'x' INTO OUTFILE '{proof}'"], stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=30)
        wrote = os.path.exists(proof)
        self.row("MariaDB root over TCP: SELECT ... INTO OUTFILE /tmp", "refused, no file",
                 (r.stdout.strip().splitlines() or [f"exit {r.returncode}"])[0][:60] +
                 (", file written" if wrote else ""), r.returncode != 0 and not wrote)
        ports = redis_ports()
        refused = [p for name, p in ports
                   if all(exchange_redis(p, c).startswith(b"-NOAUTH") for c in
                          ((b"SENTINEL MASTERS\r\n", b"PING\r\n") if name == "sentinel"
                           else (b"DEBUG SLEEP 0\r\n", b"FLUSHALL\r\n")))]
        self.row(f"DEBUG SLEEP, FLUSHALL (Sentinels: SENTINEL MASTERS) without the password, "
                 f"{len(ports)} servers", "NOAUTH from each", f"NOAUTH from {len(refused)}",
                 ports and len(refused) == len(ports))
        modes = {n: stat.S_IMODE(os.stat(env[n]).st_mode)
                 for n in ("STOCKD_MYSQL_PASSWORD_FILE", "STOCKD_REDIS_PASSWORD_FILE")}
        self.row("the password files", "0600", " ".join(f"{m:04o}" for m in modes.values()),
                 set(modes.values()) == {0o600})

    def run(self, quick=False):
        steps = (self.hangups,) if quick else (
            self.guards, self.backends, self.flood, self.slowloris, self.hangups,
            self.idle_boundary, self.broken)
        for step in steps:
            self.say(step.__doc__.split("\n")[0] if step.__doc__ else step.__name__)
            step()
        return self.rows


def options(o):
    o.flag("--quick", "one stockd at host:port, only the half-sent requests, smaller")


def work(run):
    if run.args.quick:
        return Probe(run.api, run.api, run.say, HANGUPS_QUICK).run(quick=True)
    first = run.service.scrape_targets()[0]
    direct = Api.with_admin_token("127.0.0.1", int(first.rsplit(":", 1)[1]))
    return Probe(run.api, direct, run.say).run()


def report(run, rows):
    print(tables.text_table(rows, [("probe", "probe", "<"), ("expected", "expected", "<"),
                                   ("answered", "answered", "<"), ("", "verdict", "<")]))
    failed = [r for r in rows if r["verdict"] != "pass"]
    print(f"{len(rows) - len(failed)}/{len(rows)} probes answer as expected")
    print(elapsed_line(run.elapsed()))
    return 1 if failed else 0


RUNNER = Runner("probe", __doc__, options=options, work=work, report=report,
                host="where nginx listens (with --quick: the one stockd)",
                port="nginx's port, in front of the two instances (with --quick: the one "
                "stockd's); nothing may answer there",
                instances=lambda args: 1 if args.quick else 2,
                own_port=lambda args: "the probe starts its own " + (
                    "stockd there" if args.quick else "instances behind nginx there"))
main, parse_args = RUNNER.main, RUNNER.parse

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
