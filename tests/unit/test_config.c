/* The TOML subset and the configuration layers: what is accepted, what is refused (with the
 * exact line:column), precedence default < file < env < flag, and a --print round trip. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <unistd.h>

#include "lib/config.h"
#include "lib/toml.h"
#include "lib/util.h"

static char *write_tmp(const char *text)
{
    char *path = strdup("/tmp/sbx-config-test-XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    return path;
}

static int load_text(struct sbx_config *cfg, const char *text, struct sbx_err *err)
{
    char *path = write_tmp(text);
    config_init_defaults(cfg);
    int r = config_load_file(cfg, path, err);
    unlink(path);
    free(path);
    return r;
}

/* config_check's verdict on text loaded over the defaults (the load itself must succeed); the
 * reason stays in err. */
static int check_text(const char *text, struct sbx_err *err)
{
    struct sbx_config cfg;
    assert_int_equal(load_text(&cfg, text, err), 0);
    int r = config_check(&cfg, err);
    config_free(&cfg);
    return r;
}

/* The two value parsers the config file and `run`'s flags share. */
static void sizes_and_cpu_counts(void **state)
{
    (void)state;
    uint64_t v = 0;
    assert_int_equal(parse_size("256M", &v), 0);
    assert_int_equal(v, 256ull << 20);
    assert_int_equal(parse_size("1024", &v), 0);
    assert_int_equal(v, 1024);
    assert_int_equal(parse_size(" -1", &v), -EINVAL); /* strtoull would give 2^64 - 1 */
    assert_int_equal(parse_size("-1", &v), -EINVAL);
    assert_int_equal(parse_size("+5M", &v), -EINVAL);
    assert_int_equal(parse_size("5MiB", &v), 0);
    assert_int_equal(v, 5ull << 20);
    assert_int_equal(parse_size("5Mx", &v), -EINVAL);
    /* run's limits go to 1T: both spellings are taken (1T was refused as out of range). */
    assert_int_equal(parse_size("1T", &v), 0);
    assert_int_equal(v, 1ull << 40);
    assert_int_equal(parse_size("1024G", &v), 0);
    assert_int_equal(v, 1ull << 40);
    assert_int_equal(parse_size("16777216T", &v), -ERANGE);
    assert_int_equal(parse_size("", &v), -EINVAL);
    uint32_t m = 0;
    assert_int_equal(parse_cpus("0.5", 10, 1024000, &m), 0);
    assert_int_equal(m, 500);
    assert_int_equal(parse_cpus("0.01", 10, 1024000, &m), 0);
    assert_int_equal(m, 10);
    assert_int_equal(parse_cpus("0.005", 10, 1024000, &m), -EINVAL); /* no limit at all */
    assert_int_equal(parse_cpus("nan", 10, 1024000, &m), -EINVAL);
    assert_int_equal(parse_cpus("-nan", 10, 1024000, &m), -EINVAL);
    assert_int_equal(parse_cpus("1e9", 10, 1024000, &m), -EINVAL);
    assert_int_equal(parse_cpus("0.5x", 10, 1024000, &m), -EINVAL);
    assert_int_equal(parse_cpus("", 10, 1024000, &m), -EINVAL);
    /* A plain decimal only: strtod's other forms are no CPU count. */
    assert_int_equal(parse_cpus("0x1", 10, 1024000, &m), -EINVAL);
    assert_int_equal(parse_cpus("1e3", 10, 1024000, &m), -EINVAL);
    assert_int_equal(parse_cpus(" 1", 10, 1024000, &m), -EINVAL);
    assert_int_equal(parse_cpus("+1", 10, 1024000, &m), -EINVAL);
    assert_int_equal(parse_cpus(".", 10, 1024000, &m), -EINVAL);
    assert_int_equal(parse_cpus("1.", 10, 1024000, &m), 0);
    assert_int_equal(m, 1000);
    assert_int_equal(parse_cpus(".25", 10, 1024000, &m), 0);
    assert_int_equal(m, 250);
}

