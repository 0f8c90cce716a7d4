/* JWT access tokens: keys are generated and tokens signed here with the same library the
 * server verifies with, then every rule is checked where it accepts and where it refuses. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <jose/jose.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/config.h"
#include "lib/util.h"
#include "transport/http_auth.h"
#include "transport/http_jwks.h"
#include "transport/http_jwks_fetch.h"
#include "transport/http_jwt.h"

#define ISS "https://login.example.test"
#define AUD "http://127.0.0.1:8080/mcp"
#define NOW 1700000000

static json_t *rsa_key, *ec_key, *rsa_other; /* private JWKs */
static char *jwks_text;                      /* public: kid "rsa-1" and "ec-1" */

static const char *const default_algs[] = {"RS256", "ES256"};

static json_t *generate(const char *alg)
{
    json_t *k = json_pack("{s:s}", "alg", alg);
    assert_true(jose_jwk_gen(NULL, k));
    return k;
}

static json_t *public_of(const json_t *priv, const char *kid)
{
    json_t *p = json_deep_copy(priv);
    assert_true(jose_jwk_pub(NULL, p));
    json_object_set_new(p, "kid", json_string(kid));
    return p;
}

static int setup(void **state)
{
    (void)state;
    rsa_key = generate("RS256");
    ec_key = generate("ES256");
    rsa_other = generate("RS256");
    json_t *jwks =
        json_pack("{s:[o, o]}", "keys", public_of(rsa_key, "rsa-1"), public_of(ec_key, "ec-1"));
    jwks_text = json_dumps(jwks, JSON_COMPACT);
    json_decref(jwks);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    json_decref(rsa_key);
    json_decref(ec_key);
    json_decref(rsa_other);
    free(jwks_text);
    return 0;
}

static struct http_jwt *verifier_with(const char *const *algs, size_t n, const char *claim,
                                      const char *jwks)
{
    struct http_jwt_config c = {
        .issuer = ISS,
        .principal_claim = claim,
        .algorithms = algs,
        .n_algorithms = n,
        .leeway_s = 60,
    };
    struct http_jwt *v = NULL;
    struct sbx_err err = {0};
    assert_int_equal(http_jwt_new(&c, jwks, strlen(jwks), "test.jwks", &v, &err), 0);
    return v;
}

static struct http_jwt *verifier(void)
{
    return verifier_with(default_algs, 2, "sub", jwks_text);
}

/* protected "." payload "." signature, signed by the library over exactly those bytes. */
static char *sign_raw(const json_t *key, json_t *header, const char *payload_text)
{
    json_t *jws = json_pack("{s:o}", "payload", jose_b64_enc(payload_text, strlen(payload_text)));
    json_t *sig = json_pack("{s:o}", "protected", header);
    assert_true(jose_jws_sig(NULL, jws, sig, key));
    json_decref(sig);
    char *out = xasprintf("%s.%s.%s", json_string_value(json_object_get(jws, "protected")),
                          json_string_value(json_object_get(jws, "payload")),
                          json_string_value(json_object_get(jws, "signature")));
    json_decref(jws);
    return out;
}

static char *sign(const json_t *key, const char *alg, const char *kid, json_t *claims)
{
    json_t *hdr = kid ? json_pack("{s:s, s:s, s:s}", "alg", alg, "typ", "at+jwt", "kid", kid)
                      : json_pack("{s:s, s:s}", "alg", alg, "typ", "at+jwt");
    char *text = json_dumps(claims, JSON_COMPACT);
    json_decref(claims);
    char *tok = sign_raw(key, hdr, text);
    free(text);
    return tok;
}

/* Claims that pass, for principal `sub`. */
static json_t *claims(const char *sub)
{
    return json_pack("{s:s, s:s, s:s, s:I, s:I}", "iss", ISS, "aud", AUD, "sub", sub, "exp",
                     (json_int_t)NOW + 300, "iat", (json_int_t)NOW);
}

static char *claims_text(const char *sub)
{
    json_t *c = claims(sub);
    char *text = json_dumps(c, JSON_COMPACT);
    json_decref(c);
    return text;
}

static json_t *with(json_t *c, const char *name, json_t *value)
{
    if (value)
        json_object_set_new(c, name, value);
    else
        json_object_del(c, name);
    return c;
}

static enum http_jwt_status check(const struct http_jwt *v, const char *tok, char *principal)
{
    return http_jwt_verify(v, tok, strlen(tok), AUD, NOW, principal, HTTP_JWT_PRINCIPAL_MAX);
}

/* check(), for a token used once: it is freed. */
static enum http_jwt_status check_once(const struct http_jwt *v, char *tok)
{
    char p[HTTP_JWT_PRINCIPAL_MAX];
    enum http_jwt_status st = check(v, tok, p);
    free(tok);
    return st;
}

/* Signs `c` with the RSA key (kid rsa-1) and checks it. */
static enum http_jwt_status rs(const struct http_jwt *v, json_t *c)
{
    char p[HTTP_JWT_PRINCIPAL_MAX];
    char *tok = sign(rsa_key, "RS256", "rsa-1", c);
    enum http_jwt_status st = check(v, tok, p);
    free(tok);
    return st;
}

static void valid_rs256_and_es256_yield_the_principal(void **state)
{
    (void)state;
    struct http_jwt *v = verifier();
    assert_int_equal(http_jwt_key_count(v), 2);
    char p[HTTP_JWT_PRINCIPAL_MAX];
    char *tok = sign(rsa_key, "RS256", "rsa-1", claims("alice"));
    assert_true(http_jwt_is_compact(tok, strlen(tok)));
    assert_int_equal(check(v, tok, p), HTTP_JWT_OK);
    assert_string_equal(p, "jwt:alice");
    free(tok);
    tok = sign(ec_key, "ES256", "ec-1", claims("auth0|bob@example.test"));
    assert_int_equal(check(v, tok, p), HTTP_JWT_OK);
    assert_string_equal(p, "jwt:auth0|bob@example.test");
    free(tok);
    /* Without a kid, the key that fits the alg is found. */
    tok = sign(ec_key, "ES256", NULL, claims("carol"));
    assert_int_equal(check(v, tok, p), HTTP_JWT_OK);
    assert_string_equal(p, "jwt:carol");
    free(tok);
    http_jwt_free(v);
}

static void expiry_with_leeway(void **state)
{
    (void)state;
    struct http_jwt *v = verifier();
    assert_int_equal(rs(v, with(claims("a"), "exp", json_integer(NOW - 61))), HTTP_JWT_EXPIRED);
    assert_int_equal(rs(v, with(claims("a"), "exp", json_integer(NOW - 60))), HTTP_JWT_EXPIRED);
    assert_int_equal(rs(v, with(claims("a"), "exp", json_integer(NOW - 30))), HTTP_JWT_OK);
    assert_int_equal(rs(v, with(claims("a"), "exp", json_real(NOW + 0.5))), HTTP_JWT_OK);
    assert_int_equal(rs(v, with(claims("a"), "exp", NULL)), HTTP_JWT_NO_EXP);
    assert_int_equal(rs(v, with(claims("a"), "exp", json_string("2099"))), HTTP_JWT_BAD_CLAIM);
    http_jwt_free(v);
}

