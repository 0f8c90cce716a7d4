/* A small load client for the Streamable HTTP transport, so that the client is not what a
 * throughput figure measures. One thread, epoll, one keep-alive connection per MCP session.
 * Each session sends initialize and notifications/initialized, warms its own sandbox with
 * one call, waits until every session is ready, then loops the same tools/call (with a fresh
 * JSON-RPC id each time) until the time or the call count is up. Answers may come as one
 * JSON body or as an SSE stream (chunked); either way the whole answer is read and checked:
 * a JSON-RPC error, "isError":true, a missing expected string or any HTTP failure counts as
 * an error. At the end every session is ended with DELETE (which closes its sandboxes).
 *
 *   httpload --port P [--sessions 1,8,64] [--seconds S | --calls N] [--tool run_code]
 *            [--args '{"code":"x=1"}'] [--expect SUBSTRING] [--warmup K] [--settle S]
 *            [--cpu-pid SERVER_PID [--sandbox-cpu-file FILE]]
 *
 * --settle waits that long, idle, between the set-up and the measured window (new sandboxes
 * and the warm pool's refill are set-up, not the steady state). --cpu-pid reads the CPU time
 * of the server and of its descendants (the sandboxes) and of the whole machine over the
 * measured window (and of the kernel's threads, where namespaces and cgroups are torn
 * down), so a figure comes with what it cost and who paid. The sandboxes' CPU comes from
 * --sandbox-cpu-file (the cgroup above them: cpuacct.usage, or cpu.stat on cgroup v2) when
 * given, which also counts sandboxes gone by the end; else from the processes under the
 * server (an interpreter killed with its pid namespace is reaped by nobody and not counted).
 *
 * One JSON line per level on stdout: calls, errors, calls/s, latency percentiles (us) and
 * CPU seconds (the client's own, and with --cpu-pid the server's, the sandboxes' and the
 * machine's). Built by bench/run; not part of the server. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <dirent.h>

#include "proc_stat.h"

enum phase { P_INIT, P_NOTIFY, P_WARM, P_READY, P_CALL, P_DELETE, P_DONE };

struct conn {
    int fd;
    enum phase phase;
    char sid[80];
    char *out;
    size_t out_len, out_off;
    char *in;
    size_t in_len, in_cap;
    uint64_t sent_ns;
    uint64_t next_id;
    unsigned warm_left;
    unsigned long calls_left; /* --calls mode */
};

struct sample_buf {
    uint32_t *v; /* latency in units of 100 ns: up to seven minutes fits */
    size_t len, cap;
};

static struct {
    unsigned port;
    const char *tool, *args, *expect;
    double seconds;
    unsigned long calls;
    unsigned warmup;
    double settle;
    int cpu_pid;
    const char *sandbox_cpu_file;
} opt = {0, "run_code", "{\"code\":\"x=1\"}", NULL, 5.0, 0, 1, 0, 0, NULL};

static int g_ep = -1;
static struct conn *g_conns;
static size_t g_n;
static size_t g_ready, g_done;
static bool g_measuring, g_stopping;
static uint64_t g_t0, g_deadline;
static unsigned long g_ok, g_err, g_setup_err;
static struct sample_buf g_lat;
static char g_last_error[256];

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void *xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n);
    if (!q) {
        fprintf(stderr, "httpload: out of memory\n");
        exit(1);
    }
    return q;
}

static void note_error(const char *what, const char *body, size_t len)
{
    snprintf(g_last_error, sizeof(g_last_error), "%s: %.*s", what, (int)(len > 180 ? 180 : len),
             body ? body : "");
}

/* ---- requests ---- */

static void set_request(struct conn *c, const char *method, const char *body)
{
    char head[512];
    size_t blen = body ? strlen(body) : 0;
    int hl = snprintf(head, sizeof(head),
                      "%s /mcp HTTP/1.1\r\nHost: 127.0.0.1:%u\r\n"
                      "Accept: application/json, text/event-stream\r\n"
                      "Content-Type: application/json\r\n%s%s%sContent-Length: %zu\r\n\r\n",
                      method, opt.port, c->sid[0] ? "Mcp-Session-Id: " : "", c->sid,
                      c->sid[0] ? "\r\n" : "", blen);
    c->out = xrealloc(c->out, (size_t)hl + blen);
    memcpy(c->out, head, (size_t)hl);
    if (blen)
        memcpy(c->out + hl, body, blen);
    c->out_len = (size_t)hl + blen;
    c->out_off = 0;
    c->in_len = 0;
}

