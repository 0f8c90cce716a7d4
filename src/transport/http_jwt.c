/* JWT access tokens (see http_jwt.h). Signatures are verified by latchset's José library
 * (libjose, Debian's libjose-dev): it works on jansson values, which the server already uses for
 * all its JSON, and verifies RS, PS and ES signatures against a JWK with OpenSSL underneath
 * (Debian 12's libjwt takes PEM keys, not JWKs; cjose imports JWKs one by one into its own
 * types).
 *
 * José picks the algorithm from the token's header and, for single keys, does not reliably
 * refuse a header alg that differs from the key's own "alg"; so the choice of key, and
 * whether an alg may be used with it at all, is made here from the tables below, and José
 * only ever sees a key stripped down to its public numbers.
 *
 * EdDSA (RFC 8037: Ed25519 and Ed448 keys) is verified with OpenSSL directly: Debian 12's
 * José (version 11) predates it. */
#include "transport/http_jwt.h"

#include <errno.h>
#include <jansson.h>
#include <jose/b64.h>
#include <jose/jws.h>
#include <jose/openssl.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>

#include "lib/util.h"

enum key_kind {
    KEY_RSA,
    KEY_EC,
    KEY_OKP, /* RFC 8037 octet key pair: Ed25519 or Ed448 */
};

/* Every algorithm a configuration may allow. Symmetric ones are absent on purpose: the keys
 * are public, and an HMAC "verified" with public bytes proves nothing. */
static const struct alg_def {
    const char *name;
    enum key_kind kind;
    const char *crv; /* EC: the one curve this alg is defined on; EdDSA: any of okp_curves */
} algs[] = {
    {"RS256", KEY_RSA, NULL},   {"RS384", KEY_RSA, NULL},   {"RS512", KEY_RSA, NULL},
    {"PS256", KEY_RSA, NULL},   {"PS384", KEY_RSA, NULL},   {"PS512", KEY_RSA, NULL},
    {"ES256", KEY_EC, "P-256"}, {"ES384", KEY_EC, "P-384"}, {"ES512", KEY_EC, "P-521"},
    {"EdDSA", KEY_OKP, NULL},
};

/* The curves an OKP key may name for EdDSA, with their public key and signature sizes
 * (RFC 8032). X25519 and X448 are key-agreement curves and verify nothing. */
static const struct okp_curve {
    const char *crv;
    int type; /* EVP_PKEY_ED25519, EVP_PKEY_ED448 */
    size_t key_len, sig_len;
} okp_curves[] = {
    {"Ed25519", EVP_PKEY_ED25519, 32, 64},
    {"Ed448", EVP_PKEY_ED448, 57, 114},
};

static const char *const status_text[] = {
    [HTTP_JWT_OK] = "valid",
    [HTTP_JWT_TOO_LARGE] = "token too large",
    [HTTP_JWT_NOT_COMPACT] = "not a JWS compact serialization (three dot-separated parts)",
    [HTTP_JWT_BAD_BASE64] = "malformed base64url",
    [HTTP_JWT_BAD_JSON] = "header or payload is not a JSON object",
    [HTTP_JWT_BAD_HEADER] = "unsupported JOSE header (alg missing, crit, b64 or a non-string kid)",
    [HTTP_JWT_ALG_NOT_ALLOWED] = "signature algorithm not allowed",
    [HTTP_JWT_UNKNOWN_KID] = "unknown kid",
    [HTTP_JWT_NO_KEY] = "no key for the signature algorithm",
    [HTTP_JWT_KID_NEEDED] = ("the token names no key (kid) and the key set has more than 4 "
                             "keys for its algorithm"),
    [HTTP_JWT_KEY_MISMATCH] = "signature algorithm does not match the key",
    [HTTP_JWT_BAD_SIGNATURE] = "bad signature",
    [HTTP_JWT_NO_KEY_VERIFIES] = "bad signature: no key verifies it (the token names no kid)",
    [HTTP_JWT_BAD_CLAIM] = "a registered claim has the wrong type",
    [HTTP_JWT_NO_EXP] = "exp claim missing",
    [HTTP_JWT_EXPIRED] = "token expired",
    [HTTP_JWT_NOT_YET_VALID] = "token not yet valid (nbf)",
    [HTTP_JWT_ISSUED_IN_FUTURE] = "token issued in the future (iat)",
    [HTTP_JWT_WRONG_ISSUER] = "wrong issuer",
    [HTTP_JWT_WRONG_AUDIENCE] = "wrong audience",
    [HTTP_JWT_BAD_PRINCIPAL] = "principal claim missing or not a safe name",
};

