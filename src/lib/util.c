#include "util.h"

#include "err.h"

#include <fcntl.h>
#include <stdarg.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>

static void oom(void)
{
    static const char msg[] = "mcp-sandbox: out of memory\n";
    ssize_t r = write(2, msg, sizeof(msg) - 1);
    (void)r;
    abort();
}

void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        oom();
    return p;
}

void *xcalloc(size_t n, size_t m)
{
    void *p = calloc(n ? n : 1, m ? m : 1);
    if (!p)
        oom();
    return p;
}

void *xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (!q)
        oom();
    return q;
}

char *xstrndup(const char *s, size_t n)
{
    char *p = xmalloc(n + 1);
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

char *xstrdup(const char *s)
{
    char *p = strdup(s);
    if (!p)
        oom();
    return p;
}

char *xasprintf(const char *fmt, ...)
{
    va_list ap;
    char *s = NULL;
    va_start(ap, fmt);
    int r = vasprintf(&s, fmt, ap);
    va_end(ap);
    if (r < 0)
        oom();
    return s;
}

uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t now_ms(void)
{
    return now_ns() / 1000000ull;
}

uint64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000ull + (uint64_t)ts.tv_nsec / 1000000ull;
}

struct fs_ids fs_ids_switch(uid_t uid, gid_t gid)
{
    struct fs_ids old = {.uid = (uid_t)setfsuid(uid), .gid = (gid_t)setfsgid(gid)};
    return old;
}

void fs_ids_restore(struct fs_ids old)
{
    setfsuid(old.uid);
    setfsgid(old.gid);
}

int write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

int read_file_max(const char *path, size_t max, char **out, size_t *out_len)
{
    cleanup_fd int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    size_t cap = 4096, len = 0;
    cleanup_free char *buf = xmalloc(cap + 1);
    for (;;) {
        if (len == cap) {
            if (cap >= max)
                return -EFBIG;
            cap = cap * 2 > max ? max : cap * 2;
            buf = xrealloc(buf, cap + 1);
        }
        ssize_t n = read(fd, buf + len, cap - len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (n == 0)
            break;
        len += (size_t)n;
    }
    buf[len] = '\0';
    if (out_len)
        *out_len = len;
    *out = steal_pointer(&buf);
    return 0;
}

int write_file_str(const char *path, const char *s)
{
    cleanup_fd int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    return write_all(fd, s, strlen(s));
}

int parse_size(const char *s, uint64_t *out)
{
    if (!s || !*s)
        return -EINVAL;
    /* Digits first: strtoull would skip spaces and take a sign (" -1" is 2^64 - 1). */
    if (s[0] < '0' || s[0] > '9')
        return -EINVAL;
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s)
        return -EINVAL;
    uint64_t mul = 1;
    switch (*end) {
    case '\0':
        break;
    case 'k':
    case 'K':
        mul = 1ull << 10;
        end++;
        break;
    case 'm':
    case 'M':
        mul = 1ull << 20;
        end++;
        break;
    case 'g':
    case 'G':
        mul = 1ull << 30;
        end++;
        break;
    case 't':
    case 'T':
        mul = 1ull << 40;
        end++;
        break;
    default:
        return -EINVAL;
    }
    if (*end == 'i' && mul > 1)
        end++;
    if (*end == 'B' || *end == 'b')
        end++;
    if (*end != '\0')
        return -EINVAL;
    if (v > UINT64_MAX / mul)
        return -ERANGE;
    *out = (uint64_t)v * mul;
    return 0;
}

