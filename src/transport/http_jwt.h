/* JWT access tokens for the HTTP transport (RFC 7519, profiled by RFC 9068): a JWS compact
 * serialization signed by the authorization server, whose public keys come from a JWKS (a file
 * or a URL, kept current by http_jwks.c). Pure: the caller passes the JWKS's text, the current
 * time and the audience, so every rule is unit-tested without a network or a clock.
 *
 * A token is accepted when, in this order: it is at most HTTP_JWT_MAX_BYTES of three
 * base64url parts (strict alphabet, no padding, canonical trailing bits); the header is a
 * JSON object without duplicate names, "crit" or "b64", whose "alg" is on the configured
 * allow-list (only asymmetric algorithms can be: never "none", never HMAC); its "kid", when
 * present, names a loaded key (without one, every key that fits the alg is tried); the key
 * fits the alg (RSA for RS and PS, the matching curve for ES, an Ed25519 or Ed448 key for
 * EdDSA, and the key's own "alg" if it has one); the library (OpenSSL for EdDSA) verifies the
 * signature; the payload is a JSON object without duplicate names; "exp" is present and not
 * past, "nbf" and "iat" are not in the future (each with the configured leeway); "iss" equals
 * the issuer; "aud" is, or is an array containing, the audience; and the principal claim is a
 * string of 1 to HTTP_JWT_CLAIM_MAX safe characters. The principal is that value prefixed with
 * "jwt:", so that no token principal (tokens-file principals never contain ':') can be the same
 * as a JWT principal. */
#ifndef SBX_TRANSPORT_HTTP_JWT_H
#define SBX_TRANSPORT_HTTP_JWT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/err.h"

#define HTTP_JWT_MAX_BYTES 8192
#define HTTP_JWT_MAX_KEYS  64
/* A token without a kid is tried against this many keys of its algorithm at most: each try
 * is a signature check an unauthenticated client could otherwise multiply by 64. */
#define HTTP_JWT_KIDLESS_TRIES 4
#define HTTP_JWT_CLAIM_MAX     128
#define HTTP_JWT_PRINCIPAL_MAX (4 + HTTP_JWT_CLAIM_MAX + 1)

enum http_jwt_status {
    HTTP_JWT_OK = 0,
    HTTP_JWT_TOO_LARGE,
    HTTP_JWT_NOT_COMPACT,
    HTTP_JWT_BAD_BASE64,
    HTTP_JWT_BAD_JSON,
    HTTP_JWT_BAD_HEADER,
    HTTP_JWT_ALG_NOT_ALLOWED,
    HTTP_JWT_UNKNOWN_KID,
    HTTP_JWT_NO_KEY,
    HTTP_JWT_KID_NEEDED,
    HTTP_JWT_KEY_MISMATCH,
    HTTP_JWT_BAD_SIGNATURE,
    HTTP_JWT_NO_KEY_VERIFIES, /* a token without a kid that none of the keys tried verifies */
    HTTP_JWT_BAD_CLAIM,
    HTTP_JWT_NO_EXP,
    HTTP_JWT_EXPIRED,
    HTTP_JWT_NOT_YET_VALID,
    HTTP_JWT_ISSUED_IN_FUTURE,
    HTTP_JWT_WRONG_ISSUER,
    HTTP_JWT_WRONG_AUDIENCE,
    HTTP_JWT_BAD_PRINCIPAL,
};

struct http_jwt_config {
    const char *issuer;          /* required "iss" */
    const char *principal_claim; /* "sub" */
    const char *const *algorithms;
    size_t n_algorithms;
    uint32_t leeway_s; /* clock skew allowed on exp, nbf and iat */
};

struct http_jwt;

/* Loads the keys of a JWKS document (`name` is used in messages). Keys that cannot verify
 * signatures here (other types, "use": "enc", key_ops without "verify", an "alg" off the
 * allow-list, RSA under 2048 bits, other curves) are skipped; none left, two with one kid,
 * more than HTTP_JWT_MAX_KEYS, or a bad configuration are errors. */
int http_jwt_new(const struct http_jwt_config *cfg, const char *jwks, size_t len, const char *name,
                 struct http_jwt **out, struct sbx_err *err);
void http_jwt_free(struct http_jwt *v);
size_t http_jwt_key_count(const struct http_jwt *v);

/* Shaped like a JWS compact serialization: exactly two dots. Such a bearer token is checked
 * as a JWT (and refused with a reason) rather than looked up as a static token. */
bool http_jwt_is_compact(const char *token, size_t len);

/* Checks a token as described above at time `now` (seconds since the epoch). On HTTP_JWT_OK
 * writes the principal (at most HTTP_JWT_PRINCIPAL_MAX bytes with the NUL) to `principal`. */
enum http_jwt_status http_jwt_verify(const struct http_jwt *v, const char *token, size_t len,
                                     const char *audience, int64_t now, char *principal,
                                     size_t cap);
/* The claims checks alone, on a payload's JSON text (already authenticated by the caller). */
enum http_jwt_status http_jwt_check_claims(const struct http_jwt *v, const char *json, size_t len,
                                           const char *audience, int64_t now, char *principal,
                                           size_t cap);
/* A short reason for WWW-Authenticate's error_description: plain ASCII, no quotes, and never
 * any part of the token. */
const char *http_jwt_status_text(enum http_jwt_status s);
/* Whether a refusal (a status text) may be a token signed by a key the identity provider has
 * published since the keys were fetched: one under a kid not known, or one without a kid that no
 * key verifies (or none has its algorithm). */
bool http_jwt_refusal_wants_new_keys(const char *why);

#endif
