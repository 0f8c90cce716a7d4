#!/bin/sh
# Runs inside the cgroup-v2-only VM (tests/tiers/cgroup2-vm.sh) as its second init, with
# busybox, the static mcp-sandbox, the static probe and vm-sandboxes. Prints TAP lines for the
# host to relay. Every limit is checked where it allows and where it denies.
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mount -t tmpfs tmp /tmp
mount -t cgroup2 cgroup2 /sys/fs/cgroup
CG=/sys/fs/cgroup
echo "+memory +pids +cpu" > $CG/cgroup.subtree_control

. /guest-lib.sh

# alone GROUP CMD...: CMD as the only process of $CG/GROUP (a unit with Delegate=yes).
alone() {
    g=$1
    shift
    sh -c 'echo $$ > "$0/cgroup.procs" && exec "$@"' "$CG/$g" "$@"
}

echo "# guest: $(uname -r), cgroup2 only: $(cat /proc/self/mountinfo | grep -c ' - cgroup ') v1 mounts"

# --- Alone in a delegated cgroup: the process steps into a leaf and enables controllers.
mkdir $CG/svc
out=$(alone svc mcp-sandbox run --json -- /bin/true)
expect "cgroup2: alone in a delegated cgroup, root gets cgroup-v2 limits" '^cgroup-v2$' \
    "$(printf '%s' "$out" | backend_of)"

alone svc mcp-sandbox run --memory 40M --pids 20 --cpus 0.3 -- /bin/sleep 2 &
runner=$! # the subshell around it, not the process itself
seen=""
for _ in $(seq 1 100); do
    for d in $CG/svc/mcp-sandbox.*; do
        case $d in *.self) ;; *) [ -f "$d/memory.max" ] && seen=$d ;; esac
    done
    [ -n "$seen" ] && break
    sleep 0.05
done
sleep 0.3
if [ -n "$seen" ]; then
    ok "cgroup2: the sandbox's group is made beneath the process's own cgroup ($seen)"
    expect "cgroup2: memory.max is the profile's" '^41943040$' "$(cat "$seen/memory.max")"
    expect "cgroup2: memory.swap.max is 0" '^0$' "$(cat "$seen/memory.swap.max")"
    expect "cgroup2: pids.max is the profile's" '^20$' "$(cat "$seen/pids.max")"
    expect "cgroup2: cpu.max is the quota over 100 ms" '^30000 100000$' "$(cat "$seen/cpu.max")"
    expect "cgroup2: the sandbox runs inside its group" '[0-9]' "$(cat "$seen/cgroup.procs")"
    pid=${seen##*.}
    expect "cgroup2: the process itself sits in its leaf, not in the sandbox's group" \
        "^$pid\$" "$(cat "$CG/svc/mcp-sandbox.$pid.self/cgroup.procs" 2>&1)"
    expect "cgroup2: the controllers are enabled in the delegated cgroup" \
        'memory.*pids|pids.*memory' "$(cat $CG/svc/cgroup.subtree_control)"
else
    fail "cgroup2: the sandbox's group is made beneath the process's own cgroup"
    ls -la $CG/svc | sed 's/^/#   /'
fi
wait $runner
left=$(ls -d $CG/svc/mcp-sandbox.* 2>/dev/null)
expect "cgroup2: after the run no group is left (own cgroup's children: '${left}')" '^$' "$left"
expect "cgroup2: the delegated cgroup's controllers are handed back" '^$' \
    "$(cat $CG/svc/cgroup.subtree_control)"

mkdir $CG/doc
out=$(alone doc mcp-sandbox doctor 2>&1 | grep 'cgroup limits')
expect "cgroup2: doctor, alone in a delegated cgroup, says it will step into a leaf" \
    'ok .*steps into a leaf' "$out"
expect "cgroup2: and doctor itself changes nothing there" '^$' \
    "$(cat $CG/doc/cgroup.subtree_control; ls -d $CG/doc/mcp-sandbox.* 2>/dev/null)"

# --- The limits themselves, each where it allows and where it denies.
out=$(alone svc mcp-sandbox run --memory 32M -- /bin/dd if=/dev/zero of=/dev/null bs=64M count=1 2>&1; echo "rc=$?")
expect "cgroup2: a 64 MiB buffer under a 32 MiB limit is OOM-killed (exit 137)" 'rc=137' "$out"
expect "cgroup2: and the OOM kill is reported" 'OOM killer' "$out"
out=$(alone svc mcp-sandbox run --memory 32M -- /bin/dd if=/dev/zero of=/dev/null bs=4M count=1 2>&1; echo "rc=$?")
expect "cgroup2: (control) a 4 MiB buffer under the same limit succeeds" 'rc=0' "$out"
out=$(alone svc mcp-sandbox run --pids 16 --timeout 30 -- /usr/bin/probe forkbomb 5000 2>&1)
expect "cgroup2: a fork bomb is stopped at pids.max" 'errno=11 EAGAIN' "$out"
out=$(alone svc mcp-sandbox run --pids 16 -- /usr/bin/probe forkbomb 5 2>&1)
expect "cgroup2: (control) a few forks succeed under pids.max" 'forkbomb ok' "$out"
# spin CPUS: a 2 s busy loop under that quota; prints "CPU_MS DURATION_MS".
spin() {
    alone svc mcp-sandbox run --json --cpus "$1" --timeout 20 -- /bin/sh -c \
        'end=$(($(date +%s) + 2)); while [ "$(date +%s)" -lt "$end" ]; do :; done' |
        sed -n 's/.*"duration_ms":\([0-9]*\).*"cpu_ms":\([0-9]*\).*/\2 \1/p'
}
set -- $(spin 0.2)
cpu=${1:-0} dur=${2:-0}
[ "$dur" -gt 0 ] && [ "$cpu" -lt $((dur * 35 / 100)) ] && r=ok || r=fail
$r "cgroup2: cpu.max 0.2 throttles a spin ($cpu ms CPU in $dur ms)"
set -- $(spin 2)
cpu=${1:-0} dur=${2:-0}
[ "$dur" -gt 0 ] && [ "$cpu" -gt $((dur * 60 / 100)) ] && r=ok || r=fail
$r "cgroup2: (control) without the quota the spin gets the CPU ($cpu ms CPU in $dur ms)"
# cgroup.kill at the end: a setsid daemon dies with its sandbox.
alone svc mcp-sandbox run --timeout 10 -- /bin/sh -c 'setsid /bin/sleep 777 </dev/null >/dev/null 2>&1 & sleep 1; exit 0' &
runner=$!
daemon_alive() {
    for f in /proc/[0-9]*/cmdline; do
        case "$(tr '\0' ' ' < "$f" 2>/dev/null)" in *"sleep 777"*) return 0 ;; esac
    done
    return 1
}
alive=0
for _ in $(seq 1 60); do
    daemon_alive && { alive=1; break; }
    sleep 0.05
