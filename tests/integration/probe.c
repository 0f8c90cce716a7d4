/* The probe: attempts one named operation inside a sandbox and prints "<op> ok" or
 * "<op> errno=<n> <NAME>". Exit status: 0 ok, 1 failed with errno, 2 usage. */
#include "probe.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

static int op_read(int argc, char **argv)
{
    if (argc < 1)
        return EINVAL;
    int fd = open(argv[0], O_RDONLY);
    if (fd < 0)
        return errno;
    char b[64];
    ssize_t n = read(fd, b, sizeof(b));
    int e = n < 0 ? errno : 0;
    close(fd);
    return e;
}

static int op_write(int argc, char **argv)
{
    if (argc < 1)
        return EINVAL;
    int fd = open(argv[0], O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0)
        return errno;
    int e = write(fd, "x", 1) == 1 ? 0 : errno;
    close(fd);
    return e;
}

static int op_exists(int argc, char **argv)
{
    struct stat st;
    if (argc < 1)
        return EINVAL;
    return lstat(argv[0], &st) < 0 ? errno : 0;
}

/* Fill a directory with 1 MiB files until the filesystem says no; report the errno. */
static int op_fill(int argc, char **argv)
{
    if (argc < 1)
        return EINVAL;
    signal(SIGXFSZ, SIG_IGN);
    static char mb[1 << 20];
    for (int i = 0; i < 100000; i++) {
        char path[512];
        snprintf(path, sizeof(path), "%s/fill-%d", argv[0], i);
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0)
            return errno;
        ssize_t n = write(fd, mb, sizeof(mb));
        int e = n == (ssize_t)sizeof(mb) ? 0 : (n < 0 ? errno : ENOSPC);
        close(fd);
        if (e) {
            fprintf(stderr, "filled %d MiB\n", i);
            return e;
        }
    }
    return 0;
}

/* Create empty files until the inode cap stops us. */
static int op_inodes(int argc, char **argv)
{
    if (argc < 1)
        return EINVAL;
    for (int i = 0; i < 10000000; i++) {
        char path[512];
        snprintf(path, sizeof(path), "%s/i-%d", argv[0], i);
        int fd = open(path, O_WRONLY | O_CREAT, 0644);
        if (fd < 0) {
            fprintf(stderr, "created %d files\n", i);
            return errno;
        }
        close(fd);
    }
    return 0;
}

static int op_tcp(int argc, char **argv)
{
    if (argc < 2)
        return EINVAL;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[1]))};
    if (inet_pton(AF_INET, argv[0], &a.sin_addr) != 1)
        return EINVAL;
    int s = socket(AF_INET, SOCK_STREAM, 0);
    if (s < 0)
        return errno;
    int e = connect(s, (struct sockaddr *)&a, sizeof(a)) < 0 ? errno : 0;
    close(s);
    return e;
}

static int op_udp(int argc, char **argv)
{
    if (argc < 2)
        return EINVAL;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[1]))};
    if (inet_pton(AF_INET, argv[0], &a.sin_addr) != 1)
        return EINVAL;
    int s = socket(AF_INET, SOCK_DGRAM, 0);
    if (s < 0)
        return errno;
    int e = sendto(s, "q", 1, 0, (struct sockaddr *)&a, sizeof(a)) < 0 ? errno : 0;
    close(s);
    return e;
}

static int op_abstract(int argc, char **argv)
{
    if (argc < 1)
        return EINVAL;
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    size_t n = strlen(argv[0]);
    if (n + 1 > sizeof(a.sun_path))
        return EINVAL;
    memcpy(a.sun_path + 1, argv[0], n);
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    if (s < 0)
        return errno;
    int e = connect(s, (struct sockaddr *)&a,
                    (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n)) < 0
                ? errno
                : 0;
    close(s);
    return e;
}

/* Prints the interfaces; fails with ENODEV if anything but lo exists. */
static int op_ifaces(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    struct if_nameindex *ifs = if_nameindex();
    if (!ifs)
        return errno;
    int e = 0;
    for (struct if_nameindex *i = ifs; i->if_index; i++) {
        printf("iface %s\n", i->if_name);
        if (strcmp(i->if_name, "lo") != 0)
            e = ENODEV;
    }
    if_freenameindex(ifs);
    return e;
}

