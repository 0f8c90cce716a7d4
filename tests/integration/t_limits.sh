# Limits: wall-clock timeout, pids, memory, CPU, daemons, output floods. Under rootless the
# limits come from rlimits (no writable cgroup); the report says which.
backend=$("$SBX" run --json -- /bin/true | python3 -c 'import json,sys; print(json.load(sys.stdin)["limits_backend"])')
is_root && expect "limits: root uses cgroup limits" "^cgroup-v[12]$" "$backend"
is_root || expect "limits: rootless falls back to rlimits, and says so" "^rlimit$" "$backend"
# Put together inside the sandbox, so that run's own command line does not hold it.
tag="marker-$$-$RANDOM"
marker="mcp-sbx-$tag"
start=$(date +%s%N)
"$SBX" run --timeout 1 -- /bin/sh -c "sleep 1000 & /bin/sh -c 'while :; do :; done'" >/dev/null 2>&1; rc=$?
ms=$((($(date +%s%N) - start) / 1000000))
[ "$rc" = 124 ] && [ "$ms" -lt 5000 ] && tap_ok "limits: cpu spin + sleep past the timeout: exit 124 in ${ms} ms" || tap_fail "limits: timeout (rc=$rc, ${ms} ms)"
out=$("$SBX" run --timeout 5 -- /bin/true; echo rc=$?); expect "limits: (control) a short command finishes inside the timeout" "rc=0" "$out"
# A double-forked setsid daemon does not outlive the sandbox. bash, not dash, for exec -a; the
# control sees the daemon alive while its sandbox still runs, so the check cannot pass vacuously.
"$SBX" run --timeout 10 -- /bin/bash -c "m=mcp-sbx; setsid /bin/bash -c \"exec -a \$m-$tag sleep 1000\" </dev/null >/dev/null 2>&1 & sleep 1.5; exit 0" >/dev/null 2>&1 &
runner=$!
alive=0
for _ in $(seq 1 40); do grep -qs -- "[m]${marker#m}" /proc/[0-9]*/cmdline && { alive=1; break; }; sleep 0.05; done
[ "$alive" = 1 ] && tap_ok "limits: (control) the setsid daemon runs while its sandbox does" || tap_fail "limits: (control) the setsid daemon runs while its sandbox does"
wait "$runner"
if grep -qs -- "[m]${marker#m}" /proc/[0-9]*/cmdline; then tap_fail "limits: setsid daemon died with its sandbox"; else tap_ok "limits: setsid daemon died with its sandbox"; fi
# Fork bomb: stopped at the pids limit; the host keeps answering.
out=$(sbx_probe --pids 32 --timeout 20 -- forkbomb 5000 2>&1)
expect "limits: fork bomb stopped by the pids limit" "errno=11 EAGAIN" "$out"
t0=$(date +%s%N); /bin/true; host_ms=$((($(date +%s%N) - t0) / 1000000))
[ "$host_ms" -lt 1000 ] && tap_ok "limits: host responsive after the fork bomb (${host_ms} ms)" || tap_fail "limits: host responsive (${host_ms} ms)"
out=$(sbx_probe --pids 32 -- forkbomb 10 2>&1); expect "limits: (control) a few forks succeed" "forkbomb ok" "$out"
# Memory bomb: killed inside the sandbox only.
mem_out=$("$SBX" run --json --memory 64M -- /usr/bin/python3 -I -c '
b = []
while True: b.append(bytearray(1 << 20))' 2>/dev/null)
if is_root; then
    expect "limits: memory bomb is OOM-killed (reported)" '"oom_killed":true' "$mem_out"
    "$SBX" run --memory 64M -- /usr/bin/python3 -I -c 'b=[bytearray(1<<20) for _ in range(4000)]' >/dev/null 2>&1; rc=$?
    [ "$rc" = 137 ] && tap_ok "limits: memory bomb exits 137" || tap_fail "limits: memory bomb exits 137 (rc=$rc)"
    # A tiny command filling the workspace (tmpfs, charged to the group) leaves init the largest
    # process there; init shares run's memory, so were it the OOM killer's pick, run would die
    # with it, silently and with its groups left behind. The command is taken instead.
    for i in 1 2 3; do
        out=$(timeout 60 "$SBX" run -- busybox dd if=/dev/zero of=/workspace/x bs=64k 2>&1; echo "rc=$?")
        expect "limits: a tiny command filling the workspace is the OOM killer's pick, not run ($i)" "OOM killer fired" "$out"
    done
    dead=0
    for d in $(find /sys/fs/cgroup -maxdepth 8 -type d -name 'mcp-sandbox.*' 2>/dev/null); do
        p=${d##*.}
        case $p in *[!0-9]*) continue ;; esac
        [ -d "/proc/$p" ] || dead=$((dead + 1))
    done
    expect "limits: and run still cleaned up after it (no group of a dead run)" "^0$" "$dead"
    # Init is spared outright (-1000) only where run may lower a score (CAP_SYS_RESOURCE, which
    # some containers' root lacks); a subshell tries what run does, on itself.
    init_adj=0
    (echo -1000 >/proc/self/oom_score_adj) 2>/dev/null && init_adj=-1000
    out=$("$SBX" run -- sh -c 'cat /proc/self/oom_score_adj /proc/1/oom_score_adj' 2>/dev/null | tr '\n' ' ')
    expect "limits: (control) the command's OOM score is raised, init's is not (init: $init_adj)" "^1000 $init_adj $" "$out"
else
    expect "limits: memory bomb fails with MemoryError under the rlimit" "MemoryError" "$mem_out"
fi
out=$("$SBX" run --memory 64M -- /usr/bin/python3 -I -c 'b=bytearray(8<<20); print("small ok")' 2>&1); expect "limits: (control) a small allocation succeeds" "small ok" "$out"
# CPU quota: 0.25 CPU for a 1 s spin uses about a quarter of the wall time.
if is_root; then
    out=$("$SBX" run --json --cpus 0.25 --timeout 10 -- /usr/bin/python3 -I -c '
import time
t=time.time()
while time.time()-t<1.0: pass' 2>/dev/null)
    cpu=$(printf '%s' "$out" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(int(d["cpu_ms"]))')
    [ "$cpu" -lt 600 ] && tap_ok "limits: cpu quota 0.25 throttles a spin (${cpu} ms CPU in 1 s)" || tap_fail "limits: cpu quota (${cpu} ms CPU)"
fi
# A 1 GiB flood: the caller's memory is bounded, i.e. its peak RSS does not grow with the size
# of the output. The peak is the kernel's ru_maxrss of the waited `run` process (exact, unlike
# sampling), compared within one build so sanitizer builds compare like with like. The fixed
# part is the --json report itself (NUL bytes escape to \u0000).
peak_of() {
    /usr/bin/python3 -c '
import resource, subprocess, sys
out = open(sys.argv[1], "wb")
subprocess.run(sys.argv[2:], stdout=out, stderr=subprocess.STDOUT)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)' "$1" "$SBX" run --json --timeout 60 -- "${@:2}"
}
base=$(peak_of /tmp/flood-base.$$ /bin/sh -c 'head -c 1000 /dev/zero')
small=$(peak_of /tmp/flood-small.$$ /bin/sh -c 'head -c 67108864 /dev/zero')
peak=$(peak_of /tmp/flood.$$ /bin/sh -c 'head -c 1073741824 /dev/zero')
out=$(cat /tmp/flood.$$); rm -f /tmp/flood.$$ /tmp/flood-base.$$ /tmp/flood-small.$$
expect "limits: 1 GiB flood is captured head+tail" '"stdout_truncated":true' "$out"
expect "limits: 1 GiB flood counted in full" '"stdout_bytes":1073741824' "$out"
grow=$((peak - base))
[ "$base" -gt 0 ] && [ "$grow" -lt 32768 ] && tap_ok "limits: a 1 GiB flood adds under 32 MiB to the caller's peak RSS (+${grow} KiB over ${base} KiB)" || tap_fail "limits: flood RSS growth (+${grow} KiB over ${base} KiB)"
d=$((peak - small))
[ "$small" -gt 0 ] && [ "$d" -lt 2048 ] && [ "$d" -gt -2048 ] && tap_ok "limits: caller RSS does not grow with output size (64 MiB: ${small} KiB, 1 GiB: ${peak} KiB)" || tap_fail "limits: caller RSS grows with output (64 MiB: ${small} KiB, 1 GiB: ${peak} KiB)"
# A hard limit of the caller below one the profile sets cannot be raised inside (the sandbox's
# user namespace gives no CAP_SYS_RESOURCE): refused up front, naming the limit and the fix.
out=$(bash -c 'ulimit -n 64; "$0" run -- /bin/true 2>&1; echo rc=$?' "$SBX")
expect "limits: a hard RLIMIT_NOFILE under the profile's nofile is refused, saying which and what to do" "RLIMIT_NOFILE 256 .from its nofile., above this process's hard limit 64.*ulimit -H.*rc=125" "$(echo $out)"
out=$(bash -c 'ulimit -n 300; "$0" run -- /bin/sh -c "ulimit -n" 2>&1' "$SBX")
expect "limits: (control) under a hard RLIMIT_NOFILE above it, the sandbox runs with the profile's nofile" "^256$" "$out"
# Per-user counts (pending signals, inotify instances) of what a sandbox holds are charged to
# the creator of its user namespace too. Root's sandboxes are made as the unprivileged host
# uid, so a sandbox that fills its own queue leaves root's untouched. Root only: rootless, the
# creator is the caller, whose own quota it is.
if is_root; then
    sigfill='
import ctypes, os, signal, sys, time
signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGRTMIN])
libc = ctypes.CDLL(None, use_errno=True)
class sv(ctypes.Union): _fields_ = [("i", ctypes.c_int), ("p", ctypes.c_void_p)]
n = 0
while n < 10000000 and libc.sigqueue(os.getpid(), int(signal.SIGRTMIN), sv(0)) == 0:
    n += 1
