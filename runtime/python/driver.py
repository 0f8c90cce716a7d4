# The Python driver that runs inside every sandbox. It keeps one interpreter alive so that
# variables persist between executions, and talks to the server over a private framed channel,
# requests in on fd 3 and frames out on fd 4 (see src/service/channel.h), which it moves to the
# top of its fd table at once; user output goes to fds 1 and 2 untouched.
#
# An idle sandbox is mostly this interpreter, so the driver is frugal: it runs under
# `python3 -I -S` and imports only C modules up front (posix, errno, _json, _signal,
# _weakref, _ast, _ctypes). Everything else (traceback, ast, subprocess, site) is imported
# when first needed.
import _json
import _signal
import _weakref
import errno
import posix
import sys

CHANNEL_IN_FD = 3
CHANNEL_OUT_FD = 4
MAX_FRAME = 16 * 1024 * 1024
FIGURES_KEPT = 16
PY_CF_ONLY_AST = 0x400
PY_CF_ALLOW_TOP_LEVEL_AWAIT = 0x2000
CO_COROUTINE = 0x80

# -S skips site.py (and the megabyte it costs); put back what it would have added to sys.path.
for _dir in ("/usr/local/lib/python3.%d/dist-packages" % sys.version_info[1],
             "/usr/lib/python3/dist-packages",
             "/usr/lib/python3.%d/dist-packages" % sys.version_info[1]):
    try:
        posix.stat(_dir)
    except OSError:
        continue
    if _dir not in sys.path:
        sys.path.append(_dir)


def _own(name):
    # The driver's own imports come from the standard library, never from a file of the same
    # name in the working directory (a user's io.py or subprocess.py), which "" on sys.path
    # would find first.
    mod = sys.modules.get(name)
    if mod is None:
        path = sys.path
        sys.path = [p for p in path if p != ""]
        try:
            __import__(name)
        finally:
            sys.path = path
        mod = sys.modules[name]
    return mod


class _JsonContext:
    # What _json's scanner reads from json.JSONDecoder, without importing json (and re).
    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = float
    memo = None


def _not_json(obj):
    raise TypeError("not JSON serialisable: %r" % type(obj).__name__)


_scan = _json.make_scanner(_JsonContext())
_encode = _json.make_encoder(None, _not_json, _json.encode_basestring_ascii, None, ":", ",",
                             False, False, True)
_encode_utf8 = _json.make_encoder(None, _not_json, _json.encode_basestring, None, ":", ",",
                                  False, False, True)


def json_loads(data):
    obj, end = _scan(data.decode("utf-8"), 0)
    return obj


def json_dumps(obj):
    data = "".join(_encode(obj, 0)).encode("ascii")
    if b"\\ud" in data:
        # A lone surrogate (from a file name that is not UTF-8, say) escaped as JSON is not
        # JSON the server accepts: raw UTF-8 then, with such code points as "?".
        data = "".join(_encode_utf8(obj, 0)).encode("utf-8", "replace")
    return data


def _utf8_name(path):
    try:
        path.encode("utf-8")
        return True
    except UnicodeEncodeError:
        return False


class Channel:
    def __init__(self, in_fd, out_fd):
        self.fd = in_fd
        self.out_fd = out_fd
        self.buf = b""
        # Bytes of a request have been read since the driver last finished one: what an
        # interrupt that lands now is for (Driver.on_sigint).
        self.got = False

    def fill(self, want):
        # Reads until the buffer holds want bytes: one read for a usual frame; the chunks of a
        # large one are joined once instead of being copied again at every read.
        buf = self.buf
        if len(buf) >= want:
            return buf
        parts, have = [buf], len(buf)
        while have < want:
            try:
                chunk = posix.read(self.fd, max(65536, want - have))
            except InterruptedError:
                continue
            self.got = True
            if not chunk:
                raise EOFError("the server closed the channel")
            parts.append(chunk)
            have += len(chunk)
        self.buf = buf = b"".join(parts)
        return buf

    def recv(self):
        n = int.from_bytes(self.fill(4)[:4], "big")
        if n > MAX_FRAME:
            raise ValueError("frame too large")
        buf = self.fill(4 + n)
        self.buf = buf[4 + n:]
        obj = json_loads(buf[4:4 + n])
        if not isinstance(obj, dict):
            raise ValueError("frame is not an object")
        return obj

    def send(self, obj):
        self.send_json(json_dumps(obj))

    def send_json(self, data):
        frame = len(data).to_bytes(4, "big") + data
        try:
            n = posix.write(self.out_fd, frame)
        except InterruptedError:
            n = 0
        if n == len(frame):
            return
        # The rest of a frame larger than the pipe takes several writes.
        view = memoryview(frame)[n:]
        while view:
            try:
                n = posix.write(self.out_fd, view)
            except InterruptedError:
                continue
            view = view[n:]


class Rejected(Exception):
    pass


def _to_top(fd, place):
    # The driver's own fds sit at the top of the fd table (place 1 is the highest), out of the
    # way of code that closes or reuses the low ones (os.close(3), os.dup2(f, 4)): at 3 and 4
    # that cut the channel, and the interpreter's state went with it. Code that means to can
    # still find them in /proc/self/fd, and closerange over the whole table still reaches them.
    top = posix.sysconf("SC_OPEN_MAX")
    if top <= 64:
        return fd
    posix.dup2(fd, top - place, False)
    posix.close(fd)
    return top - place


