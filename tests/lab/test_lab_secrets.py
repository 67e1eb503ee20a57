"""The lab's tools get the stack's passwords without a command line: sysbench by
MYSQL_PWD, redis-benchmark (which takes one only by -a) with it kept out of its log,
and the Redis probes by AUTH from REDISCLI_AUTH."""

import os
import socket
import tempfile
import threading
import unittest
from unittest import mock

from lab.drivers import raw
from lab.nemesis import faults

SYSBENCH_REPORT = "transactions: 10 (5.00 per sec.)\nmax: 3.0\n"
CSV = '"test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms",' \
      '"p99_latency_ms","max_latency_ms"\n"EVALSHA","1000","1","1","1","1","1","1"\n'


class Ran:
    """Stands in for subprocess.run: records the command and the environment."""

    def __init__(self, out):
        self.out, self.cmd, self.env = out, None, None

    def __call__(self, cmd, **kw):
        self.cmd, self.env = cmd, kw.get("env")
        return mock.Mock(returncode=0, stdout=self.out)


class ToolsTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.log = os.path.join(self.dir.name, "log")
        self.pw_file = os.path.join(self.dir.name, "mysql.password")
        with open(self.pw_file, "w") as f:
            f.write("s3cret-mysql\n")

    def tearDown(self):
        self.dir.cleanup()

    def test_sysbench_gets_the_password_by_the_environment(self):
        db = {"STOCKD_MYSQL_HOST": "127.0.0.1", "STOCKD_MYSQL_PORT": "1",
              "STOCKD_MYSQL_USER": "stockd", "STOCKD_MYSQL_DB": "stockd",
              "STOCKD_MYSQL_PASSWORD_FILE": self.pw_file}
        ran = Ran(SYSBENCH_REPORT)
        with mock.patch.object(raw.subprocess, "run", ran), \
                mock.patch.object(raw, "tool", lambda name, group="bench": name):
            raw.mariadb_sale(db, "UPDATE", "INSERT", 1, "S", 1, 1, self.log)
        self.assertNotIn("s3cret-mysql", " ".join(ran.cmd))
        self.assertEqual(ran.env["MYSQL_PWD"], "s3cret-mysql")

    def test_redis_benchmark_keeps_the_password_out_of_its_log(self):
        ran = Ran(CSV)
        with mock.patch.object(raw.subprocess, "run", ran), \
                mock.patch.object(raw, "tool", lambda name, group="bench": name), \
                mock.patch.dict(os.environ, {"REDISCLI_AUTH": "s3cret-redis"}):
            raw.redis_evalsha(1, "sha", ["k"], [1], 1, 10, self.log)
        self.assertIn("s3cret-redis", ran.cmd)  # -a: its only way
        with open(self.log) as f:
            self.assertNotIn("s3cret-redis", f.read())


class RedisProbeTest(unittest.TestCase):
    def serve_once(self):
        """A server that records what one client sends and answers like Redis with
        requirepass: +OK to AUTH, then +PONG."""
        srv = socket.socket()
        srv.bind(("127.0.0.1", 0))
        srv.listen(1)
        got = []

        def run():
            conn, _ = srv.accept()
            with conn:
                data = b""
                while data.count(b"\r\n") < 2:
                    data += conn.recv(4096)
                got.append(data)
                conn.sendall(b"+OK\r\n+PONG\r\n")
            srv.close()
        threading.Thread(target=run, daemon=True).start()
        return srv.getsockname()[1], got

    def test_the_probe_gives_the_password(self):
        port, got = self.serve_once()
        with mock.patch.dict(os.environ, {"REDISCLI_AUTH": "s3cret-redis"}):
            self.assertTrue(faults.redis_answers(port))
        self.assertEqual(got, [b"AUTH s3cret-redis\r\nPING\r\n"])


if __name__ == "__main__":
    unittest.main()
