/* The JWKS document of http.jwt_jwks_url, fetched with libcurl on a thread of its own so that
 * the event loop never waits on the network. http_jwks.c fetches it once at startup with
 * jwks_fetch_once, then starts the fetcher: it fetches again every refresh_s seconds, and early
 * (at most every JWKS_FETCH_MIN_GAP_S) when asked to because a token named a key id that the
 * keys in force lack, as happens when the identity provider rotates its keys. A document that
 * differs from the last one handed over waits for the loop thread to take it. A failed fetch
 * hands nothing over, so the keys in force stay; it is logged once per new reason. */
#ifndef SBX_TRANSPORT_HTTP_JWKS_FETCH_H
#define SBX_TRANSPORT_HTTP_JWKS_FETCH_H

#include <stddef.h>
#include <stdint.h>

#include "lib/err.h"

#define JWKS_FETCH_MAX_BYTES (1u << 20)
#define JWKS_FETCH_MIN_GAP_S 30
#define JWKS_FETCH_TIMEOUT_S 10

struct jwks_fetch;

/* https:// to anywhere, or http:// to a loopback address only: keys fetched in the clear from
 * elsewhere could be swapped on the way. */
int jwks_url_check(const char *url, struct sbx_err *err);
/* Where and how often to fetch. */
struct jwks_fetch_config {
    const char *url;
    const char *ca_file; /* PEM CA certificates to trust for https; NULL or "": the system's */
    uint32_t refresh_s;  /* 0: no periodic fetch, only early ones */
    uint32_t min_gap_s;  /* an early fetch waits this long after the one before */
};

/* One GET of the URL: 200 with a body of at most JWKS_FETCH_MAX_BYTES, into *text
 * (NUL-ended). */
int jwks_fetch_once(const struct jwks_fetch_config *c, char **text, size_t *len,
                    struct sbx_err *err);
/* Starts the fetcher; `first` is the document already in force (copied). */
int jwks_fetch_start(const struct jwks_fetch_config *c, const char *first, size_t first_len,
                     struct jwks_fetch **out, struct sbx_err *err);
/* The newest document fetched since the last call, owned by the caller, or NULL. */
char *jwks_fetch_take(struct jwks_fetch *f, size_t *len);
/* Asks for an early fetch; cheap and non-blocking, rate-limited by the fetcher. */
void jwks_fetch_request(struct jwks_fetch *f);
/* Stops the fetcher (an ongoing transfer is aborted) and frees it. */
void jwks_fetch_stop(struct jwks_fetch *f);

#endif