void format_iso8601_ms(char *buf, size_t size, int64_t ms)
{
    time_t t = (time_t)(ms / 1000);
    struct tm tm;
    gmtime_r(&t, &tm);
    char day[40];
    strftime(day, sizeof(day), "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf, size, "%s.%03dZ", day, (int)(ms % 1000));
}

/* Length of the well-formed UTF-8 sequence at s (at most n bytes), or 0 (RFC 3629 table 3-7). */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
    unsigned char c = s[0];
    size_t len;
    unsigned char lo = 0x80, hi = 0xBF; /* bounds of the second byte */
    if (c < 0x80)
        return 1;
    if (c >= 0xC2 && c <= 0xDF)
        len = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        if (c == 0xE0)
            lo = 0xA0;
        else if (c == 0xED)
            hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        if (c == 0xF0)
            lo = 0x90;
        else if (c == 0xF4)
            hi = 0x8F;
    } else {
        return 0;
    }
    if (n < len || s[1] < lo || s[1] > hi)
        return 0;
    for (size_t i = 2; i < len; i++)
        if ((s[i] & 0xC0) != 0x80)
            return 0;
    return len;
}

char *utf8_cut_marked(const char *s, size_t max, const char *marker)
{
    if (strlen(s) <= max)
        return xstrdup(s);
    size_t keep = max - strlen(marker);
    while (keep > 0 && ((unsigned char)s[keep] & 0xc0) == 0x80)
        keep--;
    return xasprintf("%.*s%s", (int)keep, s, marker);
}

size_t utf8_valid_prefix(const char *buf, size_t len)
{
    const unsigned char *s = (const unsigned char *)buf;
    size_t i = 0, l;
    while (i < len && (l = utf8_seq(s + i, len - i)))
        i += l;
    return i;
}

size_t utf8_scrub(char *buf, size_t len)
{
    unsigned char *s = (unsigned char *)buf;
    size_t replaced = 0;
    for (size_t i = 0; i < len;) {
        size_t l = utf8_seq(s + i, len - i);
        if (l) {
            i += l;
            continue;
        }
        s[i++] = '?';
        replaced++;
    }
    return replaced;
}

char *utf8_with_replacements(const char *buf, size_t len, size_t *out_len)
{
    const unsigned char *s = (const unsigned char *)buf;
    char *out = xmalloc(3 * len + 1), *o = out;
    for (size_t i = 0; i < len;) {
        size_t l = utf8_seq(s + i, len - i);
        if (l) {
            memcpy(o, s + i, l);
            o += l;
            i += l;
        } else {
            memcpy(o, "\xef\xbf\xbd", 3); /* U+FFFD */
            o += 3;
            i++;
        }
    }
    *o = '\0';
    *out_len = (size_t)(o - out);
    return out;
}

static bool uri_unreserved(unsigned char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           ch == '-' || ch == '.' || ch == '_' || ch == '~' || ch == '/';
}

char *uri_path_encode(const char *path)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n = strlen(path);
    char *out = xmalloc(3 * n + 1), *o = out;
    for (const unsigned char *p = (const unsigned char *)path; *p; p++) {
        if (uri_unreserved(*p)) {
            *o++ = (char)*p;
        } else {
            *o++ = '%';
            *o++ = hex[*p >> 4];
            *o++ = hex[*p & 15];
        }
    }
    *o = '\0';
    return out;
}

int hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

bool uri_path_decode(const char *in, char *out, size_t size)
{
    size_t n = 0;
    for (const char *p = in; *p; p++) {
        if (n + 1 >= size)
            return false;
        char ch = *p;
        if (ch == '%') {
            int hi = hex_digit(p[1]), lo = hi < 0 ? -1 : hex_digit(p[2]);
            if (lo < 0 || (hi | lo) == 0)
                return false;
            ch = (char)(hi << 4 | lo);
            p += 2;
        }
        out[n++] = ch;
    }
    out[n] = '\0';
    return true;
}

int parse_cpus(const char *s, uint32_t min_millis, uint32_t max_millis, uint32_t *millis)
{
    /* A plain decimal ("0.5", "2"): strtod would also take " 1", "0x10" and "1e3". */
    size_t whole = s ? strspn(s, "0123456789") : 0;
    size_t frac = s && s[whole] == '.' ? strspn(s + whole + 1, "0123456789") : 0;
    if (!s || whole + frac == 0 || s[whole + (s[whole] == '.' ? 1 + frac : 0)] != '\0')
        return -EINVAL;
    char *end = NULL;
    double d = s && *s ? strtod(s, &end) : 0;
    /* Range-checked before the cast (a huge value must not overflow it); NaN fails it. */
    if (!end || *end || !(d >= min_millis / 1000.0 && d <= max_millis / 1000.0))
        return -EINVAL;
    uint64_t m = (uint64_t)(d * 1000 + 0.5);
    if (m < min_millis || m > max_millis)
        return -EINVAL;
    *millis = (uint32_t)m;
    return 0;
}

