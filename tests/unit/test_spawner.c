/* The spawner, and the warm pool's refills through it, with a real loop and service.
 * - Jobs run on the spawner's thread, in order, while the loop goes on; each done is called
 *   once, by the loop or by spawner_await, whichever takes the job first.
 * - A refill's jail is begun off the loop: while the spawner is held up, the loop serves; a
 *   create that needs a jail now makes its own rather than wait behind the queue, one that can
 *   wait (create_sandbox) takes the one being begun and hears when its jail exists, and a
 *   close of one still queued takes its job back, at once, leaving no process.
 * - A refill whose jail cannot be begun pauses refilling and leaves nothing behind.
 * - A pooled sandbox still in its setup is handed out at once: the loop never waits for it.
 * - create_sandbox, through the protocol, answers once its jail exists (or with why it could
 *   not be made), and the loop answers others meanwhile; its sandbox is listed and usable by
 *   id before that; cancelled, it leaves nothing.
 * - create_run_close and the default sandbox begin their jails off the loop as well; the one-shot
 *   sandbox goes however its execution ends (cancelled before it started included), and a
 *   default sandbox that failed to start is replaced by the next call.
 * Jobs are held up by a blocker: a job whose run waits until the test releases it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "service/spawner.h"
#include "service_fixture.h"
#include "service_peer.h"
#include "util.h"

struct test_job {
    struct spawn_job job;
    int gate;          /* a blocker's run reads a byte from it; -1 for none */
    pthread_t ran_on;  /* the thread its run ran on */
    int runs, dones;   /* how often run and done were called */
    bool started;      /* its run has begun (atomic: set on the spawner's thread) */
    int *order, *next; /* done appends its index here */
    int index;
};

static void test_run(struct spawn_job *job)
{
    struct test_job *t = job->data;
    t->ran_on = pthread_self();
    t->runs++;
    __atomic_store_n(&t->started, true, __ATOMIC_RELEASE);
    char byte;
    if (t->gate >= 0 && read(t->gate, &byte, 1) != 1)
        t->runs = -1000; /* seen as a failure below */
}

static void test_done(struct spawn_job *job)
{
    struct test_job *t = job->data;
    t->dones++;
    if (t->order)
        t->order[(*t->next)++] = t->index;
}

/* A marker's run: says it ran, through its gate (a pipe's write end here). */
static void mark_run(struct spawn_job *job)
{
    struct test_job *t = job->data;
    t->runs++;
    ssize_t n = write(t->gate, "x", 1);
    (void)n;
}

static void test_job_init(struct test_job *t, int gate, int *order, int *next, int index)
{
    *t = (struct test_job){.gate = gate, .order = order, .next = next, .index = index};
    t->job = (struct spawn_job){.run = test_run, .done = test_done, .data = t};
}

/* A job that holds the spawner until its gate is opened: by the test, or by another thread
 * later (the loop's thread may be waiting then). */
struct blocker {
    struct test_job t;
    int gate[2];
    int delay_ms;
    pthread_t opener;
    bool opening;
};

static void hold(struct blocker *b, struct spawner *s, int *order, int *next)
{
    assert_int_equal(pipe(b->gate), 0);
    b->opening = false;
    test_job_init(&b->t, b->gate[0], order, next, 0);
    spawner_submit(s, &b->t.job);
    /* Running, not queued: a job someone waits for would go ahead of a queued one. */
    for (int i = 0; i < 5000 && !__atomic_load_n(&b->t.started, __ATOMIC_ACQUIRE); i++)
        usleep(1000);
    assert_true(__atomic_load_n(&b->t.started, __ATOMIC_ACQUIRE));
}

static void open_gate(struct blocker *b)
{
    assert_int_equal(write(b->gate[1], "x", 1), 1);
}

static void *open_after_delay(void *arg)
{
    struct blocker *b = arg;
    usleep((useconds_t)b->delay_ms * 1000);
    ssize_t n = write(b->gate[1], "x", 1);
    (void)n;
    return NULL;
}

static void open_gate_later(struct blocker *b, int ms)
{
    b->delay_ms = ms;
    assert_int_equal(pthread_create(&b->opener, NULL, open_after_delay, b), 0);
    b->opening = true;
}

/* After the gate was opened: the blocker's done has come (its memory is free to go). */
static void unhold(struct blocker *b)
{
    if (b->opening)
        pthread_join(b->opener, NULL);
    b->opening = false;
    for (int i = 0; i < 200 && !b->t.dones; i++)
        run_loop_ms(10);
    assert_int_equal(b->t.dones, 1);
    close(b->gate[0]);
    close(b->gate[1]);
}

/* A job queued behind others that says, through a pipe, when it runs: by then they have. */
struct marker {
    struct test_job t;
    int pipe[2];
};

static void queue_marker(struct marker *m, struct spawner *s)
{
    assert_int_equal(pipe(m->pipe), 0);
    test_job_init(&m->t, -1, NULL, NULL, 1);
    m->t.job.run = mark_run;
    m->t.gate = m->pipe[1];
    spawner_submit(s, &m->t.job);
}

/* Waits for the marker without the loop. */
static void await_marker(struct marker *m)
{
    char byte;
    alarm(10);
    assert_int_equal(read(m->pipe[0], &byte, 1), 1);
    alarm(0);
}

static void close_marker(struct marker *m)
{
    close(m->pipe[0]);
    close(m->pipe[1]);
}

/* No fd to spare: every number below a lowered soft limit is taken. */
struct fd_famine {
    struct rlimit old;
    int fillers[256];
    int n;
};

