/* install_packages' requirement strings: what passes, what is refused and why, PEP 503 names,
 * packages.allowed; and the pip command line, report and environment built around them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "service/packages.h"
#include "service/requirements.h"
#include "util.h"

static void accepts_names_extras_and_specifiers(void **state)
{
    (void)state;
    static const char *const ok[] = {
        "numpy",
        "requests==2.31.0",
        "pandas[excel]>=2,<3",
        "Django ~= 4.2",
        "zope.interface",
        "sbx_mixed.Case",
        "a",
        "x[a, b]==1.*",
        "pkg!=1.0.post1",
        "pkg===1.0",
        "  numpy  ",
    };
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        struct requirement r;
        struct sbx_err err = {0};
        if (requirement_parse(ok[i], &r, &err) != 0)
            fail_msg("'%s' refused: %s", ok[i], err.msg);
    }
    struct requirement r;
    assert_int_equal(requirement_parse("Requests==2.31.0", &r, NULL), 0);
    assert_string_equal(r.name, "Requests");
    assert_string_equal(r.normalized, "requests");
    assert_true(r.pinned);
    assert_int_equal(requirement_parse("requests>=2", &r, NULL), 0);
    assert_false(r.pinned);
    assert_int_equal(requirement_parse("requests==2.*", &r, NULL), 0);
    assert_false(r.pinned);
}

static void refuses_options_paths_urls_and_markers(void **state)
{
    (void)state;
    static const struct {
        const char *text, *why;
    } bad[] = {
        {"--index-url=http://evil/simple", "pip option"},
        {"-e", "pip option"},
        {"-r requirements.txt", "pip option"},
        {"--extra-index-url", "pip option"},
        {"./local", "path"},
        {"/tmp/x.whl", "path"},
        {"..\\x", "path"},
        {"~/pkg", "path"},
        {"http://evil/x.whl", "URL"},
        {"git+https://github.com/x/y", "URL"},
        {"pkg @ https://evil/pkg.whl", "URL"},
        {"pkg@1.0", "direct reference"},
        {"pkg; python_version<'3'", "markers"},
        {"", "empty"},
        {"numpy-", "not a package name"},
        {"_numpy", "not a package name"},
        {"num py", "version specifier"},
        {"numpy==", "must follow"},
        {"numpy>=1.*", "'*'"},
        {"numpy==1.*.2", "'*'"},
        {"numpy 1.0", "version specifier"},
        {"numpy==1.0 2.0", "unexpected"},
        {"x[a,]", "extras"},
        {"x[a", "extras"},
        {"pkg==1.0\n--index-url=x", "printable"},
        {"pkg$(id)", "not a package name"},
        {"pkg==`id`", "must follow"},
        {"pk\xc3\xa9", "printable"},
        {"evil-1.0-py3-none-any.whl", "archive"},
        {"evil-1.0.tar.gz", "archive"},
        {"Evil.ZIP", "archive"},
        {"evil.tgz>=1", "archive"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct requirement r;
        struct sbx_err err = {0};
        if (requirement_parse(bad[i].text, &r, &err) == 0)
            fail_msg("'%s' accepted", bad[i].text);
        if (!strstr(err.msg, bad[i].why))
            fail_msg("'%s': message '%s' lacks '%s'", bad[i].text, err.msg, bad[i].why);
    }
    char longname[300];
    memset(longname, 'a', sizeof(longname) - 1);
    longname[sizeof(longname) - 1] = '\0';
    struct requirement r;
    assert_int_equal(requirement_parse(longname, &r, NULL), -1);
}

static void names_normalise_as_pep_503_and_match_the_allow_list(void **state)
{
    (void)state;
    char out[64];
    requirement_normalize("Sbx_Mixed.Case", out, sizeof(out));
    assert_string_equal(out, "sbx-mixed-case");
    requirement_normalize("a--b__c..d", out, sizeof(out));
    assert_string_equal(out, "a-b-c-d");
    requirement_normalize("NumPy", out, sizeof(out));
    assert_string_equal(out, "numpy");

    char *items[] = {"NumPy", "sbx_mixed.case"};
    struct string_list allowed = {items, 2};
    assert_true(requirement_allowed(&allowed, "numpy"));
    assert_true(requirement_allowed(&allowed, "sbx-mixed-case"));
    assert_false(requirement_allowed(&allowed, "requests"));
    struct string_list empty = {NULL, 0};
    assert_true(requirement_allowed(&empty, "anything"));
}

static bool argv_has(const json_t *argv, const char *s)
{
    size_t i;
    json_t *v;
    json_array_foreach(argv, i, v)
    {
        if (strcmp(json_string_value(v), s) == 0)
            return true;
    }
    return false;
}

static void the_pip_command_line_is_fixed_around_the_requirements(void **state)
{
    (void)state;
    struct sbx_config cfg;
    config_init_defaults(&cfg);
    struct sbx_err err = {0};
    assert_int_equal(
        config_set(&cfg, "packages.index_url", "http://127.0.0.1:9/simple", CONFIG_SRC_FLAG, &err),
        0);
    assert_int_equal(config_set(&cfg, "packages.extra_index_urls", "http://mirror:8/simple",
                                CONFIG_SRC_FLAG, &err),
                     0);
    const char *reqs[] = {"numpy", "requests==2.31.0"};
    json_t *argv = packages_pip_argv(&cfg, reqs, 2, "/tmp/r.json", false);
    assert_false(argv_has(argv, "--dry-run"));
    assert_string_equal(json_string_value(json_array_get(argv, 0)), "/usr/bin/python3");
    assert_true(argv_has(argv, "--only-binary=:all:"));
    assert_true(argv_has(argv, "--target=" PACKAGES_DIR));
    assert_true(argv_has(argv, "--index-url=http://127.0.0.1:9/simple"));
    assert_true(argv_has(argv, "--extra-index-url=http://mirror:8/simple"));
    assert_true(argv_has(argv, "/tmp/r.json"));
    size_t n = json_array_size(argv);
    assert_string_equal(json_string_value(json_array_get(argv, n - 1)), "requests==2.31.0");
    assert_string_equal(json_string_value(json_array_get(argv, n - 2)), "numpy");
    json_decref(argv);

    assert_int_equal(config_set(&cfg, "packages.only_binary", "false", CONFIG_SRC_FLAG, &err), 0);
    argv = packages_pip_argv(&cfg, reqs, 1, "/tmp/r.json", true);
    assert_false(argv_has(argv, "--only-binary=:all:"));
    assert_true(argv_has(argv, "--dry-run")); /* the check packages.allowed makes first */
    json_decref(argv);
    /* the install after the check: the pins file only, held to hashes, nothing resolved anew */
    argv = packages_pip_pinned_argv(&cfg, "/tmp/pins.txt", "/tmp/r.json");
    assert_false(argv_has(argv, "--dry-run"));
    assert_true(argv_has(argv, "--no-deps"));
    assert_true(argv_has(argv, "--require-hashes"));
    assert_true(argv_has(argv, "--target=" PACKAGES_DIR));
    assert_true(argv_has(argv, "/tmp/r.json"));
    n = json_array_size(argv);
    assert_string_equal(json_string_value(json_array_get(argv, n - 2)), "-r");
    assert_string_equal(json_string_value(json_array_get(argv, n - 1)), "/tmp/pins.txt");
    json_decref(argv);

    char **env = packages_sandbox_env(&cfg, 3128);
    bool proxy = false, index = false, extra = false, path = false;
    for (char **e = env; *e; e++) {
        proxy |= strcmp(*e, "HTTPS_PROXY=http://127.0.0.1:3128") == 0;
        index |= strcmp(*e, "PIP_INDEX_URL=http://127.0.0.1:9/simple") == 0;
        extra |= strcmp(*e, "PIP_EXTRA_INDEX_URL=http://mirror:8/simple") == 0;
        path |= strcmp(*e, "PYTHONPATH=" PACKAGES_DIR) == 0;
    }
    assert_true(proxy && index && extra && path);
    packages_env_free(env);
    config_free(&cfg);
}

