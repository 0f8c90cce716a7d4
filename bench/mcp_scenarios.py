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
        _, line = self.encode(method, params)
        msg = json.loads(self.send_raw(line))
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


def warm_execution(binary, quick):
    n = 500 if quick else 10000
    n_seed = 10 if quick else 200
    codes = {"x=1": "x=1", "print 100 lines": "for i in range(100): print(i)"}
    srv = Server(binary)
    srv.tool("run_code", {"code": "x=0"})  # the default sandbox, warm
    rows = []
    for label, code in codes.items():
        for _ in range(50):
            srv.tool("run_code", {"code": code})
        mcp = timed_calls(srv, "run_code", {"code": code}, n)
        seed = seed_way(code, n_seed)
        floor = raw_floor(code, n)
        rows.append({
            "code": label,
            "mcp_sandbox_stdio": stats_us(mcp),
            "seed_subprocess": stats_us(seed),
            "raw_floor_no_sandbox": stats_us(floor),
            "speedup_vs_seed": statistics.median(seed) / statistics.median(mcp),
            "overhead_vs_floor_us": statistics.median(mcp) - statistics.median(floor),
        })
    ping = timed_calls(srv, "run_code", {"code": "x=1"}, 10)  # keep the pool honest
    del ping
    pings = []
    for _ in range(n // 5):
        _, line = srv.encode("ping", {})
        t = time.perf_counter_ns()
        srv.send_raw(line)
        pings.append((time.perf_counter_ns() - t) / 1000.0)
    srv.close()
    return {"transport": "stdio", "calls": n, "rows": rows,
            "protocol_floor_ping": stats_us(pings),
            "http": "not measured: the Streamable HTTP transport is not in this build"}


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
    return {
        "create_sandbox_from_pool": stats_us(pooled),
        "create_sandbox_no_pool_until_first_run": stats_us(unpooled),
        "create_run_close_print1": stats_us(crc),
        "bare_python_print1": stats_us(bare),
        "create_run_close_ratio_to_bare": statistics.median(
            [a / b for a, b in zip(crc, bare)]),
    }


def meminfo_used():
    d = {}
    with open("/proc/meminfo") as f:
        for line in f:
            k, v = line.split(":")
            d[k] = int(v.split()[0]) * 1024
    return d["MemTotal"] - d["MemAvailable"]


def pss_of_tree(root_pid):
    total, todo = 0, [root_pid]
    while todo:
        pid = todo.pop()
        try:
            with open(f"/proc/{pid}/smaps_rollup") as f:
                for line in f:
                    if line.startswith("Pss:"):
                        total += int(line.split()[1]) * 1024
            with open(f"/proc/{pid}/task/{pid}/children") as f:
                todo += [int(x) for x in f.read().split()]
        except OSError:
            pass
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


class HttpSession:
    """One MCP session over one keep-alive connection (http.client reads SSE or JSON)."""

    def __init__(self, port):
        import http.client
        self.c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        self.sid = None
        self.n = 0
        self.call("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                 "clientInfo": {"name": "bench", "version": "1"}})
        self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def post(self, msg):
        headers = {"Content-Type": "application/json",
                   "Accept": "application/json, text/event-stream"}
        if self.sid:
            headers["Mcp-Session-Id"] = self.sid
        self.c.request("POST", "/mcp", json.dumps(msg), headers)
        r = self.c.getresponse()
        body = r.read()
        if not self.sid:
            self.sid = r.getheader("Mcp-Session-Id")
        if r.status == 202:
            return None
        if r.status != 200:
            raise RuntimeError(f"HTTP {r.status}: {body[:200]!r}")
        if r.getheader("Content-Type", "").startswith("text/event-stream"):
            # Skip the priming event (an id with empty data) that opens every POST stream.
            msgs = [json.loads(l[6:]) for l in body.decode().splitlines()
                    if l.startswith("data: ") and l[6:].strip()]
            return next(m for m in msgs if m.get("id") == msg.get("id"))
        return json.loads(body)

    def call(self, method, params):
        self.n += 1
        m = self.post({"jsonrpc": "2.0", "id": self.n, "method": method, "params": params})
        if "error" in m:
            raise RuntimeError(m["error"])
        return m["result"]


def http_throughput(binary, quick):
    """Aggregate warm run_code x=1 per second with N concurrent sessions, each in its own
    sandbox; then (full mode) 200 sessions for 60 s: errors and the server's RSS."""
    import threading
    levels = [1, 8, 64] if quick else [1, 8, 64, 256]
    secs = 2.0 if quick else 10.0
    out = {"levels": []}
    srv = HttpServer(binary, "[limits]\nmax_sandboxes = 300\nmax_sandboxes_per_owner = 300\n"
                             "[http]\nmax_sessions = 600\n")

    def run_level(n, duration):
        sessions = [HttpSession(srv.port) for _ in range(n)]
        for s in sessions:
            s.call("tools/call", {"name": "run_code", "arguments": {"code": "x=1"}})
        counts, errors = [0] * n, [0] * n
        stop = time.perf_counter() + duration

        def worker(i):
            s = sessions[i]
            while time.perf_counter() < stop:
                try:
                    r = s.call("tools/call", {"name": "run_code", "arguments": {"code": "x=1"}})
                    if r.get("isError"):
                        errors[i] += 1
                    else:
                        counts[i] += 1
                except Exception:
                    errors[i] += 1
        threads = [threading.Thread(target=worker, args=(i,)) for i in range(n)]
        t0 = time.perf_counter()
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        elapsed = time.perf_counter() - t0
        for s in sessions:
            s.c.request("DELETE", "/mcp", headers={"Mcp-Session-Id": s.sid})
            s.c.getresponse().read()
            s.c.close()
        return sum(counts) / elapsed, sum(counts), sum(errors)

    try:
        for n in levels:
            rate, ok, err = run_level(n, secs)
            out["levels"].append({"sessions": n, "executions_per_s": rate, "ok": ok, "errors": err,
                                  "seconds": secs})
        if not quick:
            rss0 = rss_kib(srv.p.pid)
            rate, ok, err = run_level(200, 60.0)
            time.sleep(6)  # one idle sweep: the server trims its heap once the sessions are gone
            out["load_200_sessions_60s"] = {"executions_per_s": rate, "ok": ok, "errors": err,
                                            "rss_before_kib": rss0,
                                            "rss_after_kib": rss_kib(srv.p.pid)}
    finally:
        srv.close()  # also when a level fails: no server is left behind
    return out


def write_md(res):
    lines = []
    w = res.get("warm_execution")
    if w:
        lines += ["## 2. Warm execution through MCP (stdio, client-observed)", "",
                  "| code | mcp-sandbox median us | p99 us | seed's way (temp file + subprocess) "
                  "median us | speedup | raw floor (warm python over pipes, no sandbox) median "
                  "us | overhead over floor us |", "|---|---|---|---|---|---|---|"]
        for r in w["rows"]:
            m, s, f = r["mcp_sandbox_stdio"], r["seed_subprocess"], r["raw_floor_no_sandbox"]
            lines.append(f"| {r['code']} | {m['median_us']:.1f} | {m['p99_us']:.1f} | "
                         f"{s['median_us']:.0f} | {r['speedup_vs_seed']:.0f}x | "
                         f"{f['median_us']:.1f} | {r['overhead_vs_floor_us']:.1f} |")
        p = w["protocol_floor_ping"]
        lines += ["", f"{w['calls']} calls per row. A `ping` through the same client and server "
                  f"takes {p['median_us']:.1f} us (median): the protocol and client share. "
                  f"HTTP: {w['http']}.", ""]
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
    h = res.get("http_throughput")
    if h:
        lines += ["## 4. Throughput over HTTP: warm run_code x=1, each session in its own sandbox",
                  "", "| concurrent sessions | executions/s | ok | errors |",
                  "|---|---|---|---|"]
        for r in h["levels"]:
            lines.append(f"| {r['sessions']} | {r['executions_per_s']:.0f} | {r['ok']} | "
                         f"{r['errors']} |")
        ld = h.get("load_200_sessions_60s")
        if ld:
            lines += ["", f"Load: 200 sessions for 60 s: {ld['ok']} executions "
                      f"({ld['executions_per_s']:.0f}/s), {ld['errors']} errors; server RSS "
                      f"{ld['rss_before_kib']} KiB before, {ld['rss_after_kib']} KiB after."]
        lines += ["", "The client is Python threads with http.client (one keep-alive connection "
                  "per session), on the same 2 cores as the server and the sandboxes.", ""]
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
                  "spilled to the sandbox's workspace (up to 64 MiB per stream), never held "
                  "by the server.", ""]
    return lines


def charts(res, outdir):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    w = res.get("warm_execution")
    if w:
        r = w["rows"][0]
        names = ["mcp-sandbox (stdio)", "raw floor (no sandbox)", "seed's way"]
        vals = [r["mcp_sandbox_stdio"]["median_us"], r["raw_floor_no_sandbox"]["median_us"],
                r["seed_subprocess"]["median_us"]]
        fig, ax = plt.subplots(figsize=(8, 2.5))
        ax.barh(names, vals, color="#4477aa")
        ax.set_xscale("log")
        ax.set_xlabel("us per call, median (log scale)")
        ax.set_title("Warm run_code x=1")
        fig.tight_layout()
        fig.savefig(os.path.join(outdir, "warm_execution.png"), dpi=100)
        plt.close(fig)
    t = res.get("time_to_ready")
    if t:
        keys = ["create_sandbox_from_pool", "create_sandbox_no_pool_until_first_run",
                "create_run_close_print1", "bare_python_print1"]
        fig, ax = plt.subplots(figsize=(8, 3))
        ax.barh(keys, [t[k]["median_us"] / 1000.0 for k in keys], color="#228833")
        ax.set_xlabel("ms, median")
        ax.set_title("Time to ready")
        fig.tight_layout()
        fig.savefig(os.path.join(outdir, "time_to_ready.png"), dpi=100)
        plt.close(fig)
    d = res.get("density")
    if d:
        fig, ax = plt.subplots(figsize=(6, 3))
        ax.bar([str(r["sandboxes"]) for r in d["rows"]],
               [r["mib_per_sandbox_memavailable"] for r in d["rows"]], color="#aa3377")
        ax.set_xlabel("idle sandboxes")
        ax.set_ylabel("MiB each")
        ax.set_title("Memory per idle sandbox")
        fig.tight_layout()
        fig.savefig(os.path.join(outdir, "density.png"), dpi=100)
        plt.close(fig)


if __name__ == "__main__":
    print(json.dumps(warm_execution(sys.argv[1], True), indent=1))
