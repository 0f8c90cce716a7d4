/* libFuzzer target: the JWT access-token checks, which parse bytes any client can send. The first
 * byte picks what the rest is: a bearer token (full verification, also through
 * http_auth_principal next to a static token), a claims set (the checks after the signature,
 * which random tokens never reach), or a JWKS document (the startup loader). Keys are
 * generated once per process. */
#include "transport/http_auth.h"
#include "transport/http_jwt.h"

#include <jose/jose.h>
#include <openssl/evp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const algs[] = {"RS256", "ES256", "PS256", "ES384", "EdDSA"};
static const struct http_jwt_config config = {
    .issuer = "https://login.example.test",
    .principal_claim = "sub",
    .algorithms = algs,
    .n_algorithms = 5,
    .leeway_s = 60,
};
#define AUDIENCE "http://127.0.0.1:8080/mcp"
#define NOW      1700000000

static json_t *public_key(const char *alg, const char *kid)
{
    json_t *k = json_pack("{s:s}", "alg", alg);
    if (!jose_jwk_gen(NULL, k) || !jose_jwk_pub(NULL, k))
        abort();
    json_object_set_new(k, "kid", json_string(kid));
    return k;
}

/* José 11 makes no OKP keys: an Ed25519 public JWK from OpenSSL. */
static json_t *ed25519_key(const char *kid)
{
    EVP_PKEY *k = EVP_PKEY_Q_keygen(NULL, NULL, "ED25519");
    unsigned char raw[32];
    size_t n = sizeof(raw);
    if (!k || EVP_PKEY_get_raw_public_key(k, raw, &n) != 1)
        abort();
    EVP_PKEY_free(k);
    return json_pack("{s:s, s:s, s:o, s:s}", "kty", "OKP", "crv", "Ed25519", "x",
                     jose_b64_enc(raw, n), "kid", kid);
}

static struct http_jwt *verifier(void)
{
    static struct http_jwt *v;
    if (!v) {
        json_t *jwks = json_pack("{s:[o, o, o]}", "keys", public_key("RS256", "r"),
                                 public_key("ES256", "e"), ed25519_key("d"));
        char *text = json_dumps(jwks, JSON_COMPACT);
        struct sbx_err err;
        if (http_jwt_new(&config, text, strlen(text), "fuzz", &v, &err) < 0)
            abort();
        free(text);
        json_decref(jwks);
    }
    return v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    const char *rest = (const char *)data + 1;
    size_t n = size - 1;
    char principal[HTTP_JWT_PRINCIPAL_MAX];
    struct http_jwt *v = verifier();
    switch (data[0] % 3) {
    case 0: {
        enum http_jwt_status st =
            http_jwt_verify(v, rest, n, AUDIENCE, NOW, principal, sizeof(principal));
        /* Nobody holds the private keys, so nothing may pass. */
        if (st == HTTP_JWT_OK)
            abort();
        if (!http_jwt_status_text(st))
            abort();
        char *header = malloc(n + 8);
        if (!header)
            return 0;
        memcpy(header, "Bearer ", 7);
        memcpy(header + 7, rest, n);
        header[n + 7] = '\0';
        struct http_auth a = {0};
        struct sbx_err err;
        http_auth_load_text(&a, "static:a.b.c\n", "fuzz", &err);
        const char *why = NULL;
        const char *p =
            http_auth_principal(&a, v, header, AUDIENCE, NOW, principal, sizeof(principal), &why);
        if (p && strcmp(p, "static") != 0)
            abort();
        http_auth_free(&a);
        free(header);
        break;
    }
    case 1:
        if (http_jwt_check_claims(v, rest, n, AUDIENCE, NOW, principal, sizeof(principal)) ==
                HTTP_JWT_OK &&
            (strncmp(principal, "jwt:", 4) != 0 || strlen(principal) > 4 + HTTP_JWT_CLAIM_MAX))
            abort();
        break;
    default: {
        struct http_jwt *loaded = NULL;
        struct sbx_err err;
        if (http_jwt_new(&config, rest, n, "fuzz", &loaded, &err) == 0 &&
            http_jwt_key_count(loaded) == 0)
            abort();
        http_jwt_free(loaded);
        break;
    }
    }
    return 0;
}
