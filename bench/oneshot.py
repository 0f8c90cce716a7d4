"""Scenario 1: a cold one-shot `print(1)` in a fresh isolated process, one of each peer per
round (interleaved), each ratio the median of the per-round ratios against bare python.

The OCI runtimes (crun, runc, runsc) run a bundle this harness writes: a rootfs that is
mount points only, /usr bound read-only with the merged-usr symlinks, every namespace (user
included, the sandbox user 65534 inside), no network, no capabilities, no_new_privs, a
seccomp denylist like the engine's, and the engine's standard limits (256 MiB, 0.5 CPU, 64
pids) in a cgroup beneath this process's own."""
import json
import os
import shutil
import socket
import statistics
import subprocess
import tempfile
import time

from mcp_scenarios import pct

PY = ["/usr/bin/python3", "-I", "-c", "print(1)"]

# The calls the engine's seccomp table denies (src/jail/seccomp.c), as data for the OCI peers.
DENIED = ("keyctl add_key request_key bpf perf_event_open userfaultfd io_uring_setup "
          "io_uring_enter io_uring_register ptrace process_vm_readv process_vm_writev kcmp mount "
          "umount2 pivot_root chroot fsopen fsmount fsconfig fspick move_mount open_tree "
          "mount_setattr unshare setns kexec_load kexec_file_load init_module finit_module "
          "delete_module open_by_handle_at name_to_handle_at reboot swapon swapoff acct "
          "settimeofday clock_settime clock_adjtime adjtimex syslog iopl ioperm quotactl "
          "quotactl_fd mbind set_mempolicy migrate_pages move_pages lookup_dcookie vhangup "
          "nfsservctl").split()


def own_cgroup_base():
    """A cgroup path beneath this process's own cgroup in every hierarchy: the deepest of
    the own paths, if every other one is a prefix of it (else None)."""
    paths = []
    with open("/proc/self/cgroup") as f:
        for line in f:
            paths.append(line.rstrip("\n").split(":", 2)[2] or "/")
    deepest = max(paths, key=len)
    for p in paths:
        if not (deepest == p or deepest.startswith(p.rstrip("/") + "/")):
            return None
    return deepest.rstrip("/") + f"/mcp-bench.{os.getpid()}"


def cgroup_mounts():
    out = []
    with open("/proc/self/mounts") as f:
        for line in f:
            dev, where, fstype = line.split()[:3]
            if fstype in ("cgroup", "cgroup2"):
                out.append(where)
    return out


def hybrid_cgroups():
    """cgroup v1 with the v2 hierarchy also mounted (at /sys/fs/cgroup/unified)."""
    mounts = {}
    with open("/proc/self/mounts") as f:
        for line in f:
            _, where, fstype = line.split()[:3]
            mounts[where] = fstype
    return mounts.get("/sys/fs/cgroup") == "tmpfs" and \
        mounts.get("/sys/fs/cgroup/unified") == "cgroup2"


