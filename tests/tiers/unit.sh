#!/usr/bin/env bash
# Every cmocka unit-test binary, in TAP form. Each binary's tests become top-level lines.
cd "$(dirname "$0")/../.."
BUILD=${1:-build}
rc=0
n=0
for t in "$BUILD"/tests/test_*; do
    [ -x "$t" ] || continue
    # cmocka numbers from 1 in each binary; renumber so the aggregate reads as one plan.
    out=$(CMOCKA_MESSAGE_OUTPUT=TAP "$t" 2>&1) || rc=1
    while IFS= read -r line; do
        case "$line" in
            "ok "*|"not ok "*)
                n=$((n + 1))
                name=$(echo "$line" | sed -E 's/^(not )?ok [0-9]+ ?-? ?//')
                prefix=${line%%ok *}ok
                echo "$prefix $n - $(basename "$t"): $name" ;;
            1..*) ;;
            *) echo "# $line" ;;
        esac
    done <<< "$out"
done
echo "1..$n"
exit $rc
