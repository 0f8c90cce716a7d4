/* The embedded Python driver, run with /usr/bin/python3 over pipes exactly as the service
 * starts it (requests on fd 3, frames on fd 4), but with no sandbox around it: every behaviour
 * channel.h promises. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/util.h"
#include "service/channel.h"
#include "service/runtime_embed.h"

struct drv {
    pid_t pid;
    int chan, req, out, err; /* frames from the driver, requests to it, its stdout, stderr */
    struct channel_decoder dec;
    char ws[64];
    int next_id;
};

static void drain_fd(int fd, char *buf, size_t cap, size_t *len)
{
    for (;;) {
        if (*len + 1 >= cap)
            *len = 0; /* only the tail matters to these tests */
        ssize_t n = read(fd, buf + *len, cap - 1 - *len);
        if (n <= 0)
            break;
        *len += (size_t)n;
    }
    buf[*len] = '\0';
}

static char outbuf[1 << 16], errbuf[1 << 16];
static size_t outlen, errlen;

static void drain_output(struct drv *d)
{
    drain_fd(d->out, outbuf, sizeof(outbuf), &outlen);
    drain_fd(d->err, errbuf, sizeof(errbuf), &errlen);
}

static void clear_output(struct drv *d)
{
    drain_output(d);
    outlen = errlen = 0;
    outbuf[0] = errbuf[0] = '\0';
}

/* The next frame, or NULL on EOF, a protocol error or after timeout_ms. */
static json_t *recv_frame(struct drv *d, int timeout_ms)
{
    uint64_t deadline = now_ns() + (uint64_t)timeout_ms * 1000000u;
    for (;;) {
        json_t *o = NULL;
        int r = channel_next(&d->dec, &o);
        if (r != 0)
            return r == 1 ? o : NULL;
        uint64_t now = now_ns();
        if (now >= deadline)
            return NULL;
        struct pollfd p = {.fd = d->chan, .events = POLLIN};
        if (poll(&p, 1, (int)((deadline - now) / 1000000u) + 1) <= 0)
            continue;
        char buf[65536];
        ssize_t n = read(d->chan, buf, sizeof(buf));
        if (n <= 0)
            return NULL;
        channel_feed(&d->dec, buf, (size_t)n);
    }
}

static void send_frame(struct drv *d, json_t *obj)
{
    char *buf = NULL;
    size_t len = 0;
    assert_int_equal(channel_encode(obj, &buf, &len), 0);
    assert_int_equal(write_all(d->req, buf, len), 0);
    free(buf);
    json_decref(obj);
}

static json_t *init_frame(const char *ws, json_t *guard, int max_image_bytes)
{
    char pk[128], fig[128];
    snprintf(pk, sizeof(pk), "%s/.packages", ws);
    snprintf(fig, sizeof(fig), "%s/.mcp", ws);
    return json_pack("{s:s, s:s, s:s, s:s, s:o, s:i, s:i, s:i, s:s}", "op", "init", "workspace", ws,
                     "packages_dir", pk, "profile", guard ? "tight" : "standard", "guard",
                     guard ? guard : json_null(), "max_images", 4, "max_image_bytes",
                     max_image_bytes, "max_files", 20, "figures_dir", fig);
}

/* Starts the driver; returns the time from spawn to the ready frame in ns. With
 * foreign_bytecode, the bytecode frame claims another Python version, as when the sandbox's
 * Python changed since the build. */
static uint64_t drv_launch(struct drv *d, json_t *guard, int max_image_bytes, bool foreign_bytecode)
{
    memset(d, 0, sizeof(*d));
    snprintf(d->ws, sizeof(d->ws), "/tmp/test-driver-XXXXXX");
    assert_non_null(mkdtemp(d->ws));
    int sv[2], rq[2], op[2], ep[2];
    assert_int_equal(pipe2(sv, O_CLOEXEC), 0);
    assert_int_equal(pipe2(rq, O_CLOEXEC), 0);
    assert_int_equal(pipe2(op, O_CLOEXEC), 0);
    assert_int_equal(pipe2(ep, O_CLOEXEC), 0);
    uint64_t t0 = now_ns();
    d->pid = fork();
    assert_true(d->pid >= 0);
    if (d->pid == 0) {
        int devnull = open("/dev/null", O_RDONLY);
        dup2(devnull, 0);
        dup2(op[1], 1);
        dup2(ep[1], 2);
        /* Through high numbers: a pipe end may already sit on 3 or 4 (dup2 onto itself would
         * keep its close-on-exec flag). */
        int in = fcntl(rq[0], F_DUPFD, 10), out = fcntl(sv[1], F_DUPFD, 10);
        dup2(in, 3);
        dup2(out, 4);
        close(in), close(out);
        char home[96];
        snprintf(home, sizeof(home), "HOME=%s", d->ws);
        char *env[] = {"MPLBACKEND=Agg", home, "PATH=/usr/bin:/bin", NULL};
        char *argv[] = {
            "/usr/bin/python3", "-I", "-S", "-c", (char *)runtime_python_bootstrap(), NULL};
        execve(argv[0], argv, env);
        _exit(127);
    }
    close(sv[1]), close(rq[0]), close(op[1]), close(ep[1]);
    d->chan = sv[0], d->req = rq[1], d->out = op[0], d->err = ep[0];
    fcntl(d->out, F_SETFL, O_NONBLOCK);
    fcntl(d->err, F_SETFL, O_NONBLOCK);
    channel_decoder_init(&d->dec, CHANNEL_MAX_FRAME, 0);
    struct iovec pieces[RUNTIME_DRIVER_PIECES];
    runtime_python_driver_frames(pieces);
    unsigned char *code = malloc(pieces[1].iov_len);
    assert_non_null(code);
    memcpy(code, pieces[1].iov_base, pieces[1].iov_len);
    if (foreign_bytecode)
        code[4] ^= 0x01; /* the low byte of the compiling interpreter's sys.hexversion */
    pieces[1].iov_base = code;
    for (size_t i = 0; i < RUNTIME_DRIVER_PIECES; i++)
        assert_int_equal(write_all(d->req, pieces[i].iov_base, pieces[i].iov_len), 0);
    free(code);
    send_frame(d, init_frame(d->ws, guard, max_image_bytes));
    json_t *ready = recv_frame(d, 10000);
    uint64_t dt = now_ns() - t0;
    assert_non_null(ready);
    assert_string_equal(json_string_value(json_object_get(ready, "op")), "ready");
    assert_non_null(json_string_value(json_object_get(ready, "python")));
    assert_string_equal(json_string_value(json_object_get(ready, "driver")),
                        foreign_bytecode ? "source" : "bytecode");
    json_decref(ready);
    clear_output(d);
    return dt;
}

