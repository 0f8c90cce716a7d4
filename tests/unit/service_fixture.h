/* A real loop, protocol server and sandbox service for the tests that go through the service
 * (cmocka group setup and teardown). The state directory is a fresh one under /tmp; the warm
 * pool is off, so every sandbox is made when asked for. */
#ifndef SBX_TEST_SERVICE_FIXTURE_H
#define SBX_TEST_SERVICE_FIXTURE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "jail/jail.h"
#include "protocol/mcp.h"
#include "service/loop.h"
#include "service/sandbox.h"
#include "util.h"

/* The state letter of /proc/PID/stat ('T' when stopped), or 0. */
static inline char proc_state(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    char *text = NULL;
    size_t len = 0;
    if (read_file_max(path, 4096, &text, &len) < 0)
        return 0;
    const char *close_paren = strrchr(text, ')');
    char state = close_paren && close_paren[1] == ' ' ? close_paren[2] : 0;
    free(text);
    return state;
}

static struct ev_loop *loop;
static struct sbx_config cfg;
static struct mcp_server *srv;
static struct sandbox_service *svc;
static char state_dir[64];

static void stop_loop(struct ev_loop *l, void *data)
{
    (void)data;
    ev_loop_stop(l);
}

/* Serves the loop for ms milliseconds. */
static void run_loop_ms(int ms)
{
    ev_timer_add(loop, ms, stop_loop, NULL);
    ev_loop_run(loop);
}

static int service_setup(void **state)
{
    (void)state;
    snprintf(state_dir, sizeof(state_dir), "/tmp/sbx-test-XXXXXX");
    if (!mkdtemp(state_dir))
        return -1;
    config_init_defaults(&cfg);
    cfg.state_dir = strdup(state_dir);
    cfg.profiles[0].pool_size = 0;
    struct sbx_err err = {0};
    struct mcp_server_opts o = {.cfg = &cfg, .transport_name = "test"};
    if (ev_loop_new(&loop, &err) < 0 || mcp_server_new(loop, &o, &srv, &err) < 0 ||
        sandbox_service_new(loop, srv, &cfg, &svc, &err) < 0) {
        fprintf(stderr, "setup: %s\n", err.msg);
        return -1;
    }
    return 0;
}

static int service_teardown(void **state)
{
    (void)state;
    sandbox_service_free(svc);
    mcp_server_free(srv);
    ev_loop_free(loop);
    jail_shutdown();
    config_free(&cfg);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", state_dir);
    return system(cmd) == 0 ? 0 : -1;
}

#endif
