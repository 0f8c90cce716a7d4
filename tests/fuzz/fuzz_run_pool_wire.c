/* libFuzzer target: arbitrary bytes as one message to the run pool or back from it (the pool
 * decodes what any process of its uid sends). A message that decodes must encode again to as
 * many bytes, which decode to the same message. */
#include "lib/run_pool_wire.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static size_t encode_again(const struct run_pool_msg *m, char *buf, size_t cap)
{
    switch (m->type) {
    case RP_REQUEST:
        return run_pool_encode_request(buf, cap, m->key, m->key_len, (char *const *)m->argv);
    case RP_QUERY:
    case RP_KILL:
        return run_pool_encode_bare(buf, cap, m->type);
    case RP_SIGNAL:
        return run_pool_encode_signal(buf, cap, m->sig);
    case RP_MISS:
    case RP_FAILED:
    case RP_STATE:
        return run_pool_encode_text(buf, cap, m->type, m->code, m->text);
    case RP_STARTED:
    case RP_ENDED:
        return run_pool_encode_report(buf, cap, m->type, &m->report);
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct run_pool_msg m, again;
    if (!run_pool_decode((const char *)data, size, &m))
        return 0;
    static char buf[RUN_POOL_MSG_MAX];
    size_t n = encode_again(&m, buf, sizeof(buf));
    if (n == 0)
        abort();
    /* Texts are cleaned on the way in (bad UTF-8 replaced), so only the cleaned message is
     * stable: decoding what was encoded gives it back unchanged. */
    if (!run_pool_decode(buf, n, &again) || again.type != m.type || again.argc != m.argc ||
        again.sig != m.sig || again.code != m.code || strcmp(again.text, m.text) != 0 ||
        memcmp(&again.report, &m.report, sizeof(m.report)) != 0)
        abort();
    for (size_t i = 0; i < m.argc; i++)
        if (strcmp(again.argv[i], m.argv[i]) != 0)
            abort();
    if (n != size)
        abort(); /* cleaning a text replaces bytes, it never drops one */
    return 0;
}