done
[ $alive = 1 ] && ok "cgroup2: (control) the daemon runs while its sandbox does" || fail "cgroup2: (control) the daemon runs while its sandbox does"
wait $runner
if daemon_alive; then fail "cgroup2: the setsid daemon died with its sandbox"; else ok "cgroup2: the setsid daemon died with its sandbox"; fi
out=$(alone svc mcp-sandbox run --timeout 1 -- /bin/sh -c 'while :; do :; done' 2>&1; echo "rc=$?")
expect "cgroup2: a spin past the timeout is killed (exit 124)" 'rc=124' "$out"
left=$(ls -d $CG/svc/mcp-sandbox.* 2>/dev/null)
expect "cgroup2: after all of that no group is left ('${left}')" '^$' "$left"

# --- The run pool, alone in a delegated cgroup: its sandboxes, built ahead, have the limits.
mkdir $CG/pool /tmp/pool
alone pool mcp-sandbox --state-dir /tmp/pool pool --size 1 2>/tmp/pool/log &
pool_runner=$!
for _ in $(seq 1 400); do
    mcp-sandbox --state-dir /tmp/pool pool --status 2>/dev/null | grep -q 'ready=1' && break
    sleep 0.05
done
out=$(MCP_SANDBOX_RUN_POOL=required MCP_SANDBOX_RUN_POOL_SOCKET=/tmp/pool/run-pool.sock \
    mcp-sandbox run --json -- /bin/true 2>&1)
expect "cgroup2: (control) a run pool alone in a delegated cgroup serves a run" '"pooled":true' \
    "$out$(cat /tmp/pool/log)"
expect "cgroup2: and the pooled sandbox has cgroup-v2 limits" '^cgroup-v2$' \
    "$(printf '%s' "$out" | backend_of)"
pool_pid=$(ls -d $CG/pool/mcp-sandbox.*.self 2>/dev/null | sed -n 's/.*mcp-sandbox\.\([0-9]*\)\.self$/\1/p')
[ -n "$pool_pid" ] && kill "$pool_pid"
wait $pool_runner
left=$(ls -d $CG/pool/mcp-sandbox.* 2>/dev/null)
expect "cgroup2: a stopped run pool leaves no group ('${left}')" '^$' "$left"