static uint64_t drv_start(struct drv *d, json_t *guard, int max_image_bytes)
{
    return drv_launch(d, guard, max_image_bytes, false);
}

static int drv_stop(struct drv *d)
{
    if (d->req >= 0)
        close(d->req);
    if (d->chan >= 0)
        close(d->chan);
    int st = 0;
    if (d->pid > 0)
        waitpid(d->pid, &st, 0);
    close(d->out), close(d->err);
    channel_decoder_free(&d->dec);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", d->ws);
    assert_int_equal(system(cmd), 0);
    return st;
}

static json_t *run_lang(struct drv *d, const char *lang, const char *code, const char *cwd)
{
    int id = ++d->next_id;
    send_frame(d, json_pack("{s:s, s:i, s:s, s:s, s:s?}", "op", "exec", "id", id, "language", lang,
                            "code", code, "cwd", cwd));
    json_t *r = recv_frame(d, 30000);
    assert_non_null(r);
    assert_string_equal(json_string_value(json_object_get(r, "op")), "result");
    assert_int_equal(json_integer_value(json_object_get(r, "id")), id);
    drain_output(d);
    return r;
}

static json_t *run(struct drv *d, const char *code)
{
    return run_lang(d, "python", code, NULL);
}

static const char *str_at(json_t *r, const char *k)
{
    return json_string_value(json_object_get(r, k));
}

static const char *err_at(json_t *r, const char *k)
{
    return json_string_value(json_object_get(json_object_get(r, "error"), k));
}

static void expect_ok(json_t *r, const char *result)
{
    assert_true(json_is_true(json_object_get(r, "success")));
    if (result)
        assert_string_equal(str_at(r, "result"), result);
    else /* no value: left out of the frame (channel.h), or null */
        assert_true(!json_object_get(r, "result") || json_is_null(json_object_get(r, "result")));
    json_decref(r);
}

static void globals_persist_and_last_expression_is_the_result(void **state)
{
    (void)state;
    struct drv d;
    uint64_t t = drv_start(&d, NULL, 1 << 20);
    printf("# driver start to ready: %.1f ms\n", (double)t / 1e6);
    expect_ok(run(&d, "import math\nx = 41\ndef f(y):\n    return y + 1"), NULL);
    expect_ok(run(&d, "f(x)"), "42");
    expect_ok(run(&d, "math.floor(2.5), __name__"), "(2, '__main__')");
    expect_ok(run(&d, "None"), NULL);
    expect_ok(run(&d, "x = 'a'\nx * 3"), "'aaa'");
    /* the user's namespace is not the driver's */
    expect_ok(run(&d, "'Driver' in globals()"), "False");
    assert_true(WIFEXITED(drv_stop(&d)));
}

/* A one-line statement that is not an expression (x = 5, import m) is compiled straight from
 * its source; every other cell goes through the AST. Both give the same results: the last
 * expression's value and only its value, `_`, errors trimmed to the user's code, and
 * sys.displayhook never touched (a cell's own 'single' compile still prints through it). */
