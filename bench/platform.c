/* What this machine charges for the operations a sandbox is made of, measured in the same run
 * as the scenarios: a syscall, a page fault, a cpuid (a trap to the hypervisor on a virtual
 * machine), a wake-up across processes, the start of a process with and without glibc, and a
 * clone into each set of namespaces until it is reaped. The targets the benchmark misses are
 * sums of these; bench/README.md says which.
 *
 *   platform --nolibc PATH --glibc-static PATH --dynamic PATH [--quick]
 *
 * Prints one JSON object. Every child is waited for before exit. */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <cpuid.h>
#endif

extern char **environ;

enum { MAX_ROUNDS = 21 };

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median and minimum of n samples, as a JSON object, in the samples' unit. */
static void print_stats(const char *name, double *v, int n, const char *sep)
{
    qsort(v, (size_t)n, sizeof(*v), cmp_double);
    printf("\"%s\": {\"median\": %.3f, \"min\": %.3f, \"n\": %d}%s", name, v[n / 2], v[0], n, sep);
}

static void syscall_ns(int rounds)
{
    double v[MAX_ROUNDS];
    enum { CALLS = 20000 };
    for (int r = 0; r < rounds; r++) {
        double t = now_ns();
        for (int i = 0; i < CALLS; i++)
            syscall(SYS_getppid);
        v[r] = (now_ns() - t) / CALLS;
    }
    print_stats("syscall_ns", v, rounds, ", ");
}

/* A write to a fresh anonymous 4 KiB page (huge pages off for the region). */
static void page_fault_ns(int rounds)
{
    double v[MAX_ROUNDS];
    enum { PAGES = 1024 };
    long page = sysconf(_SC_PAGESIZE);
    for (int r = 0; r < rounds; r++) {
        size_t len = (size_t)page * PAGES;
        char *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED) {
            perror("mmap");
            exit(1);
        }
        madvise(m, len, MADV_NOHUGEPAGE);
        double t = now_ns();
        for (size_t i = 0; i < len; i += (size_t)page)
            ((volatile char *)m)[i] = 1;
        v[r] = (now_ns() - t) / PAGES;
        munmap(m, len);
    }
    print_stats("page_fault_ns", v, rounds, ", ");
}

static void cpuid_ns(int rounds)
{
#if defined(__x86_64__)
    double v[MAX_ROUNDS];
    enum { CALLS = 1000 };
    for (int r = 0; r < rounds; r++) {
        unsigned a, b, c, d;
        double t = now_ns();
        for (int i = 0; i < CALLS; i++)
            __cpuid(0, a, b, c, d);
        v[r] = (now_ns() - t) / CALLS;
        __asm__ volatile("" : : "r"(a), "r"(b), "r"(c), "r"(d));
    }
    print_stats("cpuid_ns", v, rounds, ", ");
#else
    (void)rounds;
    printf("\"cpuid_ns\": null, ");
#endif
}

/* One byte there and back between two processes blocked in read(): two wake-ups, as every
 * call through a server to a sandbox and back makes at least. */
static void pipe_round_trip_us(int rounds)
{
    int there[2], back[2];
    if (pipe(there) < 0 || pipe(back) < 0) {
        perror("pipe");
        exit(1);
    }
    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        exit(1);
    }
    if (pid == 0) {
        close(there[1]); /* else the parent's close would never end the loop */
        close(back[0]);
        char c;
        while (read(there[0], &c, 1) == 1)
            if (write(back[1], &c, 1) != 1)
                break;
        _exit(0);
    }
    close(there[0]);
    close(back[1]);
    double v[MAX_ROUNDS];
    enum { TRIPS = 2000 };
    for (int r = 0; r < rounds; r++) {
        double t = now_ns();
        for (int i = 0; i < TRIPS; i++) {
            char c = 'x';
            if (write(there[1], &c, 1) != 1 || read(back[0], &c, 1) != 1) {
                perror("pipe round trip");
                exit(1);
            }
        }
        v[r] = (now_ns() - t) / TRIPS / 1e3;
    }
    close(there[1]);
    close(back[0]);
    waitpid(pid, NULL, 0);
    print_stats("pipe_round_trip_us", v, rounds, ", ");
}

enum { PROGRAMS = 3 };

