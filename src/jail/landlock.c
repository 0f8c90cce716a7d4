/* Placeholder: replaced by the work that owns this facility. */
#include "landlock.h"

#include <errno.h>

int landlock_abi_version(void)
{
    return 0;
}

int landlock_restrict_sandbox(void)
{
    return -ENOSYS;
}
