/* The spawner, and the warm pool's refills through it, with a real loop and service.
 * - Jobs run on the spawner's thread, in order, while the loop goes on; each done is called
 *   once, by the loop or by spawner_await, whichever takes the job first.
 * - A refill's jail is begun off the loop: while the spawner is held up, the loop serves; a
 *   create with nothing else in the pool waits for that jail and hands the sandbox out, and a
 *   close of one being begun waits for its jail and ends it with the sandbox (no process is
 *   left).
 * - A refill whose jail cannot be begun pauses refilling and leaves nothing behind.
 * - A pooled sandbox still in its setup is handed out at once: the loop never waits for it.
 * - create_sandbox, through the protocol, answers once its jail exists (or with why it could
 *   not be made), and the loop answers others meanwhile; cancelled, it leaves nothing.
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
    int *order, *next; /* done appends its index here */
    int index;
};

static void test_run(struct spawn_job *job)
{
    struct test_job *t = job->data;
    t->ran_on = pthread_self();
    t->runs++;
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

/* Releases a blocker from another thread after a delay: the loop's thread may be waiting. */
struct release_later {
    int fd;
    int ms;
};

static void *release_after(void *arg)
{
    struct release_later *r = arg;
    usleep((useconds_t)r->ms * 1000);
    ssize_t n = write(r->fd, "x", 1);
    (void)n;
    return NULL;
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
    int gate[2];
    assert_int_equal(pipe(gate), 0);
    int order[3], next = 0;
    struct test_job blocker, a, b;
    test_job_init(&blocker, gate[0], order, &next, 0);
    test_job_init(&a, -1, order, &next, 1);
    test_job_init(&b, -1, order, &next, 2);
    spawner_submit(s, &blocker.job);
    spawner_submit(s, &a.job);
    spawner_submit(s, &b.job);

    /* The blocker holds the thread; the loop runs its timers meanwhile. */
    start_ticking();
    run_loop_ms(100);
    ticking = false;
    assert_true(ticks >= 5);
    assert_int_equal(a.runs + b.runs + blocker.dones + a.dones + b.dones, 0);

    assert_int_equal(write(gate[1], "x", 1), 1);
    for (int i = 0; i < 100 && next < 3; i++)
        run_loop_ms(10);
    assert_int_equal(next, 3);
    assert_int_equal(order[0], 0);
    assert_int_equal(order[1], 1);
    assert_int_equal(order[2], 2);
    assert_int_equal(blocker.runs + a.runs + b.runs, 3);
    assert_int_equal(blocker.dones + a.dones + b.dones, 3);
    assert_false(pthread_equal(a.ran_on, pthread_self()));

    /* More turns call nothing again. */
    run_loop_ms(30);
    assert_int_equal(blocker.dones + a.dones + b.dones, 3);
    spawner_free(s);
    close(gate[0]);
    close(gate[1]);
}

static void await_waits_for_its_job_and_calls_its_done_once(void **state)
{
    (void)state;
    struct spawner *s = NULL;
    struct sbx_err err = {0};
    assert_int_equal(spawner_new(loop, &s, &err), 0);
    int gate[2];
    assert_int_equal(pipe(gate), 0);
    struct test_job blocker, a;
    test_job_init(&blocker, gate[0], NULL, NULL, 0);
    test_job_init(&a, -1, NULL, NULL, 1);
    spawner_submit(s, &blocker.job);
    spawner_submit(s, &a.job);

    /* a waits behind the blocker, which another thread releases 100 ms from now. */
    struct release_later r = {.fd = gate[1], .ms = 100};
    pthread_t helper;
    assert_int_equal(pthread_create(&helper, NULL, release_after, &r), 0);
    uint64_t t0 = now_ms();
    alarm(10);
    spawner_await(s, &a.job);
    alarm(0);
    assert_true(now_ms() - t0 >= 90);
    pthread_join(helper, NULL);
    assert_int_equal(a.runs, 1);
    assert_int_equal(a.dones, 1);
    /* The blocker's done is the loop's to call, once; a's is not called again. */
    assert_int_equal(blocker.dones, 0);
    for (int i = 0; i < 100 && !blocker.dones; i++)
        run_loop_ms(10);
    assert_int_equal(blocker.dones, 1);
    run_loop_ms(30);
    assert_int_equal(a.dones, 1);
    assert_int_equal(blocker.dones, 1);

    /* A job the loop already took: await returns at once, and nothing is called again. */
    test_job_init(&a, -1, NULL, NULL, 1);
    spawner_submit(s, &a.job);
    for (int i = 0; i < 100 && !a.dones; i++)
        run_loop_ms(10);
    assert_int_equal(a.dones, 1);
    spawner_await(s, &a.job);
    assert_int_equal(a.dones, 1);
    spawner_free(s);
    close(gate[0]);
    close(gate[1]);
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

/* A gate for a blocker, which another thread opens ms from now; *helper is that thread. */
static void open_gate_later(int fd, int ms, struct release_later *r, pthread_t *helper)
{
    *r = (struct release_later){.fd = fd, .ms = ms};
    assert_int_equal(pthread_create(helper, NULL, release_after, r), 0);
}

static void a_refill_is_begun_off_the_loop_and_waited_for_by_a_create_or_a_close(void **state)
{
    (void)state;
    assert_true(no_children());
    int gate[2], gate2[2];
    assert_int_equal(pipe(gate), 0);
    assert_int_equal(pipe(gate2), 0);
    struct test_job blocker, blocker2;
    test_job_init(&blocker, gate[0], NULL, NULL, 0);
    test_job_init(&blocker2, gate2[0], NULL, NULL, 0);
    spawner_submit(svc->spawner, &blocker.job);

    /* A create with an empty pool makes its sandbox now, spawner or not; then a refill. */
    cfg.profiles[0].pool_size = 1;
    struct sandbox *a = NULL;
    struct sbx_err err = {0};
    if (sandbox_create(svc, "tester", NULL, NULL, NULL, &a, &err) < 0)
        fail_msg("create: %s", err.msg);
    assert_false(a->spawning);
    assert_non_null(a->jail);
    start_ticking();
    run_loop_ms(100);
    ticking = false;
    assert_true(ticks >= 5); /* the loop went on */
    struct sandbox *pooled = pooled_sandbox();
    assert_non_null(pooled);
    assert_true(pooled->spawning); /* behind the blocker */
    assert_null(pooled->jail);
    assert_int_equal(svc->n_pool, 1);

    /* A create with only that one in the pool waits for its jail (the blocker goes in 100 ms)
     * and hands it out. */
    struct release_later r;
    pthread_t helper;
    open_gate_later(gate[1], 100, &r, &helper);
    struct sandbox *b = NULL;
    uint64_t t0 = now_ms();
    alarm(10);
    if (sandbox_create(svc, "tester", NULL, NULL, NULL, &b, &err) < 0)
        fail_msg("create: %s", err.msg);
    alarm(0);
    pthread_join(helper, NULL);
    assert_true(now_ms() - t0 >= 90);
    assert_ptr_equal(b, pooled);
    assert_false(b->pooled);
    assert_false(b->spawning);
    assert_non_null(b->jail);

    /* The next refill, behind another blocker: closing it waits for its jail and ends it. */
    spawner_submit(svc->spawner, &blocker2.job);
    run_loop_ms(50);
    pooled = pooled_sandbox();
    assert_non_null(pooled);
    assert_true(pooled->spawning);
    open_gate_later(gate2[1], 100, &r, &helper);
    cfg.profiles[0].pool_size = 0;
    t0 = now_ms();
    alarm(10);
    sandbox_close(pooled, NULL);
    alarm(0);
    pthread_join(helper, NULL);
    assert_true(now_ms() - t0 >= 90);
    assert_int_equal(svc->n_pool, 0);
    assert_null(pooled_sandbox());
    sandbox_close(a, NULL);
    sandbox_close(b, NULL);
    run_loop_ms(20); /* the blockers' dones */
    assert_int_equal(blocker.dones + blocker2.dones, 2);
    assert_true(no_children());
    for (int i = 0; i < 2; i++) {
        close(gate[i]);
        close(gate2[i]);
    }
}

static void a_refill_that_cannot_be_begun_pauses_refilling_and_leaves_nothing(void **state)
{
    (void)state;
    int gate[2];
    assert_int_equal(pipe(gate), 0);
    struct test_job blocker;
    test_job_init(&blocker, gate[0], NULL, NULL, 0);
    spawner_submit(svc->spawner, &blocker.job);
    cfg.profiles[0].pool_size = 1;
    svc->refill_paused = false;
    struct sandbox *a = NULL;
    struct sbx_err err = {0};
    if (sandbox_create(svc, "tester", NULL, NULL, NULL, &a, &err) < 0)
        fail_msg("create: %s", err.msg);
    run_loop_ms(50);
    struct sandbox *pooled = pooled_sandbox();
    assert_non_null(pooled);
    assert_true(pooled->spawning);

    /* A marker queued behind the refill: when it runs, the refill's jail has been tried. */
    int marker_pipe[2];
    assert_int_equal(pipe(marker_pipe), 0);
    struct test_job marker;
    test_job_init(&marker, -1, NULL, NULL, 1);
    marker.job.run = mark_run;
    marker.gate = marker_pipe[1];
    spawner_submit(svc->spawner, &marker.job);

    /* No fd to spare once the blocker goes: the refill's jail fails (EMFILE) on the thread. */
    struct rlimit old, low;
    assert_int_equal(getrlimit(RLIMIT_NOFILE, &old), 0);
    low = old;
    low.rlim_cur = 256;
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
    int fillers[256], n = 0, fd;
    while (n < 256 && (fd = open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0)
        fillers[n++] = fd;
    assert_true(n < 256);
    assert_int_equal(write(gate[1], "x", 1), 1);
    char byte;
    alarm(10);
    assert_int_equal(read(marker_pipe[0], &byte, 1), 1); /* without the loop */
    alarm(0);
    for (int i = 0; i < n; i++)
        close(fillers[i]);
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &old), 0);
    assert_true(pooled->spawning); /* its done is the loop's */

    run_loop_ms(50);
    assert_true(svc->refill_paused);
    assert_int_equal(svc->n_pool, 0);
    assert_null(pooled_sandbox());
    cfg.profiles[0].pool_size = 0;
    sandbox_close(a, NULL);
    assert_true(no_children());
    assert_int_equal(marker.dones, 1);
    close(marker_pipe[0]);
    close(marker_pipe[1]);
    close(gate[0]);
    close(gate[1]);
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
        int gate[2];
        assert_int_equal(pipe(gate), 0);
        struct test_job blocker;
        test_job_init(&blocker, gate[0], NULL, NULL, 0);
        spawner_submit(svc->spawner, &blocker.job);
        run_loop_ms(20);
        struct sandbox *pooled = pooled_sandbox();
        assert_non_null(pooled);
        assert_true(pooled->spawning);

        pid_t before[256], now[256];
        int nb = children(before, 256);
        assert_int_equal(write(gate[1], "x", 1), 1);
        pid_t pid = 0;
        for (int spin = 0; spin < 200000 && !pid; spin++) {
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
        close(gate[0]);
        close(gate[1]);
        assert_false(pooled->spawning);
        assert_int_equal(blocker.dones, 1);
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

static bool is_error(const json_t *resp)
{
    return json_is_true(json_object_get(json_object_get(resp, "result"), "isError"));
}

static size_t sandboxes_of(const char *owner)
{
    size_t n = 0;
    for (struct sandbox *sb = svc->list; sb; sb = sb->next)
        n += sb->owner && strcmp(sb->owner, owner) == 0;
    return n;
}

/* create_sandbox through the protocol: its answer waits for the jail, the loop does not. */
static void create_sandbox_answers_once_its_jail_exists_and_the_loop_serves_meanwhile(void **state)
{
    (void)state;
    cfg.profiles[0].pool_size = 0;
    struct peer p;
    peer_init(&p, "carol");
    int gate[2];
    assert_int_equal(pipe(gate), 0);
    struct test_job blocker;
    test_job_init(&blocker, gate[0], NULL, NULL, 0);
    spawner_submit(svc->spawner, &blocker.job);

    peer_send(&p, 10, "tools/call",
              json_pack("{s:s, s:{}}", "name", "create_sandbox", "arguments"));
    run_loop_ms(50);
    assert_null(peer_take(&p, 10));                      /* its jail waits behind the blocker */
    json_decref(request(&p, 11, "ping", json_object())); /* the loop answers */
    assert_null(peer_take(&p, 10));
    assert_int_equal(sandboxes_of("carol"), 1);

    assert_int_equal(write(gate[1], "x", 1), 1);
    json_t *r = peer_wait(&p, 10);
    assert_false(is_error(r));
    const char *id = json_string_value(json_object_get(
        json_object_get(json_object_get(r, "result"), "structuredContent"), "sandbox_id"));
    assert_non_null(id);
    char sid[32];
    snprintf(sid, sizeof(sid), "%s", id);
    json_decref(r);
    r = tool(&p, 12, "run_code", json_pack("{s:s, s:s}", "sandbox_id", sid, "code", "6*7"));
    assert_false(is_error(r));
    assert_string_equal(
        json_string_value(json_object_get(
            json_object_get(json_object_get(r, "result"), "structuredContent"), "result")),
        "42");
    json_decref(r);
    /* A file tool right after the create waits for the jail too (here it exists already). */
    r = tool(&p, 13, "write_file",
             json_pack("{s:s, s:s, s:s}", "sandbox_id", sid, "path", "a.txt", "content", "x"));
    assert_false(is_error(r));
    json_decref(r);

    mcp_session_free(p.s);
    json_decref(p.inbox);
    assert_int_equal(sandboxes_of("carol"), 0);
    assert_true(no_children());
    close(gate[0]);
    close(gate[1]);
}

/* Cancelled while its jail is begun: the sandbox nobody heard of goes, jail and all. */
static void a_create_sandbox_cancelled_while_its_jail_is_begun_leaves_nothing(void **state)
{
    (void)state;
    cfg.profiles[0].pool_size = 0;
    struct peer p;
    peer_init(&p, "dave");
    int gate[2];
    assert_int_equal(pipe(gate), 0);
    struct test_job blocker;
    test_job_init(&blocker, gate[0], NULL, NULL, 0);
    spawner_submit(svc->spawner, &blocker.job);
    peer_send(&p, 10, "tools/call",
              json_pack("{s:s, s:{}}", "name", "create_sandbox", "arguments"));
    run_loop_ms(20);
    assert_int_equal(sandboxes_of("dave"), 1);

    /* The cancel closes it, which waits for its jail: the blocker goes in 100 ms. */
    struct release_later r;
    pthread_t helper;
    open_gate_later(gate[1], 100, &r, &helper);
    alarm(10);
    peer_send(&p, 0, "notifications/cancelled", json_pack("{s:i}", "requestId", 10));
    alarm(0);
    pthread_join(helper, NULL);
    assert_int_equal(sandboxes_of("dave"), 0);
    run_loop_ms(50);
    assert_null(peer_take(&p, 10)); /* a cancelled request gets no answer */
    assert_true(no_children());
    mcp_session_free(p.s);
    json_decref(p.inbox);
    close(gate[0]);
    close(gate[1]);
}

/* A jail that cannot be made fails the create with the reason, and leaves nothing behind. */
static void a_create_sandbox_whose_jail_fails_says_why(void **state)
{
    (void)state;
    cfg.profiles[0].pool_size = 0;
    struct peer p;
    peer_init(&p, "erin");
    int gate[2], marker_pipe[2];
    assert_int_equal(pipe(gate), 0);
    assert_int_equal(pipe(marker_pipe), 0);
    struct test_job blocker, marker;
    test_job_init(&blocker, gate[0], NULL, NULL, 0);
    test_job_init(&marker, -1, NULL, NULL, 1);
    marker.job.run = mark_run;
    marker.gate = marker_pipe[1];
    spawner_submit(svc->spawner, &blocker.job);
    peer_send(&p, 10, "tools/call",
              json_pack("{s:s, s:{}}", "name", "create_sandbox", "arguments"));
    spawner_submit(svc->spawner, &marker.job); /* behind the create's jail */

    struct rlimit old, low;
    assert_int_equal(getrlimit(RLIMIT_NOFILE, &old), 0);
    low = old;
    low.rlim_cur = 256;
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
    int fillers[256], n = 0, fd;
    while (n < 256 && (fd = open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0)
        fillers[n++] = fd;
    assert_int_equal(write(gate[1], "x", 1), 1);
    char byte;
    alarm(10);
    assert_int_equal(read(marker_pipe[0], &byte, 1), 1);
    alarm(0);
    for (int i = 0; i < n; i++)
        close(fillers[i]);
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &old), 0);

    json_t *r = peer_wait(&p, 10);
    assert_true(is_error(r));
    assert_non_null(strstr(text_of(r), "Too many open files"));
    json_decref(r);
    assert_int_equal(sandboxes_of("erin"), 0);
    assert_true(no_children());
    mcp_session_free(p.s);
    json_decref(p.inbox);
    for (int i = 0; i < 2; i++) {
        close(gate[i]);
        close(marker_pipe[i]);
    }
}

/* Left for the group's teardown: the service is freed while a refill waits behind a blocker
 * that another thread releases; freeing it waits for that jail and ends it. */
static void a_refill_under_way_at_shutdown_is_waited_for(void **state)
{
    (void)state;
    static int gate[2];
    assert_int_equal(pipe(gate), 0);
    static struct test_job blocker;
    test_job_init(&blocker, gate[0], NULL, NULL, 0);
    spawner_submit(svc->spawner, &blocker.job);
    cfg.profiles[0].pool_size = 1;
    svc->refill_paused = false;
    struct sandbox *a = NULL;
    struct sbx_err err = {0};
    if (sandbox_create(svc, "tester", NULL, NULL, NULL, &a, &err) < 0)
        fail_msg("create: %s", err.msg);
    run_loop_ms(50);
    struct sandbox *pooled = pooled_sandbox();
    assert_non_null(pooled);
    assert_true(pooled->spawning);
    static struct release_later r;
    r = (struct release_later){.fd = gate[1], .ms = 100};
    pthread_t helper;
    assert_int_equal(pthread_create(&helper, NULL, release_after, &r), 0);
    pthread_detach(helper);
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
        cmocka_unit_test(a_refill_is_begun_off_the_loop_and_waited_for_by_a_create_or_a_close),
        cmocka_unit_test(a_refill_that_cannot_be_begun_pauses_refilling_and_leaves_nothing),
        cmocka_unit_test(a_pooled_sandbox_in_its_setup_is_handed_out_without_waiting),
        cmocka_unit_test(create_sandbox_answers_once_its_jail_exists_and_the_loop_serves_meanwhile),
        cmocka_unit_test(a_create_sandbox_cancelled_while_its_jail_is_begun_leaves_nothing),
        cmocka_unit_test(a_create_sandbox_whose_jail_fails_says_why),
        cmocka_unit_test(a_refill_under_way_at_shutdown_is_waited_for),
    };
    return cmocka_run_group_tests(tests, service_setup, teardown_leaves_no_process);
}
