/*
 * guards.h - the checks a request passes before it is routed: each says
 * whether a request is to be refused, and dispatch() (http.c) refuses it.
 *
 * In dispatch()'s order: a Host that names another server (DNS
 * rebinding), a head that says two things (two Hosts, two body lengths), a
 * body over the limit, a control character in the path or the query, then
 * per route a browser's request from another site and the admin token.
 * docs/security.md says whom each one stops.
 */
#ifndef STOCKD_GUARDS_H
#define STOCKD_GUARDS_H

#include "api/params.h"

#include <microhttpd.h>
#include <stddef.h>

/* Whether the head says where it goes or how long its body is in two ways
 * (two Hosts, two Content-Lengths, a length and Transfer-Encoding). */
int guard_ambiguous_head(struct MHD_Connection *c);

/* Whether its Content-Length is over config.max_body (or no number). */
int guard_declared_too_large(struct MHD_Connection *c);

/* Whether the Host header names this server: an address, `localhost` or
 * one of --allowed-hosts. */
int guard_host_allowed(struct MHD_Connection *c);

/* Whether the path or any of the `nargs` query parameters holds a control
 * character (an encoded NUL included: guard_unescape()). */
int guard_has_control(const char *path, const struct query_arg *args, unsigned nargs);

/* Whether a browser says the request comes from another site. */
int guard_cross_site(struct MHD_Connection *c);

/* Whether the request carries the admin token (or none is configured). */
int guard_authorized(struct MHD_Connection *c);

/* libmicrohttpd's unescape callback: %HH decoded, a decoded NUL made DEL. */
size_t guard_unescape(void *cls, struct MHD_Connection *c, char *s);

#endif
