#!/usr/bin/env bash
# Rebuilds everything with ASan + UBSan (clang) and re-runs the unit, integration and e2e tiers
# against that build. Leaks fail the run (LeakSanitizer is part of ASan here).
cd "$(dirname "$0")/../.."
SBUILD=build-asan
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:detect_stack_use_after_return=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
if ! make --no-print-directory -s BUILD=$SBUILD CC=clang SAN=address,undefined WERROR=-Werror all >"$SBUILD.log" 2>&1; then
    mkdir -p $SBUILD && mv -f "$SBUILD.log" $SBUILD/build.log 2>/dev/null
    tail -30 $SBUILD/build.log
    echo "not ok 1 - asan+ubsan build"
    echo "1..1"
    exit 1
fi
mkdir -p $SBUILD && mv -f "$SBUILD.log" $SBUILD/build.log
echo "ok 1 - asan+ubsan build"
. tests/lib.sh
TAP_N=1
rc=0
for sub in "unit tests/tiers/unit.sh" "integration tests/integration/run.sh" "e2e tests/tiers/e2e.sh"; do
    set -- $sub
    name=$1 script=$2
    [ -x "$script" ] || continue
    out=$(SANITIZED=1 "$script" $SBUILD 2>&1) || rc=1
    tap_relay "asan $name: " <<< "$out"
done
echo "1..$TAP_N"
exit $rc
