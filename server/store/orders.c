/*
 * orders.c - order ids and payment ids: made, checked, routed to a store.
 */
#include "store/orders.h"

#include "core/config.h"
#include "core/worker.h"

#include <assert.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

/* The stores that hold orders, found by the letter their ids start with. */
static const struct store *const holding[] = {&store_mysql, &store_redis};

#define ORDER_HEX 16

void order_id_make(char out[ORDER_ID_MAX + 1], const struct store *store, int product)
{
    assert(store->orders);
    char hex[ORDER_HEX + 1];
    random_token(hex, ORDER_HEX / 2);
    snprintf(out, ORDER_ID_MAX + 1, "%c%d-%s", store->orders->letter, product, hex);
}

static int lower_hex(const char *text, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (!strchr("0123456789abcdef", text[i]) || !text[i])
            return 0;
    return 1;
}

int order_id_parse(const char *text, struct order_ref *out)
{
    size_t len = strlen(text);
    const char *dash = strchr(text, '-');
    if (len > ORDER_ID_MAX || !dash || (size_t)(text + len - dash) != ORDER_HEX + 1 ||
        !lower_hex(dash + 1, ORDER_HEX))
        return -1;
    /* The product as order_id_make() writes it: digits, no leading zero. */
    long long product = 0;
    if (dash - text < 2 || text[1] == '0')
        return -1;
    for (const char *p = text + 1; p < dash; p++)
        if (*p < '0' || *p > '9' || (product = product * 10 + (*p - '0')) > INT_MAX)
            return -1;
    for (size_t i = 0; i < sizeof holding / sizeof holding[0]; i++)
        if (holding[i]->orders && holding[i]->orders->letter == text[0]) {
            *out = (struct order_ref){.store = holding[i], .product = (int)product};
            memcpy(out->id, text, len + 1);
            return 0;
        }
    return -1;
}

enum order_state order_state_parse(const char *name)
{
    static const char *const names[] = {
        [ORDER_HELD] = "held",
        [ORDER_PAID] = "paid",
        [ORDER_EXPIRED] = "expired",
        [ORDER_CANCELLED] = "cancelled",
    };
    for (size_t i = ORDER_HELD; name && i < sizeof names / sizeof names[0]; i++)
        if (strcmp(names[i], name) == 0)
            return (enum order_state)i;
    return 0;
}

int payment_id_valid(const char *text)
{
    size_t len = text ? strlen(text) : 0;
    if (len < 1 || len > PAYMENT_ID_MAX)
        return 0;
    for (size_t i = 0; i < len; i++)
        if (!(text[i] >= 'a' && text[i] <= 'z') && !(text[i] >= 'A' && text[i] <= 'Z') &&
            !(text[i] >= '0' && text[i] <= '9') && !strchr("._:-", text[i]))
            return 0;
    return 1;
}

long long sweep_lag_ms(void)
{
    return 2LL * (config.sweep_ms ? config.sweep_ms : SWEEP_MS_DEFAULT) + 1000;
}