class OutputLost(Exception):
    pass


def _usable(stream):
    # Gone, closed or detached (ValueError) is not usable; a writer with no .closed (a tee
    # class, say) is.
    if stream is None:
        return False
    try:
        return not stream.closed
    except AttributeError:
        return hasattr(stream, "write")
    except Exception:
        return False


def make_guard(profile, modules, calls, attributes):
    # The static guard of the tight profile. It is defence in depth, not the boundary: Python
    # is too dynamic for an AST check to contain code, so the kernel layers (namespaces,
    # seccomp, Landlock, limits) are what hold. The lists come from the server's config.
    ast = _own("ast")

    modules, calls, attributes = frozenset(modules), frozenset(calls), frozenset(attributes)
    # No module holds trace or profile under that name, while numpy.trace and many objects'
    # .profile are everyday attributes: those two are denied as imports only.
    attribute_routes = modules - {"trace", "profile"}

    def reject(what):
        raise Rejected("rejected by policy (profile %s): %s" % (profile, what))

    def denied_module(name):
        # A C twin counts as its module: _socket is socket, _io is io.
        top = name.split(".")[0]
        if top in modules:
            return top
        return top.lstrip("_") if top.lstrip("_") in modules else None

    class Guard(ast.NodeVisitor):
        def check_module(self, name):
            if name and denied_module(name):
                reject("import of module '%s'" % denied_module(name))

        def visit_Import(self, node):
            for alias in node.names:
                self.check_module(alias.name)
            self.generic_visit(node)

        def visit_ImportFrom(self, node):
            if node.level == 0:
                self.check_module(node.module)
            # from operator import attrgetter: a denied name taken by import.
            for alias in node.names:
                if alias.name in calls or alias.name in attributes:
                    reject("import of '%s'" % alias.name)
            self.generic_visit(node)

        def visit_Call(self, node):
            f = node.func
            name = None
            if isinstance(f, ast.Name):
                name = f.id
            elif isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and \
                    f.value.id in ("builtins", "__builtins__"):
                name = f.attr
            if name in calls:
                reject("call of '%s'" % name)
            self.generic_visit(node)

        def visit_Name(self, node):
            # Taking a denied builtin by name (f = eval) is as good as calling it.
            if node.id in calls and isinstance(node.ctx, ast.Load):
                reject("call of '%s'" % node.id)
            if node.id in attributes:
                reject("attribute '%s'" % node.id)

        def visit_Attribute(self, node):
            if node.attr in attributes:
                reject("attribute '%s'" % node.attr)
            # A denied module reached through another one's attribute (posixpath.os).
            if node.attr in attribute_routes:
                reject("module '%s' through an attribute" % node.attr)
            self.generic_visit(node)

        def visit_MatchClass(self, node):
            # case object(__class__=t): attribute names in a pattern are plain strings.
            for name in node.kwd_attrs:
                if name in attributes:
                    reject("attribute '%s'" % name)
            self.generic_visit(node)

        def visit_Constant(self, node):
            # Strings naming a denied attribute feed getattr-like tricks.
            if isinstance(node.value, str) and node.value in attributes:
                reject("attribute '%s'" % node.value)

    guard = Guard()
    # A top-level await runs on the driver's asyncio: imported for code that may not import it.
    guard.denies_asyncio = denied_module("asyncio") is not None
    guard.reject = reject
    return guard


class Inotify:
    # inotify tells whether anything changed in the workspace since the last scan, so an
    # execution that touched no file costs one read() instead of a directory walk. The
    # stdlib has no binding; a minimal one over _ctypes costs a few kB (ctypes itself,
    # hundreds). Without it (or past the per-user instance limit) every execution scans.
    FLAGS = 0x2 | 0x4 | 0x8 | 0x40 | 0x80 | 0x100 | 0x200 | 0x400 | 0x800

    def __init__(self):
        import _ctypes

        fcntl = _own("fcntl")

        self.ioctl = fcntl.ioctl
        self.pending = bytearray(4)

        class Int(_ctypes._SimpleCData):
            _type_ = "i"

        class Func(_ctypes.CFuncPtr):
            _flags_ = _ctypes.FUNCFLAG_CDECL
            _restype_ = Int

        class Libc:
            _handle = _ctypes.dlopen(None, 0)

        self.add = Func(("inotify_add_watch", Libc))
        # Compiling this driver left freed heap behind; hand it back to the kernel, since
        # an idle sandbox is mostly this process.
        Func(("malloc_trim", Libc))(0)
        fd = Func(("inotify_init1", Libc))(posix.O_NONBLOCK | posix.O_CLOEXEC)
        if fd < 0:
            raise OSError("inotify_init1 failed")
        self.fd = _to_top(fd, 5)
        self.watched = set()

    def watch(self, dirs):
        for d in dirs:
            if d not in self.watched:
                if self.add(self.fd, d.encode("utf-8", "surrogateescape"), self.FLAGS) < 0:
                    raise OSError("inotify watch limit")
                self.watched.add(d)

    def quiet(self):
        # FIONREAD: one syscall, and no exception raised when nothing happened (the usual case).
        self.ioctl(self.fd, 0x541B, self.pending, True)
        if not any(self.pending):
            return True
        # Events only say that something changed: take them all; the caller scans. A directory
        # deleted and made again is a new inode without a watch: the scan watches every
        # directory afresh (an inode already watched keeps its watch).
        try:
            while posix.read(self.fd, 65536):
                pass
        except BlockingIOError:
            pass
        self.watched.clear()
        return False

    def close(self):
        posix.close(self.fd)


