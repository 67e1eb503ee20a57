"""lab.drivers.peer: the bench's Node.js peer is skipped with a reason, never a failed run,
when Node.js or npm is missing or too old; and it is given stockd's own texts."""

import unittest
from unittest import mock

from lab.client import sources
from lab.drivers import peer


class PeerTest(unittest.TestCase):
    def test_no_node_or_npm_says_so(self):
        for missing in ("node", "npm"):
            with mock.patch.object(peer.shutil, "which",
                                   lambda name, gone=missing: None if name == gone else "/x"):
                with self.assertRaisesRegex(peer.PeerMissing, "node or npm not found"):
                    peer.install("/dev/null")

    def test_an_old_node_says_so(self):
        with mock.patch.object(peer.shutil, "which", lambda name: "/x"), \
                mock.patch.object(peer, "node_version", lambda node: "v18.19.0"):
            with self.assertRaisesRegex(peer.PeerMissing, "Node.js 18 is older"):
                peer.install("/dev/null")

    def test_the_texts_are_read_from_stockds_sources(self):
        texts = peer.stockd_texts(16, 1)
        self.assertEqual(texts["script"],
                         sources.redis_script(sources.SALE_SCRIPT_FILE, sources.SALE_SCRIPT))
        self.assertIn("redis.call('DECRBY'", texts["script"])
        self.assertTrue(texts["deduct"].startswith("UPDATE"))
        self.assertTrue(texts["insert"].startswith("INSERT"))
        self.assertTrue(texts["read"].startswith("SELECT"))
        self.assertEqual(texts["lua_name"], sources.strategy_name(sources.LUA_FILE))
        self.assertEqual(texts["strategy"], "peer-" + texts["sql_name"])

    def test_the_environment_carries_the_texts(self):
        db = {k: "v" for k in ("STOCKD_REDIS_HOST", "STOCKD_REDIS_PORT", "STOCKD_MYSQL_HOST",
                               "STOCKD_MYSQL_PORT", "STOCKD_MYSQL_USER",
                               "STOCKD_MYSQL_PASSWORD_FILE", "STOCKD_REDIS_PASSWORD_FILE",
                               "STOCKD_MYSQL_DB")}
        texts = {"lua_name": "L", "sql_name": "S", "script": "return 1", "deduct": "UPDATE",
                 "insert": "INSERT", "read": "SELECT", "strategy": "peer-S", "connections": 16,
                 "workers": 1}
        env = peer.Peer(1234, db, texts, b"{}", "/tmp/x.json", "/dev/null").env()
        self.assertEqual((env["PEER_PORT"], env["PEER_SALE_SCRIPT"], env["PEER_DEDUCT_SQL"],
                          env["PEER_INSERT_SQL"], env["PEER_READ_SQL"], env["PEER_LUA_NAME"],
                          env["PEER_WORKERS"], env["PEER_MYSQL_CONNECTIONS"]),
                         ("1234", "return 1", "UPDATE", "INSERT", "SELECT", "L", "1", "16"))


if __name__ == "__main__":
    unittest.main()
