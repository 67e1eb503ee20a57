/*
 * unit_keys_running.c - the Idempotency-Keys running on this instance: a
 * key is taken by one request at a time, whatever the threads, and is free
 * again once its request has its answer.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "api/keys_running.h"
#include "core/worker.h"

static void test_one_request_per_key(void **state)
{
    (void)state;
    struct worker *w = worker_new();
    assert_int_equal(keys_running_begin(w, "order-1"), ST_OK);
    assert_int_equal(keys_running_begin(w, "order-1"), ST_IN_PROGRESS);
    assert_non_null(strstr(w->error, "still running"));
    assert_int_equal(keys_running_begin(w, "order-2"), ST_OK);
    keys_running_end("order-1");
    assert_int_equal(keys_running_begin(w, "order-1"), ST_OK);
    keys_running_end("order-1");
    keys_running_end("order-2");
    worker_free(w);
}

#define THREADS 8
#define ROUNDS 2000

static atomic_int holders, most_holders, taken;

/* Each thread takes the same few keys over and over: a key is never held
 * by two at once. */
static void *contend(void *arg)
{
    (void)arg;
    struct worker *w = worker_new();
    for (int i = 0; i < ROUNDS; i++) {
        char key[16];
        snprintf(key, sizeof key, "k%d", i % 3);
        if (keys_running_begin(w, key) != ST_OK)
            continue;
        if (i % 3 == 0) {
            int now = atomic_fetch_add(&holders, 1) + 1;
            int seen = atomic_load(&most_holders);
            while (now > seen && !atomic_compare_exchange_weak(&most_holders, &seen, now))
                ;
            atomic_fetch_sub(&holders, 1);
            atomic_fetch_add(&taken, 1);
        }
        keys_running_end(key);
    }
    worker_free(w);
    return NULL;
}

static void test_threads_share_a_key_one_at_a_time(void **state)
{
    (void)state;
    pthread_t threads[THREADS];
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(pthread_create(&threads[i], NULL, contend, NULL), 0);
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(pthread_join(threads[i], NULL), 0);
    assert_int_equal(atomic_load(&most_holders), 1);
    assert_true(atomic_load(&taken) > 0);
    struct worker *w = worker_new();
    assert_int_equal(keys_running_begin(w, "k0"), ST_OK); /* every end freed its key */
    keys_running_end("k0");
    worker_free(w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_request_per_key),
        cmocka_unit_test(test_threads_share_a_key_one_at_a_time),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