def _cache_source(linecache, name, code):
    # No mtime: linecache.checkcache keeps the entry (it is no file to go stale).
    linecache.cache[name] = (len(code), None, code.splitlines(True), name)


class _SeedingLoader:
    # linecache's own loader, which then puts the sources of the cells whose code can still run
    # into the new module's cache: traceback.print_exc() or inspect.getsource() in the cell
    # that imported them shows its lines too.
    def __init__(self, loader, sources):
        self.loader = loader
        self.sources = sources

    def __getattr__(self, name):
        return getattr(self.loader, name)

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        self.loader.exec_module(module)
        try:
            for name, code in list(self.sources.items()):
                _cache_source(module, name, code)
        except Exception:
            pass  # a linecache.py of the user's, found first on sys.path


class _LinecacheSeeder:
    # A finder that only ever sees the first import of linecache (it leaves sys.meta_path
    # then); every other import passes it with one comparison.
    def __init__(self, sources):
        self.sources = sources

    def find_spec(self, name, path=None, target=None):
        if name != "linecache":
            return None
        try:
            sys.meta_path.remove(self)
        except ValueError:
            pass
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            spec = find(name, path, target) if find else None
            if spec is not None:
                if spec.loader is not None:
                    spec.loader = _SeedingLoader(spec.loader, self.sources)
                return spec
        return None


