"""What the lab reads from its drivers and from stockd's sources: JMeter's JTL, wrk's
LAB-RESULT line, redis-benchmark's CSV, sysbench's report, Prometheus text, and the
sale script and SQL texts in server/*.c."""

import os
import tempfile
import unittest

from lab.client import sources
from lab.client.api import metric, parse_metrics
from lab.drivers import jmeter, raw, wrk

JTL = """timeStamp,elapsed,label,responseCode,responseMessage,threadName,dataType,success,failureMessage,bytes,grpThreads,allThreads,Latency,Connect,"outcome","instance"
1000,10,deduct a,200,OK,t 1-1,,true,,150,2,2,10,1,none,host:1
1005,20,deduct a,409,Conflict,t 1-2,,true,,150,2,2,20,1,sold_out,host:2
1010,30,deduct a,409,Conflict,t 1-1,,true,,150,2,2,30,0,busy,host:1
1020,40,deduct a,409,Conflict,t 1-2,,true,,150,2,2,40,0,busy,host:2
1030,50,deduct a,503,Service Unavailable,t 1-1,,false,x,150,2,2,50,0,outcome_unknown,host:1
1040,60,deduct a,503,Service Unavailable,t 1-2,,false,x,150,2,2,60,0,overloaded,host:2
1050,70,deduct a,Non HTTP response code: java.net.ConnectException,Non HTTP response message: Connection refused,t 1-1,,false,x,0,2,2,0,0,none,none
1060,940,deduct a,200,OK,t 1-2,,true,,157,2,2,80,0,none,host:2
"""

WRK = """Running 2s test @ http://127.0.0.1:1/stock/deduct/a
  2 threads and 16 connections
LAB-RESULT {"requests":1000,"duration_us":2000000,"latency_us":{"p50":1500,"p95":4000,"p99":9000,"max":20000},"socket":{"connect":0,"read":2,"write":0,"timeout":1},"answers":{"200 ":900,"409 busy":50,"503 outcome_unknown":20,"503 overloaded":27},"instances":{"host:1":997}}
"""

# bench/rate.lua's line (the pairs): wrk's own counts only.
WRK_RATE = """LAB-RESULT {"requests":1000,"duration_us":2000000,"latency_us":{"p50":1500,"p95":4000,"p99":9000,"max":20000},"socket":{"connect":0,"read":0,"write":0,"timeout":0},"answers":{"200 ":997},"status_errors":3,"instances":{}}
"""

REDIS_CSV = '''"test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms"
"EVALSHA abc 2 stock:{1} ledger:{1} 1","27777.78","0.494","0.072","0.431","0.799","2.663","5.655"
'''

SYSBENCH = """Latency histogram (values are in milliseconds)
       value  ------------- distribution ------------- count
       1.000 |****                                     10
       2.000 |****************************************  80
       5.000 |****                                      9
      20.000 |*                                         1

SQL statistics:
    transactions:                        100    (50.00 per sec.)
    ignored errors:                      0      (0.00 per sec.)
Latency (ms):
         min:                                    0.90
         avg:                                    2.20
         max:                                   20.10
         95th percentile:                        5.00
"""


class JtlTest(unittest.TestCase):
    def test_read_jtl(self):
        with tempfile.NamedTemporaryFile("w", suffix=".jtl", delete=False) as f:
            f.write(JTL)
        try:
            res = jmeter.read_jtl(f.name)
        finally:
            os.unlink(f.name)
        o = res.outcomes
        self.assertEqual((o["sold"], o["sold_out"], o["busy"], o["outcome_unknown"], o["errors"]),
                         (2, 1, 2, 1, 2))
        self.assertEqual(o.detail(),
                         "503 overloaded x1; Non HTTP response message: Connection refused x1")
        self.assertEqual(res.instances, {"host:1", "host:2", "none"})
        self.assertEqual(res.fastest_busy_ms, 30)
        self.assertEqual((res.p50_ms, res.max_ms), (40, 940))
        self.assertEqual(res.duration_s, 1.0)
        self.assertEqual(res.throughput_rps, 8.0)
        # received bytes, head and body, averaged over the answers (a refused
        # connection received none and is no reply)
        self.assertEqual(res.reply_bytes, 151)

    def test_missing_jtl_is_empty(self):
        self.assertEqual(jmeter.read_jtl("/nonexistent/x.jtl").requests, 0)


