#!/usr/bin/python3
"""Builds a small PEP 503 package index for the install_packages tests, with wheels made here
(no network, no setuptools): pure-Python wheels are zip files with a dist-info directory.

    pkgindex.py DIR    writes DIR/simple/... and DIR/files/...

Projects:
  sbxdemo  1.0 and 2.0 (wheels); VERSION tells which one was imported
  sbxapp   1.0 (wheel), depends on sbxdemo
  Sbx_Mixed.Case 0.1 (wheel), a name that normalises to sbx-mixed-case
  sbxsrc   1.0 (sdist only): refused when only wheels are allowed
  sbxother 1.0 (wheel), for a server whose packages.allowed leaves it out
  sbxwants 1.0 (wheel), allowed, but depends on sbxother
  sbxlong  1.0 (wheel), allowed, depends on sbxother, with a 5 MiB description (pip's report
           of it is larger than the server reads)
and files/big.bin (2 MiB), for the proxy's byte budget.

Projects whose index page changes after it was first served (simple/P/later.html, which the
test server sends from the second request on), as an index may between a dry run and an
install:
  sbxshift 1.0 (wheel), allowed, depends on sbxdemo; later also 1.1, which depends on sbxother
  sbxswap  1.0 (wheel), allowed; later the page names another file of 1.0 (another hash), one
           that also depends on sbxother
"""
import base64
import hashlib
import io
import os
import sys
import tarfile
import zipfile


def record_hash(data):
    digest = hashlib.sha256(data).digest()
    return "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def wheel(name, version, modules, requires=(), description=""):
    dist = name.replace("-", "_").replace(".", "_")
    info = "%s-%s.dist-info" % (dist, version)
    metadata = "Metadata-Version: 2.1\nName: %s\nVersion: %s\n" % (name, version)
    for r in requires:
        metadata += "Requires-Dist: %s\n" % r
    if description:
        metadata += "\n" + description
    files = dict(modules)
    files[info + "/METADATA"] = metadata
    files[info + "/WHEEL"] = ("Wheel-Version: 1.0\nGenerator: mcp-sandbox-tests\n"
                              "Root-Is-Purelib: true\nTag: py3-none-any\n")
    record = ""
    for path, text in files.items():
        data = text.encode()
        record += "%s,%s,%d\n" % (path, record_hash(data), len(data))
    record += info + "/RECORD,,\n"
    files[info + "/RECORD"] = record
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for path, text in files.items():
            info = zipfile.ZipInfo(path, (2024, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, text)
    return "%s-%s-py3-none-any.whl" % (dist, version), buf.getvalue()


def sdist(name, version):
    buf = io.BytesIO()
    root = "%s-%s" % (name, version)
    with tarfile.open(fileobj=buf, mode="w:gz") as t:
        for path, text in {
            root + "/PKG-INFO": "Metadata-Version: 2.1\nName: %s\nVersion: %s\n" % (name, version),
            root + "/setup.py": "raise SystemExit('setup.py must never run')\n",
        }.items():
            data = text.encode()
            info = tarfile.TarInfo(path)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    return root + ".tar.gz", buf.getvalue()


def normalize(name):
    out, sep = [], False
    for c in name:
        if c in "-_.":
            sep = True
            continue
        if sep and out:
            out.append("-")
        sep = False
        out.append(c.lower())
    return "".join(out)


def main():
    top = sys.argv[1]
    projects = {}

    later = {}

    def add(project, filename, data, subdir="", pages=("now", "later")):
        os.makedirs(os.path.join(top, "files", subdir), exist_ok=True)
        with open(os.path.join(top, "files", subdir, filename), "wb") as f:
            f.write(data)
        entry = (os.path.join(subdir, filename), hashlib.sha256(data).hexdigest())
        if "now" in pages:
            projects.setdefault(normalize(project), []).append(entry)
        if "later" in pages:
            later.setdefault(normalize(project), []).append(entry)

    for version in ("1.0", "2.0"):
        add("sbxdemo", *wheel("sbxdemo", version, {
            "sbxdemo/__init__.py": "VERSION = %r\n\ndef hello():\n    return 'hello from sbxdemo'\n"
                                   % version}))
    add("sbxapp", *wheel("sbxapp", "1.0", {"sbxapp/__init__.py": "import sbxdemo\nREADY = True\n"},
                         requires=["sbxdemo"]))
    add("Sbx_Mixed.Case", *wheel("Sbx_Mixed.Case", "0.1", {"sbx_mixed_case.py": "OK = 1\n"}))
    add("sbxsrc", *sdist("sbxsrc", "1.0"))
    add("sbxother", *wheel("sbxother", "1.0", {"sbxother.py": "OK = 1\n"}))
    add("sbxwants", *wheel("sbxwants", "1.0", {"sbxwants.py": "import sbxother\n"},
                           requires=["sbxother"]))
    add("sbxlong", *wheel("sbxlong", "1.0", {"sbxlong.py": "import sbxother\n"},
                          requires=["sbxother"], description="x" * (5 << 20)))

    add("sbxshift", *wheel("sbxshift", "1.0", {"sbxshift.py": "import sbxdemo\nVERSION = '1.0'\n"},
                           requires=["sbxdemo"]))
    add("sbxshift", *wheel("sbxshift", "1.1", {"sbxshift.py": "import sbxother\nVERSION = '1.1'\n"},
                           requires=["sbxother"]), pages=("later",))
    add("sbxswap", *wheel("sbxswap", "1.0", {"sbxswap.py": "SWAPPED = False\n"}), pages=("now",))
    swapped = wheel("sbxswap", "1.0", {"sbxswap.py": "import sbxother\nSWAPPED = True\n"},
                    requires=["sbxother"])
    add("sbxswap", *swapped, subdir="swapped", pages=("later",))
    changing = ("sbxshift", "sbxswap")

    with open(os.path.join(top, "files", "big.bin"), "wb") as f:
        f.write(os.urandom(2 << 20))

    simple = os.path.join(top, "simple")
    os.makedirs(simple, exist_ok=True)
    with open(os.path.join(simple, "index.html"), "w") as f:
        f.write("<!DOCTYPE html><html><body>\n")
        for p in sorted(projects):
            f.write('<a href="%s/">%s</a>\n' % (p, p))
        f.write("</body></html>\n")
    def page(path, files):
        with open(path, "w") as f:
            f.write("<!DOCTYPE html><html><body>\n")
            for filename, digest in files:
                f.write('<a href="../../files/%s#sha256=%s">%s</a>\n'
                        % (filename, digest, os.path.basename(filename)))
            f.write("</body></html>\n")

    for p, files in projects.items():
        os.makedirs(os.path.join(simple, p), exist_ok=True)
        page(os.path.join(simple, p, "index.html"), files)
        if p in changing:
            page(os.path.join(simple, p, "later.html"), later[p])


if __name__ == "__main__":
    main()
