# The run pool (`mcp-sandbox pool`): sandboxes built ahead serve `run`. Every case runs with
# run.pool = "required", so that a run the pool did not serve fails rather than passes on a
# sandbox built on demand. The isolation rules are checked again in the pool's sandboxes, each
# where it allows and where it denies.
pool_dir=$(mktemp -d "${TMPDIR:-/tmp}/sbx-pool.XXXXXX")
pool_sock=$pool_dir/run-pool.sock
pool_cfg=$pool_dir/config.toml
cat > "$pool_cfg" <<'EOF'
[profiles.short]
timeout_s = 2
max_timeout_s = 2
memory = "64M"
pids = 24
EOF
real_sbx=$SBX
# SBX as the cases below call it: through the pool, or not at all.
cat > "$pool_dir/sbx" <<EOF
#!/bin/sh
exec env MCP_SANDBOX_RUN_POOL=required MCP_SANDBOX_RUN_POOL_SOCKET=$pool_sock "$real_sbx" --config "$pool_cfg" "\$@"
EOF
chmod 755 "$pool_dir/sbx"
pool_status() { "$real_sbx" --config "$pool_cfg" --state-dir "$pool_dir" pool --status 2>&1; }
# pool_wait_full: until each profile has its sandboxes ready (5 s at most).
pool_wait_full() {
    for _ in $(seq 1 250); do
        st=$(pool_status)
        echo "$st" | grep -q ready= && ! echo "$st" | awk '{split($2,a,"=");split($3,b,"="); if (a[2]!=b[2]) bad=1} END {exit !bad}' && return 0
        sleep 0.02
    done
    return 1
}
marker_count() { grep -ls -- "[m]${1#m}" /proc/[0-9]*/cmdline 2>/dev/null | wc -l; }

"$real_sbx" --config "$pool_cfg" --state-dir "$pool_dir" pool --size 2 --profile standard --profile short \
    2>"$pool_dir/log" &
pool_pid=$!
if pool_wait_full; then
    tap_ok "pool: starts, and says when its sandboxes are ready"
else
    tap_fail "pool: starts, and says when its sandboxes are ready"
    sed 's/^/#   /' "$pool_dir/log" | head -5
fi
expect "pool: --status lists each profile with its ready sandboxes" "^standard ready=2 size=2.*short ready=2 size=2" "$(pool_status | tr '\n' ' ')"
expect "pool: it said on stderr where it serves" "run pool at $pool_sock: 2 sandboxes ready for each of 2 profiles" "$(cat "$pool_dir/log")"

SBX=$pool_dir/sbx
# What a command sees and returns.
out=$("$SBX" run -- /bin/sh -c 'echo out; echo err >&2; exit 3' 2>&1; echo "rc=$?")
expect "pool: output and exit code pass through" "^out err rc=3$" "$(echo $out)"
json=$("$SBX" run --json -- /bin/sh -c 'echo hi')
expect "pool: --json says the sandbox came from the pool" '"pooled":true' "$json"
expect "pool: --json gives the handover time and the sandbox's own setup" '"setup_us":[1-9][0-9.]*,"pooled":true,"handover_us":[1-9]' "$json"
is_root && expect "pool: root's pooled sandbox has cgroup limits" '"limits_backend":"cgroup-v[12]"' "$json"
is_root || expect "pool: rootless, the pooled sandbox says it falls back to rlimits" '"limits_backend":"rlimit"' "$json"
expect "pool: --json has the memory peak and CPU time" '"cpu_ms":[0-9.]+,"memory_peak_bytes":[1-9]' "$json"
out=$(printf 'typed in\n' | "$SBX" run -- /bin/cat); expect "pool: stdin passes through" "^typed in$" "$out"
out=$("$SBX" run -- /nonexistent/tool 2>&1; echo "rc=$?"); expect "pool: a missing command exits 127 and is named" "cannot run /nonexistent/tool.*rc=127" "$(echo $out)"
out=$("$SBX" run -- /usr 2>&1; echo "rc=$?"); expect "pool: a directory exits 126" "rc=126" "$out"
out=$("$SBX" run -- /usr/bin/python3 -I -c 'import sys; print(sys.argv[1:])' 'a b' '' "c'd" 2>&1); expect "pool: arguments arrive as given" "^\['a b', '', \"c'd\"\]$" "$out"

