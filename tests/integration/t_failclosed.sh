# Fail closed, tested on a real kernel view where a layer is missing: the probe takes the layer
# away from mcp-sandbox itself (a user namespace whose max_user_namespaces is 0; a seccomp filter
# under which the landlock_* calls or seccomp(2) answer as on a kernel without them). Each layer
# is refused with a message naming it and how to fix it, and runs only where that is allowed:
# the layer present, or (seccomp, Landlock) isolation.allow_degraded set, then reported.
DEGRADED_ENV=MCP_SANDBOX_ISOLATION_ALLOW_DEGRADED=true

# rc_is NAME WANT GOT
rc_is() { [ "$3" = "$2" ] && tap_ok "$1" || tap_fail "$1 (exit $3, wanted $2)"; }

# User namespaces: not degradable, so refused even when degraded mode is allowed.
out=$("$PROBE" userns 0 "$SBX" run -- /bin/echo ran 2>&1); rc=$?
rc_is "fail-closed: no user namespaces: run refused (exit 125)" 125 "$rc"
expect "fail-closed: no user namespaces: the refusal names the layer and the sysctl" \
    "sandbox refused: cannot create user/.*namespaces.*max_user_namespaces > 0" "$out"
out=$(env $DEGRADED_ENV "$PROBE" userns 0 "$SBX" run -- /bin/echo ran 2>&1); rc=$?
rc_is "fail-closed: no user namespaces: still refused with allow_degraded (exit 125)" 125 "$rc"
out=$("$PROBE" userns - "$SBX" run -- /bin/echo ran 2>&1); rc=$?
rc_is "fail-closed: (control) the same nested user namespace with its limit left: run works" 0 "$rc"
expect "fail-closed: (control) the command ran in the nested user namespace" "^ran$" "$out"
out=$("$PROBE" userns 0 "$SBX" doctor 2>&1); rc=$?
rc_is "fail-closed: no user namespaces: doctor exits 1" 1 "$rc"
expect "fail-closed: no user namespaces: doctor says missing, with the sysctl" \
    "user namespaces +missing .*max_user_namespaces" "$out"
out=$(env $DEGRADED_ENV "$PROBE" userns 0 "$SBX" doctor 2>&1); rc=$?
rc_is "fail-closed: no user namespaces: doctor exits 1 even with allow_degraded" 1 "$rc"
out=$("$PROBE" userns - "$SBX" doctor 2>&1); rc=$?
rc_is "fail-closed: (control) doctor in the nested user namespace exits 0" 0 "$rc"
expect "fail-closed: (control) doctor there reports user namespaces ok" "user namespaces +ok" "$out"

# Landlock and seccomp: refused by default; with allow_degraded the sandbox runs and every
# result says what is missing.
for layer in landlock seccomp; do
    case $layer in
        landlock) name=Landlock doctor_row="Landlock" ;;
        seccomp) name=seccomp doctor_row="seccomp-bpf" ;;
    esac
    out=$("$PROBE" without "$layer" "$SBX" run -- /bin/echo ran 2>&1); rc=$?
    rc_is "fail-closed: no $name: run refused (exit 125)" 125 "$rc"
    expect "fail-closed: no $name: the refusal names the layer, the fix and allow_degraded" \
        "sandbox refused: $name is not available \(.+\); set isolation.allow_degraded = true" "$out"
    printf '%s\n' "$out" | grep -q "^ran$" && tap_fail "fail-closed: no $name: the command did not run" \
        || tap_ok "fail-closed: no $name: the command did not run"
    # stdout is the JSON report, stderr the DEGRADED line.
    json=$(env $DEGRADED_ENV "$PROBE" without "$layer" "$SBX" run --json -- /bin/echo ran 2>&1); rc=$?
    rc_is "fail-closed: no $name, allow_degraded: run works" 0 "$rc"
    expect "fail-closed: no $name, allow_degraded: --json reports degraded [\"$layer\"]" \
        "\"degraded\":\[\"$layer\"\]" "$json"
    expect "fail-closed: no $name, allow_degraded: the command ran" '"stdout":"ran\\n"' "$json"
    expect "fail-closed: no $name, allow_degraded: stderr says what is missing" \
        "DEGRADED: running without $layer" "$json"
    json=$("$SBX" run --json -- /bin/echo ran 2>&1)
    expect "fail-closed: (control) with $name present nothing is degraded" '"degraded":\[\]' "$json"
    out=$("$PROBE" without "$layer" "$SBX" doctor 2>&1); rc=$?
    rc_is "fail-closed: no $name: doctor exits 1" 1 "$rc"
    expect "fail-closed: no $name: doctor says missing" "$doctor_row +missing" "$out"
    out=$(env $DEGRADED_ENV "$PROBE" without "$layer" "$SBX" doctor 2>&1); rc=$?
    rc_is "fail-closed: no $name, allow_degraded: doctor exits 0" 0 "$rc"
    expect "fail-closed: no $name, allow_degraded: doctor still says missing" \
        "$doctor_row +missing" "$out"
    expect "fail-closed: no $name, allow_degraded: doctor says the profile runs degraded" \
        "can run DEGRADED, without $doctor_row \(isolation.allow_degraded\)" "$out"