static void pip_reports_and_failures_are_read(void **state)
{
    (void)state;
    const char *report = "{\"version\":\"1\",\"install\":[{\"metadata\":{\"name\":\"sbxapp\","
                         "\"version\":\"1.0\"},\"requested\":true},{\"metadata\":{\"name\":"
                         "\"sbxdemo\",\"version\":\"2.0\"},\"requested\":false},{\"metadata\":{"
                         "\"name\":7}},{\"nothing\":1}]}";
    json_t *installed = NULL;
    assert_int_equal(packages_parse_report(report, strlen(report), &installed, NULL), 0);
    assert_int_equal(json_array_size(installed), 2);
    assert_string_equal(json_string_value(json_object_get(json_array_get(installed, 1), "name")),
                        "sbxdemo");
    assert_true(json_is_true(json_object_get(json_array_get(installed, 0), "requested")));
    /* A long local version (PEP 440 sets no bound) is shown cut, not left out. */
    char long_report[1024], version[300] = "1.0+";
    memset(version + 4, '0', sizeof(version) - 5);
    version[sizeof(version) - 1] = '\0';
    snprintf(long_report, sizeof(long_report),
             "{\"install\":[{\"metadata\":{\"name\":\"evilver\",\"version\":\"%s\"}}]}", version);
    json_t *long_one = NULL;
    assert_int_equal(packages_parse_report(long_report, strlen(long_report), &long_one, NULL), 0);
    assert_int_equal(json_array_size(long_one), 1);
    const char *shown = json_string_value(json_object_get(json_array_get(long_one, 0), "version"));
    assert_int_equal(strlen(shown), PACKAGES_VERSION_MAX);
    assert_memory_equal(shown, version, PACKAGES_VERSION_MAX - 3);
    assert_string_equal(shown + PACKAGES_VERSION_MAX - 3, "...");
    json_decref(long_one);

    json_t *bad = NULL;
    assert_int_equal(packages_parse_report("[1]", 3, &bad, NULL), -1);
    assert_int_equal(packages_parse_report("{", 1, &bad, NULL), -1);

    /* For packages.allowed, every project a dry run names, and a report that cannot name
     * them all is an error rather than an empty list that passes the check. */
    json_t *names = NULL;
    const char *dry = "{\"install\":[{\"metadata\":{\"name\":\"sbxwants\"}},{\"metadata\":{"
                      "\"name\":\"sbxother\",\"version\":\"1.0\"}}]}";
    assert_int_equal(packages_report_projects(dry, strlen(dry), &names, NULL), 0);
    assert_int_equal(json_array_size(names), 2);
    assert_string_equal(json_string_value(json_array_get(names, 0)), "sbxwants");
    assert_string_equal(json_string_value(json_array_get(names, 1)), "sbxother");
    json_decref(names);
    assert_int_equal(packages_report_projects("{\"install\":[]}", 14, &names, NULL), 0);
    assert_int_equal(json_array_size(names), 0);
    json_decref(names);
    assert_int_equal(packages_report_projects(report, strlen(report), &names, NULL), -1);
    assert_null(names);
    assert_int_equal(packages_report_projects("{\"install\":[", 12, &names, NULL), -1);
    assert_int_equal(packages_report_projects("{}", 2, &names, NULL), -1);
    assert_int_equal(packages_report_projects("[1]", 3, &names, NULL), -1);

    json_t *list = json_pack("[{s:s, s:s}]", "name", "SbxDemo", "version", "1.0");
    packages_merge(list, installed);
    assert_int_equal(json_array_size(list), 2);
    assert_string_equal(json_string_value(json_object_get(json_array_get(list, 0), "version")),
                        "2.0");
    json_decref(list);
    json_decref(installed);

    const char *out = "Looking in indexes: x\nERROR: Could not find a version that satisfies the "
                      "requirement sbxsrc\nERROR: No matching distribution found for sbxsrc\n";
    char *why = packages_failure_reason(out, strlen(out));
    assert_string_equal(why, "ERROR: Could not find a version that satisfies the requirement "
                             "sbxsrc\nERROR: No matching distribution found for sbxsrc");
    free(why);
    why = packages_failure_reason("Killed\n", 7);
    assert_string_equal(why, "Killed");
    free(why);
    /* The reason goes into JSON: bytes that are not UTF-8, and NULs, become U+FFFD, which
     * (unlike '?') cannot be taken for a character pip wrote. */
    why = packages_failure_reason("a\0b\xff\n", 5);
    assert_string_equal(why, "a\xef\xbf\xbd"
                             "b\xef\xbf\xbd");
    free(why);
    /* The last 2047 bytes of a long output start at a character, not inside one. */
    char long_out[3000];
    memset(long_out, 'x', sizeof(long_out));
    memcpy(long_out + sizeof(long_out) - 2048, "\xc3\xa9", 2);
    why = packages_failure_reason(long_out, sizeof(long_out));
    assert_int_equal(strlen(why), 2046);
    assert_true(why[0] == 'x');
    free(why);
}

