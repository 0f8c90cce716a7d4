/* The in-sandbox drivers, embedded in the binary at build time (see the Makefile). */
#ifndef SBX_RUNTIME_EMBED_H
#define SBX_RUNTIME_EMBED_H

#include <stddef.h>

/* What `python3 -I -S -c` runs: it reads the driver's source as the first frame on fd 3 and
 * runs it, so the command line stays short (ps shows it to sandbox code). */
const char *runtime_python_bootstrap(void);
/* The Python driver's source (runtime/python/driver.py); not NUL-terminated. */
const char *runtime_python_driver(size_t *len);

#endif