struct jwt_key {
    char *kid; /* NULL: none */
    int alg;   /* index into algs[] the key is pinned to, or -1 */
    enum key_kind kind;
    const char *crv;             /* EC: points into algs[] */
    json_t *jwk;                 /* RSA, EC: public members only, for José */
    EVP_PKEY *okp;               /* OKP: the public key, for OpenSSL */
    const struct okp_curve *edc; /* OKP: its curve */
};

struct http_jwt {
    char *issuer;
    char *principal_claim;
    uint32_t allowed; /* bit i: algs[i] */
    uint32_t leeway_s;
    struct jwt_key *keys;
    size_t n_keys;
    jose_cfg_t *jose;
};

_Static_assert(ARRAY_SIZE(algs) <= 32, "allowed is a 32-bit mask");
_Static_assert(HTTP_JWT_KIDLESS_TRIES == 4, "HTTP_JWT_KID_NEEDED's text says 4");

/* José's default error handler prints to stderr, which is the server's JSON log stream. */
static void jose_quiet(void *misc, const char *file, int line, uint64_t err, const char *fmt,
                       va_list ap)
{
    (void)misc;
    (void)file;
    (void)line;
    (void)err;
    (void)fmt;
    (void)ap;
}

static int alg_index(const char *name)
{
    for (size_t i = 0; i < ARRAY_SIZE(algs); i++)
        if (strcmp(algs[i].name, name) == 0)
            return (int)i;
    return -1;
}

const char *http_jwt_status_text(enum http_jwt_status s)
{
    if ((size_t)s < ARRAY_SIZE(status_text) && status_text[s])
        return status_text[s];
    return "invalid token";
}

bool http_jwt_refusal_wants_new_keys(const char *why)
{
    static const enum http_jwt_status fresh_keys_may_help[] = {
        HTTP_JWT_UNKNOWN_KID, HTTP_JWT_NO_KEY, HTTP_JWT_NO_KEY_VERIFIES};
    for (size_t i = 0; why && i < ARRAY_SIZE(fresh_keys_may_help); i++)
        if (strcmp(why, status_text[fresh_keys_may_help[i]]) == 0)
            return true;
    return false;
}

static void key_free(struct jwt_key *k)
{
    free(k->kid);
    json_decref(k->jwk);
    EVP_PKEY_free(k->okp);
}

void http_jwt_free(struct http_jwt *v)
{
    if (!v)
        return;
    for (size_t i = 0; i < v->n_keys; i++)
        key_free(&v->keys[i]);
    free(v->keys);
    free(v->issuer);
    free(v->principal_claim);
    if (v->jose)
        jose_cfg_decref(v->jose);
    free(v);
}

size_t http_jwt_key_count(const struct http_jwt *v)
{
    return v->n_keys;
}

/* ---- loading keys ---- */

/* RFC 7515 2: base64url without padding. The decoder also refuses non-zero trailing bits,
 * so each token has exactly one spelling. */
static bool b64url_ok(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_'))
            return false;
    }
    return n % 4 != 1;
}

static bool json_str_member(const json_t *o, const char *name, const char **out)
{
    const json_t *m = json_object_get(o, name);
    *out = json_string_value(m);
    return m == NULL || *out != NULL;
}

