/* libFuzzer target: install_packages' requirement strings. Whatever is accepted can be
 * nothing but a package to fetch: no option, path, URL, direct reference or marker, only
 * printable ASCII, and a PEP 503 name of lower-case letters, digits and dashes. */
#include "service/requirements.h"

#include <ctype.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    memcpy(text, data, size);
    text[size] = '\0';
    struct requirement r;
    struct sbx_err err = {0};
    if (requirement_parse(text, &r, &err) == 0) {
        const char *p = text;
        while (*p == ' ' || *p == '\t')
            p++;
        if (*p == '-' || strpbrk(text, "/\\@;\"'`$") || strstr(text, "://") || !r.normalized[0])
            abort();
        for (const char *c = text; *c; c++)
            if ((unsigned char)*c < 0x20 || (unsigned char)*c >= 0x7f)
                abort();
        for (const char *c = r.normalized; *c; c++)
            if (!(islower((unsigned char)*c) || isdigit((unsigned char)*c) || *c == '-'))
                abort();
    } else if (!err.msg[0]) {
        abort();
    }
    free(text);
    return 0;
}
