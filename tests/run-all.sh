#!/usr/bin/env bash
# Runs every test tier and ends with "N passed, N failed, N skipped". Each tier prints TAP;
# only top-level lines (column 0) are counted, so tiers keep their tests flat.
# Under CI (CI=true) or SBX_TEST_STRICT=1 a skip counts as a failure: this machine kind
# has every kernel feature, so a skip there means something is broken.
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=${BUILD:-build}
STRICT=0
if [ "${CI:-}" = "true" ] || [ "${SBX_TEST_STRICT:-0}" = "1" ]; then STRICT=1; fi
export SBX_TEST_STRICT=$STRICT
LOGDIR=$ROOT/$BUILD/test-logs
mkdir -p "$LOGDIR"
PASS=0 FAIL=0 SKIP=0
FAILED_NAMES=()

# count_tap TIER LOGFILE EXITCODE
count_tap() {
    local tier=$1 log=$2 rc=$3 p f s
    p=$(grep -cE '^ok [0-9]+' "$log" | head -1)
    s=$(grep -cE '^ok [0-9]+.*# [Ss][Kk][Ii][Pp]' "$log" | head -1)
    f=$(grep -cE '^not ok [0-9]+' "$log" | head -1)
    p=$((p - s))
    if [ "$STRICT" = 1 ] && [ "$s" -gt 0 ]; then
        grep -E '^ok [0-9]+.*# [Ss][Kk][Ii][Pp]' "$log" | sed "s/^/[$tier] strict: skip counted as failure: /"
        f=$((f + s)); s=0
    fi
    # A tier that crashed or printed no TAP still fails.
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
        f=1
        echo "[$tier] exited $rc without a failing test line"
    fi
    if [ $((p + f + s)) -eq 0 ]; then
        f=1
        echo "[$tier] ran no test"
    fi
    PASS=$((PASS + p)); FAIL=$((FAIL + f)); SKIP=$((SKIP + s))
    [ "$f" -gt 0 ] && FAILED_NAMES+=("$tier")
    echo "=== tier $tier: $p passed, $f failed, $s skipped"
}

# tier NAME CMD...: a tier whose script is not in the tree yet is named, not counted.
tier() {
    local name=$1; shift
    if [ ! -x "$1" ]; then
        echo "=== tier $name: not present in this tree ($1)"
        return
    fi
    local log=$LOGDIR/$name.log
    echo "=== tier $name"
    "$@" 2>&1 | tee "$log"
    local rc=${PIPESTATUS[0]}
    count_tap "$name" "$log" "$rc"
}

only=${TEST_TIERS:-all}
want() { [ "$only" = all ] || [[ ",$only," == *",$1,"* ]]; }

want format && tier format tests/tiers/format.sh
want unit && tier unit tests/tiers/unit.sh "$BUILD"
want integration && tier integration tests/integration/run.sh "$BUILD"
want rootless && tier rootless tests/tiers/rootless.sh "$BUILD"
want cgroup2-vm && tier cgroup2-vm tests/tiers/cgroup2-vm.sh "$BUILD"
want systemd-vm && tier systemd-vm tests/tiers/systemd-vm.sh "$BUILD"
want e2e && tier e2e tests/tiers/e2e.sh "$BUILD"
want conformance && tier conformance tests/tiers/conformance.sh "$BUILD"
want fuzz && tier fuzz tests/tiers/fuzz.sh
want sanitizers && tier sanitizers tests/tiers/sanitizers.sh
want bench && tier bench tests/tiers/bench-smoke.sh

[ ${#FAILED_NAMES[@]} -gt 0 ] && echo "failing tiers: ${FAILED_NAMES[*]}"
echo "$PASS passed, $FAIL failed, $SKIP skipped"
[ "$FAIL" -eq 0 ]