# Isolation in a pooled sandbox, allowed and denied.
out=$(sbx_probe -- exists /etc/shadow); expect "pool: /etc/shadow is absent" "errno=2 ENOENT" "$out"
out=$(sbx_probe -- exists /etc/passwd); expect "pool: (control) the generated /etc/passwd is there" "exists ok" "$out"
out=$(sbx_probe -- exists "$pool_dir"); expect "pool: the pool's state directory is absent" "errno=2 ENOENT" "$out"
out=$(sbx_probe -- write /usr/probe-test); expect "pool: /usr is read-only" "errno=30 EROFS" "$out"
out=$(sbx_probe -- write /workspace/x); expect "pool: (control) /workspace is writable" "write ok" "$out"
out=$(sbx_probe -- inodes /workspace); expect "pool: /workspace stops at its inode cap" "errno=28 ENOSPC" "$out"
out=$(sbx_probe -- privs)
expect "pool: no_new_privs is set" "NoNewPrivs:[[:space:]]+1" "$out"
expect "pool: every capability set is empty" "CapBnd:[[:space:]]+0000000000000000" "$out"
expect "pool: the seccomp filter is on" "Seccomp:[[:space:]]+2" "$out"
expect "pool: runs as uid 65534" "Uid:[[:space:]]+65534" "$out"
out=$(sbx_probe -- mount); expect "pool: mount is refused" "errno=1 EPERM" "$out"
out=$(sbx_probe -- read /proc/1/environ); expect "pool: init's environment is unreadable" "errno=13 EACCES" "$out"
out=$("$SBX" run -- /bin/cat /proc/1/cmdline | tr '\0' ' '); expect "pool: pid 1 shows no command line of the pool's" "^mcp-sandbox-init" "$out"
out=$(sbx_probe -- ifaces); expect "pool: only loopback exists" "ifaces ok" "$out"
out=$(sbx_probe -- tcp 10.255.255.1 80); expect "pool: TCP to an outside address fails" "errno=101 ENETUNREACH" "$out"
out=$(sbx_probe -- kill 1); expect "pool: (control) signals reach the sandbox's own pid 1" "kill ok|errno=1 EPERM" "$out"
out=$(sbx_probe -- kill "$$"); expect "pool: a host pid is not reachable" "errno=3 ESRCH" "$out"
# Every row of the seccomp table, denied here too; and what must stay allowed, allowed.
denied_ok=0 denied_n=0
for r in $("$PROBE" --list | cut -f1 | grep '^sys-'); do
    want="errno=1 EPERM"
    case $r in sys-clone3|sys-open_tree_attr) want="errno=38 ENOSYS" ;; esac
    denied_n=$((denied_n + 1))
    sbx_probe -- "$r" | grep -q "$want" && denied_ok=$((denied_ok + 1))
done
[ "$denied_n" -gt 40 ] && [ "$denied_ok" = "$denied_n" ] && tap_ok "pool: every seccomp row is denied ($denied_ok of $denied_n)" || tap_fail "pool: every seccomp row is denied ($denied_ok of $denied_n)"
for r in allow-getpid allow-fork allow-personality-default; do
    out=$(sbx_probe -- "$r"); expect "pool: (control) seccomp: $r stays allowed" "$r ok" "$out"
done
out=$("$SBX" run -- /bin/hostname); expect "pool: the hostname is sandbox" "^sandbox$" "$out"
out=$("$SBX" run -- /bin/sh -c 'echo $HOME $PWD; env | grep -c MCP_SANDBOX'); expect "pool: the environment is rebuilt (HOME, cwd; none of the caller's)" "^/workspace /workspace 0$" "$(echo $out)"
# Each run gets a sandbox of its own: a file left by one is not in the next.
"$SBX" run -- /bin/sh -c 'echo left > /workspace/left-behind'
out=$(sbx_probe -- exists /workspace/left-behind); expect "pool: a file of the previous run is not in the next sandbox" "errno=2 ENOENT" "$out"