static void one_line_statements_give_what_the_ast_path_gives(void **state)
{
    (void)state;
    struct drv d;
    drv_start(&d, NULL, 1 << 20);
    expect_ok(run(&d, "x = 5"), NULL);
    expect_ok(run(&d, "x"), "5");
    expect_ok(run(&d, "7\n"), "7");
    expect_ok(run(&d, "_ + 1"), "8");
    expect_ok(run(&d, "x += 1"), NULL);
    expect_ok(run(&d, "_"), "8"); /* a statement leaves _ alone */
    expect_ok(run(&d, "print('p')"), NULL);
    expect_ok(run(&d, "1; 2"), "2");
    expect_ok(run(&d, "for i in range(3): i"), NULL);
    expect_ok(run(&d, "[x, 6][0:1]"), "[6]");
    json_t *r = run(&d, "y = undefined_name");
    assert_string_equal(err_at(r, "type"), "NameError");
    assert_non_null(strstr(err_at(r, "traceback"), "\"<cell-11>\", line 1, in <module>"));
    assert_null(strstr(err_at(r, "traceback"), "run_python"));
    json_decref(r);
    clear_output(&d);
    expect_ok(run(&d, "z = exec(compile('5', 'c', 'single'))"), NULL);
    assert_non_null(strstr(outbuf, "5\n"));
    expect_ok(run(&d, "import sys"), NULL);
    expect_ok(run(&d, "getattr(sys, 'display' + 'hook') is sys.__displayhook__"), "True");
    /* Nesting too deep to parse is the cell's error, not the driver's. */
    char deep[4 + 4000 + 2] = "w = ";
    memset(deep + 4, '-', 4000);
    memcpy(deep + 4 + 4000, "1", 2);
    r = run(&d, deep);
    assert_false(json_is_true(json_object_get(r, "success")));
    assert_string_equal(err_at(r, "type"), "RecursionError");
    json_decref(r);
    expect_ok(run(&d, "x"), "6");
    assert_true(WIFEXITED(drv_stop(&d)));
}

/* A repr or an error past max_text_bytes (64 KiB unless init says) keeps its head and tail and
 * says so; uncut, the frame could pass the channel's limit, and the driver would be restarted. */
static void long_results_and_errors_keep_head_and_tail(void **state)
{
    (void)state;
    struct drv d;
    drv_start(&d, NULL, 1 << 20);
    json_t *r = run(&d, "list(range(10**6))");
    const char *res = str_at(r, "result");
    assert_non_null(res);
    assert_true(strlen(res) < 64 * 1024 + 100);
    assert_true(strncmp(res, "[0, 1, 2, ", 10) == 0);
    assert_non_null(strstr(res, "characters omitted"));
    assert_string_equal(res + strlen(res) - 8, " 999999]");
    assert_true(json_is_true(json_object_get(r, "truncated")));
    json_decref(r);
    r = run(&d, "1 + 1");
    assert_null(json_object_get(r, "truncated"));
    expect_ok(r, "2");
    r = run(&d, "raise ValueError('x' * 200000)");
    assert_false(json_is_true(json_object_get(r, "success")));
    assert_true(strlen(err_at(r, "message")) < 64 * 1024 + 100);
    assert_non_null(strstr(err_at(r, "traceback"), "characters omitted"));
    assert_true(json_is_true(json_object_get(r, "truncated")));
    json_decref(r);
    expect_ok(run(&d, "len(str(list(range(10))))"), "30");
    assert_true(WIFEXITED(drv_stop(&d)));
}

/* The build's bytecode is for the build's Python; another version compiles the source, and the
 * driver works the same. */
static void bytecode_for_another_python_falls_back_to_the_source(void **state)
{
    (void)state;
    struct drv d;
    drv_launch(&d, NULL, 1 << 20, true);
    expect_ok(run(&d, "x = 20\nx * 2 + 2"), "42");
    assert_true(WIFEXITED(drv_stop(&d)));
}

static void exceptions_are_trimmed_to_user_code(void **state)
{
    (void)state;
    struct drv d;
    drv_start(&d, NULL, 1 << 20);
    expect_ok(run(&d, "def g(n):\n    return 10 // n"), NULL);
    json_t *r = run(&d, "a = 1\ng(0)");
    assert_true(json_is_false(json_object_get(r, "success")));
    assert_string_equal(err_at(r, "type"), "ZeroDivisionError");
    assert_string_equal(err_at(r, "message"), "integer division or modulo by zero");
    const char *tb = err_at(r, "traceback");
    assert_non_null(strstr(tb, "\"<cell-2>\", line 2"));
    assert_non_null(strstr(tb, "g(0)"));
    assert_non_null(strstr(tb, "\"<cell-1>\", line 2, in g"));
    assert_non_null(strstr(tb, "return 10 // n"));
    assert_null(strstr(tb, "mcp-sandbox driver"));
    assert_null(strstr(tb, "run_python"));
    json_decref(r);

    r = run(&d, "x = 1\nif x:\nprint(x)");
    assert_true(json_is_false(json_object_get(r, "success")));
    assert_string_equal(err_at(r, "type"), "IndentationError");
    assert_non_null(strstr(err_at(r, "traceback"), "line 3"));
    json_decref(r);
    r = run(&d, "1 +* 2");
    assert_string_equal(err_at(r, "type"), "SyntaxError");
    assert_non_null(strstr(err_at(r, "traceback"), "\"<cell-4>\", line 1"));
    json_decref(r);
    /* the failed cells changed nothing */
    expect_ok(run(&d, "a"), "1");
    assert_true(WIFEXITED(drv_stop(&d)));
}

