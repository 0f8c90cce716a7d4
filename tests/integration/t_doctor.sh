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
