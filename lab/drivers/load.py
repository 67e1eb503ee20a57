"""A load driver that keeps every answer: keep-alive connections, each on its own
thread, sending one path either back to back (closed loop) or at a fixed rate (paced),
and recording each request's start and end (monotonic seconds), status, error
word and the stock its reply said it left (the clients' history, lab.judges.history). The chaos run needs the timeline (what was answered while a backend was gone,
the first 200 after it came back, the slowest request) and the soak a steady rate,
which wrk's totals cannot give.

A request that gets no HTTP answer is kept with status 0 and what happened instead
("refused", "reset", "client timeout", ...); nothing is ever retried, so every sale
attempt is counted once."""

import http.client
import json
import socket
import threading
import time
from collections import namedtuple

from ..client.outcomes import Outcomes

Answer = namedtuple("Answer", "start end status word remaining", defaults=(None,))
NO_ANSWER = 0
REFUSED_PAUSE_S = 0.02  # after a refused connection: do not spin on a dead port


def body_of(raw):
    """A reply's JSON object ({} when it is not one)."""
    try:
        doc = json.loads(raw.decode("utf-8", "replace"))
    except ValueError:
        return {}
    return doc if isinstance(doc, dict) else {}


def error_word(status, raw):
    """The body's "error" word of a non-200 answer ("" when there is none)."""
    word = "" if status == 200 else body_of(raw).get("error")
    return word if isinstance(word, str) else ""


def remaining_of(raw):
    """The body's "remaining" (the stock a sale left, or a sold_out saw), or None."""
    left = body_of(raw).get("remaining")
    return left if isinstance(left, int) and not isinstance(left, bool) else None


def failure_word(exc):
    """What happened to a request that got no HTTP answer."""
    if isinstance(exc, socket.timeout):
        return "client timeout"
    if isinstance(exc, ConnectionRefusedError):
        return "refused"
    if isinstance(exc, (ConnectionResetError, BrokenPipeError, http.client.RemoteDisconnected)):
        return "reset"
    return type(exc).__name__


def slot_times(t0, rate, first, step):
    """The send times of a paced connection: slots first, first + step, ... of a
    schedule of `rate` requests per second from t0 (the connections share the slots)."""
    i = first
    while True:
        yield t0 + i / rate
        i += step


class Stream:
    """`conns` connections sending GET `path`; rate=None: back to back, else `rate`
    requests per second shared by the connections."""

    def __init__(self, host, port, path, conns, timeout_s, rate=None):
        self.host, self.port, self.path = host, port, path
        self.conns, self.timeout_s, self.rate = conns, timeout_s, rate
        self.answers = []          # list.append is atomic: the threads share it
        self.stopping = threading.Event()
        self.threads = []

    def start(self, t0):
        for i in range(self.conns):
            slots = slot_times(t0, self.rate, i, self.conns) if self.rate else None
            t = threading.Thread(target=self.loop, args=(slots,), daemon=True)
            t.start()
            self.threads.append(t)

    def stop(self):
        self.stopping.set()

    def join(self):
        for t in self.threads:
            t.join()

    def loop(self, slots):
        conn = None
        while not self.stopping.is_set():
            if slots is not None:
                wait = next(slots) - time.monotonic()
                if wait > 0 and self.stopping.wait(wait):
                    break
            if conn is None:
                conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout_s)
            answer = self.one(conn)
            self.answers.append(answer)
            if answer.status == NO_ANSWER:
                conn.close()
                conn = None
                if answer.word == "refused":
                    self.stopping.wait(REFUSED_PAUSE_S)
        if conn is not None:
            conn.close()

    def one(self, conn):
        start = time.monotonic()
        try:
            conn.request("GET", self.path)
            resp = conn.getresponse()
            raw = resp.read()
        except (OSError, http.client.HTTPException) as e:
            return Answer(start, time.monotonic(), NO_ANSWER, failure_word(e))
        return Answer(start, time.monotonic(), resp.status, error_word(resp.status, raw),
                      remaining_of(raw))


class Load:
    """Several streams started together and stopped together, by key."""

    def __init__(self, host, port, timeout_s):
        self.host, self.port, self.timeout_s = host, port, timeout_s
        self.streams = {}

    def add(self, key, path, conns, rate=None):
        self.streams.setdefault(key, []).append(
            Stream(self.host, self.port, path, conns, self.timeout_s, rate))

    def start(self):
        t0 = time.monotonic()
        for streams in self.streams.values():
            for s in streams:
                s.start(t0)
        return t0

    def stop(self):
        every = [s for streams in self.streams.values() for s in streams]
        for s in every:
            s.stop()
        for s in every:
            s.join()

    def answers(self, key):
        """Every answer of the key's streams, by start time."""
        return sorted((a for s in self.streams[key] for a in s.answers), key=lambda a: a.start)


def outcomes_of(answers):
    """The Outcomes of a driver's answers; one that never came counts as "no answer
    (why)"."""
    o = Outcomes()
    for a in answers:
        if a.status == NO_ANSWER:
            o.add("", "", what=f"no answer ({a.word})")
        else:
            o.add(a.status, a.word or "none")
    return o
