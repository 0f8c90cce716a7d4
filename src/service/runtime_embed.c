/* Accessors for the drivers that `ld -b binary` and tools/driver_bytecode.py turned into
 * objects. */
#include "runtime_embed.h"

extern const char _binary_runtime_python_driver_py_start[];
extern const char _binary_runtime_python_driver_py_end[];
extern const unsigned char runtime_python_driver_code[];
extern const size_t runtime_python_driver_code_len;

/* Loading marshalled code leaves the interpreter smaller than compiling the source did (the
 * compiler's garbage stays in its heap); the source is there for a Python of another version,
 * whose marshal format may differ. Whichever it ran, the driver says in its ready frame. */
const char *runtime_python_bootstrap(void)
{
    return "import posix, sys\n"
           "def r(n):\n"
           "    b = b''\n"
           "    while len(b) < n:\n"
           "        c = posix.read(3, n - len(b))\n"
           "        if not c:\n"
           "            raise SystemExit(2)\n"
           "        b += c\n"
           "    return b\n"
           "def frame():\n"
           "    return r(int.from_bytes(r(4), 'big'))\n"
           "code, src = frame(), frame()\n"
           "if code[:1] == b'M' and int.from_bytes(code[1:5], 'big') == sys.hexversion:\n"
           "    import marshal\n"
           "    code, DRIVER_LOADED_FROM = marshal.loads(memoryview(code)[5:]), 'bytecode'\n"
           "else:\n"
           "    code, DRIVER_LOADED_FROM = compile(src, '<mcp-sandbox driver>', 'exec'), 'source'\n"
           "del src, r, frame\n"
           "exec(code)\n";
}

static void put_u32_be(unsigned char *p, size_t v)
{
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

void runtime_python_driver_frames(struct iovec pieces[RUNTIME_DRIVER_PIECES])
{
    static unsigned char code_hdr[4], src_hdr[4];
    size_t src_len =
        (size_t)(_binary_runtime_python_driver_py_end - _binary_runtime_python_driver_py_start);
    put_u32_be(code_hdr, runtime_python_driver_code_len);
    put_u32_be(src_hdr, src_len);
    pieces[0] = (struct iovec){code_hdr, sizeof(code_hdr)};
    pieces[1] = (struct iovec){(void *)runtime_python_driver_code, runtime_python_driver_code_len};
    pieces[2] = (struct iovec){src_hdr, sizeof(src_hdr)};
    pieces[3] = (struct iovec){(void *)_binary_runtime_python_driver_py_start, src_len};
}
