# mcp-sandbox run: a bare command name is looked up in the sandbox's PATH, not the caller's.
out=$("$SBX" run -- python3 -I -c 'print(6 * 7)' 2>&1); expect "run: a bare command name is found in the sandbox's PATH" "^42$" "$out"
out=$("$SBX" run -- sh -c 'command -v python3' 2>&1); expect "run: (control) the sandbox's PATH has python3 in /usr/bin" "^/usr/bin/python3$" "$out"
out=$("$SBX" run -- no-such-command-here 2>&1; echo "rc=$?")
expect "run: an unknown command name is refused with the reason" "cannot run no-such-command-here: No such file or directory" "$out"
expect "run: an unknown command name exits 127" "rc=127" "$out"
hostbin=$(mktemp -d)
printf '#!/bin/sh\necho host-only\n' > "$hostbin/host-only-cmd"
chmod 755 "$hostbin" "$hostbin/host-only-cmd"
out=$(PATH="$hostbin:$PATH" host-only-cmd 2>&1); expect "run: (control) the caller's PATH finds host-only-cmd" "^host-only$" "$out"
out=$(PATH="$hostbin:$PATH" "$SBX" run -- host-only-cmd 2>&1); expect "run: the caller's PATH is not searched inside" "cannot run host-only-cmd: No such file or directory" "$out"
rm -rf "$hostbin"
out=$("$SBX" run -- /etc/passwd 2>&1; echo "rc=$?"); expect "run: a file that is not executable is refused (EACCES)" "cannot run /etc/passwd: Permission denied" "$out"
expect "run: found but not runnable exits 126, as in a shell" "rc=126" "$out"
out=$("$SBX" run -- /usr 2>&1; echo "rc=$?"); expect "run: a directory as the command exits 126, saying so" "cannot run /usr: Is a directory rc=126" "$(echo $out)"
out=$("$SBX" run -- "" 2>&1; echo "rc=$?"); expect "run: an empty command is a usage error" "empty string.*rc=2|rc=2" "$(echo $out)"
# Mistakes before the command say what they are.
out=$("$SBX" --log-levelx debug run -- true 2>&1; echo "rc=$?")
expect "cli: a misspelt global flag is named, not only its value taken for a command" "unknown command 'debug' \(after '--log-levelx', which is not a flag.*rc=2" "$(echo $out)"
out=$("$SBX" --log-level=debug bogus 2>&1; echo "rc=$?")
expect "cli: (control) after a flag that exists, just the unknown command" "unknown command 'bogus' Try.*rc=2" "$(echo $out)"
out=$("$SBX" --log-file / run -- true 2>&1; echo "rc=$?")
expect "cli: a log file that cannot be opened says why" "cannot open log file /: Is a directory rc=1" "$(echo $out)"

# Programs reopen their stdio by name; the pipes are the sandbox user's to reopen.
out=$("$SBX" run -- sh -c 'echo to-stdout > /dev/stdout; echo to-stderr > /dev/stderr' 2>&1)
expect "run: a command may write to /dev/stdout" "to-stdout" "$out"
expect "run: and to /dev/stderr" "to-stderr" "$out"
out=$(echo fed-in | "$SBX" run -- cat /dev/stdin 2>&1); expect "run: and read /dev/stdin" "^fed-in$" "$out"

# A killed run leaves its (empty) groups, named after its pid; a later run given that pid
# takes them over instead of failing.
if is_root; then
    "$SBX" run -- sleep 2 >/dev/null 2>&1 &
    probe=$!
    sleep 0.5
    parents=$(find /sys/fs/cgroup -maxdepth 8 -type d -name "mcp-sandbox.$probe" -exec dirname {} \; 2>/dev/null | sort -u | tr '\n' ' ')
    wait "$probe"
    if [ -n "$parents" ]; then
        out=$(sh -c 'for d in $1; do mkdir "$d/mcp-sandbox.$$"; done; exec "$2" run -- echo took-over' sh "$parents" "$SBX" 2>&1)
        expect "run: a leftover group named after its pid is taken over" "^took-over$" "$out"
    else
        tap_skip "run: a leftover group named after its pid is taken over" "no per-run group seen"
    fi
fi