# --- The server's way: named groups for several persistent sandboxes at once.
mkdir $CG/server
alone server vm-sandboxes $CG/server

# --- Rootless, in a cgroup delegated to uid 65534 (what systemd does for Delegate=yes).
mkdir $CG/user
chown 65534:65534 $CG/user $CG/user/cgroup.procs $CG/user/cgroup.subtree_control $CG/user/cgroup.threads
out=$(alone user su -s /bin/sh nobody -c 'exec mcp-sandbox run --json -- /bin/true' 2>&1)
expect "cgroup2: rootless in a delegated cgroup gets cgroup-v2 limits" '^cgroup-v2$' \
    "$(printf '%s' "$out" | backend_of)"
out=$(alone user su -s /bin/sh nobody -c 'exec mcp-sandbox run --memory 32M -- /bin/dd if=/dev/zero of=/dev/null bs=64M count=1' 2>&1; echo "rc=$?")
expect "cgroup2: rootless, the memory limit OOM-kills (exit 137)" 'rc=137' "$out"
left=$(ls -d $CG/user/mcp-sandbox.* 2>/dev/null)
expect "cgroup2: rootless, no group is left ('${left}')" '^$' "$left"
# Init, sharing the memory of `run`, shares the errno of the thread that moves it into its group
# while it changes ids: once that thread wrote errno, one start in twenty was refused
# ("switching to the sandbox uid failed: Success"). Many starts, to catch such a race.
i=0 bad=0 moved=0 last=
while [ $i -lt 200 ]; do
    i=$((i + 1))
    o=$(alone user su -s /bin/sh nobody -c 'exec mcp-sandbox run --json -- /bin/true' 2>&1) ||
        { bad=$((bad + 1)); last=$o; }
    [ "$(printf '%s' "$o" | backend_of)" = cgroup-v2 ] && moved=$((moved + 1))
done
expect "cgroup2: rootless, 200 starts moved into their groups all run ($bad refused; $moved moved)" \
    '^0 200 *$' "$bad $moved $last"
mkdir $CG/notmine
out=$(alone notmine su -s /bin/sh nobody -c 'exec mcp-sandbox run --json -- /bin/true' 2>&1)
expect "cgroup2: rootless in a cgroup not delegated to it falls back to rlimits" '^rlimit$' \
    "$(printf '%s' "$out" | backend_of)"

# --- Where the kernel forbids it: refused or degraded, with a hint, and nothing touched.
mkdir $CG/shared
echo $$ > $CG/shared/cgroup.procs
out=$(mcp-sandbox run --json -- /bin/true)
expect "cgroup2: sharing its cgroup with others, the process falls back to rlimits" '^rlimit$' \
    "$(printf '%s' "$out" | backend_of)"
expect "cgroup2: and doctor says how to fix it" 'holds other processes.*Delegate=yes' \
    "$(mcp-sandbox doctor 2>&1 | grep 'cgroup limits')"
# A run pool there would build sandboxes without the limits a run in a delegated scope of its own
# gets: it refuses to start.
# (A pool that started instead would serve until stopped: timeout ends it, and the test fails.)
out=$(timeout 30 mcp-sandbox --state-dir /tmp/pool-shared pool --size 1 2>&1; echo "rc=$?")
expect "cgroup2: a run pool sharing its cgroup with others refuses to start, with a hint" \
    'no cgroup of its own.*Delegate=yes.* rc=1$' "$(echo $out)"
expect "cgroup2: and the shared cgroup was not touched" '^$' \
    "$(cat $CG/shared/cgroup.subtree_control; ls -d $CG/shared/mcp-sandbox.* 2>/dev/null)"
echo $$ > $CG/cgroup.procs
mkdir -p $CG/nodeleg/inner
out=$(alone nodeleg/inner mcp-sandbox doctor 2>&1 | grep 'cgroup limits')
expect "cgroup2: a cgroup whose parent keeps the controllers is named in the hint" \
    'nodeleg/inner is not given the memory, pids and cpu controllers' "$out"

# --- The i386 gate. This host's kernel has none (int 0x80 dies of SIGSEGV before the filter
# sees it), so the integration tier cannot show that the filter's architecture check is what
# stops it; Debian's kernel has one.
/usr/bin/probe abi-int80 >/dev/null 2>&1
expect "seccomp: (control) outside a sandbox, int 0x80 works on this kernel" '^rc=0$' "rc=$?"
mcp-sandbox run -- /usr/bin/probe abi-int80 >/dev/null 2>&1
expect "seccomp: inside, int 0x80 kills the process (SIGSYS: 159)" '^rc=159$' "rc=$?"

echo "# guest: done"
poweroff -f
