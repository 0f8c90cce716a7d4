# Signals to host pids find no target; the sandbox has its own pid namespace.
sleep 30 &
victim=$!
out=$(sbx_probe -- kill "$victim"); expect "signals: a host pid is not reachable" "errno=3 ESRCH" "$out"
kill -0 "$victim" && tap_ok "signals: (control) the host process is alive and signalable from the host" || tap_fail "signals: host process alive"
kill "$victim"; wait "$victim" 2>/dev/null
out=$("$SBX" run -- /bin/sh -c 'echo $$' 2>&1); expect "signals: the sandbox's shell is pid 2 under its init" "^2$" "$out"
# Signals ignored by the caller (SIG_IGN survives exec) are back at their default inside; run
# ignores SIGPIPE itself. The control shows the caller's own process does ignore them.
host=$(/bin/sh -c "trap '' HUP; exec grep SigIgn /proc/self/status")
expect "signals: (control) the caller's shell ignores SIGHUP" "SigIgn:[[:space:]]+[0-9a-f]*[13579bdf]$" "$host"
out=$(/bin/sh -c "trap '' HUP; exec \"\$1\" run -- /bin/grep SigIgn /proc/self/status" sh "$SBX" 2>&1)
expect "signals: nothing the caller ignores stays ignored in the sandbox" "SigIgn:[[:space:]]+0+$" "$out"
# Signals 32 and 33 are glibc's own, so neither a shell nor sigaction(3) can ignore or reset
# them; a parent that ignored them with the raw call must not pass that on either.
host=$("$PROBE" ignoring 1,33 /bin/grep SigIgn /proc/self/status)
expect "signals: (control) the caller ignores SIGHUP and signal 33" "SigIgn:[[:space:]]+0*1[0-9a-f]{7}[13579bdf]$" "$host"
out=$("$PROBE" ignoring 1,33 "$SBX" run -- /bin/grep SigIgn /proc/self/status 2>&1)
expect "signals: signal 33 ignored by the caller is not ignored in the sandbox" "SigIgn:[[:space:]]+0+$" "$out"
