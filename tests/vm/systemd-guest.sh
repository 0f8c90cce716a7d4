#!/bin/bash
# Runs inside the systemd VM (tests/tiers/systemd-vm.sh) as mcp-test.service, a plain service:
# its cgroup is not delegated (no controllers handed down) and this shell shares it, much as a
# login shell shares its session scope on a stock Debian 12. mcp-sandbox must then get a
# delegated scope from systemd for itself. Prints TAP lines for the host to relay; each case
# has its control.
. /usr/local/lib/mcp-test/guest-lib.sh
SBX=/usr/local/bin/mcp-sandbox
echo "# guest: $(uname -r), $(systemctl --version | head -1), in $(cat /proc/self/cgroup)"

# The server over stdio, as an MCP host starts it, behind two fifos. mcp_call ID METHOD PARAMS
# prints the response with that id (notifications and logs in between are skipped).
mcp_start() {
    MCP_DIR=$(mktemp -d)
    mkfifo "$MCP_DIR/in" "$MCP_DIR/out"
    "$@" < "$MCP_DIR/in" > "$MCP_DIR/out" 2> "$MCP_DIR/err" &
    MCP_PID=$!
    exec {MCP_IN}> "$MCP_DIR/in" {MCP_OUT}< "$MCP_DIR/out"
}
mcp_send() { printf '%s\n' "$1" >&"$MCP_IN"; }
mcp_call() {
    mcp_send "{\"jsonrpc\":\"2.0\",\"id\":$1,\"method\":\"$2\",\"params\":$3}"
    local line
    while IFS= read -r -t 300 line <&"$MCP_OUT"; do
        case $line in *"\"id\":$1,"*) printf '%s\n' "$line" && return 0 ;; esac
    done
    return 1
}
tool() { mcp_call "$1" tools/call "{\"name\":\"$2\",\"arguments\":$3}"; }
# serve_open WHO CMD...: starts the server, initializes and creates a sandbox: its id in SB_ID,
# and in SB_LIMITS the limits backend its status reports.
serve_open() {
    local who=$1 r
    shift
    mcp_start "$@"
    r=$(mcp_call 1 initialize '{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"vm","version":"1"}}')
    expect "serve ($who): initialize answers" '"serverInfo":\{"name":"mcp-sandbox"' "$r"
    mcp_send '{"jsonrpc":"2.0","method":"notifications/initialized"}'
    r=$(tool 2 create_sandbox '{}')
    SB_ID=$(printf '%s' "$r" | grep -o '"sandbox_id":"sb-[0-9a-f]*"' | head -1 | cut -d'"' -f4)
    r=$(tool 3 get_sandbox_status "{\"sandbox_id\":\"$SB_ID\"}")
    SB_LIMITS=$(printf '%s' "$r" | grep -o '"limits":"[^"]*"')
}
# serve_close WHO: closes stdin, as a host that quits does; the server must end with 0.
serve_close() {
    exec {MCP_IN}>&-
    wait "$MCP_PID"
    expect "serve ($1): the server ends when the host closes stdin (exit 0)" '^rc=0$' "rc=$?"
    exec {MCP_OUT}<&-
    grep -iE 'error|fatal' "$MCP_DIR/err" | head -5 | sed 's/^/#   server: /'
    rm -rf "$MCP_DIR"
}
# serve_session WHO [PREFIX...]: one session of `serve --stdio` started through PREFIX (as a
# host would start it), with a sandbox's limits checked from inside and out, and nothing left
# once the host closes stdin.
serve_session() {
    local who=$1 r id group
    shift
    serve_open "$who" "$@" "$SBX" serve --stdio
    id=$SB_ID
    expect "serve ($who): create_sandbox" '^sb-[0-9a-f]+$' "$id"
    expect "serve ($who): the sandbox's limits are cgroup v2, not rlimits" '"limits":"cgroup-v2"' \
        "$SB_LIMITS"
    group=$(find /sys/fs/cgroup -type d -name "$id" 2>/dev/null | head -1)
    expect "serve ($who): its group sits in a scope of the server's ($group)" \
        '\.scope/mcp-sandbox\.[0-9]+/sb-[0-9a-f]+$' "$group"
    expect "serve ($who): and holds the standard profile's 256 MiB" '^268435456$' \
        "$(cat "$group/memory.max" 2>&1)"
    r=$(tool 4 run_code "{\"sandbox_id\":\"$id\",\"code\":\"b = bytearray(16 << 20); len(b)\"}")
    expect "serve ($who): (control) 16 MiB fits under the limit" '"result":"16777216"' "$r"
    local before grew
    before=$(cat "$group/memory.current")
    r=$(tool 8 write_file "{\"sandbox_id\":\"$id\",\"path\":\"big.txt\",\"content\":\"$(head -c 4194304 /dev/zero | tr '\0' a)\"}")
    grew=$(( $(cat "$group/memory.current") - before ))
    expect "serve ($who): write_file's 4 MiB are charged to the sandbox's group (+$((grew >> 10)) KiB)" \
        '^yes$' "$(printf '%s' "$r" | grep -q '"size":4194304' && [ $grew -ge $((3 << 20)) ] && echo yes)"
    r=$(tool 5 run_code "{\"sandbox_id\":\"$id\",\"code\":\"b = bytearray(400 << 20)\"}")
    expect "serve ($who): 400 MiB is stopped by the cgroup's OOM kill, and said so" \
        'killed: out of memory \(limit 256 MiB\)' "$r"
    r=$(tool 6 run_code "{\"sandbox_id\":\"$id\",\"code\":\"6 * 7\"}")
    expect "serve ($who): the restarted interpreter serves the next call" '"result":"42"' "$r"
    r=$(tool 7 close_sandbox "{\"sandbox_id\":\"$id\"}")
    expect "serve ($who): close_sandbox" '"closed":true' "$r"
    expect "serve ($who): and its group is gone" '^gone$' \
        "$([ -n "$group" ] && [ ! -d "$group" ] && echo gone)"
    serve_close "$who"
}
expect "systemd: (control) this service's own cgroup gives no limits (doctor, which asks no one)" \
    'fallback .*mcp-test.service is not given the memory, pids and cpu controllers' \
    "$($SBX doctor 2>&1 | grep 'cgroup limits')"