static void starve_fds(struct fd_famine *f)
{
    assert_int_equal(getrlimit(RLIMIT_NOFILE, &f->old), 0);
    struct rlimit low = f->old;
    low.rlim_cur = 256;
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
    int fd;
    f->n = 0;
    while (f->n < 256 && (fd = open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0)
        f->fillers[f->n++] = fd;
    assert_true(f->n < 256);
}

static void feed_fds(struct fd_famine *f)
{
    for (int i = 0; i < f->n; i++)
        close(f->fillers[i]);
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &f->old), 0);
}

/* A timer every 5 ms while ticking: proof that the loop turns. */
static int ticks;
static bool ticking;

static void tick(struct ev_loop *l, void *data)
{
    (void)data;
    ticks++;
    if (ticking)
        ev_timer_add(l, 5, tick, NULL);
}

static void start_ticking(void)
{
    ticks = 0;
    ticking = true;
    ev_timer_add(loop, 5, tick, NULL);
}

static void jobs_run_in_order_off_the_loop_and_each_done_comes_once(void **state)
{
    (void)state;
    struct spawner *s = NULL;
    struct sbx_err err = {0};
    assert_int_equal(spawner_new(loop, &s, &err), 0);
    int order[5], next = 0;
    struct blocker blocker;
    struct test_job a, b, c, d;
    hold(&blocker, s, order, &next);
    test_job_init(&a, -1, order, &next, 1);
    test_job_init(&b, -1, order, &next, 2);
    test_job_init(&c, -1, order, &next, 3);
    test_job_init(&d, -1, order, &next, 4);
    spawner_submit(s, &a.job);
    spawner_submit(s, &b.job);
    /* Jobs someone waits for go ahead of the others, in their own order. */
    spawner_submit(s, &c.job);
    spawner_hurry(s, &c.job);
    spawner_submit(s, &d.job);
    spawner_hurry(s, &d.job);
    spawner_hurry(s, &c.job);         /* again: no change */
    spawner_hurry(s, &blocker.t.job); /* running: no change */

    /* The blocker holds the thread; the loop runs its timers meanwhile. */
    start_ticking();
    run_loop_ms(100);
    ticking = false;
    assert_true(ticks >= 5);
    assert_int_equal(a.runs + b.runs + c.runs + d.runs, 0);
    assert_int_equal(blocker.t.dones + a.dones + b.dones + c.dones + d.dones, 0);

    open_gate(&blocker);
    for (int i = 0; i < 100 && next < 5; i++)
        run_loop_ms(10);
    assert_int_equal(next, 5);
    const int want[5] = {0, 3, 4, 1, 2};
    for (int i = 0; i < 5; i++)
        assert_int_equal(order[i], want[i]);
    assert_int_equal(blocker.t.runs + a.runs + b.runs + c.runs + d.runs, 5);
    assert_int_equal(blocker.t.dones + a.dones + b.dones + c.dones + d.dones, 5);
    assert_false(pthread_equal(a.ran_on, pthread_self()));

    /* More turns call nothing again. */
    run_loop_ms(30);
    assert_int_equal(blocker.t.dones + a.dones + b.dones + c.dones + d.dones, 5);
    spawner_free(s);
    unhold(&blocker);
}

static void await_waits_for_its_job_and_calls_its_done_once(void **state)
{
    (void)state;
    struct spawner *s = NULL;
    struct sbx_err err = {0};
    assert_int_equal(spawner_new(loop, &s, &err), 0);
    struct blocker blocker;
    struct test_job a;
    hold(&blocker, s, NULL, NULL);
    test_job_init(&a, -1, NULL, NULL, 1);
    spawner_submit(s, &a.job);

    /* a waits behind the blocker, which another thread releases 100 ms from now. */
    open_gate_later(&blocker, 100);
    uint64_t t0 = now_ms();
    alarm(10);
    spawner_await(s, &a.job);
    alarm(0);
    assert_true(now_ms() - t0 >= 90);
    assert_int_equal(a.runs, 1);
    assert_int_equal(a.dones, 1);
    /* The blocker's done is the loop's to call, once; a's is not called again. */
    assert_int_equal(blocker.t.dones, 0);
    for (int i = 0; i < 100 && !blocker.t.dones; i++)
        run_loop_ms(10);
    assert_int_equal(blocker.t.dones, 1);
    run_loop_ms(30);
    assert_int_equal(a.dones, 1);
    assert_int_equal(blocker.t.dones, 1);

    /* A job the loop already took: await returns at once, and nothing is called again. */
    test_job_init(&a, -1, NULL, NULL, 1);
    spawner_submit(s, &a.job);
    for (int i = 0; i < 100 && !a.dones; i++)
        run_loop_ms(10);
    assert_int_equal(a.dones, 1);
    spawner_await(s, &a.job);
    assert_int_equal(a.dones, 1);
    spawner_free(s);
    unhold(&blocker);
}

/* The pooled sandbox of the profile, or NULL. */
static struct sandbox *pooled_sandbox(void)
{
    for (struct sandbox *sb = svc->list; sb; sb = sb->next)
        if (sb->pooled)
            return sb;
    return NULL;
}

/* Whether this process has no child left, reaped or not. */
static bool no_children(void)
{
    for (int i = 0; i < 100 && svc->dying; i++)
        run_loop_ms(20);
    return waitpid(-1, NULL, WNOHANG) < 0 && errno == ECHILD;
}

/* A pool of one, whose refill (scheduled by the create of *a, made on the spot) waits behind
 * a blocker: the pooled sandbox, still spawning. */
static struct sandbox *refill_behind_a_blocker(struct sandbox **a, struct blocker *blocker)
{
    hold(blocker, svc->spawner, NULL, NULL);
    cfg.profiles[0].pool_size = 1;
    svc->refill_paused = false;
    struct sbx_err err = {0};
    if (sandbox_create(svc, "tester", NULL, NULL, NULL, a, &err) < 0)
        fail_msg("create: %s", err.msg);
    run_loop_ms(50);
    struct sandbox *pooled = pooled_sandbox();
    assert_non_null(pooled);
    assert_true(pooled->spawning);
    return pooled;
}