/* The cells whose sources the driver holds, then those in linecache (the asking cell left out). */
#define KEPT_SOURCES                                                                               \
    "import gc, sys\n"                                                                             \
    "drv = [o for o in gc.get_objects() if type(o).__name__ == 'Driver'][0]\n"                     \
    "lc = sys.modules.get('linecache')\n"                                                          \
    "mine = '<cell-%d>' % drv.cell\n"                                                              \
    "out = repr((sorted(k for k in drv.sources if k != mine), sorted(k for k in (lc.cache if lc "  \
    "else ()) if k.startswith('<cell-') and k != mine)))\n"                                        \
    "del drv, lc, mine\n"                                                                          \
    "out"

/* A cell's source is kept while code it defined can run, and only then: kept for every cell, a
 * long session's memory and each error's time grew with the whole history. */
static void sources_are_kept_while_their_code_lives(void **state)
{
    (void)state;
    struct drv d;
    drv_start(&d, NULL, 1 << 20);
    expect_ok(run(&d, "def f(n):\n    return 10 // n"), NULL);                     /* cell 1 */
    expect_ok(run(&d, "class K:\n    def m(self):\n        return 1 // 0"), NULL); /* cell 2 */
    expect_ok(run(&d, "it = (10 // v for v in [1, 0])"), NULL);                    /* cell 3 */
    for (int i = 0; i < 30; i++)
        expect_ok(run(&d, i % 2 ? "x = 1" : "y = [v * 2 for v in range(3)]\ny"),
                  i % 2 ? NULL : "[0, 2, 4]");
    json_t *r = run(&d, "1 / 0"); /* an error of its own: linecache gets every kept source */
    assert_string_equal(err_at(r, "type"), "ZeroDivisionError");
    json_decref(r);
    expect_ok(run(&d, KEPT_SOURCES), "\"(['<cell-1>', '<cell-2>', '<cell-3>'], ['<cell-1>', "
                                     "'<cell-2>', '<cell-3>'])\"");
    /* What the kept sources are for: a later failure shows the line that failed. */
    r = run(&d, "f(0)");
    assert_non_null(strstr(err_at(r, "traceback"), "return 10 // n"));
    json_decref(r);
    r = run(&d, "K().m()");
    assert_non_null(strstr(err_at(r, "traceback"), "return 1 // 0"));
    json_decref(r);
    expect_ok(run(&d, "next(it)"), "10");
    r = run(&d, "next(it)");
    assert_non_null(strstr(err_at(r, "traceback"), "10 // v for v in"));
    json_decref(r);
    /* Gone with what they defined; a function still reachable keeps its cell. */
    expect_ok(run(&d, "g = f\ndel f, K, it\nimport gc; gc.collect()\nNone"), NULL);
    expect_ok(run(&d, KEPT_SOURCES), "\"(['<cell-1>'], ['<cell-1>'])\"");
    expect_ok(run(&d, "del g"), NULL);
    expect_ok(run(&d, KEPT_SOURCES), "'([], [])'");
    /* A saved exception holds its cells' frames: their lines still show when it is raised. */
    expect_ok(run(&d, "try:\n    1 / 0\nexcept Exception as e:\n    err = e"), NULL); /* 44 */
    r = run(&d, "raise err");                                                         /* 45 */
    assert_non_null(strstr(err_at(r, "traceback"), "1 / 0"));
    json_decref(r);
    expect_ok(run(&d, KEPT_SOURCES),
              "\"(['<cell-44>', '<cell-45>'], ['<cell-44>', '<cell-45>'])\"");
    expect_ok(run(&d, "del err"), NULL);
    expect_ok(run(&d, KEPT_SOURCES), "'([], [])'");
    assert_true(WIFEXITED(drv_stop(&d)));
}

static void interrupt_and_exit_do_not_end_the_driver(void **state)
{
    (void)state;
    struct drv d;
    drv_start(&d, NULL, 1 << 20);
    /* idle SIGINT is harmless */
    kill(d.pid, SIGINT);
    usleep(50000);
    expect_ok(run(&d, "y = 5\ny"), "5");

    send_frame(&d, json_pack("{s:s, s:i, s:s, s:s}", "op", "exec", "id", 100, "language", "python",
                             "code", "import time\nprint('go', flush=True)\ntime.sleep(30)"));
    /* wait until the cell runs, then interrupt it */
    struct pollfd p = {.fd = d.out, .events = POLLIN};
    assert_int_equal(poll(&p, 1, 10000), 1);
    kill(d.pid, SIGINT);
    json_t *r = recv_frame(&d, 10000);
    assert_non_null(r);
    assert_true(json_is_false(json_object_get(r, "success")));
    assert_true(json_is_true(json_object_get(r, "interrupted")));
    assert_string_equal(err_at(r, "type"), "KeyboardInterrupt");
    json_decref(r);
    expect_ok(run(&d, "y + 1"), "6");

    r = run(&d, "import sys\nsys.exit(3)");
    assert_true(json_is_false(json_object_get(r, "success")));
    assert_int_equal(json_integer_value(json_object_get(r, "exit_code")), 3);
    assert_string_equal(err_at(r, "type"), "SystemExit");
    json_decref(r);
    r = run(&d, "raise SystemExit");
    assert_true(json_is_true(json_object_get(r, "success")));
    assert_int_equal(json_integer_value(json_object_get(r, "exit_code")), 0);
    json_decref(r);
    expect_ok(run(&d, "y"), "5");
    assert_true(WIFEXITED(drv_stop(&d)));
}

