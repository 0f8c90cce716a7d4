/* The in-sandbox drivers, embedded in the binary at build time (see the Makefile). */
#ifndef SBX_RUNTIME_EMBED_H
#define SBX_RUNTIME_EMBED_H

#include <stddef.h>

/* The Python driver's source (runtime/python/driver.py); not NUL-terminated. */
const char *runtime_python_driver(size_t *len);

#endif