def write_bundle(path, cgroup_path):
    rootfs = os.path.join(path, "rootfs")
    for d in ("usr", "proc", "dev", "tmp"):
        os.makedirs(os.path.join(rootfs, d), exist_ok=True)
    for link, target in (("bin", "usr/bin"), ("lib", "usr/lib"), ("lib64", "usr/lib64"),
                         ("sbin", "usr/sbin")):
        if os.path.exists("/" + target):
            os.symlink(target, os.path.join(rootfs, link))
    os.chmod(path, 0o755)
    os.chmod(rootfs, 0o755)
    cfg = {
        "ociVersion": "1.0.2",
        "process": {
            "terminal": False, "user": {"uid": 65534, "gid": 65534}, "args": PY,
            "env": ["PATH=/usr/bin:/bin", "LANG=C.UTF-8", "HOME=/tmp"], "cwd": "/tmp",
            "capabilities": {k: [] for k in ("bounding", "effective", "inheritable",
                                             "permitted", "ambient")},
            "rlimits": [{"type": "RLIMIT_NOFILE", "hard": 1024, "soft": 1024},
                        {"type": "RLIMIT_CORE", "hard": 0, "soft": 0}],
            "noNewPrivileges": True,
        },
        "root": {"path": "rootfs", "readonly": True},
        "hostname": "sandbox",
        "mounts": [
            {"destination": "/proc", "type": "proc", "source": "proc",
             "options": ["nosuid", "nodev", "noexec"]},
            {"destination": "/dev", "type": "tmpfs", "source": "tmpfs",
             "options": ["nosuid", "strictatime", "mode=755", "size=65536k"]},
            {"destination": "/tmp", "type": "tmpfs", "source": "tmpfs",
             "options": ["nosuid", "nodev", "noexec", "size=65536k"]},
            {"destination": "/usr", "type": "bind", "source": "/usr",
             "options": ["rbind", "ro", "nosuid", "nodev"]},
        ],
        "linux": {
            "namespaces": [{"type": t} for t in ("pid", "network", "ipc", "uts", "mount",
                                                  "cgroup", "user")],
            "uidMappings": [{"containerID": 0, "hostID": 100000, "size": 65536}],
            "gidMappings": [{"containerID": 0, "hostID": 100000, "size": 65536}],
            "resources": {"memory": {"limit": 256 << 20}, "pids": {"limit": 64},
                          "cpu": {"quota": 50000, "period": 100000}},
            "seccomp": {"defaultAction": "SCMP_ACT_ALLOW",
                        "architectures": ["SCMP_ARCH_X86_64"],
                        "syscalls": [{"names": DENIED, "action": "SCMP_ACT_ERRNO",
                                      "errnoRet": 1}]},
            "maskedPaths": ["/proc/kcore", "/proc/keys", "/proc/timer_list",
                            "/proc/sched_debug", "/sys/firmware"],
            "readonlyPaths": ["/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus"],
        },
    }
    if cgroup_path:
        cfg["linux"]["cgroupsPath"] = cgroup_path + "/c"
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1)