static void not_yet_valid_and_issued_in_the_future(void **state)
{
    (void)state;
    struct http_jwt *v = verifier();
    assert_int_equal(rs(v, with(claims("a"), "nbf", json_integer(NOW + 61))),
                     HTTP_JWT_NOT_YET_VALID);
    assert_int_equal(rs(v, with(claims("a"), "nbf", json_integer(NOW + 59))), HTTP_JWT_OK);
    assert_int_equal(rs(v, with(claims("a"), "nbf", json_integer(NOW - 10))), HTTP_JWT_OK);
    assert_int_equal(rs(v, with(claims("a"), "iat", json_integer(NOW + 120))),
                     HTTP_JWT_ISSUED_IN_FUTURE);
    assert_int_equal(rs(v, with(claims("a"), "iat", json_integer(NOW + 30))), HTTP_JWT_OK);
    assert_int_equal(rs(v, with(claims("a"), "nbf", json_true())), HTTP_JWT_BAD_CLAIM);
    http_jwt_free(v);
}

static void issuer_must_match(void **state)
{
    (void)state;
    struct http_jwt *v = verifier();
    assert_int_equal(rs(v, with(claims("a"), "iss", json_string(ISS "/other"))),
                     HTTP_JWT_WRONG_ISSUER);
    assert_int_equal(rs(v, with(claims("a"), "iss", NULL)), HTTP_JWT_WRONG_ISSUER);
    assert_int_equal(rs(v, with(claims("a"), "iss", json_integer(1))), HTTP_JWT_BAD_CLAIM);
    http_jwt_free(v);
}

static void audience_string_or_member(void **state)
{
    (void)state;
    struct http_jwt *v = verifier();
    assert_int_equal(rs(v, with(claims("a"), "aud", json_string("https://other.test/mcp"))),
                     HTTP_JWT_WRONG_AUDIENCE);
    assert_int_equal(rs(v, with(claims("a"), "aud", json_pack("[s, s]", "x", AUD))), HTTP_JWT_OK);
    assert_int_equal(rs(v, with(claims("a"), "aud", json_pack("[s, i]", "x", 1))),
                     HTTP_JWT_WRONG_AUDIENCE);
    assert_int_equal(rs(v, with(claims("a"), "aud", json_array())), HTTP_JWT_WRONG_AUDIENCE);
    assert_int_equal(rs(v, with(claims("a"), "aud", NULL)), HTTP_JWT_WRONG_AUDIENCE);
    /* No audience from the caller: nothing can match. */
    char p[HTTP_JWT_PRINCIPAL_MAX];
    char *tok = sign(rsa_key, "RS256", "rsa-1", claims("a"));
    assert_int_equal(http_jwt_verify(v, tok, strlen(tok), NULL, NOW, p, sizeof(p)),
                     HTTP_JWT_WRONG_AUDIENCE);
    free(tok);
    http_jwt_free(v);
}

/* `token`'s header and signature around `donor`'s payload must fail; frees both. */
static void splice_is_refused(const struct http_jwt *v, char *token, char *donor)
{
    const char *t1 = strchr(token, '.'), *t2 = strrchr(token, '.');
    const char *d1 = strchr(donor, '.'), *d2 = strrchr(donor, '.');
    char *spliced = xasprintf("%.*s%.*s%s", (int)(t1 - token), token, (int)(d2 - d1), d1, t2);
    char p[HTTP_JWT_PRINCIPAL_MAX];
    assert_int_equal(check(v, spliced, p), HTTP_JWT_BAD_SIGNATURE);
    free(spliced);
    free(token);
    free(donor);
}

static void bad_signature_and_tampered_payload(void **state)
{
    (void)state;
    struct http_jwt *v = verifier();
    char p[HTTP_JWT_PRINCIPAL_MAX];
    /* Another key under the right kid. */
    char *tok = sign(rsa_other, "RS256", "rsa-1", claims("a"));
    assert_int_equal(check(v, tok, p), HTTP_JWT_BAD_SIGNATURE);
    free(tok);
    /* One signature character changed. */
    tok = sign(ec_key, "ES256", "ec-1", claims("a"));
    char *sig = strrchr(tok, '.') + 1;
    sig[0] = sig[0] == 'A' ? 'B' : 'A';
    assert_int_equal(check(v, tok, p), HTTP_JWT_BAD_SIGNATURE);
    free(tok);
    /* The payload of another token spliced in under a valid signature. */
    char *alice = sign(rsa_key, "RS256", "rsa-1", claims("alice"));
    char *mallory = sign(rsa_key, "RS256", "rsa-1", claims("mallory"));
    assert_int_equal(check(v, alice, p), HTTP_JWT_OK);
    splice_is_refused(v, alice, mallory);
    /* No signature at all. */
    tok = sign(rsa_key, "RS256", "rsa-1", claims("a"));
    *(strrchr(tok, '.') + 1) = '\0';
    assert_int_equal(check(v, tok, p), HTTP_JWT_BAD_SIGNATURE);
    free(tok);
    http_jwt_free(v);
}

static void key_choice(void **state)
{
    (void)state;
    struct http_jwt *v = verifier();
    char p[HTTP_JWT_PRINCIPAL_MAX];
    char *tok = sign(rsa_key, "RS256", "rsa-2", claims("a"));
    assert_int_equal(check(v, tok, p), HTTP_JWT_UNKNOWN_KID);
    free(tok);
    /* An RSA signature presented under the EC key's kid. */
    tok = sign(rsa_key, "RS256", "ec-1", claims("a"));
    assert_int_equal(check(v, tok, p), HTTP_JWT_KEY_MISMATCH);
    free(tok);
    /* Without a kid and without a key of the alg's type. */
    json_t *only_ec = json_pack("{s:[o]}", "keys", public_of(ec_key, "ec-1"));
    char *text = json_dumps(only_ec, JSON_COMPACT);
    json_decref(only_ec);
    struct http_jwt *ec_only = verifier_with(default_algs, 2, "sub", text);
    free(text);
    tok = sign(rsa_key, "RS256", NULL, claims("a"));
    assert_int_equal(check(ec_only, tok, p), HTTP_JWT_NO_KEY);
    free(tok);
    http_jwt_free(ec_only);
    /* Without a kid and signed by a key not in the set: told apart from a forgery under a known
     * kid, since a newly published key would do the same; each may be fixed by new keys. */
    assert_int_equal(check_once(v, sign(rsa_other, "RS256", NULL, claims("a"))),
                     HTTP_JWT_NO_KEY_VERIFIES);
    assert_int_equal(check_once(v, sign(rsa_other, "RS256", "rsa-1", claims("a"))),
                     HTTP_JWT_BAD_SIGNATURE);
    assert_true(http_jwt_refusal_wants_new_keys(http_jwt_status_text(HTTP_JWT_UNKNOWN_KID)));
    assert_true(http_jwt_refusal_wants_new_keys(http_jwt_status_text(HTTP_JWT_NO_KEY)));
    assert_true(http_jwt_refusal_wants_new_keys(http_jwt_status_text(HTTP_JWT_NO_KEY_VERIFIES)));
    assert_false(http_jwt_refusal_wants_new_keys(http_jwt_status_text(HTTP_JWT_BAD_SIGNATURE)));
    assert_false(http_jwt_refusal_wants_new_keys(http_jwt_status_text(HTTP_JWT_EXPIRED)));
    assert_false(http_jwt_refusal_wants_new_keys(NULL));
    /* Without a kid, a token is tried against HTTP_JWT_KIDLESS_TRIES keys of its algorithm at
     * most: past that, each request would cost up to 64 signature checks. */
    for (int keys = HTTP_JWT_KIDLESS_TRIES; keys <= HTTP_JWT_KIDLESS_TRIES + 1; keys++) {
        json_t *set = json_pack("{s:[]}", "keys");
        for (int i = 0; i < keys; i++) {
            char kid[16];
            snprintf(kid, sizeof(kid), "ec-%d", i);
            json_array_append_new(json_object_get(set, "keys"), public_of(ec_key, kid));
        }
        text = json_dumps(set, JSON_COMPACT);
        json_decref(set);
        struct http_jwt *many = verifier_with(default_algs, 2, "sub", text);
        free(text);
        tok = sign(ec_key, "ES256", NULL, claims("a"));
        assert_int_equal(check(many, tok, p),
                         keys > HTTP_JWT_KIDLESS_TRIES ? HTTP_JWT_KID_NEEDED : HTTP_JWT_OK);
        free(tok);
        tok = sign(ec_key, "ES256", "ec-0", claims("a")); /* with a kid: one try, whatever */
        assert_int_equal(check(many, tok, p), HTTP_JWT_OK);
        free(tok);
        http_jwt_free(many);
    }
    /* A key's own "alg" pins it; without one, an ES alg still needs its own curve. */
    json_t *unpinned = public_of(ec_key, "ec-free");
    json_object_del(unpinned, "alg");
    json_t *keys = json_pack("{s:[o, o]}", "keys", public_of(rsa_key, "rsa-1"), unpinned);
    text = json_dumps(keys, JSON_COMPACT);
    json_decref(keys);
    static const char *const more[] = {"RS256", "PS256", "ES256", "ES384"};
    struct http_jwt *wide = verifier_with(more, 4, "sub", text);
    free(text);
    json_t *any_rsa = json_deep_copy(rsa_key); /* José signs only the key's own alg */
    json_object_del(any_rsa, "alg");
    tok = sign(any_rsa, "PS256", "rsa-1", claims("a"));
    json_decref(any_rsa);
    assert_int_equal(check(wide, tok, p), HTTP_JWT_KEY_MISMATCH);
    free(tok);
    json_t *p384 = generate("ES384");
    tok = sign(p384, "ES384", "ec-free", claims("a"));
    json_decref(p384);
    assert_int_equal(check(wide, tok, p), HTTP_JWT_KEY_MISMATCH);
    free(tok);
    tok = sign(ec_key, "ES256", "ec-free", claims("a"));
    assert_int_equal(check(wide, tok, p), HTTP_JWT_OK);
    free(tok);
    http_jwt_free(wide);
    http_jwt_free(v);
}

