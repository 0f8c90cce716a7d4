# Host uids. As root, each sandbox maps to a host uid of its own, one of isolation.host_uid_count
# from isolation.host_uid, claimed against every other process's sandboxes: the kernel's
# per-user counts (inotify instances here) are then each sandbox's own, and one sandbox cannot
# use them up for the others. Rootless, a sandbox maps to the caller's own uid.
host_uid_of() { awk '{print $2; exit}' "$1"; }
# Opens inotify instances until refused, says how many, and keeps them for argv[1] seconds.
inotify_fill='
import ctypes, sys, time
libc = ctypes.CDLL(None, use_errno=True)
n = 0
while n < 100000 and libc.inotify_init1(0) >= 0:
    n += 1
print("held", n, "errno", ctypes.get_errno(), flush=True)
time.sleep(float(sys.argv[1]))'
# Starts a sandbox in the background that runs argv and keeps it alive: its stdout goes to the
# file named first (stderr beside it, where a sanitizer build's own warnings go), and the
# function returns once the output has a line.
start_holder() {
    local out=$1
    shift
    "$@" > "$out" 2> "$out.err" &
    holders="$holders $!"
    for _ in $(seq 1 200); do [ -s "$out" ] && return; sleep 0.05; done
}
stop_holders() {
    [ -n "$holders" ] && kill $holders 2>/dev/null
    [ -n "$holders" ] && wait $holders 2>/dev/null
    holders=
}
holders=
hu_dir=$(mktemp -d "${TMPDIR:-/tmp}/mcp-sbx-hu.XXXXXX")
if is_root; then
    first=$("$SBX" config --print 2>/dev/null | sed -n 's/^host_uid = \([0-9]*\).*/\1/p')
    count=$("$SBX" config --print 2>/dev/null | sed -n 's/^host_uid_count = \([0-9]*\).*/\1/p')
    start_holder "$hu_dir/a" "$SBX" run --timeout 20 -- /bin/sh -c 'cat /proc/self/uid_map; sleep 3'
    "$SBX" run -- /bin/cat /proc/self/uid_map > "$hu_dir/b" 2> "$hu_dir/b.err"
    a=$(host_uid_of "$hu_dir/a"); b=$(host_uid_of "$hu_dir/b")
    [ -n "$a" ] && [ -n "$b" ] && [ "$a" != "$b" ] &&
        [ "$a" -ge "$first" ] && [ "$a" -lt $((first + count)) ] &&
        [ "$b" -ge "$first" ] && [ "$b" -lt $((first + count)) ] &&
        tap_ok "host uids: two live sandboxes map to two host uids of the range ($a, $b of $first+$count)" ||
        tap_fail "host uids: two live sandboxes map to two host uids of the range (got '$a' and '$b', range $first+$count)"
    stop_holders

    # The kernel's limit on inotify instances per user (128 here by default).
    start_holder "$hu_dir/a" "$SBX" run --timeout 20 -- /usr/bin/python3 -I -c "$inotify_fill" 4
    expect "host uids: (control) a sandbox's inotify instances stop at its user's limit (EMFILE)" \
        "^held [1-9][0-9]* errno 24$" "$(cat "$hu_dir/a")"
    out=$("$SBX" run -- /usr/bin/python3 -I -c "$inotify_fill" 0 2>&1)
    expect "host uids: another sandbox meanwhile still has its own inotify instances" \
        "^held [1-9][0-9]* errno 24$" "$out"
    stop_holders
    # With one host uid for all (the configuration's choice), the second has none left: the
    # limit the claims keep apart is real.
    export MCP_SANDBOX_ISOLATION_HOST_UID_COUNT=1
    start_holder "$hu_dir/a" "$SBX" run --timeout 20 -- /usr/bin/python3 -I -c "$inotify_fill" 4
    out=$("$SBX" run -- /usr/bin/python3 -I -c "$inotify_fill" 0 2>&1)
    expect "host uids: (control) sharing one host uid, a sandbox is left no inotify instance by another" \
        "^held 0 errno 24$" "$out"
    stop_holders
    out=$("$SBX" doctor 2>&1; echo "rc=$?")
    expect "host uids: doctor says when one host uid is shared, as a fallback that still runs" \
        "host uids +fallback +shared: every sandbox maps to host uid $first.*rc=0" "$(echo $out)"

    # Every uid of the range claimed (by two other processes): refused, and said why; freed
    # when they end.
    export MCP_SANDBOX_ISOLATION_HOST_UID_COUNT=2
    start_holder "$hu_dir/a" "$SBX" run --timeout 20 -- /bin/sh -c 'echo up; sleep 4'
    start_holder "$hu_dir/b" "$SBX" run --timeout 20 -- /bin/sh -c 'echo up; sleep 4'
    out=$("$SBX" run -- /bin/true 2>&1; echo "rc=$?")
    expect "host uids: with every host uid claimed by live sandboxes, another is refused" \
        "all 2 host uids from $first .*in use.*rc=125" "$(echo $out)"
    stop_holders
    out=$("$SBX" run -- /bin/cat /proc/self/uid_map 2>/dev/null; echo "rc=$?")
    expect "host uids: (control) once those sandboxes end, their uids are claimed again" \
        "^ *65534 +($first|$((first + 1))) +1 rc=0$" "$(echo $out)"
    unset MCP_SANDBOX_ISOLATION_HOST_UID_COUNT
    # A claim is of the host uid itself, whatever range it was made from: processes configured
    # with ranges that overlap (a server, a run with its own setting) never share a uid. Here
    # first+1 and first+2 are held from the range that starts at first+1; the range from first
    # has only first left.
    export MCP_SANDBOX_ISOLATION_HOST_UID=$((first + 1)) MCP_SANDBOX_ISOLATION_HOST_UID_COUNT=2
    start_holder "$hu_dir/a" "$SBX" run --timeout 20 -- /bin/sh -c 'echo up; sleep 4'
    start_holder "$hu_dir/b" "$SBX" run --timeout 20 -- /bin/sh -c 'echo up; sleep 4'
    export MCP_SANDBOX_ISOLATION_HOST_UID=$first MCP_SANDBOX_ISOLATION_HOST_UID_COUNT=3
    out=$("$SBX" run -- /bin/cat /proc/self/uid_map 2>/dev/null; echo "rc=$?")
    expect "host uids: a range that overlaps another process's claims gets a uid none of them holds" \
        "^ *65534 +$first +1 rc=0$" "$(echo $out)"
    stop_holders
    unset MCP_SANDBOX_ISOLATION_HOST_UID MCP_SANDBOX_ISOLATION_HOST_UID_COUNT

    out=$("$SBX" doctor 2>&1; echo "rc=$?")
    expect "host uids: (control) doctor names the range" \
        "host uids +ok +$first-$((first + count - 1)), one per live sandbox.*rc=0" "$(echo $out)"
    # Where the claims cannot be kept (no writable /run; a lock file someone else planted), the
    # sandbox is refused rather than given a shared uid, and doctor says so. In a mount
    # namespace of the test's own, so that no other sandbox on this machine sees it.
    out=$(unshare -m --propagation private sh -c 'mount -t tmpfs -o ro sbx-hu /run &&
        "$0" run -- /bin/true 2>&1; echo "rc=$?"; "$0" doctor 2>&1; echo "rc=$?"' "$SBX")
    expect "host uids: with /run read-only, a sandbox is refused, naming the lock file and the way out" \
        "cannot open /run/mcp-sandbox.host-uids.lock.*host_uid_count = 1.*rc=125" "$(echo $out)"
    expect "host uids: with /run read-only, doctor says claims cannot be made and fails" \
        "host uids +missing +cannot claim one.*rc=1$" "$(echo $out)"
    out=$(unshare -m --propagation private sh -c 'mount -t tmpfs sbx-hu /run &&
        : > /run/mcp-sandbox.host-uids.lock && chown 65534 /run/mcp-sandbox.host-uids.lock &&
        "$0" run -- /bin/true 2>&1; echo "rc=$?"' "$SBX")
    expect "host uids: a lock file that is not root's alone is refused" \
        "host-uids.lock is not a regular file that only root can read and write.*rc=125" "$(echo $out)"
    # Root's, but readable by others: anyone could hold read locks on every uid.
    out=$(unshare -m --propagation private sh -c 'mount -t tmpfs sbx-hu /run &&
        : > /run/mcp-sandbox.host-uids.lock && chmod 644 /run/mcp-sandbox.host-uids.lock &&
        "$0" run -- /bin/true 2>&1; echo "rc=$?"' "$SBX")
    expect "host uids: a lock file that others may read is refused" \
        "host-uids.lock is not a regular file that only root can read and write.*rc=125" "$(echo $out)"
    out=$(unshare -m --propagation private sh -c 'mount -t tmpfs sbx-hu /run &&
        "$0" run -- /bin/true 2>/dev/null; echo "rc=$?"; stat -c "%U %a" /run/mcp-sandbox.host-uids.lock' "$SBX")
    expect "host uids: (control) in an empty /run the lock file is made, root's alone" \
        "^rc=0 root 600$" "$(echo $out)"
    # Root only in a user namespace of its own (a container) that does not map the range: the
    # sandbox is refused, naming the range and the way out, rather than failing at the id map.
    out=$("$PROBE" userns-narrow - "$SBX" run -- /bin/true 2>&1; echo "rc=$?")
    expect "host uids: root in a user namespace without the range: refused, naming it and the fix" \
        "host uids $first-$((first + count - 1)) .*are not all mapped in this process's user namespace.*host_uid_count = 1.*rc=125" "$(echo $out)"
    out=$("$PROBE" userns-narrow - "$SBX" doctor 2>&1; echo "rc=$?")
    expect "host uids: root in a user namespace without the range: doctor says so and fails" \
        "host uids +missing +cannot claim one.*not all mapped.*rc=1$" "$(echo $out)"
    out=$(MCP_SANDBOX_ISOLATION_HOST_UID=65534 MCP_SANDBOX_ISOLATION_HOST_UID_COUNT=1 \
        "$PROBE" userns-narrow - "$SBX" run -- /bin/cat /proc/self/uid_map 2>/dev/null; echo "rc=$?")
    expect "host uids: (control) there, one host uid it maps, shared, runs the sandbox" \
        "^ *65534 +65534 +1 rc=0$" "$(echo $out)"

    # A range that takes in someone's id: that uid would own the sandboxes' user namespaces
    # (and could enter them with every capability there). An account, a group, a user's
    # subordinate range (here in a mount namespace of the test's own, over /etc/subuid).
    daemon_uid=$(id -u daemon)
    out=$(MCP_SANDBOX_ISOLATION_HOST_UID=$daemon_uid MCP_SANDBOX_ISOLATION_HOST_UID_COUNT=1 \
        "$SBX" run -- /bin/true 2>&1; echo "rc=$?")
    expect "host uids: a range holding an account's uid is refused, naming it" \
        "host uids $daemon_uid-$daemon_uid .*take in user daemon \(uid $daemon_uid in /etc/passwd\), which would own.*rc=125" "$(echo $out)"
    out=$(MCP_SANDBOX_ISOLATION_HOST_UID=$daemon_uid MCP_SANDBOX_ISOLATION_HOST_UID_COUNT=1 \
        "$SBX" doctor 2>&1; echo "rc=$?")
    expect "host uids: and doctor says so and fails" \
        "host uids +missing +cannot claim one.*take in user daemon.*rc=1$" "$(echo $out)"
    staff_gid=$(getent group staff | cut -d: -f3)
    out=$(MCP_SANDBOX_ISOLATION_HOST_UID=$staff_gid MCP_SANDBOX_ISOLATION_HOST_UID_COUNT=1 \
        "$SBX" run -- /bin/true 2>&1; echo "rc=$?")
    expect "host uids: a range holding a group's gid is refused, naming it" \
        "take in group staff \(gid $staff_gid in /etc/group\).*rc=125" "$(echo $out)"
    printf 'alice:%s:65536\n' $((first + count - 10)) > "$hu_dir/subuid"
    out=$(unshare -m sh -c 'mount --make-rprivate / && mount --bind "$1" /etc/subuid && shift && exec "$@"' \
        sh "$hu_dir/subuid" "$SBX" run -- /bin/true 2>&1; echo "rc=$?")
    expect "host uids: a range that overlaps a user's subordinate ids is refused, naming them" \
        "take in alice's subordinate ids $((first + count - 10))-$((first + count - 10 + 65535)) in /etc/subuid.*rc=125" "$(echo $out)"
    printf 'alice:%s:65536\n' $((first + count)) > "$hu_dir/subuid"
    out=$(unshare -m sh -c 'mount --make-rprivate / && mount --bind "$1" /etc/subuid && shift && exec "$@"' \
        sh "$hu_dir/subuid" "$SBX" run -- /bin/true 2>&1; echo "rc=$?")
    # (Only the status: a sanitizer build warns on stderr.)
    expect "host uids: (control) a subordinate range just past it leaves the sandbox be" "rc=0$" "$(echo $out)"
else
    "$SBX" run -- /bin/cat /proc/self/uid_map > "$hu_dir/a" 2> "$hu_dir/a.err"
    expect "host uids: rootless, the sandbox maps to the caller's own uid" \
        "^$(id -u)$" "$(host_uid_of "$hu_dir/a")"
    out=$("$SBX" doctor 2>&1)
    expect "host uids: rootless, doctor says the caller's own uid is used" \
        "host uids +ok +rootless: the caller's own" "$out"
fi
rm -rf "$hu_dir"