static void set_call(struct conn *c)
{
    char body[8192];
    snprintf(body, sizeof(body),
             "{\"jsonrpc\":\"2.0\",\"id\":%llu,\"method\":\"tools/call\",\"params\":{\"name\":"
             "\"%s\",\"arguments\":%s}}",
             (unsigned long long)++c->next_id, opt.tool, opt.args);
    set_request(c, "POST", body);
}

static void set_phase_request(struct conn *c)
{
    switch (c->phase) {
    case P_INIT:
        set_request(c, "POST",
                    "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{"
                    "\"protocolVersion\":\"2025-11-25\",\"capabilities\":{},\"clientInfo\":{"
                    "\"name\":\"httpload\",\"version\":\"1\"}}}");
        break;
    case P_NOTIFY:
        set_request(c, "POST", "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}");
        break;
    case P_WARM:
    case P_CALL:
        set_call(c);
        break;
    case P_DELETE:
        set_request(c, "DELETE", NULL);
        break;
    default:
        break;
    }
}

static void want_events(struct conn *c, uint32_t ev)
{
    struct epoll_event e = {.events = ev, .data.ptr = c};
    epoll_ctl(g_ep, EPOLL_CTL_MOD, c->fd, &e);
}

static int flush_out(struct conn *c)
{
    while (c->out_off < c->out_len) {
        ssize_t n = write(c->fd, c->out + c->out_off, c->out_len - c->out_off);
        if (n < 0) {
            if (errno == EAGAIN) {
                want_events(c, EPOLLIN | EPOLLOUT);
                return 0;
            }
            if (errno == EINTR)
                continue;
            return -1;
        }
        c->out_off += (size_t)n;
    }
    return 0;
}

static int send_now(struct conn *c)
{
    c->sent_ns = now_ns();
    return flush_out(c);
}

/* ---- responses ---- */

/* Returns 1 when a whole response is in c->in (its body decoded into *body), 0 if more bytes
 * are needed, -1 if it cannot be parsed. */
static int parse_response(struct conn *c, int *status, char **body, size_t *body_len)
{
    char *end = memmem(c->in, c->in_len, "\r\n\r\n", 4);
    if (!end)
        return 0;
    size_t head_len = (size_t)(end - c->in) + 4;
    if (c->in_len < 12 || memcmp(c->in, "HTTP/1.", 7) != 0)
        return -1;
    *status = atoi(c->in + 9);
    bool chunked = false;
    long clen = -1;
    for (char *line = memchr(c->in, '\n', head_len) + 1; line < end;) {
        char *eol = memchr(line, '\n', (size_t)(end + 2 - line));
        if (!eol)
            break;
        if (strncasecmp(line, "Content-Length:", 15) == 0)
            clen = strtol(line + 15, NULL, 10);
        else if (strncasecmp(line, "Transfer-Encoding:", 18) == 0 &&
                 memmem(line, (size_t)(eol - line), "chunked", 7))
            chunked = true;
        else if (strncasecmp(line, "Mcp-Session-Id:", 15) == 0 && !c->sid[0]) {
            char *v = line + 15;
            while (*v == ' ')
                v++;
            size_t n = (size_t)(eol - v);
            while (n && (v[n - 1] == '\r' || v[n - 1] == ' '))
                n--;
            if (n < sizeof(c->sid)) {
                memcpy(c->sid, v, n);
                c->sid[n] = '\0';
            }
        }
        line = eol + 1;
    }
    char *p = c->in + head_len;
    size_t avail = c->in_len - head_len;
    if (!chunked) {
        size_t need = clen < 0 ? 0 : (size_t)clen;
        if (avail < need)
            return 0;
        *body = p;
        *body_len = need;
        return 1;
    }
    /* Chunked: first check that the last chunk is in, then decode in place (the decoded
     * body is never longer than the encoded one, and a partial buffer stays untouched). */
    size_t scan = 0;
    for (;;) {
        char *eol = memmem(p + scan, avail - scan, "\r\n", 2);
        if (!eol)
            return 0;
        size_t sz = strtoul(p + scan, NULL, 16);
        size_t hdr = (size_t)(eol - (p + scan)) + 2;
        if (avail - scan < hdr + sz + 2)
            return 0;
        scan += hdr + sz + 2;
        if (sz == 0)
            break;
    }
    char *w = p;
    for (;;) {
        char *eol = memmem(p, avail, "\r\n", 2);
        size_t sz = strtoul(p, NULL, 16);
        size_t hdr = (size_t)(eol - p) + 2;
        if (sz == 0) {
            *body = c->in + head_len;
            *body_len = (size_t)(w - (c->in + head_len));
            return 1;
        }
        memmove(w, p + hdr, sz);
        w += sz;
        p += hdr + sz + 2;
        avail -= hdr + sz + 2;
    }
}