# run's own flags stand before "--"; without it, a --log-file among CMD's words was taken.
rm -f "${TMPDIR:-/tmp}/sbx-stolen.$$"
out=$("$SBX" run echo hi --log-file "${TMPDIR:-/tmp}/sbx-stolen.$$" 2>&1; echo "rc=$?")
expect "run: a command without -- is a usage error" "put -- before the command" "$out"
[ -e "${TMPDIR:-/tmp}/sbx-stolen.$$" ] && tap_fail "run: and no flag among its words was taken" || tap_ok "run: and no flag among its words was taken"
out=$("$SBX" run -- echo hi --log-file x 2>&1); expect "run: (control) after --, the words are CMD's" "^hi --log-file x$" "$out"
# --json keeps what is UTF-8 of the output; only the bytes that are not become '?'.
out=$("$SBX" run --json -- sh -c 'printf "h\303\251llo \377\n"' | python3 -c 'import json,sys; print(json.load(sys.stdin)["stdout"], end="")')
expect "run: --json keeps the characters around a bad byte" "^héllo \?$" "$out"
# --json keeps 1 MiB of each stream (head and tail, and a marker), unless configured: the
# configuration's own default (64 KiB) is for tool results.
cap_of() { python3 -c 'import json, sys; r = json.load(sys.stdin); print(len(r["stdout"]), r["stdout_bytes"], r["stdout_truncated"])'; }
out=$("$SBX" run --json -- head -c 2000000 /dev/zero 2>/dev/null | cap_of)
expect "run: --json keeps 1 MiB of a 2 MB stdout by default ($out)" "^10486[0-9][0-9] 2000000 True$" "$out"
out=$(MCP_SANDBOX_ISOLATION_OUTPUT_CAP_BYTES=64K "$SBX" run --json -- head -c 2000000 /dev/zero 2>/dev/null | cap_of)
expect "run: (control) isolation.output_cap_bytes set keeps that much ($out)" "^655[0-9][0-9] 2000000 True$" "$out"
# --json promises one report: also when the command never starts (it printed nothing before).
out=$("$SBX" run --json -- /no/such/command 2>/dev/null | python3 -c 'import json,sys; r=json.load(sys.stdin); print(r["exit_code"], r["error"])'; echo "rc=${PIPESTATUS[0]}")
expect "run: --json reports a command that cannot start" "^127 cannot run /no/such/command: No such file or directory rc=127$" "$(echo $out)"

# Limits given on the command line have the bounds the config file gives them: none of them
# can make a limit disappear.
for bad in "--cpus nan" "--cpus 0.005" "--cpus 1e9" "--cpus 0x1" "--cpus 1e0" "--memory= -1" "--memory 2048G" "--workspace-size 17179869183G" "--timeout +5" "--pids 0x10"; do
    out=$("$SBX" run ${bad%% *} "${bad#* }" -- true 2>&1; echo "rc=$?")
    expect "run: $bad is a usage error" "^rc=2$" "$out"
done
out=$("$SBX" run --cpus 0.01 --memory 16M -- true 2>&1; echo "rc=$?"); expect "run: (control) --cpus 0.01 --memory 16M run" "^rc=0$" "$out"

# The command's output goes to our reader as it takes it: a reader that leaves ends the
# command as in a shell pipeline; one that stalls does not stop the timeout; a closed stdin is
# an empty one.
out=$(timeout 10 bash -c '"$0" run -- yes | head -1; echo "rc=${PIPESTATUS[0]}"' "$SBX" 2>&1)
expect "run: a reader that leaves ends the command (yes | head -1)" "^y$" "$out"
expect "run: which died of SIGPIPE, and run says so (141)" "^rc=141$" "$out"
fifo=${TMPDIR:-/tmp}/sbx-stall.$$
mkfifo "$fifo"
"$SBX" run --timeout 1 -- sh -c 'while :; do echo xxxxxxxx; done' > "$fifo" 2>/dev/null &
runner=$!
exec 7<"$fifo" # a reader that never reads
sleep 3
left=$(ps -o pid= --ppid "$runner" | wc -l)
expect "run: a reader that stalls does not hold off the timeout: the sandbox is gone at 3 s" "^0$" "$left"
exec 7<&-
wait "$runner"
expect "run: and run exits 124 once the reader leaves" "^rc=124$" "rc=$?"
rm -f "$fifo"
out=$(timeout 10 "$SBX" run --timeout 5 -- cat 0<&- 2>&1; echo "rc=$?")
expect "run: started with stdin closed, the command reads EOF" "^rc=0$" "$out"

# Init shares run's memory (and so its errno) while run drains the output: every byte of a
# command that prints and exits at once arrives, run after run.
short=0
for i in $(seq 1 20); do
    n=$("$SBX" run -- sh -c 'head -c 300000 /dev/zero; head -c 100000 /dev/zero >&2' 2>/dev/null | wc -c)
    [ "$n" = 300000 ] || short=$((short + 1))