static bool name_from_table(const char *dist_info, void *ctx, char *buf, size_t size)
{
    (void)ctx;
    if (strcmp(dist_info, "/workspace/.packages/Sbx_Mixed_Case-0.1.dist-info") == 0)
        snprintf(buf, size, "Sbx-Mixed.Case");
    else if (strcmp(dist_info, "/workspace/.packages/liar-1.0.dist-info") == 0)
        snprintf(buf, size, "numpy");
    else
        return false;
    return true;
}

static json_t *dist_info(const char *name, const char *type, const char *mtime)
{
    char path[256];
    snprintf(path, sizeof(path), "/workspace/.packages/%s", name);
    return json_pack("{s:s, s:s, s:s}", "path", path, "type", type, "mtime", mtime);
}

static void the_package_list_follows_the_directory(void **state)
{
    (void)state;
    /* The tool installed sbxdemo 1.0, then pip by hand upgraded it to 2.0 (--target leaves the
     * old dist-info, older); tied 1.0 and 2.0 have one mtime (the recorded one wins); sbxapp
     * was removed by hand; Sbx-Mixed.Case, handmade (twice) and liar (whose METADATA names
     * another project) were installed by hand; the rest is not a dist-info of a project. */
    json_t *recorded =
        json_pack("[{s:s, s:s}, {s:s, s:s}, {s:s, s:s}]", "name", "sbxdemo", "version", "1.0",
                  "name", "tied", "version", "1.0", "name", "sbxapp", "version", "1.0");
    json_t *entries = json_array();
    json_array_append_new(entries, dist_info("Sbx_Mixed_Case-0.1.dist-info", "directory",
                                             "2026-01-01T00:00:03.000Z"));
    json_array_append_new(
        entries, dist_info("bad name-1.0.dist-info", "directory", "2026-01-01T00:00:01.000Z"));
    json_array_append_new(
        entries, dist_info("handmade-1.0.dist-info", "directory", "2026-01-01T00:00:01.000Z"));
    json_array_append_new(
        entries, dist_info("handmade-3.0.dist-info", "directory", "2026-01-01T00:00:05.000Z"));
    json_array_append_new(entries,
                          dist_info("liar-1.0.dist-info", "directory", "2026-01-01T00:00:01.000Z"));
    json_array_append_new(entries, dist_info("sbxdemo", "directory", "2026-01-01T00:00:09.500Z"));
    json_array_append_new(
        entries, dist_info("sbxdemo-1.0.dist-info", "directory", "2026-01-01T00:00:02.000Z"));
    json_array_append_new(
        entries, dist_info("sbxdemo-2.0.dist-info", "directory", "2026-01-01T00:00:09.400Z"));
    json_array_append_new(entries,
                          dist_info("tied-1.0.dist-info", "directory", "2026-01-01T00:00:04.000Z"));
    json_array_append_new(entries,
                          dist_info("tied-2.0.dist-info", "directory", "2026-01-01T00:00:04.000Z"));
    json_array_append_new(entries, dist_info("x-1.dist-info", "file", "2026-01-01T00:00:02.000Z"));
    json_array_append_new(entries,
                          dist_info("-1.dist-info", "directory", "2026-01-01T00:00:02.000Z"));
    json_array_append_new(entries,
                          dist_info("nover-.dist-info", "directory", "2026-01-01T00:00:02.000Z"));
    json_t *list = packages_on_disk(recorded, entries, name_from_table, NULL);
    char *text = json_dumps(list, JSON_COMPACT);
    assert_string_equal(text, "[{\"name\":\"sbxdemo\",\"version\":\"2.0\"},"
                              "{\"name\":\"tied\",\"version\":\"1.0\"},"
                              "{\"name\":\"Sbx-Mixed.Case\",\"version\":\"0.1\"},"
                              "{\"name\":\"handmade\",\"version\":\"3.0\"},"
                              "{\"name\":\"liar\",\"version\":\"1.0\"}]");
    free(text);
    json_decref(list);
    /* Names match as PEP 503 has them; without a real_name, one installed by hand keeps the
     * directory's escaped name. Nothing there: none. */
    json_t *old = json_pack("[{s:s, s:s}]", "name", "SbxDemo", "version", "0.5");
    list = packages_on_disk(old, entries, NULL, NULL);
    text = json_dumps(list, JSON_COMPACT);
    assert_string_equal(text, "[{\"name\":\"SbxDemo\",\"version\":\"2.0\"},"
                              "{\"name\":\"Sbx_Mixed_Case\",\"version\":\"0.1\"},"
                              "{\"name\":\"handmade\",\"version\":\"3.0\"},"
                              "{\"name\":\"liar\",\"version\":\"1.0\"},"
                              "{\"name\":\"tied\",\"version\":\"1.0\"}]");
    free(text);
    json_decref(list);
    json_t *none = json_array();
    list = packages_on_disk(recorded, none, NULL, NULL);
    assert_int_equal(json_array_size(list), 0);
    json_decref(list);
    json_decref(none);
    json_decref(old);
    json_decref(recorded);
    json_decref(entries);

    char name[64];
    const char *meta = "Metadata-Version: 2.1\r\nName: Sbx-Mixed.Case\r\nVersion: 0.1\r\n\r\n"
                       "Name: body\n";
    assert_true(packages_metadata_name(meta, strlen(meta), name, sizeof(name)));
    assert_string_equal(name, "Sbx-Mixed.Case");
    meta = "Metadata-Version: 2.1\n\nName: after-the-header\n";
    assert_false(packages_metadata_name(meta, strlen(meta), name, sizeof(name)));
    meta = "Name: not a name\n";
    assert_false(packages_metadata_name(meta, strlen(meta), name, sizeof(name)));
    meta = "Name: averyveryveryverylongname";
    assert_false(packages_metadata_name(meta, strlen(meta), name, 8));
}

