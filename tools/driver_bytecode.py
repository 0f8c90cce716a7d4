# Compiles the Python driver to bytecode at build time, with the interpreter that sandboxes run
# (/usr/bin/python3), and writes it as a C array. A sandbox then loads code objects instead of
# compiling 600 lines, whose leftovers stayed in its heap: about 0.5 MiB of every idle sandbox.
# The blob is b"M", the compiling interpreter's sys.hexversion (4 bytes, big-endian), then the
# marshalled code; the bootstrap uses it only when its own sys.hexversion is the same.
import marshal
import sys

src_path, out_path = sys.argv[1], sys.argv[2]
with open(src_path, "rb") as f:
    source = f.read()
code = compile(source, "<mcp-sandbox driver>", "exec", dont_inherit=True)
blob = b"M" + sys.hexversion.to_bytes(4, "big") + marshal.dumps(code)
with open(out_path, "w") as f:
    f.write("/* Generated from %s by tools/driver_bytecode.py (Python %s); do not edit. */\n"
            % (src_path, sys.version.split()[0]))
    f.write("#include <stddef.h>\n\n")
    f.write("extern const unsigned char runtime_python_driver_code[];\n")
    f.write("extern const size_t runtime_python_driver_code_len;\n")
    f.write("const unsigned char runtime_python_driver_code[] = {\n")
    for i in range(0, len(blob), 20):
        f.write("    " + ",".join(str(b) for b in blob[i:i + 20]) + ",\n")
    f.write("};\n")
    f.write("const size_t runtime_python_driver_code_len = sizeof(runtime_python_driver_code);\n")
