/* Writes charged to a sandbox: the pages of a file written into its tmpfs are memory, and they
 * must count against its limit, not the server's. A page is charged to the group of the
 * process that makes it, so the bytes go through a copier: /bin/cat, started in the sandbox's
 * memory group (but not under its CPU quota) with the pipe as its input and the file as its
 * output.
 *
 * The copier is started as posix_spawn starts a program: it shares the server's memory until
 * its exec (CLONE_VM | CLONE_VFORK) instead of being a fork of it. A fork copies the page
 * tables of a server that holds many sandboxes' buffers, and leaves every page of the server
 * write-protected, one fault each on the next write. The exec itself is still waited for, so
 * the server starts its copiers off its loop (jail_writer_launch). 64 sandboxes flooding their
 * output at once (bench/mcp_scenarios.py's floods, on this kind of machine): a concurrent ping
 * waited 736-910 ms at most with forks, 76-102 ms with this. */
#include "jail.h"

#include "cgroup.h"
#include "jail_internal.h"
#include "util.h"

#include <fcntl.h>
#include <linux/sched.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* What a group must have free for a copier to start in it: its exec (an mm, cat and libc
 * mapped, page tables), and on v1 the kernel memory of the clone while this thread has stepped
 * in (in a group that files have filled, the OOM killer's one candidate would be this thread,
 * the whole server). Well under 1 MiB; ample margin. */
#define COPIER_ROOM (4ull << 20)

/* The copier's stack until its exec: libc's thin wrappers, and a sanitizer's interceptors. */
#define COPIER_STACK_LEN (32 * 1024)

/* What the copier is given, on its parent's stack: the parent waits until the exec. */
struct copier_start {
    int in, out;
    int move_fd;   /* the writers' cgroup.procs, when the copier must move itself there; or -1 */
    sigset_t mask; /* the starting thread's, which cat gets as a forked copy would */
    int err;       /* set by the child when it could not move or exec */
};

/* The copier until its exec. It shares the server's memory, and only the thread that started
 * it waits (CLONE_VFORK): the server's other threads run on, so it calls async-signal-safe
 * functions alone, and writes nothing but *c and the waiting thread's errno. Its fds are its
 * own (no CLONE_FILES). */
static int copier_main(void *arg)
{
    struct copier_start *c = arg;
    if (c->move_fd >= 0 && write(c->move_fd, "0", 1) != 1) {
        c->err = errno;
        return 127;
    }
    /* The OOM killer's pick as much as the sandbox's processes (1000; init is -1000), once it
     * has exec'd. */
    int adj = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
    if (adj >= 0 && write(adj, "1000", 4) < 0) {
        /* the write goes on; the kernel picks its victim alone */
    }
    int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (dup2(c->in, 0) < 0 || dup2(c->out, 1) < 0 || (null >= 0 && dup2(null, 2) < 0)) {
        c->err = errno;
        return 127;
    }
    jail_close_from(3);
    sigprocmask(SIG_SETMASK, &c->mask, NULL);
    static char *const argv[] = {"cat", NULL};
    static char *const envp[] = {NULL};
    execve("/bin/cat", argv, envp);
    c->err = errno;
    return 127; /* the clone's own exit: no libc or sanitizer exit code runs in this memory */
}

#if defined(__x86_64__)
/* clone3 that runs fn(arg) on the stack that args names, as glibc's clone() does for clone:
 * glibc 2.36 has no such call, and CLONE_INTO_CGROUP is clone3's alone. The child exits with
 * what fn returns; it never comes back here, where it would return on its parent's stack. */