#define SHA_A "3df65496cb722ffea5f6e10f93d86ac7f6248c75904c5092d6ef373391c93e73"
#define SHA_B "0fec3383426e36bfd26c981f1e0ddb54ddaf8f2092b9c594c9a193c977b76222"

/* A dry run's report entry as pip 23.0 writes it; info is its download_info's fields. */
static char *report_entry(const char *name, const char *version, bool requested, const char *info)
{
    return xasprintf("{\"download_info\":{\"url\":\"http://i/%s.whl\"%s%s},\"requested\":%s,"
                     "\"metadata\":{\"name\":\"%s\",\"version\":\"%s\"}}",
                     name, *info ? "," : "", info, requested ? "true" : "false", name, version);
}

/* packages_report_pins on a report of one entry: its return, with the pins in *pins. */
static int pins_of_one(const char *name, const char *version, const char *info, char **pins,
                       struct sbx_err *err)
{
    char *entry = report_entry(name, version, true, info);
    char *report = xasprintf("{\"install\":[%s]}", entry);
    size_t count = 0;
    json_t *requested = NULL;
    int rc = packages_report_pins(report, strlen(report), pins, &count, &requested, err);
    assert_int_equal(count, rc == 0 ? 1 : 0);
    json_decref(requested);
    free(report);
    free(entry);
    return rc;
}

