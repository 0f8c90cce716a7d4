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
out=$("$SBX" run -- /etc/passwd 2>&1); expect "run: a file that is not executable is refused (EACCES)" "cannot run /etc/passwd: Permission denied" "$out"

# Init shares run's memory (and so its errno) while run drains the output: every byte of a
# command that prints and exits at once arrives, run after run.
short=0
for i in $(seq 1 20); do
    n=$("$SBX" run -- sh -c 'head -c 300000 /dev/zero; head -c 100000 /dev/zero >&2' 2>/dev/null | wc -c)
    [ "$n" = 300000 ] || short=$((short + 1))
done
expect "run: 20 runs that print 300 kB and exit deliver all of it" "^0 short$" "$short short"