/* A tool call's answer (JSON, or the data lines of an SSE stream) is right when it is a
 * JSON-RPC result with "isError":false and, if asked, contains the expected text. */
static bool call_ok(const char *body, size_t len)
{
    if (!memmem(body, len, "\"result\":", 9) || !memmem(body, len, "\"isError\":false", 15))
        return false;
    return !opt.expect || memmem(body, len, opt.expect, strlen(opt.expect));
}

static void record(uint64_t ns)
{
    if (g_lat.len == g_lat.cap) {
        g_lat.cap = g_lat.cap ? g_lat.cap * 2 : 65536;
        g_lat.v = xrealloc(g_lat.v, g_lat.cap * sizeof(*g_lat.v));
    }
    uint64_t u = ns / 100;
    g_lat.v[g_lat.len++] = u > UINT32_MAX ? UINT32_MAX : (uint32_t)u;
}

static void finish_conn(struct conn *c)
{
    c->phase = P_DONE;
    epoll_ctl(g_ep, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    c->fd = -1;
    g_done++;
}

static void start_delete(struct conn *c)
{
    c->phase = P_DELETE;
    set_phase_request(c);
    if (send_now(c) < 0)
        finish_conn(c);
}

/* ---- CPU accounting of the server, its sandboxes and the machine ---- */

struct cpu_sample {
    double server, sandboxes, kernel_threads, machine_busy;
};

static double ticks;

/* utime + stime of one process (with reaped, its waited-for children's too), in seconds; 0 if
 * it is gone. */
static double proc_cpu_ex(int pid, bool reaped)
{
    char path[64], buf[1024];
    snprintf(path, sizeof(path), "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    unsigned long long ut = 0, st = 0, cut = 0, cst = 0;
    if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %llu %llu", &ut,
                     &st, &cut, &cst) != 4)
        return 0;
    return (double)(reaped ? cut + cst : ut + st) / ticks;
}

static double proc_cpu(int pid)
{
    return proc_cpu_ex(pid, false);
}

/* The process and all its descendants (through /proc/PID/task/TID/children). */
static double tree_cpu(int pid, int depth)
{
    double sum = depth ? proc_cpu(pid) : 0;
    if (depth > 8)
        return sum;
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/task", pid);
    DIR *d = opendir(path);
    if (!d)
        return sum;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char cp[320];
        snprintf(cp, sizeof(cp), "/proc/%d/task/%s/children", pid, e->d_name);
        FILE *f = fopen(cp, "r");
        if (!f)
            continue;
        int child;
        while (fscanf(f, "%d", &child) == 1)
            sum += tree_cpu(child, depth + 1);
        fclose(f);
    }
    closedir(d);
    return sum;
}

/* Kernel threads (children of kthreadd): tearing down namespaces and cgroups happens there. */
static double kernel_threads_cpu(void)
{
    DIR *d = opendir("/proc");
    if (!d)
        return 0;
    double sum = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        char path[300], buf[1024];
        snprintf(path, sizeof(path), "/proc/%s/stat", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        size_t n = fread(buf, 1, sizeof(buf) - 1, f);
        fclose(f);
        buf[n] = '\0';
        char *p = strrchr(buf, ')');
        int ppid = 0;
        if (p && sscanf(p + 2, "%*c %d", &ppid) == 1 && (ppid == 2 || atoi(e->d_name) == 2))
            sum += proc_cpu(atoi(e->d_name));
    }
    closedir(d);
    return sum;
}