/* An EdDSA key: "crv" Ed25519 or Ed448 and "x" the public key, base64url. out->alg was set
 * (and checked against the allow-list) by load_key. */
static bool load_okp_key(const json_t *jwk, const char *crv, const char *kid, struct jwt_key *out,
                         const char **why)
{
    out->kind = KEY_OKP;
    out->crv = NULL;
    out->edc = NULL;
    for (size_t i = 0; crv && i < ARRAY_SIZE(okp_curves); i++)
        if (strcmp(okp_curves[i].crv, crv) == 0)
            out->edc = &okp_curves[i];
    if (!out->edc) {
        *why = "OKP keys must be on Ed25519 or Ed448";
        return false;
    }
    if (out->alg >= 0 && algs[out->alg].kind != KEY_OKP) {
        *why = "its \"alg\" does not fit its type or curve";
        return false;
    }
    const char *x = NULL;
    unsigned char raw[64];
    size_t n = json_str_member(jwk, "x", &x) && x && b64url_ok(x, strlen(x))
                   ? jose_b64_dec_buf(x, strlen(x), raw, sizeof(raw))
                   : SIZE_MAX;
    out->okp =
        n == out->edc->key_len ? EVP_PKEY_new_raw_public_key(out->edc->type, NULL, raw, n) : NULL;
    if (!out->okp) {
        *why = "its key material does not load";
        return false;
    }
    out->kid = kid ? xstrdup(kid) : NULL;
    out->jwk = NULL;
    return true;
}

/* The key at `jwk` as a struct jwt_key, or NULL with *why set when it cannot verify
 * signatures here. */
static bool load_key(struct http_jwt *v, const json_t *jwk, struct jwt_key *out, const char **why)
{
    const char *kty = NULL, *use = NULL, *alg = NULL, *kid = NULL, *crv = NULL;
    if (!json_is_object(jwk) || !json_str_member(jwk, "kty", &kty) || !kty) {
        *why = "not a JWK with a \"kty\"";
        return false;
    }
    if (!json_str_member(jwk, "use", &use) || !json_str_member(jwk, "alg", &alg) ||
        !json_str_member(jwk, "kid", &kid) || !json_str_member(jwk, "crv", &crv)) {
        *why = "\"use\", \"alg\", \"kid\" and \"crv\" must be strings";
        return false;
    }
    if (use && strcmp(use, "sig") != 0) {
        *why = "\"use\" is not \"sig\"";
        return false;
    }
    const json_t *ops = json_object_get(jwk, "key_ops");
    if (ops) {
        bool verify = false;
        for (size_t i = 0; i < json_array_size(ops); i++) {
            const char *op = json_string_value(json_array_get(ops, i));
            verify |= op && strcmp(op, "verify") == 0;
        }
        if (!verify) {
            *why = "\"key_ops\" lacks \"verify\"";
            return false;
        }
    }
    out->alg = -1;
    if (alg) {
        out->alg = alg_index(alg);
        if (out->alg < 0 || !(v->allowed & (1u << out->alg))) {
            *why = "its \"alg\" is not an allowed algorithm";
            return false;
        }
    }
    json_t *pub = NULL;
    if (strcmp(kty, "RSA") == 0) {
        out->kind = KEY_RSA;
        out->crv = NULL;
        const char *n = NULL, *e = NULL;
        if (json_str_member(jwk, "n", &n) && json_str_member(jwk, "e", &e) && n && e)
            pub = json_pack("{s:s, s:s, s:s}", "kty", "RSA", "n", n, "e", e);
    } else if (strcmp(kty, "EC") == 0) {
        out->kind = KEY_EC;
        out->crv = NULL;
        for (size_t i = 0; crv && i < ARRAY_SIZE(algs); i++)
            if (algs[i].crv && strcmp(algs[i].crv, crv) == 0)
                out->crv = algs[i].crv;
        if (!out->crv) {
            *why = "EC keys must be on P-256, P-384 or P-521";
            return false;
        }
        const char *x = NULL, *y = NULL;
        if (json_str_member(jwk, "x", &x) && json_str_member(jwk, "y", &y) && x && y)
            pub = json_pack("{s:s, s:s, s:s, s:s}", "kty", "EC", "crv", out->crv, "x", x, "y", y);
    } else if (strcmp(kty, "OKP") == 0) {
        return load_okp_key(jwk, crv, kid, out, why);
    } else {
        *why = "only RSA, EC and OKP keys verify the allowed algorithms";
        return false;
    }
    if (out->alg >= 0 && (algs[out->alg].kind != out->kind ||
                          (algs[out->alg].crv && strcmp(algs[out->alg].crv, out->crv) != 0))) {
        json_decref(pub);
        *why = "its \"alg\" does not fit its type or curve";
        return false;
    }
    /* Let the library turn the numbers into a key: that checks them (an EC point must be on
     * its curve), and RFC 7518 3.3 wants RSA keys of 2048 bits or more. */
    EVP_PKEY *pk = pub ? jose_openssl_jwk_to_EVP_PKEY(v->jose, pub) : NULL;
    bool ok = pk && (out->kind != KEY_RSA || EVP_PKEY_bits(pk) >= 2048);
    if (!ok)
        *why = !pk ? "its key material does not load" : "RSA keys must have 2048 bits or more";
    EVP_PKEY_free(pk);
    if (!ok) {
        json_decref(pub);
        return false;
    }
    out->kid = kid ? xstrdup(kid) : NULL;
    out->jwk = pub;
    return true;
}