struct begun {
    int calls;
    char error[256];
};

static void note_begun(struct sandbox *sb, const char *error, void *data)
{
    (void)sb;
    struct begun *b = data;
    b->calls++;
    snprintf(b->error, sizeof(b->error), "%s", error ? error : "");
}

static void a_refill_is_begun_off_the_loop_and_never_waited_for_behind_the_queue(void **state)
{
    (void)state;
    assert_true(no_children());
    /* The loop goes on while the refill waits behind the blocker. */
    struct blocker blocker;
    struct sandbox *a = NULL;
    start_ticking();
    struct sandbox *pooled = refill_behind_a_blocker(&a, &blocker);
    ticking = false;
    assert_true(ticks >= 5);
    assert_false(a->spawning); /* made on the spot: the pool was empty */
    assert_non_null(a->jail);
    assert_null(pooled->jail);
    assert_int_equal(svc->n_pool, 1);

    /* A create that needs its jail now does not wait behind the queue: it makes its own. */
    struct sandbox *b = NULL;
    struct sbx_err err = {0};
    uint64_t t0 = now_ms();
    alarm(10);
    if (sandbox_create(svc, "tester", NULL, NULL, NULL, &b, &err) < 0)
        fail_msg("create: %s", err.msg);
    alarm(0);
    assert_true(now_ms() - t0 < 1000);
    assert_ptr_not_equal(b, pooled);
    assert_non_null(b->jail);
    assert_true(pooled->spawning);

    /* One that can wait takes it, and hears when its jail exists. */
    struct begun heard = {0};
    struct sandbox *c = NULL;
    if (sandbox_create_soon(svc, "tester", NULL, NULL, NULL, note_begun, &heard, &c, &err) < 0)
        fail_msg("create: %s", err.msg);
    assert_ptr_equal(c, pooled);
    assert_true(c->spawning);
    assert_false(c->pooled);
    assert_int_equal(heard.calls, 0);

    /* The next refill waits too; closing it takes its jail back unbegun, at once. */
    run_loop_ms(50);
    pooled = pooled_sandbox();
    assert_non_null(pooled);
    assert_true(pooled->spawning);
    cfg.profiles[0].pool_size = 0;
    t0 = now_ms();
    sandbox_close(pooled, NULL);
    assert_true(now_ms() - t0 < 1000);
    assert_int_equal(svc->n_pool, 0);

    open_gate(&blocker);
    for (int i = 0; i < 100 && !heard.calls; i++)
        run_loop_ms(10);
    assert_int_equal(heard.calls, 1);
    assert_string_equal(heard.error, "");
    assert_non_null(c->jail);
    sandbox_close(a, NULL);
    sandbox_close(b, NULL);
    sandbox_close(c, NULL);
    assert_int_equal(blocker.t.dones, 1);
    assert_true(no_children());
    unhold(&blocker);
}

static void a_refill_that_cannot_be_begun_pauses_refilling_and_leaves_nothing(void **state)
{
    (void)state;
    struct blocker blocker;
    struct sandbox *a = NULL;
    struct sandbox *pooled = refill_behind_a_blocker(&a, &blocker);

    /* A marker queued behind the refill: when it runs, the refill's jail has been tried. */
    struct marker marker;
    queue_marker(&marker, svc->spawner);
    /* No fd to spare once the blocker goes: the refill's jail fails (EMFILE) on the thread. */
    struct fd_famine famine;
    starve_fds(&famine);
    open_gate(&blocker);
    await_marker(&marker);
    feed_fds(&famine);
    assert_true(pooled->spawning); /* its done is the loop's */

    run_loop_ms(50);
    assert_true(svc->refill_paused);
    assert_int_equal(svc->n_pool, 0);
    assert_null(pooled_sandbox());
    cfg.profiles[0].pool_size = 0;
    sandbox_close(a, NULL);
    assert_true(no_children());
    assert_int_equal(marker.t.dones, 1);
    close_marker(&marker);
    unhold(&blocker);
}

/* This process's children, every thread's (the spawner's among them). */
static int children(pid_t *out, int max)
{
    int n = 0;
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char path[300];
        snprintf(path, sizeof(path), "/proc/self/task/%s/children", e->d_name);
        FILE *f = fopen(path, "r");
        int pid;
        while (f && n < max && fscanf(f, "%d", &pid) == 1)
            out[n++] = pid;
        if (f)
            fclose(f);
    }
    if (d)
        closedir(d);
    return n;
}

static bool listed(const pid_t *pids, int n, pid_t pid)
{
    for (int i = 0; i < n; i++)
        if (pids[i] == pid)
            return true;
    return false;
}

/* The warm pool's sandbox caught in its setup: its init stopped right after the spawner cloned
 * it, before it could report the exec. The refill waits behind a blocker, so that the clone
 * comes when this thread watches for it; the setup takes a millisecond, so a few tries may be
 * needed. *init gets its pid. */