done
expect "run: 20 runs that print 300 kB and exit deliver all of it" "^0 short$" "$short short"

# Signals to `run` go to the command, and `run` still cleans up after it: no cgroup of its pid
# is left. A second signal kills everything in the sandbox.
groups_of() { find /sys/fs/cgroup -maxdepth 7 -name "mcp-sandbox.$1*" 2>/dev/null | wc -l; }
# wait_ready FILE: until the command inside has printed "ready" (5 s at most).
wait_ready() { for _ in $(seq 1 100); do grep -qs ready "$1" && return 0; sleep 0.05; done; return 1; }
sig_out=${TMPDIR:-/tmp}/sbx-sig.$$
with_int=(env --default-signal=INT)
"$SBX" run -- /bin/sh -c 'trap "echo got-term; exit 7" TERM; echo ready; while :; do sleep 0.1; done' > "$sig_out" 2>&1 &
runner=$!
wait_ready "$sig_out"
if is_root; then
    n=$(groups_of "$runner")
    [ "$n" -gt 0 ] && tap_ok "run: (control) its cgroups exist while the command runs ($n)" || tap_fail "run: (control) its cgroups exist while the command runs"
fi
kill -TERM "$runner"; wait "$runner"; rc=$?
expect "run: SIGTERM reaches the command, which handles it" "got-term" "$(cat "$sig_out")"
expect "run: and run exits with the command's code" "^rc=7$" "rc=$rc"
expect "run: a signalled run leaves no cgroup behind" "^0$" "$(groups_of "$runner")"
# A script's background job starts with SIGINT ignored, and run then leaves it so (as any
# program would): these jobs get it back, as a shell's foreground job has it.
"${with_int[@]}" "$SBX" run -- /bin/sh -c 'trap "" TERM INT; echo ready; while :; do sleep 0.1; done' > "$sig_out" 2>&1 &
runner=$!
wait_ready "$sig_out"
kill -TERM "$runner"; sleep 0.3
kill -0 "$runner" 2>/dev/null && tap_ok "run: (control) a command that ignores SIGTERM keeps running" || tap_fail "run: (control) a command that ignores SIGTERM keeps running"
kill -INT "$runner"; wait "$runner"; rc=$?
expect "run: a second signal kills everything (exit 137)" "^rc=137$" "rc=$rc"
expect "run: and says so on stderr" "signalled twice: everything in the sandbox was killed" "$(cat "$sig_out")"
expect "run: and leaves no cgroup behind" "^0$" "$(groups_of "$runner")"
"${with_int[@]}" "$SBX" run -- /bin/sleep 30 > "$sig_out" 2>&1 &
runner=$!
sleep 0.5
kill -INT "$runner"; wait "$runner"; rc=$?
expect "run: Ctrl-C (SIGINT) ends a command that does not handle it: exit 130" "^rc=130$" "rc=$rc"
# (stdout only: under ASan init's stack draws a warning on stderr)
"$SBX" run -- /bin/sh -c 'echo ready; sleep 1; echo finished' > "$sig_out" 2>/dev/null &
runner=$!
wait_ready "$sig_out"
kill -INT "$runner"; wait "$runner"; rc=$?
expect "run: (control) as a script's background job, SIGINT stays ignored" "^ready finished rc=0$" "$(tr '\n' ' ' < "$sig_out")rc=$rc"
# Under nohup (SIGHUP ignored when run started) a hangup is not passed on: the command goes on,
# as it would under nohup by itself. The control, without nohup, passes it (exit 129).
nohup "$SBX" run -- /bin/sh -c 'echo ready; sleep 1; echo survived' > "$sig_out" 2>/dev/null &
runner=$!
wait_ready "$sig_out"
kill -HUP "$runner"; wait "$runner"; rc=$?
expect "run: under nohup a SIGHUP does not reach the command" "survived rc=0" "$(grep -v nohup "$sig_out" | tr '\n' ' ')rc=$rc"
"$SBX" run -- /bin/sh -c 'echo ready; sleep 1; echo survived' > "$sig_out" 2>/dev/null &
runner=$!
wait_ready "$sig_out"
kill -HUP "$runner"; wait "$runner"; rc=$?
expect "run: (control) without nohup it does (exit 129)" "^ready rc=129$" "$(tr '\n' ' ' < "$sig_out")rc=$rc"
# SIGUSR1 and the other signals whose default ends a process go to the command too, and run
# cleans up after it: they used to end run itself, leaving the sandbox's cgroups behind. They
# are the command's to handle, as often as it likes: only a second stop signal kills.
"$SBX" run -- /bin/sh -c 'trap "echo got-usr1" USR1; echo ready; while :; do sleep 0.1; done' > "$sig_out" 2>&1 &
runner=$!
wait_ready "$sig_out"
kill -USR1 "$runner"; sleep 0.3; kill -USR1 "$runner"; sleep 0.3
kill -0 "$runner" 2>/dev/null && alive=alive || alive=gone
kill -TERM "$runner"; wait "$runner"
expect "run: SIGUSR1 reaches the command, twice, and run goes on" "^got-usr1 got-usr1 alive$" "$(grep got "$sig_out" | tr '\n' ' ')$alive"
"$SBX" run -- /bin/sleep 30 > "$sig_out" 2>&1 &
runner=$!
sleep 0.5
kill -USR1 "$runner"; wait "$runner"; rc=$?
expect "run: SIGUSR1 ends a command that does not handle it (exit 138)" "^rc=138$" "rc=$rc"
expect "run: and leaves no cgroup behind" "^0$" "$(groups_of "$runner")"
"$SBX" run -- /bin/sleep 30 > "$sig_out" 2>&1 &
runner=$!
sleep 0.5
kill -s RTMIN "$runner"; wait "$runner"; rc=$?
expect "run: a real-time signal goes to the command too, and no cgroup is left ($rc)" "^rc=$((128 + $(kill -l RTMIN))) 0$" "rc=$rc $(groups_of "$runner")"
# Once the command has ended, what is left of its output waits for the reader, but neither past
# a signal nor, after a timeout, past a second's grace: a reader that never reads cannot hold
# run. (It used to stay until the reader left, deaf to signals.)
t0=$(date +%s%N)
"$SBX" run -- /bin/sh -c 'head -c 300000 /dev/zero' > >(sleep 6) 2>"$sig_out" &
runner=$!
sleep 1; kill -TERM "$runner"; wait "$runner"
expect "run: a signal ends run while its output waits for a reader that does not read" "^fast dropped$" \
    "$([ $((($(date +%s%N) - t0) / 1000000)) -lt 4000 ] && echo fast || echo slow) $(grep -q 'output the reader had not taken was dropped' "$sig_out" && echo dropped)"