print("queued", n, "errno", ctypes.get_errno(), flush=True)
time.sleep(float(sys.argv[1]))'
    held=$(mktemp "${TMPDIR:-/tmp}/mcp-sbx-sig.XXXXXX")
    "$SBX" run --timeout 30 -- /usr/bin/python3 -I -c "$sigfill" 6 > "$held" 2>&1 &
    holder=$!
    for _ in $(seq 1 200); do grep -q queued "$held" && break; sleep 0.05; done
    expect "limits: (control) a sandbox's signal queue stops at its limit (EAGAIN)" "^queued [0-9]+ errno 11$" "$(cat "$held")"
    out=$(/usr/bin/python3 -I -c "$sigfill" 0 2>&1)
    # Other root processes may hold a few signals of their own: most of the limit is the test.
    limit=$(ulimit -i)
    got=$(printf '%s\n' "$out" | sed -n 's/^queued \([0-9]*\) .*/\1/p')
    [ -n "$got" ] && [ "$got" -gt $((limit / 2)) ] \
        && tap_ok "limits: root's signal queue is not charged for a sandbox's (root queued $got of $limit)" \
        || tap_fail "limits: root's signal queue is not charged for a sandbox's (root queued ${got:-none} of $limit)"
    kill "$holder" 2>/dev/null; wait "$holder" 2>/dev/null
    rm -f "$held"
fi