static int configure(struct http_jwt *v, const struct http_jwt_config *cfg, struct sbx_err *err)
{
    if (!cfg->issuer || !*cfg->issuer)
        return sbx_fail(err, EINVAL, "an issuer is required");
    if (!cfg->principal_claim || !*cfg->principal_claim)
        return sbx_fail(err, EINVAL, "a principal claim is required");
    if (cfg->n_algorithms == 0)
        return sbx_fail(err, EINVAL, "at least one signature algorithm must be allowed");
    for (size_t i = 0; i < cfg->n_algorithms; i++) {
        int a = alg_index(cfg->algorithms[i]);
        if (a < 0)
            return sbx_fail(err, EINVAL,
                            "algorithm \"%s\" is not accepted: choose from RS256, RS384, RS512, "
                            "PS256, PS384, PS512, ES256, ES384, ES512, EdDSA (never none or "
                            "HMAC)",
                            cfg->algorithms[i]);
        v->allowed |= 1u << a;
    }
    v->issuer = xstrdup(cfg->issuer);
    v->principal_claim = xstrdup(cfg->principal_claim);
    v->leeway_s = cfg->leeway_s;
    return 0;
}

int http_jwt_new(const struct http_jwt_config *cfg, const char *jwks, size_t len, const char *name,
                 struct http_jwt **out, struct sbx_err *err)
{
    struct http_jwt *v = xcalloc(1, sizeof(*v));
    json_t *doc = NULL;
    const char *why = NULL;
    size_t skipped = 0;
    v->jose = jose_cfg();
    if (!v->jose) {
        sbx_fail(err, ENOMEM, "cannot set up the JOSE library");
        goto fail;
    }
    jose_cfg_set_err_func(v->jose, jose_quiet, NULL);
    if (configure(v, cfg, err) < 0)
        goto fail;
    json_error_t jerr;
    doc = json_loadb(jwks, len, JSON_REJECT_DUPLICATES, &jerr);
    const json_t *keys = json_object_get(doc, "keys");
    if (!doc || !json_is_array(keys)) {
        sbx_fail(err, EINVAL, "%s: not a JWKS document (want {\"keys\": [...]})%s%s", name,
                 doc ? "" : ": ", doc ? "" : jerr.text);
        goto fail;
    }
    for (size_t i = 0; i < json_array_size(keys); i++) {
        struct jwt_key k = {0};
        if (!load_key(v, json_array_get(keys, i), &k, &why)) {
            skipped++;
            continue;
        }
        for (size_t j = 0; k.kid && j < v->n_keys; j++) {
            if (v->keys[j].kid && strcmp(v->keys[j].kid, k.kid) == 0) {
                sbx_fail(err, EINVAL, "%s: two keys have kid \"%s\"", name, k.kid);
                key_free(&k);
                goto fail;
            }
        }
        if (v->n_keys == HTTP_JWT_MAX_KEYS) {
            sbx_fail(err, E2BIG, "%s: more than %d usable keys", name, HTTP_JWT_MAX_KEYS);
            key_free(&k);
            goto fail;
        }
        v->keys = xrealloc(v->keys, (v->n_keys + 1) * sizeof(*v->keys));
        v->keys[v->n_keys++] = k;
    }
    if (v->n_keys == 0) {
        sbx_fail(err, ENOKEY, "%s: no usable signing key among %zu%s%s", name, skipped,
                 why ? "; the last one was skipped: " : "", why ? why : "");
        goto fail;
    }
    json_decref(doc);
    *out = v;
    return 0;
fail:
    json_decref(doc);
    http_jwt_free(v);
    return -1;
}