/* The signing input: header and claims, each base64url, joined by a dot. */
static char *signing_input(const char *header_json, const char *claims_json)
{
    json_t *h = jose_b64_enc(header_json, strlen(header_json));
    json_t *c = jose_b64_enc(claims_json, strlen(claims_json));
    char *input = xasprintf("%s.%s", json_string_value(h), json_string_value(c));
    json_decref(h);
    json_decref(c);
    return input;
}

static char *unsigned_token(const char *header_json, const char *sig)
{
    char *c = claims_text("a");
    char *input = signing_input(header_json, c);
    char *tok = xasprintf("%s.%s", input, sig);
    free(input);
    free(c);
    return tok;
}

static void alg_none_and_hmac_confusion_are_refused(void **state)
{
    (void)state;
    struct http_jwt *v = verifier();
    char p[HTTP_JWT_PRINCIPAL_MAX];
    char *tok = unsigned_token("{\"alg\":\"none\"}", "");
    assert_int_equal(check(v, tok, p), HTTP_JWT_ALG_NOT_ALLOWED);
    free(tok);
    tok = unsigned_token("{\"typ\":\"JWT\"}", "");
    assert_int_equal(check(v, tok, p), HTTP_JWT_BAD_HEADER);
    free(tok);
    /* HS256 keyed with the bytes of the published RSA key, as a confused verifier would. */
    json_t *pub = public_of(rsa_key, "rsa-1");
    char *pub_text = json_dumps(pub, JSON_COMPACT);
    json_decref(pub);
    json_t *oct =
        json_pack("{s:s, s:o}", "kty", "oct", "k", jose_b64_enc(pub_text, strlen(pub_text)));
    free(pub_text);
    char *text = claims_text("a");
    tok = sign_raw(oct, json_pack("{s:s, s:s}", "alg", "HS256", "kid", "rsa-1"), text);
    assert_int_equal(check(v, tok, p), HTTP_JWT_ALG_NOT_ALLOWED);
    free(tok);
    free(text);
    json_decref(oct);
    /* An allowed alg that this verifier does not list. */
    static const char *const rs_only[] = {"RS256"};
    struct http_jwt *strict = verifier_with(rs_only, 1, "sub", jwks_text);
    tok = sign(ec_key, "ES256", "ec-1", claims("a"));
    assert_int_equal(check(strict, tok, p), HTTP_JWT_ALG_NOT_ALLOWED);
    assert_int_equal(check(v, tok, p), HTTP_JWT_OK);
    free(tok);
    http_jwt_free(strict);
    http_jwt_free(v);
}

static void header_rules(void **state)
{
    (void)state;
    struct http_jwt *v = verifier();
    char p[HTTP_JWT_PRINCIPAL_MAX];
    char *text = claims_text("a");
    char *tok = sign_raw(rsa_key,
                         json_pack("{s:s, s:s, s:[s], s:i}", "alg", "RS256", "kid", "rsa-1", "crit",
                                   "exp", "exp", 1),
                         text);
    assert_int_equal(check(v, tok, p), HTTP_JWT_BAD_HEADER);
    free(tok);
    tok = sign_raw(rsa_key, json_pack("{s:s, s:i}", "alg", "RS256", "kid", 7), text);
    assert_int_equal(check(v, tok, p), HTTP_JWT_BAD_HEADER);
    free(tok);
    tok = sign_raw(rsa_key, json_pack("{s:s, s:s}", "alg", "RS256", "kid", "rsa-1"), text);
    assert_int_equal(check(v, tok, p), HTTP_JWT_OK);
    free(tok);
    free(text);
    /* Duplicate names: which "sub" would count is up to the parser, so neither does. */
    tok = sign_raw(rsa_key, json_pack("{s:s, s:s}", "alg", "RS256", "kid", "rsa-1"),
                   "{\"iss\":\"" ISS "\",\"aud\":\"" AUD "\",\"exp\":1700000300,"
                   "\"sub\":\"alice\",\"sub\":\"admin\"}");
    assert_int_equal(check(v, tok, p), HTTP_JWT_BAD_JSON);
    free(tok);
    tok = unsigned_token("{\"alg\":\"RS256\",\"alg\":\"none\"}", "AAAA");
    assert_int_equal(check(v, tok, p), HTTP_JWT_BAD_JSON);
    free(tok);
    tok = unsigned_token("[\"RS256\"]", "AAAA");
    assert_int_equal(check(v, tok, p), HTTP_JWT_BAD_JSON);
    free(tok);
    http_jwt_free(v);
}