/* Seconds of CPU in a cgroup's accounting file: cpuacct.usage (ns) or cpu.stat (usage_usec). */
static double cgroup_cpu(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    char line[256];
    double v = 0;
    while (fgets(line, sizeof(line), f)) {
        unsigned long long n;
        if (sscanf(line, "usage_usec %llu", &n) == 1) {
            v = (double)n / 1e6;
            break;
        }
        if (sscanf(line, "%llu", &n) == 1) {
            v = (double)n / 1e9;
            break;
        }
    }
    fclose(f);
    return v;
}

static struct cpu_sample cpu_sample(void)
{
    struct cpu_sample s = {0};
    if (opt.cpu_pid) {
        s.server = proc_cpu(opt.cpu_pid);
        /* Live sandboxes, plus the ones the server reaped (their CPU is in its cutime). */
        s.sandboxes = opt.sandbox_cpu_file
                          ? cgroup_cpu(opt.sandbox_cpu_file)
                          : tree_cpu(opt.cpu_pid, 0) + proc_cpu_ex(opt.cpu_pid, true);
        s.kernel_threads = kernel_threads_cpu();
        s.machine_busy = machine_busy_seconds();
    }
    return s;
}

static struct cpu_sample g_cpu0, g_cpu1;

static void start_measuring(void)
{
    if (opt.settle > 0) {
        /* Idle meanwhile: every session waits for its first measured call. */
        struct timespec ts = {(time_t)opt.settle, (long)((opt.settle - (time_t)opt.settle) * 1e9)};
        nanosleep(&ts, NULL);
    }
    g_cpu0 = cpu_sample();
    g_measuring = true;
    g_t0 = now_ns();
    g_deadline = opt.calls ? UINT64_MAX : g_t0 + (uint64_t)(opt.seconds * 1e9);
    for (size_t i = 0; i < g_n; i++) {
        struct conn *c = &g_conns[i];
        if (c->phase != P_READY)
            continue;
        c->phase = P_CALL;
        c->calls_left = opt.calls;
        set_phase_request(c);
        if (send_now(c) < 0)
            finish_conn(c);
    }
}

/* A session that failed to set up is counted and ended; the others still run. */
static void setup_failed(struct conn *c, const char *why, const char *body, size_t len)
{
    g_setup_err++;
    note_error(why, body, len);
    if (c->sid[0])
        start_delete(c);
    else
        finish_conn(c);
    g_ready++; /* no longer waited for */
    if (g_ready == g_n && !g_measuring)
        start_measuring();
}

static void on_response(struct conn *c, int status, const char *body, size_t len)
{
    uint64_t t = now_ns();
    switch (c->phase) {
    case P_INIT:
        if (status != 200 || !c->sid[0])
            return setup_failed(c, "initialize", body, len);
        c->phase = P_NOTIFY;
        break;
    case P_NOTIFY:
        if (status != 202)
            return setup_failed(c, "notifications/initialized", body, len);
        c->phase = opt.warmup ? P_WARM : P_READY;
        c->warm_left = opt.warmup;
        break;
    case P_WARM:
        if (status != 200 || !call_ok(body, len))
            return setup_failed(c, "warm-up call", body, len);
        if (--c->warm_left == 0)
            c->phase = P_READY;
        break;
    case P_CALL: {
        bool ok = status == 200 && call_ok(body, len);
        if (t <= g_deadline) {
            if (ok) {
                g_ok++;
                record(t - c->sent_ns);
            } else {
                g_err++;
                note_error("call", body, len);
            }
        }
        if (g_stopping || t >= g_deadline || (opt.calls && --c->calls_left == 0)) {
            start_delete(c);
            return;
        }
        break;
    }
    case P_DELETE:
        finish_conn(c);
        return;
    default:
        return;
    }
    if (c->phase == P_READY) {
        if (++g_ready == g_n)
            start_measuring();
        return;
    }
    set_phase_request(c);
    if (send_now(c) < 0)
        finish_conn(c);
}