/* ---- checking a token ---- */

bool http_jwt_is_compact(const char *token, size_t len)
{
    size_t dots = 0;
    for (size_t i = 0; i < len; i++)
        dots += token[i] == '.';
    return dots == 2;
}

/* Decodes part `s` (NUL-terminated, b64url_ok) into `buf` and parses it as a JSON object. */
static enum http_jwt_status decode_object(const char *s, size_t n, char *buf, size_t cap,
                                          json_t **out)
{
    size_t dl = jose_b64_dec_buf(s, n, buf, cap);
    if (dl == SIZE_MAX)
        return HTTP_JWT_BAD_BASE64;
    *out = json_loadb(buf, dl, JSON_REJECT_DUPLICATES, NULL);
    if (!json_is_object(*out)) {
        json_decref(*out);
        *out = NULL;
        return HTTP_JWT_BAD_JSON;
    }
    return HTTP_JWT_OK;
}

static bool key_fits(const struct jwt_key *k, int alg)
{
    if (k->alg >= 0 && k->alg != alg)
        return false;
    if (algs[alg].kind != k->kind)
        return false;
    return !algs[alg].crv || strcmp(algs[alg].crv, k->crv) == 0;
}

/* EdDSA over the signing input (protected "." payload, as sent), with the key's own curve. */
static bool okp_verify(const struct jwt_key *k, const char *input, size_t input_len,
                       const char *sig_b64, size_t sig_b64_len)
{
    unsigned char sig[128];
    size_t n = jose_b64_dec_buf(sig_b64, sig_b64_len, sig, sizeof(sig));
    if (n != k->edc->sig_len)
        return false;
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    bool ok = ctx && EVP_DigestVerifyInit(ctx, NULL, NULL, NULL, k->okp) == 1 &&
              EVP_DigestVerify(ctx, sig, n, (const unsigned char *)input, input_len) == 1;
    EVP_MD_CTX_free(ctx);
    return ok;
}

static enum http_jwt_status try_key(const struct http_jwt *v, const struct jwt_key *k, int alg,
                                    const json_t *jws, const char *input, size_t input_len,
                                    const char *sig, size_t sig_len)
{
    if (!key_fits(k, alg))
        return HTTP_JWT_KEY_MISMATCH;
    if (sig_len == 0)
        return HTTP_JWT_BAD_SIGNATURE;
    if (k->kind == KEY_OKP ? !okp_verify(k, input, input_len, sig, sig_len)
                           : !jose_jws_ver(v->jose, jws, jws, k->jwk, false))
        return HTTP_JWT_BAD_SIGNATURE;
    return HTTP_JWT_OK;
}

