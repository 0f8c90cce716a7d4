#!/usr/bin/env bash
# Every cmocka unit-test binary, in TAP form, renumbered into one plan.
cd "$(dirname "$0")/../.."
. tests/lib.sh
BUILD=${1:-build}
rc=0
for t in "$BUILD"/tests/test_*; do
    [ -x "$t" ] || continue
    out=$(CMOCKA_MESSAGE_OUTPUT=TAP "$t" 2>&1) || rc=1
    tap_relay "$(basename "$t"): " <<< "$out"
done
echo "1..$TAP_N"
exit $rc