/* The server interrupts an execution once it has sent it, which may be before the driver has
 * read all of it (a large cell) or started its code: that interrupt is the execution's, and
 * must not be taken for a late one meant for the run before. Dropped, the code ran on until
 * the server's grace ran out and it killed the interpreter, with every variable. */
static void an_interrupt_while_the_request_arrives_is_kept(void **state)
{
    (void)state;
    struct drv d;
    drv_start(&d, NULL, 1 << 20);
    expect_ok(run(&d, "kept = 7"), NULL);
    /* After a run, an interrupt with no request coming is moot. */
    kill(d.pid, SIGINT);
    usleep(50000);
    expect_ok(run(&d, "kept"), "7");

    char *buf = NULL;
    size_t len = 0;
    json_t *req = json_pack("{s:s, s:i, s:s, s:s}", "op", "exec", "id", ++d.next_id, "language",
                            "python", "code",
                            "import time\nt = time.time()\nwhile time.time() - t < 20:\n"
                            "    time.sleep(0.01)\nkept = 0");
    assert_int_equal(channel_encode(req, &buf, &len), 0);
    json_decref(req);
    /* Half the frame now, the interrupt while the driver waits for the rest, then the rest. */
    assert_int_equal(write_all(d.req, buf, len / 2), 0);
    usleep(100000);
    kill(d.pid, SIGINT);
    usleep(100000);
    assert_int_equal(write_all(d.req, buf + len / 2, len - len / 2), 0);
    free(buf);
    json_t *r = recv_frame(&d, 5000);
    assert_non_null(r);
    assert_true(json_is_true(json_object_get(r, "interrupted")));
    assert_string_equal(err_at(r, "type"), "KeyboardInterrupt");
    json_decref(r);
    drain_output(&d);
    /* Consumed by that run: the next one runs whole. */
    expect_ok(run(&d, "kept"), "7");
    assert_true(WIFEXITED(drv_stop(&d)));
}

static void output_is_flushed_before_the_result(void **state)
{
    (void)state;
    struct drv d;
    drv_start(&d, NULL, 1 << 20);
    json_t *r =
        run(&d, "import sys\nprint('hello')\nsys.stderr.write('oops\\n')\nprint('x', end='')");
    json_decref(r);
    assert_string_equal(outbuf, "hello\nx");
    assert_string_equal(errbuf, "oops\n");
    clear_output(&d);
    r = run(&d, "input()");
    assert_string_equal(err_at(r, "type"), "EOFError");
    json_decref(r);
    /* Printed after the code closed fd 1: never in the next run's output (once the driver
     * restores the fd, whatever the failed flush left in the buffer would come out there). */
    clear_output(&d);
    expect_ok(run(&d, "import os\nos.close(1)\nprint('after the close')"), NULL);
    clear_output(&d);
    expect_ok(run(&d, "print('next')"), NULL);
    assert_string_equal(outbuf, "next\n");
    assert_true(WIFEXITED(drv_stop(&d)));
}

