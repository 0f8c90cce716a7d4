# Filesystem view: host files absent, /usr read-only, /workspace writable up to its caps.
out=$(sbx_probe -- exists /etc/shadow); expect "files: /etc/shadow is absent" "errno=2 ENOENT" "$out"
out=$(sbx_probe -- exists /etc/passwd); expect "files: generated /etc/passwd is present" "exists ok" "$out"
for p in /root /home /var /srv /work /var/lib/mcp-sandbox /tmp/.X11-unix; do
    out=$(sbx_probe -- exists "$p"); expect "files: host $p is absent" "errno=2 ENOENT" "$out"
done
out=$(sbx_probe -- read /usr/bin/python3); expect "files: /usr is readable" "read ok" "$out"
out=$(sbx_probe -- write /usr/probe-test); expect "files: /usr is read-only" "errno=30 EROFS" "$out"
# A host mount below a bound directory comes along (MS_REC) and must be read-only too: made
# here in a private mount namespace, world-writable, so only the mount flag can refuse (Landlock
# alone would answer EACCES).
if is_root; then
    out=$(unshare -m --propagation private /bin/sh -c '
        mount -t tmpfs -o mode=1777,size=1m tmpfs /usr/local || exit 1
        touch /usr/local/host-side && echo "host write ok"
        "$1" run -- /bin/sh -c "cat > /workspace/probe && chmod 700 /workspace/probe && exec /workspace/probe write /usr/local/x" < "$2"
        "$1" run -- /bin/grep " /usr/local " /proc/self/mountinfo' sh "$SBX" "$PROBE" 2>&1)
    expect "files: (control) a host mount under /usr is writable outside" "^host write ok$" "$out"
    expect "files: a host mount under /usr is read-only inside (EROFS)" "errno=30 EROFS" "$out"
    expect "files: a host mount under /usr is nosuid and nodev inside" " /usr/local ro,nosuid,nodev" "$out"
fi
out=$(sbx_probe -- write /etc/passwd); expect "files: /etc is read-only" "errno=(30 EROFS|13 EACCES)" "$out"
out=$(sbx_probe -- write /workspace/x); expect "files: /workspace is writable" "write ok" "$out"
out=$(sbx_probe -- write /tmp/x); expect "files: /tmp is writable" "write ok" "$out"
out=$(sbx_probe --workspace-size 8M -- fill /workspace); expect "files: /workspace stops at its size cap (ENOSPC)" "errno=28 ENOSPC" "$out"
out=$(sbx_probe -- inodes /workspace); expect "files: /workspace stops at its inode cap (ENOSPC)" "errno=28 ENOSPC" "$out"
# /tmp and /dev/shm have caps of their own (below the memory limit, so ENOSPC and not the OOM
# killer stops a fill).
out=$(sbx_probe -- fill /tmp); expect "files: /tmp stops at its size cap (ENOSPC)" "errno=28 ENOSPC" "$out"
out=$(sbx_probe -- inodes /tmp); expect "files: /tmp stops at its inode cap (ENOSPC)" "errno=28 ENOSPC" "$out"
out=$(sbx_probe -- write /dev/shm/x); expect "files: /dev/shm is writable" "write ok" "$out"
out=$(sbx_probe -- fill /dev/shm); expect "files: /dev/shm stops at its size cap (ENOSPC)" "errno=28 ENOSPC" "$out"
# A file another sandbox left in its workspace is invisible here.
"$SBX" run -- /bin/sh -c 'echo secret > /workspace/other-sandbox-file; sleep 3' >/dev/null 2>&1 &
other=$!
sleep 0.5
out=$(sbx_probe -- exists /workspace/other-sandbox-file); expect "files: another sandbox's workspace is invisible" "errno=2 ENOENT" "$out"
wait $other
# setuid: no new privileges, no capabilities, /usr mounted nosuid.
out=$(sbx_probe -- privs)
expect "privs: no_new_privs is set" "NoNewPrivs:[[:space:]]+1" "$out"
for set in CapInh CapPrm CapEff CapBnd CapAmb; do
    expect "privs: capability set $set is empty" "$set:[[:space:]]+0000000000000000" "$out"
done
expect "privs: seccomp filter mode" "Seccomp:[[:space:]]+2" "$out"
expect "privs: /usr is nosuid, so a setuid binary gains nothing" "usr_nosuid 1" "$out"
out=$(sbx_probe -- privs | grep '^Uid'); expect "privs: runs as uid 65534" "Uid:[[:space:]]+65534" "$out"
host=$("$PROBE" privs); expect "privs: (control) outside the sandbox /usr is not nosuid" "usr_nosuid 0" "$host"
if is_root; then
    expect "privs: (control) outside the sandbox root's effective set is not empty" "CapEff:[[:space:]]+0*[1-9a-f]" "$host"
fi
out=$("$SBX" run -- /usr/bin/su -c true root 2>&1); expect "privs: setuid su fails inside" "(failure|must be|not permitted|denied|Authentication|abort)" "$out"
# /proc: the sandbox's own, host-global knobs covered.
out=$(sbx_probe -- read /proc/1/environ); expect "proc: /proc/1/environ is unreadable" "errno=13 EACCES" "$out"
# Init holds the caller's memory (a fork of the server, or `run`'s own). It turns non-dumpable
# before the workload exists, so not even an fd opened at the workload's first instant reaches
# it; rootless (same uid) an earlier build let about 1 run in 15 keep one open.
opened=0
for _ in $(seq 20); do
    out=$("$SBX" run -- /bin/sh -c 'exec 3</proc/1/mem && echo opened' 2>/dev/null)
    [ "$out" = opened ] && opened=$((opened + 1))
done
[ "$opened" = 0 ] && tap_ok "proc: /proc/1/mem is refused from the workload's start (20 runs)" \
    || tap_fail "proc: /proc/1/mem opened in $opened of 20 runs"
out=$("$SBX" run -- /bin/sh -c 'exec 3</proc/self/mem && echo opened' 2>&1); expect "proc: (control) the workload's own /proc/self/mem opens" "^opened$" "$out"
out=$(sbx_probe -- read /proc/self/status); expect "proc: /proc/self is readable" "read ok" "$out"
out=$(sbx_probe -- write /proc/sys/kernel/hostname); expect "proc: /proc/sys writes fail" "errno=(30 EROFS|13 EACCES)" "$out"
# Directories under /proc that reach host-global state are covered by an empty read-only tmpfs.
for d in acpi scsi irq bus fs pressure; do
    if [ -n "$(ls -A /proc/$d 2>/dev/null)" ]; then
        out=$("$SBX" run -- /bin/sh -c "ls -A /proc/$d | wc -l" 2>&1); expect "proc: /proc/$d is covered (empty inside; not on the host)" "^0$" "$out"
        out=$(sbx_probe -- write /proc/$d/probe-test); expect "proc: the cover over /proc/$d is read-only" "errno=30 EROFS" "$out"
    fi
done
# Files under /proc that reach host-global state are covered with /dev/null where the kernel has them.
# /proc/locks lists the host-uid claims of live sandboxes: one is held while the check runs.
"$SBX" run --timeout 20 -- /bin/sleep 4 > /dev/null 2>&1 &
locks_holder=$!
for _ in $(seq 1 100); do grep -q OFDLCK /proc/locks && break; sleep 0.05; done
out=$(wc -c < /proc/cmdline); expect "proc: (control) the host's /proc/cmdline is not empty" "^[1-9][0-9]*$" "$out"
for f in sysrq-trigger kcore keys timer_list kallsyms interrupts softirqs locks diskstats vmstat zoneinfo buddyinfo cmdline; do
    if [ -e /proc/$f ]; then
        out=$("$SBX" run -- /bin/sh -c "wc -c < /proc/$f" 2>&1); expect "proc: /proc/$f is covered (reads empty)" "^0$" "$out"
    else
        out=$(sbx_probe -- exists /proc/$f); expect "proc: /proc/$f absent here as on the host" "errno=2 ENOENT" "$out"
    fi
done
kill $locks_holder 2>/dev/null
wait $locks_holder 2>/dev/null
out=$("$SBX" run -- /bin/cat /proc/self/mountinfo 2>&1)
if printf '%s\n' "$out" | grep -qE ' /(work|root|home|var|srv)( |/)'; then tap_fail "proc: mountinfo shows only the sandbox"; else expect "proc: mountinfo shows only the sandbox" " /workspace " "$out"; fi
# Ordinary work still runs.
out=$("$SBX" run -- /usr/bin/python3 -I -c 'import numpy as np, matplotlib.pyplot as plt; plt.plot(np.sin(np.linspace(0,6,50))); plt.savefig("/workspace/s.png"); import os; print("mean", np.mean([1,2,3,4,5]), os.path.getsize("/workspace/s.png") > 1000)' 2>&1)
expect "work: python with numpy and matplotlib" "mean 3.0 True" "$out"
out=$("$SBX" run -- /bin/bash -c 'seq 1 1000 | grep 7 | wc -l; (echo sub; ls /usr | head -1) | cat' 2>&1)
expect "work: bash pipes and subshells" "^271" "$out"
out=$("$SBX" run -- /usr/bin/python3 -I -c 'import threading, subprocess; r=[]; t=[threading.Thread(target=lambda: r.append(1)) for _ in range(8)]; [x.start() for x in t]; [x.join() for x in t]; print(len(r), subprocess.run(["/bin/echo","child"],capture_output=True,text=True).stdout.strip())' 2>&1)
expect "work: threads and subprocesses" "^8 child" "$out"
out=$("$SBX" run -- /bin/hostname 2>&1); expect "uts: hostname is sandbox" "^sandbox$" "$out"