static pid_t clone3_run(struct clone_args *args, int (*fn)(void *), void *arg)
{
    register long rax __asm__("rax") = SYS_clone3;
    register int (*r12)(void *) __asm__("r12") = fn;
    register void *r13 __asm__("r13") = arg;
    __asm__ volatile("syscall\n\t"
                     "testq %%rax, %%rax\n\t"
                     "jnz 1f\n\t"
                     "xorl %%ebp, %%ebp\n\t"
                     "movq %%r13, %%rdi\n\t"
                     "callq *%%r12\n\t"
                     "movl %%eax, %%edi\n\t"
                     "movl %[exit_nr], %%eax\n\t"
                     "syscall\n\t"
                     "ud2\n"
                     "1:"
                     : "+r"(rax)
                     : "D"(args), "S"(sizeof(*args)), "r"(r12), "r"(r13), [exit_nr] "i"(SYS_exit)
                     : "rcx", "r11", "memory", "cc");
    if (rax < 0) {
        errno = (int)-rax;
        return -1;
    }
    return (pid_t)rax;
}
#endif

/* Starts the copier, born in the group that group_fd names (clone3's CLONE_INTO_CGROUP, Linux
 * 5.7), or in this thread's groups when group_fd < 0. */
static pid_t clone_copier(struct copier_start *c, int group_fd)
{
    char stack[COPIER_STACK_LEN] __attribute__((aligned(16)));
    if (group_fd < 0)
        return clone(copier_main, stack + sizeof(stack), CLONE_VM | CLONE_VFORK | SIGCHLD, c);
#if defined(__x86_64__)
    struct clone_args args;
    memset(&args, 0, sizeof(args));
    args.flags = CLONE_VM | CLONE_VFORK | CLONE_INTO_CGROUP;
    args.exit_signal = SIGCHLD;
    args.stack = (uint64_t)(uintptr_t)stack;
    args.stack_size = sizeof(stack);
    args.cgroup = (uint64_t)group_fd;
    return clone3_run(&args, copier_main, c);
#else
    errno = ENOSYS; /* then born here, and it moves itself */
    return -1;
#endif
}

/* Kills a copier that will not be waited for otherwise, and reaps it. */
static void stop_copier(pid_t pid)
{
    kill(pid, SIGKILL);
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
        ;
}

/* Starts a copier from in to out, placed in the sandbox's memory group before its exec: born
 * there where it can be, else moving itself there. room: what the group must have free, at
 * least COPIER_ROOM. Returns its pid, or -1 with nothing left running. */
static pid_t start_copier(struct jail *j, int in, int out, uint64_t room, struct sbx_err *err)
{
    /* Until its exec the copier shares the server's memory, which the OOM killer never picks
     * (it would take the server with it): in a group with no room left, what its exec is charged
     * would make the killer take a process of the sandbox instead. A sandbox that full has no
     * room for the file either. */
    /* The group's files are the server's to read and write, whatever fs ids its caller took
     * for the file. */
    struct fs_ids ids = fs_ids_switch(geteuid(), getegid());
    if (cgroup_memory_headroom(j->cg) < room) {
        fs_ids_restore(ids);
        return sbx_fail(err, ENOMEM, "it does not fit in the sandbox's memory limit");
    }
    /* v1: this thread steps into the memory group, and the copier is born there. Moving a
     * process instead takes a lock whose RCU grace period lasted 17-28 ms here with 64
     * sandboxes busy (see spawn_launch); a thread that moves itself does not take it. */
    bool stepped_in = cgroup_enter_thread(j->cg, true) == 0;
    int group_fd = stepped_in ? -1 : cgroup_open_writer_group(j->cg);
    struct copier_start c = {.in = in, .out = out, .move_fd = -1, .err = 0};
    /* Every signal blocked while the child shares this memory: no handler of the server's runs
     * in it. It sets the mask back just before its exec. */
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &c.mask);
    pid_t pid = -1;
    int e = 0;
    if (group_fd >= 0) {
        pid = clone_copier(&c, group_fd);
        close(group_fd);
    }
    if (pid < 0 && !stepped_in) {
        /* Born here (clone3 into a group failed, or this is no x86-64): it moves itself before
         * its exec, so that it has copied nothing yet. */
        c.move_fd = cgroup_open_writer_procs(j->cg);
        if (c.move_fd < 0)
            e = -c.move_fd;
    }
    if (pid < 0 && !e)
        pid = clone_copier(&c, -1);
    if (!e)
        e = pid < 0 ? errno : c.err;
    if (c.move_fd >= 0)
        close(c.move_fd);
    pthread_sigmask(SIG_SETMASK, &c.mask, NULL);
    int left = stepped_in ? cgroup_leave_thread(j->cg, true) : 0;
    if (pid > 0 && c.err) {
        /* It could not move or exec, and has exited. */
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
            ;
        pid = -1;
    } else if (pid > 0 && left < 0) {
        /* This thread is still counted in the sandbox's memory: said, as spawn_launch does. */
        stop_copier(pid);
        pid = -1;
        e = -left;
    }
    if (pid > 0) {
        /* Where its CPU time is the server's (v1), it yields to the server: a flood's copiers
         * would otherwise slow every other call. Set here, after its exec: niced before, the
         * copier made this thread wait in the clone behind 64 flooding sandboxes (up to
         * 0.3 s). */
        setpriority(PRIO_PROCESS, (id_t)pid, 19);
    }
    fs_ids_restore(ids);
    return pid > 0 ? pid : sbx_fail_errno(err, e, "starting the writer");
}