static void malformed_shapes(void **state)
{
    (void)state;
    struct http_jwt *v = verifier();
    char p[HTTP_JWT_PRINCIPAL_MAX];
    char *good = sign(rsa_key, "RS256", "rsa-1", claims("a"));
    size_t n = strlen(good);
    assert_int_equal(check(v, good, p), HTTP_JWT_OK);
    /* Not base64url: '+', '/', padding, a stray length, a bit set past the end. */
    char *bad = xstrdup(good);
    bad[2] = '+';
    assert_int_equal(check(v, bad, p), HTTP_JWT_BAD_BASE64);
    bad[2] = '/';
    assert_int_equal(check(v, bad, p), HTTP_JWT_BAD_BASE64);
    free(bad);
    bad = xasprintf("%s=", good);
    assert_int_equal(check(v, bad, p), HTTP_JWT_BAD_BASE64);
    free(bad);
    assert_int_equal(check(v, "e30.e30.A", p), HTTP_JWT_BAD_BASE64); /* 4k+1 characters */
    /* "e30" is "{}"; "e31" has the same value but non-zero trailing bits. */
    bad = xasprintf("e31%s", strchr(good, '.'));
    assert_int_equal(check(v, bad, p), HTTP_JWT_BAD_BASE64);
    free(bad);
    bad = xasprintf("e30%s", strchr(good, '.'));
    assert_int_equal(check(v, bad, p), HTTP_JWT_BAD_HEADER);
    free(bad);
    /* Parts. */
    bad = xasprintf("%s.AAAA", good);
    assert_false(http_jwt_is_compact(bad, strlen(bad)));
    assert_int_equal(check(v, bad, p), HTTP_JWT_NOT_COMPACT);
    free(bad);
    bad = xstrndup(good, (size_t)(strrchr(good, '.') - good));
    assert_int_equal(check(v, bad, p), HTTP_JWT_NOT_COMPACT);
    free(bad);
    assert_int_equal(check(v, "", p), HTTP_JWT_NOT_COMPACT);
    assert_int_equal(check(v, "..", p), HTTP_JWT_BAD_JSON);
    /* Size: the limit is on the whole token, before any decoding. */
    char *big = xmalloc(HTTP_JWT_MAX_BYTES + 2);
    memset(big, 'A', HTTP_JWT_MAX_BYTES + 1);
    big[HTTP_JWT_MAX_BYTES + 1] = '\0';
    memcpy(big, good, n);
    assert_int_equal(check(v, big, p), HTTP_JWT_TOO_LARGE);
    big[HTTP_JWT_MAX_BYTES] = '\0';
    assert_int_not_equal(check(v, big, p), HTTP_JWT_TOO_LARGE);
    assert_int_not_equal(check(v, big, p), HTTP_JWT_OK);
    free(big);
    free(good);
    http_jwt_free(v);
}

static void principal_claim_rules(void **state)
{
    (void)state;
    struct http_jwt *v = verifier();
    assert_int_equal(rs(v, claims("has space")), HTTP_JWT_BAD_PRINCIPAL);
    assert_int_equal(rs(v, claims("quote\"")), HTTP_JWT_BAD_PRINCIPAL);
    assert_int_equal(rs(v, claims("caf\xc3\xa9")), HTTP_JWT_BAD_PRINCIPAL);
    assert_int_equal(rs(v, claims("")), HTTP_JWT_BAD_PRINCIPAL);
    assert_int_equal(rs(v, with(claims("a"), "sub", NULL)), HTTP_JWT_BAD_PRINCIPAL);
    assert_int_equal(rs(v, with(claims("a"), "sub", json_integer(42))), HTTP_JWT_BAD_PRINCIPAL);
    char name[HTTP_JWT_CLAIM_MAX + 2];
    memset(name, 'x', sizeof(name) - 1);
    name[HTTP_JWT_CLAIM_MAX + 1] = '\0';
    assert_int_equal(rs(v, claims(name)), HTTP_JWT_BAD_PRINCIPAL);
    name[HTTP_JWT_CLAIM_MAX] = '\0';
    assert_int_equal(rs(v, claims(name)), HTTP_JWT_OK);
    assert_int_equal(rs(v, claims("0b6f1e3a-4c1d-4a8e-9f3b-2a1c5d7e9f01")), HTTP_JWT_OK);
    http_jwt_free(v);
    /* Another claim names the principal when configured. */
    v = verifier_with(default_algs, 2, "email", jwks_text);
    char p[HTTP_JWT_PRINCIPAL_MAX];
    char *tok =
        sign(rsa_key, "RS256", "rsa-1", with(claims("a"), "email", json_string("d@e.test")));
    assert_int_equal(check(v, tok, p), HTTP_JWT_OK);
    assert_string_equal(p, "jwt:d@e.test");
    free(tok);
    assert_int_equal(rs(v, claims("a")), HTTP_JWT_BAD_PRINCIPAL);
    http_jwt_free(v);
}

static int load(const char *const *algs, size_t n, const char *jwks, struct sbx_err *err)
{
    struct http_jwt_config c = {
        .issuer = ISS, .principal_claim = "sub", .algorithms = algs, .n_algorithms = n};
    struct http_jwt *v = NULL;
    int r = http_jwt_new(&c, jwks, strlen(jwks), "f.jwks", &v, err);
    http_jwt_free(v);
    return r;
}

static void loading_keys(void **state)
{
    (void)state;
    struct sbx_err err = {0};
    assert_int_equal(load(default_algs, 2, jwks_text, &err), 0);
    /* Never none, never HMAC, nothing unknown; and something must be allowed. */
    static const char *const hs[] = {"RS256", "HS256"}, *const none[] = {"none"};
    assert_int_equal(load(hs, 2, jwks_text, &err), -1);
    assert_non_null(strstr(err.msg, "\"HS256\" is not accepted"));
    assert_int_equal(load(none, 1, jwks_text, &err), -1);
    assert_int_equal(load(default_algs, 0, jwks_text, &err), -1);
    assert_int_equal(load(default_algs, 2, "not json", &err), -1);
    assert_non_null(strstr(err.msg, "f.jwks: not a JWKS"));
    assert_int_equal(load(default_algs, 2, "{\"keys\":{}}", &err), -1);
    /* Keys that cannot verify here are skipped; with none left, the server must not start. */
    json_t *enc = public_of(rsa_key, "enc-1");
    json_object_set_new(enc, "use", json_string("enc"));
    json_object_del(enc, "key_ops");
    json_t *oct = json_pack("{s:s, s:s, s:s}", "kty", "oct", "k", "c2VjcmV0", "kid", "h");
    json_t *es_only = public_of(ec_key, "ec-1"); /* "alg": "ES256" */
    json_t *doc = json_pack("{s:[O, O, O]}", "keys", enc, oct, es_only);
    char *text = json_dumps(doc, JSON_COMPACT);
    static const char *const rs_only[] = {"RS256"};
    assert_int_equal(load(rs_only, 1, text, &err), -1);
    assert_non_null(strstr(err.msg, "no usable signing key among 3"));
    assert_int_equal(load(default_algs, 2, text, &err), 0);
    free(text);
    json_decref(doc);
    /* A broken key, a key on another curve, and a signing key on a key_ops list without
     * "verify". */
    json_t *broken = json_deep_copy(es_only);
    json_object_set_new(broken, "x", json_string("AAAA"));
    json_t *k256 = json_deep_copy(es_only);
    json_object_set_new(k256, "crv", json_string("secp256k1"));
    json_object_del(k256, "alg");
    json_t *signonly = public_of(rsa_key, "s");
    json_object_set_new(signonly, "key_ops", json_pack("[s]", "sign"));
    doc = json_pack("{s:[o, o, o]}", "keys", broken, k256, signonly);
    text = json_dumps(doc, JSON_COMPACT);
    assert_int_equal(load(default_algs, 2, text, &err), -1);
    free(text);
    json_decref(doc);
    /* Two keys under one kid would make the choice ambiguous. */
    doc = json_pack("{s:[o, O]}", "keys", public_of(rsa_other, "ec-1"), es_only);
    text = json_dumps(doc, JSON_COMPACT);
    assert_int_equal(load(default_algs, 2, text, &err), -1);
    assert_non_null(strstr(err.msg, "two keys have kid \"ec-1\""));
    free(text);
    json_decref(doc);
    json_decref(enc);
    json_decref(oct);
    json_decref(es_only);
    /* The issuer and the principal claim are required. */
    struct http_jwt_config c = {
        .principal_claim = "sub", .algorithms = default_algs, .n_algorithms = 2};
    struct http_jwt *v = NULL;
    assert_int_equal(http_jwt_new(&c, jwks_text, strlen(jwks_text), "f", &v, &err), -1);
    c.issuer = ISS;
    c.principal_claim = "";
    assert_int_equal(http_jwt_new(&c, jwks_text, strlen(jwks_text), "f", &v, &err), -1);
    assert_null(v);
}

