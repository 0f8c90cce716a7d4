/* Accessors for the drivers that `ld -b binary` turned into objects. */
#include "runtime_embed.h"

extern const char _binary_runtime_python_driver_py_start[];
extern const char _binary_runtime_python_driver_py_end[];

const char *runtime_python_driver(size_t *len)
{
    *len = (size_t)(_binary_runtime_python_driver_py_end - _binary_runtime_python_driver_py_start);
    return _binary_runtime_python_driver_py_start;
}