/* An added profile takes what it does not set from standard as it finally stands, whatever
 * the order of the tables; a default profile that does not exist is refused. */
static void added_profiles_follow_standard_and_the_default_must_exist(void **state)
{
    (void)state;
    struct sbx_config cfg;
    struct sbx_err err = {0};
    config_init_defaults(&cfg);
    char path[] = "/tmp/sbx-cfg-order-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    const char *toml = "[profiles.mine]\ncpus = \"0.25\"\n[profiles.standard]\nmemory = \"64M\"\n";
    assert_int_equal(write(fd, toml, strlen(toml)), (ssize_t)strlen(toml));
    close(fd);
    assert_int_equal(config_load_file(&cfg, path, &err), 0);
    assert_int_equal(config_check(&cfg, &err), 0);
    const struct sbx_profile *p = config_profile(&cfg, "mine");
    assert_non_null(p);
    assert_int_equal(p->memory_bytes, 64ull << 20); /* standard's, set after mine's table */
    assert_int_equal(p->cpu_millicpus, 250);        /* its own */
    assert_int_equal(config_profile(&cfg, "tight")->memory_bytes, 128ull << 20);
    assert_int_equal(config_set(&cfg, "isolation.default_profile", "nope", CONFIG_SRC_FLAG, &err),
                     0);
    assert_int_equal(config_check(&cfg, &err), -1);
    assert_non_null(strstr(err.msg, "names no profile"));
    unlink(path);
    config_free(&cfg);
}

/* A profile's table with no keys in it still defines the profile, as standard finally stands;
 * a table that is no section, or a bad profile name, is refused at its header. */
static void an_empty_profile_table_defines_the_profile(void **state)
{
    (void)state;
    struct sbx_config cfg;
    struct sbx_err err = {0};
    assert_int_equal(
        load_text(&cfg, "[profiles.quick]\n\n[profiles.standard]\nmemory = \"64M\"\n", &err), 0);
    assert_int_equal(config_check(&cfg, &err), 0);
    const struct sbx_profile *p = config_profile(&cfg, "quick");
    assert_non_null(p);
    assert_int_equal(p->memory_bytes, 64ull << 20);
    assert_int_equal(p->cpu_millicpus, config_profile(&cfg, "standard")->cpu_millicpus);
    config_free(&cfg);
    assert_int_equal(load_text(&cfg, "[limits]\n[nosuch]\n", &err), -1);
    assert_non_null(strstr(err.msg, ":2:1: unknown table [nosuch]"));
    config_free(&cfg);
    assert_int_equal(load_text(&cfg, "[profiles.Quick]\n", &err), -1);
    assert_non_null(strstr(err.msg, ":1:1: profile name 'Quick'"));
    config_free(&cfg);
    /* The sections keys live in are tables, even empty ones, and so is [profiles]. */
    assert_int_equal(load_text(&cfg, "[http]\n[packages]\n[guard]\n[profiles]\n", &err), 0);
    config_free(&cfg);
}

static void accepts_the_subset(void **state)
{
    (void)state;
    struct sbx_config cfg;
    struct sbx_err err = {0};
    int r = load_text(&cfg,
                      "# comment\n[limits] # trailing\nmax_sandboxes = +1_000\n"
                      "[isolation]\nallow_degraded = true\ndefault_profile = 'tight'\n"
                      "[files]\nupload_roots = [\n  \"/a\\u00e9\", # one\n  '/b',\n]\n"
                      "[\"profiles\".custom]\ncpus = \"1.5\"\nmemory = \"64M\"\n",
                      &err);
    assert_int_equal(r, 0);
    assert_int_equal(cfg.max_sandboxes, 1000);
    assert_true(cfg.allow_degraded);
    assert_string_equal(cfg.default_profile, "tight");
    assert_int_equal(cfg.upload_roots.len, 2);
    assert_string_equal(cfg.upload_roots.items[0], "/a\xc3\xa9");
    const struct sbx_profile *p = config_profile(&cfg, "custom");
    assert_non_null(p);
    assert_int_equal(p->cpu_millicpus, 1500);
    assert_int_equal(p->memory_bytes, 64ull << 20);
    assert_int_equal(p->pids, 64); /* inherited from standard */
    config_free(&cfg);
}

