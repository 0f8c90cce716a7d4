/* libFuzzer target: arbitrary user paths through the lexical check of the file tools. Whatever
 * is accepted must be absolute, free of "." and ".." components, and inside an area. */
#include "service/files.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *path = malloc(size + 1);
    memcpy(path, data, size);
    path[size] = '\0';
    char canon[FILES_PATH_MAX];
    struct sbx_err err = {0};
    if (files_canonical(path, canon, sizeof(canon), &err) == 0) {
        if (canon[0] != '/' || strstr(canon, "/../") || strstr(canon, "/./") ||
            strstr(canon, "//") ||
            (strncmp(canon, "/workspace", 10) != 0 && strncmp(canon, "/tmp", 4) != 0))
            abort();
        size_t n = strlen(canon);
        if (n >= 3 && strcmp(canon + n - 3, "/..") == 0)
            abort();
    }
    free(path);
    return 0;
}