static void static_tokens_and_jwts_side_by_side(void **state)
{
    (void)state;
    struct http_jwt *v = verifier();
    struct http_auth a = {0};
    struct sbx_err err = {0};
    assert_int_equal(http_auth_load_text(&a, "alice:tok-a\nodd:x.y.z\n", "tokens", &err), 0);
    char buf[HTTP_JWT_PRINCIPAL_MAX];
    const char *why = "unset";
    assert_string_equal(
        http_auth_principal(&a, v, "Bearer tok-a", AUD, NOW, buf, sizeof(buf), &why), "alice");
    /* A configured static token keeps working even when it is shaped like a JWS. */
    assert_string_equal(
        http_auth_principal(&a, v, "Bearer x.y.z", AUD, NOW, buf, sizeof(buf), &why), "odd");
    char *tok = sign(rsa_key, "RS256", "rsa-1", claims("alice"));
    char *hdr = xasprintf("Bearer %s", tok);
    assert_ptr_equal(http_auth_principal(&a, v, hdr, AUD, NOW, buf, sizeof(buf), &why), buf);
    assert_string_equal(buf, "jwt:alice");
    assert_null(http_auth_principal(&a, v, hdr, AUD, NOW + 3600, buf, sizeof(buf), &why));
    assert_string_equal(why, "token expired");
    assert_null(
        http_auth_principal(&a, v, hdr, "http://elsewhere/mcp", NOW, buf, sizeof(buf), &why));
    assert_string_equal(why, "wrong audience");
    /* Without JWT validation, a JWT is just an unknown token. */
    assert_null(http_auth_principal(&a, NULL, hdr, AUD, NOW, buf, sizeof(buf), &why));
    assert_string_equal(why, "unknown bearer token");
    assert_null(http_auth_principal(&a, v, "Bearer nope", AUD, NOW, buf, sizeof(buf), &why));
    assert_string_equal(why, "unknown bearer token");
    assert_null(http_auth_principal(&a, v, NULL, AUD, NOW, buf, sizeof(buf), &why));
    assert_null(why);
    assert_null(http_auth_principal(&a, v, "Basic dTpw", AUD, NOW, buf, sizeof(buf), &why));
    assert_null(why);
    free(hdr);
    free(tok);
    http_auth_free(&a);
    http_jwt_free(v);
}

static void reasons_never_echo_the_token(void **state)
{
    (void)state;
    for (int s = HTTP_JWT_OK; s <= HTTP_JWT_BAD_PRINCIPAL; s++) {
        const char *t = http_jwt_status_text((enum http_jwt_status)s);
        assert_non_null(t);
        assert_true(strlen(t) > 0);
        /* Safe inside a quoted-string of WWW-Authenticate (RFC 6750 3: %x20-21 / %x23-5B /
         * %x5D-7E). */
        for (const char *c = t; *c; c++)
            assert_true(*c >= 0x20 && *c <= 0x7e && *c != '"' && *c != '\\');
    }
}

/* ---- EdDSA (RFC 8037), signed here with OpenSSL: José 11 has no Ed25519 ---- */

static EVP_PKEY *okp_generate(const char *type)
{
    EVP_PKEY *k = EVP_PKEY_Q_keygen(NULL, NULL, type);
    assert_non_null(k);
    return k;
}

/* The public JWK of k; alg NULL leaves "alg" out. */
static json_t *okp_public(EVP_PKEY *k, const char *crv, const char *kid, const char *alg)
{
    unsigned char raw[64];
    size_t n = sizeof(raw);
    assert_int_equal(EVP_PKEY_get_raw_public_key(k, raw, &n), 1);
    json_t *j = json_pack("{s:s, s:s, s:o, s:s}", "kty", "OKP", "crv", crv, "x",
                          jose_b64_enc(raw, n), "kid", kid);
    if (alg)
        json_object_set_new(j, "alg", json_string(alg));
    return j;
}

/* A compact JWS with header {"alg": alg, "kid": kid} (kid NULL: none), EdDSA-signed by k. */
static char *okp_sign(EVP_PKEY *k, const char *alg, const char *kid, json_t *claims)
{
    json_t *hdr =
        kid ? json_pack("{s:s, s:s}", "alg", alg, "kid", kid) : json_pack("{s:s}", "alg", alg);
    char *h = json_dumps(hdr, JSON_COMPACT), *c = json_dumps(claims, JSON_COMPACT);
    char *input = signing_input(h, c);
    unsigned char sig[128];
    size_t n = sizeof(sig);
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    assert_int_equal(EVP_DigestSignInit(ctx, NULL, NULL, NULL, k), 1);
    assert_int_equal(EVP_DigestSign(ctx, sig, &n, (const unsigned char *)input, strlen(input)), 1);
    EVP_MD_CTX_free(ctx);
    json_t *sb = jose_b64_enc(sig, n);
    char *tok = xasprintf("%s.%s", input, json_string_value(sb));
    json_decref(sb);
    free(input);
    free(h);
    free(c);
    json_decref(hdr);
    json_decref(claims);
    return tok;
}