# Limits, from the short profile (2 s, 64 MiB, 24 pids).
start=$(date +%s%N)
"$SBX" run --profile short -- /bin/sh -c "sleep 1000 & while :; do :; done" >/dev/null 2>&1; rc=$?
ms=$((($(date +%s%N) - start) / 1000000))
[ "$rc" = 124 ] && [ "$ms" -lt 6000 ] && tap_ok "pool: a spin past the timeout exits 124 (${ms} ms)" || tap_fail "pool: a spin past the timeout exits 124 (rc=$rc, ${ms} ms)"
out=$("$SBX" run --profile short -- /bin/true; echo "rc=$?"); expect "pool: (control) a short command ends inside the timeout" "rc=0" "$out"
out=$(sbx_probe --profile short -- forkbomb 5000); expect "pool: a fork bomb is stopped at the pids limit" "errno=11 EAGAIN" "$out"
out=$(sbx_probe --profile short -- forkbomb 8); expect "pool: (control) a few forks succeed" "forkbomb ok" "$out"
"$SBX" run --profile short -- /usr/bin/python3 -I -c 'b=[bytearray(1<<20) for _ in range(4000)]' >/dev/null 2>&1; rc=$?
if is_root; then
    [ "$rc" = 137 ] && tap_ok "pool: a memory bomb is OOM-killed (137)" || tap_fail "pool: a memory bomb is OOM-killed (rc=$rc)"
else
    [ "$rc" = 1 ] && tap_ok "pool: a memory bomb fails under the rlimit (exit 1)" || tap_fail "pool: a memory bomb fails under the rlimit (rc=$rc)"
fi
out=$("$SBX" run --profile short -- /usr/bin/python3 -I -c 'b=bytearray(8<<20); print("small ok")' 2>&1); expect "pool: (control) a small allocation succeeds" "small ok" "$out"

# A pool that stops answering (here SIGSTOPped) does not hold a run past its timeout: told to
# kill, and silent for 2 s more, it is given up on; once going again it kills the command of
# the connection that closed.
tag="pool-stuck-$$-$RANDOM"
marker="mcp-sbx-$tag"
start=$(date +%s%N)
"$SBX" run --profile short -- /bin/bash -c "m=mcp-sbx; exec -a \$m-$tag sleep 100" > "$pool_dir/stuck.out" 2>&1 &
runner=$!
for _ in $(seq 1 40); do [ "$(marker_count "$marker")" -gt 0 ] && break; sleep 0.05; done
kill -STOP "$pool_pid"
wait "$runner"; rc=$?
ms=$((($(date +%s%N) - start) / 1000000))
kill -CONT "$pool_pid"
[ "$rc" = 124 ] && [ "$ms" -lt 9000 ] && tap_ok "pool: a stopped pool does not hold a run past its timeout (124 in ${ms} ms)" || tap_fail "pool: a stopped pool does not hold a run past its timeout (rc=$rc, ${ms} ms)"
expect "pool: and run says it stopped waiting" "did not report the end of the command" "$(cat "$pool_dir/stuck.out")"
for _ in $(seq 1 60); do [ "$(marker_count "$marker")" = 0 ] && break; sleep 0.05; done
[ "$(marker_count "$marker")" = 0 ] && tap_ok "pool: once going again, the pool kills that command" || tap_fail "pool: once going again, the pool kills that command"
pool_wait_full

# Nothing of a command outlives its run: not a setsid daemon, once run has returned. The marker
# is put together inside, so that no command line but the daemon's holds it.
tag="pool-$$-$RANDOM"
marker="mcp-sbx-$tag"
"$SBX" run -- /bin/bash -c "m=mcp-sbx; setsid /bin/bash -c \"exec -a \$m-$tag sleep 1000\" </dev/null >/dev/null 2>&1 & sleep 1; exit 0" >/dev/null 2>&1 &
runner=$!
alive=0
for _ in $(seq 1 40); do [ "$(marker_count "$marker")" -gt 0 ] && { alive=1; break; }; sleep 0.05; done
wait "$runner"
left=$(marker_count "$marker")
[ "$alive" = 1 ] && tap_ok "pool: (control) the daemon runs while its run does" || tap_fail "pool: (control) the daemon runs while its run does"
[ "$left" = 0 ] && tap_ok "pool: the daemon is gone when run returns" || tap_fail "pool: the daemon is gone when run returns ($left left)"

# Signals: the first goes to the command, a second kills everything.
out=$("$SBX" run -- /bin/sh -c 'trap "echo got TERM; exit 7" TERM; echo ready; while :; do sleep 0.05; done' 2>&1 &
      pid=$!; sleep 1; kill -TERM $pid; wait $pid; echo "rc=$?")
expect "pool: SIGTERM reaches the command, which exits as it likes" "got TERM.*rc=7" "$(echo $out)"
out=$("$SBX" run -- /bin/sh -c 'trap "" TERM; while :; do sleep 0.05; done' 2>&1 &
      pid=$!; sleep 1; kill -TERM $pid; sleep 0.3; kill -TERM $pid; wait $pid; echo "rc=$?")