static struct sandbox *stalled_pooled_sandbox(pid_t *init)
{
    for (int attempt = 0; attempt < 20; attempt++) {
        svc->refill_paused = false;
        /* A close schedules the next refill (on the next loop turn); so does a create. */
        struct sandbox *old = pooled_sandbox();
        if (!old) {
            struct sbx_err err = {0};
            if (sandbox_create(svc, "tester", NULL, NULL, NULL, &old, &err) < 0)
                fail_msg("create: %s", err.msg);
        }
        sandbox_close(old, NULL);
        struct blocker blocker;
        hold(&blocker, svc->spawner, NULL, NULL);
        run_loop_ms(20);
        struct sandbox *pooled = pooled_sandbox();
        assert_non_null(pooled);
        assert_true(pooled->spawning);

        pid_t before[256], now[256];
        int nb = children(before, 256);
        open_gate(&blocker);
        pid_t pid = 0;
        for (uint64_t t0 = now_ms(); !pid && now_ms() - t0 < 2000;) {
            int nn = children(now, 256);
            for (int i = 0; i < nn && !pid; i++)
                if (!listed(before, nb, now[i]))
                    pid = now[i];
        }
        assert_true(pid > 0);
        kill(pid, SIGSTOP);
        for (int i = 0; i < 200 && proc_state(pid) != 'T'; i++)
            usleep(1000);
        for (int i = 0; i < 100 && pooled->spawning; i++)
            run_loop_ms(10);
        unhold(&blocker);
        assert_false(pooled->spawning);
        assert_int_equal(blocker.t.dones, 1);
        assert_non_null(pooled->jail);
        assert_int_equal(pooled->jail->pid, pid);
        struct pollfd p = {.fd = pooled->jail->setup_fd, .events = POLLIN};
        if (proc_state(pid) == 'T' && pooled->setup_w && p.fd >= 0 && poll(&p, 1, 50) == 0) {
            *init = pid;
            return pooled;
        }
        kill(pid, SIGCONT);
    }
    fail_msg("never caught a pooled sandbox in its setup");
    return NULL;
}

/* A create takes a pooled sandbox still in its setup at once, as it would one it made: the
 * loop does not wait for that setup, the sandbox's first call does. */
static void a_pooled_sandbox_in_its_setup_is_handed_out_without_waiting(void **state)
{
    (void)state;
    cfg.profiles[0].pool_size = 1;
    svc->setup_wait_ms = 3000;
    svc->ready_timeout_ms = 60000;
    pid_t init = 0;
    struct sandbox *pooled = stalled_pooled_sandbox(&init);
    const char *id = pooled->id;
    cfg.profiles[0].pool_size = 0;

    struct sandbox *a = NULL;
    struct sbx_err err = {0};
    uint64_t t0 = now_ms();
    if (sandbox_create(svc, "tester", NULL, NULL, NULL, &a, &err) < 0)
        fail_msg("create: %s", err.msg);
    uint64_t took = now_ms() - t0;
    assert_ptr_equal(a, pooled);
    assert_string_equal(a->id, id);
    assert_true(took < 1000); /* it waited setup_wait_ms (3 s) for the setup before */
    assert_int_equal(a->state, SBX_STARTING);

    /* Once init goes on, the setup ends and the interpreter comes up as usual. */
    kill(init, SIGCONT);
    for (int i = 0; i < 300 && a->state != SBX_READY; i++)
        run_loop_ms(10);
    assert_int_equal(a->state, SBX_READY);
    sandbox_close(a, NULL);
    assert_true(no_children());
}

static size_t sandboxes_of(const char *owner)
{
    size_t n = 0;
    for (struct sandbox *sb = svc->list; sb; sb = sb->next)
        n += sb->owner && strcmp(sb->owner, owner) == 0;
    return n;
}

/* A session of owner whose tool call (request 10), which makes a sandbox, waits for its jail
 * behind a blocker. */
static void call_behind_a_blocker(struct peer *p, const char *owner, struct blocker *blocker,
                                  const char *name, json_t *args)
{
    cfg.profiles[0].pool_size = 0;
    peer_init(p, owner);
    hold(blocker, svc->spawner, NULL, NULL);
    peer_send(p, 10, "tools/call", json_pack("{s:s, s:o}", "name", name, "arguments", args));
    run_loop_ms(20);
    assert_null(peer_take(p, 10)); /* its jail waits behind the blocker */
    assert_int_equal(sandboxes_of(owner), 1);
}

static void create_behind_a_blocker(struct peer *p, const char *owner, struct blocker *blocker)
{
    call_behind_a_blocker(p, owner, blocker, "create_sandbox", json_object());
}

/* The one sandbox of owner. */
static struct sandbox *sandbox_of(const char *owner)
{
    for (struct sandbox *sb = svc->list; sb; sb = sb->next)
        if (sb->owner && strcmp(sb->owner, owner) == 0)
            return sb;
    fail_msg("%s has no sandbox", owner);
    return NULL;
}

/* The one sandbox of owner other than sid. */
static const char *sandbox_of_not(const char *owner, const char *sid)
{
    for (struct sandbox *sb = svc->list; sb; sb = sb->next)
        if (sb->owner && strcmp(sb->owner, owner) == 0 && strcmp(sb->id, sid) != 0)
            return sb->id;
    fail_msg("%s has no sandbox but %s", owner, sid);
    return NULL;
}

/* Lets the blocker go while the sandbox's jail cannot be begun: no fd to spare (EMFILE). */
static void fail_the_queued_jail(struct blocker *blocker)
{
    struct marker marker;
    queue_marker(&marker, svc->spawner); /* behind the queued jail */
    struct fd_famine famine;
    starve_fds(&famine);
    open_gate(blocker);
    await_marker(&marker);
    feed_fds(&famine);
    run_loop_ms(20); /* the loop takes both dones */
    assert_int_equal(marker.t.dones, 1);
    close_marker(&marker);
}

static const char *result_of(const json_t *resp)
{
    return json_string_value(json_object_get(structured(resp), "result"));
}

static void end_session(struct peer *p, const char *owner)
{
    mcp_session_free(p->s);
    json_decref(p->inbox);
    assert_int_equal(sandboxes_of(owner), 0);
    assert_true(no_children());
}

