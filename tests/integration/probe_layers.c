/* Wrappers that take a kernel layer away from a command, for the fail-closed tests: the
 * command (mcp-sandbox) runs for real, only on a kernel view where the layer is missing.
 *   userns MAX CMD...     in a new user namespace whose user.max_user_namespaces is MAX
 *                         ("-" leaves it alone), ids mapped to themselves
 *   without LAYER CMD...  under a seccomp filter that makes LAYER look absent:
 *                         landlock: the landlock_* calls answer ENOSYS, as on a kernel without it
 *                         seccomp:  seccomp(2) answers ENOSYS and prctl(PR_SET_SECCOMP) EINVAL,
 *                                   as on a kernel without CONFIG_SECCOMP_FILTER
 *   ignoring SIGS CMD...  with the signals SIGS (numbers, comma-separated) ignored, set with
 *                         the raw system call so that 32 and 33, which glibc refuses, can be too
 * On success they exec CMD and never return; on failure they return the errno. */
#include "probe.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef SYS_landlock_create_ruleset
#define SYS_landlock_create_ruleset 444
#define SYS_landlock_add_rule       445
#define SYS_landlock_restrict_self  446
#endif

static int write_str(const char *path, const char *s)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return errno;
    ssize_t n = write(fd, s, strlen(s));
    int e = n == (ssize_t)strlen(s) ? 0 : (n < 0 ? errno : EIO);
    close(fd);
    return e;
}

/* The parent writes the child's maps: only a process outside the new namespace may map more
 * than its own id. Root maps 0, 65534 and the default host uids of sandboxes to themselves,
 * unless narrow (then a root there cannot give its sandboxes their own host uids); anyone else
 * maps just its own uid and gid. */
static bool narrow_map;

static int map_ids(pid_t child)
{
    char path[64], line[96];
    const char *ranges = narrow_map ? "0 0 1\n65534 65534 1\n"
                                    : "0 0 1\n65534 65534 1\n1879048192 1879048192 65536\n";
    uid_t uid = geteuid();
    gid_t gid = getegid();
    int e;
    if (uid != 0) {
        snprintf(path, sizeof(path), "/proc/%d/setgroups", (int)child);
        if ((e = write_str(path, "deny")) != 0)
            return e;
    }
    snprintf(path, sizeof(path), "/proc/%d/gid_map", (int)child);
    if (gid == 0)
        snprintf(line, sizeof(line), "%s", ranges);
    else
        snprintf(line, sizeof(line), "%u %u 1\n", gid, gid);
    if ((e = write_str(path, line)) != 0)
        return e;
    snprintf(path, sizeof(path), "/proc/%d/uid_map", (int)child);
    if (uid == 0)
        snprintf(line, sizeof(line), "%s", ranges);
    else
        snprintf(line, sizeof(line), "%u %u 1\n", uid, uid);
    return write_str(path, line);
}

static int op_userns(int argc, char **argv)
{
    if (argc < 2)
        return EINVAL;
    int go[2], ready[2];
    if (pipe2(go, O_CLOEXEC) < 0 || pipe2(ready, O_CLOEXEC) < 0)
        return errno;
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0)
        return errno;
    if (pid == 0) {
        /* One byte back: 0 once unshared, else the errno. */
        unsigned char c = unshare(CLONE_NEWUSER) == 0 ? 0 : (unsigned char)errno;
        if (write(ready[1], &c, 1) != 1 || c != 0 || read(go[0], &c, 1) != 1 || c != 'g')
            _exit(126);
        /* A user namespace's own sysctl, writable by its owner: 0 forbids nested ones. */
        if (strcmp(argv[0], "-") != 0 &&
            write_str("/proc/sys/user/max_user_namespaces", argv[0]) != 0) {
            perror("probe userns: max_user_namespaces");
            _exit(126);
        }
        execvp(argv[1], argv + 1);
        perror(argv[1]);
        _exit(127);
    }
    unsigned char c = EPROTO;
    if (read(ready[0], &c, 1) != 1)
        c = EPROTO;
    int e = c == 0 ? map_ids(pid) : c;
    c = e == 0 ? 'g' : 'x';
    if (write(go[1], &c, 1) != 1 && e == 0)
        e = errno;
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    if (e != 0)
        return e;
    /* The wrapped command's status is the probe's: exit as it did. */
    exit(WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
}