static void figures_come_back_as_png(void **state)
{
    (void)state;
    struct drv d;
    drv_start(&d, NULL, 1 << 20);
    /* nothing imports matplotlib on the user's behalf */
    expect_ok(run(&d, "import sys\n'matplotlib' in sys.modules"), "False");
    json_t *r = run(&d, "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.show()\n"
                        "plt.figure()\nplt.bar([1], [2])\n'done'");
    assert_true(json_is_true(json_object_get(r, "success")));
    json_t *imgs = json_object_get(r, "images");
    assert_int_equal(json_array_size(imgs), 2);
    assert_string_equal(json_string_value(json_object_get(json_array_get(imgs, 0), "mime")),
                        "image/png");
    /* base64 of the PNG signature */
    assert_true(strncmp(json_string_value(json_object_get(json_array_get(imgs, 0), "data")),
                        "iVBORw0KGgo", 11) == 0);
    json_decref(r);
    /* figures are closed after being returned */
    r = run(&d, "len(plt.get_fignums())");
    assert_string_equal(str_at(r, "result"), "0");
    assert_int_equal(json_array_size(json_object_get(r, "images")), 0);
    json_decref(r);
    assert_true(WIFEXITED(drv_stop(&d)));

    /* too big to inline: saved under figures_dir/figures */
    drv_start(&d, NULL, 100);
    r = run(&d, "import matplotlib.pyplot as plt\nplt.plot([1, 2])");
    assert_int_equal(json_array_size(json_object_get(r, "images")), 0);
    json_t *files = json_object_get(r, "image_files");
    assert_int_equal(json_array_size(files), 1);
    const char *path = json_string_value(json_array_get(files, 0));
    char want[128];
    snprintf(want, sizeof(want), "%s/.mcp/figures/fig-1-1.png", d.ws);
    assert_string_equal(path, want);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_true(st.st_size > 100);
    json_decref(r);
    assert_true(WIFEXITED(drv_stop(&d)));

    /* Only the newest 16 saved figures stay, counting those already there when the interpreter
     * started (an earlier one's); other files are left alone. */
    drv_start(&d, NULL, 100);
    expect_ok(run(&d, "import os\n"
                      "d = os.path.join(os.environ['HOME'], '.mcp', 'figures')\n"
                      "os.makedirs(d)\n"
                      "for i in range(20):\n"
                      "    p = os.path.join(d, 'fig-old-%02d.png' % i)\n"
                      "    open(p, 'wb').close()\n"
                      "    os.utime(p, ns=(i * 10**9, i * 10**9))\n"
                      "open(os.path.join(d, 'mine.txt'), 'w').close()"),
              NULL);
    for (int i = 0; i < 3; i++) {
        r = run(&d, "import matplotlib.pyplot as plt\nplt.plot([1])\nplt.figure()\nplt.plot([2])");
        assert_int_equal(json_array_size(json_object_get(r, "image_files")), 2);
        json_decref(r);
    }
    expect_ok(run(&d, "names = os.listdir(d)\n"
                      "old = sorted(n for n in names if n.startswith('fig-old-'))\n"
                      "new = [n for n in names if n.startswith('fig-') and n not in old]\n"
                      "len(old), old[0], len(new), 'mine.txt' in names"),
              "(10, 'fig-old-10.png', 6, True)");
    /* A run that saves more than 16 keeps all of its own (its result links them). */
    r = run(&d, "for i in range(20):\n    plt.figure()\n    plt.plot([i])");
    json_t *saved = json_object_get(r, "image_files");
    assert_int_equal(json_array_size(saved), 20);
    for (size_t i = 0; i < json_array_size(saved); i++)
        assert_int_equal(access(json_string_value(json_array_get(saved, i)), F_OK), 0);
    json_decref(r);
    expect_ok(run(&d, "sorted(n for n in os.listdir(d) if n.startswith('fig-')) == "
                      "sorted('fig-%d-%d.png' % (6, i + 1) for i in range(20))"),
              "True");
    assert_true(WIFEXITED(drv_stop(&d)));
}

static void changed_files_are_reported(void **state)
{
    (void)state;
    struct drv d;
    drv_start(&d, NULL, 1 << 20);
    json_t *r = run(&d, "import os\nos.makedirs('sub', exist_ok=True)\n"
                        "open('sub/b.txt', 'w').write('b')\nopen('a.csv', 'w').write('1,2')\n"
                        "os.makedirs('.cache', exist_ok=True)\nopen('.cache/x', 'w').write('x')");
    json_t *files = json_object_get(r, "files");
    assert_int_equal(json_array_size(files), 2);
    char a[128], b[128];
    snprintf(a, sizeof(a), "%s/a.csv", d.ws);
    snprintf(b, sizeof(b), "%s/sub/b.txt", d.ws);
    assert_string_equal(json_string_value(json_array_get(files, 0)), a);
    assert_string_equal(json_string_value(json_array_get(files, 1)), b);
    json_decref(r);
    r = run(&d, "x = 1");
    assert_int_equal(json_array_size(json_object_get(r, "files")), 0);
    json_decref(r);
    r = run(&d, "open('a.csv', 'a').write(',3')");
    files = json_object_get(r, "files");
    assert_int_equal(json_array_size(files), 1);
    assert_string_equal(json_string_value(json_array_get(files, 0)), a);
    json_decref(r);
    /* bash changes count too */
    r = run_lang(&d, "bash", "echo z > z.txt", NULL);
    assert_int_equal(json_array_size(json_object_get(r, "files")), 1);
    json_decref(r);
    r = run(&d, "for i in range(30): open('f%02d' % i, 'w').write('x')");
    assert_int_equal(json_array_size(json_object_get(r, "files")), 20);
    json_decref(r);
    assert_true(WIFEXITED(drv_stop(&d)));
}