/* create_sandbox through the protocol: its answer waits for the jail, the loop does not. */
static void create_sandbox_answers_once_its_jail_exists_and_the_loop_serves_meanwhile(void **state)
{
    (void)state;
    struct peer p;
    struct blocker blocker;
    create_behind_a_blocker(&p, "carol", &blocker);
    json_decref(request(&p, 11, "ping", json_object())); /* the loop answers */
    assert_null(peer_take(&p, 10));

    open_gate(&blocker);
    json_t *r = peer_wait(&p, 10);
    assert_false(is_error(r));
    char sid[32];
    created_id(r, sid, sizeof(sid));
    json_decref(r);
    unhold(&blocker);
    r = tool(&p, 12, "run_code", json_pack("{s:s, s:s}", "sandbox_id", sid, "code", "6*7"));
    assert_false(is_error(r));
    assert_string_equal(json_string_value(json_object_get(structured(r), "result")), "42");
    json_decref(r);
    r = tool(&p, 13, "write_file",
             json_pack("{s:s, s:s, s:s}", "sandbox_id", sid, "path", "a.txt", "content", "x"));
    assert_false(is_error(r));
    json_decref(r);
    end_session(&p, "carol");
}

/* The sandbox of a create still waiting is listed, and usable by id: a file tool waits for its
 * jail and setup as the create does, and the loop serves meanwhile; a close_sandbox of another
 * answers its create with why. */
static void a_sandbox_whose_create_waits_is_usable_and_closable_by_id(void **state)
{
    (void)state;
    struct peer p;
    struct blocker blocker;
    create_behind_a_blocker(&p, "frank", &blocker);
    json_t *r = tool(&p, 11, "list_sandboxes", json_object());
    json_t *listed = json_array_get(json_object_get(structured(r), "sandboxes"), 0);
    assert_string_equal(json_string_value(json_object_get(listed, "state")), "starting");
    char sid[32];
    snprintf(sid, sizeof(sid), "%s", json_string_value(json_object_get(listed, "id")));
    json_decref(r);
    peer_send(&p, 12, "tools/call",
              json_pack("{s:s, s:{s:s, s:s, s:s}}", "name", "write_file", "arguments", "sandbox_id",
                        sid, "path", "a.txt", "content", "x"));
    r = tool(&p, 13, "get_sandbox_status", json_pack("{s:s}", "sandbox_id", sid));
    assert_false(is_error(r));
    assert_int_equal(json_integer_value(json_object_get(json_object_get(structured(r), "usage"),
                                                        "workspace_bytes")),
                     0);
    json_decref(r);
    assert_null(peer_take(&p, 12));
    assert_null(peer_take(&p, 10));

    open_gate(&blocker);
    r = peer_wait(&p, 12);
    assert_false(is_error(r));
    json_decref(r);
    r = peer_take(&p, 10);
    assert_non_null(r);
    assert_false(is_error(r));
    char created[32];
    created_id(r, created, sizeof(created));
    assert_string_equal(created, sid);
    json_decref(r);
    unhold(&blocker);
    r = tool(&p, 14, "read_file", json_pack("{s:s, s:s}", "sandbox_id", sid, "path", "a.txt"));
    assert_false(is_error(r));
    assert_string_equal(text_of(r), "x");
    json_decref(r);

    hold(&blocker, svc->spawner, NULL, NULL);
    peer_send(&p, 20, "tools/call",
              json_pack("{s:s, s:{}}", "name", "create_sandbox", "arguments"));
    run_loop_ms(20);
    assert_null(peer_take(&p, 20));
    r = tool(&p, 21, "list_sandboxes", json_object());
    const char *other = NULL;
    size_t i;
    json_t *item;
    json_array_foreach(json_object_get(structured(r), "sandboxes"), i, item)
    {
        if (strcmp(json_string_value(json_object_get(item, "id")), sid) != 0)
            other = json_string_value(json_object_get(item, "id"));
    }
    assert_non_null(other);
    json_t *closed = tool(&p, 22, "close_sandbox", json_pack("{s:s}", "sandbox_id", other));
    assert_false(is_error(closed));
    json_decref(closed);
    json_decref(r);
    r = peer_take(&p, 20);
    assert_non_null(r);
    assert_true(is_error(r));
    assert_non_null(strstr(text_of(r), "closed"));
    json_decref(r);

    open_gate(&blocker);
    unhold(&blocker);
    end_session(&p, "frank");
}

/* Sends a tool call on sandbox sid without waiting for its answer. */
static void send_tool(struct peer *p, int id, const char *name, const char *sid, json_t *args)
{
    json_object_set_new(args, "sandbox_id", json_string(sid));
    peer_send(p, id, "tools/call", json_pack("{s:s, s:o}", "name", name, "arguments", args));
}

/* Tools waiting for a sandbox's setup: one is cancelled (no answer, nothing kept), and the
 * close of the sandbox answers the others; a reset that waited restarts the interpreter. */
