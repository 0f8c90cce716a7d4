/* The probe attempts one named operation inside a sandbox and prints one line:
 *   "<op> ok" or "<op> errno=<n> <name>"  (and exits 0 on ok, 1 on failure, 2 on usage).
 * Operations live in tables, one per file, so that each area owns its rows. */
#ifndef PROBE_H
#define PROBE_H

struct probe_op {
    const char *name;
    const char *what;                 /* one line for `probe --list` */
    int (*fn)(int argc, char **argv); /* returns 0 or an errno value */
};

/* Rows for files, processes, network, signals and limits (probe.c). */
extern const struct probe_op probe_ops_general[];
/* Rows for the seccomp policy: one per denied syscall, plus allowed controls (probe_syscalls.c). */
extern const struct probe_op probe_ops_syscalls[];
/* Wrappers that run a command with a kernel layer taken away (probe_layers.c). */
extern const struct probe_op probe_ops_layers[];

#endif