/* A leading byte order mark is skipped; one anywhere else is not whitespace. */
static void a_leading_byte_order_mark_is_skipped(void **state)
{
    (void)state;
    struct sbx_config cfg;
    struct sbx_err err = {0};
    assert_int_equal(load_text(&cfg, "\xEF\xBB\xBF[limits]\nmax_sandboxes = 7\n", &err), 0);
    assert_int_equal(cfg.max_sandboxes, 7);
    config_free(&cfg);
    assert_int_equal(load_text(&cfg, "[limits]\n\xEF\xBB\xBFmax_sandboxes = 7\n", &err), -1);
    assert_non_null(strstr(err.msg, ":2:1:"));
    config_free(&cfg);
}

static void refuses_with_line_and_column(void **state)
{
    (void)state;
    static const struct {
        const char *text, *want;
    } cases[] = {
        {"[limits]\nmax_sandboxes = 1.5\n", ":2:18: only decimal integers"},
        {"[limits]\nmax_sandboxes = 1\nmax_sandboxes = 2\n",
         ":3:1: key 'max_sandboxes' is defined twice"},
        {"[limits]\n[limits]\n", ":2:1: table [limits] is defined twice"},
        {"[limits]\nmax_sandbox = 1\n", ":2:1: unknown configuration key 'limits.max_sandbox'"},
        {"[limits]\nmax_sandboxes = \"x\"\n", ":2:1: limits.max_sandboxes wants an integer"},
        {"[log]\nlevel = \"loud\"\n", "level must be one of"},
        {"[server]\nx = {a = 1}\n", ":2:5: inline tables are not supported"},
        {"a.b = 1\n", ":1:2: dotted keys are not supported"},
        {"[isolation]\nallow_degraded = yes\n", ":2:18: expected a value"},
        {"[files]\nupload_roots = [1]\n", ":2:17: arrays may hold only strings"},
        {"[log]\nfile = \"abc\n", ":2:12: control character or line break"},
        {"[[x]]\n", ":1:1: arrays of tables"},
        {"[limits]\nmax_sandboxes = 0\n", "between 1 and"},
        {"[profiles.tight]\nnetwork = \"everywhere\"\n", "\"none\" or \"packages\""},
        {"[limits]\nmax_sandboxes = 99999999999999999999\n", "integer out of range"},
        {"[log]\nlevel = \"info\" extra\n", ":2:16: unexpected text"},
        /* A lone CR shows as a line break, but would make the rest of the line comment. */
        {"[limits] # max\rmax_sandboxes = 9\n", ":1:15: control character in a comment"},
        {"[files]\nupload_roots = [ # \x1b[2K\n]\n", ":2:20: control character in a comment"},
        {"[limits]\nmax_sandboxes = 5\r", ":2:18: unexpected text"},
        {"[limits]\nmax_sandboxes = 0_1\n", ":2:17: leading zeros"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct sbx_config cfg;
        struct sbx_err err = {0};
        assert_int_equal(load_text(&cfg, cases[i].text, &err), -1);
        if (!strstr(err.msg, cases[i].want))
            fail_msg("case %zu: '%s' lacks '%s'", i, err.msg, cases[i].want);
        config_free(&cfg);
    }
    struct sbx_err err = {0};
    assert_int_equal(toml_parse("a = \"\xff\"\n", 7, "f", NULL, NULL, &err), -1);
    assert_string_equal(err.msg, "f:1:6: not valid UTF-8");
    assert_int_equal(toml_parse("a = 1\nb = \"x\0\"\n", 13, "f", NULL, NULL, &err), -1);
    assert_string_equal(err.msg, "f:2:7: a NUL byte");
    /* CRLF line ends and a tab in a comment are fine. */
    struct sbx_config cfg;
    assert_int_equal(
        load_text(&cfg, "# a\tcomment\r\n[limits] # x\r\nmax_sandboxes = 3 # y\r\n", &err), 0);
    assert_int_equal(cfg.max_sandboxes, 3);
    config_free(&cfg);
}

static void precedence_default_file_env_flag(void **state)
{
    (void)state;
    struct sbx_config cfg;
    struct sbx_err err = {0};
    assert_int_equal(load_text(&cfg, "[limits]\nmax_sandboxes = 10\nidle_ttl_s = 20\n", &err), 0);
    char *env[] = {"MCP_SANDBOX_LIMITS_IDLE_TTL_S=30", "MCP_SANDBOX_PROFILES_TIGHT_PIDS=9",
                   "MCP_SANDBOX_STATE_DIR=/x/state", "OTHER=1", NULL};
    assert_int_equal(config_load_env(&cfg, env, &err), 0);
    assert_int_equal(config_set(&cfg, "limits.max_queue_depth", "7", CONFIG_SRC_FLAG, &err), 0);
    assert_int_equal(cfg.max_sandboxes, 10);
    assert_int_equal(cfg.idle_ttl_s, 30);
    assert_int_equal(cfg.max_queue_depth, 7);
    assert_int_equal(config_profile(&cfg, "tight")->pids, 9);
    assert_int_equal(cfg.max_lifetime_s, 86400);
    char *dir = NULL;
    assert_int_equal(config_state_dir(&cfg, &dir, &err), 0);
    assert_string_equal(dir, "/x/state");
    free(dir);
    char *bad[] = {"MCP_SANDBOX_LIMITS_MAX_SANDBOXE=1", NULL};
    assert_int_equal(config_load_env(&cfg, bad, &err), -1);
    assert_non_null(strstr(err.msg, "is not a configuration variable"));
    /* Both forms of the state directory: the same one is fine, two different ones are not. */
    char *same[] = {"MCP_SANDBOX_SERVER_STATE_DIR=/y", "MCP_SANDBOX_STATE_DIR=/y", NULL};
    assert_int_equal(config_load_env(&cfg, same, &err), 0);
    char *apart[] = {"MCP_SANDBOX_SERVER_STATE_DIR=/y", "MCP_SANDBOX_STATE_DIR=/z", NULL};
    assert_int_equal(config_load_env(&cfg, apart, &err), -1);
    assert_non_null(strstr(err.msg, "both set, to different directories"));

    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    config_print(&cfg, f);
    fclose(f);
    assert_non_null(strstr(buf, "max_sandboxes = 10  # from: file"));
    assert_non_null(strstr(buf, "idle_ttl_s = 30  # from: env (MCP_SANDBOX_LIMITS_IDLE_TTL_S)"));
    assert_non_null(strstr(buf, "max_queue_depth = 7  # from: flag"));
    assert_non_null(strstr(buf, "max_lifetime_s = 86400  # from: default"));
    free(buf);
    config_free(&cfg);
}

/* What used to be taken the wrong way, or rewritten without a word. */
static void no_value_is_misread_or_rewritten(void **state)
{
    (void)state;
    struct sbx_config cfg;
    struct sbx_err err = {0};
    /* MAX_TIMEOUT_S is max_timeout_s, not timeout_s of a new profile "tight_max". */
    config_init_defaults(&cfg);
    char *env[] = {"MCP_SANDBOX_PROFILES_TIGHT_MAX_TIMEOUT_S=60",
                   "MCP_SANDBOX_FILES_UPLOAD_ROOTS= /a , /b,,", NULL};
    assert_int_equal(config_load_env(&cfg, env, &err), 0);
    assert_int_equal(config_profile(&cfg, "tight")->max_timeout_ms, 60000);
    assert_int_equal(config_profile(&cfg, "tight")->timeout_ms, 5000);
    assert_null(config_profile(&cfg, "tight_max"));
    assert_int_equal(cfg.upload_roots.len, 2);
    assert_string_equal(cfg.upload_roots.items[0], "/a");
    assert_string_equal(cfg.upload_roots.items[1], "/b");
    assert_int_equal(config_check(&cfg, &err), 0);
    config_free(&cfg);

    /* A default over the maximum is refused, not one of them rewritten. */
    assert_int_equal(check_text("[profiles.standard]\ntimeout_s = 100\nmax_timeout_s = 50\n", &err),
                     -1);
    assert_non_null(strstr(err.msg, "profiles.standard.timeout_s = 100 is more than its "
                                    "max_timeout_s = 50"));
    assert_int_equal(check_text("[profiles.tight]\ntimeout_s = 60\n", &err), -1);
    assert_non_null(strstr(err.msg, "raise max_timeout_s too"));

    /* A host uid range past the last uid is refused; its last uid may be 4294967294. */
    assert_int_equal(check_text("[isolation]\nhost_uid = 4294967200\nhost_uid_count = 96\n", &err),
                     -1);
    assert_non_null(strstr(err.msg, "isolation.host_uid = 4294967200 with host_uid_count = 96 "
                                    "runs past the last uid"));
    assert_int_equal(check_text("[isolation]\nhost_uid = 4294967200\nhost_uid_count = 95\n", &err),
                     0);
    assert_int_equal(load_text(&cfg, "[isolation]\nhost_uid_count = 0\n", &err), -1);
    config_free(&cfg);
    /* Nor one holding 65535, the 16-bit -1 (a configuration that set host_uid = 65534 when it
     * was one uid for all): 65534 alone, or a range above 65535, is taken. */
    assert_int_equal(check_text("[isolation]\nhost_uid = 65534\n", &err), -1);
    assert_non_null(strstr(err.msg, "includes 65535, the 16-bit -1"));
    assert_int_equal(check_text("[isolation]\nhost_uid = 65534\nhost_uid_count = 1\n", &err), 0);
    assert_int_equal(check_text("[isolation]\nhost_uid = 65536\n", &err), 0);

    /* A quoted key is one name: "limits.max_sandboxes" is no key (and no way past the
     * duplicate check). */
    assert_int_equal(
        load_text(&cfg, "\"limits.max_sandboxes\" = 5\n[limits]\nmax_sandboxes = 7\n", &err), -1);
    assert_non_null(strstr(err.msg, ":1:1: unknown key \"limits.max_sandboxes\""));
    config_free(&cfg);
    assert_int_equal(load_text(&cfg, "[\"profiles.standard\"]\nmemory = \"64M\"\n", &err), -1);
    assert_non_null(strstr(err.msg, ":1:2: a table name part holding '.' is not supported"));
    config_free(&cfg);

    /* The environment is held to the file's rules: UTF-8 only, so --print parses back. */
    config_init_defaults(&cfg);
    char *bad[] = {"MCP_SANDBOX_SERVER_STATE_DIR=/a\xff\xfe", NULL};
    assert_int_equal(config_load_env(&cfg, bad, &err), -1);
    assert_non_null(strstr(err.msg, "MCP_SANDBOX_SERVER_STATE_DIR is not valid UTF-8"));
    config_free(&cfg);
}

static void jwt_keys(void **state)
{
    (void)state;
    struct sbx_config cfg;
    struct sbx_err err = {0};
    config_init_defaults(&cfg);
    assert_null(cfg.jwt_jwks_file);
    assert_string_equal(cfg.jwt_principal_claim, "sub");
    assert_int_equal(cfg.jwt_algorithms.len, 2);
    assert_string_equal(cfg.jwt_algorithms.items[0], "RS256");
    assert_string_equal(cfg.jwt_algorithms.items[1], "ES256");
    assert_int_equal(cfg.jwt_leeway_s, 60);
    assert_int_equal(cfg.jwt_jwks_reload_s, 5);
    assert_int_equal(config_set(&cfg, "http.jwt_jwks_reload_s", "0", CONFIG_SRC_FLAG, &err), 0);
    assert_int_equal(config_set(&cfg, "http.jwt_jwks_reload_s", "86401", CONFIG_SRC_FLAG, &err),
                     -1);
    assert_int_equal(cfg.jwt_jwks_reload_s, 0);
    assert_null(cfg.jwt_jwks_url);
    assert_null(cfg.jwt_jwks_ca_file);
    assert_int_equal(cfg.jwt_jwks_url_refresh_s, 300);
    assert_int_equal(
        config_set(&cfg, "http.jwt_jwks_url_refresh_s", "86401", CONFIG_SRC_FLAG, &err), -1);
    assert_int_equal(config_set(&cfg, "http.jwt_jwks_url_refresh_s", "0", CONFIG_SRC_FLAG, &err),
                     0);
    assert_int_equal(cfg.jwt_jwks_url_refresh_s, 0);
    assert_int_equal(
        config_set(&cfg, "http.jwt_jwks_url", "https://i/jwks.json", CONFIG_SRC_FLAG, &err), 0);
    assert_string_equal(cfg.jwt_jwks_url, "https://i/jwks.json");
    config_free(&cfg);
    assert_int_equal(
        load_text(&cfg,
                  "[http]\njwt_jwks_file = \"/etc/k.json\"\njwt_issuer = \"https://i\"\n"
                  "jwt_algorithms = [\"PS256\"]\n",
                  &err),
        0);
    char *env[] = {"MCP_SANDBOX_HTTP_JWT_LEEWAY_S=5", "MCP_SANDBOX_HTTP_JWT_AUDIENCE=urn:mcp",
                   NULL};
    assert_int_equal(config_load_env(&cfg, env, &err), 0);
    assert_string_equal(cfg.jwt_jwks_file, "/etc/k.json");
    assert_string_equal(cfg.jwt_issuer, "https://i");
    assert_string_equal(cfg.jwt_audience, "urn:mcp");
    assert_int_equal(cfg.jwt_algorithms.len, 1);
    assert_string_equal(cfg.jwt_algorithms.items[0], "PS256");
    assert_int_equal(cfg.jwt_leeway_s, 5);
    assert_int_equal(config_set(&cfg, "http.jwt_leeway_s", "600", CONFIG_SRC_FLAG, &err), 0);
    assert_int_equal(config_set(&cfg, "http.jwt_leeway_s", "601", CONFIG_SRC_FLAG, &err), -1);
    assert_int_equal(cfg.jwt_leeway_s, 600);
    config_free(&cfg);
}

static void print_round_trips(void **state)
{
    (void)state;
    struct sbx_config a, b;
    struct sbx_err err = {0};
    assert_int_equal(load_text(&a,
                               "[files]\nupload_roots = [\"/q\\\"uote\", \"tab\\there\"]\n"
                               "[profiles.extra]\ncpus = \"0.125\"\ntimeout_s = 3\n",
                               &err),
                     0);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    config_print(&a, f);
    fclose(f);
    if (load_text(&b, buf, &err) < 0)
        fail_msg("printed config does not parse back: %s", err.msg);
    char *buf2 = NULL;
    size_t len2 = 0;
    f = open_memstream(&buf2, &len2);
    config_print(&b, f);
    fclose(f);
    /* Same values; only the provenance comments differ (default/file). */
    char *p = buf, *q = buf2;
    while (*p && *q) {
        char *pe = strstr(p, "  # from"), *qe = strstr(q, "  # from");
        if (!pe || !qe)
            break;
        assert_int_equal(pe - p, qe - q);
        assert_memory_equal(p, q, (size_t)(pe - p));
        p = strchr(pe, '\n');
        q = strchr(qe, '\n');
        if (!p || !q)
            break;
    }
    free(buf);
    free(buf2);
    config_free(&a);
    config_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(sizes_and_cpu_counts),
        cmocka_unit_test(added_profiles_follow_standard_and_the_default_must_exist),
        cmocka_unit_test(an_empty_profile_table_defines_the_profile),
        cmocka_unit_test(accepts_the_subset),
        cmocka_unit_test(refuses_with_line_and_column),
        cmocka_unit_test(a_leading_byte_order_mark_is_skipped),
        cmocka_unit_test(precedence_default_file_env_flag),
        cmocka_unit_test(no_value_is_misread_or_rewritten),
        cmocka_unit_test(jwt_keys),
        cmocka_unit_test(print_round_trips),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
