/* The throughput floor: N warm Python interpreters, each fed one line of code at a time over a
 * pipe by this one epoll loop, with no protocol, no HTTP and no sandbox. It is what any server
 * could at best reach at N sessions on this machine, measured the way bench/httpload measures
 * the real one (calls per second over a window, machine CPU per call from /proc/stat).
 *
 *   pipefloor --sessions N --seconds S --python PATH --child CODE --line CODE_LINE
 *
 * Prints one JSON object. Every interpreter gets its own stdin/stdout pipe pair and is waited
 * for before exit. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "proc_stat.h"

extern char **environ;

struct child {
    pid_t pid;
    int to, from; /* its stdin (write end) and stdout (read end) */
};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int spawn_child(struct child *c, const char *python, const char *code)
{
    int in[2], out[2];
    if (pipe2(in, O_CLOEXEC) < 0)
        return -1;
    if (pipe2(out, O_CLOEXEC) < 0) {
        close(in[0]);
        close(in[1]);
        return -1;
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    char *argv[] = {(char *)python, "-I", "-c", (char *)code, NULL};
    int r = posix_spawn(&c->pid, python, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(in[0]);
    close(out[1]);
    c->to = in[1];
    c->from = out[0];
    if (r != 0) {
        close(c->to);
        close(c->from);
        errno = r;
        return -1;
    }
    return 0;
}

/* One answer line per call; a read may hold the end of one call only, since each child has a
 * single call in flight. Returns 1 when the answer is complete, 0 if partial, -1 at EOF. */
static int read_answer(struct child *c)
{
    char buf[256];
    ssize_t n = read(c->from, buf, sizeof(buf));
    if (n <= 0)
        return n < 0 && errno == EINTR ? 0 : -1;
    return buf[n - 1] == '\n' ? 1 : 0;
}

static void usage(void)
{
    fprintf(stderr, "usage: pipefloor --sessions N --seconds S --python PATH --child CODE "
                    "--line CODE_LINE\n");
    exit(2);
}

int main(int argc, char **argv)
{
    size_t n = 0;
    double seconds = 0;
    const char *python = NULL, *code = NULL, *line = NULL;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--sessions") == 0)
            n = strtoul(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "--seconds") == 0)
            seconds = strtod(argv[i + 1], NULL);
        else if (strcmp(argv[i], "--python") == 0)
            python = argv[i + 1];
        else if (strcmp(argv[i], "--child") == 0)
            code = argv[i + 1];
        else if (strcmp(argv[i], "--line") == 0)
            line = argv[i + 1];
        else
            usage();
    }
    if (!n || seconds <= 0 || !python || !code || !line)
        usage();
    size_t line_len = strlen(line);
    struct child *kids = calloc(n, sizeof(*kids));
    int ep = epoll_create1(EPOLL_CLOEXEC);
    if (!kids || ep < 0) {
        perror("pipefloor");
        return 1;
    }
    int rc = 0;
    size_t started = 0;
    for (; started < n; started++) {
        if (spawn_child(&kids[started], python, code) < 0) {
            perror("pipefloor: spawning python");
            rc = 1;
            break;
        }
        struct epoll_event ev = {.events = EPOLLIN, .data.u64 = started};
        epoll_ctl(ep, EPOLL_CTL_ADD, kids[started].from, &ev);
    }
    /* Warm-up: every interpreter answers once before the window opens. */
    uint64_t calls = 0;
    double busy0 = 0;
    uint64_t t0 = 0, t_end = 0;
    size_t warm = 0;
    for (size_t i = 0; rc == 0 && i < n; i++)
        if (write(kids[i].to, line, line_len) != (ssize_t)line_len)
            rc = 1;
    struct epoll_event evs[64];
    while (rc == 0) {
        int k = epoll_wait(ep, evs, 64, 10000);
        if (k <= 0) {
            if (k < 0 && errno == EINTR)
                continue;
            fprintf(stderr, "pipefloor: no answer in 10 s\n");
            rc = 1;
            break;
        }
        for (int j = 0; j < k && rc == 0; j++) {
            struct child *c = &kids[evs[j].data.u64];
            int r = read_answer(c);
            if (r < 0) {
                fprintf(stderr, "pipefloor: an interpreter exited\n");
                rc = 1;
            } else if (r > 0) {
                if (t0)
                    calls++;
                else if (++warm == n) {
                    t0 = now_ns();
                    t_end = t0 + (uint64_t)(seconds * 1e9);
                    busy0 = machine_busy_seconds();
                }
                if (write(c->to, line, line_len) != (ssize_t)line_len)
                    rc = 1;
            }
        }
        if (t0 && now_ns() >= t_end)
            break;
    }
    double elapsed = t0 ? (double)(now_ns() - t0) / 1e9 : 0;
    double busy_s = machine_busy_seconds() - busy0;
    /* EOF on stdin ends a child's loop; its last answer is read away so that it does not die
     * of EPIPE. */
    for (size_t i = 0; i < started; i++)
        close(kids[i].to);
    for (size_t i = 0; i < started; i++) {
        char buf[256];
        while (read(kids[i].from, buf, sizeof(buf)) > 0)
            ;
        close(kids[i].from);
        waitpid(kids[i].pid, NULL, 0);
    }
    if (rc == 0)
        printf("{\"sessions\":%zu,\"calls\":%llu,\"seconds\":%.3f,\"calls_per_s\":%.1f,"
               "\"machine_cpu_us_per_call\":%.1f}\n",
               n, (unsigned long long)calls, elapsed, calls / elapsed,
               calls ? busy_s * 1e6 / (double)calls : 0.0);
    free(kids);
    close(ep);
    return rc;
}