out=$($SBX run --json -- /bin/true 2>&1)
expect "systemd: run from a shared cgroup gets a delegated scope and cgroup-v2 limits" \
    '^cgroup-v2$' "$(printf '%s' "$out" | backend_of)"
# On a miss, everything run said (its stderr names why it fell back).
printf '%s' "$out" | backend_of | grep -q '^cgroup-v2$' || printf '%s\n' "$out" | head -20 | sed 's/^/#   run: /'

$SBX run -- /bin/sleep 3 &
runner=$!
leaf=
for _ in $(seq 1 100); do
    leaf=$(find /sys/fs/cgroup/system.slice -maxdepth 2 -name 'mcp-sandbox.*.self' 2>/dev/null | head -1)
    [ -n "$leaf" ] && break
    sleep 0.1
done
expect "systemd: the copy sits in a transient scope of its own (leaf $leaf)" \
    '^/sys/fs/cgroup/system.slice/run-[^/]*\.scope/mcp-sandbox\.[0-9]+\.self$' "$leaf"
scope=${leaf%/*}
expect "systemd: the scope is delegated (its controllers handed down)" 'memory' \
    "$(cat "$scope/cgroup.subtree_control" 2>&1)"
expect "systemd: the original stays behind in the shared cgroup" \
    "^0::/system.slice/mcp-test.service$" "$(cat /proc/$runner/cgroup 2>&1)"
wait $runner

out=$($SBX run --memory 32M -- /bin/dd if=/dev/zero of=/dev/null bs=64M count=1 2>&1; echo "rc=$?")
expect "systemd: the memory limit holds: a 64 MiB buffer under 32 MiB is OOM-killed (137)" 'rc=137' "$out"
out=$($SBX run --memory 32M -- /bin/dd if=/dev/zero of=/dev/null bs=4M count=1 2>&1; echo "rc=$?")
expect "systemd: (control) a 4 MiB buffer under the same limit succeeds" 'rc=0' "$out"
out=$($SBX run -- /bin/sh -c 'exit 42'; echo "rc=$?")
expect "systemd: the command's exit code comes back through the copy" '^rc=42$' "$out"
out=$(echo hello-through | $SBX run -- /bin/cat)
expect "systemd: stdin and stdout pass through the copy" '^hello-through$' "$out"

sig_out=/tmp/sig.$$
$SBX run -- /bin/sh -c 'trap "echo got-term; exit 7" TERM; echo ready; while :; do sleep 0.1; done' > "$sig_out" 2>&1 &
runner=$!
for _ in $(seq 1 100); do grep -qs ready "$sig_out" && break; sleep 0.1; done
kill -TERM $runner
wait $runner
rc=$?
expect "systemd: SIGTERM to the original reaches the command through the copy" 'got-term' "$(cat "$sig_out")"
expect "systemd: and the command's exit code comes back" '^rc=7$' "rc=$rc"
# A signal while systemd is still being asked: systemd-run, held back by a wrapper bound over
# it, has not started the copy yet. The original stops with 128+N and the command never runs;
# its control, the same wrapper with no signal, runs it.
cp /usr/bin/systemd-run /tmp/systemd-run.real
printf '#!/bin/sh\ntouch /tmp/asked\nsleep 3\nexec /tmp/systemd-run.real "$@"\n' > /tmp/slow-systemd-run
chmod 755 /tmp/slow-systemd-run
slow_run="mount --bind /tmp/slow-systemd-run /usr/bin/systemd-run && exec $SBX run -- /bin/echo ran"
out=$(unshare -m /bin/sh -c "$slow_run" 2>&1; echo "rc=$?")
expect "systemd: (control) with systemd-run slow to start the copy, the command runs" \
    '^ran rc=0$' "$(echo $out)"
rm -f /tmp/asked
unshare -m /bin/sh -c "$slow_run" > "$sig_out" 2>&1 &
runner=$!
for _ in $(seq 1 300); do [ -e /tmp/asked ] && break; sleep 0.1; done
kill -TERM $runner
wait $runner
rc=$?
expect "systemd: SIGTERM before the copy started ends the original with 143" '^rc=143$' "rc=$rc"
expect_not "systemd: and the command never runs" 'ran' "$(cat "$sig_out")"

# systemd refusing: its private socket hidden, systemd-run cannot connect. The original then
# carries on with rlimits, and says why.
out=$(unshare -m /bin/sh -c "mount --bind /dev/null /run/systemd/private && $SBX run --json -- /bin/true" 2>&1)
expect "systemd: when systemd-run fails the run still happens, with rlimits" '"limits_backend":"rlimit"' "$out"
expect "systemd: and says so" 'could not give this process a delegated cgroup' "$out"
out=$(unshare -m /bin/sh -c "mount -t tmpfs none /run/systemd && $SBX run --json -- /bin/true" 2>&1)
expect "systemd: without systemd running, rlimits as before" '"limits_backend":"rlimit"' "$out"
expect_not "systemd: and no attempt to ask it" 'systemd-run' "$out"

# The server, started from the same shared cgroup, gets its scope the same way: its sandboxes
# (an interpreter each, kept between calls) then have cgroup v2 limits.
serve_session root
# Its control: with systemd not running, the same server has only rlimits to give.
serve_open "root, no systemd" unshare -m /bin/sh -c \
    "mount -t tmpfs none /run/systemd && exec $SBX serve --stdio"
expect "serve (root, no systemd): (control) the sandbox's limits are rlimits" '"limits":"rlimit"' \
    "$SB_LIMITS"
serve_close "root, no systemd"
# The library used directly, as the unit tier does, from this same service: the test asks for
# its own scope just as run does, then checks where the sandbox and the threads sit.
out=$(LD_LIBRARY_PATH=/usr/local/lib/mcp-test /usr/local/lib/mcp-test/test_jail_cgroup 2>&1; echo "rc=$?")
expect "systemd: test_jail_cgroup passes from a plain service" '^rc=0$' "$(printf '%s\n' "$out" | tail -1)"
printf '%s\n' "$out" | grep -E 'FAIL|fail|error' | head -5 | sed 's/^/#   /'

# Root makes its sandboxes' user namespaces as their unprivileged host uids, so that what a sandbox
# holds (pending signals, inotify instances) counts against that uid and not root. Where an
# unprivileged user cannot make one (Debian's kernel.unprivileged_userns_clone=0), root makes
# them, as before, and doctor says so.
userns_sysctl=/proc/sys/kernel/unprivileged_userns_clone
expect "systemd: (control) Debian's kernel has $userns_sysctl" '^[01]$' "$(cat $userns_sysctl 2>&1)"
out=$($SBX doctor 2>&1)
expect "systemd: (control) doctor: root's sandboxes' user namespaces are made as their host uids" \
    "userns owner +ok +made as the sandbox's host uid" "$out"
expect "systemd: doctor: each sandbox claims a host uid of its own (the lock file in /run works)" \
    'host uids +ok +1879048192-1879113727, one per live sandbox' "$out"
userns_old=$(cat $userns_sysctl)
echo 0 > $userns_sysctl
out=$($SBX doctor 2>&1; echo "rc=$?")
expect "systemd: unprivileged user namespaces off: doctor says root makes them, and the default profile runs" \
    'userns owner +fallback +made as root .*rc=0' "$(echo $out)"
out=$($SBX run -- /bin/sh -c 'id -u' 2>&1; echo "rc=$?")
expect "systemd: unprivileged user namespaces off: a run as root still starts its sandbox" '^65534 rc=0$' "$(echo $out)"
echo "$userns_old" > $userns_sysctl

# Rootless: with no manager of its own to ask, no attempt and rlimits; with the user's own
# manager running (user@1000.service, as in a desktop session), a delegated scope from it.
id -u tester >/dev/null 2>&1 || useradd -u 1000 tester
as_tester() {
    setpriv --reuid=1000 --regid=1000 --init-groups env XDG_RUNTIME_DIR=/run/user/1000 "$@"
}
out=$(as_tester $SBX run --json -- /bin/true 2>&1)
expect "systemd: rootless without a user manager falls back to rlimits" '"limits_backend":"rlimit"' "$out"
expect_not "systemd: and does not try systemd-run" 'systemd-run|bus' "$out"
systemctl start dbus.service systemd-logind.service
loginctl enable-linger tester
# Its socket appears while it is still starting: wait for both.
for _ in $(seq 1 300); do
    [ -S /run/user/1000/systemd/private ] && [ "$(systemctl is-active user@1000.service)" = active ] && break
    sleep 0.1
done
expect "systemd: (control) the user's manager runs" '^active$' "$(systemctl is-active user@1000.service)"
out=$(as_tester $SBX run --json -- /bin/true 2>&1)
expect "systemd: rootless with the user's manager gets a delegated scope and cgroup-v2 limits" \
    '^cgroup-v2$' "$(printf '%s' "$out" | backend_of)"
out=$(as_tester $SBX run --memory 32M -- /bin/dd if=/dev/zero of=/dev/null bs=64M count=1 2>&1; echo "rc=$?")
expect "systemd: rootless, the memory limit holds (137)" 'rc=137' "$out"
serve_session rootless as_tester env MCP_SANDBOX_STATE_DIR=/tmp/tester-state
loginctl disable-linger tester

sleep 0.5
left=$(find /sys/fs/cgroup -name 'mcp-sandbox.*' 2>/dev/null; systemctl list-units --no-legend --all 'run-*.scope' 2>/dev/null)
expect "systemd: afterwards no group and no scope is left ('$left')" '^$' "$left"
echo "# guest: done"