/* pidfd_open (Linux 5.3): without it a writer cannot be waited for with a timeout. */
static bool have_pidfd(void)
{
    static atomic_int known; /* 0: not asked yet, 1: there, 2: not */
    if (!known) {
        int fd = (int)syscall(SYS_pidfd_open, getpid(), 0);
        if (fd >= 0)
            close(fd);
        known = fd >= 0 || errno != ENOSYS ? 1 : 2;
    }
    return known == 1;
}

int jail_writer_open(struct jail *j, int fd, struct jail_writer *w, struct sbx_err *err)
{
    *w = (struct jail_writer){.pid = -1, .pidfd = -1, .pipe_fd = -1, .in = -1, .out = -1};
    if (!j || !j->cg)
        return sbx_fail(err, ENOTSUP, "the sandbox has no cgroup to charge");
    if (!have_pidfd())
        return sbx_fail(err, ENOTSUP, "no pidfd_open (Linux 5.3)");
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        return sbx_fail_errno(err, errno, "starting the writer");
    /* Both above the three standard fds, so that the copier's dup2s cannot clobber one with
     * another. */
    w->in = fcntl(p[0], F_DUPFD_CLOEXEC, 3);
    w->out = fcntl(fd, F_DUPFD_CLOEXEC, 3);
    close(p[0]);
    if (w->in < 0 || w->out < 0) {
        int e = errno;
        close(p[1]);
        cleanup_closep(&w->in);
        cleanup_closep(&w->out);
        return sbx_fail_errno(err, e, "starting the writer");
    }
    /* A full pipe is the caller's cue to hold back the output it copies (the write end is
     * non-blocking): the larger, the fewer holds. Root only: past fs.pipe-user-pages-soft a
     * user's new pipes, the sandboxes' too, get 2 pages each, and root alone is exempt. */
    if (geteuid() == 0 && fcntl(p[1], F_SETPIPE_SZ, 1 << 20) < 0) {
        /* the default 64 KiB: more holds, nothing lost */
    }
    fcntl(p[1], F_SETFL, O_NONBLOCK);
    w->pipe_fd = p[1];
    return 0;
}

static int writer_launch(struct jail *j, struct jail_writer *w, uint64_t room, struct sbx_err *err)
{
    pid_t pid = start_copier(j, w->in, w->out, room, err);
    cleanup_closep(&w->in);
    cleanup_closep(&w->out);
    if (pid < 0)
        return -1;
    int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (pidfd < 0) {
        sbx_fail_errno(err, errno, "watching the writer");
        stop_copier(pid);
        return -1;
    }
    w->pid = pid;
    w->pidfd = pidfd;
    return 0;
}

int jail_writer_launch(struct jail *j, struct jail_writer *w, struct sbx_err *err)
{
    return writer_launch(j, w, COPIER_ROOM, err);
}

static int writer_start(struct jail *j, int fd, struct jail_writer *w, uint64_t room,
                        struct sbx_err *err)
{
    if (jail_writer_open(j, fd, w, err) < 0)
        return -1;
    if (writer_launch(j, w, room, err) < 0) {
        cleanup_closep(&w->pipe_fd);
        return -1;
    }
    return 0;
}