class ToolOutputTest(unittest.TestCase):
    def test_wrk(self):
        res = wrk.parse(WRK)
        o = res.outcomes
        self.assertEqual((o["sold"], o["busy"], o["outcome_unknown"], o["errors"]),
                         (900, 50, 20, 30))
        self.assertIn("socket timeout (wrk) x1", o.detail())
        self.assertEqual((res.rps, res.p50_ms, res.p99_ms, res.max_ms), (500.0, 1.5, 9.0, 20.0))
        self.assertEqual(res.instances, {"host:1": 997})
        self.assertIsNone(wrk.parse("no result here"))

    def test_wrk_rate_only(self):
        res = wrk.parse(WRK_RATE)
        o = res.outcomes
        self.assertEqual((o["sold"], o["errors"], res.rps), (997, 3, 500.0))
        self.assertIn("status 400 or more (wrk) x3", o.detail())

    def test_wrk_command_threads(self):
        cmd = wrk.command("http://x/", 1, 2, 5)
        self.assertIn("-t1", cmd)
        self.assertIn("-c1", cmd)
        self.assertIn("-d2s", cmd)
        self.assertIn(wrk.SCRIPT, cmd)
        self.assertIn(wrk.RATE_SCRIPT, wrk.command("http://x/", 64, 2, 5, counting=False))
        order = wrk.command("http://x/", 64, 3, 9, script=wrk.ORDER_SCRIPT,
                            script_args=("2000", "/strategies"))
        self.assertEqual(order[-5:], [wrk.ORDER_SCRIPT, "http://x/", "--", "2000", "/strategies"])

    def test_redis_benchmark_csv(self):
        m = raw.parse_redis_csv(REDIS_CSV)
        self.assertEqual((m.rps, m.p50_ms, m.p95_ms, m.p99_ms, m.max_ms),
                         (27777.78, 0.431, 0.799, 2.663, 5.655))
        self.assertIsNone(raw.parse_redis_csv('"test","rps"\n'))

    def test_sysbench(self):
        m = raw.parse_sysbench(SYSBENCH)
        self.assertEqual((m.requests, m.rps, m.p50_ms, m.p95_ms, m.p99_ms, m.max_ms),
                         (100, 50.0, 2.0, 5.0, 5.0, 20.1))
        self.assertIsNone(raw.parse_sysbench("FATAL: nothing"))

    def test_metrics(self):
        text = ('# HELP x y\nprocess_resident_memory_bytes 5.24288e+07\n'
                'stockd_requests_total{strategy="a",outcome="ok"} 12\n'
                'stockd_requests_total{strategy="a",outcome="busy"} 3\n')
        samples = parse_metrics(text)
        self.assertEqual(metric(samples, "process_resident_memory_bytes"), 52428800.0)
        self.assertEqual(metric(samples, "stockd_requests_total", outcome="busy"), 3.0)
        self.assertIsNone(metric(samples, "stockd_queue_depth"))


class SourcesTest(unittest.TestCase):
    def test_literals_join_like_the_compiler(self):
        text = ' "a\\n" \n   "b \\"q\\"" "c" ;\n "not this"'
        self.assertEqual(sources.literals(text), 'a\nb "q"c')

    def test_server_sources(self):
        script = sources.redis_script(sources.SALE_SCRIPT_FILE, sources.SALE_SCRIPT)
        self.assertIn("redis.call('DECRBY', KEYS[1]", script)
        self.assertTrue(script.endswith("\n"))
        self.assertEqual(len(sources.sha1(script)), 40)
        deduct = sources.sql_statement(sources.SQL_FILE, "SQL_DEDUCT_IF_ENOUGH")
        self.assertTrue(deduct.startswith("UPDATE stock SET count = count - ?"))
        self.assertEqual(deduct.count("?"), 3)
        insert = sources.sql_statement(sources.SQL_FILE, "SQL_INSERT_ORDER")
        self.assertTrue(insert.startswith("INSERT INTO orders"))
        self.assertTrue(sources.strategy_name(sources.LUA_FILE))


if __name__ == "__main__":
    unittest.main()