static void eddsa_ed25519_and_ed448(void **state)
{
    (void)state;
    EVP_PKEY *ed = okp_generate("ED25519"), *ed448 = okp_generate("ED448");
    EVP_PKEY *stranger = okp_generate("ED25519");
    json_t *doc =
        json_pack("{s:[o, o, o]}", "keys", okp_public(ed, "Ed25519", "ed-1", "EdDSA"),
                  okp_public(ed448, "Ed448", "ed448-1", NULL), public_of(rsa_key, "rsa-1"));
    char *text = json_dumps(doc, JSON_COMPACT);
    json_decref(doc);
    static const char *const rs_ed[] = {"RS256", "EdDSA"};
    struct http_jwt *v = verifier_with(rs_ed, 2, "sub", text);
    char p[HTTP_JWT_PRINCIPAL_MAX];

    char *tok = okp_sign(ed, "EdDSA", "ed-1", claims("alice"));
    assert_int_equal(check(v, tok, p), HTTP_JWT_OK);
    assert_string_equal(p, "jwt:alice");
    /* Tampered: one signature character, then another token's payload spliced in. */
    char *sig = strrchr(tok, '.') + 1;
    sig[0] = sig[0] == 'A' ? 'B' : 'A';
    assert_int_equal(check(v, tok, p), HTTP_JWT_BAD_SIGNATURE);
    free(tok);
    char *alice = okp_sign(ed, "EdDSA", "ed-1", claims("alice"));
    char *mallory = okp_sign(ed, "EdDSA", "ed-1", claims("mallory"));
    splice_is_refused(v, alice, mallory);
    /* Another Ed25519 key under the right kid. */
    tok = okp_sign(stranger, "EdDSA", "ed-1", claims("a"));
    assert_int_equal(check(v, tok, p), HTTP_JWT_BAD_SIGNATURE);
    free(tok);
    /* Ed448, whose key carries no "alg", and a token with no kid: the fitting keys are tried. */
    tok = okp_sign(ed448, "EdDSA", "ed448-1", claims("bob"));
    assert_int_equal(check(v, tok, p), HTTP_JWT_OK);
    assert_string_equal(p, "jwt:bob");
    free(tok);
    tok = okp_sign(ed448, "EdDSA", NULL, claims("bob"));
    assert_int_equal(check(v, tok, p), HTTP_JWT_OK);
    free(tok);
    /* Keys and algorithms of other kinds do not mix. */
    assert_int_equal(check_once(v, okp_sign(ed, "EdDSA", "rsa-1", claims("a"))),
                     HTTP_JWT_KEY_MISMATCH);
    assert_int_equal(check_once(v, sign(rsa_key, "RS256", "ed-1", claims("a"))),
                     HTTP_JWT_KEY_MISMATCH);
    http_jwt_free(v);
    /* Not on the allow-list: refused before any key is looked at. */
    v = verifier_with(default_algs, 2, "sub", jwks_text);
    tok = okp_sign(ed, "EdDSA", "ed-1", claims("a"));
    assert_int_equal(check(v, tok, p), HTTP_JWT_ALG_NOT_ALLOWED);
    free(tok);
    http_jwt_free(v);
    free(text);

    /* Loading: key-agreement curves, a short "x", and an "alg" of another family are skipped. */
    struct sbx_err err = {0};
    static const char *const ed_only[] = {"EdDSA"};
    json_t *x25519 = okp_public(ed, "X25519", "x", NULL);
    json_t *short_x = okp_public(ed, "Ed25519", "s", NULL);
    json_object_set_new(short_x, "x", json_string("AAAA"));
    json_t *es_alg = okp_public(ed, "Ed25519", "e", "ES256");
    doc = json_pack("{s:[o]}", "keys", x25519);
    text = json_dumps(doc, JSON_COMPACT);
    assert_int_equal(load(ed_only, 1, text, &err), -1);
    assert_non_null(strstr(err.msg, "OKP keys must be on Ed25519 or Ed448"));
    free(text);
    json_decref(doc);
    doc = json_pack("{s:[o]}", "keys", short_x);
    text = json_dumps(doc, JSON_COMPACT);
    assert_int_equal(load(ed_only, 1, text, &err), -1);
    assert_non_null(strstr(err.msg, "key material does not load"));
    free(text);
    json_decref(doc);
    static const char *const es_ed[] = {"ES256", "EdDSA"};
    doc = json_pack("{s:[o]}", "keys", es_alg);
    text = json_dumps(doc, JSON_COMPACT);
    assert_int_equal(load(es_ed, 2, text, &err), -1);
    assert_non_null(strstr(err.msg, "does not fit its type or curve"));
    free(text);
    json_decref(doc);
    /* (control) the same key, named right, loads. */
    doc = json_pack("{s:[o]}", "keys", okp_public(ed, "Ed25519", "ok", "EdDSA"));
    text = json_dumps(doc, JSON_COMPACT);
    assert_int_equal(load(ed_only, 1, text, &err), 0);
    free(text);
    json_decref(doc);
    EVP_PKEY_free(ed);
    EVP_PKEY_free(ed448);
    EVP_PKEY_free(stranger);
}

/* ---- the JWKS file, reloaded when it changes (http_jwks.c) ---- */

/* Replaces the file the way a rotation job should: a new file renamed over the old one. */
static void write_jwks(const char *path, const char *text)
{
    char *tmp = xasprintf("%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    assert_non_null(f);
    assert_int_equal(fputs(text, f) >= 0, 1);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(rename(tmp, path), 0);
    free(tmp);
}

static char *jwks_of(json_t *keys)
{
    json_t *doc = json_pack("{s:o}", "keys", keys);
    char *text = json_dumps(doc, JSON_COMPACT);
    json_decref(doc);
    return text;
}

/* A token signed by `key` under `kid`, checked against the keys in force at `now_ms`. */
static enum http_jwt_status check_at(struct http_jwks *w, uint64_t now_ms, const json_t *key,
                                     const char *alg, const char *kid)
{
    char p[HTTP_JWT_PRINCIPAL_MAX];
    char *tok = sign(key, alg, kid, claims("a"));
    enum http_jwt_status st = check(http_jwks_current(w, now_ms), tok, p);
    free(tok);
    return st;
}

static void jwks_file_rotation(void **state)
{
    (void)state;
    char dir[] = "/tmp/test-jwks.XXXXXX";
    assert_non_null(mkdtemp(dir));
    char *path = xasprintf("%s/jwks.json", dir);
    char *only_rsa = jwks_of(json_pack("[o]", public_of(rsa_key, "rsa-1")));
    char *both =
        jwks_of(json_pack("[o, o]", public_of(rsa_key, "rsa-1"), public_of(ec_key, "ec-1")));
    char *only_ec = jwks_of(json_pack("[o]", public_of(ec_key, "ec-1")));
    write_jwks(path, only_rsa);
    struct sbx_config cfg;
    config_init_defaults(&cfg);
    struct sbx_err err = {0};
    struct http_jwks *w = NULL;
    /* Not configured: no watcher. Half configured: refused. */
    assert_int_equal(http_jwks_open(&cfg, &w, &err), 0);
    assert_null(w);
    cfg.jwt_jwks_file = xstrdup(path);
    assert_int_equal(http_jwks_open(&cfg, &w, &err), -1);
    assert_non_null(strstr(err.msg, "http.jwt_issuer is not"));
    cfg.jwt_issuer = xstrdup(ISS);
    assert_int_equal(http_jwks_open(&cfg, &w, &err), 0);
    uint64_t t = now_ms();
    assert_int_equal(check_at(w, t, rsa_key, "RS256", "rsa-1"), HTTP_JWT_OK);
    assert_int_equal(check_at(w, t, ec_key, "ES256", "ec-1"), HTTP_JWT_UNKNOWN_KID);
    /* A new key: not looked for before the interval (5 s by default), in force after it. */
    write_jwks(path, both);
    assert_int_equal(check_at(w, t + 1000, ec_key, "ES256", "ec-1"), HTTP_JWT_UNKNOWN_KID);
    assert_int_equal(check_at(w, t + 6000, ec_key, "ES256", "ec-1"), HTTP_JWT_OK);
    /* A file that does not load leaves the keys in force. */
    write_jwks(path, "{\"keys\": [");
    assert_int_equal(check_at(w, t + 12000, ec_key, "ES256", "ec-1"), HTTP_JWT_OK);
    assert_int_equal(check_at(w, t + 12000, rsa_key, "RS256", "rsa-1"), HTTP_JWT_OK);
    unlink(path);
    assert_int_equal(check_at(w, t + 18000, rsa_key, "RS256", "rsa-1"), HTTP_JWT_OK);
    /* A key removed from the file stops being accepted. */
    write_jwks(path, only_ec);
    assert_int_equal(check_at(w, t + 24000, rsa_key, "RS256", "rsa-1"), HTTP_JWT_UNKNOWN_KID);
    assert_int_equal(check_at(w, t + 24000, ec_key, "ES256", "ec-1"), HTTP_JWT_OK);
    http_jwks_free(w);
    /* With jwt_jwks_reload_s = 0 the file is read once. */
    cfg.jwt_jwks_reload_s = 0;
    assert_int_equal(http_jwks_open(&cfg, &w, &err), 0);
    write_jwks(path, only_rsa);
    t = now_ms();
    assert_int_equal(check_at(w, t + 3600000, rsa_key, "RS256", "rsa-1"), HTTP_JWT_UNKNOWN_KID);
    http_jwks_free(w);
    /* A file that does not load at startup stops the server. */
    write_jwks(path, "[]");
    assert_int_equal(http_jwks_open(&cfg, &w, &err), -1);
    assert_non_null(strstr(err.msg, "not a JWKS"));
    unlink(path);
    assert_int_equal(http_jwks_open(&cfg, &w, &err), -1);
    config_free(&cfg);
    free(only_rsa);
    free(both);
    free(only_ec);
    free(path);
    rmdir(dir);
}

/* ---- the JWKS URL, fetched (http_jwks_fetch.c) ---- */

/* A JWKS endpoint on 127.0.0.1: answers every GET with `doc` and `status`, and counts them. */
static struct {
    pthread_mutex_t lock;
    char *doc;
    unsigned status;
    unsigned hits;
} endpoint = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void serve(const char *doc, unsigned status)
{
    pthread_mutex_lock(&endpoint.lock);
    free(endpoint.doc);
    endpoint.doc = xstrdup(doc);
    endpoint.status = status;
    pthread_mutex_unlock(&endpoint.lock);
}

static unsigned hits(void)
{
    pthread_mutex_lock(&endpoint.lock);
    unsigned n = endpoint.hits;
    pthread_mutex_unlock(&endpoint.lock);
    return n;
}

static enum MHD_Result on_jwks_request(void *cls, struct MHD_Connection *c, const char *url,
                                       const char *method, const char *version, const char *upload,
                                       size_t *upload_size, void **con_cls)
{
    (void)cls, (void)url, (void)method, (void)version, (void)upload, (void)upload_size,
        (void)con_cls;
    pthread_mutex_lock(&endpoint.lock);
    endpoint.hits++;
    struct MHD_Response *r = MHD_create_response_from_buffer(
        strlen(endpoint.doc), xstrdup(endpoint.doc), MHD_RESPMEM_MUST_FREE);
    unsigned status = endpoint.status;
    pthread_mutex_unlock(&endpoint.lock);
    if (status == 302)
        MHD_add_response_header(r, "Location", "http://127.0.0.2/elsewhere.json");
    enum MHD_Result ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ret;
}

static struct MHD_Daemon *endpoint_start(char *url, size_t cap)
{
    pthread_mutex_lock(&endpoint.lock);
    endpoint.hits = 0;
    pthread_mutex_unlock(&endpoint.lock);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    struct MHD_Daemon *d =
        MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD, 0, NULL, NULL, on_jwks_request, NULL,
                         MHD_OPTION_SOCK_ADDR, &a, MHD_OPTION_END);
    assert_non_null(d);
    const union MHD_DaemonInfo *i = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    assert_non_null(i);
    snprintf(url, cap, "http://127.0.0.1:%u/jwks.json", (unsigned)i->port);
    return d;
}

