# doctor tells the truth about this machine: every namespace, seccomp and Landlock are there;
# cgroup limits are writable as root and a reported fallback rootless; --json agrees.
out=$("$SBX" doctor 2>&1); rc=$?
[ "$rc" = 0 ] && tap_ok "doctor: the default profile can run here (exit 0)" || tap_fail "doctor: exit $rc"
expect "doctor: Landlock reported with its ABI" "Landlock +ok +ABI [0-9]+" "$out"
expect "doctor: seccomp reported with its table" "seccomp-bpf +ok +[0-9]+ denied calls" "$out"
if is_root; then
    expect "doctor: cgroup limits writable as root" "cgroup limits +ok" "$out"
    # Root's own unshare says nothing of an ordinary user's: that is tried as nobody, and
    # what doctor says is checked against the same try made here with util-linux.
    if setpriv --reuid=65534 --regid=65534 --clear-groups unshare -U true 2>/dev/null; then
        nobody_userns="works too"
    else
        nobody_userns="[A-Z][a-z].*"
    fi
    expect "doctor: user namespaces, as root and for an ordinary user" \
        "user namespaces +ok +creation works \(as root; for an ordinary user: $nobody_userns\)" "$out"
else
    expect "doctor: user namespaces for this unprivileged user" "user namespaces +ok +unprivileged creation works" "$out"
    expect "doctor: rootless cgroup fallback reported with a hint" "cgroup limits +fallback .*Delegate=yes" "$out"
fi
json=$("$SBX" doctor --json 2>&1)
printf '%s' "$json" | python3 -c '
import json, sys
d = json.load(sys.stdin)
names = {l["layer"]: l for l in d["layers"]}
assert d["default_profile_runs"] is True
for n in ["user namespaces", "pid namespace", "mount namespace", "network namespace", "ipc namespace", "uts namespace", "cgroup namespace", "seccomp-bpf", "Landlock", "pidfd"]:
    assert names[n]["verdict"] == "ok", n
' && tap_ok "doctor --json: every required layer ok" || tap_fail "doctor --json: every required layer ok"

# The sandboxes' interpreter, as run_code's driver sees it: here with pip and matplotlib; then
# (root, in a mount namespace of the test's own) with them hidden, and with no interpreter.
expect "doctor: python3 reported with its version" "python3 +ok +3\.[0-9]+\.[0-9]+ \(/usr/bin/python3\)" "$out"
expect "doctor: pip there, install_packages can install" "pip +ok +install_packages can install" "$out"
expect "doctor: matplotlib there, plots come back" "matplotlib +ok +plots come back as images" "$out"
if is_root; then
    hidden=$(unshare -m sh -c 'mount --make-rprivate / && mount -t tmpfs none /usr/lib/python3/dist-packages &&
        exec "$1" doctor' sh "$SBX" 2>&1); rc=$?
    [ "$rc" = 0 ] && tap_ok "doctor: without pip and matplotlib the default profile still runs" ||
        tap_fail "doctor: without pip and matplotlib, exit $rc"
    expect "doctor: pip missing, with the package to install" \
        "pip +missing +not importable -- apt-get install python3-pip: install_packages needs it" "$hidden"
    expect "doctor: matplotlib missing, with the package to install" \
        "matplotlib +missing .*apt-get install python3-matplotlib" "$hidden"
    gone=$(unshare -m sh -c 'mount --make-rprivate / && mount --bind /dev/null /usr/bin/python3 &&
        exec "$1" doctor' sh "$SBX" 2>&1); rc=$?
    [ "$rc" = 1 ] && tap_ok "doctor: without an interpreter the default profile cannot run (exit 1)" ||
        tap_fail "doctor: without an interpreter, exit $rc"
    expect "doctor: python3 missing, with the package to install" \
        "python3 +missing +/usr/bin/python3 cannot run -- apt-get install python3" "$gone"
fi