/* Header checks, key choice and the signature over `input`: parts[0] "." parts[1] as sent. */
static enum http_jwt_status check_signature(const struct http_jwt *v, const char *input,
                                            char *const parts[3], const size_t lens[3],
                                            char *scratch, size_t cap)
{
    json_t *hdr = NULL;
    enum http_jwt_status st = decode_object(parts[0], lens[0], scratch, cap, &hdr);
    if (st != HTTP_JWT_OK)
        return st;
    const char *alg = json_string_value(json_object_get(hdr, "alg"));
    const json_t *kidv = json_object_get(hdr, "kid");
    /* RFC 7515 4.1.11: a "crit" extension we do not implement must fail; "b64" (RFC 7797)
     * would change what the signature covers. */
    if (!alg || json_object_get(hdr, "crit") || json_object_get(hdr, "b64") ||
        (kidv && !json_is_string(kidv))) {
        json_decref(hdr);
        return HTTP_JWT_BAD_HEADER;
    }
    int a = alg_index(alg);
    const char *kid = json_string_value(kidv);
    if (a < 0 || !(v->allowed & (1u << a))) {
        json_decref(hdr);
        return HTTP_JWT_ALG_NOT_ALLOWED;
    }
    json_t *jws = json_pack("{s:s%, s:s%, s:s%}", "protected", parts[0], lens[0], "payload",
                            parts[1], lens[1], "signature", parts[2], lens[2]);
    st = kid ? HTTP_JWT_UNKNOWN_KID : HTTP_JWT_NO_KEY;
    size_t fitting = 0;
    for (size_t i = 0; !kid && i < v->n_keys; i++)
        fitting += key_fits(&v->keys[i], a);
    if (fitting > HTTP_JWT_KIDLESS_TRIES)
        st = HTTP_JWT_KID_NEEDED;
    for (size_t i = 0; i < v->n_keys && st != HTTP_JWT_OK && st != HTTP_JWT_KID_NEEDED; i++) {
        const struct jwt_key *k = &v->keys[i];
        if (kid ? !k->kid || strcmp(k->kid, kid) != 0 : !key_fits(k, a))
            continue;
        /* kids are unique: at most one try with one */
        st = try_key(v, k, a, jws, input, lens[0] + 1 + lens[1], parts[2], lens[2]);
    }
    json_decref(jws);
    json_decref(hdr);
    /* Without a kid, the signature may be a key's that was published after the keys in force:
     * said apart from a forgery under a known kid, so that the caller fetches the keys again. */
    if (!kid && st == HTTP_JWT_BAD_SIGNATURE)
        st = HTTP_JWT_NO_KEY_VERIFIES;
    return st;
}

enum http_jwt_status http_jwt_verify(const struct http_jwt *v, const char *token, size_t len,
                                     const char *audience, int64_t now, char *principal, size_t cap)
{
    if (len > HTTP_JWT_MAX_BYTES)
        return HTTP_JWT_TOO_LARGE;
    char buf[HTTP_JWT_MAX_BYTES + 1], scratch[HTTP_JWT_MAX_BYTES];
    memcpy(buf, token, len);
    buf[len] = '\0';
    char *parts[3];
    size_t lens[3], n = 0;
    for (char *p = buf, *end = buf + len;; p++) {
        char *dot = memchr(p, '.', (size_t)(end - p));
        if (n == 3)
            return HTTP_JWT_NOT_COMPACT;
        parts[n] = p;
        lens[n++] = (size_t)((dot ? dot : end) - p);
        if (!dot)
            break;
        *dot = '\0';
        p = dot;
    }
    if (n != 3)
        return HTTP_JWT_NOT_COMPACT;
    for (size_t i = 0; i < 3; i++)
        if (!b64url_ok(parts[i], lens[i]))
            return HTTP_JWT_BAD_BASE64;
    enum http_jwt_status st = check_signature(v, token, parts, lens, scratch, sizeof(scratch));
    if (st != HTTP_JWT_OK)
        return st;
    size_t dl = jose_b64_dec_buf(parts[1], lens[1], scratch, sizeof(scratch));
    if (dl == SIZE_MAX)
        return HTTP_JWT_BAD_BASE64;
    return http_jwt_check_claims(v, scratch, dl, audience, now, principal, cap);
}

