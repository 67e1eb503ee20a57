"""Buyers bound to instances: keep-alive connections, each to one stockd of several
(make cluster's one per Galera node, the Galera partition's three), buying one path
until their tickets are used up or they are stopped, every answer kept with the
instance it came from (lab.drivers.load's Answer), for a row's figures and its
clients' history."""

import http.client
import threading
import time

from .load import NO_ANSWER, Answer, error_word, failure_word, remaining_of


class Buyers:
    """conns connections per instance (at hosts[i], 127.0.0.1 by default), each bound to
    its instance, buying until `count`
    tickets are used up or stop() is called; every answer kept, with its instance."""

    def __init__(self, ports, path, conns, count=None, timeout_s=30, hosts=None):
        self.ports, self.path, self.conns = ports, path, conns
        self.hosts = hosts or ["127.0.0.1"] * len(ports)
        self.count, self.timeout_s = count, timeout_s
        self.answers = []  # (instance index, lab.drivers.load.Answer)
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.threads = []

    def ticket(self):
        if self.stopping.is_set():
            return False
        if self.count is None:
            return True
        with self.lock:
            if self.count <= 0:
                return False
            self.count -= 1
            return True

    def loop(self, i):
        conn = None
        while self.ticket():
            if conn is None:
                conn = http.client.HTTPConnection(self.hosts[i], self.ports[i],
                                                  timeout=self.timeout_s)
            start = time.monotonic()
            try:
                conn.request("GET", self.path)
                resp = conn.getresponse()
                raw = resp.read()
                status, word = resp.status, error_word(resp.status, raw)
                left = remaining_of(raw)
            except (OSError, http.client.HTTPException) as e:
                status, word, left = NO_ANSWER, failure_word(e), None
                conn.close()
                conn = None
            self.answers.append((i, Answer(start, time.monotonic(), status, word, left)))
        if conn is not None:
            conn.close()

    def start(self):
        for i in range(len(self.ports)):
            for _ in range(self.conns):
                t = threading.Thread(target=self.loop, args=(i,), daemon=True)
                t.start()
                self.threads.append(t)
        return time.monotonic()

    def stop(self):
        self.stopping.set()

    def join(self):
        for t in self.threads:
            t.join()
        self.answers.sort(key=lambda ia: ia[1].start)
