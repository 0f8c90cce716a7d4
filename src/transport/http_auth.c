/* Bearer-token table (see http_auth.h). SHA-256 from nettle. */
#include "transport/http_auth.h"

#include <errno.h>
#include <nettle/sha2.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "lib/util.h"
#include "transport/http_jwt.h"

void http_auth_free(struct http_auth *a)
{
    for (size_t i = 0; i < a->len; i++)
        free(a->v[i].principal);
    free(a->v);
    a->v = NULL;
    a->len = 0;
}

static void sha256(const char *s, size_t len, uint8_t out[32])
{
    struct sha256_ctx c;
    sha256_init(&c);
    sha256_update(&c, len, (const uint8_t *)s);
    sha256_digest(&c, 32, out);
}

static void push(struct http_auth *a, const uint8_t digest[32], const char *principal, size_t plen)
{
    a->v = xrealloc(a->v, (a->len + 1) * sizeof(*a->v));
    memcpy(a->v[a->len].digest, digest, 32);
    a->v[a->len].principal = xmalloc(plen + 1);
    memcpy(a->v[a->len].principal, principal, plen);
    a->v[a->len].principal[plen] = '\0';
    a->len++;
}

/* The entry already holding this digest, or NULL: one token must name one principal, or which
 * one it maps to would depend on the order of the configuration. Not constant-time; it runs at
 * startup on the configuration's own tokens. */
static const struct http_auth_entry *entry_of_digest(const struct http_auth *a,
                                                     const uint8_t digest[32])
{
    for (size_t i = 0; i < a->len; i++)
        if (memcmp(a->v[i].digest, digest, 32) == 0)
            return &a->v[i];
    return NULL;
}

static bool parse_hash(const char *spec, size_t len, uint8_t out[32])
{
    if (len != 7 + 64 || strncasecmp(spec, "sha256:", 7) != 0)
        return false;
    for (size_t i = 0; i < 32; i++) {
        int hi = hex_digit(spec[7 + 2 * i]), lo = hex_digit(spec[8 + 2 * i]);
        if (hi < 0 || lo < 0)
            return false;
        out[i] = (uint8_t)(hi << 4 | lo);
    }
    return true;
}

int http_auth_add_hash(struct http_auth *a, const char *principal, const char *spec,
                       struct sbx_err *err)
{
    uint8_t d[32];
    if (!spec || !parse_hash(spec, strlen(spec), d))
        return sbx_fail(err, EINVAL, "auth token hash must be \"sha256:\" and 64 hex digits");
    const struct http_auth_entry *twin = entry_of_digest(a, d);
    if (twin)
        return sbx_fail(err, EINVAL, "auth token hash of %s is %s's already", principal,
                        twin->principal);
    push(a, d, principal, strlen(principal));
    return 0;
}

int http_auth_load_text(struct http_auth *a, const char *text, const char *name,
                        struct sbx_err *err)
{
    unsigned lineno = 0;
    size_t before = a->len; /* entries from elsewhere (http.auth_token_hashes) */
    for (const char *p = text; *p;) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        const char *next = nl ? nl + 1 : p + len;
        lineno++;
        while (len && (p[len - 1] == '\r' || p[len - 1] == ' ' || p[len - 1] == '\t'))
            len--;
        while (len && (*p == ' ' || *p == '\t')) {
            p++;
            len--;
        }
        if (len == 0 || *p == '#') {
            p = next;
            continue;
        }
        const char *colon = memchr(p, ':', len);
        if (!colon || colon == p || colon + 1 == p + len)
            return sbx_fail(err, EINVAL, "%s:%u: expected \"principal:token\"", name, lineno);
        size_t plen = (size_t)(colon - p);
        const char *tok = colon + 1;
        size_t tlen = len - plen - 1;
        uint8_t d[32];
        if (tlen > 7 && strncasecmp(tok, "sha256:", 7) == 0) {
            if (!parse_hash(tok, tlen, d))
                return sbx_fail(err, EINVAL, "%s:%u: \"sha256:\" needs 64 hex digits", name,
                                lineno);
        } else {
            sha256(tok, tlen, d);
        }
        /* A principal may have several tokens here (while one replaces another), but not one
         * of a principal named elsewhere: "token-1" would share the sandboxes of the first
         * http.auth_token_hashes entry. */
        for (size_t i = 0; i < before; i++)
            if (strlen(a->v[i].principal) == plen && memcmp(a->v[i].principal, p, plen) == 0)
                return sbx_fail(err, EINVAL,
                                "%s:%u: principal %s is the name of an http.auth_token_hashes "
                                "entry already",
                                name, lineno, a->v[i].principal);
        const struct http_auth_entry *twin = entry_of_digest(a, d);
        if (twin && (strlen(twin->principal) != plen || memcmp(twin->principal, p, plen) != 0))
            return sbx_fail(err, EINVAL, "%s:%u: this token is %s's already", name, lineno,
                            twin->principal);
        push(a, d, p, plen);
        p = next;
    }
    return 0;
}

const char *http_auth_check(const struct http_auth *a, const char *token, size_t len)
{
    if (!token || len == 0)
        return NULL;
    uint8_t d[32];
    sha256(token, len, d);
    const char *found = NULL;
    /* Visit every entry and fold differences without early exit. */
    for (size_t i = 0; i < a->len; i++) {
        unsigned diff = 0;
        for (size_t j = 0; j < 32; j++)
            diff |= (unsigned)(a->v[i].digest[j] ^ d[j]);
        uintptr_t hit = (uintptr_t)0 - (uintptr_t)(diff == 0);
        found = (const char *)(((uintptr_t)found & ~hit) | ((uintptr_t)a->v[i].principal & hit));
    }
    return found;
}

const char *http_auth_bearer(const char *header, size_t *len)
{
    if (!header || strncasecmp(header, "Bearer ", 7) != 0)
        return NULL;
    const char *t = header + 7;
    while (*t == ' ')
        t++;
    size_t n = strlen(t);
    while (n && t[n - 1] == ' ')
        n--;
    if (n == 0)
        return NULL;
    *len = n;
    return t;
}

const char *http_auth_principal(const struct http_auth *a, const struct http_jwt *jwt,
                                const char *header, const char *audience, int64_t now, char *buf,
                                size_t cap, const char **why)
{
    size_t len = 0;
    const char *tok = http_auth_bearer(header, &len);
    *why = NULL;
    if (!tok)
        return NULL;
    /* The static table first: it is a constant-time digest compare, and a configured token
     * stays usable whatever its shape. */
    const char *p = http_auth_check(a, tok, len);
    if (p)
        return p;
    if (jwt && http_jwt_is_compact(tok, len)) {
        enum http_jwt_status st = http_jwt_verify(jwt, tok, len, audience, now, buf, cap);
        if (st == HTTP_JWT_OK)
            return buf;
        *why = http_jwt_status_text(st);
        return NULL;
    }
    *why = "unknown bearer token";
    return NULL;
}