static void the_install_is_pinned_to_what_the_dry_run_resolved(void **state)
{
    (void)state;
    char *app = report_entry("sbxapp", "1.0", true,
                             "\"archive_info\":{\"hash\":\"sha256=" SHA_B "\",\"hashes\":{"
                             "\"sha256\":\"" SHA_B "\"}}");
    /* pip 23.1 and later may give only "hashes" */
    char *demo =
        report_entry("Sbx_Demo", "2.0+local.1", false,
                     "\"archive_info\":{\"hashes\":{\"md5\":\"00\",\"sha256\":\"" SHA_A "\"}}");
    char *report = xasprintf("{\"version\":\"1\",\"install\":[%s,%s]}", app, demo);
    char *pins = NULL;
    size_t count = 0;
    json_t *requested = NULL;
    assert_int_equal(packages_report_pins(report, strlen(report), &pins, &count, &requested, NULL),
                     0);
    assert_int_equal(count, 2);
    assert_string_equal(pins, "sbxapp==1.0 --hash=sha256:" SHA_B "\n"
                              "Sbx_Demo==2.0+local.1 --hash=sha256:" SHA_A "\n");
    assert_int_equal(json_object_size(requested), 1);
    assert_true(json_is_true(json_object_get(requested, "sbxapp")));

    /* The install's own report calls every pin requested: the dry run's word is kept. */
    json_t *installed =
        json_pack("[{s:s, s:s, s:b}, {s:s, s:s, s:b}]", "name", "sbxapp", "version", "1.0",
                  "requested", 1, "name", "Sbx_Demo", "version", "2.0+local.1", "requested", 1);
    packages_mark_requested(installed, requested);
    assert_true(json_is_true(json_object_get(json_array_get(installed, 0), "requested")));
    assert_true(json_is_false(json_object_get(json_array_get(installed, 1), "requested")));
    json_decref(installed);
    json_decref(requested);
    free(pins);
    free(report);
    free(app);
    free(demo);

    /* Nothing to install is an empty file, not an error. */
    assert_int_equal(packages_report_pins("{\"install\":[]}", 14, &pins, &count, &requested, NULL),
                     0);
    assert_int_equal(count, 0);
    assert_string_equal(pins, "");
    assert_int_equal(json_object_size(requested), 0);
    free(pins);
    json_decref(requested);

    /* sha384 and sha512 are pip's other --hash algorithms. */
    char sha512[129];
    memset(sha512, 'a', 128);
    sha512[128] = '\0';
    char *info = xasprintf("\"archive_info\":{\"hash\":\"sha512=%s\"}", sha512);
    assert_int_equal(pins_of_one("x", "1", info, &pins, NULL), 0);
    char *want = xasprintf("x==1 --hash=sha512:%s\n", sha512);
    assert_string_equal(pins, want);
    free(want);
    free(pins);
    free(info);
}