static void on_readable(struct conn *c)
{
    for (;;) {
        if (c->in_cap - c->in_len < 16384) {
            c->in_cap = c->in_cap ? c->in_cap * 2 : 65536;
            c->in = xrealloc(c->in, c->in_cap);
        }
        ssize_t n = read(c->fd, c->in + c->in_len, c->in_cap - c->in_len - 1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            return;
        if (n <= 0) {
            /* The server closed the connection: what was in flight is an error. */
            if (c->phase == P_CALL && now_ns() <= g_deadline)
                g_err++;
            note_error("connection closed", NULL, 0);
            bool setup = c->phase < P_READY;
            finish_conn(c);
            if (setup) {
                g_setup_err++;
                if (++g_ready == g_n && !g_measuring)
                    start_measuring();
            }
            return;
        }
        c->in_len += (size_t)n;
        int status = 0;
        char *body = NULL;
        size_t blen = 0;
        int r = parse_response(c, &status, &body, &blen);
        if (r < 0) {
            note_error("unparsable response", c->in, c->in_len);
            if (c->phase == P_CALL)
                g_err++;
            finish_conn(c);
            return;
        }
        if (r == 1) {
            on_response(c, status, body, blen);
            return;
        }
    }
}

/* ---- one level ---- */

static int connect_one(struct conn *c)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)opt.port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
        close(fd);
        return -1;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    c->fd = fd;
    struct epoll_event e = {.events = EPOLLIN, .data.ptr = c};
    return epoll_ctl(g_ep, EPOLL_CTL_ADD, fd, &e);
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

static double pct_us(double p)
{
    if (!g_lat.len)
        return 0;
    size_t k = (size_t)(p / 100.0 * (double)(g_lat.len - 1) + 0.5);
    return g_lat.v[k] / 10.0;
}

static double cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
           ru.ru_stime.tv_usec / 1e6;
}

static int run_level(size_t n)
{
    g_conns = calloc(n, sizeof(*g_conns));
    g_n = n;
    g_ready = g_done = 0;
    g_measuring = g_stopping = false;
    g_ok = g_err = g_setup_err = 0;
    g_lat.len = 0;
    g_deadline = UINT64_MAX;
    g_last_error[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        struct conn *c = &g_conns[i];
        c->fd = -1;
        if (connect_one(c) < 0) {
            fprintf(stderr, "httpload: connect to 127.0.0.1:%u: %s\n", opt.port, strerror(errno));
            return -1;
        }
        c->phase = P_INIT;
        set_phase_request(c);
        if (send_now(c) < 0)
            finish_conn(c);
    }
    double cpu0 = 0;
    uint64_t t_end = 0;
    bool measured = false;
    struct epoll_event evs[256];
    while (g_done < n) {
        if (g_measuring && !measured) {
            measured = true;
            cpu0 = cpu_s();
        }
        int timeout = -1;
        if (g_measuring && !g_stopping && g_deadline != UINT64_MAX) {
            uint64_t t = now_ns();
            timeout = t >= g_deadline ? 0 : (int)((g_deadline - t) / 1000000 + 1);
        }
        int k = epoll_wait(g_ep, evs, 256, timeout);
        if (k < 0 && errno != EINTR)
            return -1;
        for (int i = 0; i < k; i++) {
            struct conn *c = evs[i].data.ptr;
            if (c->fd < 0)
                continue;
            if (evs[i].events & EPOLLOUT) {
                want_events(c, EPOLLIN);
                if (flush_out(c) < 0) {
                    finish_conn(c);
                    continue;
                }
            }
            if (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR))
                on_readable(c);
        }
        if (g_measuring && !g_stopping && now_ns() >= g_deadline) {
            g_stopping = true; /* sessions end as their last answer comes in */
            t_end = g_deadline;
            g_cpu1 = cpu_sample();
        }
        if (g_measuring && opt.calls && !t_end && g_ok + g_err >= opt.calls * (n - g_setup_err)) {
            t_end = now_ns();
            g_cpu1 = cpu_sample();
        }
    }
    double cpu1 = cpu_s();
    if (!t_end) {
        t_end = now_ns();
        g_cpu1 = cpu_sample();
    }
    double secs = measured ? (double)(t_end - g_t0) / 1e9 : 0;
    qsort(g_lat.v, g_lat.len, sizeof(*g_lat.v), cmp_u32);
    double sum = 0;
    for (size_t i = 0; i < g_lat.len; i++)
        sum += g_lat.v[i] / 10.0;
    printf("{\"sessions\":%zu,\"tool\":\"%s\",\"ok\":%lu,\"errors\":%lu,\"setup_errors\":%lu,"
           "\"seconds\":%.4f,\"calls_per_s\":%.1f,\"latency_us\":{\"min\":%.1f,\"p50\":%.1f,"
           "\"p90\":%.1f,\"p99\":%.1f,\"p999\":%.1f,\"max\":%.1f,\"mean\":%.1f,\"n\":%zu},"
           "\"client_cpu_s\":%.4f",
           n, opt.tool, g_ok, g_err, g_setup_err, secs, secs > 0 ? g_ok / secs : 0,
           g_lat.len ? g_lat.v[0] / 10.0 : 0, pct_us(50), pct_us(90), pct_us(99), pct_us(99.9),
           g_lat.len ? g_lat.v[g_lat.len - 1] / 10.0 : 0, g_lat.len ? sum / g_lat.len : 0,
           g_lat.len, cpu1 - cpu0);
    if (opt.cpu_pid)
        printf(",\"server_cpu_s\":%.3f,\"sandboxes_cpu_s\":%.3f,\"kernel_threads_cpu_s\":%.3f,"
               "\"machine_busy_cpu_s\":%.3f,\"machine_cpus\":%ld",
               g_cpu1.server - g_cpu0.server, g_cpu1.sandboxes - g_cpu0.sandboxes,
               g_cpu1.kernel_threads - g_cpu0.kernel_threads,
               g_cpu1.machine_busy - g_cpu0.machine_busy, sysconf(_SC_NPROCESSORS_ONLN));
    if (g_last_error[0]) {
        printf(",\"last_error\":\"");
        for (const char *p = g_last_error; *p; p++)
            if (*p == '"' || *p == '\\')
                printf("\\%c", *p);
            else if ((unsigned char)*p >= 0x20)
                putchar(*p);
        printf("\"");
    }
    printf("}\n");
    fflush(stdout);
    for (size_t i = 0; i < n; i++) {
        free(g_conns[i].out);
        free(g_conns[i].in);
    }
    free(g_conns);
    return 0;
}

