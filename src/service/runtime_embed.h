/* The in-sandbox drivers, embedded in the binary at build time (see the Makefile). */
#ifndef SBX_RUNTIME_EMBED_H
#define SBX_RUNTIME_EMBED_H

#include <stddef.h>
#include <sys/uio.h>

/* What `python3 -I -S -c` runs: it reads the driver as the first two frames on fd 3 and runs
 * it, so the command line stays short (ps shows it to sandbox code). */
const char *runtime_python_bootstrap(void);
/* Those two frames, header and payload each (four pieces, to be sent in order): the driver's
 * bytecode, tagged with the Python version that compiled it at build time, then its source,
 * which the bootstrap compiles only when the sandbox's Python is another version. */
#define RUNTIME_DRIVER_PIECES 4
void runtime_python_driver_frames(struct iovec pieces[RUNTIME_DRIVER_PIECES]);

#endif
