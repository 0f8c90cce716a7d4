/* Bounded output capture: keeps the first and the last bytes of a stream and counts what was
 * cut in between, so a sandbox that prints a gigabyte costs the caller a fixed amount. */
#ifndef SBX_OUTBUF_H
#define SBX_OUTBUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct outbuf {
    size_t cap;      /* total bytes kept: head + tail */
    size_t head_cap; /* cap / 2 */
    char *head;
    size_t head_len;
    char *tail; /* ring buffer of cap - head_cap bytes */
    size_t tail_cap;
    size_t tail_start;
    size_t tail_len;
    uint64_t total; /* every byte ever appended */
};

void outbuf_init(struct outbuf *b, size_t cap);
void outbuf_free(struct outbuf *b);
void outbuf_reset(struct outbuf *b);
void outbuf_append(struct outbuf *b, const char *data, size_t len);
bool outbuf_truncated(const struct outbuf *b);
uint64_t outbuf_dropped(const struct outbuf *b);
/* The kept text, with "\n[... N bytes cut ...]\n" between head and tail when truncated.
 * Returns a malloc'd NUL-terminated string; *len (optional) excludes the NUL. */
char *outbuf_render(const struct outbuf *b, size_t *len);

#endif
