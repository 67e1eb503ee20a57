/*
 * trace.c - a sale's trace, and its JSON.
 */
#include "core/trace.h"

#include "core/worker.h"

#include <string.h>

void trace_begin(struct sale_trace *t, long long arrived_us)
{
    memset(t, 0, sizeof *t);
    t->t_us[TRACE_ARRIVAL] = arrived_us;
    t->read = t->wrote = t->version = TRACE_UNKNOWN;
}

void trace_mark(struct sale_trace *t, enum trace_mark mark)
{
    if (t)
        t->t_us[mark] = monotonic_us();
}

static void set_known(json_t *o, const char *key, long long v)
{
    if (v != TRACE_UNKNOWN)
        json_object_set_new(o, key, json_integer(v));
}

json_t *trace_json(const struct sale_trace *t, int attempts, long long fence, int batch)
{
    static const char *const names[TRACE_MARKS] = {"arrival", "lock_acquired", "read",
                                                   "write",   "commit",        "answer"};
    json_t *times = json_object();
    for (int i = 0; i < TRACE_MARKS; i++)
        if (t->t_us[i])
            json_object_set_new(times, names[i], json_integer(t->t_us[i]));
    json_t *o = json_pack("{s:o}", "t_us", times);
    set_known(o, "read", t->read);
    set_known(o, "wrote", t->wrote);
    if (t->update)
        json_object_set_new(o, "update", json_string(t->update));
    set_known(o, "version", t->version);
    if (fence)
        json_object_set_new(o, "fence", json_integer(fence));
    if (t->lock_token[0])
        json_object_set_new(o, "lock_token", json_string(t->lock_token));
    if (attempts)
        json_object_set_new(o, "attempts", json_integer(attempts));
    if (batch)
        json_object_set_new(o, "batch", json_integer(batch));
    return o;
}