static void usage(void)
{
    fprintf(stderr, "usage: httpload --port P [--sessions 1,8,64] [--seconds S | --calls N] "
                    "[--tool NAME] [--args JSON] [--expect TEXT] [--warmup K] [--settle S] "
                    "[--cpu-pid PID [--sandbox-cpu-file FILE]]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    const char *levels = "1";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v)
            usage();
        if (strcmp(a, "--port") == 0)
            opt.port = (unsigned)atoi(v);
        else if (strcmp(a, "--sessions") == 0)
            levels = v;
        else if (strcmp(a, "--seconds") == 0)
            opt.seconds = atof(v);
        else if (strcmp(a, "--calls") == 0)
            opt.calls = strtoul(v, NULL, 10);
        else if (strcmp(a, "--tool") == 0)
            opt.tool = v;
        else if (strcmp(a, "--args") == 0)
            opt.args = v;
        else if (strcmp(a, "--expect") == 0)
            opt.expect = v;
        else if (strcmp(a, "--warmup") == 0)
            opt.warmup = (unsigned)atoi(v);
        else if (strcmp(a, "--settle") == 0)
            opt.settle = atof(v);
        else if (strcmp(a, "--cpu-pid") == 0)
            opt.cpu_pid = atoi(v);
        else if (strcmp(a, "--sandbox-cpu-file") == 0)
            opt.sandbox_cpu_file = v;
        else
            usage();
        i++;
    }
    if (!opt.port || strlen(opt.args) > 6000)
        usage();
    ticks = (double)sysconf(_SC_CLK_TCK);
    g_ep = epoll_create1(EPOLL_CLOEXEC);
    if (g_ep < 0)
        return 1;
    for (const char *p = levels; *p;) {
        char *end;
        unsigned long n = strtoul(p, &end, 10);
        if (end == p || n == 0)
            usage();
        if (run_level(n) < 0)
            return 1;
        p = *end == ',' ? end + 1 : end;
    }
    return 0;
}