/* Polls the keys in force (the fetcher works on its own thread) for up to 5 s until a token
 * signed by key under kid gets `want`. */
static enum http_jwt_status settles_to(struct http_jwks *w, const json_t *key, const char *alg,
                                       const char *kid, enum http_jwt_status want)
{
    enum http_jwt_status st = HTTP_JWT_OK;
    for (int i = 0; i < 100; i++) {
        st = check_at(w, now_ms(), key, alg, kid);
        if (st == want)
            break;
        usleep(50000);
    }
    return st;
}

static void jwks_url_rules(void **state)
{
    (void)state;
    struct sbx_err err = {0};
    /* Only https, or plain http to loopback. */
    assert_int_equal(jwks_url_check("https://login.example.test/.well-known/jwks.json", &err), 0);
    assert_int_equal(jwks_url_check("http://127.0.0.1:9/jwks", &err), 0);
    assert_int_equal(jwks_url_check("http://[::1]/jwks", &err), 0);
    assert_int_equal(jwks_url_check("http://localhost/jwks", &err), 0);
    assert_int_equal(jwks_url_check("http://login.example.test/jwks", &err), -1);
    assert_non_null(strstr(err.msg, "must be https://"));
    assert_int_equal(jwks_url_check("http://127.0.0.1.example.test/jwks", &err), -1);
    assert_int_equal(jwks_url_check("ftp://127.0.0.1/jwks", &err), -1);
    assert_int_equal(jwks_url_check("not a url", &err), -1);
    assert_non_null(strstr(err.msg, "not a URL"));
    /* A file and a URL at once are refused, and so is a URL without an issuer. */
    struct sbx_config cfg;
    config_init_defaults(&cfg);
    struct http_jwks *w = NULL;
    cfg.jwt_jwks_url = xstrdup("https://login.example.test/jwks.json");
    assert_int_equal(http_jwks_open(&cfg, &w, &err), -1);
    assert_non_null(strstr(err.msg, "http.jwt_jwks_url is set but http.jwt_issuer is not"));
    cfg.jwt_issuer = xstrdup(ISS);
    cfg.jwt_jwks_file = xstrdup("/nonexistent/jwks.json");
    assert_int_equal(http_jwks_open(&cfg, &w, &err), -1);
    assert_non_null(strstr(err.msg, "both set"));
    free(cfg.jwt_jwks_file);
    cfg.jwt_jwks_file = NULL;
    free(cfg.jwt_jwks_url);
    cfg.jwt_jwks_url = xstrdup("http://login.example.test/jwks.json");
    assert_int_equal(http_jwks_open(&cfg, &w, &err), -1);
    assert_non_null(strstr(err.msg, "must be https://"));
    assert_null(w);
    config_free(&cfg);
}

static void jwks_url_fetch_failures(void **state)
{
    (void)state;
    char url[128];
    struct MHD_Daemon *d = endpoint_start(url, sizeof(url));
    struct sbx_err err = {0};
    char *text = NULL;
    size_t len = 0;
    serve("{\"keys\": []}", 200);
    assert_int_equal(jwks_fetch_once(&(struct jwks_fetch_config){.url = url}, &text, &len, &err),
                     0);
    assert_string_equal(text, "{\"keys\": []}");
    assert_int_equal(len, strlen(text));
    free(text);
    /* Not 200, a redirect included (it is not followed), or too large: no document. */
    serve("gone", 404);
    assert_int_equal(jwks_fetch_once(&(struct jwks_fetch_config){.url = url}, &text, &len, &err),
                     -1);
    assert_non_null(strstr(err.msg, "HTTP status 404"));
    serve("", 302);
    assert_int_equal(jwks_fetch_once(&(struct jwks_fetch_config){.url = url}, &text, &len, &err),
                     -1);
    assert_non_null(strstr(err.msg, "HTTP status 302"));
    char *big = xmalloc(JWKS_FETCH_MAX_BYTES + 2);
    memset(big, ' ', JWKS_FETCH_MAX_BYTES + 1);
    big[JWKS_FETCH_MAX_BYTES + 1] = '\0';
    serve(big, 200);
    free(big);
    assert_int_equal(jwks_fetch_once(&(struct jwks_fetch_config){.url = url}, &text, &len, &err),
                     -1);
    assert_non_null(strstr(err.msg, "larger than"));
    /* Nobody listening: the server does not start. */
    MHD_stop_daemon(d);
    struct sbx_config cfg;
    config_init_defaults(&cfg);
    cfg.jwt_issuer = xstrdup(ISS);
    cfg.jwt_jwks_url = xstrdup(url);
    struct http_jwks *w = NULL;
    assert_int_equal(http_jwks_open(&cfg, &w, &err), -1);
    assert_non_null(strstr(err.msg, "http.jwt_jwks_url"));
    assert_non_null(strstr(err.msg, url));
    config_free(&cfg);
}

