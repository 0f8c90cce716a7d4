# After 200 sandboxes have come and gone, nothing is left: processes, mounts, cgroups, temp dirs.
# Processes are counted by a marker in their argv, so other suites running as the same uid on
# this machine (rootless runs share uid 65534) cannot skew the count.
# Put together inside the sandbox, so that run's own command line does not hold it.
tag="cleanup-$$-$RANDOM"
marker="mcp-sbx-$tag"
# "[m]..." matches the marker but not the grep that searches for it.
count_procs() { grep -ls -- "[m]${marker#m}" /proc/[0-9]*/cmdline 2>/dev/null | wc -l; }
count_mounts() { wc -l < /proc/self/mountinfo; }
# A server's parent group is mcp-sandbox.<pid>; one whose process is gone was left behind (other
# live servers on this machine keep theirs legitimately).
count_cgroups() {
    find /sys/fs/cgroup -maxdepth 5 -name 'mcp-sandbox.*' 2>/dev/null | while read -r d; do
        [ -d "/proc/${d##*.}" ] || echo "$d"
    done | wc -l
}
# Temp entries that appear and belong to us (other programs share /tmp: a compiler's temp file
# is not ours; as root the runs below get a private /tmp, so nothing else can appear there).
if [ "$(id -u)" = 0 ]; then
    tmpdirs=${TMPDIR:-}
    [ "$tmpdirs" = /tmp ] && tmpdirs=
else
    tmpdirs="/tmp ${TMPDIR:-/tmp}"