static int op_kill(int argc, char **argv)
{
    if (argc < 1)
        return EINVAL;
    return kill((pid_t)atoi(argv[0]), 0) < 0 ? errno : 0;
}

static int op_mount(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    return mount("tmpfs", "/tmp", "tmpfs", 0, NULL) < 0 ? errno : 0;
}

static int op_unshare_user(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    return unshare(CLONE_NEWUSER) < 0 ? errno : 0;
}

/* Fork until the kernel refuses; children wait, then everyone exits. */
static int op_forkbomb(int argc, char **argv)
{
    int limit = argc > 0 ? atoi(argv[0]) : 100000;
    int n = 0, e = 0;
    for (; n < limit; n++) {
        pid_t p = fork();
        if (p < 0) {
            e = errno;
            break;
        }
        if (p == 0) {
            sleep(3);
            _exit(0);
        }
    }
    /* The children exit on their own; when the probe exits, the sandbox's init ends and the
     * kernel removes whatever is left. */
    fprintf(stderr, "forked %d\n", n);
    return e;
}

/* Prints what a process would need to gain privilege through a setuid binary. */
static int op_privs(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        return errno;
    char line[256];
    while (fgets(line, sizeof(line), f))
        if (!strncmp(line, "NoNewPrivs", 10) || !strncmp(line, "Cap", 3) ||
            !strncmp(line, "Uid", 3) || !strncmp(line, "Seccomp:", 8))
            fputs(line, stdout);
    fclose(f);
    struct statvfs sv;
    if (statvfs("/usr", &sv) == 0)
        printf("usr_nosuid %d\n", (sv.f_flag & ST_NOSUID) ? 1 : 0);
    return 0;
}

const struct probe_op probe_ops_general[] = {
    {"read", "open PATH for reading and read", op_read},
    {"write", "create PATH and write a byte", op_write},
    {"exists", "lstat PATH", op_exists},
    {"fill", "write 1 MiB files into DIR until refused", op_fill},
    {"inodes", "create empty files in DIR until refused", op_inodes},
    {"tcp", "TCP connect to ADDR PORT", op_tcp},
    {"udp", "UDP send to ADDR PORT", op_udp},
    {"abstract", "connect to the abstract unix socket NAME", op_abstract},
    {"ifaces", "list interfaces; fail if any but lo", op_ifaces},
    {"kill", "signal 0 to PID", op_kill},
    {"mount", "mount a tmpfs", op_mount},
    {"unshare-user", "create a nested user namespace", op_unshare_user},
    {"forkbomb", "fork until refused (at most N)", op_forkbomb},
    {"privs", "print NoNewPrivs, capabilities, uid, seccomp mode, /usr nosuid", op_privs},
    {NULL, NULL, NULL},
};

static const struct probe_op *find(const struct probe_op *t, const char *name)
{
    for (; t->name; t++)
        if (strcmp(t->name, name) == 0)
            return t;
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: probe OP [ARGS...] | probe --list\n");
        return 2;
    }
    if (strcmp(argv[1], "--list") == 0) {
        for (const struct probe_op *t = probe_ops_general; t->name; t++)
            printf("%s\t%s\n", t->name, t->what);
        for (const struct probe_op *t = probe_ops_syscalls; t->name; t++)
            printf("%s\t%s\n", t->name, t->what);
        for (const struct probe_op *t = probe_ops_layers; t->name; t++)
            printf("%s\t%s\n", t->name, t->what);
        return 0;
    }
    const struct probe_op *op = find(probe_ops_general, argv[1]);
    if (!op)
        op = find(probe_ops_syscalls, argv[1]);
    if (!op)
        op = find(probe_ops_layers, argv[1]);
    if (!op) {
        fprintf(stderr, "probe: unknown op %s\n", argv[1]);
        return 2;
    }
    int e = op->fn(argc - 2, argv + 2);
    if (e == 0) {
        printf("%s ok\n", op->name);
        return 0;
    }
    printf("%s errno=%d %s\n", op->name, e, strerrorname_np(e) ? strerrorname_np(e) : "?");
    return 1;
}