class Driver:
    def __init__(self, chan):
        self.chan = chan
        # User code gets a fresh __main__ module (pickle and dataclasses look it up there);
        # the driver's own globals stay out of its namespace.
        main_mod = type(sys)("__main__")
        main_mod.__builtins__ = __builtins__
        sys.modules["__main__"] = main_mod
        self.ns = main_mod.__dict__
        self.cell = 0
        self.sources = {}  # cell name -> source, while code compiled from it can still run
        if "linecache" not in sys.modules:
            sys.meta_path.insert(0, _LinecacheSeeder(self.sources))
        self.live_codes = {}  # cell name -> how many of its code objects are still alive
        self.code_cells = {}  # id of a weak reference to such code -> (the reference, cell name)
        self.code_gone = self.on_code_gone  # one bound method for every reference
        # The count settle_source's loop sees for a code object nothing else holds.
        for code in [compile("0", "<probe>", "eval")]:
            self.sole_refs = sys.getrefcount(code)
        self.workspace = "/workspace"
        self.packages_dir = None
        self.figures_dir = "/workspace/.mcp"
        self.guard = None
        self.max_images = 4
        self.max_image_bytes = 1 << 20
        self.max_files = 20
        self.max_scan = 2000
        self.max_text = 64 * 1024
        self.clipped = False
        self.running = False
        self.interrupt_pending = False
        # The user's code of this execution has ended (what is left is the driver's: figures,
        # the workspace scan), and an interrupt came after that: the server's deadline fell
        # on the driver's work, not on the code. Only this handler can tell, so a signal the
        # code ignored or handled itself never counts as late.
        self.code_done = False
        self.interrupt_late = False
        self.refresh_pending = False
        self.event_loop = None  # for cells that await at the top, made when one first does
        self.last_snapshot = None
        self.scan_capped = False
        self.report_usage = False
        self.inotify = None
        self.saved_figures = None  # paths of the figures saved as files, oldest first
        # What marks an expression statement in "single" mode: False until first needed, None
        # if this Python has no such instruction (every cell then takes the AST path).
        self.print_pair = False
        # os.fork() in a cell makes a second interpreter that returns into this loop when the
        # cell ends. Only this process may answer the server: the copy would send a second
        # result, then take every other request, with its own diverging variables.
        self.pid = posix.getpid()
        posix.register_at_fork(after_in_child=self.forget_channel)
        # The pipes the server reads, kept apart (not inherited: os.dup): code may close or
        # replace fd 1 or 2, and every run starts with them restored (restore_output). And how
        # sys.stdout and sys.stderr were opened, for one that code closed, detached or deleted.
        self.output_fds = (_to_top(posix.dup(1), 3), _to_top(posix.dup(2), 4))
        self.stream_params = [(s.encoding, s.errors, s.line_buffering)
                              for s in (sys.stdout, sys.stderr)]

    # ---- setup ----

    def init(self, req):
        self.workspace = req.get("workspace") or self.workspace
        self.packages_dir = req.get("packages_dir")
        self.figures_dir = req.get("figures_dir") or self.figures_dir
        self.max_images = int(req.get("max_images", self.max_images))
        self.max_image_bytes = int(req.get("max_image_bytes", self.max_image_bytes))
        self.max_files = int(req.get("max_files", self.max_files))
        self.max_scan = int(req.get("max_scan_files", self.max_scan))
        self.max_text = max(1024, int(req.get("max_text_bytes", self.max_text)))
        # Without a cgroup the server sees neither the CPU time nor the memory peak: report ours.
        self.report_usage = bool(req.get("report_usage", False))
        g = req.get("guard")
        if isinstance(g, dict):
            self.guard = make_guard(req.get("profile", "?"), g.get("modules", ()),
                                    g.get("calls", ()), g.get("attributes", ()))
        if self.packages_dir:
            try:
                posix.mkdir(self.packages_dir, 0o755)
            except OSError:
                pass
            if self.packages_dir not in sys.path:
                sys.path.insert(0, self.packages_dir)
        try:
            posix.chdir(self.workspace)
        except OSError:
            pass
        try:
            self.inotify = Inotify()
        except Exception:
            self.inotify = None
        _signal.signal(_signal.SIGINT, self.on_sigint)
        # Like python3 -c and Jupyter: modules in the working directory (the workspace) import.
        # Not under a static guard, which checks the cell, not the modules it imports.
        if self.guard is None and "" not in sys.path:
            sys.path.insert(0, "")

    def refresh_imports(self):
        # Packages just installed into packages_dir import without a restart; .pth files
        # there are honoured as well.
        importlib = _own("importlib")
        site = _own("site")

        importlib.invalidate_caches()
        if self.packages_dir:
            site.addsitedir(self.packages_dir)

    def on_sigint(self, signum, frame):
        # The server interrupts only an execution it has sent. One whose request is arriving
        # or being set up (read, compiled, bash started) is kept for the moment the user's code
        # starts: dropped, the code would run on until the server's grace ran out and it
        # killed the interpreter. Otherwise the interrupt came for the execution that just
        # ended (its code is done), or is moot.
        if self.running:
            raise KeyboardInterrupt
        if self.request_arriving():
            self.interrupt_pending = True
        elif self.code_done:
            self.interrupt_late = True

    def request_arriving(self):
        # Read in part or whole. Bytes still unread in the pipe do not count: an interrupt the
        # server sent for the execution that just ended (its deadline fell as its code ended)
        # may reach the driver only after the next request was written, and must not stop
        # that one.
        return self.chan.got or bool(self.chan.buf)

    def request_done(self):
        # The request read last has been served: an interrupt kept for it is moot now, and
        # one that lands later is for a request still to come, if any.
        self.chan.got = False
        self.interrupt_pending = self.interrupt_pending and self.request_arriving()

    def forget_channel(self):
        # In a fork: the channel is the original's alone, and a lingering copy must not hold it
        # open.
        for fd in (self.chan.fd, self.chan.out_fd):
            try:
                posix.close(fd)
            except OSError:
                pass

    def end_if_forked(self, error, exit_code):
        # The fork ran the rest of the cell, as a script's fork runs the rest of the script;
        # then it ends as a script would, its error on stderr, without touching the channel.
        if posix.getpid() == self.pid:
            return
        try:
            if error is not None:
                print(error["traceback"] or "%s: %s" % (error["type"], error["message"]),
                      file=sys.stderr, end="" if error["traceback"] else "\n")
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            posix._exit(exit_code & 0xFF if isinstance(exit_code, int) else 1)

    def start_running(self):
        self.running = True
        if self.interrupt_pending:
            self.interrupt_pending = False
            raise KeyboardInterrupt

    # ---- workspace changes ----

    def snapshot(self):
        seen = {}
        skip = (self.figures_dir, self.packages_dir)
        stack = [self.workspace]
        dirs = []
        # Past max_scan files the rest is neither scanned nor watched: a change there goes
        # unseen, which the result says (files_incomplete).
        self.scan_capped = False
        while stack:
            if len(seen) >= self.max_scan:
                self.scan_capped = True
                break
            d = stack.pop()
            dirs.append(d)
            try:
                it = posix.scandir(d)
            except OSError:
                continue
            with it:
                for e in it:
                    if len(seen) >= self.max_scan:
                        self.scan_capped = True
                        break
                    if e.name.startswith(".") or e.path in skip:
                        continue
                    try:
                        if e.is_dir(follow_symlinks=False):
                            stack.append(e.path)
                        elif e.is_file(follow_symlinks=False):
                            st = e.stat(follow_symlinks=False)
                            seen[e.path] = (st.st_mtime_ns, st.st_size)
                    except OSError:
                        pass
        if self.inotify is not None:
            try:
                self.inotify.watch(dirs)
            except Exception:
                self.inotify.close()
                self.inotify = None
        return seen

    def workspace_quiet(self):
        # Whether inotify saw nothing change since the last scan. Code that closed its fd
        # loses it for good: every run then scans.
        if self.inotify is None:
            return False
        try:
            return self.inotify.quiet()
        except OSError:
            self.inotify = None
            return False

    def changed(self, before):
        # Returns the changed files, at most max_files, and whether that list is incomplete.
        if self.last_snapshot is not None and self.workspace_quiet():
            return [], self.scan_capped
        after = self.snapshot()
        # The state after one execution is the state before the next: one scan per call.
        self.last_snapshot = after
        # A name that is not UTF-8 cannot become a link: it is left out.
        out = sorted(p for p, v in after.items() if before.get(p) != v and _utf8_name(p))
        return out[: self.max_files], self.scan_capped or len(out) > self.max_files

    # ---- figures ----

    def collect_figures(self, plt, exec_id):
        images, files = [], []
        base64, io, os = _own("base64"), _own("io"), _own("os")

        for n, num in enumerate(list(plt.get_fignums())):
            buf = io.BytesIO()
            try:
                plt.figure(num).savefig(buf, format="png")
            except Exception as e:
                print("figure %s: %s" % (num, e), file=sys.stderr)
                continue
            data = buf.getvalue()
            if len(images) < self.max_images and len(data) <= self.max_image_bytes:
                images.append({"mime": "image/png", "data": base64.b64encode(data).decode()})
            else:
                # A figure that cannot be saved (the user's code put a file where the
                # directory goes, say) costs only itself: the others still come back.
                d = os.path.join(self.figures_dir, "figures")
                path = os.path.join(d, "fig-%s-%d.png" % (exec_id, n + 1))
                try:
                    os.makedirs(d, exist_ok=True)
                    with open(path, "wb") as f:
                        f.write(data)
                except OSError as e:
                    print("figure %s could not be saved: %s" % (num, e), file=sys.stderr)
                    try:
                        os.unlink(path)  # a part written before the disk filled
                    except OSError:
                        pass
                    continue
                files.append(path)
        plt.close("all")
        if files:
            self.keep_figures(os, os.path.dirname(files[0]), files)
        return images, files

    def keep_figures(self, os, d, new):
        # The newest FIGURES_KEPT saved figures stay, and all of this run's (the result links
        # them): a long session of plots would fill /workspace. Those an earlier interpreter
        # saved count too.
        if self.saved_figures is None:
            try:
                with os.scandir(d) as it:
                    old = [(e.stat(follow_symlinks=False).st_mtime_ns, e.path) for e in it
                           if e.name.startswith("fig-") and e.name.endswith(".png")
                           and e.is_file(follow_symlinks=False) and e.path not in new]
            except OSError:
                old = []
            self.saved_figures = [p for _, p in sorted(old)]
        drop = len(self.saved_figures) + len(new) - FIGURES_KEPT
        drop = max(0, min(drop, len(self.saved_figures)))
        for path in self.saved_figures[:drop]:
            try:
                os.unlink(path)
            except OSError:
                pass
        self.saved_figures = self.saved_figures[drop:] + new

    def hook_show(self, plt):
        # plt.show() must not block (there is no display); figures stay open and come back.
        if not getattr(plt.show, "_sandbox", False):
            def show(*args, **kwargs):
                return None

            show._sandbox = True
            plt.show = show

    # ---- execution ----

    def clip(self, text):
        # A result or an error past the cap keeps its head and tail, as output does; uncut, a
        # big repr made a frame the server had to refuse.
        if len(text) <= self.max_text:
            return text
        self.clipped = True
        keep = self.max_text // 2
        return "%s\n... [%d characters omitted] ...\n%s" % (text[:keep], len(text) - 2 * keep,
                                                           text[-keep:])

    def format_exception(self, etype, value, tb):
        linecache, traceback = _own("linecache"), _own("traceback")

        # A copy: the garbage collector may drop a source meanwhile.
        for name, code in list(self.sources.items()):
            _cache_source(linecache, name, code)
        # Drop the driver's own frames: the user sees only their code. They lead, and after a
        # timeout the interrupt handler's frame is the last.
        while tb is not None and not tb.tb_frame.f_code.co_filename.startswith("<cell-"):
            tb = tb.tb_next
        own = Driver.format_exception.__code__.co_filename
        node = tb
        while node is not None and node.tb_next is not None:
            if node.tb_next.tb_frame.f_code.co_filename == own:
                node.tb_next = None
            node = node.tb_next
        if issubclass(etype, SyntaxError):
            text = "".join(traceback.format_exception_only(etype, value))
        else:
            text = "".join(traceback.format_exception(etype, value, tb))
        try:
            message = str(value)
        except Exception:
            message = "<exception str() failed>"
        return {"type": etype.__name__, "message": self.clip(message),
                "traceback": self.clip(text)}

    def describe_error(self, etype, value, tb):
        # A broken exception (or a user who broke traceback) must not take the interpreter's
        # state with it.
        try:
            return self.format_exception(etype, value, tb)
        except BaseException:
            # Formatting imports traceback, which needs a free fd; the message may still do.
            try:
                message = self.clip(str(value))
            except BaseException:
                message = "<the error could not be formatted>"
            return {"type": getattr(etype, "__name__", "Exception"), "message": message,
                    "traceback": None}

    def compile_statement(self, code, name):
        # One line holding one simple statement that is not an expression compiles straight
        # from its source, skipping the AST's round trip (half the cost of x = 1). No ':' or
        # ';' means no compound statement, lambda, slice or second statement; "single" mode
        # takes exactly one statement and marks an expression statement with its print
        # instruction, which sends the line to the AST path, where its value becomes the
        # result. Anything else, an error included, takes the AST path as well.
        if self.guard is not None or ":" in code or ";" in code or "\r" in code:
            return None
        if "\n" in code.rstrip() or self.print_pair is None:
            return None
        try:
            single = compile(code, name, "single")
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return None
        if self.print_pair is False:
            try:
                opmap = _own("opcode").opmap
            except Exception:
                # The import needs a free fd, and the user's code may hold them all: the AST
                # path needs none, and the next cell tries again.
                return None
            # 3.11 prints with PRINT_EXPR; 3.12 on with CALL_INTRINSIC_1 1 (INTRINSIC_PRINT).
            if "PRINT_EXPR" in opmap:
                self.print_pair = bytes((opmap["PRINT_EXPR"], 0))
            elif "CALL_INTRINSIC_1" in opmap:
                self.print_pair = bytes((opmap["CALL_INTRINSIC_1"], 1))
            else:
                self.print_pair = None
                return None
        # Instructions are two bytes: only a match at an even offset is one.
        at = single.co_code.find(self.print_pair)
        while at >= 0:
            if at % 2 == 0:
                return None
            at = single.co_code.find(self.print_pair, at + 1)
        return single

    def run_python(self, code):
        self.cell += 1
        name = "<cell-%d>" % self.cell
        # The source serves tracebacks: this cell's, and later ones through what it defined.
        self.sources[name] = code
        linecache = sys.modules.get("linecache")
        if linecache is not None:
            try:
                _cache_source(linecache, name, code)
            except Exception:
                pass  # the user's code replaced it
        codes = []
        try:
            return self.run_cell(code, name, codes)
        finally:
            self.settle_source(name, codes)

    def settle_source(self, name, codes):
        # A cell's source stays while code compiled from it can still run or be shown: its
        # functions, classes, lambdas and generators, and the cell itself while a saved
        # traceback holds its frame. Keeping every cell's cost memory and, at each error, time
        # in proportion to the whole history (2 KB cells: 77 MB and 72 ms an error after
        # 15,000). A cell's own code is usually held by nothing once it ran: a reference count
        # tells, cheaper than a weak reference for every cell.
        live = []
        for code in codes:
            if sys.getrefcount(code) > self.sole_refs:
                live.append(code)
            stack = [code]
            while stack:
                for c in stack.pop().co_consts:
                    if type(c) is CodeType:
                        live.append(c)
                        stack.append(c)
        if not live:
            self.drop_source(name)
            return
        self.live_codes[name] = len(live)
        for c in live:
            ref = _weakref.ref(c, self.code_gone)
            self.code_cells[id(ref)] = (ref, name)

    def on_code_gone(self, ref):
        # Every reference is in code_cells, and its cell in live_codes until its last one goes.
        _, name = self.code_cells.pop(id(ref))
        self.live_codes[name] -= 1
        if not self.live_codes[name]:
            self.drop_source(name)

    def drop_source(self, name):
        self.sources.pop(name, None)
        self.live_codes.pop(name, None)
        linecache = sys.modules.get("linecache")
        if linecache is not None:
            try:
                linecache.cache.pop(name, None)
            except Exception:
                pass  # the user's code replaced it

    def run_cell(self, code, name, codes):
        single = self.compile_statement(code, name)
        if single is not None:
            codes.append(single)
        else:
            try:
                tree = compile(code, name, "exec", PY_CF_ONLY_AST)
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                # ValueError: a NUL in the source; the others: nesting too deep to parse.
                return False, None, self.describe_error(*sys.exc_info()), 1
            if self.guard is not None:
                try:
                    self.guard.visit(tree)
                except RecursionError:
                    raise Rejected("rejected by policy: the code is nested too deeply to check")
            # await, async for and async with at the top, as in a notebook: the cell's code is
            # then a coroutine, run to its end on the interpreter's event loop.
            flags = PY_CF_ALLOW_TOP_LEVEL_AWAIT if "async" in code or "await" in code else 0
            if flags and self.guard is not None and self.guard.denies_asyncio:
                try:
                    top_level = compile(tree, name, "exec", flags).co_flags & CO_COROUTINE
                except (SyntaxError, ValueError, RecursionError, MemoryError):
                    top_level = False  # reported when the cell is compiled to run
                if top_level:
                    self.guard.reject("a top-level await, async for or async with runs on "
                                      "asyncio, which this profile denies")
            last = None
            if tree.body and type(tree.body[-1]).__name__ == "Expr":
                import _ast

                last = _ast.Expression(tree.body.pop().value)
        try:
            self.start_running()
            if single is not None:
                exec(single, self.ns)
                return True, None, None, 0
            if tree.body:
                codes.append(compile(tree, name, "exec", flags))
                self.run_code(codes[-1])
            result = None
            if last is not None:
                codes.append(compile(last, name, "eval", flags))
                value = self.run_code(codes[-1])
                if value is not None:
                    self.ns["_"] = value
                    result = self.clip(repr(value))
            return True, result, None, 0
        except SystemExit as e:
            # sys.exit() ends the cell, not the interpreter; its status is what a process's
            # would be (sys.exit(256) is 0, sys.exit(-1) is 255).
            code = e.code & 0xFF if isinstance(e.code, int) else (0 if e.code is None else 1)
            if e.code is not None and not isinstance(e.code, int):
                try:
                    print(e.code, file=sys.stderr)
                except Exception:
                    pass
            if code == 0:
                return True, None, None, 0
            return False, None, {"type": "SystemExit", "message": "exit code %d" % code,
                                 "traceback": None}, code
        except BaseException:
            return False, None, self.describe_error(*sys.exc_info()), 1
        finally:
            self.running = False

    def run_code(self, code):
        value = eval(code, self.ns)
        if not code.co_flags & CO_COROUTINE:
            return value
        try:
            asyncio = _own("asyncio")
            # One loop for every cell, so that tasks a cell starts go on in the next; made again
            # if the user's code closed it.
            if self.event_loop is None or self.event_loop.is_closed():
                self.event_loop = asyncio.new_event_loop()
            task = self.event_loop.create_task(value)
        except BaseException:
            value.close()
            raise
        try:
            return self.event_loop.run_until_complete(task)
        except BaseException:
            # Interrupted (a timeout, a cancel): the cell's coroutine is cancelled and given a
            # moment, within the server's grace, to run its finally blocks here, in its own
            # cell, rather than in whichever cell runs the loop next.
            task.cancel()
            try:
                self.event_loop.run_until_complete(asyncio.wait([task], timeout=1.0))
            except BaseException:
                pass
            raise

    def run_command(self, argv, cwd, env=None):
        try:
            # The imports are inside: they open files too, and a cell may have used every fd.
            signal, subprocess = _own("signal"), _own("subprocess")
            child = subprocess.Popen(argv, stdin=subprocess.DEVNULL, env=env,
                                     cwd=cwd or self.workspace, start_new_session=True)
        except OSError as e:
            message = str(e)
            if e.errno == errno.EMFILE:
                message += " (every file descriptor of the interpreter is in use: close the" \
                           " files your code opened, or reset the sandbox)"
            return False, {"type": type(e).__name__, "message": message, "traceback": None}, \
                127, False
        interrupted = False
        try:
            self.start_running()
            status = child.wait()
        except KeyboardInterrupt:
            # Forward the interrupt to the command's process group; kill it if it lingers.
            interrupted = True
            self.running = False
            try:
                posix.killpg(child.pid, signal.SIGINT)
                status = child.wait(timeout=1.0)
            except subprocess.TimeoutExpired:
                posix.killpg(child.pid, signal.SIGKILL)
                status = child.wait()
            except OSError:
                status = child.wait()
        finally:
            self.running = False
        # Background processes of the command may keep running (like in a terminal); the
        # sandbox's limits and its end bound them.
        code = status if status >= 0 else 128 - status
        err = None
        if interrupted:
            err = {"type": "KeyboardInterrupt", "message": "the command was interrupted",
                   "traceback": None}
        elif code != 0:
            err = {"type": "CommandFailed", "message": "exit code %d" % code, "traceback": None}
        return code == 0, err, code, interrupted

    @staticmethod
    def cpu_seconds():
        # The driver's and its waited-for children's CPU time, in µs steps (times() counts
        # 10 ms ticks).
        resource = _own("resource")

        s = resource.getrusage(resource.RUSAGE_SELF)
        c = resource.getrusage(resource.RUSAGE_CHILDREN)
        return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime

    def restore_output(self):
        # Two dup2 calls (0.4 us) rather than a check of each: fstat costs more. A stream is
        # replaced only when it is unusable: one that works stays, as a script's would (were
        # a re-wrapped sys.stdout.buffer dropped, its destructor would close that buffer).
        posix.dup2(self.output_fds[0], 1)
        posix.dup2(self.output_fds[1], 2)
        if not (_usable(getattr(sys, "stdout", None)) and _usable(getattr(sys, "stderr", None))):
            io = _own("io")
            for name, fd, (encoding, errors, line_buffering) in (
                    ("stdout", 1, self.stream_params[0]), ("stderr", 2, self.stream_params[1])):
                if not _usable(getattr(sys, name, None)):
                    # Also as sys.__stdout__ (__stderr__): then it outlives a replacement of
                    # its own (whose buffer it shares), and sys.stdout = sys.__stdout__ works.
                    stream = io.open(fd, "w", 1 if line_buffering else -1, encoding, errors,
                                     closefd=False)
                    setattr(sys, name, stream)
                    setattr(sys, "__%s__" % name, stream)

    def flush_output(self):
        # What the run printed goes out with it. A flush that fails because the code closed or
        # replaced fd 1 or 2 leaves the text buffered, and restore_output would let it out in
        # the next run: the fds come back now instead, and it goes out here.
        failed = False
        for name in ("stdout", "stderr"):
            try:
                getattr(sys, name).flush()
            except Exception:
                failed = True
        if not failed:
            return
        try:
            posix.dup2(self.output_fds[0], 1)
            posix.dup2(self.output_fds[1], 2)
        except OSError:
            return
        for name in ("stdout", "stderr"):
            try:
                getattr(sys, name).flush()
            except Exception:
                pass

    def execute(self, req):
        # An interrupt that came while this request arrived stays pending (on_sigint).
        self.code_done = self.interrupt_late = False
        if self.refresh_pending:
            # Here, not when asked: an interrupt for this execution that lands meanwhile is
            # kept (interrupt_pending) instead of being cleared above.
            self.refresh_pending = False
            self.refresh_imports()
        exec_id = req.get("id")
        language = req.get("language", "python")
        code = req.get("code", "")
        before = self.last_snapshot
        # Changes since the last scan (a write_file between runs) belong to no run: a new
        # baseline.
        if before is None or (self.inotify is not None and not self.workspace_quiet()):
            before = self.last_snapshot = self.snapshot()
        t0 = self.cpu_seconds() if self.report_usage else 0
        # Fields left at their default (null, false, 0, []) are left out of the frame.
        out = {"op": "result", "id": exec_id}
        self.clipped = False
        interrupted = False
        try:
            try:
                self.restore_output()
            except Exception as e:
                # Code closed the driver's own copies too: nothing can reach the server.
                raise OutputLost("this sandbox's stdout and stderr were closed by earlier code "
                                 "and cannot be restored (%s); reset_sandbox starts a fresh "
                                 "interpreter" % e) from None
            argv = req.get("argv")
            if argv is not None or language == "bash":
                # A command: bash -c for execute_command, or an argv the server composed.
                # A composed argv brings its whole environment: what user code put in
                # os.environ (PIP_FIND_LINKS, say) must not reach it.
                ok, error, exit_code, interrupted = self.run_command(
                    argv if argv is not None else ["/bin/bash", "-c", code], req.get("cwd"),
                    req.get("env") if argv is not None else None)
            else:
                ok, result, error, exit_code = self.run_python(code)
                if result is not None:
                    out["result"] = result
                interrupted = error is not None and error["type"] == "KeyboardInterrupt"
        except Rejected as e:
            ok, error, exit_code = False, None, 1
            out["rejected"] = str(e)
        except OutputLost as e:
            ok, error, exit_code = False, {"type": "OutputLost", "message": str(e),
                                           "traceback": None}, 1
        except KeyboardInterrupt:
            ok, error, exit_code, interrupted = False, {
                "type": "KeyboardInterrupt", "message": "", "traceback": None}, 1, True
        self.code_done = True
        self.request_done()
        self.end_if_forked(error, exit_code)
        plt = sys.modules.get("matplotlib.pyplot") if language == "python" else None
        if plt is not None:
            self.hook_show(plt)
            try:
                images, image_files = self.collect_figures(plt, exec_id)
                if images:
                    out["images"] = images
                if image_files:
                    out["image_files"] = image_files
            except Exception as e:
                print("figures: %s" % e, file=sys.stderr)
        self.flush_output()
        files, files_incomplete = self.changed(before)
        out["success"] = ok
        if error is not None:
            out["error"] = error
        if interrupted:
            out["interrupted"] = True
        if self.interrupt_late:
            out["interrupt_after_code"] = True
        if exit_code:
            out["exit_code"] = exit_code
        if files:
            out["files"] = files
        if files_incomplete:
            out["files_incomplete"] = True
        if self.clipped:
            out["truncated"] = True
        if self.report_usage:
            resource = _own("resource")

            out["cpu_ns"] = int((self.cpu_seconds() - t0) * 1e9)
            out["maxrss_bytes"] = max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                                      resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) * 1024
        if len(out) == 3 and ok and type(exec_id) is int:
            # The usual result, which says nothing but success: formatted directly, a few
            # microseconds less than the encoder when the process comes back cold to its turn.
            self.chan.send_json(b'{"op":"result","id":%d,"success":true}' % exec_id)
            return
        self.chan.send(out)

    def serve(self):
        while True:
            try:
                req = self.chan.recv()
            except KeyboardInterrupt:
                continue
            op = req.get("op")
            if op == "exec":
                try:
                    self.execute(req)
                except Exception as e:
                    # The driver's own failure, not the code's: answer, and keep the state.
                    self.chan.send({"op": "result", "id": req.get("id"), "success": False,
                                    "exit_code": 1, "error": {
                                        "type": "DriverError", "traceback": None,
                                        "message": "the run could not be reported: %s: %s"
                                        % (type(e).__name__, e)}})
            elif op == "ping":
                self.chan.send({"op": "pong", "id": req.get("id")})
            elif op == "refresh_imports":
                self.refresh_pending = True
                self.chan.send({"op": "refreshed", "id": req.get("id")})
            elif op == "init":
                self.init(req)
                # The bootstrap says whether it loaded the build's bytecode or had to compile
                # the source (another Python version than at build time).
                self.chan.send({"op": "ready", "python": sys.version.split()[0],
                                "driver": globals().get("DRIVER_LOADED_FROM", "source")})
            else:
                self.chan.send({"op": "error", "id": req.get("id"),
                                "message": "unknown op %r" % (op,)})
            self.request_done()


def _exit(code=None):
    raise SystemExit(code)


class _Help:
    # site's help, which -S drops too: pydoc's, imported when first asked for.
    def __repr__(self):
        return "Type help() for interactive help, or help(object) for help about object."

    def __call__(self, *args, **kwargs):
        import pydoc

        return pydoc.help(*args, **kwargs)


CodeType = type(_exit.__code__)


def main():
    # -S also drops the exit()/quit() and help() helpers that people type.
    import builtins

    builtins.exit = builtins.quit = _exit
    builtins.help = _Help()
    # SIGINT while idle must not kill the driver; init() installs the real handler.
    _signal.signal(_signal.SIGINT, _signal.SIG_IGN)
    # The channel is the driver's alone: no program a cell starts (os.system, os.exec*)
    # inherits it.
    posix.set_inheritable(CHANNEL_IN_FD, False)
    posix.set_inheritable(CHANNEL_OUT_FD, False)
    try:
        Driver(Channel(_to_top(CHANNEL_IN_FD, 1), _to_top(CHANNEL_OUT_FD, 2))).serve()
    except (EOFError, ValueError) as e:
        print("mcp-sandbox driver: %s; exiting" % e, file=sys.stderr)
        sys.exit(2)


main()