# The same after the command ended by itself: run exits 128+N, so the caller can tell.
"$SBX" run -- /bin/sh -c 'head -c 100000 /dev/zero; exit 0' > >(sleep 6) 2>"$sig_out" &
runner=$!
sleep 1; kill -TERM "$runner"; wait "$runner"; rc=$?
expect "run: told to go once the command ended, with output still waiting: exit 143, said" \
    "^rc=143 a signal came after the command ended$" "rc=$rc $(grep -o 'a signal came after the command ended' "$sig_out")"
# But a command that handles the stop signal and goes on is not cut short: its reader, which
# keeps reading, gets all of it (the grace starts when the command ends).
count=${TMPDIR:-/tmp}/sbx-count.$$
slow_reader=(python3 -c 'import sys, time
n = 0
while True:
    d = sys.stdin.buffer.read1(4096)
    if not d:
        break
    n += len(d)
    time.sleep(0.002)
print(n)')
"$SBX" run -- /bin/sh -c 'trap "sleep 1.5; head -c 300000 /dev/zero; exit 3" TERM; echo ready >&2; while :; do sleep 0.1; done' \
    > >("${slow_reader[@]}" > "$count") 2>"$sig_out" &
runner=$!
wait_ready "$sig_out"
kill -TERM "$runner"; wait "$runner"; rc=$?
for _ in $(seq 1 50); do [ -s "$count" ] && break; sleep 0.1; done
expect "run: a command that handles SIGTERM and writes on: all of it reaches a reader that reads" \
    "^rc=3 300000$" "rc=$rc $(cat "$count")"
rm -f "$count"
t0=$(date +%s%N)
( "$SBX" run --timeout 1 -- yes 2>/dev/null; echo "rc=$? ms=$((($(date +%s%N) - t0) / 1000000))" > "$sig_out" ) | sleep 6
read -r rc ms < "$sig_out"
expect "run: after a timeout run exits within a second's grace whatever the reader does ($rc $ms)" "^rc=124 fast$" \
    "$rc $([ "${ms#ms=}" -lt 3500 ] && echo fast || echo slow)"
if is_root; then
    # A run killed outright (SIGKILL) cannot clean up: the next run removes what it left.
    "$SBX" run -- /bin/sleep 30 > "$sig_out" 2>&1 &
    runner=$!
    sleep 0.5
    kill -KILL "$runner"; wait "$runner" 2>/dev/null
    # Its sandbox dies with it; only then are the groups empty, and removable.
    for _ in $(seq 1 50); do
        [ -z "$(find /sys/fs/cgroup -maxdepth 8 -path "*mcp-sandbox.$runner*" -name cgroup.procs -exec cat {} + 2>/dev/null)" ] && break
        sleep 0.1
    done
    left=$(groups_of "$runner")
    "$SBX" run -- /bin/true
    expect "run: the groups a SIGKILLed run left ($left) are removed by the next run" "^0$" "$(groups_of "$runner")"
fi

# Ctrl-Z (SIGTSTP) stops everything in the sandbox and then run; a continue resumes them all.
# The kernel stops a process on SIGTSTP only where a shell could continue it: run is started in
# a process group of its own under this shell, as a shell starts a job (this script may itself
# run in an orphaned group, as under setsid, where nothing would ever stop).
as_job=(python3 -c 'import os, sys; os.setpgid(0, 0); os.execvp(sys.argv[1], sys.argv[1:])')
# state_of PID: R, S, T (stopped), ... from /proc; pid_of_cmdline ARGS: the process run as that.
state_of() { sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1; }
pid_of_cmdline() {
    for f in /proc/[0-9]*/cmdline; do
        [ "$(tr '\0' ' ' < "$f" 2>/dev/null)" = "$1 " ] && { basename "${f%/cmdline}"; return; }
    done
}
# wait_state PID STATE: until PID is in STATE (5 s at most).
wait_state() { for _ in $(seq 1 100); do [ "$(state_of "$1")" = "$2" ] && return 0; sleep 0.05; done; return 1; }
"${as_job[@]}" "$SBX" run -- /bin/sh -c 'sleep 4343 & echo ready; exec sleep 4344' > "$sig_out" 2>&1 &
runner=$!
wait_ready "$sig_out"
bg=$(pid_of_cmdline "sleep 4343") fg=$(pid_of_cmdline "sleep 4344")
states() { echo "run $(state_of "$runner"), command $(state_of "$fg"), its child $(state_of "$bg")"; }
expect "run: (control) before Ctrl-Z everything runs ($(states))" "^run S, command S, its child S$" "$(states)"
kill -TSTP "$runner"
wait_state "$runner" T; wait_state "$bg" T
expect "run: Ctrl-Z stops run, the command and its child ($(states))" "^run T, command T, its child T$" "$(states)"
kill -CONT "$runner"
wait_state "$fg" S; wait_state "$bg" S
expect "run: a continue resumes them all ($(states))" "^run S, command S, its child S$" "$(states)"
kill -TERM "$runner"; wait "$runner"
# In an orphaned process group (a session of its own) the kernel discards the stop, and run
# stops nothing either: no shell could ever continue them.
setsid "$SBX" run -- /bin/sh -c 'sleep 4345 & echo ready; exec sleep 4346' > "$sig_out" 2>&1 &
runner=$!
wait_ready "$sig_out"
bg=$(pid_of_cmdline "sleep 4345") fg=$(pid_of_cmdline "sleep 4346")
kill -TSTP "$runner"; sleep 0.5
expect "run: (control) orphaned, Ctrl-Z stops nothing ($(states))" "^run S, command S, its child S$" "$(states)"
kill -TERM "$runner"; wait "$runner"
# The time stopped does not count against the timeout: a 4 s command under --timeout 6, stopped
# for 4 s, still finishes; the control, never stopped, under --timeout 1, does not. (With a 2 s
# command, a loaded machine under ASan once saw it finish before the Ctrl-Z came.)
"${as_job[@]}" "$SBX" run --timeout 6 -- /bin/sh -c 'echo ready; sleep 4; echo finished' > "$sig_out" 2>&1 &
runner=$!
wait_ready "$sig_out"
kill -TSTP "$runner"; wait_state "$runner" T; stopped=$(state_of "$runner"); sleep 4; kill -CONT "$runner"
wait "$runner"; rc=$?
expect "run: time stopped by Ctrl-Z is not counted against --timeout" "finished rc=0 stopped=T" \
    "$(echo $(cat "$sig_out")) rc=$rc stopped=$stopped"
out=$("$SBX" run --timeout 1 -- /bin/sh -c 'sleep 2; echo finished' 2>&1; echo "rc=$?")
expect "run: (control) the same command past its timeout is killed (exit 124)" "rc=124" "$out"
rm -f "$sig_out"
