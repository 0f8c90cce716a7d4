/* Package installs, the pure parts: the environment a `network: packages` sandbox gets, the
 * pip command line install_packages runs, and reading what pip reports back. No I/O: the tool
 * (tools_packages.c) does that, and these are unit-tested on their own. */
#ifndef SBX_PACKAGES_H
#define SBX_PACKAGES_H

#include "config.h"
#include "err.h"
#include "requirements.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Where packages go inside a sandbox: on the interpreter's sys.path, inside the workspace (so
 * the workspace cap is the disk cap). */
#define PACKAGES_DIR "/workspace/.packages"

/* pip's report is written where sandbox code can rewrite it: what the server takes from it is
 * bounded, so a forged one costs the loop no more than an honest one. */
#define PACKAGES_REPORT_MAX  512  /* entries read from one report */
#define PACKAGES_LIST_MAX    1024 /* packages recorded per sandbox */
#define PACKAGES_VERSION_MAX 128  /* longer versions are shown cut */
/* JSON values in one report: an honest one has about a hundred per package. Parsed, the most
 * costs the loop about 25 MB for a moment. */
#define PACKAGES_REPORT_MAX_VALUES 100000

/* "K=V" strings (NULL-terminated, malloc'd; free with packages_env_free) for a sandbox whose
 * proxy listens on 127.0.0.1:proxy_port: the proxy variables, pip's index settings and
 * PYTHONPATH, so that pip and Python run by hand in the sandbox behave like the tool. */
char **packages_sandbox_env(const struct sbx_config *cfg, uint16_t proxy_port);
void packages_env_free(char **env);

/* ["/usr/bin/python3", "-I", "-m", "pip", "install", ..., reqs...] for install_packages, with
 * pip writing its JSON report to report_path; with dry_run it only resolves (the report says
 * what it would install). */
json_t *packages_pip_argv(const struct sbx_config *cfg, const char *const *reqs, size_t n,
                          const char *report_path, bool dry_run);
/* The install after a packages.allowed check: packages_pip_argv's, with no requirement of its
 * own but the pins in the requirements file pins_path (packages_report_pins), each held to its
 * file's hash, and none of their dependencies resolved again. */
json_t *packages_pip_pinned_argv(const struct sbx_config *cfg, const char *pins_path,
                                 const char *report_path);
/* The whole environment pip runs with: the proxy, no configuration file (PIP_CONFIG_FILE is
 * /dev/null, so neither ~/.config/pip nor /etc/pip.conf is read), nothing from the sandbox's
 * interpreter. Everything else pip needs is on its command line. */
json_t *packages_pip_env(uint16_t proxy_port);

/* pip's --report JSON into [{name, version, requested}] (a new array, at most
 * PACKAGES_REPORT_MAX entries). */
int packages_parse_report(const char *text, size_t len, json_t **installed, struct sbx_err *err);

/* Every project of a pip --dry-run report, by name (a new array of strings), for the
 * packages.allowed check: nothing is skipped or cut, so a report that cannot name them all
 * (not JSON, no "install" list, an entry without a name, too many values) is an error. */
int packages_report_projects(const char *text, size_t len, json_t **names, struct sbx_err *err);

/* The install that follows a packages.allowed check, as a requirements file: a line
 * "NAME==VERSION --hash=ALGO:HEX" per project of the dry run's report (malloc'd into *pins),
 * for pip install --no-deps --require-hashes, so that exactly the files the check passed are
 * installed, or nothing. *requested (a new object) holds the normalised names the caller asked
 * for (in the install's own report every pin is "requested"). An entry that cannot be pinned
 * (no sha256/384/512 hash of a file, or a name or version pip would read as more than a pin)
 * is an error: it would install something the check never saw. *count is the number of pins. */
int packages_report_pins(const char *text, size_t len, char **pins, size_t *count,
                         json_t **requested, struct sbx_err *err);

/* Sets each installed entry's "requested" to whether its normalised name is in requested. */
void packages_mark_requested(json_t *installed, const json_t *requested);

/* Adds or replaces (by normalised name) each {name, version} of installed in list, which
 * holds at most PACKAGES_LIST_MAX entries. */
void packages_merge(json_t *list, const json_t *installed);

/* Copies the project name that a dist-info directory (its path) declares into buf; false if
 * it cannot be read. */
typedef bool (*packages_name_fn)(const char *dist_info, void *ctx, char *buf, size_t size);

/* What the packages directory holds, from list_files' entries of it: the recorded packages
 * still there (at the version pip reported while its dist-info is there), then those installed
 * another way (pip run by hand), named by real_name when it can. In the shape packages_merge
 * keeps; a new array, at most PACKAGES_LIST_MAX entries. */
json_t *packages_on_disk(const json_t *recorded, const json_t *entries, packages_name_fn real_name,
                         void *ctx);

/* The "Name:" of a METADATA file's header, when it is a valid project name. */
bool packages_metadata_name(const char *metadata, size_t len, char *out, size_t size);

/* "numpy 1.26.4, scipy 1.11.0" for a result's text (malloc'd, bounded: the rest is counted). */
char *packages_summary(const json_t *installed);

/* The reason pip gave for failing (its "ERROR:" lines, else its last lines), malloc'd. */
char *packages_failure_reason(const char *output, size_t len);

#endif
