"""Scenarios through the MCP server (stdio): warm execution, time to ready, density.

Each is measured against its reference in the same run: the seed's way of running code (a temp
file plus subprocess.run from a Python parent), a warm interpreter over pipes with no protocol
and no sandbox (the floor), and bare `python3 -I -c`."""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

PYTHON = "/usr/bin/python3"


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, int(round(p / 100.0 * (len(xs) - 1)))))]


def stats_us(xs):
    return {"median_us": statistics.median(xs), "p99_us": pct(xs, 99), "min_us": min(xs),
            "max_us": max(xs), "n": len(xs)}


class Server:
    """The real binary over stdio, driven with pre-encoded JSON-RPC lines."""

    def __init__(self, binary, config_text="", state_dir=None):
        self.dir = tempfile.mkdtemp(prefix="sbx-bench-")
        cfg = os.path.join(self.dir, "config.toml")
        with open(cfg, "w") as f:
            f.write(config_text)
        self.p = subprocess.Popen(
            [binary, "serve", "--stdio", "--config", cfg, "--state-dir",
             state_dir or os.path.join(self.dir, "state"), "--log-level", "error"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=1 << 16)
        self.fd = self.p.stdin.fileno()
        self.next_id = 0
        self.call("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                 "clientInfo": {"name": "bench", "version": "1"}})
        os.write(self.fd, b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')

    def encode(self, method, params):
        self.next_id += 1
        return self.next_id, (json.dumps({"jsonrpc": "2.0", "id": self.next_id,
                                          "method": method, "params": params}) + "\n").encode()

    def send_raw(self, line):
        os.write(self.fd, line)
        return self.p.stdout.readline()

    def call(self, method, params):
        cid, line = self.encode(method, params)
        msg = json.loads(self.send_raw(line))
        while msg.get("id") != cid:  # a notification, or an answer nobody waits for any more
            msg = json.loads(self.p.stdout.readline())
        if "error" in msg:
            raise RuntimeError(msg["error"])
        return msg["result"]

    def tool(self, name, args):
        r = self.call("tools/call", {"name": name, "arguments": args})
        if r.get("isError"):
            raise RuntimeError(r["content"][0]["text"])
        return r.get("structuredContent")

    def close(self):
        t = time.perf_counter()
        self.p.stdin.close()
        self.p.wait()
        subprocess.run(["rm", "-rf", self.dir])
        return time.perf_counter() - t


def timed_calls(srv, name, args, n):
    """Client-observed latency of n identical tool calls (requests encoded in advance)."""
    lines = [srv.encode("tools/call", {"name": name, "arguments": args})[1] for _ in range(n)]
    out = []
    for line in lines:
        t = time.perf_counter_ns()
        srv.send_raw(line)
        out.append((time.perf_counter_ns() - t) / 1000.0)
    return out


SEED_PARENT = r"""
import subprocess, sys, tempfile, os, time
code, n = sys.argv[1], int(sys.argv[2])
for _ in range(n):
    t = time.perf_counter_ns()
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(code)
    subprocess.run([sys.executable, f.name], capture_output=True, text=True, timeout=30)
    os.unlink(f.name)
    print((time.perf_counter_ns() - t) / 1000.0, flush=True)
"""

FLOOR_CHILD = r"""
import io, sys
ns = {}
out = sys.stdout
for line in sys.stdin:
    sys.stdout = buf = io.StringIO()  # output is collected, as a sandbox's is
    exec(line.replace("\\n", "\n"), ns)
    sys.stdout = out
    out.write("done %d\n" % len(buf.getvalue()))
    out.flush()
"""


def seed_way(code, n):
    r = subprocess.run([PYTHON, "-c", SEED_PARENT, code, str(n)], capture_output=True,
                       text=True, check=True)
    return [float(x) for x in r.stdout.split()]


def raw_floor(code, n):
    p = subprocess.Popen([PYTHON, "-I", "-c", FLOOR_CHILD], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, bufsize=1 << 16)
    line = (code.replace("\n", "\\n") + "\n").encode()
    out = []
    for _ in range(n + 20):
        t = time.perf_counter_ns()
        os.write(p.stdin.fileno(), line)
        p.stdout.readline()
        out.append((time.perf_counter_ns() - t) / 1000.0)
    p.stdin.close()
    p.wait()
    return out[20:]


def pipe_floor(binary, sessions, seconds):
    """The throughput floor at N sessions: N warm interpreters fed x=1 over pipes by one C loop
    (bench/pipefloor), with no protocol and no sandbox: the most any server could do here."""
    tool = os.path.join(os.path.dirname(binary), "pipefloor")
    r = subprocess.run([tool, "--sessions", str(sessions), "--seconds", str(seconds),
                        "--python", PYTHON, "--child", FLOOR_CHILD, "--line", "x=1\n"],
                       capture_output=True, text=True, check=True)
    return json.loads(r.stdout)


def sandbox_cpu_file(server_pid):
    """The accounting file of the cgroup the server puts its sandboxes under
    (mcp-sandbox.<pid>, beneath its own): it keeps counting sandboxes already removed."""
    with open(f"/proc/{server_pid}/cgroup") as f:
        rows = [line.rstrip("\n").split(":", 2) for line in f]
    for _, controllers, path in rows:
        if "cpuacct" in controllers.split(","):
            for mnt in ("/sys/fs/cgroup/cpuacct", "/sys/fs/cgroup/cpu,cpuacct"):
                p = f"{mnt}{path.rstrip('/')}/mcp-sandbox.{server_pid}/cpuacct.usage"
                if os.path.exists(p):
                    return p
    for _, controllers, path in rows:
        if controllers == "":
            p = f"/sys/fs/cgroup{path.rstrip('/')}/mcp-sandbox.{server_pid}/cpu.stat"
            if os.path.exists(p):
                return p
    return None


def httpload(binary, port, sessions, *, seconds=None, calls=None, tool="run_code",
             args=None, expect=None, warmup=1, settle=0.0, cpu_pid=None):
    """Runs bench/httpload (built next to the binary by bench/run); one dict per level."""
    exe = os.path.join(os.path.dirname(binary), "httpload")
    argv = [exe, "--port", str(port), "--sessions", ",".join(str(n) for n in sessions),
            "--tool", tool, "--args", json.dumps(args or {"code": "x=1"}),
            "--warmup", str(warmup), "--settle", str(settle)]
    argv += ["--calls", str(calls)] if calls else ["--seconds", str(seconds)]
    if expect:
        argv += ["--expect", expect]
    if cpu_pid:
        argv += ["--cpu-pid", str(cpu_pid)]
        cg = sandbox_cpu_file(cpu_pid)
        if cg:
            argv += ["--sandbox-cpu-file", cg]
    r = subprocess.run(argv, capture_output=True, text=True, check=True)
    return [json.loads(line) for line in r.stdout.splitlines() if line.strip()]


def lat_us(level):
    """httpload's latency block in the shape of stats_us."""
    lat = level["latency_us"]
    return {"median_us": lat["p50"], "p99_us": lat["p99"], "min_us": lat["min"],
            "max_us": lat["max"], "n": lat["n"]}


def warm_execution(binary, quick):
    n = 500 if quick else 10000
    n_seed = 10 if quick else 200
    chunks = 2 if quick else 5
    # The expected text is checked in every HTTP answer: the code really ran.
    codes = {"x=1": ("x=1", None),
             "print 100 lines": ("for i in range(100): print(i)", "98\\n99\\n")}
    srv = Server(binary)
    srv.tool("run_code", {"code": "x=0"})  # the default sandbox, warm
    hsrv = HttpServer(binary)
    rows = []
    try:
        for label, (code, expect) in codes.items():
            for _ in range(50):
                srv.tool("run_code", {"code": code})
            # stdio and HTTP in alternating chunks, so drift on the machine hits both alike;
            # each HTTP chunk is one session with its own (warmed) sandbox.
            mcp, http, http_errors = [], [], 0
            for _ in range(chunks):
                mcp += timed_calls(srv, "run_code", {"code": code}, n // chunks)
                lvl = httpload(binary, hsrv.port, [1], calls=n // chunks, args={"code": code},
                               expect=expect, warmup=50)[0]
                http_errors += lvl["errors"] + lvl["setup_errors"]
                http.append(lvl)
            seed = seed_way(code, n_seed)
            floor = raw_floor(code, n)
            # The HTTP figures are per chunk (httpload reports percentiles): the median of
            # the chunk medians, the worst p99, the extremes.
            http_stats = {"median_us": statistics.median(h["latency_us"]["p50"] for h in http),
                          "p99_us": max(h["latency_us"]["p99"] for h in http),
                          "min_us": min(h["latency_us"]["min"] for h in http),
                          "max_us": max(h["latency_us"]["max"] for h in http),
                          "n": sum(h["latency_us"]["n"] for h in http), "errors": http_errors}
            rows.append({
                "code": label,
                "mcp_sandbox_stdio": stats_us(mcp),
                "mcp_sandbox_http": http_stats,
                "seed_subprocess": stats_us(seed),
                "raw_floor_no_sandbox": stats_us(floor),
                "speedup_vs_seed": statistics.median(seed) / statistics.median(mcp),
                "speedup_vs_seed_http": statistics.median(seed) / http_stats["median_us"],
                "overhead_vs_floor_us": statistics.median(mcp) - statistics.median(floor),
            })
        pings = []
        for _ in range(n // 5):
            _, line = srv.encode("ping", {})
            t = time.perf_counter_ns()
            srv.send_raw(line)
            pings.append((time.perf_counter_ns() - t) / 1000.0)
    finally:
        srv.close()
        hsrv.close()
    return {"transports": ["stdio", "http"], "calls": n, "rows": rows,
            "protocol_floor_ping": stats_us(pings),
            "clients": {"stdio": "Python: requests encoded in advance, os.write of one line, "
                                 "readline of the answer",
                        "http": "bench/httpload (C): one keep-alive connection, a fresh "
                                "JSON-RPC id per call, the whole answer read and checked"}}


def time_to_ready(binary, quick):
    rounds = 10 if quick else 60
    pooled, unpooled, crc, bare = [], [], [], []
    srv = Server(binary, "[profiles.standard]\npool_size = 2\n")
    time.sleep(1.0)
    for _ in range(rounds):
        t = time.perf_counter_ns()
        sid = srv.tool("create_sandbox", {})["sandbox_id"]
        pooled.append((time.perf_counter_ns() - t) / 1000.0)
        srv.tool("close_sandbox", {"sandbox_id": sid})
        time.sleep(0.3)  # the pool refills in the background
    for _ in range(rounds):
        # Interleaved with bare python: pairwise ratios.
        t = time.perf_counter_ns()
        srv.tool("create_run_close", {"code": "print(1)"})
        crc.append((time.perf_counter_ns() - t) / 1000.0)
        t = time.perf_counter_ns()
        subprocess.run([PYTHON, "-I", "-c", "print(1)"], stdout=subprocess.DEVNULL)
        bare.append((time.perf_counter_ns() - t) / 1000.0)
        time.sleep(0.3)
    srv.close()
    srv = Server(binary, "[profiles.standard]\npool_size = 0\n")
    for _ in range(rounds):
        t = time.perf_counter_ns()
        sid = srv.tool("create_sandbox", {})["sandbox_id"]
        srv.tool("run_code", {"sandbox_id": sid, "code": "x=1"})  # ready means it runs code
        unpooled.append((time.perf_counter_ns() - t) / 1000.0)
        srv.tool("close_sandbox", {"sandbox_id": sid})
    srv.close()
    churn = [churn_pings(binary, pool, 2 if quick else 5) for pool in (0, 2)]
    return {
        "churn": churn,
        "create_sandbox_from_pool": stats_us(pooled),
        "create_sandbox_no_pool_until_first_run": stats_us(unpooled),
        "create_run_close_print1": stats_us(crc),
        "bare_python_print1": stats_us(bare),
        "create_run_close_ratio_to_bare": statistics.median(
            [a / b for a, b in zip(crc, bare)]),
    }


def churn_pings(binary, pool_size, seconds):
    """One stdio server; one request at a time cycles create_sandbox and close_sandbox while a
    ping goes every 2 ms: how long everyone else waits while sandboxes come and go."""
    srv = Server(binary, f"[profiles.standard]\npool_size = {pool_size}\n")
    time.sleep(1.0)
    import select
    out, buf = srv.p.stdout.fileno(), b""
    sent, pings, cycles = {}, [], 0
    busy, sid = None, None
    t_end = time.perf_counter() + seconds
    next_ping = time.perf_counter()
    while time.perf_counter() < t_end or sent or busy:
        now = time.perf_counter()
        if busy is None and now < t_end:
            if sid is None:
                busy, line = srv.encode("tools/call", {"name": "create_sandbox", "arguments": {}})
            else:
                busy, line = srv.encode("tools/call", {"name": "close_sandbox",
                                                       "arguments": {"sandbox_id": sid}})
            os.write(srv.fd, line)
        if now >= next_ping and now < t_end:
            pid_, line = srv.encode("ping", {})
            sent[pid_] = time.perf_counter_ns()
            os.write(srv.fd, line)
            next_ping = now + 0.002
        if select.select([out], [], [], 0.001)[0]:
            # Not readline: lines the buffered reader took would be invisible to select.
            buf += os.read(out, 1 << 20)
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                msg = json.loads(line)
                mid = msg.get("id")
                if mid in sent:
                    pings.append((time.perf_counter_ns() - sent.pop(mid)) / 1000.0)
                elif mid == busy:
                    busy = None
                    if msg.get("result", {}).get("isError") or "error" in msg:
                        raise RuntimeError(f"churn: {msg}")
                    if sid is None:
                        sid = msg["result"]["structuredContent"]["sandbox_id"]
                    else:
                        sid, cycles = None, cycles + 1
    # The buffered reader was bypassed: close without srv.close's readline-free path.
    srv.p.stdin.close()
    srv.p.wait()
    subprocess.run(["rm", "-rf", srv.dir])
    return {"pool_size": pool_size, "seconds": seconds, "cycles": cycles,
            "ping": stats_us(pings)}


def meminfo_used():
    d = {}
    with open("/proc/meminfo") as f:
        for line in f:
            k, v = line.split(":")
            d[k] = int(v.split()[0]) * 1024
    return d["MemTotal"] - d["MemAvailable"]


def pss_of_tree(root_pid):
    """Summed PSS of a process and its descendants: every thread's children (the server's
    warm-pool and create_sandbox sandboxes are its spawner thread's)."""
    total, todo = 0, [root_pid]
    while todo:
        pid = todo.pop()
        try:
            with open(f"/proc/{pid}/smaps_rollup") as f:
                for line in f:
                    if line.startswith("Pss:"):
                        total += int(line.split()[1]) * 1024
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/children") as f:
                    todo += [int(x) for x in f.read().split()]
            except OSError:
                pass  # a thread that ended meanwhile
    return total


def density(binary, quick):
    counts = [20] if quick else [100, 200, 1000]
    out = []
    for n in counts:
        cfg = (f"[limits]\nmax_sandboxes = {n + 5}\nmax_sandboxes_per_owner = {n + 5}\n"
               "[profiles.standard]\npool_size = 0\n")
        srv = Server(binary, cfg)
        time.sleep(2.0)  # let memory freed by earlier scenarios settle before the baseline
        base = meminfo_used()
        base_pss = pss_of_tree(srv.p.pid)
        t = time.perf_counter()
        ids = [srv.tool("create_sandbox", {})["sandbox_id"] for _ in range(n)]
        for sid in ids:
            srv.tool("run_code", {"sandbox_id": sid, "code": "x=1"})
        created = time.perf_counter() - t
        time.sleep(2.0)
        used = meminfo_used() - base
        pss = pss_of_tree(srv.p.pid) - base_pss
        teardown = srv.close()
        out.append({"sandboxes": n, "mib_per_sandbox_memavailable": used / n / 2**20,
                    "mib_per_sandbox_pss": pss / n / 2**20, "create_and_first_run_s": created,
                    "teardown_s": teardown})
    return {"rows": out}


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def flood_run(srv, calls, ping_every_s=0.05):
    """Sends the tool calls, then pings every ping_every_s until all calls answered; returns
    ping latencies (us) and the server's peak RSS growth (KiB) seen meanwhile."""
    pending = set()
    for args in calls:
        cid, line = srv.encode("tools/call", {"name": "run_code", "arguments": args})
        pending.add(cid)
        os.write(srv.fd, line)
    rss0 = rss_kib(srv.p.pid)
    peak, pings, sent = rss0, [], {}
    import select
    next_ping = time.perf_counter()
    while pending:
        now = time.perf_counter()
        if now >= next_ping:
            pid_, line = srv.encode("ping", {})
            sent[pid_] = time.perf_counter_ns()
            os.write(srv.fd, line)
            next_ping = now + ping_every_s
        r, _, _ = select.select([srv.p.stdout], [], [], ping_every_s)
        if r:
            msg = json.loads(srv.p.stdout.readline())
            mid = msg.get("id")
            if mid in sent:
                pings.append((time.perf_counter_ns() - sent.pop(mid)) / 1000.0)
            elif mid in pending:
                pending.discard(mid)
                if msg.get("result", {}).get("isError"):
                    raise RuntimeError(msg["result"]["content"][0]["text"])
        peak = max(peak, rss_kib(srv.p.pid))
    # The last pings' answers are read here, so that none is left for the next caller. Not
    # through select: they may already sit in the reader's buffer.
    while sent:
        msg = json.loads(srv.p.stdout.readline())
        if msg.get("id") in sent:
            pings.append((time.perf_counter_ns() - sent.pop(msg["id"])) / 1000.0)
    return pings, peak - rss0


def floods(binary, quick):
    gib = 1 << 28 if quick else 1 << 30  # quick: 256 MiB
    chunk = 1 << 16
    one = {"code": f"import sys\nb = 'x' * {chunk - 1} + '\\n'\n"
                   f"for _ in range({gib // chunk}): sys.stdout.write(b)", "timeout_s": 600}
    srv = Server(binary, "[limits]\nmax_sandboxes = 80\nmax_sandboxes_per_owner = 80\n")
    srv.tool("run_code", {"code": "x=1"})
    rss_start = rss_kib(srv.p.pid)
    t = time.perf_counter()
    pings1, grow1 = flood_run(srv, [one])
    t1 = time.perf_counter() - t
    n = 8 if quick else 64
    each = (16 << 20) // chunk
    ids = [srv.tool("create_sandbox", {})["sandbox_id"] for _ in range(n)]
    many = [{"sandbox_id": i, "timeout_s": 600,
             "code": f"import sys\nb = 'y' * {chunk - 1} + '\\n'\n"
                     f"for _ in range({each}): sys.stdout.write(b)"} for i in ids]
    t = time.perf_counter()
    pings2, grow2 = flood_run(srv, many)
    t2 = time.perf_counter() - t
    rss_end = rss_kib(srv.p.pid)
    srv.close()
    return {"one_sandbox": {"bytes": gib, "seconds": t1, "rss_growth_kib": grow1,
                            "ping": stats_us(pings1) if pings1 else None},
            "many_sandboxes": {"sandboxes": n, "bytes_each": each * chunk, "seconds": t2,
                               "rss_growth_kib": grow2,
                               "ping": stats_us(pings2) if pings2 else None},
            "server_rss_kib": {"start": rss_start, "end": rss_end}}


class HttpServer:
    """The real binary on a loopback port (serve --http 127.0.0.1:0)."""

    def __init__(self, binary, config_text=""):
        self.dir = tempfile.mkdtemp(prefix="sbx-bench-http-")
        cfg = os.path.join(self.dir, "config.toml")
        with open(cfg, "w") as f:
            f.write(config_text)
        self.log = open(os.path.join(self.dir, "server.log"), "w+")
        self.p = subprocess.Popen([binary, "serve", "--http", "127.0.0.1:0", "--config", cfg,
                                   "--state-dir", os.path.join(self.dir, "state"),
                                   "--log-level", "info"],
                                  stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                  stderr=self.log)
        self.port = None
        for _ in range(200):
            self.log.seek(0)
            for line in self.log:
                if '"http listening"' in line:
                    self.port = int(json.loads(line)["port"])
            if self.port:
                break
            time.sleep(0.05)
        if not self.port:
            raise RuntimeError("the HTTP server did not start")

    def close(self):
        self.p.terminate()
        self.p.wait()
        subprocess.run(["rm", "-rf", self.dir])


def cpu_per_call(level):
    """The CPU the calls of a level cost, per call, by who paid (us)."""
    n = level["ok"] + level["errors"]
    if not n or "server_cpu_s" not in level:
        return None
    out = {k: level[k + "_cpu_s"] / n * 1e6
           for k in ("server", "sandboxes", "client", "kernel_threads")}
    out["machine"] = level["machine_busy_cpu_s"] / n * 1e6
    out["others"] = max(0.0, out["machine"] - sum(out[k] for k in (
        "server", "sandboxes", "client", "kernel_threads")))
    return out


def http_throughput(binary, quick):
    """Warm run_code x=1 per second with N concurrent sessions, each in its own sandbox, and
    cold create_run_close print(1) per second at the same N (a server with no warm pool), the
    two interleaved level by level; then (full mode) 200 sessions for 60 s: errors and the
    server's RSS. The client is bench/httpload (C, epoll, one connection per session)."""
    levels = [1, 8, 64] if quick else [1, 8, 64, 256]
    # Cold calls take about 50 ms of CPU each, so N concurrent ones take N * 25 ms each on two
    # CPUs: the window must hold a few of them. 256 would need minutes; from 8 on the machine
    # is saturated anyway.
    cold_levels = [1, 8] if quick else [1, 8, 64]
    secs = 2.0 if quick else 10.0
    cold_secs = {1: 2.0, 8: 2.0} if quick else {1: 8.0, 8: 8.0, 64: 16.0}
    limits = "[limits]\nmax_sandboxes = 600\nmax_sandboxes_per_owner = 600\n" \
             "[http]\nmax_sessions = 600\n"
    out = {"levels": [], "cold_levels": [], "seconds": secs,
           "cold_seconds": {str(k): v for k, v in cold_secs.items()},
           "client": "bench/httpload (C, epoll, one keep-alive connection per session)"}
    warm = HttpServer(binary, limits)
    cold = HttpServer(binary, limits + "[profiles.standard]\npool_size = 0\n")
    try:
        # One call first: the cgroup the CPU of the cold server's sandboxes is read from exists
        # once it has made a sandbox.
        httpload(binary, cold.port, [1], calls=1, tool="create_run_close",
                 args={"code": "print(1)"}, warmup=0)
        for n in levels:
            # Warm: the sessions' sandboxes are made and warmed, the pool refills during the
            # settle, then every session loops run_code in its own sandbox.
            lvl = httpload(binary, warm.port, [n], seconds=secs, settle=1.0, cpu_pid=warm.p.pid)[0]
            lvl["cpu_us_per_call"] = cpu_per_call(lvl)
            # The floor right after, at the same N: the ceiling of this machine for the level.
            lvl["raw_floor"] = pipe_floor(binary, n, secs)
            lvl["ratio_to_raw_floor"] = lvl["calls_per_s"] / lvl["raw_floor"]["calls_per_s"]
            out["levels"].append(lvl)
            if n not in cold_levels:
                continue
            # Cold: every call creates a sandbox, runs print(1) in it and removes it (the first
            # call of each session is set-up, outside the window).
            lvl = httpload(binary, cold.port, [n], seconds=cold_secs[n], tool="create_run_close",
                           args={"code": "print(1)"}, expect="\"stdout\":\"1\\n\"",
                           settle=0.5, cpu_pid=cold.p.pid)[0]
            lvl["cpu_us_per_call"] = cpu_per_call(lvl)
            out["cold_levels"].append(lvl)
        if not quick:
            rss0 = rss_kib(warm.p.pid)
            lvl = httpload(binary, warm.port, [200], seconds=60.0, settle=1.0,
                           cpu_pid=warm.p.pid)[0]
            time.sleep(6)  # one idle sweep: the server trims its heap once the sessions are gone
            out["load_200_sessions_60s"] = {
                "executions_per_s": lvl["calls_per_s"], "ok": lvl["ok"],
                "errors": lvl["errors"] + lvl["setup_errors"], "rss_before_kib": rss0,
                "rss_after_kib": rss_kib(warm.p.pid), "latency_us": lvl["latency_us"],
                "cpu_us_per_call": cpu_per_call(lvl)}
    finally:
        warm.close()  # also when a level fails: no server is left behind
        cold.close()
    return out


def write_md(res):
    lines = []
    w = res.get("warm_execution")
    if w:
        lines += ["## 2. Warm execution through MCP (client-observed, per call)", "",
                  "| code | transport | median us | p99 us | min us | max us | speedup vs the "
                  "seed's way (median) |", "|---|---|---|---|---|---|---|"]
        for r in w["rows"]:
            m, h, s_, f = (r["mcp_sandbox_stdio"], r["mcp_sandbox_http"], r["seed_subprocess"],
                           r["raw_floor_no_sandbox"])
            lines.append(f"| {r['code']} | mcp-sandbox, stdio | {m['median_us']:.1f} | "
                         f"{m['p99_us']:.1f} | {m['min_us']:.1f} | {m['max_us']:.0f} | "
                         f"{r['speedup_vs_seed']:.0f}x |")
            lines.append(f"| {r['code']} | mcp-sandbox, Streamable HTTP | {h['median_us']:.1f} | "
                         f"{h['p99_us']:.1f} | {h['min_us']:.1f} | {h['max_us']:.0f} | "
                         f"{r['speedup_vs_seed_http']:.0f}x |")
            lines.append(f"| {r['code']} | seed's way: temp file + subprocess.run, no sandbox | "
                         f"{s_['median_us']:.0f} | {s_['p99_us']:.0f} | {s_['min_us']:.0f} | "
                         f"{s_['max_us']:.0f} | 1x |")
            lines.append(f"| {r['code']} | raw floor: warm python over pipes, no protocol, no "
                         f"sandbox | {f['median_us']:.1f} | {f['p99_us']:.1f} | "
                         f"{f['min_us']:.1f} | {f['max_us']:.0f} | - |")
        p = w["protocol_floor_ping"]
        lines += ["", f"{w['calls']} calls per transport and row, stdio and HTTP in alternating "
                  f"chunks; the HTTP median is the median of the chunks' medians, its p99 the "
                  f"worst chunk's. HTTP errors: "
                  + ", ".join(f"{r['code']}: {r['mcp_sandbox_http']['errors']}" for r in w["rows"])
                  + f". A `ping` through the stdio client and server takes {p['median_us']:.1f} us "
                  f"(median): the protocol and client share. Clients: stdio, "
                  f"{w['clients']['stdio']}; HTTP, {w['clients']['http']}.", ""]
    t = res.get("time_to_ready")
    if t:
        lines += ["## 3. Time to ready", "", "| what | median us | p99 us | min us | max us |",
                  "|---|---|---|---|---|"]
        for key in ("create_sandbox_from_pool", "create_sandbox_no_pool_until_first_run",
                    "create_run_close_print1", "bare_python_print1"):
            s = t[key]
            lines.append(f"| {key} | {s['median_us']:.0f} | {s['p99_us']:.0f} | "
                         f"{s['min_us']:.0f} | {s['max_us']:.0f} |")
        lines += ["", f"create_run_close / bare python (median of pairwise ratios): "
                  f"{t['create_run_close_ratio_to_bare']:.3f}", ""]
        lines += ["Sandboxes coming and going: one client cycles `create_sandbox` and "
                  "`close_sandbox` (one request at a time) while it pings the same stdio server "
                  "every 2 ms.", "",
                  "| pool_size | seconds | create+close cycles | ping median us | p99 us | "
                  "max us |", "|---|---|---|---|---|---|"]
        for c in t.get("churn", []):
            p = c["ping"]
            lines.append(f"| {c['pool_size']} | {c['seconds']} | {c['cycles']} | "
                         f"{p['median_us']:.0f} | {p['p99_us']:.0f} | {p['max_us']:.0f} |")
        lines.append("")
    h = res.get("http_throughput")
    if h:
        lines += ["## 4. Throughput over Streamable HTTP", "",
                  f"Warm: every session calls `run_code` `x=1` in its own sandbox for "
                  f"{h['seconds']:.0f} s. Cold: every call is `create_run_close` `print(1)` (a new "
                  f"sandbox, no warm pool, removed after), for "
                  + ", ".join(f"{v:.0f} s at {k}" for k, v in h["cold_seconds"].items())
                  + " sessions (more would need minutes per level to reach a steady state). CPU per "
                  "call: the server, its sandboxes (their cgroups' CPU accounting), the "
                  "load client, the kernel's threads (namespace and cgroup teardown, among "
                  "others), and the rest of the machine (other tenants) over the measured "
                  "window, from /proc (10 ms ticks).", "",
                  "| sessions | kind | calls/s | ok | errors | p50 us | p99 us | CPU us/call: "
                  "server | sandboxes | client | kernel threads | others | machine |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        cold_by_n = {r["sessions"]: r for r in h["cold_levels"]}
        for warm_lvl in h["levels"]:
            pair = [("warm run_code", warm_lvl)]
            if warm_lvl["sessions"] in cold_by_n:
                pair.append(("cold create_run_close", cold_by_n[warm_lvl["sessions"]]))
            for kind, r in pair:
                c = r.get("cpu_us_per_call") or {}
                cpu = " | ".join(f"{c[k]:.0f}" if k in c else "-"
                                 for k in ("server", "sandboxes", "client", "kernel_threads",
                                           "others", "machine"))
                lines.append(f"| {r['sessions']} | {kind} | {r['calls_per_s']:.0f} | {r['ok']} | "
                             f"{r['errors'] + r['setup_errors']} | {r['latency_us']['p50']:.0f} | "
                             f"{r['latency_us']['p99']:.0f} | {cpu} |")
        lines += ["", "Raw floor: at each level, right after the warm run, that many warm "
                  "`python3 -I` processes fed `x=1` over pipes by one C epoll loop "
                  "(bench/pipefloor.c): no protocol, no HTTP, no sandbox. It is the most any "
                  "server could reach on this machine at that level.", "",
                  "| sessions | raw floor calls/s | machine CPU us/call | mcp-sandbox warm calls/s "
                  "| share of the floor |", "|---|---|---|---|---|"]
        for r in h["levels"]:
            f = r.get("raw_floor")
            if f:
                lines.append(f"| {r['sessions']} | {f['calls_per_s']:.0f} | "
                             f"{f['machine_cpu_us_per_call']:.1f} | {r['calls_per_s']:.0f} | "
                             f"{r['ratio_to_raw_floor']:.2f} |")
        ld = h.get("load_200_sessions_60s")
        if ld:
            lines += ["", f"Load: 200 sessions for 60 s: {ld['ok']} executions "
                      f"({ld['executions_per_s']:.0f}/s), {ld['errors']} errors, p99 "
                      f"{ld['latency_us']['p99'] / 1000:.1f} ms; server RSS "
                      f"{ld['rss_before_kib']} KiB before, {ld['rss_after_kib']} KiB after."]
        lines += ["", f"Client: {h['client']}, on the same "
                  f"{res['machine']['cpus']} CPUs as the server and the sandboxes.", ""]
    d = res.get("density")
    if d:
        lines += ["## 5. Density: idle sandboxes (each ran x=1 once)", "",
                  "| sandboxes | MiB each (MemTotal - MemAvailable) | MiB each (summed PSS) | "
                  "create + first run s | teardown s |", "|---|---|---|---|---|"]
        for r in d["rows"]:
            lines.append(f"| {r['sandboxes']} | {r['mib_per_sandbox_memavailable']:.2f} | "
                         f"{r['mib_per_sandbox_pss']:.2f} | {r['create_and_first_run_s']:.1f} | "
                         f"{r['teardown_s']:.1f} |")
        lines.append("")
    f = res.get("floods")
    if f:
        lines += ["## 6. Floods: output the server must not hold", "",
                  "| flood | seconds | server RSS growth (peak) KiB | concurrent ping median us | "
                  "ping max us |", "|---|---|---|---|---|"]
        o, m = f["one_sandbox"], f["many_sandboxes"]
        for label, r in ((f"1 sandbox printing {o['bytes'] >> 20} MiB", o),
                         (f"{m['sandboxes']} sandboxes printing {m['bytes_each'] >> 20} MiB each",
                          m)):
            p = r["ping"] or {"median_us": float("nan"), "max_us": float("nan")}
            lines.append(f"| {label} | {r['seconds']:.1f} | {r['rss_growth_kib']} | "
                         f"{p['median_us']:.0f} | {p['max_us']:.0f} |")
        lines += ["", f"Server RSS {f['server_rss_kib']['start']} KiB at the start, "
                  f"{f['server_rss_kib']['end']} KiB at the end. Output beyond the cap is "
                  "spilled to the sandbox's workspace (a file per stream, up to a sixteenth of "
                  "the workspace and 64 MiB), never held by the server.", ""]
    return lines


def calls_per_s_bars(ax, levels, color, floor=False):
    """Bars of calls/s per level; with floor, each level's raw floor in grey beside it."""
    x = range(len(levels))
    w = 0.4 if floor else 0.8
    ax.bar([i - (w / 2 if floor else 0) for i in x], [r["calls_per_s"] for r in levels],
           width=w, color=color, label="mcp-sandbox")
    for i, r in enumerate(levels):
        ax.text(i - (w / 2 if floor else 0), r["calls_per_s"], f"{r['calls_per_s']:.0f}",
                ha="center", va="bottom", fontsize=8)
    if floor:
        vals = [r.get("raw_floor", {}).get("calls_per_s", 0) for r in levels]
        ax.bar([i + w / 2 for i in x], vals, width=w, color="#bbbbbb",
               label="raw floor (no protocol, no sandbox)")
        for i, v in enumerate(vals):
            ax.text(i + w / 2, v, f"{v:.0f}", ha="center", va="bottom", fontsize=8)
        # Headroom above the tallest bar keeps the legend off the labels.
        ax.set_ylim(0, 1.35 * max(vals + [r["calls_per_s"] for r in levels]))
        ax.legend(fontsize=8, loc="upper left")
    ax.set_xticks(list(x), [str(r["sessions"]) for r in levels])
    ax.set_xlabel("concurrent sessions")


def save(fig, outdir, name):
    import matplotlib.pyplot as plt
    fig.tight_layout()
    fig.savefig(os.path.join(outdir, name + ".png"), dpi=100)
    plt.close(fig)


def charts(res, outdir):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    w = res.get("warm_execution")
    if w:
        fig, axes = plt.subplots(1, len(w["rows"]), figsize=(11, 2.8), sharey=True)
        for ax, r in zip(axes, w["rows"]):
            names = ["mcp-sandbox, stdio", "mcp-sandbox, HTTP", "raw floor (no sandbox)",
                     "seed's way"]
            vals = [r["mcp_sandbox_stdio"]["median_us"], r["mcp_sandbox_http"]["median_us"],
                    r["raw_floor_no_sandbox"]["median_us"], r["seed_subprocess"]["median_us"]]
            ax.barh(names, vals, color=["#4477aa", "#66ccee", "#bbbbbb", "#ee6677"])
            for i, v in enumerate(vals):
                ax.text(v, i, f" {v:.0f}", va="center")
            ax.set_xscale("log")
            ax.set_xlabel("us per call, median (log scale)")
            ax.set_title(f"Warm run_code: {r['code']}")
        save(fig, outdir, "warm_execution")
    h = res.get("http_throughput")
    if h:
        fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 3.2))
        calls_per_s_bars(a1, h["levels"], "#4477aa", floor=True)
        a1.set_ylabel("calls/s")
        a1.set_title("Warm run_code x=1 over HTTP")
        calls_per_s_bars(a2, h["cold_levels"], "#228833")
        a2.set_title("Cold create_run_close print(1) over HTTP")
        save(fig, outdir, "http_throughput")
    f = res.get("floods")
    if f:
        o, m = f["one_sandbox"], f["many_sandboxes"]
        fig, ax = plt.subplots(figsize=(8, 2.5))
        labels = [f"1 sandbox, {o['bytes'] >> 20} MiB", f"{m['sandboxes']} sandboxes, "
                  f"{m['bytes_each'] >> 20} MiB each"]
        ax.barh(labels, [o["rss_growth_kib"] / 1024, m["rss_growth_kib"] / 1024], color="#aa3377")
        ax.set_xlabel("server RSS growth, MiB (peak)")
        ax.set_title("Output floods: what the server holds")
        save(fig, outdir, "floods")
    t = res.get("time_to_ready")
    if t:
        keys = ["create_sandbox_from_pool", "create_sandbox_no_pool_until_first_run",
                "create_run_close_print1", "bare_python_print1"]
        fig, ax = plt.subplots(figsize=(8, 3))
        ax.barh(keys, [t[k]["median_us"] / 1000.0 for k in keys], color="#228833")
        ax.set_xlabel("ms, median")
        ax.set_title("Time to ready")
        save(fig, outdir, "time_to_ready")
    d = res.get("density")
    if d:
        fig, ax = plt.subplots(figsize=(6, 3))
        ax.bar([str(r["sandboxes"]) for r in d["rows"]],
               [r["mib_per_sandbox_memavailable"] for r in d["rows"]], color="#aa3377")
        ax.set_xlabel("idle sandboxes")
        ax.set_ylabel("MiB each")
        ax.set_title("Memory per idle sandbox")
        save(fig, outdir, "density")


if __name__ == "__main__":
    print(json.dumps(warm_execution(sys.argv[1], True), indent=1))