static void tight_guard_rejects_before_running(void **state)
{
    (void)state;
    struct drv d;
    json_t *guard =
        json_pack("{s:[s,s], s:[s,s,s], s:[s,s]}", "modules", "os", "subprocess", "calls", "eval",
                  "exec", "open", "attributes", "__subclasses__", "__globals__");
    drv_start(&d, guard, 1 << 20);
    static const struct {
        const char *code, *why;
    } cases[] = {
        {"import os", "import of module 'os'"},
        {"import os.path", "import of module 'os'"},
        {"from subprocess import run", "import of module 'subprocess'"},
        {"eval('1')", "call of 'eval'"},
        {"import builtins\nbuiltins.exec('1')", "call of 'exec'"},
        {"().__class__.__base__.__subclasses__()", "attribute '__subclasses__'"},
        {"getattr(f, '__globals__')", "attribute '__globals__'"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        json_t *r = run(&d, cases[i].code);
        assert_true(json_is_false(json_object_get(r, "success")));
        char want[256];
        snprintf(want, sizeof(want), "rejected by policy (profile tight): %s", cases[i].why);
        assert_string_equal(str_at(r, "rejected"), want);
        json_decref(r);
    }
    /* Code nested past what the guard's walk can follow is refused, not run unchecked. */
    char deep[4 + 700 + 2] = "w = ";
    memset(deep + 4, '-', 700);
    memcpy(deep + 4 + 700, "1", 2);
    json_t *r = run(&d, deep);
    assert_true(json_is_false(json_object_get(r, "success")));
    assert_non_null(str_at(r, "rejected"));
    assert_non_null(strstr(str_at(r, "rejected"), "nested too deeply to check"));
    json_decref(r);
    /* a rejected cell ran nothing; allowed code runs */
    expect_ok(run(&d, "import math\nx = math.sqrt(16)\nx"), "4.0");
    expect_ok(run(&d, "'os' in dir()"), "False");
    assert_true(WIFEXITED(drv_stop(&d)));
}

static void bash_runs_in_its_own_group(void **state)
{
    (void)state;
    struct drv d;
    drv_start(&d, NULL, 1 << 20);
    json_t *r = run_lang(&d, "bash", "echo out; echo err >&2; exit 3", NULL);
    assert_true(json_is_false(json_object_get(r, "success")));
    assert_int_equal(json_integer_value(json_object_get(r, "exit_code")), 3);
    assert_string_equal(outbuf, "out\n");
    assert_string_equal(errbuf, "err\n");
    json_decref(r);
    clear_output(&d);
    char sub[128];
    snprintf(sub, sizeof(sub), "%s/sub", d.ws);
    assert_int_equal(mkdir(sub, 0755), 0);
    r = run_lang(&d, "bash", "pwd; read x; echo \"read=$?\"; kill -9 $$", sub);
    assert_int_equal(json_integer_value(json_object_get(r, "exit_code")), 128 + 9);
    char want[192];
    snprintf(want, sizeof(want), "%s\nread=1\n", sub);
    assert_string_equal(outbuf, want);
    json_decref(r);
    clear_output(&d);
    r = run_lang(&d, "bash", "test \"$(ps -o pgid= $$)\" -eq $$ && echo leader", NULL);
    assert_true(json_is_true(json_object_get(r, "success")));
    assert_string_equal(outbuf, "leader\n");
    json_decref(r);

    /* SIGINT reaches the command's group; one that ignores it is killed after a grace */
    static const char *const cmds[] = {"echo go; sleep 30", "trap '' INT; echo go; sleep 30"};
    for (int i = 0; i < 2; i++) {
        clear_output(&d);
        send_frame(&d, json_pack("{s:s, s:i, s:s, s:s}", "op", "exec", "id", 200 + i, "language",
                                 "bash", "code", cmds[i]));
        struct pollfd p = {.fd = d.out, .events = POLLIN};
        assert_int_equal(poll(&p, 1, 10000), 1);
        uint64_t t0 = now_ns();
        kill(d.pid, SIGINT);
        r = recv_frame(&d, 10000);
        uint64_t dt = now_ns() - t0;
        assert_non_null(r);
        assert_true(json_is_true(json_object_get(r, "interrupted")));
        assert_true(json_is_false(json_object_get(r, "success")));
        assert_int_equal(json_integer_value(json_object_get(r, "exit_code")), 128 + (i ? 9 : 2));
        assert_true(dt < 5000000000u);
        json_decref(r);
    }
    /* python is untouched by bash's cwd */
    expect_ok(run(&d, "import os\nos.getcwd() == os.environ['HOME']"), "True");
    assert_true(WIFEXITED(drv_stop(&d)));
}

static void a_composed_command_gets_exactly_its_own_environment(void **state)
{
    (void)state;
    struct drv d;
    drv_start(&d, NULL, 1 << 20);
    /* user code changes the interpreter's environment; a composed command must not see it */
    expect_ok(run(&d, "import os\nos.environ['PIP_FIND_LINKS'] = '/workspace/evil'\n1"), "1");
    clear_output(&d);
    int id = ++d.next_id;
    send_frame(&d, json_pack("{s:s, s:i, s:s, s:s, s:s, s:[s,s,s], s:{s:s, s:s}}", "op", "exec",
                             "id", id, "language", "pip", "code", "pip install x", "cwd", "/",
                             "argv", "/bin/sh", "-c", "echo \"$FOO|$PIP_FIND_LINKS|$(pwd)\"", "env",
                             "FOO", "bar", "PATH", "/usr/bin:/bin"));
    json_t *r = recv_frame(&d, 30000);
    assert_non_null(r);
    assert_int_equal(json_integer_value(json_object_get(r, "id")), id);
    assert_true(json_is_true(json_object_get(r, "success")));
    drain_output(&d);
    assert_string_equal(outbuf, "bar||/\n");
    json_decref(r);
    assert_true(WIFEXITED(drv_stop(&d)));
}

static void packages_and_control_ops(void **state)
{
    (void)state;
    struct drv d;
    drv_start(&d, NULL, 1 << 20);
    char path[160];
    snprintf(path, sizeof(path), "%s/.packages/sbxpkg_demo.py", d.ws);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("VALUE = 7\n", f);
    fclose(f);
    /* a .pth file adds another directory once imports are refreshed */
    snprintf(path, sizeof(path), "%s/.packages/extra", d.ws);
    assert_int_equal(mkdir(path, 0755), 0);
    snprintf(path, sizeof(path), "%s/.packages/extra/sbxpkg_other.py", d.ws);
    f = fopen(path, "w");
    fputs("VALUE = 8\n", f);
    fclose(f);
    snprintf(path, sizeof(path), "%s/.packages/demo.pth", d.ws);
    f = fopen(path, "w");
    fputs("extra\n", f);
    fclose(f);
    send_frame(&d, json_pack("{s:s, s:i}", "op", "refresh_imports", "id", 50));
    json_t *r = recv_frame(&d, 10000);
    assert_string_equal(str_at(r, "op"), "refreshed");
    assert_int_equal(json_integer_value(json_object_get(r, "id")), 50);
    json_decref(r);
    expect_ok(run(&d, "import sbxpkg_demo, sbxpkg_other\nsbxpkg_demo.VALUE + sbxpkg_other.VALUE"),
              "15");

    send_frame(&d, json_pack("{s:s, s:i}", "op", "ping", "id", 51));
    r = recv_frame(&d, 10000);
    assert_string_equal(str_at(r, "op"), "pong");
    assert_int_equal(json_integer_value(json_object_get(r, "id")), 51);
    json_decref(r);
    send_frame(&d, json_pack("{s:s, s:i}", "op", "frobnicate", "id", 52));
    r = recv_frame(&d, 10000);
    assert_string_equal(str_at(r, "op"), "error");
    assert_int_equal(json_integer_value(json_object_get(r, "id")), 52);
    json_decref(r);
    expect_ok(run(&d, "1 + 1"), "2");
    clear_output(&d);

    /* a malformed frame ends the driver with a word on stderr */
    const char garbage[] = "\0\0\0\5[1,2]";
    assert_int_equal(write_all(d.req, garbage, sizeof(garbage) - 1), 0);
    assert_null(recv_frame(&d, 10000));
    int st = 0;
    assert_int_equal(waitpid(d.pid, &st, 0), d.pid);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) != 0);
    drain_output(&d);
    assert_non_null(strstr(errbuf, "frame is not an object"));
    d.pid = -1;
    drv_stop(&d);
}

