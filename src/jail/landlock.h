/* Landlock as defence in depth: after the sandbox's root is in place, restrict the
 * filesystem to that view: read/execute everywhere in it, write only where the sandbox
 * may write (/workspace, /tmp, /dev/shm and the few device nodes). */
#ifndef SBX_JAIL_LANDLOCK_H
#define SBX_JAIL_LANDLOCK_H

/* The kernel's Landlock ABI version (probed once), or 0 when unavailable. */
int landlock_abi_version(void);

/* Child side, inside the new root, before exec. Returns 0 or -errno. The caller decides
 * whether a failure is fatal (fail closed unless degraded mode is allowed). */
int landlock_restrict_sandbox(void);

#endif