/* A copier's wait status as a result: ENOMEM when the OOM killer took it. cat says only that it
 * failed: its write's errno went to its stderr, /dev/null. */
static int copier_result(int st, bool *oom_killed, struct sbx_err *err)
{
    if (WIFSIGNALED(st)) {
        *oom_killed = WTERMSIG(st) == SIGKILL;
        if (*oom_killed)
            return sbx_fail(err, ENOMEM, "it does not fit in the sandbox's memory limit");
        return sbx_fail(err, EIO, "the writer was killed by signal %d", WTERMSIG(st));
    }
    if (WEXITSTATUS(st))
        return sbx_fail(err, EIO, "the writer could not write the file");
    return 0;
}

int jail_writer_end(struct jail_writer *w, int timeout_ms, bool *oom_killed, struct sbx_err *err)
{
    *oom_killed = false;
    cleanup_closep(&w->pipe_fd);
    cleanup_closep(&w->in); /* opened, never launched */
    cleanup_closep(&w->out);
    if (w->pid <= 0)
        return 0;
    struct pollfd pfd = {.fd = w->pidfd, .events = POLLIN};
    int n;
    while ((n = poll(&pfd, 1, timeout_ms)) < 0 && errno == EINTR)
        ;
    bool late = n == 0;
    if (late)
        syscall(SYS_pidfd_send_signal, w->pidfd, SIGKILL, NULL, 0);
    int st = 0;
    pid_t got;
    while ((got = waitpid(w->pid, &st, 0)) < 0 && errno == EINTR)
        ;
    close(w->pidfd);
    w->pidfd = -1;
    w->pid = -1;
    if (late)
        return sbx_fail(err, ETIMEDOUT, "the writer did not finish within %d ms", timeout_ms);
    if (got < 0)
        return sbx_fail_errno(err, errno, "waiting for the writer");
    return copier_result(st, oom_killed, err);
}

/* The write itself, where nothing is charged by a copier. */
static int write_uncharged(int fd, const void *data, size_t len, struct sbx_err *err)
{
    int r = write_all(fd, data, len);
    return r < 0 ? sbx_fail(err, -r, "%s", strerror(-r)) : 0;
}

int jail_write_charged(struct jail *j, int fd, const void *data, size_t len, bool *oom_killed,
                       struct sbx_err *err)
{
    *oom_killed = false;
    /* Without a cgroup there is no group to charge: rlimits bound the sandbox, and tmpfs's
     * size its files. */
    if (!j || !j->cg)
        return write_uncharged(fd, data, len, err);
    /* Nothing to charge: an emptied file must be possible in a sandbox whose files fill it. */
    if (len == 0)
        return 0;
    /* Refused before the copier starts, when it plainly cannot fit, with the copier's own
     * room and tmpfs's bookkeeping as margin: nothing is killed. cat's memory is small, so past
     * this check the OOM killer would take a larger process of the sandbox before it (the
     * interpreter, when code races the write for the last memory), where a forked writer, a
     * copy of the server, was the larger. */
    struct jail_writer w;
    if (writer_start(j, fd, &w, (uint64_t)len + len / 64 + COPIER_ROOM, err) < 0) {
        if (err->code != ENOTSUP)
            return -1;
        return write_uncharged(fd, data, len, err); /* no pidfd to wait on (before Linux 5.3) */
    }
    /* Blocking: the copier takes it all, or dies (EPIPE), and then its status says why. */
    fcntl(w.pipe_fd, F_SETFL, 0);
    int sent = write_all(w.pipe_fd, data, len);
    if (jail_writer_end(&w, -1, oom_killed, err) < 0) {
        /* What cat could not say: a file system with no room left refused the write. */
        struct statfs fs;
        if (err->code == EIO && fstatfs(fd, &fs) == 0 && (fs.f_bavail == 0 || fs.f_ffree == 0))
            return sbx_fail(err, ENOSPC, "%s", strerror(ENOSPC));
        return -1;
    }
    return sent < 0 ? sbx_fail(err, -sent, "%s", strerror(-sent)) : 0;
}