static void tools_waiting_for_the_setup_can_be_cancelled_or_see_the_sandbox_closed(void **state)
{
    (void)state;
    struct peer p;
    struct blocker blocker;
    create_behind_a_blocker(&p, "hana", &blocker);
    char sid[32];
    snprintf(sid, sizeof(sid), "%s", sandbox_of("hana")->id);
    send_tool(&p, 12, "write_file", sid, json_pack("{s:s, s:s}", "path", "b.txt", "content", "y"));
    send_tool(&p, 13, "reset_sandbox", sid, json_object());
    send_tool(&p, 14, "list_files", sid, json_object());
    run_loop_ms(20);
    assert_null(peer_take(&p, 12));
    assert_null(peer_take(&p, 13));
    assert_null(peer_take(&p, 14));
    peer_cancel(&p, 12);
    json_t *r = tool(&p, 15, "close_sandbox", json_pack("{s:s}", "sandbox_id", sid));
    assert_false(is_error(r));
    json_decref(r);
    for (int id = 13; id <= 14; id++) {
        r = peer_wait(&p, id);
        assert_true(is_error(r));
        assert_non_null(strstr(text_of(r), " was closed at "));
        json_decref(r);
    }
    r = peer_wait(&p, 10);
    assert_true(is_error(r));
    json_decref(r);
    run_loop_ms(20);
    assert_null(peer_take(&p, 12)); /* a cancelled request gets no answer */
    open_gate(&blocker);
    unhold(&blocker);

    /* A reset that waited for the setup, and a session that ends while a file tool waits. */
    hold(&blocker, svc->spawner, NULL, NULL);
    peer_send(&p, 20, "tools/call",
              json_pack("{s:s, s:{}}", "name", "create_sandbox", "arguments"));
    run_loop_ms(20);
    snprintf(sid, sizeof(sid), "%s", sandbox_of("hana")->id);
    send_tool(&p, 21, "reset_sandbox", sid, json_object());
    run_loop_ms(20);
    assert_null(peer_take(&p, 21));
    open_gate(&blocker);
    r = peer_wait(&p, 21);
    assert_false(is_error(r));
    assert_true(json_is_true(json_object_get(structured(r), "interpreter_restarted")));
    json_decref(r);
    json_decref(peer_wait(&p, 20));
    unhold(&blocker);
    r = tool(&p, 22, "run_code", json_pack("{s:s, s:s}", "sandbox_id", sid, "code", "6*7"));
    assert_string_equal(result_of(r), "42");
    json_decref(r);
    hold(&blocker, svc->spawner, NULL, NULL);
    peer_send(&p, 23, "tools/call",
              json_pack("{s:s, s:{}}", "name", "create_sandbox", "arguments"));
    run_loop_ms(20);
    send_tool(&p, 24, "read_file", sandbox_of_not("hana", sid),
              json_pack("{s:s}", "path", "c.txt"));
    run_loop_ms(20);
    assert_null(peer_take(&p, 24));
    open_gate(&blocker);
    unhold(&blocker);
    end_session(&p, "hana");
}

/* Cancelled while its jail is begun: the sandbox nobody heard of goes, jail and all. */
static void a_create_sandbox_cancelled_while_its_jail_is_begun_leaves_nothing(void **state)
{
    (void)state;
    struct peer p;
    struct blocker blocker;
    create_behind_a_blocker(&p, "dave", &blocker);
    /* The cancel closes it at once: its jail, still queued behind the blocker, is never begun. */
    alarm(10);
    peer_cancel(&p, 10);
    alarm(0);
    assert_int_equal(sandboxes_of("dave"), 0);
    open_gate(&blocker);
    run_loop_ms(50);
    assert_null(peer_take(&p, 10)); /* a cancelled request gets no answer */
    unhold(&blocker);
    end_session(&p, "dave");
}

/* A jail that cannot be made fails the create with the reason, and leaves nothing behind. */
static void a_create_sandbox_whose_jail_fails_says_why(void **state)
{
    (void)state;
    struct peer p;
    struct blocker blocker;
    create_behind_a_blocker(&p, "erin", &blocker);
    fail_the_queued_jail(&blocker);
    json_t *r = peer_wait(&p, 10);
    assert_true(is_error(r));
    assert_non_null(strstr(text_of(r), "Too many open files"));
    json_decref(r);
    unhold(&blocker);
    end_session(&p, "erin");
}

static json_t *oneshot_args(void)
{
    return json_pack("{s:s}", "code", "6*7");
}

/* create_run_close begins its jail off the loop too: others are answered meanwhile, and once
 * the jail exists the code runs and the sandbox goes. Its sandbox cannot be reset meanwhile. */
static void create_run_close_waits_for_its_jail_off_the_loop_and_leaves_nothing(void **state)
{
    (void)state;
    struct peer p;
    struct blocker blocker;
    call_behind_a_blocker(&p, "gina", &blocker, "create_run_close", oneshot_args());
    json_decref(request(&p, 11, "ping", json_object())); /* the loop answers */
    struct sandbox *sb = sandbox_of("gina");
    assert_true(sb->spawning);
    assert_true(sb->oneshot);
    json_t *r = tool(&p, 12, "reset_sandbox", json_pack("{s:s}", "sandbox_id", sb->id));
    assert_true(is_error(r));
    assert_non_null(strstr(text_of(r), "cannot be reset"));
    json_decref(r);
    /* Nor can anything else run there: its close would take that along. */
    r = tool(&p, 13, "run_code", json_pack("{s:s, s:s}", "sandbox_id", sb->id, "code", "1"));
    assert_true(is_error(r));
    assert_non_null(strstr(text_of(r), "runs that one execution"));
    json_decref(r);
    assert_null(peer_take(&p, 10));

    open_gate(&blocker);
    r = peer_wait(&p, 10);
    assert_false(is_error(r));
    assert_string_equal(result_of(r), "42");
    json_decref(r);
    unhold(&blocker);
    end_session(&p, "gina");
}

/* Cancelled before its code started, whether its jail was still queued or its interpreter still
 * starting: the sandbox goes all the same (its execution never ran, so never ended). */