static void what_cannot_be_pinned_is_refused(void **state)
{
    (void)state;
    static const char *const no_hash[] = {
        "",                                                     /* no archive_info */
        "\"dir_info\":{}",                                      /* a local directory */
        "\"vcs_info\":{\"vcs\":\"git\",\"commit_id\":\"abc\"}", /* a checkout */
        "\"archive_info\":{}",                                  /* an sdist url, no hash */
        "\"archive_info\":{\"hash\":\"md5=0123456789abcdef0123456789abcdef\"}", /* weak */
        "\"archive_info\":{\"hash\":\"sha256=" SHA_A "0\"}",                    /* too long */
        "\"archive_info\":{\"hash\":\"sha256=zz" SHA_A "\"}",                   /* not hex */
        "\"archive_info\":{\"hash\":\"sha256\"}",                               /* no '=' */
        "\"archive_info\":{\"hashes\":{\"sha256\":7}}",                         /* not a string */
    };
    for (size_t i = 0; i < ARRAY_SIZE(no_hash); i++) {
        char *pins = NULL;
        struct sbx_err err = {0};
        assert_int_equal(pins_of_one("sbxdemo", "1.0", no_hash[i], &pins, &err), -1);
        assert_null(pins);
        assert_non_null(strstr(err.msg, "no sha256, sha384 or sha512 hash for sbxdemo 1.0 (from "
                                        "http://i/sbxdemo.whl)"));
    }
    /* A name or version that would be more than a pin on its line. */
    static const char *const bad[][2] = {
        {"sbxdemo", "1.0 --index-url=http://evil"},
        {"sbxdemo", "1.0\\nsbxother"},
        {"sbxdemo", ""},
        {"sbxdemo", "1.0;x"},
        {"sbx demo", "1.0"},
        {"-rsbxdemo", "1.0"},
        {"", "1.0"},
    };
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        char *pins = NULL;
        struct sbx_err err = {0};
        assert_int_equal(pins_of_one(bad[i][0], bad[i][1],
                                     "\"archive_info\":{\"hash\":\"sha256=" SHA_A "\"}", &pins,
                                     &err),
                         -1);
        assert_null(pins);
        assert_non_null(strstr(err.msg, "names no project and version that can be pinned"));
    }
    /* Not a report, or one without its list. */
    char *pins = NULL;
    size_t count = 0;
    json_t *requested = NULL;
    assert_int_equal(packages_report_pins("{}", 2, &pins, &count, &requested, NULL), -1);
    assert_int_equal(packages_report_pins("[1]", 3, &pins, &count, &requested, NULL), -1);
    assert_int_equal(
        packages_report_pins("{\"install\":[{}]}", 15, &pins, &count, &requested, NULL), -1);
    assert_null(pins);
    assert_null(requested);
}