/* posix_spawn until waitpid returns, for each program, interleaved. */
static void spawn_us(const char *const paths[PROGRAMS], const char *const names[PROGRAMS], int reps)
{
    double *v[PROGRAMS];
    for (int p = 0; p < PROGRAMS; p++)
        v[p] = calloc((size_t)reps, sizeof(double));
    for (int i = 0; i < reps; i++)
        for (int p = 0; p < PROGRAMS; p++) {
            char *argv[] = {(char *)paths[p], NULL};
            pid_t pid;
            int status = 0;
            double t = now_ns();
            int e = posix_spawn(&pid, paths[p], NULL, NULL, argv, environ);
            if (e != 0) {
                fprintf(stderr, "platform: cannot spawn %s: %s\n", paths[p], strerror(e));
                exit(1);
            }
            if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status)) {
                fprintf(stderr, "platform: %s did not exit 0 (status %#x)\n", paths[p], status);
                exit(1);
            }
            v[p][i] = (now_ns() - t) / 1e3;
        }
    printf("\"spawn_us\": {");
    for (int p = 0; p < PROGRAMS; p++) {
        print_stats(names[p], v[p], reps, p + 1 < PROGRAMS ? ", " : "");
        free(v[p]);
    }
    printf("}, ");
}

/* A fork into a set of namespaces whose child exits at once, until it is reaped: creation and
 * teardown of the namespaces, as every sandbox pays them (bwrap and unshare too). */
static void clone_reaped_us(int reps)
{
    static const struct {
        const char *name;
        unsigned long flags;
    } sets[] = {
        {"fork", 0},
        {"user", CLONE_NEWUSER},
        {"user_mnt", CLONE_NEWUSER | CLONE_NEWNS},
        {"user_net", CLONE_NEWUSER | CLONE_NEWNET},
        {"user_pid", CLONE_NEWUSER | CLONE_NEWPID},
        {"all", CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWPID | CLONE_NEWIPC |
                    CLONE_NEWUTS | CLONE_NEWCGROUP},
    };
    enum { SETS = sizeof(sets) / sizeof(sets[0]) };
    double *v[SETS];
    int err[SETS] = {0};
    for (int s = 0; s < SETS; s++)
        v[s] = calloc((size_t)reps, sizeof(double));
    for (int i = 0; i < reps; i++)
        for (int s = 0; s < SETS; s++) {
            if (err[s])
                continue;
            double t = now_ns();
            long pid = syscall(SYS_clone, sets[s].flags | SIGCHLD, NULL, NULL, NULL, 0);
            if (pid == 0)
                syscall(SYS_exit_group, 0);
            if (pid < 0) {
                err[s] = errno;
                continue;
            }
            waitpid((pid_t)pid, NULL, 0);
            v[s][i] = (now_ns() - t) / 1e3;
        }
    printf("\"clone_reaped_us\": {");
    for (int s = 0; s < SETS; s++) {
        const char *sep = s + 1 < SETS ? ", " : "";
        if (err[s])
            printf("\"%s\": {\"error\": \"%s\"}%s", sets[s].name, strerror(err[s]), sep);
        else
            print_stats(sets[s].name, v[s], reps, sep);
        free(v[s]);
    }
    printf("}");
}

int main(int argc, char **argv)
{
    const char *nolibc = NULL, *glibc_static = NULL, *dynamic = NULL;
    bool quick = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--nolibc") && i + 1 < argc)
            nolibc = argv[++i];
        else if (!strcmp(argv[i], "--glibc-static") && i + 1 < argc)
            glibc_static = argv[++i];
        else if (!strcmp(argv[i], "--dynamic") && i + 1 < argc)
            dynamic = argv[++i];
        else if (!strcmp(argv[i], "--quick"))
            quick = true;
        else {
            fprintf(stderr, "usage: platform --nolibc PATH --glibc-static PATH --dynamic PATH "
                            "[--quick]\n");
            return 2;
        }
    }
    if (!nolibc || !glibc_static || !dynamic) {
        fprintf(stderr, "platform: --nolibc, --glibc-static and --dynamic are required\n");
        return 2;
    }
    int rounds = quick ? 5 : MAX_ROUNDS, reps = quick ? 30 : 200;
    printf("{");
    syscall_ns(rounds);
    page_fault_ns(rounds);
    cpuid_ns(rounds);
    pipe_round_trip_us(rounds);
    const char *const paths[PROGRAMS] = {nolibc, glibc_static, dynamic};
    const char *const names[PROGRAMS] = {"static_no_libc", "static_glibc", "dynamic_glibc"};
    spawn_us(paths, names, reps);
    clone_reaped_us(quick ? 20 : 100);
    printf("}\n");
    return 0;
}
