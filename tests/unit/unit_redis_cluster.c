/*
 * unit_redis_cluster.c - what a Redis Cluster client must compute alike
 * with Redis: the slot of a key (CRC16 of its hash tag), the slot of each
 * command stockd sends, the --redis-cluster list at startup, and the
 * replies that send a command again (TRYAGAIN: the same command, later).
 *
 * The expected slots are what CLUSTER KEYSLOT answers on Redis 7.0.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "backend/redis_cluster.h"
#include "core/config.h"

static int key_slot(const char *key)
{
    return redis_cluster_key_slot(key, strlen(key));
}

static void test_key_slots_are_redis_own(void **state)
{
    (void)state;
    assert_int_equal(key_slot("123456789"), 12739); /* CRC16/XMODEM check value 0x31C3 */
    assert_int_equal(key_slot("foo"), 12182);
    assert_int_equal(key_slot("stock:{1001}"), 15391);
    assert_int_equal(key_slot("stock:{1002}"), 3196);
    assert_int_equal(key_slot("stock:{1003}"), 7261);
    /* The tag alone is hashed: every key of a product shares its slot. */
    assert_int_equal(key_slot("lock:{1001}:reentrant:waiters"), key_slot("1001"));
    assert_int_equal(key_slot("ledger:{1001}"), key_slot("stock:{1001}:initial"));
    /* "{}" is no tag (the whole key); the first "{" pairs with the next "}". */
    assert_int_equal(key_slot("foo{}{bar}"), 8363);
    assert_int_equal(key_slot("foo{{bar}}zap"), 4015); /* the tag "{bar" */
    assert_int_equal(key_slot("foo{bar}{zap}"), 5061); /* the tag "bar"  */
    assert_int_equal(key_slot("orders:stream"), 14419);
}

static int command_slot(int argc, const char *const *argv)
{
    return redis_cluster_command_slot(argc, argv);
}

static void test_command_slots_find_every_key(void **state)
{
    (void)state;
    int p = key_slot("1001");
    const char *get[] = {"GET", "stock:{1001}"};
    assert_int_equal(command_slot(2, get), p);
    const char *script[] = {"EVALSHA", "0", "2", "stock:{1001}", "ledger:{1001}", "1"};
    assert_int_equal(command_slot(6, script), p);
    const char *mset[] = {"MSET", "stock:{1001}", "5", "stock:{1001}:initial", "5"};
    assert_int_equal(command_slot(5, mset), p);
    const char *read[] = {"XREADGROUP", "GROUP",         "g", "c", "COUNT", "1",
                          "STREAMS",    "orders:stream", ">"};
    assert_int_equal(command_slot(9, read), key_slot("orders:stream"));
    const char *group[] = {"XGROUP", "CREATE", "orders:stream", "g", "0", "MKSTREAM"};
    assert_int_equal(command_slot(6, group), key_slot("orders:stream"));
    /* No key: routed where the worker's last round trip went. */
    const char *wait[] = {"WAIT", "1", "200"};
    assert_int_equal(command_slot(3, wait), -1);
    const char *load[] = {"SCRIPT", "LOAD", "return 1"};
    assert_int_equal(command_slot(3, load), -1);
    const char *multi[] = {"MULTI"};
    assert_int_equal(command_slot(1, multi), -1);
    /* Two products in one command: a cluster would refuse it. */
    const char *two[] = {"DEL", "stock:{1001}", "stock:{1002}"};
    assert_int_equal(command_slot(3, two), -2);
    const char *crossed[] = {"EVALSHA", "0", "2", "stock:{1001}", "orders:stream"};
    assert_int_equal(command_slot(5, crossed), -2);
}

static int configure(const char *cluster, const char *sentinel, char *why, size_t size)
{
    FILE *sink = fmemopen(why, size, "w");
    assert_non_null(sink);
    char *argv[] = {"stockd",           "--redis-cluster", (char *)cluster,
                    "--redis-sentinel", (char *)sentinel,  NULL};
    enum config_status s = config_load(5, argv, sink, sink);
    fclose(sink);
    return s == CONFIG_RUN ? 0 : -1;
}

static void test_the_cluster_list_at_startup(void **state)
{
    (void)state;
    char why[512] = "";
    assert_int_equal(configure("127.0.0.1:23340,127.0.0.1:23342", "", why, sizeof why), 0);
    assert_true(redis_cluster_enabled());
    assert_int_equal(config.redis_cluster_nodes.count, 2);
    assert_int_equal(config.redis_cluster_nodes.at[1].port, 23342);

    assert_int_equal(configure("127.0.0.1:23340", "127.0.0.1:23386", why, sizeof why), -1);
    assert_non_null(strstr(why, "redis-sentinel and redis-cluster"));
    assert_int_equal(configure("127.0.0.1", "", why, sizeof why), -1);
    assert_non_null(strstr(why, "redis-cluster"));

    assert_int_equal(configure("", "", why, sizeof why), 0);
    assert_false(redis_cluster_enabled());
}

/* An error reply as hiredis gives it. */
static redisReply error_reply(char *text)
{
    redisReply r = {.type = REDIS_REPLY_ERROR, .str = text, .len = strlen(text)};
    return r;
}

static void test_tryagain_is_a_retry_where_it_was_sent(void **state)
{
    (void)state;
    char tryagain[] = "TRYAGAIN Multiple keys request during rehashing of slot";
    char other[] = "ERR unknown command";
    redisReply r = error_reply(tryagain);
    int node = 7;
    assert_int_equal(redis_cluster_redirect(&r, &node), REDIRECT_TRYAGAIN);
    assert_int_equal(node, 7); /* no node named: where it was sent, from the map */
    r = error_reply(other);
    assert_int_equal(redis_cluster_redirect(&r, &node), REDIRECT_NONE);
    redisReply ok = {.type = REDIS_REPLY_STATUS, .str = tryagain, .len = strlen(tryagain)};
    assert_int_equal(redis_cluster_redirect(&ok, &node), REDIRECT_NONE); /* not an error */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_key_slots_are_redis_own),
        cmocka_unit_test(test_command_slots_find_every_key),
        cmocka_unit_test(test_the_cluster_list_at_startup),
        cmocka_unit_test(test_tryagain_is_a_retry_where_it_was_sent),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
