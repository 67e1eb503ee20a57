/*
 * refusals.c - a loop's refusals by the sold-out flag, each a response
 * built once and sent again to every buyer the flag refuses.
 *
 * A flash sale refuses far more buyers than it serves, and once a product
 * is sold out the refusal is the same bytes for every buyer of the same
 * units by the same strategy. Built per request it was a reply document,
 * its rendering and a libmicrohttpd response with its headers, each
 * allocated and let go again; here it is built the first time, exactly as
 * that path builds it (new_reply(), api_deduct_flag_reply(),
 * finish_reply(), add_headers()), and kept as a libmicrohttpd response,
 * which libmicrohttpd lets every connection queue: what a refusal costs
 * then is the flag's lookup and MHD_queue_response().
 *
 * The table is one loop's, indexed by the product's slot in admission's
 * table (admission.h), so it holds at most ADMISSION_PRODUCTS responses,
 * one per product: the strategy and qty of the first refusal the loop
 * built; a refusal of other units or by another strategy replaces it. It
 * is built, read and let go on its loop's thread alone, so a response is
 * never shared between threads but through libmicrohttpd's own reference
 * count: a connection that queued it keeps it until it is sent, and
 * MHD_destroy_response() only lets go of the table's reference. Shared
 * between the loops, a response could be let go while another loop is
 * about to queue it, and knowing when none is would take a lock or a grace
 * period on the path this file exists to make short; the price of a table
 * per loop is one build per loop per product sold out.
 *
 * What crosses threads is admission's slot, read with acquire: its
 * generation moves at every reset through this instance, and a response
 * kept from before a reset is let go the next time the loop meets its
 * product (refusal_drop()), or replaced when the flag refuses it again.
 */
#include "http/refusals.h"

#include "api/admission.h"
#include "core/result.h"

#include <assert.h>
#include <stdlib.h>

/* The response kept for one product, and the refusal it answers. */
struct refusal {
    struct MHD_Response *response; /* NULL while none is kept */
    unsigned gen;                  /* the flag's generation it was built in */
    size_t strategy;
    int product, qty;
};

struct refusals {
    struct refusal at[ADMISSION_PRODUCTS]; /* by admission slot */
};

static int answers(const struct refusal *kept, const struct flag_refusal *f)
{
    return kept->response && kept->gen == f->ticket.gen && kept->strategy == f->strategy &&
           kept->product == f->product && kept->qty == f->qty;
}

static void let_go(struct refusal *kept)
{
    if (kept->response)
        MHD_destroy_response(kept->response); /* connections sending it keep theirs */
    kept->response = NULL;
}

/* The response for `f`, built as the JSON path builds `p`'s reply, or NULL
 * when out of memory. */
static struct MHD_Response *built(struct pending *p, const struct flag_refusal *f, struct worker *w)
{
    json_t *reply = new_reply();
    if (!reply)
        return NULL;
    st_result r = api_deduct_flag_reply(w, f, reply);
    finish_reply(p, r, reply, w->error);
    if (!p->page.owned)
        return NULL;
    struct MHD_Response *response =
        MHD_create_response_from_buffer(p->page.len, p->page.owned, MHD_RESPMEM_MUST_FREE);
    if (!response)
        return NULL; /* p->page.owned goes with the request */
    p->page.owned = NULL;
    p->page.body = NULL;
    add_headers(response, p);
    return response;
}

/* The kept response for `f`, built now when the loop has none for it. */
static struct MHD_Response *kept_for(struct refusals **table, struct pending *p,
                                     const struct flag_refusal *f, struct worker *w)
{
    assert(f->ticket.slot >= 0 && f->ticket.slot < ADMISSION_PRODUCTS);
    if (!*table && !(*table = calloc(1, sizeof **table)))
        return NULL;
    struct refusal *kept = &(*table)->at[f->ticket.slot];
    if (answers(kept, f))
        return kept->response;
    let_go(kept);
    struct MHD_Response *response = built(p, f, w);
    if (response)
        *kept = (struct refusal){.response = response,
                                 .gen = f->ticket.gen,
                                 .strategy = f->strategy,
                                 .product = f->product,
                                 .qty = f->qty};
    return response;
}

enum MHD_Result refusal_send(struct refusals **table, struct pending *p,
                             const struct flag_refusal *f, struct worker *w)
{
    struct MHD_Response *response = kept_for(table, p, f, w);
    phase_move(p, READING, SENT);
    p->result = ST_SOLD_OUT;
    return response ? MHD_queue_response(p->connection, result_status(ST_SOLD_OUT), response)
                    : MHD_NO;
}

void refusal_drop(struct refusals *table, const struct flag_refusal *f)
{
    if (!table || f->ticket.slot < 0)
        return;
    struct refusal *kept = &table->at[f->ticket.slot];
    if (kept->response && kept->gen != f->ticket.gen)
        let_go(kept);
}

void refusals_free(struct refusals *table)
{
    if (!table)
        return;
    for (size_t i = 0; i < ADMISSION_PRODUCTS; i++)
        let_go(&table->at[i]);
    free(table);
}