static void what_a_report_can_cost_is_bounded(void **state)
{
    (void)state;
    /* a forged report with far more entries than any install, all distinct */
    size_t n = 3 * PACKAGES_REPORT_MAX;
    size_t cap = n * 64 + 64, off = 0;
    char *report = malloc(cap);
    off += (size_t)snprintf(report, cap, "{\"install\":[");
    for (size_t i = 0; i < n; i++)
        off += (size_t)snprintf(report + off, cap - off,
                                "%s{\"metadata\":{\"name\":\"p%zu\",\"version\":\"1\"}}",
                                i ? "," : "", i);
    snprintf(report + off, cap - off, "]}");
    json_t *installed = NULL;
    assert_int_equal(packages_parse_report(report, strlen(report), &installed, NULL), 0);
    assert_int_equal(json_array_size(installed), PACKAGES_REPORT_MAX);
    /* what the allow-list check reads is not cut: every project is checked */
    json_t *names = NULL;
    assert_int_equal(packages_report_projects(report, strlen(report), &names, NULL), 0);
    assert_int_equal(json_array_size(names), n);
    json_decref(names);
    free(report);
    /* one of more values than any honest report is refused before it is parsed */
    size_t many = PACKAGES_REPORT_MAX_VALUES + 1;
    char *flood = malloc(3 * many + 32);
    size_t len = (size_t)sprintf(flood, "{\"install\":[");
    for (size_t i = 0; i < many; i++)
        len += (size_t)sprintf(flood + len, "%s{}", i ? "," : "");
    len += (size_t)sprintf(flood + len, "]}");
    json_t *none = NULL;
    struct sbx_err err = {0};
    assert_int_equal(packages_parse_report(flood, len, &none, &err), -1);
    assert_null(none);
    assert_non_null(strstr(err.msg, "JSON values"));
    assert_int_equal(packages_report_projects(flood, len, &none, NULL), -1);
    assert_null(none);
    free(flood);
    json_t *list = json_array();
    for (int round = 0; round < 3; round++) {
        /* new names each round: the list stops growing at its cap */
        size_t i;
        json_t *p;
        json_array_foreach(installed, i, p)
        {
            char name[32];
            snprintf(name, sizeof(name), "r%d-p%zu", round, i);
            json_object_set_new(p, "name", json_string(name));
        }
        packages_merge(list, installed);
    }
    assert_int_equal(json_array_size(list), PACKAGES_LIST_MAX);
    /* an existing name is replaced in place, even at the cap */
    json_t *again = json_pack("[{s:s, s:s}]", "name", "R0_P3", "version", "9");
    packages_merge(list, again);
    assert_int_equal(json_array_size(list), PACKAGES_LIST_MAX);
    assert_string_equal(json_string_value(json_object_get(json_array_get(list, 3), "version")),
                        "9");
    char *text = packages_summary(installed);
    assert_true(strlen(text) < 2048);
    assert_non_null(strstr(text, " more"));
    free(text);
    json_decref(again);
    json_decref(list);
    json_decref(installed);

    json_t *env = packages_pip_env(3128);
    assert_string_equal(json_string_value(json_object_get(env, "PIP_CONFIG_FILE")), "/dev/null");
    assert_string_equal(json_string_value(json_object_get(env, "HTTPS_PROXY")),
                        "http://127.0.0.1:3128");
    assert_null(json_object_get(env, "PYTHONPATH"));
    /* The sandbox's own base environment, not the caller's. */
    assert_string_equal(json_string_value(json_object_get(env, "PATH")),
                        "/usr/local/bin:/usr/bin:/bin");
    assert_string_equal(json_string_value(json_object_get(env, "HOME")), "/workspace");
    assert_string_equal(json_string_value(json_object_get(env, "TMPDIR")), "/tmp");
    json_decref(env);
}

