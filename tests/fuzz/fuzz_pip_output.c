/* libFuzzer target: what install_packages reads back from pip, which sandbox code can rewrite
 * (the JSON report, a dist-info's METADATA) or shape (the output). Whatever the bytes, the
 * installed list stays within its bounds and merging it twice adds nothing the second time, the
 * pins for the install hold nothing but pins, and the texts made from it fit their buffers and
 * are valid UTF-8, so that they can travel in a JSON answer. */
#include "service/packages.h"
#include "util.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_text(const char *text, size_t max)
{
    size_t len = strlen(text);
    if (len > max || utf8_valid_prefix(text, len) != len)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data;
    json_t *installed = NULL;
    struct sbx_err err = {0};
    if (packages_parse_report(text, size, &installed, &err) == 0) {
        if (!json_is_array(installed) || json_array_size(installed) > PACKAGES_REPORT_MAX)
            abort();
        size_t i;
        json_t *p;
        json_array_foreach(installed, i, p)
        {
            const char *name = json_string_value(json_object_get(p, "name"));
            const char *version = json_string_value(json_object_get(p, "version"));
            if (!name || !version || !json_is_boolean(json_object_get(p, "requested")) ||
                strlen(name) > REQUIREMENT_NAME_MAX || strlen(version) > PACKAGES_VERSION_MAX)
                abort();
        }
        json_t *list = json_array();
        packages_merge(list, installed);
        size_t once = json_array_size(list);
        packages_merge(list, installed);
        if (once > PACKAGES_LIST_MAX || json_array_size(list) != once)
            abort();
        char *summary = packages_summary(installed);
        check_text(summary, 2047);
        free(summary);
        json_decref(list);
        json_decref(installed);
    } else if (!err.msg[0] || installed) {
        abort();
    }
    /* The pins go into a requirements file: a line per project, each one pin and its hash
     * (no option, no second requirement), or none at all. */
    char *pins = NULL;
    size_t count = 0, lines = 0;
    json_t *requested = NULL;
    if (packages_report_pins(text, size, &pins, &count, &requested, &err) == 0) {
        for (char *line = pins, *nl; (nl = strchr(line, '\n')); line = nl + 1, lines++) {
            char *sp = memchr(line, ' ', (size_t)(nl - line));
            if (!sp || memchr(sp + 1, ' ', (size_t)(nl - sp - 1)) || line[0] == '-' ||
                strncmp(sp, " --hash=sha", 11) != 0 || !memmem(line, (size_t)(sp - line), "==", 2))
                abort();
        }
        if (lines != count || !json_is_object(requested))
            abort();
        free(pins);
        json_decref(requested);
    } else if (pins || requested) {
        abort();
    }
    /* A dist-info's METADATA, which sandbox code writes: a name comes back only whole and
     * valid, within its buffer. */
    char name[REQUIREMENT_NAME_MAX + 1];
    if (packages_metadata_name(text, size, name, sizeof(name)) &&
        (!name[0] || requirement_identifier(name) != strlen(name)))
        abort();
    char *why = packages_failure_reason(text, size);
    check_text(why, 3 * 2047); /* 2047 bytes kept, each bad one shown as U+FFFD (3 bytes) */
    free(why);
    return 0;
}