class OciPeers:
    """The bundle, the runtimes' private state directories, and (on a hybrid cgroup layout)
    a persistent mount namespace without the cgroup2 mount for crun; all removed by close."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="mcp-bench-oci-")
        os.chmod(self.dir, 0o755)  # the runtimes reach the bundle as the mapped root
        self.base = own_cgroup_base()
        # Which directories along the cgroup path exist now: only ours are removed later.
        self.existing = set()
        if self.base:
            for m in cgroup_mounts():
                parts = self.base.strip("/").split("/")
                for i in range(len(parts) + 1):
                    d = os.path.join(m, *parts[:i])
                    if os.path.isdir(d):
                        self.existing.add(d)
        self.bundle = os.path.join(self.dir, "bundle")
        os.makedirs(self.bundle)
        write_bundle(self.bundle, self.base)
        self.mntns = None
        self.mntns_error = None
        if hybrid_cgroups() and shutil.which("crun"):
            # crun 1.8 refuses a v1 layout with a v2 mount beside it ("cgroups in hybrid mode
            # not supported"): give it a mount namespace where /sys/fs/cgroup/unified is not
            # mounted, made once and entered with nsenter for each run.
            path = os.path.join(self.dir, "mnt-ns")
            open(path, "w").close()
            r = subprocess.run(["unshare", f"--mount={path}", "--propagation", "private",
                                "umount", "/sys/fs/cgroup/unified"], capture_output=True,
                               text=True)
            if r.returncode == 0:
                self.mntns = path
            else:
                self.mntns_error = r.stderr.strip()[-200:]
        self.n = 0

    def state(self, runtime):
        d = os.path.join(self.dir, "state-" + runtime)
        os.makedirs(d, exist_ok=True)
        return d

    def argv(self, runtime):
        cid = f"mcp-bench-{os.getpid()}-{runtime}"
        if runtime == "runc":
            return ["runc", "--root", self.state("runc"), "run", "--bundle", self.bundle, cid]
        if runtime == "crun":
            base = ["crun", "--root", self.state("crun"), "run", "--bundle", self.bundle, cid]
            return (["nsenter", f"--mount={self.mntns}"] + base) if self.mntns else base
        if runtime == "runsc":
            return ["runsc", "--root", self.state("runsc"), "--network=none",
                    "--platform=ptrace", "run", "--bundle", self.bundle, cid]
        raise ValueError(runtime)

    def close(self):
        if self.mntns:
            subprocess.run(["umount", self.mntns], capture_output=True)
        for rt in ("runc", "crun", "runsc"):
            cid = f"mcp-bench-{os.getpid()}-{rt}"
            if shutil.which(rt) and os.path.isdir(os.path.join(self.dir, "state-" + rt)):
                subprocess.run([rt, "--root", self.state(rt), "delete", "--force", cid],
                               capture_output=True)
        if self.base:
            # The runtimes remove their container's cgroup; the path down to it is ours.
            made = []
            for m in cgroup_mounts():
                parts = self.base.strip("/").split("/")
                for i in range(len(parts), 0, -1):
                    d = os.path.join(m, *parts[:i])
                    if d not in self.existing and os.path.isdir(d):
                        made.append(d)
            for d in sorted(made, key=len, reverse=True):
                try:
                    for sub in os.listdir(d):
                        if os.path.isdir(os.path.join(d, sub)):
                            os.rmdir(os.path.join(d, sub))
                    os.rmdir(d)
                except OSError:
                    pass
        shutil.rmtree(self.dir, ignore_errors=True)


class RunPool:
    """`mcp-sandbox pool` in a state directory of its own, for the engine's pooled row; closed
    (SIGTERM, which removes its sandboxes and socket) by close."""

    def __init__(self, binary):
        self.dir = tempfile.mkdtemp(prefix="mcp-bench-pool-")
        self.socket = os.path.join(self.dir, "run-pool.sock")
        self.base = [binary, "--state-dir", self.dir]
        self.log = open(os.path.join(self.dir, "log"), "w+")
        self.p = subprocess.Popen(self.base + ["pool", "--size", "2"], stdout=subprocess.DEVNULL,
                                  stderr=self.log)
        self.error = None
        deadline = time.monotonic() + 30
        while not self.full() and time.monotonic() < deadline and self.p.poll() is None:
            time.sleep(0.02)
        if not self.full():
            self.log.seek(0)
            self.error = "mcp-sandbox pool did not come up: " + self.log.read().strip()[-240:]

    def full(self):
        """Whether every sandbox the pool keeps is ready (asked over its socket: a query is the
        two bytes 'Q', version 1; the answer is a text with ready=N size=M per profile)."""
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as c:
                c.connect(self.socket)
                c.send(b"Q\x01")
                answer = c.recv(4096)
        except OSError:
            return False
        text = answer[10:].decode(errors="replace")  # type, version, code, length
        fields = dict(f.split("=", 1) for f in text.split() if "=" in f)
        return bool(fields) and fields.get("ready") == fields.get("size")

    def wait_full(self, timeout=5.0):
        deadline = time.monotonic() + timeout
        while not self.full() and time.monotonic() < deadline:
            time.sleep(0.001)

    def close(self):
        if self.p.poll() is None:
            self.p.terminate()
            try:
                self.p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def peers(binary, oci, pool):
    """Dicts: name, argv (None if it cannot run here), what it isolates, why not, every (runs in
    one round out of every N), role ("reference", "peer" or "helper"), env (added to ours)."""
    bwrap = ["bwrap", "--unshare-all", "--die-with-parent", "--ro-bind", "/usr", "/usr",
             "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
             "--symlink", "usr/bin", "/bin", "--proc", "/proc", "--dev", "/dev",
             "--tmpfs", "/tmp"]
    oci_what = ("all namespaces (user: 65534 inside), read-only /usr, seccomp denylist, "
                "cgroup limits (256 MiB, 0.5 CPU, 64 pids), no capabilities")
    rows = [
        dict(name="bare python3 -I", argv=PY, isolates="nothing (reference)",
             role="reference"),
        dict(name="unshare (all namespaces)",
             argv=["unshare", "--user", "--map-root-user", "--pid", "--fork", "--mount",
                   "--net", "--ipc", "--uts"] + PY,
             isolates="namespaces only; no new root, no seccomp, no limits"),
        dict(name="bwrap (all namespaces)", argv=bwrap + PY,
             isolates="namespaces + new root; no seccomp, no cgroup limits"),
        dict(name="firejail --net=none",
             argv=["firejail", "--quiet", "--noprofile", "--net=none"] + PY,
             isolates="namespaces + seccomp (its default filter); no cgroup limits"),
        dict(name="mcp-sandbox run (standard, all layers, from the run pool)",
             argv=pool.base + ["run", "--profile", "standard", "--"] + PY,
             env={"MCP_SANDBOX_RUN_POOL": "required"}, pool=pool,
             isolates="all namespaces, new root, seccomp, Landlock, cgroup limits, caps "
                      "dropped, uid 65534; the sandbox was built before the run by "
                      "`mcp-sandbox pool`, and serves this run only"),
        dict(name="mcp-sandbox run (standard, all layers, built on demand)",
             argv=[binary, "run", "--profile", "standard", "--"] + PY,
             env={"MCP_SANDBOX_RUN_POOL": "off"},
             isolates="all namespaces, new root, seccomp, Landlock, cgroup limits, caps "
                      "dropped, uid 65534; the sandbox is built in the run"),
        dict(name="crun (OCI bundle)" + (", via nsenter" if oci.mntns else ""),
             argv=oci.argv("crun"), isolates=oci_what + "; no Landlock"),
        dict(name="runc (OCI bundle)", argv=oci.argv("runc"),
             isolates=oci_what + "; no Landlock"),
        dict(name="runsc (gVisor, ptrace platform)", argv=oci.argv("runsc"),
             isolates="a user-space kernel (the Sentry) under ptrace, plus the bundle's "
                      "namespaces and limits",
             every=4),
    ]
    if oci.mntns:
        rows.append(dict(name="nsenter into crun's mount namespace (wrapper alone)",
                         argv=["nsenter", f"--mount={oci.mntns}", "/usr/bin/true"],
                         isolates="nothing: what crun's row includes besides crun",
                         role="helper"))
    packages = {"bwrap": "bubblewrap", "unshare": "util-linux", "nsenter": "util-linux"}
    for r in rows:
        r.setdefault("role", "peer")
        r.setdefault("every", 1)
        r.setdefault("why", None)
        r.setdefault("env", None)
        r.setdefault("pool", None)
        exe = r["argv"][0]
        if r["pool"] and r["pool"].error:
            r["why"] = r["pool"].error
        elif shutil.which(exe) is None and not os.path.exists(exe):
            r["why"] = f"{exe} is not installed"
            if exe != binary:
                r["why"] += "; " + packaged(packages.get(exe, exe))
        elif r["name"].startswith("crun") and oci.mntns_error:
            r["why"] = ("crun refuses this machine's hybrid cgroup layout, and hiding cgroup2 in "
                        f"a private mount namespace failed: {oci.mntns_error}")
        elif r["argv"][0] in ("runc", "crun", "runsc", "nsenter") and not oci.base:
            r["why"] = "no cgroup path lies beneath this process's own in every hierarchy"
    return rows


def environment(row):
    return dict(os.environ, **row["env"]) if row["env"] else None


def time_once(row):
    """One timed run of the row's command. A pooled run is followed by a wait (not timed) until
    the pool has built the sandbox that replaces the one used: the pool's rebuild runs in no
    peer's time, its own row's included."""
    env = environment(row)
    t = time.perf_counter()
    r = subprocess.run(row["argv"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    took = (time.perf_counter() - t) * 1000.0
    if row["pool"]:
        row["pool"].wait_full()
    return took, r.returncode


def summarize(xs):
    return {"median_ms": statistics.median(xs), "p99_ms": pct(xs, 99), "min_ms": min(xs),
            "max_ms": max(xs), "n": len(xs)}


def run(binary, rounds):
    oci = OciPeers()
    pool = RunPool(binary)
    try:
        return measure(binary, rounds, oci, pool)
    finally:
        pool.close()
        oci.close()


def measure(binary, rounds, oci, pool):
    rows = peers(binary, oci, pool)
    # Each peer must print 1 and exit 0 here, or it is reported with what it said instead.
    for r in rows:
        if r["why"]:
            continue
        p = subprocess.run(r["argv"], capture_output=True, text=True, env=environment(r))
        if r["pool"]:
            pool.wait_full()
        want = "" if r["role"] == "helper" else "1"
        if p.returncode != 0 or p.stdout.strip() != want:
            err = (p.stderr.strip() or p.stdout.strip())[-240:]
            r["why"] = f"exits {p.returncode} here: {err}"
    live = [r for r in rows if not r["why"]]
    ref = live[0]
    assert ref["role"] == "reference"
    samples = {r["name"]: [] for r in live}
    ratios = {r["name"]: [] for r in live}
    for _ in range(2):  # warm the page cache for everyone alike
        for r in live:
            time_once(r)
    for i in range(rounds):
        # Interleaved: every peer once per round (a slow one every N rounds), so drift hits
        # all alike, and each ratio is against the reference of the same round.
        t_ref = None
        for r in live:
            if i % r["every"]:
                continue
            t, _ = time_once(r)
            samples[r["name"]].append(t)
            if r is ref:
                t_ref = t
            else:
                ratios[r["name"]].append(t / t_ref)
    # The setup of a sandbox built on demand, and of the pool's (built before its run; the
    # handover is the command's way from the pool into the sandbox until its exec).
    setup, pooled_setup, handover = [], [], []
    for _ in range(max(10, rounds // 2)):
        out = subprocess.run([binary, "run", "--json", "--"] + PY, capture_output=True, text=True,
                             env=dict(os.environ, MCP_SANDBOX_RUN_POOL="off"))
        setup.append(json.loads(out.stdout)["setup_us"])
        if not pool.error:
            out = subprocess.run(pool.base + ["run", "--json", "--"] + PY, capture_output=True,
                                 text=True, env=dict(os.environ, MCP_SANDBOX_RUN_POOL="required"))
            rep = json.loads(out.stdout)
            pooled_setup.append(rep["setup_us"])
            handover.append(rep["handover_us"])
            pool.wait_full()
    result = {"reference": ref["name"], "rounds": rounds, "peers": [],
              "cgroup_base": oci.base, "crun_mount_namespace": bool(oci.mntns)}
    for r in rows:
        entry = {"name": r["name"], "isolates": r["isolates"], "role": r["role"],
                 "argv": r["argv"], "env": r["env"]}
        if r["why"]:
            entry["not_run"] = r["why"]
        else:
            entry.update(summarize(samples[r["name"]]))
            entry["every"] = r["every"]
            entry["ratio_median"] = 1.0 if r is ref else statistics.median(ratios[r["name"]])
        result["peers"].append(entry)
    result["engine_setup_us"] = summarize_us(setup)
    if pooled_setup:
        result["pool_setup_us"] = summarize_us(pooled_setup)
        result["pool_handover_us"] = summarize_us(handover)
    return result


def summarize_us(xs):
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs), "p99": pct(xs, 99),
            "n": len(xs)}


def packaged(name):
    """What apt-cache policy says of a package: whether this machine's sources have it."""
    r = subprocess.run(["apt-cache", "policy", name], capture_output=True, text=True)
    for line in r.stdout.splitlines():
        if line.strip().startswith("Candidate:"):
            cand = line.split(":", 1)[1].strip()
            if cand and cand != "(none)":
                return f"Debian package {name} {cand} is available (scripts/install-deps.sh --bench)"
    return f"no package {name} in this machine's sources (apt-cache policy {name})"