static void a_create_run_close_cancelled_before_its_code_runs_leaves_nothing(void **state)
{
    (void)state;
    struct peer p;
    struct blocker blocker;
    call_behind_a_blocker(&p, "hank", &blocker, "create_run_close", oneshot_args());
    peer_cancel(&p, 10);
    assert_int_equal(sandboxes_of("hank"), 0);
    open_gate(&blocker);
    unhold(&blocker);

    /* Its jail begun, the interpreter not ready yet: the execution waits in the queue. */
    svc->ready_timeout_ms = 60000;
    peer_send(&p, 20, "tools/call",
              json_pack("{s:s, s:o}", "name", "create_run_close", "arguments", oneshot_args()));
    struct sandbox *sb = sandbox_of("hank");
    for (int i = 0; i < 100 && sb->spawning; i++)
        run_loop_ms(1);
    assert_false(sb->spawning);
    assert_int_equal(sb->state, SBX_STARTING);
    assert_int_equal(sb->queue_len, 1);
    peer_cancel(&p, 20);
    assert_int_equal(sandboxes_of("hank"), 0);
    run_loop_ms(50);
    assert_null(peer_take(&p, 10));
    assert_null(peer_take(&p, 20));
    end_session(&p, "hank");
}

/* A jail that cannot be made: the execution fails with why, and the sandbox goes. */
static void a_create_run_close_whose_jail_fails_says_why_and_leaves_nothing(void **state)
{
    (void)state;
    struct peer p;
    struct blocker blocker;
    call_behind_a_blocker(&p, "ivan", &blocker, "create_run_close", oneshot_args());
    fail_the_queued_jail(&blocker);
    json_t *r = peer_wait(&p, 10);
    assert_true(is_error(r));
    assert_non_null(strstr(text_of(r), "Too many open files"));
    json_decref(r);
    unhold(&blocker);
    end_session(&p, "ivan");
}

/* An interpreter that cannot start (3 MiB of memory: it is OOM-killed) breaks the sandbox: the
 * one-shot's execution fails with why, and the sandbox goes from inside the loop's watch of the
 * interpreter's status, which must not look at it again. */
static void
a_create_run_close_whose_interpreter_cannot_start_says_why_and_leaves_nothing(void **state)
{
    (void)state;
    struct peer p;
    cfg.profiles[0].pool_size = 0;
    uint64_t memory = cfg.profiles[0].memory_bytes;
    cfg.profiles[0].memory_bytes = 3 << 20;
    peer_init(&p, "kate");
    json_t *r = tool(&p, 10, "create_run_close", oneshot_args());
    cfg.profiles[0].memory_bytes = memory;
    assert_true(is_error(r));
    /* Under ASan the server's fork of init alone needs more than 3 MiB (its page tables are
     * charged to the group), so there init is what dies, and says so. */
    const char *why = text_of(r);
    if (!strstr(why, "no Python interpreter is started") &&
        !strstr(why, "the sandbox ended unexpectedly"))
        fail_msg("not why it failed: %s", why);
    json_decref(r);
    run_loop_ms(20);
    end_session(&p, "kate");
}

/* A default sandbox whose interpreter did not start in time failed to start as well: the next
 * call makes another. Its setup is let end first (else the timeout is the setup's), and then
 * its interpreter is stopped, so that it is late for sure. */
static void a_default_sandbox_whose_interpreter_is_late_is_replaced_by_the_next_call(void **state)
{
    (void)state;
    struct peer p;
    cfg.profiles[0].pool_size = 0;
    peer_init(&p, "liam");
    svc->ready_timeout_ms = 500;
    peer_send(&p, 10, "tools/call",
              json_pack("{s:s, s:o}", "name", "run_code", "arguments", oneshot_args()));
    struct sandbox *sb = sandbox_of("liam");
    for (int i = 0; i < 2000 && (sb->spawning || sb->setup_w); i++)
        run_loop_ms(1);
    svc->ready_timeout_ms = 60000; /* its timer was armed when its jail came */
    assert_false(sb->spawning);
    assert_null(sb->setup_w);
    assert_int_equal(sb->state, SBX_STARTING);
    /* The interpreter is init's only child by now. */
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)sb->jail->pid,
             (int)sb->jail->pid);
    int driver = 0;
    for (int i = 0; i < 200 && !driver; i++) {
        FILE *f = fopen(path, "r");
        if (f && fscanf(f, "%d", &driver) != 1)
            driver = 0;
        if (f)
            fclose(f);
        if (!driver)
            usleep(1000);
    }
    assert_true(driver > 0);
    assert_int_equal(kill(driver, SIGSTOP), 0);
    assert_int_equal(sb->state, SBX_STARTING);

    json_t *r = peer_wait(&p, 10);
    assert_true(is_error(r));
    assert_non_null(strstr(text_of(r), "did not start in time (the next call without a sandbox_id "
                                       "starts a new default sandbox)"));
    json_decref(r);
    r = tool(&p, 11, "run_code", oneshot_args());
    assert_false(is_error(r));
    assert_string_equal(result_of(r), "42");
    json_decref(r);
    assert_int_equal(sandboxes_of("liam"), 1);
    end_session(&p, "liam");
}

/* The default sandbox, made by a first call without a sandbox_id, begins its jail off the loop;
 * one that failed to start is replaced by the next such call. */
