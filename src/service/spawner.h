/* Jails begun off the loop: one thread runs the jobs it is given, in order, and the loop takes
 * each result when the thread says it has one. The sandboxes of the warm pool and of
 * create_sandbox are begun this way (jail_spawn_begin: the cgroup, the clone into new
 * namespaces, the id maps; about a millisecond of CPU on this kind of machine, and more while
 * other sandboxes boot), so that the loop serves everyone else meanwhile.
 *
 * The thread lives as long as the spawner: a sandbox's init dies with the thread that cloned
 * it (PR_SET_PDEATHSIG follows that thread, not the process), so every jail it began must be
 * gone before spawner_free. */
#ifndef SBX_SPAWNER_H
#define SBX_SPAWNER_H

#include "err.h"

#include <stdbool.h>

struct ev_loop;
struct spawner;

/* The caller's memory, which the spawner uses from spawner_submit until done has been called.
 * run may touch only what the loop leaves alone meanwhile (for a sandbox: the jail it begins
 * and the spec it begins it from). */
struct spawn_job {
    void (*run)(struct spawn_job *job);  /* on the spawner's thread */
    void (*done)(struct spawn_job *job); /* on the loop's thread, once, after run */
    void *data;
    /* the spawner's, under its lock */
    bool ended;
    bool hurried;
    struct spawn_job *next;
};

int spawner_new(struct ev_loop *loop, struct spawner **out, struct sbx_err *err);
/* Queues job; its done comes from the loop, or from spawner_await. */
void spawner_submit(struct spawner *s, struct spawn_job *job);
/* Someone waits for job: if the thread has not started it, it goes ahead of every job queued
 * that nobody waits for (after those hurried before it). */
void spawner_hurry(struct spawner *s, struct spawn_job *job);
/* Waits for job to end (jobs queued before it first, so a job still queued is better taken
 * back with spawner_cancel), and calls its done now, unless the loop already has. */
void spawner_await(struct spawner *s, struct spawn_job *job);
/* Takes back a job the thread has not started: true, and then neither run nor done is called.
 * False if it has started or ended: its done comes as usual. */
bool spawner_cancel(struct spawner *s, struct spawn_job *job);
/* Ends the thread once the jobs queued have run, and calls the dones not called yet. */
void spawner_free(struct spawner *s);

#endif
