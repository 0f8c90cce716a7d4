#include "run_pool_wire.h"

#include "util.h"

#include <string.h>

/* Appends to a buffer of fixed size; once something did not fit, nothing more is written and
 * the message is refused as a whole. */
struct writer {
    char *buf;
    size_t cap, len;
    bool full;
};

static void put(struct writer *w, const void *p, size_t n)
{
    if (w->full || n > w->cap - w->len) {
        w->full = true;
        return;
    }
    memcpy(w->buf + w->len, p, n);
    w->len += n;
}

static void put_u8(struct writer *w, uint8_t v)
{
    put(w, &v, 1);
}

static void put_u32(struct writer *w, uint32_t v)
{
    uint8_t b[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    put(w, b, sizeof(b));
}

static void put_u64(struct writer *w, uint64_t v)
{
    put_u32(w, (uint32_t)v);
    put_u32(w, (uint32_t)(v >> 32));
}

/* A string as a 32-bit length and its bytes. */
static void put_str(struct writer *w, const char *s, size_t n)
{
    put_u32(w, (uint32_t)n);
    put(w, s, n);
}

static struct writer start(char *buf, size_t cap, enum run_pool_type type)
{
    struct writer w = {.buf = buf, .cap = cap};
    put_u8(&w, (uint8_t)type);
    put_u8(&w, RUN_POOL_VERSION);
    return w;
}

static size_t finish(const struct writer *w)
{
    return w->full ? 0 : w->len;
}

size_t run_pool_encode_request(char *buf, size_t cap, const void *key, size_t key_len,
                               char *const *argv)
{
    if (key_len > RUN_POOL_KEY_MAX || !argv || !argv[0] || !argv[0][0])
        return 0;
    size_t argc = 0, bytes = 0;
    for (; argv[argc]; argc++)
        bytes += strlen(argv[argc]) + 1;
    if (argc > RUN_POOL_ARGC_MAX || bytes > RUN_POOL_ARGV_BYTES)
        return 0;
    struct writer w = start(buf, cap, RP_REQUEST);
    put_str(&w, key, key_len);
    put_u32(&w, (uint32_t)argc);
    for (size_t i = 0; i < argc; i++)
        put_str(&w, argv[i], strlen(argv[i]) + 1);
    return finish(&w);
}

size_t run_pool_encode_bare(char *buf, size_t cap, enum run_pool_type type)
{
    if (type != RP_QUERY && type != RP_KILL)
        return 0;
    struct writer w = start(buf, cap, type);
    return finish(&w);
}

size_t run_pool_encode_signal(char *buf, size_t cap, int sig)
{
    struct writer w = start(buf, cap, RP_SIGNAL);
    put_u32(&w, (uint32_t)sig);
    return finish(&w);
}

size_t run_pool_encode_text(char *buf, size_t cap, enum run_pool_type type, int code,
                            const char *text)
{
    if (type != RP_MISS && type != RP_FAILED && type != RP_STATE)
        return 0;
    cleanup_free char *cut = utf8_cut_marked(text ? text : "", RUN_POOL_TEXT_MAX - 1, "...");
    struct writer w = start(buf, cap, type);
    put_u32(&w, (uint32_t)code);
    put_str(&w, cut, strlen(cut));
    return finish(&w);
}

size_t run_pool_encode_report(char *buf, size_t cap, enum run_pool_type type,
                              const struct run_pool_report *r)
{
    if (type != RP_STARTED && type != RP_ENDED)
        return 0;
    struct writer w = start(buf, cap, type);
    put_u32(&w, (uint32_t)r->exit_code);
    put_u32(&w, (uint32_t)r->term_signal);
    put_u8(&w, r->oom_killed);
    put_u64(&w, r->memory_peak_bytes);
    put_u64(&w, r->cpu_ns);
    put_u64(&w, r->setup_ns);
    put_u64(&w, r->command_ns);
    put_str(&w, r->limits_backend, strnlen(r->limits_backend, sizeof(r->limits_backend) - 1));
    put_str(&w, r->degraded, strnlen(r->degraded, sizeof(r->degraded) - 1));
    return finish(&w);
}

/* Reads from a received message; past its end, every read fails and the message is refused. */
struct reader {
    const char *buf;
    size_t len, off;
    bool bad;
};

static const char *take(struct reader *r, size_t n)
{
    if (r->bad || n > r->len - r->off) {
        r->bad = true;
        return NULL;
    }
    const char *p = r->buf + r->off;
    r->off += n;
    return p;
}

static uint8_t get_u8(struct reader *r)
{
    const char *p = take(r, 1);
    return p ? (uint8_t)p[0] : 0;
}

static uint32_t get_u32(struct reader *r)
{
    const unsigned char *p = (const unsigned char *)take(r, 4);
    return p ? (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24
             : 0;
}

static uint64_t get_u64(struct reader *r)
{
    uint64_t lo = get_u32(r);
    return lo | (uint64_t)get_u32(r) << 32;
}

/* A string's bytes, at most max of them. */
static const char *get_str(struct reader *r, size_t max, size_t *n)
{
    uint32_t len = get_u32(r);
    if (len > max) {
        r->bad = true;
        return NULL;
    }
    *n = len;
    return take(r, len);
}

/* Into out (size > max), NUL-terminated, what is not UTF-8 (and any NUL) replaced. */
static void get_text(struct reader *r, char *out, size_t size)
{
    size_t n = 0;
    const char *s = get_str(r, size - 1, &n);
    if (!s) {
        out[0] = '\0';
        return;
    }
    memcpy(out, s, n);
    out[n] = '\0';
    for (size_t i = 0; i < n; i++)
        if (out[i] == '\0')
            out[i] = '?';
    utf8_scrub(out, n);
}

static void get_request(struct reader *r, struct run_pool_msg *m)
{
    m->key = get_str(r, RUN_POOL_KEY_MAX, &m->key_len);
    uint32_t argc = get_u32(r);
    if (argc == 0 || argc > RUN_POOL_ARGC_MAX) {
        r->bad = true;
        return;
    }
    /* Each string comes with its NUL, so that argv can point into the message. */
    size_t total = 0;
    for (uint32_t i = 0; i < argc && !r->bad; i++) {
        size_t n = 0;
        const char *s = get_str(r, RUN_POOL_ARGV_BYTES, &n);
        total += n;
        if (!s || n == 0 || s[n - 1] != '\0' || memchr(s, '\0', n - 1) ||
            total > RUN_POOL_ARGV_BYTES || (i == 0 && n == 1)) {
            r->bad = true;
            return;
        }
        m->argv[i] = s;
    }
    m->argc = argc;
    m->argv[argc] = NULL;
}

bool run_pool_decode(const char *buf, size_t len, struct run_pool_msg *m)
{
    memset(m, 0, sizeof(*m));
    struct reader r = {.buf = buf, .len = len};
    uint8_t type = get_u8(&r);
    if (get_u8(&r) != RUN_POOL_VERSION || r.bad)
        return false;
    m->type = (enum run_pool_type)type;
    switch (type) {
    case RP_REQUEST:
        get_request(&r, m);
        break;
    case RP_QUERY:
    case RP_KILL:
        break;
    case RP_SIGNAL:
        m->sig = (int)get_u32(&r);
        if (m->sig <= 0 || m->sig > 64)
            r.bad = true;
        break;
    case RP_MISS:
    case RP_FAILED:
    case RP_STATE:
        m->code = (int)get_u32(&r);
        get_text(&r, m->text, sizeof(m->text));
        break;
    case RP_STARTED:
    case RP_ENDED: {
        struct run_pool_report *rep = &m->report;
        rep->exit_code = (int32_t)get_u32(&r);
        rep->term_signal = (int32_t)get_u32(&r);
        uint8_t oom = get_u8(&r);
        rep->oom_killed = oom == 1;
        if (oom > 1 || rep->exit_code < -1 || rep->exit_code > 255 || rep->term_signal < 0 ||
            rep->term_signal > 64)
            r.bad = true;
        rep->memory_peak_bytes = get_u64(&r);
        rep->cpu_ns = get_u64(&r);
        rep->setup_ns = get_u64(&r);
        rep->command_ns = get_u64(&r);
        get_text(&r, rep->limits_backend, sizeof(rep->limits_backend));
        get_text(&r, rep->degraded, sizeof(rep->degraded));
        break;
    }
    default:
        return false;
    }
    return !r.bad && r.off == r.len;
}