/* A NumericDate claim: absent (true, *present false), a number, or the wrong type. */
static bool time_claim(const json_t *claims, const char *name, double *out, bool *present)
{
    const json_t *c = json_object_get(claims, name);
    *present = c != NULL;
    *out = json_number_value(c);
    return !c || json_is_number(c);
}

static bool audience_ok(const json_t *aud, const char *want)
{
    if (json_is_string(aud))
        return strcmp(json_string_value(aud), want) == 0;
    for (size_t i = 0; i < json_array_size(aud); i++) {
        const char *s = json_string_value(json_array_get(aud, i));
        if (s && strcmp(s, want) == 0)
            return true;
    }
    return false;
}

/* Principals end up in logs, the history database and error messages: letters, digits and
 * a few separators that identity providers use ("auth0|42", "a@b.example", UUIDs) are
 * enough, and none of them needs quoting anywhere. Anything else is refused rather than
 * rewritten, so that two different subjects can never map to one principal. */
static bool principal_ok(const char *s, size_t n)
{
    if (n == 0 || n > HTTP_JWT_CLAIM_MAX)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              (c && strchr("-._~@+|:", c))))
            return false;
    }
    return true;
}

enum http_jwt_status http_jwt_check_claims(const struct http_jwt *v, const char *json, size_t len,
                                           const char *audience, int64_t now, char *principal,
                                           size_t cap)
{
    json_t *c = json_loadb(json, len, JSON_REJECT_DUPLICATES, NULL);
    if (!json_is_object(c)) {
        json_decref(c);
        return HTTP_JWT_BAD_JSON;
    }
    double exp, nbf, iat, leeway = v->leeway_s, t = (double)now;
    bool has_exp, has_nbf, has_iat;
    const json_t *iss = json_object_get(c, "iss"), *aud = json_object_get(c, "aud");
    const json_t *who = json_object_get(c, v->principal_claim);
    enum http_jwt_status st = HTTP_JWT_OK;
    if (!time_claim(c, "exp", &exp, &has_exp) || !time_claim(c, "nbf", &nbf, &has_nbf) ||
        !time_claim(c, "iat", &iat, &has_iat) || (iss && !json_is_string(iss)) ||
        (aud && !json_is_string(aud) && !json_is_array(aud)))
        st = HTTP_JWT_BAD_CLAIM;
    else if (!has_exp)
        st = HTTP_JWT_NO_EXP;
    else if (t >= exp + leeway) /* RFC 7519 4.1.4: valid only before exp */
        st = HTTP_JWT_EXPIRED;
    else if (has_nbf && t + leeway < nbf)
        st = HTTP_JWT_NOT_YET_VALID;
    else if (has_iat && t + leeway < iat)
        st = HTTP_JWT_ISSUED_IN_FUTURE;
    else if (!iss || strcmp(json_string_value(iss), v->issuer) != 0)
        st = HTTP_JWT_WRONG_ISSUER;
    else if (!aud || !audience || !audience_ok(aud, audience))
        st = HTTP_JWT_WRONG_AUDIENCE;
    else if (!json_is_string(who) || !principal_ok(json_string_value(who), json_string_length(who)))
        st = HTTP_JWT_BAD_PRINCIPAL;
    else if (snprintf(principal, cap, "jwt:%s", json_string_value(who)) >= (int)cap)
        st = HTTP_JWT_BAD_PRINCIPAL;
    json_decref(c);
    return st;
}
