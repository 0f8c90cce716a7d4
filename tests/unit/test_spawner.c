/* The spawner, and the warm pool's refills through it, with a real loop and service.
 * - Jobs run on the spawner's thread, in order, while the loop goes on; each done is called
 *   once, by the loop or by spawner_await, whichever takes the job first.
 * - A refill's jail is begun off the loop: while the spawner is held up, the loop serves, a
 *   create makes its sandbox on the spot instead of handing out the one being begun, and a
 *   close of that one waits for its jail and ends it with the sandbox (no process is left).
 * - A refill whose jail cannot be begun pauses refilling and leaves nothing behind.
 * Jobs are held up by a blocker: a job whose run waits until the test releases it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "service/spawner.h"
#include "service_fixture.h"
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

static void a_refill_is_begun_off_the_loop_and_a_close_waits_for_it(void **state)
{
    (void)state;
    assert_true(no_children());
    int gate[2];
    assert_int_equal(pipe(gate), 0);
    struct test_job blocker;
    test_job_init(&blocker, gate[0], NULL, NULL, 0);
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

    /* The one being begun is not handed out: the next create makes its own. */
    struct sandbox *b = NULL;
    if (sandbox_create(svc, "tester", NULL, NULL, NULL, &b, &err) < 0)
        fail_msg("create: %s", err.msg);
    assert_ptr_not_equal(b, pooled);
    assert_non_null(b->jail);
    assert_true(pooled->spawning);

    /* Closing it waits for its jail (the blocker goes in 100 ms), and ends it with it. */
    struct release_later r = {.fd = gate[1], .ms = 100};
    pthread_t helper;
    assert_int_equal(pthread_create(&helper, NULL, release_after, &r), 0);
    cfg.profiles[0].pool_size = 0;
    alarm(10);
    sandbox_close(pooled, NULL);
    alarm(0);
    pthread_join(helper, NULL);
    assert_int_equal(svc->n_pool, 0);
    assert_null(pooled_sandbox());
    sandbox_close(a, NULL);
    sandbox_close(b, NULL);
    run_loop_ms(20); /* the blocker's done */
    assert_int_equal(blocker.dones, 1);
    assert_true(no_children());
    close(gate[0]);
    close(gate[1]);
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
        cmocka_unit_test(a_refill_is_begun_off_the_loop_and_a_close_waits_for_it),
        cmocka_unit_test(a_refill_that_cannot_be_begun_pauses_refilling_and_leaves_nothing),
        cmocka_unit_test(a_refill_under_way_at_shutdown_is_waited_for),
    };
    return cmocka_run_group_tests(tests, service_setup, teardown_leaves_no_process);
}