uint64_t unguessable_u64(void)
{
    uint64_t v = 0;
    if (getrandom(&v, sizeof(v), 0) != (ssize_t)sizeof(v))
        v = now_ns();
    return v;
}

bool json_text_values_within(const char *s, size_t n, size_t max)
{
    size_t count = 1;
    bool in_string = false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (in_string) {
            if (c == '\\')
                i++;
            else if (c == '"')
                in_string = false;
        } else if (c == '"') {
            in_string = true;
        } else if (c == ',' || c == ':' || c == '{' || c == '[') {
            if (++count > max)
                return false;
        }
    }
    return true;
}

int mkdir_parents(const char *path, struct sbx_err *err)
{
    char dir[4096];
    snprintf(dir, sizeof(dir), "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash || slash == dir)
        return 0;
    *slash = '\0';
    for (char *p = dir + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(dir, 0700) < 0 && errno != EEXIST)
            return sbx_fail_errno(err, errno, "creating %s", dir);
        *p = '/';
    }
    if (mkdir(dir, 0700) < 0 && errno != EEXIST)
        return sbx_fail_errno(err, errno, "creating the state directory %s", dir);
    return 0;
}

int parse_u32(const char *s, uint32_t min, uint32_t max, uint32_t *out)
{
    /* Digits only: strtoul would also take " 5", "+5" and "-5". */
    if (!*s || strspn(s, "0123456789") != strlen(s))
        return -EINVAL;
    errno = 0;
    unsigned long v = strtoul(s, NULL, 10);
    if (errno || v < min || v > max)
        return -EINVAL;
    *out = (uint32_t)v;
    return 0;
}

int send_with_fds(int sock, const void *buf, size_t len, const int *fds, size_t nfds)
{
    if (nfds > MSG_FDS_MAX)
        return -EINVAL;
    struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
    union {
        struct cmsghdr h;
        char b[CMSG_SPACE(MSG_FDS_MAX * sizeof(int))];
    } u;
    memset(&u, 0, sizeof(u));
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
    if (nfds) {
        msg.msg_control = u.b;
        msg.msg_controllen = CMSG_SPACE(nfds * sizeof(int));
        struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(nfds * sizeof(int));
        memcpy(CMSG_DATA(c), fds, nfds * sizeof(int));
    }
    ssize_t w;
    do
        w = sendmsg(sock, &msg, MSG_NOSIGNAL);
    while (w < 0 && errno == EINTR);
    if (w < 0)
        return -errno;
    return (size_t)w == len ? 0 : -EPROTO;
}

ssize_t recv_with_fds(int sock, void *buf, size_t len, int flags, int *fds, size_t max,
                      size_t *nfds, bool *truncated)
{
    struct iovec iov = {.iov_base = buf, .iov_len = len};
    union {
        struct cmsghdr h;
        char b[CMSG_SPACE(MSG_FDS_MAX * sizeof(int))];
    } u;
    struct msghdr msg = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.b, .msg_controllen = sizeof(u.b)};
    ssize_t r;
    do
        r = recvmsg(sock, &msg, flags | MSG_CMSG_CLOEXEC);
    while (r < 0 && errno == EINTR);
    *nfds = 0;
    *truncated = false;
    if (r < 0)
        return r;
    *truncated = (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
            continue;
        size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < count; i++) {
            int fd;
            memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
            if (*nfds < max)
                fds[(*nfds)++] = fd;
            else
                close(fd);
        }
    }
    return r;
}