static void the_default_sandbox_starts_off_the_loop_and_a_failed_one_is_replaced(void **state)
{
    (void)state;
    struct peer p;
    struct blocker blocker;
    call_behind_a_blocker(&p, "judy", &blocker, "run_code", oneshot_args());
    json_decref(request(&p, 11, "ping", json_object())); /* the loop answers */
    struct sandbox *failed = sandbox_of("judy");
    assert_true(failed->spawning);
    assert_true(failed->is_default);
    fail_the_queued_jail(&blocker);
    json_t *r = peer_wait(&p, 10);
    assert_true(is_error(r));
    assert_non_null(strstr(text_of(r), "Too many open files"));
    assert_non_null(strstr(text_of(r), "starts a new default sandbox"));
    json_decref(r);
    unhold(&blocker);
    /* Broken until the next call that works in it: status and file tools say why. */
    r = tool(&p, 11, "get_sandbox_status", json_object());
    assert_string_equal(json_string_value(json_object_get(structured(r), "state")), "broken");
    assert_non_null(strstr(json_string_value(json_object_get(structured(r), "broken_reason")),
                           "Too many open files"));
    json_decref(r);
    assert_ptr_equal(sandbox_of("judy"), failed);
    r = tool(&p, 12, "read_file", json_pack("{s:s, s:s}", "sandbox_id", failed->id, "path", "a"));
    assert_true(is_error(r));
    assert_non_null(strstr(text_of(r), "has no files: "));
    assert_non_null(strstr(text_of(r), "Too many open files"));
    json_decref(r);
    assert_int_equal(sandboxes_of("judy"), 1);

    r = tool(&p, 12, "run_code", json_pack("{s:s}", "code", "x = 6*7; x"));
    assert_false(is_error(r));
    assert_string_equal(result_of(r), "42");
    json_decref(r);
    struct sandbox *now = sandbox_of("judy");
    assert_int_equal(sandboxes_of("judy"), 1);
    assert_true(now->is_default);
    assert_false(now->failed_start);
    r = tool(&p, 13, "run_code", json_pack("{s:s}", "code", "x"));
    assert_string_equal(result_of(r), "42"); /* the same default sandbox, its state kept */
    json_decref(r);
    end_session(&p, "judy");
}

/* A file tool waiting for a default sandbox whose jail fails hears why, once: it makes no new
 * default to wait for again (that loop made hundreds while the fault lasted). The next call
 * gets a new default. */
static void a_file_tool_waiting_for_a_default_that_fails_hears_why(void **state)
{
    (void)state;
    struct peer p;
    struct blocker blocker;
    call_behind_a_blocker(&p, "kate", &blocker, "write_file",
                          json_pack("{s:s, s:s}", "path", "a.txt", "content", "x"));
    struct sandbox *failed = sandbox_of("kate");
    assert_true(failed->spawning);
    assert_true(failed->is_default);
    fail_the_queued_jail(&blocker);
    json_t *r = peer_wait(&p, 10);
    assert_true(is_error(r));
    assert_non_null(strstr(text_of(r), "has no files: "));
    assert_non_null(strstr(text_of(r), "Too many open files"));
    assert_non_null(strstr(text_of(r), "starts a new default sandbox"));
    json_decref(r);
    unhold(&blocker);
    assert_int_equal(sandboxes_of("kate"), 1);
    assert_ptr_equal(sandbox_of("kate"), failed);
    r = tool(&p, 11, "write_file", json_pack("{s:s, s:s}", "path", "a.txt", "content", "x"));
    assert_false(is_error(r));
    json_decref(r);
    assert_int_equal(sandboxes_of("kate"), 1);
    assert_false(sandbox_of("kate")->failed_start);
    end_session(&p, "kate");
}

/* Left for the group's teardown: the service is freed while a refill waits behind a blocker
 * that another thread releases later; the refill is taken back, the spawner's thread ends once
 * the blocker has run, and no process is left. */
static void a_refill_under_way_at_shutdown_is_waited_for(void **state)
{
    (void)state;
    static struct blocker blocker; /* the teardown still needs it */
    struct sandbox *a = NULL;
    refill_behind_a_blocker(&a, &blocker);
    open_gate_later(&blocker, 100);
    pthread_detach(blocker.opener);
}

static int teardown_leaves_no_process(void **state)
{
    alarm(10);
    int r = service_teardown(state);
    alarm(0);
    if (r < 0)
        return r;
    if (waitpid(-1, NULL, WNOHANG) < 0 && errno == ECHILD)
        return 0;
    fprintf(stderr, "a process of a sandbox is left after the service was freed\n");
    return -1;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(jobs_run_in_order_off_the_loop_and_each_done_comes_once),
        cmocka_unit_test(await_waits_for_its_job_and_calls_its_done_once),
        cmocka_unit_test(a_refill_is_begun_off_the_loop_and_never_waited_for_behind_the_queue),
        cmocka_unit_test(a_refill_that_cannot_be_begun_pauses_refilling_and_leaves_nothing),
        cmocka_unit_test(a_pooled_sandbox_in_its_setup_is_handed_out_without_waiting),
        cmocka_unit_test(create_sandbox_answers_once_its_jail_exists_and_the_loop_serves_meanwhile),
        cmocka_unit_test(a_sandbox_whose_create_waits_is_usable_and_closable_by_id),
        cmocka_unit_test(tools_waiting_for_the_setup_can_be_cancelled_or_see_the_sandbox_closed),
        cmocka_unit_test(a_create_sandbox_cancelled_while_its_jail_is_begun_leaves_nothing),
        cmocka_unit_test(a_create_sandbox_whose_jail_fails_says_why),
        cmocka_unit_test(create_run_close_waits_for_its_jail_off_the_loop_and_leaves_nothing),
        cmocka_unit_test(a_create_run_close_cancelled_before_its_code_runs_leaves_nothing),
        cmocka_unit_test(a_create_run_close_whose_jail_fails_says_why_and_leaves_nothing),
        cmocka_unit_test(
            a_create_run_close_whose_interpreter_cannot_start_says_why_and_leaves_nothing),
        cmocka_unit_test(the_default_sandbox_starts_off_the_loop_and_a_failed_one_is_replaced),
        cmocka_unit_test(a_default_sandbox_whose_interpreter_is_late_is_replaced_by_the_next_call),
        cmocka_unit_test(a_file_tool_waiting_for_a_default_that_fails_hears_why),
        cmocka_unit_test(a_refill_under_way_at_shutdown_is_waited_for),
    };
    return cmocka_run_group_tests(tests, service_setup, teardown_leaves_no_process);
}