expect "pool: a second SIGTERM kills everything" "signalled twice.*rc=137" "$(echo $out)"
# A signal that crosses the command's end: sent 2-10 ms after the command's last line, around
# the moment it exits (a 4 ms loop here), it reaches the command or finds nothing left to reach.
# Either way run reports (3, or 143 for the signal), and the pool goes on serving.
mkfifo "$pool_dir/crossing"
bad="" by_exit=0 by_signal=0
for i in $(seq 1 30); do
    "$SBX" run -- /bin/sh -c 'echo last; i=0; while [ $i -lt 2000 ]; do i=$((i + 1)); done; exit 3' \
        >"$pool_dir/crossing" 2>"$pool_dir/crossing.err" &
    pid=$!
    read -r _ <"$pool_dir/crossing"
    sleep "0.00$((i % 8))"
    kill -TERM "$pid" 2>/dev/null
    wait "$pid"
    rc=$?
    case $rc in
    3) by_exit=$((by_exit + 1)) ;;
    143) by_signal=$((by_signal + 1)) ;;
    *) bad="$bad rc=$rc:$(head -c 200 "$pool_dir/crossing.err")" ;;
    esac
done
expect "pool: a signal crossing the command's end leaves its report whole ($by_exit exited, $by_signal signalled)" \
    "^ok$" "${bad:-ok}"
out=$("$SBX" run -- /bin/sh -c 'exit 5' 2>&1; echo "rc=$?")
expect "pool: (control) and the pool serves the next run" "^rc=5$" "$out"

# A run that vanishes (SIGKILL) takes its command with it.
tag="pool-gone-$$-$RANDOM"
marker="mcp-sbx-$tag"
"$SBX" run -- /bin/bash -c "m=mcp-sbx; exec -a \$m-$tag sleep 1000" >/dev/null 2>&1 &
runner=$!
for _ in $(seq 1 40); do [ "$(marker_count "$marker")" -gt 0 ] && break; sleep 0.05; done
seen=$(marker_count "$marker")
kill -KILL "$runner"; wait "$runner" 2>/dev/null
for _ in $(seq 1 40); do [ "$(marker_count "$marker")" = 0 ] && break; sleep 0.05; done
[ "$seen" = 1 ] && [ "$(marker_count "$marker")" = 0 ] && tap_ok "pool: a killed run's command is killed by the pool" || tap_fail "pool: a killed run's command is killed by the pool (seen $seen, left $(marker_count "$marker"))"

# What the pool does not keep is a miss: refused when required, built on demand otherwise.
out=$("$SBX" run --memory 300M -- /bin/true 2>&1; echo "rc=$?")
expect "pool: other limits are refused when the pool is required (125, says why)" "no run pool served: the pool keeps no sandbox of this profile.*rc=125" "$(echo $out)"
# What the command inherits from the process that builds its sandbox (rlimits the profile does
# not set, the umask): a run whose own differ from the pool's is not served by it, whose sandbox
# would lack them; built on demand, the command has them.
out=$( (ulimit -t 100; "$SBX" run -- /bin/sh -c 'ulimit -t') 2>&1; echo "rc=$?")
expect "pool: a run under a lower CPU-time rlimit than the pool's is not served by it" "no run pool served: the pool keeps no sandbox of this profile.*rc=125" "$(echo $out)"
out=$( (umask 077; "$SBX" run -- /bin/sh -c 'umask') 2>&1; echo "rc=$?")
expect "pool: a run with another umask than the pool's is not served by it" "no run pool served: the pool keeps no sandbox of this profile.*rc=125" "$(echo $out)"
out=$(taskset -c 0 "$SBX" run -- /bin/true 2>&1; echo "rc=$?")
[ "$(nproc)" -gt 1 ] && expect "pool: a run pinned to fewer CPUs than the pool is not served by it" "no run pool served: the pool keeps no sandbox of this profile.*rc=125" "$(echo $out)"
out=$(ionice -c 3 "$SBX" run -- /bin/true 2>&1; echo "rc=$?")
expect "pool: a run with another I/O priority than the pool's is not served by it" "no run pool served: the pool keeps no sandbox of this profile.*rc=125" "$(echo $out)"
# (The locked-memory limit: without a cgroup, rootless, the sandbox sets the CPU-time one itself.)
out=$( (ulimit -l 1234; umask 077; MCP_SANDBOX_RUN_POOL=auto MCP_SANDBOX_RUN_POOL_SOCKET=$pool_sock "$real_sbx" --config "$pool_cfg" run -- /bin/sh -c 'echo $(ulimit -l) $(umask)') 2>&1)
expect "pool: (control) built on demand, the command has the caller's rlimit and umask" "^1234 0077$" "$out"
out=$("$SBX" run --json --memory 300M -- /bin/true 2>/dev/null; echo "rc=$?")
expect "pool: --json still reports a run the required pool did not serve (125, and why)" '^\{"exit_code":125,.*"pooled":false.*"error":"run.pool = \\"required\\", and no run pool served: the pool keeps no sandbox.*\} rc=125$' "$(echo $out)"
out=$(MCP_SANDBOX_RUN_POOL=auto MCP_SANDBOX_RUN_POOL_SOCKET=$pool_sock "$real_sbx" --config "$pool_cfg" run --json --memory 300M -- /bin/true)
expect "pool: with run.pool = auto, other limits build a sandbox on demand" '"exit_code":0.*"pooled":false' "$out"
out=$(MCP_SANDBOX_RUN_POOL=required MCP_SANDBOX_RUN_POOL_SOCKET=$pool_dir/none.sock "$real_sbx" run -- /bin/true 2>&1; echo "rc=$?")
expect "pool: no pool at the socket, required: refused, and says where it looked" "no run pool answers at $pool_dir/none.sock.*rc=125" "$(echo $out)"

