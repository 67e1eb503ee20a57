/*
 * guards.c - the checks a request passes before anything serves it
 * (guards.h lists them and whom each stops).
 *
 * Each reads only what libmicrohttpd parsed - the head, the decoded path
 * and query - and the configuration: no state, no thread of its own, so
 * any loop calls them as they are. A guard answers yes or no; the refusal
 * it leads to, and its order among the others, is dispatch()'s (http.c),
 * which holds the request.
 *
 * Two of them are about meaning, not bytes: a head that says one thing to
 * libmicrohttpd and another to a proxy in front (guard_ambiguous_head), and
 * a Host that is a name only a rebinding page would send
 * (guard_host_allowed). Their comments say why each rule is what it is.
 */
#include "http/guards.h"

#include "api/params.h"
#include "core/config.h"

#include <arpa/inet.h>
#include <string.h>
#include <strings.h>

static const char *header(struct MHD_Connection *c, const char *name)
{
    return MHD_lookup_connection_value(c, MHD_HEADER_KIND, name);
}

/* The headers a request may carry once, and how many times it did. */
struct head_count {
    int host, length, encoding;
};

static enum MHD_Result count_header(void *cls, enum MHD_ValueKind kind, const char *key,
                                    const char *value)
{
    (void)kind, (void)value;
    struct head_count *n = cls;
    n->host += strcasecmp(key, MHD_HTTP_HEADER_HOST) == 0;
    n->length += strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) == 0;
    n->encoding += strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING) == 0;
    return MHD_YES;
}

/*
 * Whether the request says where it goes or how long its body is in two
 * ways: two Host headers (RFC 9112 says 400), two Content-Length headers
 * (even equal), or one with Transfer-Encoding. libmicrohttpd picks one; a
 * proxy in front may have picked the other - checked another Host, read
 * the rest of the body as a second request (request smuggling). Refused
 * before the body is read, and the connection closed after the answer.
 */
int guard_ambiguous_head(struct MHD_Connection *c)
{
    struct head_count n = {0, 0, 0};
    MHD_get_connection_values(c, MHD_HEADER_KIND, count_header, &n);
    return n.host > 1 || n.length > 1 || (n.length && n.encoding);
}

/* Over the limit by its Content-Length: answer 413 before reading it. */
int guard_declared_too_large(struct MHD_Connection *c)
{
    const char *length = header(c, MHD_HTTP_HEADER_CONTENT_LENGTH);
    long long n;
    return length && (parse_bounded_int(length, 0, 1LL << 60, &n) != 0 || n > config.max_body);
}

/* Whether a browser says the request comes from another site: a
 * Sec-Fetch-Site other than same-origin or none (a typed address), or an
 * Origin other than this server's own (the scheme and the Host the request
 * was sent to). */
int guard_cross_site(struct MHD_Connection *c)
{
    const char *site = header(c, "Sec-Fetch-Site");
    if (site && strcmp(site, "same-origin") != 0 && strcmp(site, "none") != 0)
        return 1; /* cross-site, and same-site: another port or subdomain */
    const char *origin = header(c, "Origin"), *host = header(c, MHD_HTTP_HEADER_HOST);
    if (!origin)
        return 0;
    const char *rest = strncmp(origin, "http://", 7) == 0    ? origin + 7
                       : strncmp(origin, "https://", 8) == 0 ? origin + 8
                                                             : NULL;
    return !rest || !host || strcmp(rest, host) != 0;
}

/* Whether `given` is the admin token, comparing every byte whatever the
 * guess, so that the time taken says nothing about how close it was. */
static int token_matches(const char *given)
{
    const char *token = config.admin_token;
    size_t n = strlen(token), m = strlen(given);
    unsigned char diff = n != m;
    for (size_t i = 0; i < n; i++)
        diff |= (unsigned char)(token[i] ^ (i < m ? given[i] : 0));
    return diff == 0;
}

/* The scheme's name is case-insensitive (RFC 9110, 11.1). */
int guard_authorized(struct MHD_Connection *c)
{
    if (!config.admin_token[0])
        return 1;
    const char *auth = header(c, MHD_HTTP_HEADER_AUTHORIZATION);
    if (!auth || strncasecmp(auth, "Bearer ", 7) != 0)
        return 0;
    auth += 7;
    while (*auth == ' ')
        auth++;
    return token_matches(auth);
}

/* Whether `name` (of `len` bytes) is one of --allowed-hosts. */
static int allowed_name(const char *name, size_t len)
{
    for (const char *at = config.allowed_hosts; *at;) {
        size_t n = strcspn(at, ",");
        if (n == len && strncasecmp(at, name, len) == 0)
            return 1;
        at += n + (at[n] == ',');
    }
    return 0;
}

/*
 * Whether the Host header names this server. A page of any site whose name
 * its owner points at 127.0.0.1 once it has loaded (DNS rebinding) is, to
 * the browser, of that same site: Origin and Sec-Fetch-Site say nothing
 * wrong, but Host carries the page's name. So a Host must be an IP address
 * (a name was never involved), `localhost`, or one of --allowed-hosts; its
 * port is not checked, because a proxy in front passes on its own (the
 * stack's nginx, docker-compose's). A request with no Host at all comes
 * from no browser.
 */
int guard_host_allowed(struct MHD_Connection *c)
{
    const char *host = header(c, MHD_HTTP_HEADER_HOST);
    if (!host)
        return 1;
    char name[256];
    size_t len;
    if (host[0] == '[') { /* an IPv6 address, [::1]:8080 */
        len = strcspn(host + 1, "]");
        if (host[1 + len] != ']' || len >= sizeof name)
            return 0;
        memcpy(name, host + 1, len);
        name[len] = '\0';
        struct in6_addr a6;
        return inet_pton(AF_INET6, name, &a6) == 1;
    }
    len = strcspn(host, ":");
    if (len >= sizeof name)
        return 0;
    memcpy(name, host, len);
    name[len] = '\0';
    struct in_addr a4;
    return inet_pton(AF_INET, name, &a4) == 1 || strcasecmp(name, "localhost") == 0 ||
           allowed_name(name, len);
}

/* Whether `s` holds a control character. The query and the path are
 * decoded by guard_unescape() below, which makes an encoded NUL one too. */
static int has_control(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f)
            return 1;
    return 0;
}

int guard_has_control(const char *path, const struct query_arg *args, unsigned nargs)
{
    if (has_control(path))
        return 1;
    for (unsigned i = 0; i < nargs; i++)
        if (has_control(args[i].key) || (args[i].value && has_control(args[i].value)))
            return 1;
    return 0;
}

/*
 * libmicrohttpd's decoding of the path and the query, %HH, except that a
 * NUL it decodes becomes DEL: as a NUL it would cut the text short without
 * a word (`qty=1%00junk` read as 1), as DEL it is refused with a 400.
 */
size_t guard_unescape(void *cls, struct MHD_Connection *c, char *s)
{
    (void)cls, (void)c;
    size_t n = MHD_http_unescape(s);
    for (char *nul; (nul = memchr(s, '\0', n)) != NULL;)
        *nul = 0x7f;
    return n;
}
