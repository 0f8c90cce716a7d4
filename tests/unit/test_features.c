/* doctor's probes tell the truth, and their hints whole: where part of /proc is covered by another
 * mount (a container's masked paths), the namespaces are created fine but the kernel refuses the
 * sandbox its own proc, and every sandbox is refused; the mount namespace row says so, with
 * a hint. The control: the same probe with /proc uncovered. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include "jail/cgroup.h"
#include "jail/features.h"

/* The kernel gives a fresh proc where any proc mount of the namespace is whole: the ones
 * besides /proc (a chroot's, left on this machine) are detached, as a container has none. */
static int detach_other_procs(void)
{
    FILE *f = fopen("/proc/self/mountinfo", "re");
    if (!f)
        return -1;
    char line[4096], *points[64];
    int n = 0, r = 0;
    while (n < 64 && fgets(line, sizeof(line), f)) {
        char point[1024], type[64];
        const char *dash = strstr(line, " - ");
        if (dash && sscanf(line, "%*s %*s %*s %*s %1023s", point) == 1 &&
            sscanf(dash + 3, "%63s", type) == 1 && strcmp(type, "proc") == 0 &&
            strcmp(point, "/proc") != 0)
            points[n++] = strdup(point);
    }
    fclose(f);
    for (int i = 0; i < n; i++) {
        if (umount2(points[i], MNT_DETACH) < 0)
            r = -1;
        free(points[i]);
    }
    return r;
}

/* In a child, with /proc/sys covered by a tmpfs when cover is set: 0 when the mount
 * namespace row is ok, 1 when missing with its hint naming /proc, 77 where the cover cannot
 * be made (not root). */
static int mount_row_in_child(bool cover)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        if (cover &&
            (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
             detach_other_procs() < 0 || mount("tmpfs", "/proc/sys", "tmpfs", 0, "size=4k") < 0))
            _exit(77);
        const struct feature_status *f = features_probe(65534, 1);
        const struct feature_status *m = &f[FEAT_NS_MNT];
        fprintf(stderr, "cover %d: %s %s -- %s\n", cover, m->available ? "ok" : "missing",
                m->detail, m->hint);
        if (!f[FEAT_USERNS].available)
            _exit(77);
        if (m->available)
            _exit(0);
        _exit(strstr(m->detail, "/proc") && strstr(m->hint, "/proc") ? 1 : 2);
    }
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    return WEXITSTATUS(st);
}

static void covered_proc_is_reported_missing(void **state)
{
    (void)state;
    int r = mount_row_in_child(true);
    if (r == 77)
        skip(); /* no mount namespace of our own here, or no user namespaces */
    assert_int_equal(r, 1);
}

static void uncovered_proc_is_ok(void **state)
{
    (void)state;
    int r = mount_row_in_child(false);
    if (r == 77)
        skip();
    assert_int_equal(r, 0);
}

/* Where no cgroup serves, the hint is the cgroup probe's whole answer: which cgroup, what it
 * lacks and what to do, which runs past 200 bytes with the shortest path there is. Made in a
 * child whose /sys/fs/cgroup is a cgroup2 hierarchy that was given no controllers (on this
 * v1+v2 hybrid they are all bound to v1). */
static void a_cgroup_hint_is_whole(void **state)
{
    (void)state;
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
            mount("none", "/sys/fs/cgroup", "cgroup2", 0, NULL) < 0)
            _exit(77);
        const char *why = NULL;
        if (cgroup_backend(&why) != CGROUP_BACKEND_NONE || !why)
            _exit(77); /* the controllers are there: nothing is missing */
        const struct feature_status *f = features_probe(65534, 1);
        fprintf(stderr, "hint: %s\nwhy:  %s\n", f[FEAT_CGROUP].hint, why);
        _exit(strcmp(f[FEAT_CGROUP].hint, why) == 0 ? 0 : 1);
    }
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    if (WEXITSTATUS(st) == 77)
        skip(); /* no cgroup2 hierarchy without controllers to be made here */
    assert_int_equal(WEXITSTATUS(st), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(covered_proc_is_reported_missing),
        cmocka_unit_test(uncovered_proc_is_ok),
        cmocka_unit_test(a_cgroup_hint_is_whole),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