done

# The degraded report is the truth: without the seccomp layer a row the filter denies is not
# denied inside (keyctl answers from the kernel, not EPERM); with it, it is.
out=$(env $DEGRADED_ENV "$PROBE" without seccomp /bin/sh -c '
    "$1" run -- /bin/sh -c "cat > /workspace/p && chmod 700 /workspace/p && exec /workspace/p sys-keyctl" < "$2"' \
    sh "$SBX" "$PROBE" 2>&1)
expect "fail-closed: no seccomp, allow_degraded: keyctl really is unfiltered inside" \
    "sys-keyctl errno=(95 EOPNOTSUPP|22 EINVAL|38 ENOSYS)" "$out"
out=$(sbx_probe -- sys-keyctl)
expect "fail-closed: (control) with seccomp, keyctl is denied inside" "sys-keyctl errno=1 EPERM" "$out"

# A covered /proc (a container's masked paths): the namespaces are made, but the kernel refuses
# the sandbox a fresh proc. The refusal points at doctor, and doctor tells the same truth (it
# said ok and exited 0 while every sandbox was refused). Root only, and listed only as root
# (a strict run counts a skip as a failure): the cover is a mount made in a mount namespace of
# this test's own.
if is_root; then
    # The kernel gives a fresh proc where any proc mount of the namespace is whole: one left
    # elsewhere on this machine (a chroot's) is taken away here, as a container has none.
    covered() {
        unshare -m --propagation private sh -c '
            for m in $(awk "\$9 == \"proc\" && \$5 != \"/proc\" {print \$5}" /proc/self/mountinfo); do
                umount -l "$m" || exit 1
            done
            mount -t tmpfs none /proc/sys && exec "$@"' sh "$@"
    }
    out=$(covered "$SBX" run -- /bin/echo ran 2>&1); rc=$?
    rc_is "fail-closed: covered /proc: run refused (exit 125)" 125 "$rc"
    expect "fail-closed: covered /proc: the refusal names the step and points at doctor" \
        "sandbox refused: mount namespace \(building the root\) failed: .*mcp-sandbox doctor" "$out"
    out=$(covered "$SBX" doctor 2>&1); rc=$?
    rc_is "fail-closed: covered /proc: doctor exits 1" 1 "$rc"
    expect "fail-closed: covered /proc: doctor says the mount namespace is missing, with a hint" \
        "mount namespace +missing +mounting a fresh /proc in it: .* -- .*unmask /proc" "$out"
    out=$("$SBX" doctor 2>&1); rc=$?
    rc_is "fail-closed: (control) /proc uncovered: doctor exits 0" 0 "$rc"
    expect "fail-closed: (control) /proc uncovered: the mount namespace row is ok" \
        "mount namespace +ok" "$out"
fi
