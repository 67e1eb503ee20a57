/*
 * unit_redlock.c - the --redlock server list: what parses, what is refused
 * at startup with a reason, and that an empty list means "not configured".
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/redis.h"
#include "backend/redlock.h"
#include "core/config.h"
#include "core/worker.h"

/* Starts the configuration over with `--redlock list`, as stockd's
 * startup does; the message printed, if any, lands in `why`. 0 or -1. */
static int configure(const char *list, char *why, size_t size)
{
    FILE *sink = fmemopen(why, size, "w");
    assert_non_null(sink);
    char *argv[] = {"stockd", "--redlock", (char *)list, NULL};
    enum config_status s = config_load(3, argv, sink, sink);
    fclose(sink);
    return s == CONFIG_RUN ? 0 : -1;
}

static void test_empty_is_not_configured(void **state)
{
    (void)state;
    char why[256] = "";
    assert_int_equal(configure("", why, sizeof why), 0);
    assert_int_equal(redlock_count(), 0);
    assert_false(backend_configured(BACKEND_REDLOCK));
    assert_string_equal(why, "");
}

static void test_servers_parse(void **state)
{
    (void)state;
    char why[256] = "";
    assert_int_equal(configure("127.0.0.1:23381,localhost:23382,10.0.0.3:6379", why, sizeof why),
                     0);
    assert_int_equal(redlock_count(), 3);
    struct worker *w = worker_new();
    assert_string_equal(redlock_link(w, 0)->host, "127.0.0.1");
    assert_int_equal(redlock_link(w, 0)->port, 23381);
    assert_string_equal(redlock_link(w, 1)->host, "localhost");
    assert_int_equal(redlock_link(w, 1)->port, 23382);
    assert_int_equal(redlock_link(w, 2)->port, 6379);
    const struct backend *b = backend_at(BACKEND_REDLOCK);
    assert_true(backend_configured(BACKEND_REDLOCK));
    json_t *state_json = json_object();
    b->describe(state_json);
    assert_int_equal(json_array_size(json_object_get(state_json, "servers")), 3);
    json_decref(state_json);
    backends_close(w);
    worker_free(w);
}

static void test_bad_lists_are_refused(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "127.0.0.1",       "127.0.0.1:",
        ":23381",          "127.0.0.1:0",
        "127.0.0.1:65536", "host:12x",
        "a:1,b:2,",        "a:1,,b:2",
        "a:99999999999",   "a:1,b:2,c:3,d:4,e:5,f:6,g:7,h:8,i:9,j:10",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char why[256] = "";
        if (configure(bad[i], why, sizeof why) != -1)
            fail_msg("'%s' was accepted", bad[i]);
        assert_non_null(strstr(why, "redlock"));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_empty_is_not_configured),
        cmocka_unit_test(test_servers_parse),
        cmocka_unit_test(test_bad_lists_are_refused),
    };
    return cmocka_run_group_tests_name("redlock servers", tests, NULL, NULL);
}