static void eof_on_the_channel_ends_the_driver(void **state)
{
    (void)state;
    struct drv d;
    drv_start(&d, NULL, 1 << 20);
    close(d.req);
    int st = 0;
    assert_int_equal(waitpid(d.pid, &st, 0), d.pid);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) != 0);
    usleep(1000);
    errlen = 0;
    drain_fd(d.err, errbuf, sizeof(errbuf), &errlen);
    assert_non_null(strstr(errbuf, "closed the channel"));
    d.req = -1, d.pid = -1;
    drv_stop(&d);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static uint64_t median_round_trip(struct drv *d, const char *code, int n)
{
    uint64_t *t = calloc((size_t)n, sizeof(*t));
    assert_non_null(t);
    for (int i = 0; i < n; i++) {
        uint64_t t0 = now_ns();
        json_t *r = run(d, code);
        t[i] = now_ns() - t0;
        assert_true(json_is_true(json_object_get(r, "success")));
        json_decref(r);
        outlen = errlen = 0;
    }
    qsort(t, (size_t)n, sizeof(*t), cmp_u64);
    uint64_t m = t[n / 2];
    free(t);
    return m;
}

/* Timing is printed for the report, never asserted: these machines are noisy. */
static void round_trip_timing(void **state)
{
    (void)state;
    struct drv d;
    drv_start(&d, NULL, 1 << 20);
    uint64_t m1 = median_round_trip(&d, "x=1", 10000);
    uint64_t m2 = median_round_trip(&d, "for i in range(100): print(i)", 1000);
    printf("# round trip median, x=1 (10000 calls): %.1f us\n", (double)m1 / 1e3);
    printf("# round trip median, print 100 lines (1000 calls): %.1f us\n", (double)m2 / 1e3);
    assert_true(WIFEXITED(drv_stop(&d)));
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(globals_persist_and_last_expression_is_the_result),
        cmocka_unit_test(one_line_statements_give_what_the_ast_path_gives),
        cmocka_unit_test(bytecode_for_another_python_falls_back_to_the_source),
        cmocka_unit_test(long_results_and_errors_keep_head_and_tail),
        cmocka_unit_test(exceptions_are_trimmed_to_user_code),
        cmocka_unit_test(sources_are_kept_while_their_code_lives),
        cmocka_unit_test(interrupt_and_exit_do_not_end_the_driver),
        cmocka_unit_test(an_interrupt_while_the_request_arrives_is_kept),
        cmocka_unit_test(output_is_flushed_before_the_result),
        cmocka_unit_test(figures_come_back_as_png),
        cmocka_unit_test(changed_files_are_reported),
        cmocka_unit_test(tight_guard_rejects_before_running),
        cmocka_unit_test(bash_runs_in_its_own_group),
        cmocka_unit_test(a_composed_command_gets_exactly_its_own_environment),
        cmocka_unit_test(packages_and_control_ops),
        cmocka_unit_test(eof_on_the_channel_ends_the_driver),
        cmocka_unit_test(round_trip_timing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
