/*
 * unit_sentinel.c - the --redis-sentinel list and master name: what
 * parses, what is refused at startup with a reason, and that an empty list
 * leaves the main Redis where --redis-host and --redis-port say.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "backend/redis.h"
#include "backend/sentinel.h"
#include "core/config.h"
#include "core/worker.h"

/* Starts the configuration over with `list` and `name`, as stockd's
 * startup does; the message printed, if any, lands in `why`. 0 or -1. */
static int configure(const char *list, const char *name, char *why, size_t size)
{
    FILE *sink = fmemopen(why, size, "w");
    assert_non_null(sink);
    char *argv[] = {"stockd", "--redis-sentinel", (char *)list, "--redis-master-name", (char *)name,
                    NULL};
    enum config_status s = config_load(5, argv, sink, sink);
    fclose(sink);
    return s == CONFIG_RUN ? 0 : -1;
}

static void test_empty_keeps_the_configured_redis(void **state)
{
    (void)state;
    char why[256] = "";
    assert_int_equal(configure("", "stockd", why, sizeof why), 0);
    assert_false(sentinel_enabled());
    struct worker *w = worker_new();
    assert_false(redis_main(w)->follows_primary);
    assert_ptr_equal(redis_main(w)->host, config.redis_host);
    json_t *health = json_object();
    sentinel_describe(health);
    assert_int_equal(json_object_size(health), 0);
    json_decref(health);
    backends_close(w);
    worker_free(w);
}

static void test_a_list_makes_the_main_redis_follow_the_primary(void **state)
{
    (void)state;
    char why[256] = "";
    assert_int_equal(configure("127.0.0.1:26379,localhost:26380", "stockd", why, sizeof why), 0);
    assert_true(sentinel_enabled());
    struct worker *w = worker_new();
    assert_true(redis_main(w)->follows_primary);
    assert_true(redis_subscriber(w)->follows_primary);
    /* Each link copies the primary's address into its own buffer. */
    assert_ptr_not_equal(redis_main(w)->host, redis_subscriber(w)->host);
    /* Not started: no primary is known, and /health says so. */
    char host[64], reason[64];
    int port;
    sentinel_primary(host, sizeof host, &port, reason, sizeof reason);
    assert_string_equal(host, "");
    json_t *health = json_object();
    sentinel_describe(health);
    assert_true(json_is_null(json_object_get(health, "primary")));
    assert_int_equal(json_array_size(json_object_get(health, "sentinels")), 2);
    assert_string_equal(json_string_value(json_object_get(health, "master_name")), "stockd");
    json_decref(health);
    backends_close(w);
    worker_free(w);
    assert_int_equal(configure("", "stockd", why, sizeof why), 0);
}

static void test_bad_settings_are_refused(void **state)
{
    (void)state;
    static const char *const bad[] = {"127.0.0.1", "127.0.0.1:0", "a:1,", ":26379",
                                      "a:1,b:2,c:3,d:4,e:5,f:6,g:7,h:8,i:9,j:10"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char why[256] = "";
        if (configure(bad[i], "stockd", why, sizeof why) != -1)
            fail_msg("'%s' was accepted", bad[i]);
        assert_non_null(strstr(why, "redis-sentinel"));
    }
    char why[256] = "";
    assert_int_equal(configure("127.0.0.1:26379", "", why, sizeof why), -1);
    assert_non_null(strstr(why, "redis-master-name"));
    assert_int_equal(configure("", "stockd", why, sizeof why), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_empty_keeps_the_configured_redis),
        cmocka_unit_test(test_a_list_makes_the_main_redis_follow_the_primary),
        cmocka_unit_test(test_bad_settings_are_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
