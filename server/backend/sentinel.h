/*
 * sentinel.h - the main Redis as whatever primary Redis Sentinel names.
 *
 * With --redis-sentinel (STOCKD_REDIS_SENTINEL) set, the main Redis - the
 * redis store, the Redis locks, the HTTP loops' pipes - is not a fixed
 * host:port but the primary the Sentinels name for --redis-master-name,
 * and it moves when they fail over. hiredis knows nothing of Sentinel, so
 * this file does what a Sentinel-aware client does, with plain commands:
 *
 *   discovery  ask each Sentinel in turn SENTINEL get-master-addr-by-name,
 *              connect to the address it names and ask ROLE: only a server
 *              that says "master" is the primary.
 *   following  one thread SUBSCRIBEs to +switch-master on a Sentinel
 *              (the next one when its connection breaks) and discovers
 *              again when the group it watches moves; so does any link
 *              that breaks or meets a READONLY reply (sentinel_suspect()).
 *
 * The primary in force is one shared record, an address and a generation
 * that grows whenever the address changes or is lost. A link remembers the
 * generation it was connected for and, once that is old, drops its
 * connection and connects to the new address: sixteen workers and every
 * loop follow a failover without each asking the Sentinels. Only the
 * thread talks to the Sentinels, at most once per SENTINEL_RETRY_MS, so a
 * failover that breaks every link at once costs one discovery, and no
 * request ever waits for one: while there is no primary, requests answer
 * 503 backend_unavailable with the reason at once.
 */
#ifndef STOCKD_SENTINEL_H
#define STOCKD_SENTINEL_H

#include <jansson.h>
#include <stddef.h>
#include <stdio.h>

/* The shortest time between two discoveries, and how often one is tried
 * again while there is no primary. */
#define SENTINEL_RETRY_MS 100

/* Whether the main Redis follows Sentinel. */
int sentinel_enabled(void);

/* Discovers the primary (at start, a wrong master name or no Sentinel
 * answering is an error, logged: stockd does not start), then starts the
 * thread that follows it. 0 when Sentinel is not used. */
int sentinel_start(void);
void sentinel_stop(void);

/* The generation of the primary in force; cheap (an atomic read). */
unsigned sentinel_generation(void);

/* The primary in force: its host into host[size] and *port, and its
 * generation. host is "" while there is none; then why[why_size] says
 * why. */
unsigned sentinel_primary(char *host, size_t size, int *port, char *why, size_t why_size);

/* A link made for `generation` broke, or its server answered READONLY:
 * asks the thread to discover the primary again (unless the generation has
 * moved on already). Never waits. */
void sentinel_suspect(unsigned generation);

/* Adds the primary in use and the Sentinels to the main Redis's /health
 * entry. */
void sentinel_describe(json_t *state);

#endif