static int op_userns_narrow(int argc, char **argv)
{
    narrow_map = true;
    return op_userns(argc, argv);
}

#define LOAD(off)    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, (off))
#define RET(v)       BPF_STMT(BPF_RET | BPF_K, (v))
#define JEQ(v, t, f) BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (v), (t), (f))
#define ERRNO(e)     (SECCOMP_RET_ERRNO | ((e)&SECCOMP_RET_DATA))
#define NR_OFF       offsetof(struct seccomp_data, nr)
#define ARCH_OFF     offsetof(struct seccomp_data, arch)
#define ARG0_OFF     offsetof(struct seccomp_data, args[0])

static int op_without(int argc, char **argv)
{
    if (argc < 2)
        return EINVAL;
    struct sock_filter landlock[] = {
        LOAD(ARCH_OFF),
        JEQ(AUDIT_ARCH_X86_64, 1, 0),
        RET(SECCOMP_RET_ALLOW),
        LOAD(NR_OFF),
        JEQ(SYS_landlock_create_ruleset, 3, 0),
        JEQ(SYS_landlock_add_rule, 2, 0),
        JEQ(SYS_landlock_restrict_self, 1, 0),
        RET(SECCOMP_RET_ALLOW),
        RET(ERRNO(ENOSYS)),
    };
    struct sock_filter seccomp[] = {
        LOAD(ARCH_OFF),     JEQ(AUDIT_ARCH_X86_64, 1, 0), RET(SECCOMP_RET_ALLOW),
        LOAD(NR_OFF),       JEQ(SYS_seccomp, 4, 0),       JEQ(SYS_prctl, 0, 2),
        LOAD(ARG0_OFF),     JEQ(PR_SET_SECCOMP, 2, 0),    RET(SECCOMP_RET_ALLOW),
        RET(ERRNO(ENOSYS)), RET(ERRNO(EINVAL)),
    };
    struct sock_fprog prog;
    if (strcmp(argv[0], "landlock") == 0)
        prog =
            (struct sock_fprog){.len = sizeof(landlock) / sizeof(landlock[0]), .filter = landlock};
    else if (strcmp(argv[0], "seccomp") == 0)
        prog = (struct sock_fprog){.len = sizeof(seccomp) / sizeof(seccomp[0]), .filter = seccomp};
    else
        return EINVAL;
    /* no_new_privs lets an unprivileged caller install a filter; it changes nothing for a
     * sandbox, which sets it anyway. */
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
        return errno;
    if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) < 0)
        return errno;
    execvp(argv[1], argv + 1);
    return errno;
}

static int op_ignoring(int argc, char **argv)
{
    if (argc < 2)
        return EINVAL;
    struct {
        void *handler;
        unsigned long flags;
        void *restorer;
        unsigned long long mask;
    } ign = {SIG_IGN, 0, NULL, 0};
    char *list = argv[0], *save = NULL;
    for (char *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save))
        if (syscall(SYS_rt_sigaction, atoi(t), &ign, NULL, sizeof(ign.mask)) < 0)
            return errno;
    execvp(argv[1], argv + 1);
    return errno;
}

const struct probe_op probe_ops_layers[] = {
    {"userns", "MAX CMD...: run CMD in a new user namespace with max_user_namespaces MAX",
     op_userns},
    {"userns-narrow", "MAX CMD...: the same, root's map without the default host uid range",
     op_userns_narrow},
    {"without", "LAYER CMD...: run CMD with landlock or seccomp made to look absent", op_without},
    {"ignoring", "SIGS CMD...: run CMD with the signals SIGS (e.g. 1,33) ignored", op_ignoring},
    {NULL, NULL, NULL},
};