# Only its own user, both ways. As root the socket is root's (0600), and where that is loosened
# the pool checks the peer's uid (a run checks the pool's first, so a raw client asks here).
if is_root; then
    out=$(setpriv --reuid=65534 --regid=65534 --clear-groups env MCP_SANDBOX_RUN_POOL=required MCP_SANDBOX_RUN_POOL_SOCKET=$pool_sock HOME=/nonexistent "$real_sbx" --state-dir /nonexistent run -- /bin/true 2>&1; echo "rc=$?")
    expect "pool: another user cannot reach root's pool (0600)" "Permission denied.*rc=125" "$(echo $out)"
    expect "pool: (control) the socket is 0600" "^srw-------" "$(ls -l "$pool_sock")"
    chmod 755 "$pool_dir"; chmod 666 "$pool_sock"
    out=$(setpriv --reuid=65534 --regid=65534 --clear-groups env MCP_SANDBOX_RUN_POOL=required MCP_SANDBOX_RUN_POOL_SOCKET=$pool_sock HOME=/nonexistent "$real_sbx" --state-dir /nonexistent run -- /bin/true 2>&1; echo "rc=$?")
    expect "pool: a run does not hand its command to another user's pool" "is not this user's \(uid 0\).*rc=125" "$(echo $out)"
    out=$(setpriv --reuid=65534 --regid=65534 --clear-groups /usr/bin/python3 - "$pool_sock" <<'PY'
import socket, sys
c = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
c.connect(sys.argv[1])
c.settimeout(5)
c.send(b"R\x01" + (3).to_bytes(4, "little") + b"key" + (1).to_bytes(4, "little") + (10).to_bytes(4, "little") + b"/bin/true\x00")
got = c.recv(4096)
print(got[:1].decode(), got[10:].decode(errors="replace"))
PY
)
    expect "pool: another user is refused by the pool's own uid check, and told why" "^M this pool serves uid 0 only$" "$out"
    chmod 700 "$pool_dir"; chmod 600 "$pool_sock"
    # And root's run does not use a pool of another user's.
    other_dir=$(mktemp -d); chown 65534:65534 "$other_dir"
    setpriv --reuid=65534 --regid=65534 --clear-groups env HOME=/nonexistent "$real_sbx" --state-dir "$other_dir" pool --size 1 2>/dev/null &
    other_pid=$!
    for _ in $(seq 1 100); do [ -S "$other_dir/run-pool.sock" ] && break; sleep 0.05; done
    out=$(MCP_SANDBOX_RUN_POOL=required MCP_SANDBOX_RUN_POOL_SOCKET=$other_dir/run-pool.sock "$real_sbx" run -- /bin/true 2>&1; echo "rc=$?")
    expect "pool: root's run refuses a pool of uid 65534" "is not this user's \(uid 65534\).*rc=125" "$(echo $out)"
    kill -TERM "$other_pid"; wait "$other_pid"
    rm -rf "$other_dir"