fi
list_tmp() {
    for d in $tmpdirs; do find "$d" -mindepth 1 -maxdepth 1 -user "$(id -u)"; done | sort -u
}
# Control: a marked process is counted while its sandbox runs.
"$SBX" run -- /bin/bash -c "(m=mcp-sbx; exec -a \$m-$tag sleep 5) & sleep 1" >/dev/null 2>&1 &
runner=$!
seen=0
for _ in $(seq 1 40); do [ "$(count_procs)" -gt 0 ] && { seen=1; break; }; sleep 0.05; done
wait "$runner"
[ "$seen" = 1 ] && tap_ok "cleanup: (control) a sandbox's process is counted while it runs" || tap_fail "cleanup: (control) a sandbox's process is counted while it runs"
p0=$(count_procs); m0=$(count_mounts); c0=$(count_cgroups); list_tmp > "${TMPDIR:-/tmp}/.sbx-tmp0.$$"
run_200() {
    local fails=0
    for i in $(seq 1 200); do
        "$SBX" run -- /bin/bash -c "(m=mcp-sbx; exec -a \$m-$tag sleep 5) & echo x > /workspace/f" >/dev/null 2>&1 || fails=$((fails + 1))
    done
    echo "$fails"
}
if [ "$(id -u)" = 0 ]; then
    # In a mount namespace of our own whose /tmp starts empty: the mounts and temp entries
    # counted there are ours alone, whatever other programs on this machine do meanwhile.
    out=$(SBX=$SBX tag=$tag unshare -m --propagation private bash -c "
        mount -t tmpfs -o mode=1777 sbx-cleanup-tmp /tmp || exit 1
        $(declare -f run_200 count_mounts)
        m0=\$(count_mounts)
        fails=\$(run_200)
        sleep 0.5
        echo \$fails \$m0 \$(count_mounts)
        find /tmp -mindepth 1 -maxdepth 1")
    read -r fails m0 m1 <<< "$(echo "$out" | head -1)"
    private_tmp=$(echo "$out" | tail -n +2)
else
    fails=$(run_200)
    private_tmp=
    sleep 0.5
    m1=$(count_mounts)
fi
p1=$(count_procs); c1=$(count_cgroups)
new_tmp=$( (list_tmp | comm -13 "${TMPDIR:-/tmp}/.sbx-tmp0.$$" - | grep -v "/.sbx-tmp0.$$\$"; echo "$private_tmp") | grep .)
rm -f "${TMPDIR:-/tmp}/.sbx-tmp0.$$"
[ "$fails" = 0 ] && tap_ok "cleanup: 200 sandboxes ran" || tap_fail "cleanup: 200 sandboxes ran ($fails failed)"
[ "$p0" = 0 ] && [ "$p1" = 0 ] && tap_ok "cleanup: no sandbox process left ($p0 -> $p1)" || tap_fail "cleanup: processes left ($p0 -> $p1)"
[ "$m1" = "$m0" ] && tap_ok "cleanup: no mount left ($m0 -> $m1)" || tap_fail "cleanup: mounts left ($m0 -> $m1)"
[ "$c1" -le "$c0" ] && tap_ok "cleanup: no cgroup left ($c0 -> $c1)" || tap_fail "cleanup: cgroups left ($c0 -> $c1)"
[ -z "$new_tmp" ] && tap_ok "cleanup: no temporary file or directory left" || tap_fail "cleanup: temp entries left: $(echo $new_tmp | head -c 200)"
# A server killed before its cleanup (SIGKILL) leaves empty groups; the next server removes
# them, and never a group of a live pid or one that still holds a process.
if [ "$(id -u)" = 0 ]; then
    fifo=$(mktemp -u); mkfifo "$fifo"
    "$SBX" serve --stdio < "$fifo" > /dev/null 2>&1 &
    victim=$!
    exec 9> "$fifo"
    bases=
    for _ in $(seq 1 100); do
        bases=$(find /sys/fs/cgroup -maxdepth 6 -type d -name "mcp-sandbox.$victim" 2>/dev/null | xargs -r -n1 dirname | sort -u)
        [ -n "$bases" ] && break
        sleep 0.05
    done
    kill -KILL "$victim"; wait "$victim" 2>/dev/null
    exec 9>&-; rm -f "$fifo"
    sleep 0.3 # the killed server's sandboxes die with their pid namespaces' init
    sleep 60 & live=$!
    sleep 60 & busy=$!
    sh -c 'exit 0' & dead=$!; wait "$dead"
    first=$(echo "$bases" | head -1)
    for b in $bases; do
        mkdir -p "$b/mcp-sandbox.$live/sb-live" "$b/mcp-sandbox.$dead/sb-busy"
        [ "$b" = "$first" ] && echo "$busy" > "$b/mcp-sandbox.$dead/sb-busy/cgroup.procs"
    done
    left_before=$(for b in $bases; do [ -d "$b/mcp-sandbox.$victim" ] && echo "$b"; done | wc -l)
    echo | "$SBX" serve --stdio > /dev/null 2>&1
    sweeper_rc=$?
    victim_left=$(for b in $bases; do [ -d "$b/mcp-sandbox.$victim" ] && echo "$b"; done | wc -l)
    live_kept=$(for b in $bases; do [ -d "$b/mcp-sandbox.$live/sb-live" ] && echo "$b"; done | wc -l)
    [ -n "$bases" ] && [ "$left_before" -gt 0 ] && tap_ok "cleanup: (control) a SIGKILLed server leaves its groups ($left_before)" || tap_fail "cleanup: (control) a SIGKILLed server leaves its groups (found '$bases', $left_before)"
    [ "$sweeper_rc" = 0 ] && tap_ok "cleanup: the sweeping server ends cleanly at stdin's end" || tap_fail "cleanup: the sweeping server exited $sweeper_rc at stdin's end"
    [ "$victim_left" = 0 ] && tap_ok "cleanup: the next server removes a killed server's groups" || tap_fail "cleanup: $victim_left of a killed server's groups are left"
    [ "$live_kept" = "$(echo "$bases" | wc -l)" ] && tap_ok "cleanup: the groups of a live pid are kept" || tap_fail "cleanup: groups of a live pid were removed ($live_kept kept)"
    [ -d "$first/mcp-sandbox.$dead/sb-busy" ] && grep -qx "$busy" "$first/mcp-sandbox.$dead/sb-busy/cgroup.procs" && tap_ok "cleanup: a group that still holds a process is kept" || tap_fail "cleanup: a group holding a process was removed"
    echo "$busy" > "$first/cgroup.procs"
    kill "$live" "$busy"; wait "$live" "$busy" 2>/dev/null
    for b in $bases; do rmdir "$b/mcp-sandbox.$live/sb-live" "$b/mcp-sandbox.$live" "$b/mcp-sandbox.$dead/sb-busy" "$b/mcp-sandbox.$dead" 2>/dev/null; done
fi
