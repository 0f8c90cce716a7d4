/* Accessors for the drivers that `ld -b binary` turned into objects. */
#include "runtime_embed.h"

extern const char _binary_runtime_python_driver_py_start[];
extern const char _binary_runtime_python_driver_py_end[];

const char *runtime_python_bootstrap(void)
{
    return "import posix\n"
           "def r(n):\n"
           "    b = b''\n"
           "    while len(b) < n:\n"
           "        c = posix.read(3, n - len(b))\n"
           "        if not c:\n"
           "            raise SystemExit(2)\n"
           "        b += c\n"
           "    return b\n"
           "exec(compile(r(int.from_bytes(r(4), 'big')), '<mcp-sandbox driver>', 'exec'))\n";
}

const char *runtime_python_driver(size_t *len)
{
    *len = (size_t)(_binary_runtime_python_driver_py_end - _binary_runtime_python_driver_py_start);
    return _binary_runtime_python_driver_py_start;
}