static void jwks_url_rotation(void **state)
{
    (void)state;
    char url[128];
    struct MHD_Daemon *d = endpoint_start(url, sizeof(url));
    char *only_rsa = jwks_of(json_pack("[o]", public_of(rsa_key, "rsa-1")));
    char *both =
        jwks_of(json_pack("[o, o]", public_of(rsa_key, "rsa-1"), public_of(ec_key, "ec-1")));
    char *only_ec = jwks_of(json_pack("[o]", public_of(ec_key, "ec-1")));
    struct sbx_config cfg;
    config_init_defaults(&cfg);
    cfg.jwt_issuer = xstrdup(ISS);
    cfg.jwt_jwks_url = xstrdup(url);
    cfg.jwt_jwks_url_refresh_s = 1;
    struct sbx_err err = {0};
    struct http_jwks *w = NULL;
    /* A document without usable keys at startup: the server does not start. */
    serve("[]", 200);
    assert_int_equal(http_jwks_open(&cfg, &w, &err), -1);
    assert_non_null(strstr(err.msg, "not a JWKS"));
    serve(only_rsa, 200);
    assert_int_equal(http_jwks_open(&cfg, &w, &err), 0);
    assert_int_equal(check_at(w, now_ms(), rsa_key, "RS256", "rsa-1"), HTTP_JWT_OK);
    assert_int_equal(check_at(w, now_ms(), ec_key, "ES256", "ec-1"), HTTP_JWT_UNKNOWN_KID);
    /* A key published: in force after the next fetch (every second here). */
    serve(both, 200);
    assert_int_equal(settles_to(w, ec_key, "ES256", "ec-1", HTTP_JWT_OK), HTTP_JWT_OK);
    /* A broken document, then an error status: fetched, and the keys in force stay. */
    serve("{\"keys\": [", 200);
    unsigned h = hits();
    while (hits() < h + 2)
        usleep(50000);
    assert_int_equal(check_at(w, now_ms(), ec_key, "ES256", "ec-1"), HTTP_JWT_OK);
    assert_int_equal(check_at(w, now_ms(), rsa_key, "RS256", "rsa-1"), HTTP_JWT_OK);
    serve("busy", 503);
    h = hits();
    while (hits() < h + 2)
        usleep(50000);
    assert_int_equal(check_at(w, now_ms(), rsa_key, "RS256", "rsa-1"), HTTP_JWT_OK);
    /* A key removed stops being accepted. */
    serve(only_ec, 200);
    assert_int_equal(settles_to(w, rsa_key, "RS256", "rsa-1", HTTP_JWT_UNKNOWN_KID),
                     HTTP_JWT_UNKNOWN_KID);
    assert_int_equal(check_at(w, now_ms(), ec_key, "ES256", "ec-1"), HTTP_JWT_OK);
    http_jwks_free(w);
    MHD_stop_daemon(d);
    config_free(&cfg);
    free(only_rsa);
    free(both);
    free(only_ec);
}

/* Early fetches (a token under an unknown kid): at once when the gap allows, else not before
 * the gap has passed; without a periodic refresh nothing else fetches. */
static void jwks_url_early_fetch(void **state)
{
    (void)state;
    char url[128];
    struct MHD_Daemon *d = endpoint_start(url, sizeof(url));
    struct sbx_err err = {0};
    struct jwks_fetch *f = NULL;
    serve("one", 200);
    assert_int_equal(jwks_fetch_start(&(struct jwks_fetch_config){.url = url, .min_gap_s = 1},
                                      "one", 3, &f, &err),
                     0);
    size_t len = 0;
    usleep(1300000);
    assert_int_equal(hits(), 0);
    assert_null(jwks_fetch_take(f, &len));
    /* Past the gap: at once. The same document again is not handed over. */
    jwks_fetch_request(f);
    for (int i = 0; i < 100 && hits() < 1; i++)
        usleep(20000);
    assert_int_equal(hits(), 1);
    usleep(100000);
    assert_null(jwks_fetch_take(f, &len));
    /* Within the gap: held until it has passed, and two requests make one fetch. */
    serve("two", 200);
    uint64_t t0 = now_ms();
    jwks_fetch_request(f);
    jwks_fetch_request(f);
    char *text = NULL;
    for (int i = 0; i < 150 && !(text = jwks_fetch_take(f, &len)); i++)
        usleep(20000);
    assert_non_null(text);
    assert_string_equal(text, "two");
    assert_int_equal(len, 3);
    assert_true(now_ms() - t0 >= 500);
    assert_int_equal(hits(), 2);
    free(text);
    /* Stopping an idle fetcher returns at once. */
    t0 = now_ms();
    jwks_fetch_stop(f);
    assert_true(now_ms() - t0 < 1000);
    MHD_stop_daemon(d);
}

/* A fetch under way against an endpoint that never answers (a listener nobody accepts on: the
 * kernel completes the handshake) is abandoned when the fetcher is stopped, well before the
 * transfer's own 10 s limit. */
static void jwks_url_stop_aborts_a_hung_fetch(void **state)
{
    (void)state;
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(s >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof(a);
    assert_int_equal(bind(s, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(listen(s, 4), 0);
    assert_int_equal(getsockname(s, (struct sockaddr *)&a, &al), 0);
    char url[128];
    snprintf(url, sizeof(url), "http://127.0.0.1:%u/jwks.json", (unsigned)ntohs(a.sin_port));
    struct sbx_err err = {0};
    struct jwks_fetch *f = NULL;
    assert_int_equal(jwks_fetch_start(&(struct jwks_fetch_config){.url = url}, "{}", 2, &f, &err),
                     0);
    jwks_fetch_request(f);
    usleep(300000); /* the request is sent; the answer never comes */
    uint64_t t0 = now_ms();
    jwks_fetch_stop(f);
    assert_true(now_ms() - t0 < 3000);
    close(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(valid_rs256_and_es256_yield_the_principal),
        cmocka_unit_test(expiry_with_leeway),
        cmocka_unit_test(not_yet_valid_and_issued_in_the_future),
        cmocka_unit_test(issuer_must_match),
        cmocka_unit_test(audience_string_or_member),
        cmocka_unit_test(bad_signature_and_tampered_payload),
        cmocka_unit_test(key_choice),
        cmocka_unit_test(alg_none_and_hmac_confusion_are_refused),
        cmocka_unit_test(header_rules),
        cmocka_unit_test(malformed_shapes),
        cmocka_unit_test(principal_claim_rules),
        cmocka_unit_test(loading_keys),
        cmocka_unit_test(static_tokens_and_jwts_side_by_side),
        cmocka_unit_test(reasons_never_echo_the_token),
        cmocka_unit_test(eddsa_ed25519_and_ed448),
        cmocka_unit_test(jwks_file_rotation),
        cmocka_unit_test(jwks_url_rules),
        cmocka_unit_test(jwks_url_fetch_failures),
        cmocka_unit_test(jwks_url_rotation),
        cmocka_unit_test(jwks_url_early_fetch),
        cmocka_unit_test(jwks_url_stop_aborts_a_hung_fetch),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
