/* libFuzzer target: the HTTP pieces that will parse untrusted header values and files: Host,
 * Origin, Accept, Content-Type, Last-Event-ID, Authorization, the tokens file and Range. The input
 * is split at NUL bytes so one run feeds every parser a different value. */
#include "transport/http_auth.h"
#include "transport/http_policy.h"
#include "transport/http_replay.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = malloc(size + 1);
    if (!buf)
        return 0;
    memcpy(buf, data, size);
    buf[size] = '\0';
    const char *parts[9];
    size_t n = 0;
    for (char *p = buf; n < 9 && p <= buf + size; p += strlen(p) + 1)
        parts[n++] = p;
    while (n < 9)
        parts[n++] = "";
    static const char *const allowed[] = {"example.test", "localhost:8080", "https://a.test"};
    (void)http_host_allowed(parts[0], NULL, 0);
    (void)http_host_allowed(parts[0], allowed, 3);
    (void)http_origin_allowed(parts[1], NULL, 0);
    (void)http_origin_allowed(parts[1], allowed, 3);
    (void)http_accept_post_ok(parts[2]);
    (void)http_accept_has(parts[2], "text/event-stream");
    (void)http_content_type_json(parts[3]);
    (void)http_listen_is_loopback(parts[4]);
    uint64_t stream, seq;
    if (http_event_id_parse(parts[5], &stream, &seq)) {
        char again[64];
        /* A parsed id formats back to something that parses to the same numbers. */
        if (http_event_id_format(again, sizeof(again), stream, seq) > 0) {
            uint64_t s2, q2;
            if (!http_event_id_parse(again, &s2, &q2) || s2 != stream || q2 != seq)
                abort();
        }
    }
    size_t len = 0;
    const char *tok = http_auth_bearer(parts[6], &len);
    struct http_auth auth = {0};
    struct sbx_err err;
    http_auth_load_text(&auth, parts[7], "fuzz", &err);
    if (tok)
        (void)http_auth_check(&auth, tok, len);
    http_auth_free(&auth);
    /* A satisfiable range lies within the file, first byte before last. */
    for (uint64_t fsize = 0; fsize < 300; fsize += 100) {
        uint64_t from = 0, to = 0;
        if (http_range_parse(parts[8], fsize, &from, &to) == HTTP_RANGE_SATISFIABLE &&
            (from > to || to >= fsize))
            abort();
    }
    free(buf);
    return 0;
}
