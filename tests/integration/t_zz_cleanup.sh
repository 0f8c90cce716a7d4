# After 200 sandboxes have come and gone, nothing is left: processes, mounts, cgroups, temp dirs.
count_procs() { ps -e --no-headers -o uid= | awk '$1==65534' | wc -l; }
count_mounts() { wc -l < /proc/self/mountinfo; }
count_cgroups() { find /sys/fs/cgroup -maxdepth 4 -name 'mcp-sandbox.*' 2>/dev/null | wc -l; }
count_tmp() { ls -a /tmp | wc -l; }
p0=$(count_procs); m0=$(count_mounts); c0=$(count_cgroups); t0=$(count_tmp)
fails=0
for i in $(seq 1 200); do
    "$SBX" run -- /bin/sh -c 'sleep 5 & echo x > /workspace/f' >/dev/null 2>&1 || fails=$((fails + 1))
done
sleep 0.5
p1=$(count_procs); m1=$(count_mounts); c1=$(count_cgroups); t1=$(count_tmp)
[ "$fails" = 0 ] && tap_ok "cleanup: 200 sandboxes ran" || tap_fail "cleanup: 200 sandboxes ran ($fails failed)"
# Rootless, the runner's own processes are uid 65534 too: compare counts, not absolutes.
[ "$p1" -le "$p0" ] && tap_ok "cleanup: no sandbox process left ($p0 -> $p1)" || tap_fail "cleanup: processes left ($p0 -> $p1)"
[ "$m1" = "$m0" ] && tap_ok "cleanup: no mount left ($m0 -> $m1)" || tap_fail "cleanup: mounts left ($m0 -> $m1)"
[ "$c1" = "$c0" ] && tap_ok "cleanup: no cgroup left ($c0 -> $c1)" || tap_fail "cleanup: cgroups left ($c0 -> $c1)"
[ "$t1" = "$t0" ] && tap_ok "cleanup: no temporary directory left ($t0 -> $t1)" || tap_fail "cleanup: temp entries left ($t0 -> $t1)"
