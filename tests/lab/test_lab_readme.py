"""lab.runs.readme: the strategy table of docs/strategies.md, generated from a /strategies document and
kept between its two markers (names here are made up)."""

import unittest

from fakestockd import document, strategy
from lab.client import facts
from lab.runs import readme

LEASE = {"busy_holder": "safe", "paused_holder": "oversells"}


def table_of(*entries):
    return readme.table(facts.parse(document(list(entries))))


class ReadmeTest(unittest.TestCase):
    def test_one_row_per_strategy_in_the_servers_order(self):
        rows = table_of(strategy("beta", store="redis"), strategy("alpha")).splitlines()[2:]
        self.assertEqual([r.split("|")[1].strip() for r in rows], ["`beta`", "`alpha`"])

    def test_the_facts_of_a_row(self):
        entry = strategy("alpha", lease=LEASE, contention="waits")
        entry["caveat"] = "while the lease lasts"
        unsafe = strategy("beta", safe=False, contention="none")
        unsafe["caveat"] = "never"
        unsafe["summary"] = "SETNX <expiry> | then GET"
        alpha, beta = table_of(entry, unsafe).splitlines()[2:]
        self.assertIn("| yes\\* / yes\\* | waits its turn | safe / oversells |  |", alpha)
        # an unsafe claim is not starred; a summary cannot break the table or hide text
        self.assertIn("| no / no | nothing waits |  |  |", beta)
        self.assertIn("SETNX &lt;expiry&gt; \\| then GET |", beta)

    def test_the_failover_fact_of_a_row_on_redis(self):
        rows = table_of(strategy("gamma", store="redis", failover="loses_sales"),
                        strategy("delta", needs=["mysql", "redis"], failover="two_holders"),
                        strategy("alpha")).splitlines()[2:]
        self.assertIn("| loses acknowledged sales |", rows[0])
        self.assertIn("| two holders: oversells |", rows[1])
        self.assertIn("| waits its turn |  |  |  |", rows[2])

    def test_the_cluster_fact_of_a_row_on_mysql(self):
        rows = table_of(strategy("alpha", cluster="conflicts_at_commit"),
                        strategy("beta", cluster="two_holders", safe_multi=False),
                        strategy("gamma", store="redis")).splitlines()[2:]
        self.assertIn("|  | safe, conflicts fail at commit | alpha summary |", rows[0])
        self.assertIn("|  | two holders: oversells | beta summary |", rows[1])
        self.assertIn("|  |  |  | gamma summary |", rows[2])

    def test_whether_a_row_keeps_keys_or_why_not(self):
        keeping = strategy("alpha")
        keeping["idempotent"] = True
        none = strategy("beta")
        none.update(idempotent=False, idempotent_why="its write | is its own")
        rows = table_of(keeping, none).splitlines()[2:]
        self.assertTrue(rows[0].endswith("| alpha summary | yes |"))
        self.assertTrue(rows[1].endswith("| beta summary | no: its write \\| is its own |"))

    def test_a_row_that_settles_later_says_where(self):
        streamed = strategy("epsilon", store="redis", failover="loses_sales")
        streamed["settles"] = "async"
        rows = table_of(streamed, strategy("alpha")).splitlines()[2:]
        self.assertIn("| redis, settled into mysql after the 200 |", rows[0])
        self.assertIn("| mysql |", rows[1])

    def test_a_partition_fact_is_shown_where_it_differs(self):
        streamed = strategy("epsilon", store="redis", failover="loses_sales")
        streamed.update(settles="async", partition="oversells")
        rows = table_of(streamed, strategy("gamma", store="redis", failover="loses_sales"))
        rows = rows.splitlines()[2:]
        self.assertIn("| loses acknowledged sales; cut off from the Sentinels: both sides' "
                      "orders settled: oversells |", rows[0])
        self.assertIn("| loses acknowledged sales |", rows[1])

    def test_the_block_between_the_markers(self):
        text = f"intro\n{readme.BEGIN}\nold table\n{readme.END}\nafter\n"
        self.assertEqual(readme.block(text), "old table")
        replaced = readme.replace_block(text, "new table")
        self.assertEqual(readme.block(replaced), "new table")
        self.assertTrue(replaced.startswith("intro\n") and replaced.endswith("after\n"))
        self.assertIsNone(readme.block("no markers here"))


if __name__ == "__main__":
    unittest.main()
