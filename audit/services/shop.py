#!/usr/bin/env python3
"""A small inventory service of the kind the audit is for (python3 -m lab audit,
docs/audit.md): Python's standard http.server over SQLite, written the way such
services usually are, so that the audit's shipped targets have something foreign to
judge. It is no part of stockd.

    POST /buy?product=P&qty=N&buyer=B   buy N units of P
    POST /reset?product=P&stock=N       set P to N units (creates it)
    GET  /stock/P                       the units left

Two ways to sell (--sale):

    naive        read the count, then write count - qty back: two buyers that read
                 the same count both sell, and one deduction vanishes (a lost
                 update; with more buyers than units, an oversell). --hold-ms
                 waits between the read and the write, as a slow service would, so
                 that the race shows in every run.
    conditional  one UPDATE ... SET count = count - qty WHERE count >= qty
                 RETURNING count: the check and the write are one statement, so
                 nothing is lost or oversold. A purchase with an Idempotency-Key
                 header keeps the key and its answer in the sale's own transaction:
                 the same key again gets that answer and sells nothing, so a retry
                 never buys twice (the audit's [retry] check).

Two ways to answer (--answers):

    json   200 {"ok": true, "remaining": N}; 409 {"ok": false, "error":
           "sold_out", "remaining": N}; 400 {"ok": false, "error": "bad_request"}
    text   200 "SOLD 1, 41 left" / 200 "SOLD OUT, 0 left" / 400 "ERROR ...": every
           answer is a 200 with a line of text, as some legacy services answer

    python3 audit/services/shop.py --port 18091 --db run/audit/shop.db \\
        --sale naive --hold-ms 20 --answers json
"""

import argparse
import json
import re
import sqlite3
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SCHEMA = "CREATE TABLE IF NOT EXISTS stock (product INTEGER PRIMARY KEY, count INTEGER NOT NULL)"
KEYS = ("CREATE TABLE IF NOT EXISTS keys (key TEXT PRIMARY KEY, sold INTEGER, "
        "remaining INTEGER)")


class Shop:
    def __init__(self, path, sale, hold_ms):
        self.path, self.sale, self.hold_s = path, sale, hold_ms / 1000.0
        self.local = threading.local()
        self.db().execute(SCHEMA)
        self.db().execute(KEYS)

    def db(self):
        """This thread's connection, in autocommit mode."""
        if not hasattr(self.local, "db"):
            self.local.db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
            self.local.db.execute("PRAGMA journal_mode=WAL")
        return self.local.db

    def count(self, product):
        row = self.db().execute("SELECT count FROM stock WHERE product = ?",
                                (product,)).fetchone()
        return row[0] if row else None

    def reset(self, product, stock):
        self.db().execute("INSERT OR REPLACE INTO stock (product, count) VALUES (?, ?)",
                          (product, stock))

    def buy_once(self, product, qty, key):
        """buy(), or the answer the key's first purchase got: the key is written in the
        sale's transaction (BEGIN IMMEDIATE: one writer at a time, so a retry that
        comes while its first try runs waits for it and finds its key)."""
        db = self.db()
        db.execute("BEGIN IMMEDIATE")
        try:
            row = db.execute("SELECT sold, remaining FROM keys WHERE key = ?", (key,)).fetchone()
            if row:
                sold, left = (None if row[0] is None else bool(row[0])), row[1]
            else:
                sold, left = self.buy(product, qty)
                db.execute("INSERT INTO keys (key, sold, remaining) VALUES (?, ?, ?)",
                           (key, sold, left))
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")
        return sold, left

    def buy(self, product, qty):
        """(sold, units left or seen); sold None: no such product."""
        if self.sale == "naive":
            have = self.count(product)
            if have is None or have < qty:
                return (None if have is None else False), have
            time.sleep(self.hold_s)
            self.db().execute("UPDATE stock SET count = ? WHERE product = ?",
                              (have - qty, product))
            return True, have - qty
        row = self.db().execute("UPDATE stock SET count = count - ? WHERE product = ? AND "
                                "count >= ? RETURNING count", (qty, product, qty)).fetchone()
        if row:
            return True, row[0]
        have = self.count(product)
        return (None if have is None else False), have


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as JMeter's buyers use it

    def log_message(self, *args):
        pass

    def answer(self, status, doc, text):
        if self.server.text_answers:
            status, body, kind = (200 if status < 500 else status), text, "text/plain"
        else:
            body, kind = json.dumps(doc), "application/json"
        raw = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def refuse(self, status, why):
        self.answer(status, {"ok": False, "error": "bad_request", "message": why},
                    f"ERROR {why}")

    def numbers(self, query, names):
        q = urllib.parse.parse_qs(query)
        try:
            return [int(q[n][0]) for n in names]
        except (KeyError, ValueError):
            return None

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        u = urllib.parse.urlsplit(self.path)
        shop = self.server.shop
        if u.path == "/reset":
            got = self.numbers(u.query, ("product", "stock"))
            if not got:
                return self.refuse(400, "product and stock must be integers")
            shop.reset(*got)
            return self.answer(200, {"ok": True}, "OK")
        if u.path != "/buy":
            return self.refuse(404, f"no {u.path}")
        got = self.numbers(u.query, ("product", "qty"))
        if not got or got[1] < 1:
            return self.refuse(400, "product and qty (1 or more) must be integers")
        key = self.headers.get("Idempotency-Key")
        sold, left = (shop.buy_once(*got, key) if key and shop.sale == "conditional"
                      else shop.buy(*got))
        if sold is None:
            return self.refuse(404, f"no product {got[0]}")
        if sold:
            return self.answer(200, {"ok": True, "remaining": left}, f"SOLD {got[1]}, {left} left")
        self.answer(409, {"ok": False, "error": "sold_out", "remaining": left},
                    f"SOLD OUT, {left} left")

    def do_GET(self):
        m = re.fullmatch(r"/stock/(\d+)", urllib.parse.urlsplit(self.path).path)
        have = self.server.shop.count(int(m.group(1))) if m else None
        if have is None:
            return self.refuse(404, "no such product")
        self.answer(200, {"product": int(m.group(1)), "count": have}, f"STOCK {have}")


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256  # a burst of buyers connecting at once is not refused


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--db", required=True, help="the SQLite file (created when absent)")
    p.add_argument("--sale", choices=("naive", "conditional"), required=True)
    p.add_argument("--answers", choices=("json", "text"), default="json")
    p.add_argument("--hold-ms", type=int, default=0, help="naive: wait between read and write")
    a = p.parse_args()
    shop = Shop(a.db, a.sale, a.hold_ms)  # the table exists before the port answers
    server = Server(("127.0.0.1", a.port), Handler)
    server.shop = shop
    server.text_answers = a.answers == "text"
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