static void utf8_scrub_keeps_valid_characters(void **state)
{
    (void)state;
    char a[] = "caf\xc3\xa9 \xe2\x82\xac ok";
    assert_int_equal(utf8_scrub(a, strlen(a)), 0);
    char b[] = "x\xff\xc3y\xe2\x82";
    assert_int_equal(utf8_scrub(b, strlen(b)), 4);
    assert_string_equal(b, "x??y??");
    char c[] = "\xed\xa0\x80 \xc0\xaf \xf4\x90\x80\x80";
    utf8_scrub(c, strlen(c));
    assert_null(strchr(c, '\xed'));
    json_t *j = json_string(c);
    assert_non_null(j);
    json_decref(j);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(accepts_names_extras_and_specifiers),
        cmocka_unit_test(refuses_options_paths_urls_and_markers),
        cmocka_unit_test(names_normalise_as_pep_503_and_match_the_allow_list),
        cmocka_unit_test(the_pip_command_line_is_fixed_around_the_requirements),
        cmocka_unit_test(pip_reports_and_failures_are_read),
        cmocka_unit_test(the_install_is_pinned_to_what_the_dry_run_resolved),
        cmocka_unit_test(what_cannot_be_pinned_is_refused),
        cmocka_unit_test(what_a_report_can_cost_is_bounded),
        cmocka_unit_test(the_package_list_follows_the_directory),
        cmocka_unit_test(utf8_scrub_keeps_valid_characters),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