fi

# Malformed messages: the pool answers none of them and serves on.
out=$(/usr/bin/python3 - "$pool_sock" <<'PY'
import socket, sys
def conn():
    c = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    c.connect(sys.argv[1])
    c.settimeout(5)
    return c
for junk in (b"", b"\x00", b"Z\x01", b"R\x01" + b"\xff" * 64, b"Q\x02", b"R\x01\x00\x00\x00\x00\x01\x00\x00\x00"):
    c = conn()
    c.send(junk)
    try:
        got = c.recv(4096)
    except OSError:
        got = b""
    print("junk answered" if got else "junk closed")
    c.close()
# A request without its three fds is a miss.
c = conn()
c.send(b"R\x01" + (3).to_bytes(4, "little") + b"key" + (1).to_bytes(4, "little") + (10).to_bytes(4, "little") + b"/bin/true\x00")
print("no-fds", c.recv(4096)[:1].decode())
# Idle connections are closed, not kept.
PY
)
expect "pool: malformed messages get no answer" "^junk closed junk closed junk closed junk closed junk closed junk closed no-fds M$" "$(echo $out)"
out=$("$SBX" run -- /bin/echo still serving); expect "pool: (control) it serves on after them" "^still serving$" "$out"

# One pool per socket; a socket left by a dead pool is taken over.
out=$("$real_sbx" --config "$pool_cfg" --state-dir "$pool_dir" pool 2>&1; echo "rc=$?")
expect "pool: a second pool at the same socket is refused" "another run pool serves $pool_sock.*rc=1" "$(echo $out)"

# 30 runs, then the pool ends: nothing of it is left.
fails=0
for i in $(seq 1 30); do "$SBX" run -- /bin/true || fails=$((fails + 1)); done
[ "$fails" = 0 ] && tap_ok "pool: 30 runs in a row are served" || tap_fail "pool: 30 runs in a row are served ($fails failed)"
# Its sandboxes now: their inits are its children (those of the spawner thread among them).
pool_inits=$(cat /proc/"$pool_pid"/task/*/children 2>/dev/null)
kill -TERM "$pool_pid"; wait "$pool_pid"; rc=$?
[ "$rc" = 0 ] && tap_ok "pool: SIGTERM ends it cleanly" || tap_fail "pool: SIGTERM ends it cleanly (rc=$rc)"
[ ! -e "$pool_sock" ] && tap_ok "pool: its socket is removed" || tap_fail "pool: its socket is removed"
left=0
for p in $pool_inits; do [ -d "/proc/$p" ] && left=$((left + 1)); done
groups=$(find /sys/fs/cgroup -maxdepth 8 -type d -name "mcp-sandbox.$pool_pid" 2>/dev/null | wc -l)
[ -n "$pool_inits" ] && [ "$left" = 0 ] && [ "$groups" = 0 ] && tap_ok "pool: no sandbox and no cgroup of it is left ($(echo $pool_inits | wc -w) inits gone)" || tap_fail "pool: left $left of its inits ($pool_inits) or $groups cgroups"
out=$("$SBX" run -- /bin/true 2>&1; echo "rc=$?"); expect "pool: once it has ended, a required pool is a refusal" "no run pool answers.*rc=125" "$(echo $out)"

# A socket file left by a pool that was killed (SIGKILL) is taken over by the next.
"$real_sbx" --config "$pool_cfg" --state-dir "$pool_dir" pool --size 1 2>/dev/null &
pool_pid=$!
for _ in $(seq 1 100); do [ -S "$pool_sock" ] && break; sleep 0.05; done
kill -KILL "$pool_pid"; wait "$pool_pid" 2>/dev/null
stale=$([ -S "$pool_sock" ] && echo stale)
"$real_sbx" --config "$pool_cfg" --state-dir "$pool_dir" pool --size 1 2>/dev/null &
pool_pid=$!
served=no
for _ in $(seq 1 100); do "$SBX" run -- /bin/true 2>/dev/null && { served=yes; break; }; sleep 0.05; done
[ "$stale" = stale ] && [ "$served" = yes ] && tap_ok "pool: a killed pool's socket is taken over by the next" || tap_fail "pool: a killed pool's socket is taken over (stale=$stale served=$served)"
kill -TERM "$pool_pid"; wait "$pool_pid"

SBX=$real_sbx
rm -rf "$pool_dir"
