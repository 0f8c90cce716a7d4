/* libFuzzer target: arbitrary user paths through the lexical check of the file tools. Whatever
 * is accepted must be absolute, free of "." and ".." components, and inside an area
 * (/workspace, /tmp or /dev/shm, or one of them itself). */
#include "service/files.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int in_area(const char *canon)
{
    static const char *const areas[] = {"/workspace", "/tmp", "/dev/shm"};
    for (size_t i = 0; i < sizeof(areas) / sizeof(areas[0]); i++) {
        size_t n = strlen(areas[i]);
        if (strncmp(canon, areas[i], n) == 0 && (canon[n] == '\0' || canon[n] == '/'))
            return 1;
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *path = malloc(size + 1);
    memcpy(path, data, size);
    path[size] = '\0';
    char canon[FILES_PATH_MAX];
    struct sbx_err err = {0};
    if (files_canonical(path, canon, sizeof(canon), &err) == 0) {
        if (canon[0] != '/' || strstr(canon, "/../") || strstr(canon, "/./") ||
            strstr(canon, "//") || !in_area(canon))
            abort();
        size_t n = strlen(canon);
        if (n >= 3 && strcmp(canon + n - 3, "/..") == 0)
            abort();
    }
    free(path);
    return 0;
}
